"""The Processor API's core: Processor, ProcessorContext, Record, TaskId, To and punctuation.

A ``Processor`` receives every record of its task through ``process``; it emits records downstream
with ``context.forward``. One processor instance exists per task and is only ever called by the
stream thread that holds the task's lock, so a processor needs no locking of its own.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, TypeVar

# A C type, since every processor hop makes one (see its module).
from kstreams._native.record import Record

__all__ = [
    "Cancellable",
    "Headers",
    "Processor",
    "ProcessorContext",
    "PunctuationType",
    "Punctuator",
    "Record",
    "RecordMetadata",
    "TaskId",
    "To",
]

K = TypeVar("K")
V = TypeVar("V")
KOut = TypeVar("KOut")
VOut = TypeVar("VOut")

Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True, order=True, slots=True)
class TaskId:
    """A task: one partition of one subtopology, written ``<subtopology>_<partition>``."""

    subtopology: int
    partition: int

    def __str__(self) -> str:
        return f"{self.subtopology}_{self.partition}"

    @staticmethod
    def parse(text: str) -> TaskId:
        try:
            subtopology, partition = text.split("_")
            return TaskId(int(subtopology), int(partition))
        except ValueError:
            raise ValueError(f"Task id {text!r} is not of the form '<subtopology>_<partition>'.") from None


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where the record being processed came from."""

    topic: str
    partition: int
    offset: int


class PunctuationType(enum.Enum):
    """What time a punctuation follows: the task's stream time, or the wall clock."""

    STREAM_TIME = "STREAM_TIME"
    WALL_CLOCK_TIME = "WALL_CLOCK_TIME"


Punctuator = Callable[[int], None]


class Cancellable(abc.ABC):
    """A handle on a scheduled punctuation."""

    @abc.abstractmethod
    def cancel(self) -> None: ...


@dataclass(frozen=True, slots=True)
class To:
    """Where ``context.forward`` sends a record (Kafka's ``To``): one child processor by name, or
    every child (``To.all()``), optionally with a new timestamp. A plain child name works as well:
    ``forward(record, "child")`` is ``forward(record, To.child("child"))``."""

    child_name: str | None = None
    timestamp: int | None = None

    @staticmethod
    def child(child_name: str) -> To:
        if not isinstance(child_name, str) or not child_name:
            raise ValueError(f"To.child() needs the name of a child processor, got {child_name!r}.")
        return To(child_name)

    @staticmethod
    def all() -> To:
        return To()

    def with_timestamp(self, timestamp: int) -> To:
        """Forward with this timestamp instead of the record's (ms, not negative)."""
        if not isinstance(timestamp, int) or timestamp < 0:
            raise ValueError(f"To.with_timestamp() needs a non-negative int of ms, got {timestamp!r}.")
        return To(self.child_name, timestamp)

    def apply(self, record: Record[K, V]) -> tuple[Record[K, V], str | None]:
        """The record to forward (with this timestamp, if set) and the child to send it to."""
        if self.timestamp is not None:
            record = record.with_timestamp(self.timestamp)
        return record, self.child_name


class ProcessorContext(abc.ABC, Generic[KOut, VOut]):
    """What a processor can see of, and do to, the task that runs it."""

    @property
    @abc.abstractmethod
    def application_id(self) -> str: ...

    @property
    @abc.abstractmethod
    def task_id(self) -> TaskId: ...

    @property
    @abc.abstractmethod
    def app_configs(self) -> Mapping[str, Any]: ...

    @abc.abstractmethod
    def forward(self, record: Record[KOut, VOut], child_name: str | To | None = None) -> None:
        """Send a record to every child processor, or only to the named one (a name or
        ``To.child(name)``; ``To`` may also set the forwarded record's timestamp)."""

    @abc.abstractmethod
    def get_state_store(self, name: str) -> Any:
        """The store connected to this processor under that name (TopologyException if not connected)."""

    @abc.abstractmethod
    def schedule(
        self, interval: timedelta | int, punctuation_type: PunctuationType, callback: Punctuator
    ) -> Cancellable:
        """Call ``callback(timestamp_ms)`` every interval (ms, or a timedelta) of stream or wall time."""

    @abc.abstractmethod
    def commit(self) -> None:
        """Ask for a commit of all tasks as soon as possible."""

    @abc.abstractmethod
    def record_metadata(self) -> RecordMetadata | None:
        """Topic, partition and offset of the current input record (None inside a punctuation)."""

    @property
    def topic(self) -> str | None:
        metadata = self.record_metadata()
        return metadata.topic if metadata else None

    @property
    def partition(self) -> int | None:
        metadata = self.record_metadata()
        return metadata.partition if metadata else None

    @property
    def offset(self) -> int | None:
        metadata = self.record_metadata()
        return metadata.offset if metadata else None

    @abc.abstractmethod
    def current_stream_time_ms(self) -> int:
        """The task's stream time: the largest record timestamp it has seen (-1 before any)."""

    @abc.abstractmethod
    def current_system_time_ms(self) -> int: ...


class Processor(abc.ABC, Generic[K, V, KOut, VOut]):
    """A node of a topology. Subclass it and implement ``process``."""

    def init(self, context: ProcessorContext[KOut, VOut]) -> None:
        """Called once before the first record; keep the context to forward and to reach stores."""

    @abc.abstractmethod
    def process(self, record: Record[K, V]) -> None: ...

    def close(self) -> None:
        """Called once when the task closes; release what init acquired."""
