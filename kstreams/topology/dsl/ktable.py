"""KTable: a changelog stream seen as a table, one current value per key.

A KTable comes from a topic (``StreamsBuilder.table``), an aggregation, or another table. Its
processors pass ``Change(new, old)`` updates; ``to_stream()`` turns them back into records.
A table is kept in a state store when it is materialized (by ``Materialized``, because it is an
aggregation, or because a join needs to look it up); an unmaterialized derived table computes its
values from its parent's on lookup.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, overload

from kstreams.errors import TopologyException
from kstreams.topology.dsl import naming
from kstreams.topology.dsl.foreign_key_join import (
    ForeignKeyJoinCall,
    TableJoined,
    foreign_key_join,
    parse_table_join_call,
)
from kstreams.topology.dsl.internal_builder import InternalStreamsBuilder
from kstreams.topology.dsl.kstream import KStream
from kstreams.topology.dsl.materialize import key_value_store_builder, materialized_store
from kstreams.topology.dsl.parameters import (
    Grouped,
    Materialized,
    Named,
    leading_options,
    materialized_and_named,
    named_as,
)
from kstreams.topology.dsl.processors.table import (
    FilterValueGetterSupplier,
    JoinValueGetterSupplier,
    MapValuesGetterSupplier,
    StoreValueGetterSupplier,
    TableFilterSupplier,
    TableJoinSupplier,
    TableMapValuesSupplier,
    TableMergeSupplier,
    TableSourceSupplier,
    TableToStreamSupplier,
    ValueGetterSupplier,
)
from kstreams.topology.dsl.processors.table_aggregate import ChangeSerde, TableSelectSupplier
from kstreams.topology.dsl.value_transformer import ValueTransformerWithKey

if TYPE_CHECKING:
    from kstreams.topology.dsl.grouped_table import KGroupedTable
    from kstreams.topology.dsl.records import KeyValue
    from kstreams.topology.dsl.suppressed import Suppressed

__all__ = ["KTable", "updates_table"]

logger = logging.getLogger(__name__)

GetterFactory = Callable[[], ValueGetterSupplier]

K = TypeVar("K")
V = TypeVar("V")
KR = TypeVar("KR")
VR = TypeVar("VR")
VO = TypeVar("VO")


class KTable(Generic[K, V]):
    """A table of the latest value (of type ``V``) per key (of type ``K``). Create one with
    ``StreamsBuilder.table`` or an aggregation."""

    def __init__(
        self,
        builder: InternalStreamsBuilder,
        name: str,
        key_serde: Any,
        value_serde: Any,
        source_nodes: Iterable[str],
        supplier: Any,
        value_getter: ValueGetterSupplier | GetterFactory | None,
        queryable_store_name: str | None = None,
        *,
        parents: tuple[KTable[Any, Any], ...] = (),
        old_value_suppliers: tuple[Any, ...] = (),
    ) -> None:
        self._builder = builder
        self._name = name
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._source_nodes = frozenset(source_nodes)
        self._supplier = supplier
        self._getter: ValueGetterSupplier | None = None
        self._getter_factory: GetterFactory | None = None
        if isinstance(value_getter, ValueGetterSupplier):
            self._getter = value_getter
        else:
            self._getter_factory = value_getter
        self._queryable_store_name = queryable_store_name
        self._parents = parents
        # Processors that forward old values only when asked (re-grouping needs them).
        self._old_value_suppliers = old_value_suppliers

    @property
    def name(self) -> str:
        """The name of the processor this table comes out of."""
        return self._name

    @property
    def queryable_store_name(self) -> str | None:
        """The store holding this table, when it was materialized under a name (None otherwise)."""
        return self._queryable_store_name

    def __repr__(self) -> str:
        return f"KTable({self._name!r}, store={self._queryable_store_name!r})"

    def _value_getter_supplier(self) -> ValueGetterSupplier:
        """How to look this table up, materializing a source table's store on first need."""
        if self._getter is None:
            if self._getter_factory is None:
                raise TopologyException(
                    f"Table {self._name} cannot be looked up by key (its processor keeps no view of its "
                    "rows): join or query it through to_stream() and a new table instead."
                )
            self._getter = self._getter_factory()
        return self._getter

    def _enable_sending_old_values(self) -> None:
        """Make every update of this table carry the row's previous value (``Change.old_value``),
        so a re-grouping can take the row out of its old group. A source table gets a store for
        that; derived tables ask their parents."""
        if isinstance(self._supplier, TableSourceSupplier):
            self._value_getter_supplier()
        for supplier in self._old_value_suppliers:
            supplier.send_old_values = True
        for parent in self._parents:
            parent._enable_sending_old_values()

    def _sends_old_values_unforced(self) -> bool:
        """Whether this table's updates can carry each row's previous value without materializing
        anything (Kafka's ``enableSendingOldValues(forceMaterialization=false)``): a table kept in
        a key-value store always sends them (its processor reads them from the store); a table
        computed from such tables is made to send them too."""
        if isinstance(self._getter, StoreValueGetterSupplier):
            return True
        if not self._parents or not self._old_value_suppliers:
            return False
        if not all(parent._sends_old_values_unforced() for parent in self._parents):
            return False
        for supplier in self._old_value_suppliers:
            supplier.send_old_values = True
        return True

    def _store_for(
        self, materialized: Materialized | None, prefix: str, value_serde_default: Any = None
    ) -> tuple[str, Any, Any] | None:
        """The name and serdes of the store a derived table is kept in (None: not materialized)."""
        if materialized is None:
            return None
        return materialized_store(self._builder, materialized, prefix, self._key_serde, value_serde_default)

    def _derived_table(
        self,
        name: str,
        supplier: Any,
        materialized: Materialized | None,
        store: tuple[str, Any, Any] | None,
        value_serde: Any,
        getter_factory: GetterFactory,
        sources: frozenset[str],
        parents: tuple[KTable[Any, Any], ...],
        old_value_suppliers: tuple[Any, ...],
    ) -> KTable[Any, Any]:
        """The table coming out of processor ``name``: kept in ``store`` with the store's serdes when
        materialized (and then queryable only under a name the user chose, as in Kafka), else
        computed on lookup through ``getter_factory``, with ``value_serde``."""
        getter: ValueGetterSupplier | GetterFactory = getter_factory
        key_serde, queryable_store_name = self._key_serde, None
        if store is not None and materialized is not None:
            store_name, key_serde, value_serde = store
            self._builder.add_store(
                key_value_store_builder(materialized, store_name, key_serde, value_serde), name
            )
            getter, queryable_store_name = StoreValueGetterSupplier(store_name), materialized.store_name
        return KTable(
            self._builder,
            name,
            key_serde,
            value_serde,
            sources,
            supplier,
            getter,
            queryable_store_name,
            parents=parents,
            old_value_suppliers=old_value_suppliers,
        )

    def _derive(
        self,
        prefix: str,
        named: Named | str | None,
        materialized: Materialized | None,
        make_supplier: Callable[[str | None], Any],
        getter_factory: GetterFactory,
        value_serde: Any,
        store_value_serde_default: Any = None,
    ) -> KTable[Any, Any]:
        store = self._store_for(materialized, prefix, store_value_serde_default)
        name = self._builder.name_or_generate(named_as(named), prefix)
        supplier = make_supplier(store[0] if store is not None else None)
        self._builder.add_processor(name, supplier, self._name)
        return self._derived_table(
            name,
            supplier,
            materialized,
            store,
            value_serde,
            getter_factory,
            self._source_nodes,
            (self,),
            (supplier,),
        )

    # --- stateless -------------------------------------------------------------------------

    def filter(
        self,
        predicate: Callable[[K, V], bool],
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
    ) -> KTable[K, V]:
        """Rows whose value passes ``predicate(key, value)``; others become deletions. The
        Materialized and the name may come in either order (Kafka's ``filter(p, Named,
        Materialized)``)."""
        return self._filter(predicate, False, *materialized_and_named(materialized, named, "KTable.filter()"))

    def filter_not(
        self,
        predicate: Callable[[K, V], bool],
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
    ) -> KTable[K, V]:
        """Rows whose value fails ``predicate(key, value)``; others become deletions (the optional
        arguments as ``filter``'s)."""
        return self._filter(
            predicate, True, *materialized_and_named(materialized, named, "KTable.filter_not()")
        )

    def _filter(
        self,
        predicate: Callable[[K, V], bool],
        negate: bool,
        materialized: Materialized | None,
        named: Named | str | None,
    ) -> KTable[K, V]:
        filtered = self._derive(
            naming.KTABLE_FILTER,
            named,
            materialized,
            lambda store: TableFilterSupplier(predicate, negate, store),
            lambda: FilterValueGetterSupplier(self._value_getter_supplier(), predicate, negate),
            self._value_serde,
            self._value_serde,
        )
        # Kafka's KTableFilter: when this table sends old values anyway, the filter sees that a
        # row it drops was not in its result before either, and forwards no tombstone for it.
        if self._sends_old_values_unforced():
            filtered._supplier.send_old_values = True
        return filtered

    @overload
    def map_values(
        self,
        mapper: Callable[[V], VR],
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
        *,
        with_key: Literal[False] = False,
    ) -> KTable[K, VR]: ...

    @overload
    def map_values(
        self,
        mapper: Callable[[K, V], VR],
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
        *,
        with_key: Literal[True],
    ) -> KTable[K, VR]: ...

    @overload
    def map_values(
        self,
        mapper: Callable[..., VR],
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
        *,
        with_key: bool,
    ) -> KTable[K, VR]: ...

    def map_values(
        self,
        mapper: Callable[..., Any],
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
        *,
        with_key: bool = False,
    ) -> KTable[K, Any]:
        """Each row's value mapped with ``mapper(value)`` (``mapper(key, value)`` with ``with_key``);
        the Materialized and the name may come in either order, as ``filter``'s."""
        materialized, named = materialized_and_named(materialized, named, "KTable.map_values()")
        return self._derive(
            naming.KTABLE_MAPVALUES,
            named,
            materialized,
            lambda store: TableMapValuesSupplier(mapper, with_key, store),
            lambda: MapValuesGetterSupplier(self._value_getter_supplier(), mapper, with_key),
            None,
        )

    def transform_values(
        self,
        transformer_supplier: Callable[[], ValueTransformerWithKey[K, V, VR]],
        *store_names: str | Materialized | Named,
        materialized: Materialized | None = None,
        named: Named | str | None = None,
    ) -> KTable[K, VR]:
        """Each row's value replaced by ``transformer.transform(key, value)`` of a
        ``ValueTransformerWithKey`` that ``transformer_supplier()`` makes per task; it may use the
        named stores (add them with ``StreamsBuilder.add_state_store``) and is called for deletions
        too. The result is kept in a store when ``materialized`` is given. Kafka's overloads
        ``(supplier[, Materialized][, Named], store names...)`` are taken too."""
        from kstreams.topology.dsl.processors.transform_values import (
            TableTransformValuesSupplier,
            TransformValuesGetterSupplier,
        )

        if not callable(transformer_supplier) or isinstance(transformer_supplier, ValueTransformerWithKey):
            raise TypeError(
                "transform_values() takes a supplier of ValueTransformerWithKey (the subclass itself, or "
                f"a callable returning a new one per task), got {transformer_supplier!r}."
            )
        leading_materialized, leading_named, store_names = leading_options(
            store_names, "transform_values()", allow_materialized=True
        )
        if leading_materialized is not None:
            if materialized is not None:
                raise TypeError("transform_values() got two Materialized; pass one.")
            materialized = leading_materialized
        if leading_named is not None:
            if named is not None:
                raise TypeError(
                    f"transform_values() got two names, {leading_named!r} and {named!r}; pass one."
                )
            named = leading_named
        table = self._derive(
            naming.KTABLE_TRANSFORMVALUES,
            named,
            materialized,
            lambda store: TableTransformValuesSupplier(transformer_supplier, store),
            lambda: TransformValuesGetterSupplier(
                self._value_getter_supplier(), transformer_supplier, tuple(store_names)
            ),
            None,
        )
        self._builder.connect_stores(table.name, store_names)
        return table

    @overload
    def to_stream(
        self,
        mapper: Named | str | None = None,
        named: Named | str | None = None,
        *,
        key_mapper: None = None,
    ) -> KStream[K, V]: ...

    @overload
    def to_stream(self, mapper: Callable[[K, V], KR], named: Named | str | None = None) -> KStream[KR, V]: ...

    @overload
    def to_stream(
        self,
        mapper: Named | str | None = None,
        named: Named | str | None = None,
        *,
        key_mapper: Callable[[K, V], KR],
    ) -> KStream[KR, V]: ...

    def to_stream(
        self,
        mapper: Callable[[K, V], Any] | Named | str | None = None,
        named: Named | str | None = None,
        *,
        key_mapper: Callable[[K, V], Any] | None = None,
    ) -> KStream[Any, V]:
        """The table's updates as a stream: one record per update, value None for a deletion.
        ``mapper(key, value)`` gives the records a new key (then a repartition is needed).

        Kafka's four forms: ``to_stream()``, ``to_stream(named)``, ``to_stream(mapper)`` (a
        windowed table's ``to_stream(lambda window, v: window.key)``, say) and
        ``to_stream(mapper, named)``; the mapper may also be given as ``key_mapper=``."""
        if isinstance(mapper, (Named, str)):
            if named is not None:
                raise TypeError(f"to_stream() got two names, {mapper!r} and {named!r}; pass one.")
            mapper, named = None, mapper
        if mapper is not None:
            if key_mapper is not None:
                raise TypeError(
                    "to_stream() got a key mapper twice (positionally and as key_mapper=); pass one."
                )
            key_mapper = mapper
        name = self._builder.name_or_generate(named_as(named), naming.KTABLE_TOSTREAM)
        self._builder.add_processor(name, TableToStreamSupplier(key_mapper), self._name)
        return KStream(
            self._builder,
            name,
            None if key_mapper is not None else self._key_serde,
            self._value_serde,
            key_mapper is not None,
            self._source_nodes,
        )

    def suppress(self, suppressed: Suppressed) -> KTable[K, V]:
        """This table's updates held back as ``suppressed`` says: a windowed table's final results
        (``Suppressed.until_window_closes``) or at most one update per key per time limit
        (``Suppressed.until_time_limit``). See ``kstreams.topology.dsl.suppressed``."""
        from kstreams.topology.dsl.suppressed import suppress_table

        return suppress_table(self, suppressed)

    # --- joins -----------------------------------------------------------------------------

    @overload
    def join(
        self,
        other: KTable[K, VO],
        joiner: Callable[[V, VO], VR],
        materialized: Materialized | None = None,
        named: Named | str | None = None,
    ) -> KTable[K, VR]: ...

    @overload
    def join(
        self,
        other: KTable[KR, VO],
        foreign_key_extractor: Callable[[V], KR],
        joiner: Callable[[V, VO], VR],
        table_joined: TableJoined | Named | Materialized | None = None,
        materialized: Materialized | None = None,
    ) -> KTable[K, VR]: ...

    def join(self, other: KTable[Any, Any], *args: Any, **kwargs: Any) -> KTable[K, Any]:
        """Inner join on the primary key, ``join(other, joiner[, materialized][, named])``: a row
        exists where both tables have one, with value ``joiner(this_value, other_value)``.

        Foreign-key join, ``join(other, foreign_key_extractor, joiner[, table_joined][,
        materialized])``: each row joins the other table's row of key ``foreign_key_extractor(value)``.
        An update on either side updates the result."""
        call = parse_table_join_call("join", args, kwargs)
        if isinstance(call, ForeignKeyJoinCall):
            return foreign_key_join(self, other, call, left_join=False)
        joiner, materialized, named = call
        return self._join(other, joiner, materialized, named, left_outer=False, right_outer=False)

    @overload
    def left_join(
        self,
        other: KTable[K, VO],
        joiner: Callable[[V, VO | None], VR],
        materialized: Materialized | None = None,
        named: Named | str | None = None,
    ) -> KTable[K, VR]: ...

    @overload
    def left_join(
        self,
        other: KTable[KR, VO],
        foreign_key_extractor: Callable[[V], KR | None],
        joiner: Callable[[V, VO | None], VR],
        table_joined: TableJoined | Named | Materialized | None = None,
        materialized: Materialized | None = None,
    ) -> KTable[K, VR]: ...

    def left_join(self, other: KTable[Any, Any], *args: Any, **kwargs: Any) -> KTable[K, Any]:
        """Left join: every row of this table, joined with the other's row or None; by primary key
        ``(other, joiner[, materialized][, named])``, or by foreign key ``(other,
        foreign_key_extractor, joiner[, table_joined][, materialized])``."""
        call = parse_table_join_call("left_join", args, kwargs)
        if isinstance(call, ForeignKeyJoinCall):
            return foreign_key_join(self, other, call, left_join=True)
        joiner, materialized, named = call
        return self._join(other, joiner, materialized, named, left_outer=True, right_outer=False)

    def outer_join(
        self,
        other: KTable[K, VO],
        joiner: Callable[[V | None, VO | None], VR],
        materialized: Materialized | Named | None = None,
        named: Named | str | Materialized | None = None,
    ) -> KTable[K, VR]:
        """Outer join: a row wherever either table has one (the missing side is None). The
        Materialized and the Named may come in either order (Kafka's ``(other, joiner, Named,
        Materialized)``)."""
        materialized, named = materialized_and_named(materialized, named, "KTable.outer_join()")
        return self._join(other, joiner, materialized, named, left_outer=True, right_outer=True)

    def _join(
        self,
        other: KTable[Any, Any],
        joiner: Callable[[Any, Any], Any],
        materialized: Materialized | None,
        named: Named | str | None,
        *,
        left_outer: bool,
        right_outer: bool,
    ) -> KTable[Any, Any]:
        if not isinstance(other, KTable):
            raise TypeError(f"A KTable joins another KTable here, got {other!r}.")
        builder = self._builder
        store = self._store_for(materialized, naming.KTABLE_MERGE)
        base = named_as(named)
        merge = builder.name_or_generate(base, naming.KTABLE_MERGE)
        sources = self._source_nodes | other._source_nodes
        builder.copartition(sources)
        join_this = f"{base}-join-this" if base else builder.new_processor_name(naming.KTABLE_JOINTHIS)
        join_other = f"{base}-join-other" if base else builder.new_processor_name(naming.KTABLE_JOINOTHER)
        this_getter = self._value_getter_supplier()
        other_getter = other._value_getter_supplier()
        this_join = TableJoinSupplier(
            other_getter, joiner, this_is_left=True, this_outer=left_outer, other_outer=right_outer
        )
        other_join = TableJoinSupplier(
            this_getter, joiner, this_is_left=False, this_outer=right_outer, other_outer=left_outer
        )
        builder.add_processor(join_this, this_join, self._name)
        builder.add_processor(join_other, other_join, other._name)
        builder.connect_stores(join_this, other_getter.store_names())
        builder.connect_stores(join_other, this_getter.store_names())
        supplier = TableMergeSupplier(store[0] if store is not None else None)
        builder.add_processor(merge, supplier, join_this, join_other)
        return self._derived_table(
            merge,
            supplier,
            materialized,
            store,
            None,
            lambda: JoinValueGetterSupplier(this_getter, other_getter, joiner, left_outer, right_outer),
            sources,
            (self, other),
            (this_join, other_join),
        )

    # --- re-grouping -----------------------------------------------------------------------

    def group_by(
        self, selector: Callable[[K, V], KeyValue[KR, VR] | tuple[KR, VR]], grouped: Grouped | None = None
    ) -> KGroupedTable[KR, VR]:
        """Re-group the rows by ``selector(key, value) -> KeyValue`` (new key and value) to
        aggregate them; a row that changes moves from its old group to its new one."""
        from kstreams.topology.dsl.grouped_table import KGroupedTable

        grouped = grouped or Grouped()
        name = self._builder.name_or_generate(grouped.name, naming.KTABLE_SELECT)
        change_serde = ChangeSerde(grouped.value_serde)
        self._builder.add_processor(name, TableSelectSupplier(selector, change_serde), self._name)
        self._enable_sending_old_values()
        return KGroupedTable(
            self._builder,
            name,
            grouped.key_serde,
            grouped.value_serde,
            grouped.name,
            change_serde,
            self._source_nodes,
        )


