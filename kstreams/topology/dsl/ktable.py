"""KTable: a changelog stream seen as a table, one current value per key.

A KTable comes from a topic (``StreamsBuilder.table``), an aggregation, or another table. Its
processors pass ``Change(new, old)`` updates; ``to_stream()`` turns them back into records.
A table is kept in a state store when it is materialized (by ``Materialized``, because it is an
aggregation, or because a join needs to look it up); an unmaterialized derived table computes its
values from its parent's on lookup. An update carries the row's old value only once a downstream
needs it (a re-grouping, a suppress, a join's outer side, a filter; ``_enable_sending_old_values``).
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
# Makes a table's processor forward old values (the argument: whether a source table may be given
# a store for them); returns whether it now does.
OldValues = Callable[[bool], bool]

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
        old_values: OldValues | None = None,
        versioned: bool = False,
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
        # How this table's processor is made to forward old values (see _enable_sending_old_values);
        # None: it forwards them always (an aggregation).
        self._old_values = old_values
        self._sends_old_values = False
        # Whether the table is versioned (KIP-914): kept in a versioned store, or derived from
        # one by filters and value mappings that keep no store of their own. Its updates may then
        # be out of order (Change.is_latest False), and its processors apply versioned semantics.
        self._versioned = versioned

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

    def _enable_sending_old_values(self, force_materialization: bool = True) -> bool:
        """Make every update of this table carry the row's previous value (``Change.old_value``),
        as Kafka's ``KTableImpl.enableSendingOldValues``; return whether it now does.

        Old values are forwarded only once a downstream asks for them: a re-grouping, a suppress
        and a foreign-key join ask with ``force_materialization`` (a source table gets a store for
        them), the outer side of a table-table join too, and a filter asks without it (a source
        table not kept in a store then says no). A derived table asks its parent unless it keeps
        its own store; a table-table join asks both its tables, forced, and always sends."""
        if not self._sends_old_values:
            if self._old_values is not None and not self._old_values(force_materialization):
                return False
            self._sends_old_values = True
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
        old_values: OldValues,
        key_serde: Any = None,
        versioned: bool = False,
    ) -> KTable[Any, Any]:
        """The table coming out of processor ``name``: kept in ``store`` with the store's serdes when
        materialized (and then queryable only under a name the user chose, as in Kafka), else
        computed on lookup through ``getter_factory``, with ``key_serde`` (None: this table's)
        and ``value_serde``; ``versioned`` when it keeps the versioning of a versioned parent."""
        getter: ValueGetterSupplier | GetterFactory = getter_factory
        key_serde = key_serde if key_serde is not None else self._key_serde
        queryable_store_name = None
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
            old_values=old_values,
            versioned=versioned,
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
        key_serde = self._key_serde
        if store is not None and materialized is not None and materialized.store_name is None:
            # As Kafka's filter, mapValues and transformValues: a Materialized without a name has
            # drawn its store's index but keeps no store; the table takes its serdes only.
            _, key_serde, value_serde = store
            store = materialized = None
        name = self._builder.name_or_generate(named_as(named), prefix)
        supplier = make_supplier(store[0] if store is not None else None)
        self._builder.add_processor(name, supplier, self._name)

        def old_values(force_materialization: bool) -> bool:
            # Kafka's KTableFilter / KTableMapValues / KTableTransformValues: a table kept in its
            # own store reads the old values there; else it computes them from its parent's.
            if supplier.store_name is not None or self._enable_sending_old_values(force_materialization):
                supplier.send_old_values = True
            return bool(supplier.send_old_values)

        return self._derived_table(
            name,
            supplier,
            materialized,
            store,
            value_serde,
            getter_factory,
            self._source_nodes,
            (self,),
            old_values,
            key_serde,
            # Kafka: any Materialized of a derived table makes it unversioned (KIP-914).
            versioned=self._versioned and materialized is None,
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
        # Kafka's KTableFilter: when this table can send old values without a store of its own,
        # the filter asks for them, sees that a row it drops was not in its result before either,
        # and forwards no tombstone for it; otherwise it forwards one for every row it drops.
        # Below a versioned table (KIP-914) it forwards every tombstone all the same.
        if self._enable_sending_old_values(force_materialization=False):
            filtered._supplier.send_old_values = True
        filtered._supplier.versioned_semantics = self._versioned
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
        self._builder.add_processor(name, TableToStreamSupplier(None), self._name)
        stream: KStream[K, V] = KStream(
            self._builder, name, self._key_serde, self._value_serde, False, self._source_nodes
        )
        # As Kafka's toStream(mapper): the updates, then a select_key node of a generated name.
        return stream if key_mapper is None else stream.select_key(key_mapper)

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
        # Kafka's KTableImpl.doJoin: an outer side's deletion must show whether it held the row.
        if left_outer:
            self._enable_sending_old_values()
        if right_outer:
            other._enable_sending_old_values()
        join_this = builder.suffixed_or_generate(base, "-join-this", naming.KTABLE_JOINTHIS)
        join_other = builder.suffixed_or_generate(base, "-join-other", naming.KTABLE_JOINOTHER)
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

        def old_values(force_materialization: bool) -> bool:
            # Kafka's KTableKTableJoinMerger: the joins compute old values from both tables' old
            # values, which the tables are made to send (materialized if need be).
            for side in (this_join, other_join):
                side.send_old_values = True
            self._enable_sending_old_values()
            other._enable_sending_old_values()
            supplier.send_old_values = True
            return True

        return self._derived_table(
            merge,
            supplier,
            materialized,
            store,
            None,
            lambda: JoinValueGetterSupplier(this_getter, other_getter, joiner, left_outer, right_outer),
            sources,
            (self, other),
            old_values,
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

    def old_values(force_materialization: bool) -> bool:
        # Kafka's KTableSource: old values are read from the store, so a table without one sends
        # them only when it may be given one.
        if supplier.store_name is None and not force_materialization:
            return False
        materialize()
        supplier.send_old_values = True
        return True

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
        old_values=old_values,
    )
