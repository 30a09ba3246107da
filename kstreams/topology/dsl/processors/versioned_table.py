"""Tables kept in versioned stores (KIP-914): the table source and the value getter that reads a
version as of a time.

``builder.table(topic, Materialized.as_(Stores.persistent_versioned_key_value_store(...)))`` (or
``to_table`` with such a store) keeps every version of each row for the store's history retention.
The source puts each record as a version at its timestamp and forwards ``Change(new, old
latest)`` at that timestamp. A record older than the history retention is dropped. An out-of-order
record (older than the row's latest version) goes into the history and is forwarded marked as not
the latest (``Change.is_latest`` False), as Kafka's KTableSource does: ``to_stream``, ``filter``,
``map_values`` and ``transform_values`` pass it on, while table-table joins (primary and foreign
key) and re-groupings drop it, since the table's current row did not change (KIP-914).

Lookups (``get``) read the latest version, as for any table. A stream-table join looks the table up
as of each stream record's timestamp (``get_as_of``), so a late stream record joins with the row
that was valid when it happened.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kstreams.processor import Processor, ProcessorContext, Record
from kstreams.state.value_and_timestamp import ValueAndTimestamp
from kstreams.topology.dsl.processors.store_access import get_store
from kstreams.topology.dsl.processors.table import AsOfGetter, ValueGetter, ValueGetterSupplier
from kstreams.topology.dsl.records import Change

if TYPE_CHECKING:
    from kstreams.topology.dsl.internal_builder import InternalStreamsBuilder
    from kstreams.topology.dsl.ktable import KTable
    from kstreams.topology.dsl.parameters import Materialized

__all__ = [
    "VersionedStoreValueGetterSupplier",
    "VersionedTableSourceSupplier",
    "is_versioned_supplier",
    "versioned_source_table",
]

logger = logging.getLogger(__name__)

# The put() return codes of kstreams.state.versioned, repeated so that describing a topology does
# not import the state package (it loads the compiled core).
_NOT_PUT = -(2**63)
_IS_LATEST = -1


def is_versioned_supplier(supplier: Any) -> bool:
    """Whether a ``Materialized`` store supplier makes versioned stores."""
    return getattr(supplier, "history_retention_ms", None) is not None and hasattr(supplier, "persistent")


def _as_value_and_timestamp(record: Any) -> ValueAndTimestamp[Any] | None:
    return None if record is None else ValueAndTimestamp(record.value, record.timestamp)


class VersionedTableSourceSupplier:
    """Turns a topic's records into versions of a versioned table's rows."""

    kind = "versioned_table_source"

    def __init__(self, topic: str, store_name: str) -> None:
        self.topic = topic
        self.store_name = store_name
        # Set when a downstream asks for old values (the store gives the old row; Kafka's
        # KTableSource forwards it only then).
        self.send_old_values = False

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _VersionedTableSource(self)


class _VersionedTableSource(Processor[Any, Any, Any, Any]):
    def __init__(self, spec: VersionedTableSourceSupplier) -> None:
        self.spec = spec

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.store = get_store(context, self.spec.store_name)

    def process(self, record: Record[Any, Any]) -> None:
        if record.key is None:
            logger.debug("Skipping a record with a null key of table source topic %s.", self.spec.topic)
            return
        latest = self.store.get(record.key)
        result = self.store.put(record.key, record.value, record.timestamp)
        if result == _NOT_PUT:
            logger.debug("Dropped a record of %s older than the table's history retention.", self.spec.topic)
            return
        # Out of order (history changed, the current row did not): Change.is_latest False.
        old = None if latest is None or not self.spec.send_old_values else latest.value
        self.context.forward(record.with_value(Change(record.value, old, result == _IS_LATEST)))


class VersionedStoreValueGetterSupplier(ValueGetterSupplier):
    """Reads a versioned table: the latest version, or (``get_as_of``) the one valid at a time."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def store_names(self) -> tuple[str, ...]:
        return (self.store_name,)

    def get(self, context: ProcessorContext[Any, Any]) -> ValueGetter:
        store = get_store(context, self.store_name)
        return lambda key: _as_value_and_timestamp(store.get(key))

    def is_versioned(self) -> bool:
        return True

    def get_as_of(self, context: ProcessorContext[Any, Any]) -> AsOfGetter:
        store = get_store(context, self.store_name)
        return lambda key, timestamp: _as_value_and_timestamp(store.get(key, timestamp))


def versioned_source_table(
    builder: InternalStreamsBuilder,
    name: str,
    parent: str,
    label: str,
    materialized: Materialized,
    key_serde: Any,
    value_serde: Any,
    source_nodes: Iterable[str],
) -> KTable[Any, Any]:
    """A table read by processor ``name`` from ``parent`` into the versioned store that
    ``materialized``'s supplier makes (added at once; the table is queryable under its name)."""
    from kstreams.state.stores import Stores
    from kstreams.topology.dsl.ktable import KTable

    supplier = materialized.store_supplier
    store_key_serde = materialized.key_serde if materialized.key_serde is not None else key_serde
    store_value_serde = materialized.value_serde if materialized.value_serde is not None else value_serde
    store_builder = Stores.versioned_key_value_store_builder(supplier, store_key_serde, store_value_serde)
    if materialized.logging_enabled:
        store_builder.with_logging_enabled(dict(materialized.log_config))
    else:
        store_builder.with_logging_disabled()
    source = VersionedTableSourceSupplier(label, supplier.name)
    builder.add_processor(name, source, parent)
    builder.add_store(store_builder, name)

    def old_values(force_materialization: bool) -> bool:
        source.send_old_values = True
        return True

    return KTable(
        builder,
        name,
        key_serde,
        value_serde,
        source_nodes,
        source,
        VersionedStoreValueGetterSupplier(supplier.name),
        supplier.name,
        old_values=old_values,
        versioned=True,
    )
