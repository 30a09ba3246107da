"""Re-grouping and aggregating a KTable: ``table.group_by(selector).count()/reduce()/aggregate()``.

A table row that changes must leave the aggregate of its old group and join the one of its new
group, so the select processor forwards the old and the new (key, value) pairs as changes, and the
aggregation subtracts old values before adding new ones (Kafka's KTableRepartitionMap,
KTableAggregate and KTableReduce). The changes travel through a repartition topic; ``ChangeSerde``
writes them there.

Timestamps are Kafka's (KTableAggregate, KTableReduce): a new aggregate takes the record's
timestamp; an update of an existing aggregate (a subtraction or an addition) the larger of the
record's and the aggregate's, so the result never moves back in time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from kstreams.errors import SerializationException
from kstreams.processor import Processor, ProcessorContext, Record
from kstreams.serdes import serde_from_config
from kstreams.state.value_and_timestamp import ValueAndTimestamp
from kstreams.topology.dsl.processors.aggregate import AggregateKind, combine
from kstreams.topology.dsl.processors.forwarding import ChangeForwarder
from kstreams.topology.dsl.processors.store_access import get_store, record_access
from kstreams.topology.dsl.records import Change

__all__ = ["ChangeSerde", "TableAggregateSupplier", "TableSelectSupplier"]

logger = logging.getLogger(__name__)


class ChangeSerde:
    """Writes a ``Change(new, old)`` as Kafka Streams' ``ChangedSerializer`` (4.1) does, so a Java
    application's repartition topic can be taken over: the value bytes, then a flag byte at the
    end; 1: the new value alone, 0: the old value alone, 2: both, the new value's length first as
    a zigzag varint. A change with neither value is not written (Kafka refuses it too). Kafka's
    flags 3 to 5 (the same three with an "is latest" byte before the flag, written while
    upgrading from 3.4 and older) are read too.

    The inner value serde may be None when the DSL was given none: the processors that use this
    serde bind it to ``default.value.serde`` at init (``bind_defaults``), before any record flows.
    """

    name = "change"

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def bind_defaults(self, configs: Mapping[str, Any]) -> None:
        if self.inner is None:
            self.inner = serde_from_config(configs, "default.value.serde")
        if self.inner is None:
            raise SerializationException(
                "A table group_by has no serde for its values: give one with Grouped.with_(key_serde, "
                "value_serde) or set default.value.serde."
            )

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        self.bind_defaults(configs)

    def serializer(self) -> ChangeSerde:
        return self

    def deserializer(self) -> ChangeSerde:
        return self

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        if not isinstance(data, Change):
            raise SerializationException(
                f"The change serde of topic {topic} expects a Change(new, old), got {type(data).__name__}."
            )
        new = None if data.new_value is None else self.inner.serialize(topic, data.new_value)
        old = None if data.old_value is None else self.inner.serialize(topic, data.old_value)
        if new is not None and old is not None:
            return _varint(len(new)) + new + old + _BOTH
        if new is not None:
            return new + _NEW_ONLY
        if old is not None:
            return old + _OLD_ONLY
        raise SerializationException(
            f"A change without new and old value cannot be written to topic {topic} (nor can Kafka Streams)."
        )

    def deserialize(self, topic: str | None, data: bytes | None) -> Change[Any] | None:
        if data is None:
            return None
        if not data:
            raise SerializationException(f"An empty record on topic {topic} is not a serialized Change.")
        flag = data[-1]
        if flag not in _FLAGS:
            raise SerializationException(
                f"A record on topic {topic} has change flag {flag}; Kafka Streams writes 0 to 5."
            )
        # Flags 3 to 5 carry an "is latest" byte before the flag, which a kstreams change does not model.
        body = bytes(data[: -1 if flag < 3 else -2])
        shape = flag % 3
        if shape == 1:
            return Change(self.inner.deserialize(topic, body), None)
        if shape == 0:
            return Change(None, self.inner.deserialize(topic, body))
        length, start = _read_varint(body, topic)
        new, old = body[start : start + length], body[start + length :]
        return Change(self.inner.deserialize(topic, new), self.inner.deserialize(topic, old))


_OLD_ONLY, _NEW_ONLY, _BOTH = b"\x00", b"\x01", b"\x02"
_FLAGS = range(6)


def _varint(value: int) -> bytes:
    """``value`` as Kafka's ``ByteUtils.writeVarint``: zigzag, then 7 bits a byte, low bits first."""
    zigzag = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _read_varint(data: bytes, topic: str | None) -> tuple[int, int]:
    """A zigzag varint at the start of ``data``: (its value, the offset after it)."""
    zigzag = shift = 0
    for i, byte in enumerate(data[:5]):
        zigzag |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (zigzag >> 1) ^ -(zigzag & 1), i + 1
        shift += 7
    raise SerializationException(f"A change on topic {topic} has a malformed length.")


