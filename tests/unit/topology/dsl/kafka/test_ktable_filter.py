"""Apache Kafka's KTableFilterTest (kstream/internals), ported: what ``filter`` and ``filter_not``
on a table forward (a tombstone for a row they drop, unless old values show the row was never
held), what their stores hold, and the changes they forward with and without old values. Caching
is off, as in Kafka's test.

As in the KTableSourceTest port, the processors go under the tables' nodes through the public
``Topology.add_processor`` and ``KTable.name``, and old values are turned on as a user turns them on:
by grouping the filtered table (Kafka's test calls the internal ``enableSendingOldValues(true)``),
or without forcing a store by filtering it again (``enableSendingOldValues(false)``, which a filter
calls on its parent). ``shouldGetValuesOnMaterialization`` reads the filtered tables' stores instead
of Kafka's internal value getters. Not ported: ``shouldSkipNullIfVersionedDownstream`` (a filter
kept in a versioned store, which kstreams' filter does not take) and ``testTypeVariance`` (Java
generics).
"""

from __future__ import annotations

from typing import Any

import pytest

from kstreams import Consumed, Grouped, KeyValue, Materialized, Serdes, StreamsBuilder
from kstreams.state import Stores

pytestmark = pytest.mark.on_cluster(
    representative="test_filter_forwards_kept_rows_and_tombstones_for_dropped_ones"
)

S = Serdes.string()
I = Serdes.integer()  # noqa: E741 - Kafka's Serdes.Integer(), beside S
CONSUMED = Consumed.with_(S, I)
NO_CACHE = {"statestore_cache_max_bytes": 0}


def _even(key: str, value: int) -> bool:
    return value % 2 == 0


def _pass_through(drive: Any, captured: Any, materialized: bool) -> None:
    builder = StreamsBuilder()
    table1 = builder.table("topic1", CONSUMED)
    table2 = table1.filter(_even, *([Materialized.as_("store2")] if materialized else []))
    table3 = table1.filter_not(_even)
    assert table1.queryable_store_name is None
    assert table2.queryable_store_name == ("store2" if materialized else None)
    assert table3.queryable_store_name is None
    filtered, filtered_not = type(captured)(), type(captured)()
    table2.to_stream().process(filtered.supplier)
    table3.to_stream().process(filtered_not.supplier)
    topic = drive(builder.build(), **NO_CACHE).create_input_topic("topic1", S, I)
    for key, value, ts in [
        ("A", 1, 10),
        ("B", 2, 5),
        ("C", 3, 8),
        ("D", 4, 14),
        ("A", None, 18),
        ("B", None, 15),
    ]:
        topic.pipe_input(key, value, ts)
    assert filtered.processed == [
        ("A", None, 10), ("B", 2, 5), ("C", None, 8), ("D", 4, 14), ("A", None, 18), ("B", None, 15)
    ]  # fmt: skip
    assert filtered_not.processed == [
        ("A", 1, 10), ("B", None, 5), ("C", 3, 8), ("D", None, 14), ("A", None, 18), ("B", None, 15)
    ]  # fmt: skip


def test_filter_forwards_kept_rows_and_tombstones_for_dropped_ones(drive, captured):
    """shouldPassThroughWithoutMaterialization"""
    _pass_through(drive, captured, materialized=False)


def test_materialized_filter_forwards_the_same(drive, captured):
    """shouldPassThroughOnMaterialization"""
    _pass_through(drive, captured, materialized=True)


def test_filtered_stores_hold_only_the_rows_their_predicate_keeps(drive):
    """shouldGetValuesOnMaterialization"""
    builder = StreamsBuilder()
    table1 = builder.table("topic1", CONSUMED)
    table2 = table1.filter(_even, Materialized.as_("store2"))
    table3 = table1.filter_not(_even, Materialized.as_("store3"))
    table4 = table1.filter_not(_even)
    assert table1.queryable_store_name is None
    assert table2.queryable_store_name == "store2"
    assert table3.queryable_store_name == "store3"
    assert table4.queryable_store_name is None
    driver = drive(builder.build(), **NO_CACHE)
    topic = driver.create_input_topic("topic1", S, I)
    stores = [driver.get_timestamped_key_value_store(name) for name in ("store2", "store3")]

    def rows() -> list[dict[str, Any]]:
        found = [{key: store.get(key) for key in "ABC"} for store in stores]
        return [{k: None if v is None else (v.value, v.timestamp) for k, v in f.items()} for f in found]

    for key, value, ts in [("A", 1, 5), ("B", 1, 10), ("C", 1, 15)]:
        topic.pipe_input(key, value, ts)
    assert rows() == [{"A": None, "B": None, "C": None}, {"A": (1, 5), "B": (1, 10), "C": (1, 15)}]
    topic.pipe_input("A", 2, 10)
    topic.pipe_input("B", 2, 5)
    assert rows() == [{"A": (2, 10), "B": (2, 5), "C": None}, {"A": None, "B": None, "C": (1, 15)}]
    topic.pipe_input("A", 3, 15)
    assert rows() == [{"A": None, "B": (2, 5), "C": None}, {"A": (3, 15), "B": None, "C": (1, 15)}]
    topic.pipe_input("A", None, 10)
    topic.pipe_input("B", None, 20)
    assert rows() == [{"A": None, "B": None, "C": None}, {"A": None, "B": None, "C": (1, 15)}]


