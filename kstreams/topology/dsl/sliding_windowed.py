"""A grouped stream aggregated over sliding windows: ``KGroupedStream.windowed_by(SlidingWindows...)``.

Its count, reduce and aggregate return a KTable keyed by ``WindowedKey(key, start, start + d)``
(d the time difference; both ends inclusive), as Kafka's ``windowedBy(SlidingWindows)``. Names are
Kafka's (``KSTREAM-AGGREGATE-``/``KSTREAM-REDUCE-`` processors and their ``-STATE-STORE-``
stores); the store is a timestamped window store of window size d that keeps 2 * d + grace, the
oldest window a new record may still need (its left window's seed starts at t - 2d).
``emit_strategy(EmitStrategy.on_window_close())`` forwards each window's final result once, when it
closes (Kafka 3.3+ has it on sliding windows too); the store is then never cached and an
``<store>-emit-position`` key-value store beside it keeps how far the results went out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from kstreams.state.store import WindowedKey
from kstreams.topology.dsl.emit_strategy import EmitStrategy, require_emit_strategy
from kstreams.topology.dsl.grouped import _Grouping
from kstreams.topology.dsl.internal_builder import InternalStreamsBuilder
from kstreams.topology.dsl.ktable import KTable
from kstreams.topology.dsl.materialize import materialized_store, window_store_builder
from kstreams.topology.dsl.parameters import Materialized
from kstreams.topology.dsl.processors.aggregate import AggregateKind
from kstreams.topology.dsl.processors.emit_position import emit_position_store_builder
from kstreams.topology.dsl.processors.sliding_aggregate import SlidingWindowAggregateSupplier
from kstreams.topology.dsl.windows import SlidingWindows

__all__ = ["SlidingWindowedKStream", "sliding_window_store_builder"]

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")


class SlidingWindowedKStream(_Grouping[WindowedKey[K], K, V], Generic[K, V]):
    """A grouped stream aggregated per sliding window; results are keyed by ``WindowedKey[K]``.
    Records with a null key or a null value are skipped (count included), as in Kafka."""

    def __init__(
        self,
        builder: InternalStreamsBuilder,
        name: str,
        key_serde: Any,
        value_serde: Any,
        repartition_required: bool,
        grouped_name: str | None,
        source_nodes: Iterable[str],
        windows: SlidingWindows,
    ) -> None:
        super().__init__(
            builder, name, key_serde, value_serde, repartition_required, grouped_name, source_nodes
        )
        self.sliding_windows = windows

    def emit_strategy(self, emit_strategy: EmitStrategy) -> SlidingWindowedKStream[K, V]:
        """When the aggregations of this windowed stream forward: ``EmitStrategy.on_window_close()``
        (each window's final result once, when it closes) or ``on_window_update()`` (the default)."""
        self.emit = require_emit_strategy(emit_strategy)
        return self

    def _aggregate(
        self,
        kind: AggregateKind,
        prefix: str,
        materialized: Materialized,
        name: str | None,
        initializer: Callable[[], Any] | None,
        aggregator: Callable[..., Any],
        value_serde_default: Any,
    ) -> KTable[Any, Any]:
        """The sliding-window aggregation's processor (after a repartition when needed), its
        window store, and the table of its results."""
        builder = self._builder
        store_name, key_serde, value_serde = materialized_store(
            builder, materialized, prefix, self._key_serde, value_serde_default
        )
        windows = self.sliding_windows
        store_builder = sliding_window_store_builder(
            materialized, store_name, windows, key_serde, value_serde
        )
        emit_on_close = self.emit is not None and self.emit.on_close
        position_builder = None
        if emit_on_close:
            # As in Kafka, never cached: its results leave only when their windows close.
            store_builder.with_caching_disabled()
            position_builder = emit_position_store_builder(store_builder)
        supplier = SlidingWindowAggregateSupplier(
            kind, store_name, windows, initializer, aggregator, key_serde, value_serde, self.emit
        )
        processor = builder.name_or_generate(name, prefix)
        parent, sources = self._parent_for(store_name)
        builder.add_processor(processor, supplier, parent)
        builder.add_store(store_builder, processor)
        if position_builder is not None:
            builder.add_store(position_builder, processor)
        # A windowed table's keys are windows: it has no key serde of its own and no lookup by key.
        return KTable(
            builder,
            processor,
            None,
            value_serde,
            sources,
            supplier,
            None,
            queryable_store_name=materialized.store_name,
        )


def sliding_window_store_builder(
    materialized: Materialized, store_name: str, windows: SlidingWindows, key_serde: Any, value_serde: Any
) -> Any:
    """The timestamped window store of a sliding-window aggregation: window size d, retention
    2 * d + grace unless ``materialized`` sets a longer one (a shorter one is refused)."""
    minimum_retention = 2 * windows.time_difference_ms + windows.grace_ms
    retention_ms = materialized.retention_ms
    if retention_ms is None:
        retention_ms = minimum_retention
    if retention_ms < minimum_retention:
        raise ValueError(
            f"The retention of window store {store_name} ({retention_ms} ms) must be no smaller than 2 * "
            f"time difference plus grace (2 * {windows.time_difference_ms} + {windows.grace_ms} ms) for "
            "sliding windows: raise it with Materialized.with_retention(...)."
        )
    return window_store_builder(
        store_name,
        retention_ms,
        windows.time_difference_ms,
        key_serde,
        value_serde,
        store_type=materialized.store_type,
        caching=materialized.caching_enabled,
        logging_enabled=materialized.logging_enabled,
        log_config=materialized.log_config,
        supplier=materialized.store_supplier,
        timestamped=True,
    )
