"""What the C loops of the hot path call back on the task that runs them.

``StreamTask.process`` hands a batch that does not run compiled to ``_native/per_record.run_records``
(``csrc/kstreams/_native/per_record.pyx``), which runs each record through the source's children in
C and calls back into Python only for what it cannot decide itself: a record its deserializers
reject, a timestamp a user's extractor gives, a negative timestamp, and stream-time punctuations as
records pass their due time. It reads and writes the task's stream time; on the processor context
(``per_record.ContextRouting``, which ``ProcessorContextImpl`` extends) it reads ``next_stream_due``
and sets ``node`` and ``record_context``. Compiled segments need only the context
(``compiled.steps.SegmentTask``), and the compiler the task's id, config and graph
(``compiled.compiler.CompilingTask``).

``RecordLoopTask`` declares exactly those callbacks, so a change to them is a type error at the
task, the stub (``per_record.pyi``) and the loop's other callers at once, not a crash in C.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

if TYPE_CHECKING:
    from kstreams.cluster.port import TopicPartition
    from kstreams.processor import Record

__all__ = ["RecordLoopTask"]


class RecordLoopTask(Protocol):
    """What ``per_record.run_records`` calls back on its task (``StreamTask`` is one)."""

    # The largest timestamp processed so far; the loop reads it once and sets it as records pass it.
    stream_time: int

    def _on_deserialization_error(
        self,
        tp: TopicPartition,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Any,
        exc: Exception,
    ) -> None:
        """A record's key or value did not deserialize: ask the deserialization handler, which
        skips the record (return) or fails the task (raise)."""

    def _extract_timestamp(
        self,
        extractor: Callable[[Any, int], int],
        record: Record[Any, Any],
        partition_time: int,
        tp: TopicPartition,
        offset: int,
    ) -> int:
        """The record's timestamp by the source's extractor; a negative one skips the record."""

    def _reject_negative_timestamp(self, tp: TopicPartition, offset: int, timestamp: int) -> NoReturn:
        """A record without an extractor has a negative timestamp: fail the task."""

    def _punctuate_stream_time(self, stream_time: int) -> bool:
        """Run the stream-time punctuations due at ``stream_time`` (it reached the context's
        ``next_stream_due``); True if any ran."""