def _changes(
    drive: Any, builder: StreamsBuilder, tables: list[Any], steps: list[list[tuple[Any, ...]]], serde: Any = I
) -> list[list[list[Any]]]:
    """Pipe each step; what a processor under each of ``tables`` saw after it:
    (key, new value, old value, timestamp)."""
    seen: list[list[tuple[Any, Any, Any, int]]] = [[] for _ in tables]

    def keeper(into: list[tuple[Any, Any, Any, int]]) -> Any:
        class _Keep:
            def init(self, context: Any) -> None:
                pass

            def process(self, record: Any) -> None:
                into.append((record.key, record.value.new_value, record.value.old_value, record.timestamp))

            def close(self) -> None:
                pass

        return _Keep

    topology = builder.build()
    for i, (table, into) in enumerate(zip(tables, seen, strict=True)):
        topology.add_processor(f"proc{i + 1}", keeper(into), table.name)
    topic = drive(topology, **NO_CACHE).create_input_topic("topic1", S, serde)
    found = []
    for rows in steps:
        for key, value, ts in rows:
            topic.pipe_input(key, value, ts)
        found.append([list(into) for into in seen])
        for into in seen:
            into.clear()
    return found


STEPS = [
    [("A", 1, 5), ("B", 1, 10), ("C", 1, 15)],
    [("A", 2, 15), ("B", 2, 8)],
    [("A", 3, 20)],
    [("A", None, 10), ("B", None, 20)],
]

# Under the source table and under the filter, after each step, with no old values.
WITHOUT_OLD_VALUES = [
    [[("A", 1, None, 5), ("B", 1, None, 10), ("C", 1, None, 15)],
     [("A", None, None, 5), ("B", None, None, 10), ("C", None, None, 15)]],
    [[("A", 2, None, 15), ("B", 2, None, 8)], [("A", 2, None, 15), ("B", 2, None, 8)]],
    [[("A", 3, None, 20)], [("A", None, None, 20)]],
    [[("A", None, None, 10), ("B", None, None, 20)], [("A", None, None, 10), ("B", None, None, 20)]],
]  # fmt: skip

# The same with old values: the filter forwards nothing for a row it never held.
WITH_OLD_VALUES = [
    [[("A", 1, None, 5), ("B", 1, None, 10), ("C", 1, None, 15)], []],
    [[("A", 2, 1, 15), ("B", 2, 1, 8)], [("A", 2, None, 15), ("B", 2, None, 8)]],
    [[("A", 3, 2, 20)], [("A", None, 2, 20)]],
    [[("A", None, 3, 10), ("B", None, 2, 20)], [("B", None, 2, 20)]],
]  # fmt: skip

# With old values from a filter kept in its own store: its parent is not asked for them.
WITH_OLD_VALUES_OF_THE_FILTER_ONLY = [
    [[(key, new, None, ts) for key, new, _, ts in source], below] for source, below in WITH_OLD_VALUES
]


def _filter_changes(
    drive: Any, materialized: bool, source_store: bool, send_old_values: bool, filtered_again: bool = False
) -> list[Any]:
    builder = StreamsBuilder()
    table1 = builder.table("topic1", CONSUMED, *([Materialized.as_("store2")] if source_store else []))
    table2 = table1.filter(_even, *([Materialized.as_("store2")] if materialized else []))
    if send_old_values:
        table2.group_by(KeyValue, Grouped.with_(S, I)).count()
    if filtered_again:
        table2.filter(_even)  # asks table2 for old values without materializing anything
    return _changes(drive, builder, [table1, table2], STEPS)


