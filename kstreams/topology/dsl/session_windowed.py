"""SessionWindowedKStream: a grouped stream aggregated per session (``windowed_by(SessionWindows)``).

Its aggregations return a KTable keyed by ``WindowedKey(key, session_start, session_end)`` and kept
in a session store (persistent unless ``Materialized`` says otherwise; logged to
``<application.id>-<store>-changelog``; cached as ``Materialized`` says). The store keeps sessions
for the inactivity gap plus grace, or longer when ``Materialized.with_retention`` asks; a shorter
retention is refused, as Kafka refuses it. Names follow Kafka's: ``count`` and ``aggregate`` are
``KSTREAM-AGGREGATE-`` processors over ``KSTREAM-AGGREGATE-STATE-STORE-`` stores, ``reduce`` a
``KSTREAM-REDUCE-`` one, and a repartition (when the key may have changed) is inserted first.

``emit_strategy(EmitStrategy.on_window_close())`` forwards each session's final result once, when
stream time passes its end plus gap plus grace (Kafka 3.3+, KIP-825); the store is then never
cached (as Kafka's), it is Kafka's time-ordered session store unless ``Materialized`` asks for an
in-memory store or gives a supplier (see ``RocksDBSessionStore``), and an
``<store>-emit-position`` key-value store beside it keeps how far the results went out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from kstreams.serdes import Serdes
from kstreams.state.store import WindowedKey
from kstreams.topology.dsl import naming
from kstreams.topology.dsl.emit_strategy import EmitStrategy, require_emit_strategy
from kstreams.topology.dsl.internal_builder import InternalStreamsBuilder
from kstreams.topology.dsl.ktable import KTable
from kstreams.topology.dsl.materialize import (
    draw_count_store_index,
    materialized_store,
    session_store_builder,
)
from kstreams.topology.dsl.parameters import Materialized, Named, aggregation_store_and_name
from kstreams.topology.dsl.processors.aggregate import AggregateKind, count_aggregator, count_initializer
from kstreams.topology.dsl.processors.emit_position import emit_position_store_builder
from kstreams.topology.dsl.processors.session_aggregate import (
    ReduceMerger,
    SessionAggregateSupplier,
    count_merger,
)
from kstreams.topology.dsl.processors.table import SessionStoreValueGetterSupplier
from kstreams.topology.dsl.windowed_serdes import SessionWindowedSerde
from kstreams.topology.dsl.windows import SessionWindows

__all__ = ["SessionWindowedKStream"]

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")
VA = TypeVar("VA")

# Where a grouped stream's aggregation reads from, given its store's name (after a repartition
# named after the store when one is needed): the node and the stream's source nodes.
ParentFor = Callable[[str], tuple[str, frozenset[str]]]


class SessionWindowedKStream(Generic[K, V]):
    """A grouped stream aggregated per session; results are keyed by ``WindowedKey[K]`` whose
    ``start`` and ``end`` are the session's first and last record timestamps (both inclusive).
    Create one with ``KGroupedStream.windowed_by(SessionWindows...)``."""

    def __init__(
        self,
        builder: InternalStreamsBuilder,
        key_serde: Any,
        value_serde: Any,
        windows: SessionWindows,
        parent_for: ParentFor,
    ) -> None:
        if not isinstance(windows, SessionWindows):
            raise TypeError(f"SessionWindowedKStream needs SessionWindows, got {windows!r}.")
        self._builder = builder
        self._key_serde = key_serde
        self._value_serde = value_serde
        self.windows = windows
        self._parent_for = parent_for
        self.emit: EmitStrategy | None = None

    def emit_strategy(self, emit_strategy: EmitStrategy) -> SessionWindowedKStream[K, V]:
        """When the aggregations of this stream forward: ``EmitStrategy.on_window_close()`` (each
        session's final result once, when it closes; merged-away sessions never) or
        ``on_window_update()`` (every update and tombstone, the default)."""
        self.emit = require_emit_strategy(emit_strategy)
        return self

    def count(
        self,
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
    ) -> KTable[WindowedKey[K], int]:
        """The number of records per key and session (records with a null key are not counted;
        null values are)."""
        draw_count_store_index(self._builder, materialized, named)
        mat, name = aggregation_store_and_name(materialized, named, "SessionWindowedKStream.count()")
        return self._aggregate(
            "count",
            naming.AGGREGATE,
            mat,
            name,
            count_initializer,
            count_aggregator,
            count_merger,
            Serdes.long(),
        )

    def reduce(
        self,
        reducer: Callable[[V, V], V],
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
    ) -> KTable[WindowedKey[K], V]:
        """Per key and session, ``reducer(aggregate, value)`` over the records (the first value
        starts it); merged sessions combine as ``reducer(earlier_aggregate, later_aggregate)``."""
        if not callable(reducer):
            raise TypeError(f"reduce() needs a reducer(aggregate, value) function, got {reducer!r}.")
        mat, name = aggregation_store_and_name(materialized, named, "SessionWindowedKStream.reduce()")
        merger = ReduceMerger(reducer)
        return self._aggregate("reduce", naming.REDUCE, mat, name, None, reducer, merger, self._value_serde)

    def aggregate(
        self,
        initializer: Callable[[], VA],
        aggregator: Callable[[K, V, VA], VA],
        merger: Callable[[K, VA, VA], VA],
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
    ) -> KTable[WindowedKey[K], VA]:
        """Per key and session, ``aggregator(key, value, aggregate)`` starting from
        ``initializer()``; when a record bridges sessions, ``merger(key, agg1, agg2)`` combines
        their aggregates first."""
        for what, function in (("initializer", initializer), ("aggregator", aggregator), ("merger", merger)):
            if not callable(function):
                raise TypeError(f"aggregate() needs a callable {what}, got {function!r}.")
        mat, name = aggregation_store_and_name(materialized, named, "SessionWindowedKStream.aggregate()")
        return self._aggregate(
            "aggregate", naming.AGGREGATE, mat, name, initializer, aggregator, merger, None
        )

    def _aggregate(
        self,
        kind: AggregateKind,
        prefix: str,
        materialized: Materialized,
        name: str | None,
        initializer: Callable[[], Any] | None,
        aggregator: Callable[..., Any],
        merger: Callable[[Any, Any, Any], Any],
        value_serde_default: Any,
    ) -> KTable[Any, Any]:
        """Add the aggregation's processor (after a repartition when needed) and its session store;
        the table of its results."""
        builder = self._builder
        _check_supplier(materialized)
        # Kafka generates the store's name before the processor's.
        store_name, key_serde, value_serde = materialized_store(
            builder, materialized, prefix, self._key_serde, value_serde_default
        )
        emit_on_close = self.emit is not None and self.emit.on_close
        retention_ms = self._retention_ms(materialized, store_name)
        store_builder = session_store_builder(
            materialized, store_name, retention_ms, key_serde, value_serde, time_ordered=emit_on_close
        )
        position_builder = None
        if emit_on_close:
            # As in Kafka, never cached: its results leave only when their sessions close.
            store_builder.with_caching_disabled()
            position_builder = emit_position_store_builder(store_builder)
        supplier = SessionAggregateSupplier(
            kind, store_name, self.windows, initializer, aggregator, merger, key_serde, value_serde, self.emit
        )
        processor = builder.name_or_generate(name, prefix)
        parent, sources = self._parent_for(store_name)
        builder.add_processor(processor, supplier, parent)
        builder.add_store(store_builder, processor)
        if position_builder is not None:
            builder.add_store(position_builder, processor)
        return KTable(
            builder,
            processor,
            # Kafka's windowed table carries the session-windowed serde of the key's serde.
            SessionWindowedSerde(key_serde) if key_serde is not None else None,
            value_serde,
            sources,
            supplier,
            # A session table's keys are sessions: it is looked up by session.
            SessionStoreValueGetterSupplier(store_name),
            queryable_store_name=materialized.store_name,
        )

    def _retention_ms(self, materialized: Materialized, store_name: str) -> int:
        """The store's retention: gap plus grace unless ``materialized`` sets a longer one."""
        windows = self.windows
        minimum = windows.gap_ms + windows.grace_ms
        retention_ms = minimum if materialized.retention_ms is None else materialized.retention_ms
        if retention_ms < minimum:
            raise ValueError(
                f"The retention of session store {store_name} ({retention_ms} ms) must be at least the "
                f"session inactivity gap plus grace ({windows.gap_ms} + {windows.grace_ms} ms): raise it "
                "with Materialized.with_retention(...)."
            )
        return retention_ms


def _check_supplier(materialized: Materialized) -> None:
    """Refuse a store supplier of another kind than session stores."""
    supplier = materialized.store_supplier
    if supplier is None:
        return
    # Imported on use, as materialize.py does: describing a topology needs no compiled core.
    from kstreams.state.suppliers import SessionBytesStoreSupplier

    if not isinstance(supplier, SessionBytesStoreSupplier):
        raise TypeError(
            f"A session-windowed aggregation keeps its results in a session store, but Materialized "
            f"was given {supplier!r}: use Stores.persistent_session_store(...) or "
            "Stores.in_memory_session_store(...)."
        )
