"""RecordContext: where the record being processed came from, and its timestamp (Kafka's
``ProcessorRecordContext``).

A task sets one on its processor context for each batch (topic and partition) and moves it along
the batch (offset and timestamp of each record) rather than allocating one per record, which would
cost an allocation per record on the hot path. ``ProcessorContext.forward`` sets the timestamp of
the record it forwards and restores it afterwards, so a store's changelog write carries the
timestamp of the record that caused it. A punctuation runs with its own context: no topic, and the
punctuation's time as timestamp.

Like its task, a record context is used by one thread at a time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kstreams._native.per_record import RecordPosition
from kstreams.processor import RecordMetadata

if TYPE_CHECKING:
    from kstreams._native.record_batch import RecordBatch

__all__ = ["RecordContext"]


class RecordContext(RecordPosition):
    """The position (topic None outside record processing) and timestamp of the current record;
    ``source`` is the input batch the record came from (its raw bytes, for exception handlers).
    The fields are C fields (``RecordPosition``), which the per-record loops set directly."""

    __slots__ = ()

    def __init__(self, topic: str | None = None, partition: int = -1, offset: int = -1, timestamp: int = 0):
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.source: RecordBatch | None = None

    def metadata(self) -> RecordMetadata | None:
        """The record's topic, partition and offset; None outside record processing."""
        if self.topic is None:
            return None
        return RecordMetadata(self.topic, self.partition, self.offset)

    def __repr__(self) -> str:
        return (
            f"RecordContext(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
            f"timestamp={self.timestamp})"
        )
