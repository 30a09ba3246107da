"""Turning a ``Materialized`` (or a join's store settings) into a store builder.

Stores default to persistent (RocksDB), as in Kafka; ``StoreType.IN_MEMORY`` picks the in-memory
store. Serdes of None are passed through: the topology fills in the application's default serdes
when it builds. Tables and aggregations keep their values in timestamped stores, as Kafka's DSL
does: each value with the largest timestamp of the records that made it.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from kstreams.topology.dsl import naming
from kstreams.topology.dsl.parameters import Materialized, StoreType

__all__ = [
    "aggregation_retention_ms",
    "aggregation_window_store_builder",
    "draw_count_store_index",
    "key_value_store_builder",
    "materialized_store",
    "plain_key_value_store_builder",
    "session_store_builder",
    "window_store_builder",
]

logger = logging.getLogger(__name__)


def _stores() -> Any:
    # Imported on use: kstreams.state depends on the compiled core, which a topology that is only
    # described never needs.
    from kstreams.state.stores import Stores

    return Stores


def materialized_store(
    builder: Any, materialized: Materialized, prefix: str, key_serde: Any, value_serde: Any
) -> tuple[str, Any, Any]:
    """The name and serdes of the store ``materialized`` asks for: its name, else a new one generated
    from ``prefix`` by the DSL's ``builder``; its serdes, else ``key_serde`` and ``value_serde``."""
    store_name = materialized.store_name or builder.new_store_name(prefix)
    return (
        store_name,
        materialized.key_serde if materialized.key_serde is not None else key_serde,
        materialized.value_serde if materialized.value_serde is not None else value_serde,
    )


def draw_count_store_index(builder: Any, *arguments: Any) -> None:
    """Draw the store index Kafka's ``count`` of a grouped stream, a time-windowed or a session
    windowed stream burns when it is given a ``Materialized`` without a store name (a name it
    "used to burn", kept for compatibility), so the names generated after it are Kafka's."""
    for argument in arguments:
        if isinstance(argument, Materialized) and argument.store_name is None:
            builder.new_store_name(naming.AGGREGATE)
            return


def _suppliers(store_type: Any) -> Any:
    """The DslStoreSuppliers an operation's store type picks: Kafka's built-in set of a
    ``StoreType`` (RocksDB when None, the default until a TopologyConfig or the client's config
    names another), or the set the operation was given."""
    from kstreams.state.dsl_store_suppliers import BuiltInDslStoreSuppliers

    if store_type is None or store_type is StoreType.ROCKS_DB:
        return BuiltInDslStoreSuppliers.RocksDBDslStoreSuppliers()
    if store_type is StoreType.IN_MEMORY:
        return BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers()
    return store_type


def _defaulted(builder: Any, store_type: Any, params: Any) -> None:
    """Keep on ``builder`` the parameters its supplier was made from (None: a supplier given to
    the operation) when the operation named no store type: a TopologyConfig's or the client's
    DSL store suppliers replace that supplier."""
    builder.dsl_params = params if store_type is None else None


def _emit(on_close: bool) -> Any:
    from kstreams.topology.dsl.emit_strategy import EmitStrategy

    return EmitStrategy.on_window_close() if on_close else EmitStrategy.on_window_update()


def _apply_layers(builder: Any, caching: bool, logging_enabled: bool, log_config: dict[str, str]) -> Any:
    builder = builder.with_caching_enabled() if caching else builder.with_caching_disabled()
    if logging_enabled:
        return builder.with_logging_enabled(dict(log_config))
    return builder.with_logging_disabled()


def key_value_store_builder(
    materialized: Materialized, store_name: str, key_serde: Any, value_serde: Any
) -> Any:
    """A timestamped key-value store builder for a table or an aggregation, as ``materialized`` asks."""
    from kstreams.state.dsl_store_suppliers import DslKeyValueParams

    stores = _stores()
    supplier, params = materialized.store_supplier, None
    if supplier is None:
        params = DslKeyValueParams(store_name, is_timestamped=True)
        supplier = _suppliers(materialized.store_type).key_value_store(params)
    builder = stores.timestamped_key_value_store_builder(supplier, key_serde, value_serde)
    _defaulted(builder, materialized.store_type, params)
    return _apply_layers(
        builder, materialized.caching_enabled, materialized.logging_enabled, materialized.log_config
    )


