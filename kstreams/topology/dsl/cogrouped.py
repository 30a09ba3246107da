"""Cogrouped streams (KIP-150): several grouped streams aggregated into one table through one store.

``grouped.cogroup(aggregator)`` starts a ``CogroupedKStream``; ``.cogroup(other, aggregator)``
adds streams, each with its own ``aggregator(key, value, aggregate)``; ``.aggregate(initializer)``
makes the table, per window after ``windowed_by(TimeWindows | SlidingWindows)``, per session after
``windowed_by(SessionWindows)`` (``.aggregate(initializer, session_merger)``). As in Kafka
(CogroupedStreamAggregateBuilder):
- one store, ``COGROUPKSTREAM-AGGREGATE-STATE-STORE-<n>`` unless named, shared by one aggregate
  processor per input (``COGROUPKSTREAM-AGGREGATE-<n>``, or ``<name>-cogroup-agg-<i>``), which
  all forward into one pass-through node (``COGROUPKSTREAM-MERGE-<n>``, ``<name>-cogroup-merge``);
- an input whose key may have changed is repartitioned first, through a topic named after its
  ``Grouped`` name, else after the store (``<store>-repartition``); aggregating the cogroup
  again (windowed or not) reads the same repartition topic;
- all inputs must be co-partitioned.

Each input's processor is the stream aggregation of its kind (``processors/aggregate.py``,
``sliding_aggregate.py``, ``session_aggregate.py``) with that input's aggregator, so records,
timestamps and grace follow the same rules; as in Kafka, each input's processor keeps its own stream
time.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from kstreams.state.store import WindowedKey
from kstreams.topology.dsl import naming
from kstreams.topology.dsl.ktable import KTable
from kstreams.topology.dsl.materialize import (
    aggregation_retention_ms,
    key_value_store_builder,
    materialized_store,
    session_store_builder,
)
from kstreams.topology.dsl.parameters import Materialized, Named, aggregation_store_and_name
from kstreams.topology.dsl.processors.aggregate import StreamAggregateSupplier, WindowedAggregateSupplier
from kstreams.topology.dsl.processors.table import (
    SessionStoreValueGetterSupplier,
    StoreValueGetterSupplier,
    TableMergeSupplier,
    ValueGetterSupplier,
    WindowStoreValueGetterSupplier,
)
from kstreams.topology.dsl.windowed_serdes import SessionWindowedSerde
from kstreams.topology.dsl.windows import SessionWindows, SlidingWindows, TimeWindows

if TYPE_CHECKING:
    from kstreams.topology.dsl.grouped import KGroupedStream

__all__ = ["CogroupedKStream", "SessionWindowedCogroupedKStream", "TimeWindowedCogroupedKStream"]

logger = logging.getLogger(__name__)

K = TypeVar("K")
VOut = TypeVar("VOut")

Aggregator = Callable[[Any, Any, Any], Any]


class _Cogroup:
    """The inputs of a cogroup, in the order they were added, each with its aggregator."""

    def __init__(self, first: KGroupedStream[Any, Any], aggregator: Aggregator) -> None:
        self.inputs: list[tuple[KGroupedStream[Any, Any], Aggregator]] = []
        # The node each input is aggregated from, by its index in ``inputs``, once an aggregate
        # made it: as in Kafka, a cogroup aggregated again reuses its inputs' repartitions.
        self._parents: dict[int, tuple[str, frozenset[str]]] = {}
        self.add(first, aggregator)

    def add(self, grouped: KGroupedStream[Any, Any], aggregator: Aggregator) -> None:
        from kstreams.topology.dsl.grouped import KGroupedStream

        if not isinstance(grouped, KGroupedStream) or grouped.windows is not None:
            raise TypeError(
                f"cogroup() takes a KGroupedStream (from group_by_key/group_by), got {grouped!r}."
            )
        if not callable(aggregator):
            raise TypeError(f"cogroup() needs an aggregator(key, value, aggregate), got {aggregator!r}.")
        if any(existing is grouped for existing, _ in self.inputs):
            raise ValueError(
                "This grouped stream is already part of the cogroup: add each grouped stream once, with "
                "one aggregator (combine the logic in that aggregator)."
            )
        if self.inputs and grouped._builder is not self.inputs[0][0]._builder:
            raise ValueError("cogroup() joins grouped streams of one StreamsBuilder only.")
        self.inputs.append((grouped, aggregator))

    def build(
        self,
        initializer: Callable[[], Any],
        materialized: Materialized,
        name: str | None,
        windowing: _Windowing,
    ) -> KTable[Any, Any]:
        if not callable(initializer):
            raise TypeError(
                f"aggregate() needs an initializer() returning the first aggregate, got {initializer!r}."
            )
        first = self.inputs[0][0]
        builder = first._builder
        # Kafka generates the store's name first, then the repartitions, then the processors.
        store_name, key_serde, value_serde = materialized_store(
            builder, materialized, naming.COGROUP_AGGREGATE, first._key_serde, None
        )
        store_builder = windowing.store_builder(materialized, store_name, key_serde, value_serde)
        parents = [self._parent_for(index, store_name) for index in range(len(self.inputs))]
        sources = frozenset().union(*(nodes for _, nodes in parents))
        builder.copartition(sources)
        processors: list[str] = []
        for index, ((_, aggregator), (parent, _)) in enumerate(zip(self.inputs, parents, strict=True)):
            supplier = windowing.supplier(store_name, initializer, aggregator, key_serde, value_serde)
            processor = _named(builder, name, f"-cogroup-agg-{index}", naming.COGROUP_AGGREGATE)
            builder.add_processor(processor, supplier, parent)
            processors.append(processor)
        builder.add_store(store_builder, *processors)
        merge = _named(builder, name, "-cogroup-merge", naming.COGROUP_MERGE)
        # The aggregate processors forward Change(new, old) already: the merge passes them on.
        merge_supplier = TableMergeSupplier(None)
        builder.add_processor(merge, merge_supplier, *processors)
        logger.debug("Cogroup of %d streams into store %s laid out.", len(self.inputs), store_name)
        return KTable(
            builder,
            merge,
            windowing.table_key_serde(key_serde),
            value_serde,
            sources,
            merge_supplier,
            windowing.value_getter(store_name),
            queryable_store_name=materialized.store_name,
        )

    def _parent_for(self, index: int, store_name: str) -> tuple[str, frozenset[str]]:
        """The node input ``index`` is aggregated from and its source nodes: its repartition's
        source, made by the first aggregate that needed it."""
        grouped = self.inputs[index][0]
        parent = self._parents.get(index)
        if parent is None:
            parent = self._parents[index] = grouped._parent_for(store_name)
        elif grouped._repartition_required:
            # Kafka prepares a new repartition on every aggregate, drawing its names, and then
            # keeps the one it made first.
            grouped._builder.draw_repartition_names()
        return parent


class _Windowing(abc.ABC):
    """How a cogroup aggregates: over all time or per window kind. Each input's processor is that
    kind's stream aggregation, with the input's aggregator."""

    @abc.abstractmethod
    def supplier(
        self,
        store_name: str,
        initializer: Callable[[], Any],
        aggregator: Aggregator,
        key_serde: Any,
        value_serde: Any,
    ) -> Any: ...

    @abc.abstractmethod
    def store_builder(
        self, materialized: Materialized, store_name: str, key_serde: Any, value_serde: Any
    ) -> Any: ...

    def table_key_serde(self, key_serde: Any) -> Any:
        """The result table's key serde (windowed keys have none of their own)."""
        return None

    def value_getter(self, store_name: str) -> ValueGetterSupplier:
        """How the result table is looked up: by window, in its window store (a join of two
        windowed tables looks up the other's rows by windowed key)."""
        return WindowStoreValueGetterSupplier(store_name)


