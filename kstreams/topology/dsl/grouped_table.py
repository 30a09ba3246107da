"""KGroupedTable: a table re-grouped by a new key, and its aggregations.

``table.group_by(selector)`` picks a new key (and value) per row; the aggregations keep one value
per new key, updated as rows change: a changed row is subtracted from its old group and added to
its new one. The changes go through a repartition topic named after ``Grouped.as_`` when given,
else after the store (``KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition``), as in Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from kstreams.serdes import Serdes
from kstreams.topology.dsl import naming
from kstreams.topology.dsl.internal_builder import InternalStreamsBuilder
from kstreams.topology.dsl.ktable import KTable
from kstreams.topology.dsl.materialize import key_value_store_builder, materialized_store
from kstreams.topology.dsl.parameters import Materialized, Named, aggregation_store_and_name
from kstreams.topology.dsl.processors.aggregate import AggregateKind, count_aggregator, count_initializer
from kstreams.topology.dsl.processors.table import StoreValueGetterSupplier
from kstreams.topology.dsl.processors.table_aggregate import (
    ChangeSerde,
    TableAggregateSupplier,
)

__all__ = ["KGroupedTable"]

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")
VA = TypeVar("VA")


def _count_subtractor(key: Any, value: Any, count: int) -> int:
    return count - 1


class KGroupedTable(Generic[K, V]):
    """A table grouped by a new key (of type ``K``, rows of type ``V``), ready to aggregate. Create
    one with ``KTable.group_by``."""

    def __init__(
        self,
        builder: InternalStreamsBuilder,
        name: str,
        key_serde: Any,
        value_serde: Any,
        grouped_name: str | None,
        change_serde: ChangeSerde,
        source_nodes: Iterable[str],
    ) -> None:
        self._builder = builder
        self._name = name
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._grouped_name = grouped_name
        self._change_serde = change_serde
        self._source_nodes = frozenset(source_nodes)
        # The source of the repartition named by ``grouped_name``, once an aggregation made it.
        self._named_repartition: str | None = None

    def count(
        self,
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
    ) -> KTable[K, int]:
        """The number of rows per new key."""
        return self._aggregate(
            "count",
            naming.KTABLE_AGGREGATE,
            materialized,
            named,
            count_initializer,
            count_aggregator,
            _count_subtractor,
            Serdes.long(),
        )

    def reduce(
        self,
        adder: Callable[[V, V], V],
        subtractor: Callable[[V, V], V],
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
    ) -> KTable[K, V]:
        """Per new key, ``adder(aggregate, value)`` for rows joining the group and
        ``subtractor(aggregate, value)`` for rows leaving it."""
        return self._aggregate(
            "reduce", naming.KTABLE_REDUCE, materialized, named, None, adder, subtractor, self._value_serde
        )

    def aggregate(
        self,
        initializer: Callable[[], VA],
        adder: Callable[[K, V, VA], VA],
        subtractor: Callable[[K, V, VA], VA],
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
    ) -> KTable[K, VA]:
        """Per new key, ``adder(key, value, aggregate)`` / ``subtractor(key, value, aggregate)``
        starting from ``initializer()``."""
        return self._aggregate(
            "aggregate", naming.KTABLE_AGGREGATE, materialized, named, initializer, adder, subtractor, None
        )

    def _aggregate(
        self,
        kind: AggregateKind,
        prefix: str,
        materialized: Materialized | Named | None,
        named: Named | str | Materialized | None,
        initializer: Callable[[], Any] | None,
        adder: Callable[..., Any],
        subtractor: Callable[..., Any],
        value_serde_default: Any,
    ) -> KTable[Any, Any]:
        mat, name = aggregation_store_and_name(materialized, named, f"KGroupedTable.{kind}()")
        builder = self._builder
        # Kafka names a grouped table's store KTABLE-AGGREGATE-STATE-STORE-<n> for reduce too.
        store_name, key_serde, value_serde = materialized_store(
            builder, mat, naming.KTABLE_AGGREGATE, self._key_serde, value_serde_default
        )
        sink = builder.suffixed_or_generate(name, "-sink", naming.SINK)
        source = builder.suffixed_or_generate(name, "-source", naming.SOURCE)
        processor = builder.name_or_generate(name, prefix)
        if self._grouped_name is not None and self._named_repartition is not None:
            # As Kafka's KGroupedTableImpl: a repartition named by Grouped is made once and read
            # by every aggregation of this grouping (the names above are drawn all the same).
            source = self._named_repartition
        else:
            topic = (self._grouped_name or store_name) + naming.REPARTITION_SUFFIX
            builder.topology.add_internal_topic(topic)
            builder.add_sink(sink, topic, self._name, self._key_serde, self._change_serde)
            builder.add_source(source, (topic,), self._key_serde, self._change_serde)
            if self._grouped_name is not None:
                self._named_repartition = source
        supplier = TableAggregateSupplier(
            kind, store_name, initializer, adder, subtractor, self._change_serde, key_serde, value_serde
        )
        builder.add_processor(processor, supplier, source)
        builder.add_store(key_value_store_builder(mat, store_name, key_serde, value_serde), processor)
        return KTable(
            builder,
            processor,
            key_serde,
            value_serde,
            (source,),
            supplier,
            StoreValueGetterSupplier(store_name),
            queryable_store_name=mat.store_name,
        )
