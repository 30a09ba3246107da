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
from kstreams.topology.dsl.materialize import (
    aggregation_retention_ms,
    aggregation_window_store_builder,
)
from kstreams.topology.dsl.parameters import Materialized
from kstreams.topology.dsl.processors.aggregate import AggregateKind
from kstreams.topology.dsl.processors.sliding_aggregate import SlidingWindowAggregateSupplier
from kstreams.topology.dsl.windows import SlidingWindows

__all__ = ["SlidingWindowedKStream", "sliding_window_store_builder"]

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")


class SlidingWindowedKStream(_Grouping[WindowedKey[K], K, V], Generic[K, V]):
    """A grouped stream aggregated per sliding window; results are keyed by ``WindowedKey[K]``.
    Records with a null key or a null value are skipped (count included), as in Kafka."""

    _count_draws_store_index = False  # Kafka's sliding count draws no extra store index
    # Kafka's SlidingWindowStoreMaterializer: never cached when emitting on window close.
    _emit_close_caches = False

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

    def _store_and_supplier(
        self,
        kind: AggregateKind,
        materialized: Materialized,
        store_name: str,
        initializer: Callable[[], Any] | None,
        aggregator: Callable[..., Any],
        key_serde: Any,
        value_serde: Any,
    ) -> tuple[Any, Any]:
        """The sliding-window aggregation's window store and processor supplier (the rest of the
        aggregation is ``_Grouping``'s)."""
        windows = self.sliding_windows
        store_builder = sliding_window_store_builder(
            materialized, store_name, windows, key_serde, value_serde, self._emits_on_close()
        )
        return store_builder, SlidingWindowAggregateSupplier(
            kind, store_name, windows, initializer, aggregator, key_serde, value_serde, self.emit
        )


def sliding_window_store_builder(
    materialized: Materialized,
    store_name: str,
    windows: SlidingWindows,
    key_serde: Any,
    value_serde: Any,
    emit_on_close: bool = False,
) -> Any:
    """The timestamped window store of a sliding-window aggregation: window size d, retention
    2 * d + grace unless ``materialized`` sets a longer one (a shorter one is refused); Kafka's
    time-ordered store by default when it emits on window close."""
    difference_ms, grace_ms = windows.time_difference_ms, windows.grace_ms
    retention_ms = aggregation_retention_ms(
        materialized,
        "window",
        store_name,
        2 * difference_ms + grace_ms,
        f"be no smaller than 2 * time difference plus grace (2 * {difference_ms} + {grace_ms} ms) for "
        "sliding windows",
    )
    return aggregation_window_store_builder(
        materialized,
        store_name,
        retention_ms,
        difference_ms,
        key_serde,
        value_serde,
        emit_on_close,
        sliding=True,
    )