class TableSelectSupplier:
    """Maps each table change to the (key, value) pairs of its old and new rows under
    ``selector(key, value) -> KeyValue``: one change when both pairs share a key, else a removal
    from the old key and an addition to the new one (old first). A row whose selector returns None,
    or a pair with a None key or value, belongs to no group and is skipped."""

    kind = "table_select"

    def __init__(self, selector: Callable[[Any, Any], Any], change_serde: ChangeSerde) -> None:
        self.selector = selector
        self.change_serde = change_serde

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _TableSelect(self)


class _TableSelect(Processor[Any, Any, Any, Any]):
    def __init__(self, spec: TableSelectSupplier) -> None:
        self.spec = spec

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.spec.change_serde.bind_defaults(context.app_configs)

    def _pair(self, key: Any, value: Any) -> tuple[Any, Any] | None:
        if value is None:
            return None
        result = self.spec.selector(key, value)
        if result is None:
            # No group for this row: skipped, as a null key or value is (Kafka's KTableRepartitionMap).
            return None
        try:
            new_key, new_value = result
        except (TypeError, ValueError):
            raise TypeError(
                "The selector of a table group_by must return a KeyValue (or a (key, value) tuple), "
                f"got {result!r}."
            ) from None
        if new_key is None or new_value is None:
            return None
        return new_key, new_value

    def process(self, record: Record[Any, Any]) -> None:
        change: Change[Any] = record.value
        if not change.is_latest:
            # An out-of-order update of a versioned table: the aggregate takes each row's latest
            # version only, and Kafka's KTableRepartitionMap does not even repartition it.
            return
        new = self._pair(record.key, change.new_value)
        old = self._pair(record.key, change.old_value)
        if new is not None and old is not None and new[0] == old[0]:
            self.context.forward(Record(new[0], Change(new[1], old[1]), record.timestamp, record.headers))
            return
        if old is not None:
            self.context.forward(Record(old[0], Change(None, old[1]), record.timestamp, record.headers))
        if new is not None:
            self.context.forward(Record(new[0], Change(new[1], None), record.timestamp, record.headers))


class TableAggregateSupplier:
    """Aggregates re-grouped table changes per key: subtract the old value, then add the new one.

    count/aggregate: ``adder(key, value, aggregate)``/``subtractor(key, value, aggregate)`` from
    ``initializer()``; reduce: ``adder(aggregate, value)``/``subtractor(aggregate, value)``, the
    first value starting the aggregate.
    """

    def __init__(
        self,
        kind: AggregateKind,
        store_name: str,
        initializer: Callable[[], Any] | None,
        adder: Callable[..., Any],
        subtractor: Callable[..., Any],
        change_serde: ChangeSerde,
        key_serde: Any = None,
        value_serde: Any = None,
    ) -> None:
        self.kind: AggregateKind = kind
        self.store_name = store_name
        self.initializer = initializer
        self.adder = adder
        self.subtractor = subtractor
        self.change_serde = change_serde
        self.key_serde = key_serde
        self.value_serde = value_serde

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _TableAggregate(self)

    def __repr__(self) -> str:
        return f"TableAggregateSupplier(kind={self.kind!r}, store={self.store_name!r})"


class _TableAggregate(Processor[Any, Any, Any, Any]):
    def __init__(self, spec: TableAggregateSupplier) -> None:
        self.spec = spec

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.spec.change_serde.bind_defaults(context.app_configs)
        self.store = get_store(context, self.spec.store_name)
        self.forwarder = ChangeForwarder(self.store, context)
        self._get, self._put = record_access(self.store)

    def process(self, record: Record[Any, Any]) -> None:
        if record.key is None:
            return
        change: Change[Any] = record.value
        spec = self.spec
        key = record.key
        stored = self._get(key)
        old_aggregate = None if stored is None else stored.value
        aggregate = old_aggregate
        # Kafka's rule: the aggregate's timestamp counts once it is subtracted from or added to.
        timestamp = record.timestamp
        if stored is not None and (change.old_value is not None or change.new_value is not None):
            timestamp = max(record.timestamp, stored.timestamp)
        if change.old_value is not None and aggregate is not None:
            aggregate = combine(
                spec.kind, spec.initializer, spec.subtractor, key, change.old_value, aggregate
            )
        if change.new_value is not None:
            aggregate = combine(spec.kind, spec.initializer, spec.adder, key, change.new_value, aggregate)
        self._put(key, ValueAndTimestamp.make(aggregate, timestamp))
        self.forwarder.maybe_forward(key, aggregate, old_aggregate, timestamp, record.headers)