def test_filter_forwards_no_old_values_unless_a_downstream_needs_them(drive):
    """shouldNotSendOldValuesWithoutMaterialization"""
    assert _filter_changes(drive, False, False, False) == WITHOUT_OLD_VALUES


def test_materialized_filter_forwards_no_old_values_unless_a_downstream_needs_them(drive):
    """shouldNotSendOldValuesOnMaterialization"""
    assert _filter_changes(drive, True, False, False) == WITHOUT_OLD_VALUES


def test_filter_of_a_table_without_a_store_gets_no_old_values_unless_forced(drive):
    """shouldNotEnableSendingOldValuesIfNotAlreadyMaterializedAndNotForcedToMaterialize"""
    assert _filter_changes(drive, False, False, False, filtered_again=True) == WITHOUT_OLD_VALUES


def test_filter_forwards_old_values_when_a_downstream_needs_them(drive):
    """shouldEnableSendOldValuesWhenNotMaterializedAlreadyButForcedToMaterialize"""
    assert _filter_changes(drive, False, False, True) == WITH_OLD_VALUES


def test_materialized_filter_forwards_old_values_when_a_downstream_needs_them(drive):
    """shouldEnableSendOldValuesWhenMaterializedAlreadyAndForcedToMaterialize"""
    assert _filter_changes(drive, True, False, True) == WITH_OLD_VALUES_OF_THE_FILTER_ONLY


def test_filter_of_a_materialized_source_forwards_old_values_when_a_downstream_needs_them(drive):
    """shouldSendOldValuesWhenEnabledOnUpStreamMaterialization"""
    assert _filter_changes(drive, False, True, False, filtered_again=True) == WITH_OLD_VALUES
    assert _filter_changes(drive, False, True, True) == WITH_OLD_VALUES


def _skip_null_to_repartition(drive: Any, materialized: bool) -> list[Any]:
    builder = StreamsBuilder()
    table1 = builder.table("topic1", Consumed.with_(S, S))
    accepted = table1.filter(
        lambda k, v: v.lower() == "accept", *([Materialized.as_("store2")] if materialized else [])
    )
    table2 = accepted.group_by(KeyValue).reduce(
        lambda agg, v: agg + v,
        lambda agg, v: agg + "-" + v,
        *([Materialized.as_("mock-result")] if materialized else []),
    )
    steps = [[("A", "reject", 5), ("B", "reject", 10), ("C", "reject", 20)]]
    return _changes(drive, builder, [table1, accepted, table2], steps, serde=S)


# Under the source, the filter and the aggregation: the re-grouping makes the filter ask for old
# values, so it forwards nothing for the rows it never held.
REJECTED = [[[("A", "reject", None, 5), ("B", "reject", None, 10), ("C", "reject", None, 20)], [], []]]


def test_filter_sends_no_tombstone_of_a_never_held_row_to_a_repartition(drive):
    """shouldSkipNullToRepartitionWithoutMaterialization"""
    assert _skip_null_to_repartition(drive, materialized=False) == REJECTED


def test_materialized_filter_sends_no_tombstone_of_a_never_held_row_to_a_repartition(drive):
    """shouldSkipNullToRepartitionOnMaterialization"""
    assert _skip_null_to_repartition(drive, materialized=True) == REJECTED


def test_filter_of_a_versioned_table_forwards_every_tombstone(drive):
    """shouldNotSkipNullIfVersionedUpstream: old values are sent (a re-grouping asks for them),
    but below a versioned table the filter forwards a tombstone for every row it drops."""
    builder = StreamsBuilder()
    versioned = Materialized.as_(Stores.persistent_versioned_key_value_store("versioned", 300_000))
    table1 = builder.table("topic1", Consumed.with_(S, S), versioned)
    table2 = table1.filter(lambda k, v: v.lower() == "accept")
    table2.group_by(KeyValue).reduce(lambda agg, v: agg + v, lambda agg, v: agg + "-" + v)
    steps = [[("A", "reject", 5), ("B", "reject", 10), ("C", "reject", 20)]]
    assert _changes(drive, builder, [table1, table2], steps, serde=S) == [
        [
            [("A", "reject", None, 5), ("B", "reject", None, 10), ("C", "reject", None, 20)],
            [("A", None, None, 5), ("B", None, None, 10), ("C", None, None, 20)],
        ]
    ]