class _Unwindowed(_Windowing):
    def supplier(
        self,
        store_name: str,
        initializer: Callable[[], Any],
        aggregator: Aggregator,
        key_serde: Any,
        value_serde: Any,
    ) -> Any:
        return StreamAggregateSupplier(
            "aggregate", store_name, initializer, aggregator, key_serde, value_serde
        )

    def store_builder(
        self, materialized: Materialized, store_name: str, key_serde: Any, value_serde: Any
    ) -> Any:
        return key_value_store_builder(materialized, store_name, key_serde, value_serde)

    def table_key_serde(self, key_serde: Any) -> Any:
        return key_serde

    def value_getter(self, store_name: str) -> ValueGetterSupplier:
        return StoreValueGetterSupplier(store_name)


class _Windowed(_Windowing):
    """Time or sliding windows: each input runs that kind's stream aggregation (``supplier_type``)
    into that kind's window store (``store_builder_of``), as ``grouped.windowed_by`` would."""

    def __init__(
        self,
        windows: TimeWindows | SlidingWindows,
        supplier_type: Callable[..., Any],
        store_builder_of: Callable[[Materialized, str, Any, Any, Any], Any],
    ) -> None:
        self.windows = windows
        self._supplier_type = supplier_type
        self._store_builder_of = store_builder_of

    def supplier(
        self,
        store_name: str,
        initializer: Callable[[], Any],
        aggregator: Aggregator,
        key_serde: Any,
        value_serde: Any,
    ) -> Any:
        return self._supplier_type(
            "aggregate", store_name, self.windows, initializer, aggregator, key_serde, value_serde
        )

    def store_builder(
        self, materialized: Materialized, store_name: str, key_serde: Any, value_serde: Any
    ) -> Any:
        return self._store_builder_of(materialized, store_name, self.windows, key_serde, value_serde)


