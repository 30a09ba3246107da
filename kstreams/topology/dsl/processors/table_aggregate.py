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
import struct
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

_HAS_NEW = 1
_HAS_OLD = 2
_LENGTH = struct.Struct(">i")


class ChangeSerde:
    """Writes a ``Change(new, old)`` as a flag byte (1: new present, 2: old present), then, when
    both are present, the new value's length (4 bytes, big-endian), then the value bytes.

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
        new = self.inner.serialize(topic, data.new_value)
        old = self.inner.serialize(topic, data.old_value)
        flags = (_HAS_NEW if new is not None else 0) | (_HAS_OLD if old is not None else 0)
        if new is not None and old is not None:
            return bytes((flags,)) + _LENGTH.pack(len(new)) + new + old
        return bytes((flags,)) + (new if new is not None else old or b"")

    def deserialize(self, topic: str | None, data: bytes | None) -> Change[Any] | None:
        if data is None:
            return None
        if not data:
            raise SerializationException(f"An empty record on topic {topic} is not a serialized Change.")
        flags, body = data[0], bytes(data[1:])
        if flags == _HAS_NEW | _HAS_OLD:
            (length,) = _LENGTH.unpack_from(body)
            new = body[_LENGTH.size : _LENGTH.size + length]
            old = body[_LENGTH.size + length :]
            return Change(self.inner.deserialize(topic, new), self.inner.deserialize(topic, old))
        if flags == _HAS_NEW:
            return Change(self.inner.deserialize(topic, body), None)
        if flags == _HAS_OLD:
            return Change(None, self.inner.deserialize(topic, body))
        return Change(None, None)


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
