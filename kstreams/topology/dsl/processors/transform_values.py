"""KTable.transform_values: the table processor and value getter that run a ValueTransformerWithKey.

The processor (Kafka's KTableTransformValuesProcessor) turns each ``Change(new, old)`` into
``Change(transform(key, new), old')``; when the result table is materialized it keeps the new value
(with the update's timestamp) in its store. ``old'`` is None unless a downstream asks for old
values; then it is the stored value of a materialized result, otherwise ``transform(key, old)``.
The value getter (for joins on an unmaterialized result) runs its own transformer over the
parent's current value, at the parent's timestamp (-1 when the parent has no row), as Kafka's
getter does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kstreams.processor import Processor, ProcessorContext, Record
from kstreams.state.value_and_timestamp import ValueAndTimestamp
from kstreams.topology.dsl.processors.forwarding import ChangeForwarder
from kstreams.topology.dsl.processors.store_access import get_store
from kstreams.topology.dsl.processors.table import ValueGetter, ValueGetterSupplier
from kstreams.topology.dsl.records import Change
from kstreams.topology.dsl.value_transformer import (
    ForwardingDisabledProcessorContext,
    ValueTransformerWithKey,
)

__all__ = ["TableTransformValuesSupplier", "TransformValuesGetterSupplier"]

logger = logging.getLogger(__name__)

TransformerSupplier = Callable[[], ValueTransformerWithKey[Any, Any, Any]]

# Kafka's RecordQueue.UNKNOWN: the timestamp of a lookup that found no row.
_UNKNOWN_TIMESTAMP = -1


def _new_transformer(supplier: TransformerSupplier) -> ValueTransformerWithKey[Any, Any, Any]:
    transformer = supplier()
    if not callable(getattr(transformer, "transform", None)):
        raise TypeError(
            f"transform_values() needs a supplier of ValueTransformerWithKey, but it returned "
            f"{transformer!r}: subclass kstreams.topology.ValueTransformerWithKey and implement transform()."
        )
    return transformer


def _init(transformer: ValueTransformerWithKey[Any, Any, Any], context: ProcessorContext[Any, Any]) -> None:
    transformer.init(ForwardingDisabledProcessorContext(context, type(transformer).__name__))


class TableTransformValuesSupplier:
    """Makes the per-task processors of one ``transform_values``; passes on the stores the
    transformer supplier declares (``stores()``)."""

    kind = "table_transform_values"

    def __init__(self, transformer_supplier: TransformerSupplier, store_name: str | None = None) -> None:
        self.transformer_supplier = transformer_supplier
        self.store_name = store_name
        self.send_old_values = False

    def stores(self) -> Any:
        connected = getattr(self.transformer_supplier, "stores", None)
        if callable(connected) and not isinstance(self.transformer_supplier, type):
            return connected()
        return ()

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _TableTransformValues(self)


class _TableTransformValues(Processor[Any, Any, Any, Any]):
    def __init__(self, spec: TableTransformValuesSupplier) -> None:
        self.spec = spec
        self.transformer = _new_transformer(spec.transformer_supplier)

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        _init(self.transformer, context)
        self.store = get_store(context, self.spec.store_name) if self.spec.store_name else None
        self.forwarder = (
            ChangeForwarder(self.store, context, send_old_values=self.spec.send_old_values)
            if self.store is not None
            else None
        )

    def process(self, record: Record[Any, Any]) -> None:
        change: Change[Any] = record.value
        new = self.transformer.transform(record.key, change.new_value)
        if self.store is not None and self.forwarder is not None:
            old = None
            if self.spec.send_old_values:
                stored = self.store.get(record.key)
                old = None if stored is None else stored.value
            self.store.put(record.key, ValueAndTimestamp.make(new, record.timestamp))
            self.forwarder.maybe_forward(record.key, new, old, record.timestamp, record.headers)
            return
        old = self.transformer.transform(record.key, change.old_value) if self.spec.send_old_values else None
        self.context.forward(record.with_value(Change(new, old, change.is_latest)))

    def close(self) -> None:
        self.transformer.close()


class TransformValuesGetterSupplier(ValueGetterSupplier):
    """Looks up the transformed table: the transformer applied to the parent's current value."""

    def __init__(
        self,
        parent: ValueGetterSupplier,
        transformer_supplier: TransformerSupplier,
        store_names: tuple[str, ...],
    ) -> None:
        self.parent = parent
        self.transformer_supplier = transformer_supplier
        self.transformer_stores = store_names

    def store_names(self) -> tuple[str, ...]:
        # The transformer of a lookup reads its stores too, so the looking-up processor needs them.
        return tuple(dict.fromkeys(self.parent.store_names() + self.transformer_stores))

    def get(self, context: ProcessorContext[Any, Any]) -> ValueGetter:
        parent = self.parent.get(context)
        transformer = _new_transformer(self.transformer_supplier)
        _init(transformer, context)

        def get(key: Any) -> ValueAndTimestamp[Any] | None:
            stored = parent(key)
            if stored is None:
                return ValueAndTimestamp.make(transformer.transform(key, None), _UNKNOWN_TIMESTAMP)
            return ValueAndTimestamp.make(transformer.transform(key, stored.value), stored.timestamp)

        return get