class _Session(_Windowing):
    def __init__(self, windows: SessionWindows, merger: Callable[[Any, Any, Any], Any]) -> None:
        self.windows = windows
        self.merger = merger

    def supplier(
        self,
        store_name: str,
        initializer: Callable[[], Any],
        aggregator: Aggregator,
        key_serde: Any,
        value_serde: Any,
    ) -> Any:
        from kstreams.topology.dsl.processors.session_aggregate import SessionAggregateSupplier

        return SessionAggregateSupplier(
            "aggregate",
            store_name,
            self.windows,
            initializer,
            aggregator,
            self.merger,
            key_serde,
            value_serde,
        )

    def store_builder(
        self, materialized: Materialized, store_name: str, key_serde: Any, value_serde: Any
    ) -> Any:
        # Kafka's rule for session stores: retention at least the inactivity gap plus grace.
        gap_ms, grace_ms = self.windows.gap_ms, self.windows.grace_ms
        retention_ms = aggregation_retention_ms(
            materialized,
            "session",
            store_name,
            gap_ms + grace_ms,
            f"be at least the session inactivity gap plus grace ({gap_ms} + {grace_ms} ms)",
        )
        return session_store_builder(materialized, store_name, retention_ms, key_serde, value_serde)

    def table_key_serde(self, key_serde: Any) -> Any:
        # Kafka's session table carries the session-windowed serde of the key's serde.
        return SessionWindowedSerde(key_serde) if key_serde is not None else None

    def value_getter(self, store_name: str) -> ValueGetterSupplier:
        return SessionStoreValueGetterSupplier(store_name)


def _named(builder: Any, base: str | None, suffix: str, prefix: str) -> str:
    """``base + suffix`` when named, else generated; a named node still draws its index, as Kafka's
    names do, so later generated names do not depend on the naming."""
    generated: str = builder.new_processor_name(prefix)
    return generated if base is None else base + suffix