def plain_key_value_store_builder(
    store_name: str,
    key_serde: Any,
    value_serde: Any,
    *,
    store_type: StoreType | None = None,
    logging_enabled: bool = True,
    log_config: dict[str, str] | None = None,
) -> Any:
    """An uncached key-value store builder of plain values (a stream-stream join's shared outer
    store): in RocksDB unless ``store_type`` asks for memory."""
    from kstreams.state.dsl_store_suppliers import DslKeyValueParams

    params = DslKeyValueParams(store_name, is_timestamped=False)
    supplier = _suppliers(store_type).key_value_store(params)
    builder = _stores().key_value_store_builder(supplier, key_serde, value_serde)
    _defaulted(builder, store_type, params)
    return _apply_layers(builder, False, logging_enabled, log_config or {})


def window_store_builder(
    store_name: str,
    retention_ms: int,
    window_size_ms: int,
    key_serde: Any,
    value_serde: Any,
    *,
    retain_duplicates: bool = False,
    store_type: StoreType | None = None,
    caching: bool = False,
    logging_enabled: bool = True,
    log_config: dict[str, str] | None = None,
    supplier: Any = None,
    timestamped: bool = False,
    time_ordered: bool = False,
    sliding: bool = False,
) -> Any:
    """A window store builder: of ``ValueAndTimestamp`` values when ``timestamped`` (windowed
    aggregations), else of plain values (stream-stream joins). ``time_ordered``: the aggregation
    emits on window close, for which the default RocksDB store is Kafka's time-ordered one; an
    in-memory store or a user's supplier is used as it is, as in Kafka. ``sliding``: the windows
    are sliding windows (what a DslStoreSuppliers is told)."""
    from kstreams.state.dsl_store_suppliers import DslWindowParams

    stores = _stores()
    params = None
    if supplier is None:
        params = DslWindowParams(
            store_name,
            timedelta(milliseconds=retention_ms),
            timedelta(milliseconds=window_size_ms),
            retain_duplicates,
            _emit(time_ordered),
            sliding,
            timestamped,
        )
        supplier = _suppliers(store_type).window_store(params)
    make = stores.timestamped_window_store_builder if timestamped else stores.window_store_builder
    builder = make(supplier, key_serde, value_serde)
    _defaulted(builder, store_type, params)
    return _apply_layers(builder, caching, logging_enabled, log_config or {})


def aggregation_retention_ms(
    materialized: Materialized, store_kind: str, store_name: str, minimum_ms: int, requirement: str
) -> int:
    """The retention of a windowed aggregation's store: ``minimum_ms`` (what the windows need)
    unless ``materialized`` sets a longer one. A shorter one is refused with a message that says
    ``requirement`` (e.g. "be at least the window size plus grace (60000 + 0 ms)")."""
    retention_ms = minimum_ms if materialized.retention_ms is None else materialized.retention_ms
    if retention_ms < minimum_ms:
        raise ValueError(
            f"The retention of {store_kind} store {store_name} ({retention_ms} ms) must {requirement}: "
            "raise it with Materialized.with_retention(...)."
        )
    return retention_ms


def aggregation_window_store_builder(
    materialized: Materialized,
    store_name: str,
    retention_ms: int,
    window_size_ms: int,
    key_serde: Any,
    value_serde: Any,
    emit_on_close: bool = False,
    sliding: bool = False,
) -> Any:
    """The timestamped window store of a windowed aggregation (time or sliding windows), as
    ``materialized`` asks; Kafka's time-ordered one by default when it emits on window close."""
    return window_store_builder(
        store_name,
        retention_ms,
        window_size_ms,
        key_serde,
        value_serde,
        store_type=materialized.store_type,
        caching=materialized.caching_enabled,
        logging_enabled=materialized.logging_enabled,
        log_config=materialized.log_config,
        supplier=materialized.store_supplier,
        timestamped=True,
        time_ordered=emit_on_close,
        sliding=sliding,
    )


def session_store_builder(
    materialized: Materialized,
    store_name: str,
    retention_ms: int,
    key_serde: Any,
    value_serde: Any,
    time_ordered: bool = False,
) -> Any:
    """A session store builder for a session-windowed aggregation, as ``materialized`` asks. Session
    stores hold plain aggregates: a session's end is its timestamp (Kafka has no timestamped kind).
    ``time_ordered``: the default RocksDB store is Kafka's time-ordered one (an aggregation
    emitting on window close)."""
    from kstreams.state.dsl_store_suppliers import DslSessionParams

    stores = _stores()
    supplier, params = materialized.store_supplier, None
    if supplier is None:
        params = DslSessionParams(store_name, timedelta(milliseconds=retention_ms), _emit(time_ordered))
        supplier = _suppliers(materialized.store_type).session_store(params)
    builder = stores.session_store_builder(supplier, key_serde, value_serde)
    _defaulted(builder, materialized.store_type, params)
    return _apply_layers(
        builder, materialized.caching_enabled, materialized.logging_enabled, materialized.log_config
    )
