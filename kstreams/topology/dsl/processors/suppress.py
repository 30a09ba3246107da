"""The suppress processor (Kafka's ``KTableSuppressProcessor``) and the suppressed table's value getter.

For each update ``Change(new, old)`` of a key, the processor advances its own stream time (the
largest timestamp it has seen), buffers the update (a key already buffered keeps its place and
its prior value), then emits, oldest first, every entry whose buffer time is at most stream time
minus the suppress duration. The buffer time is the window's end (``WindowedKey.end``) for
``until_window_closes``, whose duration is the window aggregation's grace (gap plus grace for
sessions), and the record's timestamp for ``until_time_limit``, whose duration is the limit.

When the buffer holds more than ``max_records`` keys or ``max_bytes`` bytes (counted as Kafka
counts them, record context included: see ``kstreams.state.time_ordered_buffer``), it either emits its
oldest entries early until it fits again, or fails with a ``StreamsException`` that stops the
application (``shutdown_when_full``).

An emitted record is the key's newest change, forwarded as ``Change(new, old)`` exactly as the
buffer received it, with the timestamp and headers of the record that brought it (Kafka forwards
the newest update's old value; the value from before buffering, the *prior* value, is what the
suppressed table's value getter shows while the key is buffered). A final result that is a
deletion (new value None) is not forwarded by ``until_window_closes``: nothing downstream saw the
window. Emission happens only when a record reaches this processor, as in Kafka: stream time does
not move without records.
"""

from __future__ import annotations

import logging
from typing import Any

from kstreams.errors import StreamsException
from kstreams.processor import Processor, ProcessorContext, Record
from kstreams.state.store import WindowedKey
from kstreams.state.time_ordered_buffer import BufferedRecord, InMemoryTimeOrderedKeyValueBuffer
from kstreams.state.value_and_timestamp import ValueAndTimestamp
from kstreams.topology.dsl.processors.store_access import get_store
from kstreams.topology.dsl.processors.table import ValueGetter, ValueGetterSupplier
from kstreams.topology.dsl.records import Change

__all__ = ["KTableSuppressProcessor", "KTableSuppressSupplier", "SuppressedValueGetterSupplier"]

logger = logging.getLogger(__name__)


class KTableSuppressSupplier:
    """Makes the suppress processor of one table (see the module docstring); its attributes say
    what it does, so ``describe()``, Spark and tests can inspect it."""

    def __init__(
        self,
        store_name: str,
        suppress_duration_ms: int,
        *,
        window_end_time: bool,
        max_records: int,
        max_bytes: int,
        shut_down_when_full: bool,
        safe_to_drop_tombstones: bool,
    ) -> None:
        self.store_name = store_name
        self.suppress_duration_ms = suppress_duration_ms
        self.window_end_time = window_end_time
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.shut_down_when_full = shut_down_when_full
        self.safe_to_drop_tombstones = safe_to_drop_tombstones
        # A table downstream may ask for old values: the buffer forwards them whatever it is told.
        self.send_old_values = True

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return KTableSuppressProcessor(self)

    def __repr__(self) -> str:
        kind = "until_window_closes" if self.window_end_time else "until_time_limit"
        return f"KTableSuppressSupplier({kind}, {self.suppress_duration_ms} ms, store={self.store_name!r})"


class KTableSuppressProcessor(Processor[Any, Any, Any, Any]):
    """The processor of a ``KTableSuppressSupplier``."""

    def __init__(self, spec: KTableSuppressSupplier) -> None:
        self.spec = spec
        self.observed_stream_time = -1

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.buffer: InMemoryTimeOrderedKeyValueBuffer = get_store(context, self.spec.store_name)
        self._node_name = getattr(context, "current_node_name", None) or "KTABLE-SUPPRESS"

    def process(self, record: Record[Any, Any]) -> None:
        if record.key is None:
            logger.debug(
                "Skipping a table update with a null key at suppress store %s.", self.spec.store_name
            )
            return
        if record.timestamp > self.observed_stream_time:
            self.observed_stream_time = record.timestamp
        change = record.value
        if isinstance(change, Change):
            new, old = change.new_value, change.old_value
        else:  # a plain value (a table processor that forwards no Change): no old value known
            new, old = change, None
        if self.spec.window_end_time:
            if not isinstance(record.key, WindowedKey):
                raise StreamsException(
                    f"Suppress store {self.spec.store_name} waits for windows to close, but got the "
                    f"non-windowed key {record.key!r}: until_window_closes works on windowed tables only."
                )
            buffer_time = record.key.end
        else:
            buffer_time = record.timestamp
        metadata = self.context.record_metadata()
        if metadata is None:  # forwarded from a punctuation: no record context
            topic, partition, offset = None, -1, -1
        else:
            topic, partition, offset = metadata.topic, metadata.partition, metadata.offset
        self.buffer.put(
            buffer_time,
            record.key,
            new,
            old,
            record.timestamp,
            record.headers,
            topic=topic,
            partition=partition,
            offset=offset,
        )
        self._enforce_constraints()

    def _enforce_constraints(self) -> None:
        buffer = self.buffer
        expiry_time = self.observed_stream_time - self.spec.suppress_duration_ms
        buffer.evict_while(lambda: buffer.min_timestamp() <= expiry_time, self._emit)
        if not self._over_capacity():
            return
        if not self.spec.shut_down_when_full:
            buffer.evict_while(self._over_capacity, self._emit)
            return
        raise StreamsException(
            f"{self._node_name} buffer exceeded its max capacity. Currently "
            f"[{buffer.num_records()}/{self.spec.max_records}] records and "
            f"[{buffer.buffer_size()}/{self.spec.max_bytes}] bytes. The suppression buffer "
            f"{self.spec.store_name} is configured to shut down when full: raise its bound "
            "(BufferConfig.max_records/max_bytes), use BufferConfig.unbounded(), or let it "
            "emit_early_when_full() (not possible with until_window_closes)."
        )

    def _over_capacity(self) -> bool:
        buffer = self.buffer
        return buffer.num_records() > self.spec.max_records or buffer.buffer_size() > self.spec.max_bytes

    def _emit(self, evicted: BufferedRecord) -> None:
        if evicted.new_value is None and self.spec.safe_to_drop_tombstones:
            return
        self.context.forward(
            Record(
                evicted.key, Change(evicted.new_value, evicted.old_value), evicted.timestamp, evicted.headers
            )
        )


class SuppressedValueGetterSupplier(ValueGetterSupplier):
    """The suppressed table's view: a buffered key shows its value from before it was buffered (what
    downstream last saw), any other key the parent table's value (Kafka's suppress ``view()``)."""

    def __init__(self, store_name: str, parent: ValueGetterSupplier) -> None:
        self.store_name = store_name
        self.parent = parent

    def store_names(self) -> tuple[str, ...]:
        return (self.store_name, *self.parent.store_names())

    def get(self, context: ProcessorContext[Any, Any]) -> ValueGetter:
        parent = self.parent.get(context)
        buffer: InMemoryTimeOrderedKeyValueBuffer = get_store(context, self.store_name)

        def get(key: Any) -> ValueAndTimestamp[Any] | None:
            buffered, prior = buffer.prior_value_for_buffered(key)
            if not buffered:
                return parent(key)
            # The prior value's timestamp is unknown (Kafka: -1).
            return ValueAndTimestamp.make(prior, -1)

        return get