class CogroupedKStream(Generic[K, VOut]):
    """Grouped streams of one key type, each with its aggregator, to aggregate into one table.
    Create one with ``KGroupedStream.cogroup(aggregator)``."""

    def __init__(self, first: KGroupedStream[K, Any], aggregator: Aggregator) -> None:
        self._cogroup = _Cogroup(first, aggregator)

    def cogroup(
        self, grouped: KGroupedStream[K, Any], aggregator: Callable[[K, Any, VOut], VOut]
    ) -> CogroupedKStream[K, VOut]:
        """Add another grouped stream, aggregated into the same table by ``aggregator(key, value,
        aggregate)``."""
        self._cogroup.add(grouped, aggregator)
        return self

    @overload
    def windowed_by(self, windows: TimeWindows | SlidingWindows) -> TimeWindowedCogroupedKStream[K, VOut]: ...

    @overload
    def windowed_by(self, windows: SessionWindows) -> SessionWindowedCogroupedKStream[K, VOut]: ...

    def windowed_by(self, windows: Any) -> Any:
        """Aggregate per time window (tumbling or hopping), per sliding window, or per session of
        activity (``SessionWindows``; its ``aggregate`` then also takes a session merger)."""
        # Imported on use, as the grouped streams import this module: neither loads the other.
        if isinstance(windows, TimeWindows):
            from kstreams.topology.dsl.grouped import _window_store_builder

            windowed = _Windowed(windows, WindowedAggregateSupplier, _window_store_builder)
            return TimeWindowedCogroupedKStream(self._cogroup, windowed)
        if isinstance(windows, SlidingWindows):
            from kstreams.topology.dsl.processors.sliding_aggregate import SlidingWindowAggregateSupplier
            from kstreams.topology.dsl.sliding_windowed import sliding_window_store_builder

            windowed = _Windowed(windows, SlidingWindowAggregateSupplier, sliding_window_store_builder)
            return TimeWindowedCogroupedKStream(self._cogroup, windowed)
        if isinstance(windows, SessionWindows):
            return SessionWindowedCogroupedKStream(self._cogroup, windows)
        raise TypeError(
            "CogroupedKStream.windowed_by() takes TimeWindows, SlidingWindows or SessionWindows, "
            f"got {windows!r}."
        )

    def aggregate(
        self,
        initializer: Callable[[], VOut],
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
    ) -> KTable[K, VOut]:
        """The table of each key's aggregate: ``initializer()`` updated by each input's aggregator
        for each of its records (records with a null key or value are skipped)."""
        mat, name = aggregation_store_and_name(materialized, named, "CogroupedKStream.aggregate()")
        return self._cogroup.build(initializer, mat, name, _Unwindowed())


class TimeWindowedCogroupedKStream(Generic[K, VOut]):
    """A cogroup aggregated per time or sliding window; results are keyed by ``WindowedKey[K]``."""

    def __init__(self, cogroup: _Cogroup, windowing: _Windowed) -> None:
        self._cogroup = cogroup
        self._windowing = windowing
        self.windows = windowing.windows

    def aggregate(
        self,
        initializer: Callable[[], VOut],
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
    ) -> KTable[WindowedKey[K], VOut]:
        """The table of each key's aggregate per window; a record of a window closed (by stream
        time, after grace) is dropped."""
        mat, name = aggregation_store_and_name(materialized, named, "CogroupedKStream.aggregate()")
        return self._cogroup.build(initializer, mat, name, self._windowing)


class SessionWindowedCogroupedKStream(Generic[K, VOut]):
    """A cogroup aggregated per session of activity; results are keyed by ``WindowedKey[K]`` (the
    session's key, start and end)."""

    def __init__(self, cogroup: _Cogroup, windows: SessionWindows) -> None:
        self._cogroup = cogroup
        self.windows = windows

    def aggregate(
        self,
        initializer: Callable[[], VOut],
        session_merger: Callable[[K, VOut, VOut], VOut],
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
    ) -> KTable[WindowedKey[K], VOut]:
        """The table of each key's aggregate per session; ``session_merger(key, aggregate1,
        aggregate2)`` combines two sessions that a record joins into one."""
        if not callable(session_merger):
            raise TypeError(f"aggregate() needs a session_merger(key, agg1, agg2), got {session_merger!r}.")
        mat, name = aggregation_store_and_name(materialized, named, "CogroupedKStream.aggregate()")
        return self._cogroup.build(initializer, mat, name, _Session(self.windows, session_merger))
