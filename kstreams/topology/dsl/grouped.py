"""Grouped streams and their aggregations: KGroupedStream and TimeWindowedKStream.

An aggregation keeps one value per key (per window) in a state store and returns a KTable of
the results. If the grouped stream's key may have changed, the aggregation first inserts a
repartition topic named after ``Grouped.as_`` when given, else after the store
(``KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition``, or ``counts-repartition`` for
``Materialized.as_("counts")``), as Kafka does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from kstreams.serdes import Serdes
from kstreams.state.store import WindowedKey
from kstreams.topology.dsl import naming
from kstreams.topology.dsl.emit_strategy import EmitStrategy, require_emit_strategy
from kstreams.topology.dsl.internal_builder import InternalStreamsBuilder
from kstreams.topology.dsl.ktable import KTable
from kstreams.topology.dsl.materialize import (
    aggregation_retention_ms,
    aggregation_window_store_builder,
    draw_count_store_index,
    key_value_store_builder,
    materialized_store,
)
from kstreams.topology.dsl.parameters import Materialized, Named, aggregation_store_and_name
from kstreams.topology.dsl.processors.aggregate import (
    AggregateKind,
    StreamAggregateSupplier,
    WindowedAggregateSupplier,
    count_aggregator,
    count_initializer,
)
from kstreams.topology.dsl.processors.emit_position import emit_position_store_builder
from kstreams.topology.dsl.processors.table import StoreValueGetterSupplier, WindowStoreValueGetterSupplier
from kstreams.topology.dsl.session_windowed import SessionWindowedKStream
from kstreams.topology.dsl.windows import SessionWindows, SlidingWindows, TimeWindows

if TYPE_CHECKING:
    from kstreams.topology.dsl.cogrouped import CogroupedKStream
    from kstreams.topology.dsl.sliding_windowed import SlidingWindowedKStream

__all__ = ["KGroupedStream", "TimeWindowedKStream"]

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")
VA = TypeVar("VA")
# The key type of an aggregation's table: the grouping key, or the grouping key in a window.
KT = TypeVar("KT")


class _Grouping(Generic[KT, K, V]):
    """What a grouped stream knows (where it is, its serdes, whether to repartition, and its
    windows when windowed) and its aggregations, whose tables are keyed by ``KT``."""

    windows: TimeWindows | None = None
    # When a windowed aggregation forwards (None: on every update).
    emit: EmitStrategy | None = None
    # Whether count() given an unnamed Materialized draws an extra store index (as in Kafka,
    # all but the sliding-windowed stream).
    _count_draws_store_index = True
    # Whether the window store of an aggregation emitting on window close caches as its
    # ``Materialized`` says: Kafka's time windows do, its sliding windows never do.
    _emit_close_caches = True

    def __init__(
        self,
        builder: InternalStreamsBuilder,
        name: str,
        key_serde: Any,
        value_serde: Any,
        repartition_required: bool,
        grouped_name: str | None,
        source_nodes: Iterable[str],
    ) -> None:
        self._builder = builder
        self._name = name
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._repartition_required = repartition_required
        self._grouped_name = grouped_name
        self._source_nodes = frozenset(source_nodes)
        # The source of the repartition named by ``grouped_name`` (key "source") once an
        # aggregation made it; shared with the windowed streams of this grouping, as in Kafka.
        self._named_repartition: dict[str, str] = {}

    def count(
        self,
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
    ) -> KTable[KT, int]:
        """The number of records per key (per key and window, once ``windowed_by``). Records with
        a null key are not counted, nor, unless windowed, records with a null value."""
        if self._count_draws_store_index:
            draw_count_store_index(self._builder, materialized, named)
        mat, name = aggregation_store_and_name(materialized, named, "count()")
        return self._aggregate(
            "count", naming.AGGREGATE, mat, name, count_initializer, count_aggregator, Serdes.long()
        )

    def reduce(
        self,
        reducer: Callable[[V, V], V],
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
    ) -> KTable[KT, V]:
        """Per key (and window), ``reducer(aggregate, value)`` over the records (the first value
        starts it)."""
        if not callable(reducer):
            raise TypeError(f"reduce() needs a reducer(aggregate, value) function, got {reducer!r}.")
        mat, name = aggregation_store_and_name(materialized, named, "reduce()")
        return self._aggregate("reduce", naming.REDUCE, mat, name, None, reducer, self._value_serde)

    def aggregate(
        self,
        initializer: Callable[[], VA],
        aggregator: Callable[[K, V, VA], VA],
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
    ) -> KTable[KT, VA]:
        """Per key (and window), ``aggregator(key, value, aggregate)`` starting from ``initializer()``."""
        for what, function in (("initializer", initializer), ("aggregator", aggregator)):
            if not callable(function):
                raise TypeError(f"aggregate() needs a callable {what}, got {function!r}.")
        mat, name = aggregation_store_and_name(materialized, named, "aggregate()")
        return self._aggregate("aggregate", naming.AGGREGATE, mat, name, initializer, aggregator, None)

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
        """Add the aggregation's processor (after a repartition when needed) and its store (with
        the emit position beside it when emitting on window close); the table of its results."""
        builder = self._builder
        store_name, key_serde, value_serde = materialized_store(
            builder, materialized, prefix, self._key_serde, value_serde_default
        )
        store_builder, supplier = self._store_and_supplier(
            kind, materialized, store_name, initializer, aggregator, key_serde, value_serde
        )
        # Emitting on window close: the store that keeps how far the final results went out. A
        # time-window store caches as ``materialized`` says (as Kafka's): its cache forwards
        # nothing, but reads through it still see the windows it holds (see
        # WindowStoreAggregateProcessor); a sliding-window store never caches, as in Kafka.
        position_builder = None
        if self._emits_on_close():
            if not self._emit_close_caches:
                store_builder.with_caching_disabled()
            position_builder = emit_position_store_builder(store_builder)
        processor = builder.name_or_generate(name, prefix)
        parent, sources = self._parent_for(store_name)
        builder.add_processor(processor, supplier, parent)
        builder.add_store(store_builder, processor)
        if position_builder is not None:
            builder.add_store(position_builder, processor)
        # A windowed table's keys are windows: no key serde of its own; it is looked up by its
        # windowed keys (a join of two windowed tables).
        keyed = isinstance(supplier, StreamAggregateSupplier)
        return KTable(
            builder,
            processor,
            key_serde if keyed else None,
            value_serde,
            sources,
            supplier,
            StoreValueGetterSupplier(store_name) if keyed else WindowStoreValueGetterSupplier(store_name),
            queryable_store_name=materialized.store_name,
        )

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
        """The aggregation's store builder and processor supplier: over all time into a key-value
        store, or per time window into a window store."""
        windows = self.windows
        if windows is None:
            store_builder = key_value_store_builder(materialized, store_name, key_serde, value_serde)
            return store_builder, StreamAggregateSupplier(
                kind, store_name, initializer, aggregator, key_serde, value_serde
            )
        store_builder = _window_store_builder(
            materialized, store_name, windows, key_serde, value_serde, self._emits_on_close()
        )
        return store_builder, WindowedAggregateSupplier(
            kind, store_name, windows, initializer, aggregator, key_serde, value_serde, self.emit
        )

    def _emits_on_close(self) -> bool:
        return self.emit is not None and self.emit.on_close

    def _parent_for(self, store_name: str) -> tuple[str, frozenset[str]]:
        """The node the aggregation reads from, after a repartition when one is needed. As Kafka's
        ``GroupedStreamAggregateBuilder``: a repartition named by ``Grouped`` is made once and
        read by every aggregation of this grouping (the names of another are drawn all the same);
        an unnamed one is made per aggregation, named after its store."""
        if not self._repartition_required:
            return self._name, self._source_nodes
        made = self._named_repartition.get("source")
        if self._grouped_name is not None and made is not None:
            self._builder.draw_repartition_names()
            return made, frozenset((made,))
        prefix = self._grouped_name if self._grouped_name is not None else store_name
        source = self._builder.repartition(self._name, prefix, self._key_serde, self._value_serde)
        if self._grouped_name is not None:
            self._named_repartition["source"] = source
        return source, frozenset((source,))


class KGroupedStream(_Grouping[K, K, V], Generic[K, V]):
    """A stream grouped by key, ready to aggregate. Create one with ``group_by_key``/``group_by``."""

    @overload
    def windowed_by(self, windows: TimeWindows) -> TimeWindowedKStream[K, V]: ...

    @overload
    def windowed_by(self, windows: SlidingWindows) -> SlidingWindowedKStream[K, V]: ...

    @overload
    def windowed_by(self, windows: SessionWindows) -> SessionWindowedKStream[K, V]: ...

    def windowed_by(self, windows: Any) -> Any:
        """Aggregate per time window (tumbling or hopping), per sliding window or per session of
        activity (``SessionWindows``) instead of over all time."""
        if isinstance(windows, SessionWindows):
            # Per session of activity: the repartition (when needed) is named after its store.
            return SessionWindowedKStream(
                self._builder, self._key_serde, self._value_serde, windows, self._parent_for
            )
        if isinstance(windows, SlidingWindows):
            # Imported here: the sliding-windowed stream builds on this module's _Grouping.
            from kstreams.topology.dsl.sliding_windowed import SlidingWindowedKStream

            sliding: SlidingWindowedKStream[K, V] = SlidingWindowedKStream(
                self._builder,
                self._name,
                self._key_serde,
                self._value_serde,
                self._repartition_required,
                self._grouped_name,
                self._source_nodes,
                windows,
            )
            sliding._named_repartition = self._named_repartition
            return sliding
        if not isinstance(windows, TimeWindows):
            raise TypeError(
                f"windowed_by() takes TimeWindows, SlidingWindows or SessionWindows, got {windows!r}."
            )
        windowed: TimeWindowedKStream[K, V] = TimeWindowedKStream(
            self._builder,
            self._name,
            self._key_serde,
            self._value_serde,
            self._repartition_required,
            self._grouped_name,
            self._source_nodes,
            windows,
        )
        windowed._named_repartition = self._named_repartition
        return windowed

    def cogroup(self, aggregator: Callable[[K, V, VA], VA]) -> CogroupedKStream[K, VA]:
        """Start a cogroup (KIP-150): this stream, aggregated by ``aggregator(key, value, aggregate)``,
        and the grouped streams added with ``.cogroup(other, aggregator)``, all into one table."""
        from kstreams.topology.dsl.cogrouped import CogroupedKStream  # it builds on this module

        return CogroupedKStream(self, aggregator)


class TimeWindowedKStream(_Grouping[WindowedKey[K], K, V], Generic[K, V]):
    """A grouped stream aggregated per time window; results are keyed by ``WindowedKey[K]``."""

    def __init__(
        self,
        builder: InternalStreamsBuilder,
        name: str,
        key_serde: Any,
        value_serde: Any,
        repartition_required: bool,
        grouped_name: str | None,
        source_nodes: Iterable[str],
        windows: TimeWindows,
    ) -> None:
        super().__init__(
            builder, name, key_serde, value_serde, repartition_required, grouped_name, source_nodes
        )
        self.windows = windows

    def emit_strategy(self, emit_strategy: EmitStrategy) -> TimeWindowedKStream[K, V]:
        """When the aggregations of this windowed stream forward: ``EmitStrategy.on_window_close()``
        (each window's final result once, when it closes) or ``on_window_update()`` (the default)."""
        self.emit = require_emit_strategy(emit_strategy)
        return self


def _window_store_builder(
    materialized: Materialized,
    store_name: str,
    windows: TimeWindows,
    key_serde: Any,
    value_serde: Any,
    emit_on_close: bool = False,
) -> Any:
    """The window store of a windowed aggregation: retention of window size plus grace unless
    ``materialized`` sets a longer one (a shorter one is refused); Kafka's time-ordered store by
    default when it emits on window close."""
    retention_ms = aggregation_retention_ms(
        materialized,
        "window",
        store_name,
        windows.size_ms + windows.grace_ms,
        f"be at least the window size plus grace ({windows.size_ms} + {windows.grace_ms} ms)",
    )
    return aggregation_window_store_builder(
        materialized, store_name, retention_ms, windows.size_ms, key_serde, value_serde, emit_on_close
    )