def updates_table(
    builder: InternalStreamsBuilder,
    name: str,
    parent: str,
    label: str,
    store_name: str,
    materialized: Materialized,
    key_serde: Any,
    value_serde: Any,
    source_nodes: Iterable[str],
) -> KTable[Any, Any]:
    """A table whose rows are the records arriving at ``parent`` (a topic's source, or a stream
    for ``to_table``), read by a table-source processor ``name``.

    Its store ``store_name`` is added at once when ``materialized`` names it (the table is then
    queryable), otherwise only when a join, lookup or re-grouping first needs the table's values.
    """
    from kstreams.topology.dsl.processors.versioned_table import is_versioned_supplier, versioned_source_table

    if is_versioned_supplier(materialized.store_supplier):
        # KIP-914: a table kept in a versioned store.
        return versioned_source_table(
            builder, name, parent, label, materialized, key_serde, value_serde, source_nodes
        )
    supplier = TableSourceSupplier(label)
    builder.add_processor(name, supplier, parent)
    store_key_serde = materialized.key_serde if materialized.key_serde is not None else key_serde
    store_value_serde = materialized.value_serde if materialized.value_serde is not None else value_serde

    def materialize() -> StoreValueGetterSupplier:
        if supplier.store_name is None:
            builder.add_store(
                key_value_store_builder(materialized, store_name, store_key_serde, store_value_serde), name
            )
            supplier.store_name = store_name
        return StoreValueGetterSupplier(store_name)

    queryable = materialized.store_name is not None
    return KTable(
        builder,
        name,
        key_serde,
        value_serde,
        source_nodes,
        supplier,
        materialize() if queryable else materialize,
        store_name if queryable else None,
    )
