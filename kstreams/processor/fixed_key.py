"""Key-preserving processors: FixedKeyProcessor, FixedKeyRecord and FixedKeyProcessorContext.

A ``FixedKeyProcessor`` (what ``KStream.process_values`` runs) sees each record as a
``FixedKeyRecord``: it may change the value, timestamp and headers but has no way to change the key
(there is no ``with_key``), and its context forwards only ``FixedKeyRecord``s. That is the
guarantee that lets the DSL keep the stream's partitioning: the result of ``process_values`` never
needs a repartition, unlike the result of ``process``.

``FixedKeyProcessorAdapter`` runs a FixedKeyProcessor as an ordinary node of a topology. Like every
processor, one instance exists per task and only the thread holding the task calls it.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, Generic, TypeVar

# A C type, made per record and hop like Record (see its module).
from kstreams._native.record import FixedKeyRecord
from kstreams.processor.api import (
    Cancellable,
    Processor,
    ProcessorContext,
    PunctuationType,
    Punctuator,
    Record,
    RecordMetadata,
    TaskId,
    To,
)
from kstreams.processor.delegating_context import DelegatingContext

__all__ = [
    "FixedKeyProcessor",
    "FixedKeyProcessorAdapter",
    "FixedKeyProcessorContext",
    "FixedKeyProcessorSupplierAdapter",
    "FixedKeyRecord",
]

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")
VIn = TypeVar("VIn")
VOut = TypeVar("VOut")


class FixedKeyProcessorContext(abc.ABC, Generic[K, VOut]):
    """What a FixedKeyProcessor sees of its task: a ``ProcessorContext`` whose ``forward`` takes
    only ``FixedKeyRecord``s, so the key cannot change on the way out."""

    @abc.abstractmethod
    def forward(self, record: FixedKeyRecord[K, VOut], child_name: str | To | None = None) -> None:
        """Send a record to every child, or only to the named one (a name or ``To.child(name)``)."""

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
    def get_state_store(self, name: str) -> Any: ...

    @abc.abstractmethod
    def schedule(
        self, interval: timedelta | int, punctuation_type: PunctuationType, callback: Punctuator
    ) -> Cancellable: ...

    @abc.abstractmethod
    def commit(self) -> None: ...

    @abc.abstractmethod
    def record_metadata(self) -> RecordMetadata | None: ...

    @abc.abstractmethod
    def current_stream_time_ms(self) -> int: ...

    @abc.abstractmethod
    def current_system_time_ms(self) -> int: ...


class FixedKeyProcessor(abc.ABC, Generic[K, VIn, VOut]):
    """A processor that keeps each record's key. Subclass it and implement ``process``."""

    def init(self, context: FixedKeyProcessorContext[K, VOut]) -> None:
        """Called once before the first record; keep the context to forward and to reach stores."""

    @abc.abstractmethod
    def process(self, record: FixedKeyRecord[K, VIn]) -> None: ...

    def close(self) -> None:
        """Called once when the task closes; release what init acquired."""


class _FixedKeyContext(DelegatingContext, FixedKeyProcessorContext[Any, Any]):
    """The task's ProcessorContext seen through the fixed-key interface."""

    def forward(self, record: FixedKeyRecord[Any, Any], child_name: str | To | None = None) -> None:
        if not isinstance(record, FixedKeyRecord):
            raise TypeError(
                f"A FixedKeyProcessor forwards FixedKeyRecords, got {record!r}: derive the output from "
                "the input record (record.with_value(...)), which keeps its key. To change keys, use "
                "process() instead of process_values()."
            )
        self._context.forward(record.to_record(), child_name)

    # Beyond the shared view: the fixed-key interface has no record position of its own, so it
    # passes on the task context's (ProcessorContext derives its from record_metadata()).
    @property
    def topic(self) -> str | None:
        return self._context.topic

    @property
    def partition(self) -> int | None:
        return self._context.partition

    @property
    def offset(self) -> int | None:
        return self._context.offset


class FixedKeyProcessorAdapter(Processor[Any, Any, Any, Any]):
    """Runs a FixedKeyProcessor as a node: hands it FixedKeyRecords and a fixed-key context."""

    def __init__(self, processor: FixedKeyProcessor[Any, Any, Any]) -> None:
        if not isinstance(processor, FixedKeyProcessor):
            raise TypeError(
                f"process_values() needs a supplier of FixedKeyProcessors, but it returned {processor!r}: "
                "subclass kstreams.processor.FixedKeyProcessor (or use process() for a Processor)."
            )
        self.processor = processor

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.processor.init(_FixedKeyContext(context))

    def process(self, record: Record[Any, Any]) -> None:
        self.processor.process(FixedKeyRecord(record.key, record.value, record.timestamp, record.headers))

    def close(self) -> None:
        self.processor.close()


class FixedKeyProcessorSupplierAdapter:
    """A processor supplier made of a FixedKeyProcessor supplier; it passes on the stores the
    supplier declares (``stores()``, Kafka's ConnectedStoreProvider)."""

    kind = "process_values"

    def __init__(self, supplier: Callable[[], FixedKeyProcessor[Any, Any, Any]]) -> None:
        if isinstance(supplier, FixedKeyProcessor) or not callable(supplier):
            raise TypeError(
                "process_values() takes a supplier of FixedKeyProcessors (the FixedKeyProcessor "
                f"subclass itself, or a callable returning a new one per task), got {supplier!r}."
            )
        self.supplier = supplier

    def stores(self) -> Any:
        connected = getattr(self.supplier, "stores", None)
        if callable(connected) and not isinstance(self.supplier, type):
            return connected()
        return ()

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return FixedKeyProcessorAdapter(self.supplier())
