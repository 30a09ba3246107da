"""Apache Kafka's CogroupedKStreamImplTest (kstream/internals), ported: cogrouped aggregations of
one to three grouped streams (outputs, timestamps, a join of the result), the names of their
processors, stores and repartition topics in ``describe()``, and the functions they refuse.

Not ported: the ``...WithOptimization`` cases (``topology.optimization``, which kstreams refuses:
it builds topologies as written), the describe cases of groupings re-made or reused in different
cogroups (their unoptimized shapes are those of the cases kept), and the null checks of an
optional argument (``Named``/``Materialized`` null: None is Python's "not given").
"""

from __future__ import annotations

from typing import Any

import pytest

from kstreams import (
    Consumed,
    Grouped,
    KeyValue,
    Materialized,
    Named,
    Serdes,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
)

pytestmark = pytest.mark.on_cluster(representative="test_cogroup_of_two_streams_with_shared_keys")

S = Serdes.string()
I = Serdes.integer()  # noqa: E741 - Kafka's Serdes.Integer(), beside S
STRINGS = Consumed.with_(S, S)
STORE = "COGROUPKSTREAM-AGGREGATE-STATE-STORE"


def _concat(key: Any, value: str, aggregate: str) -> str:
    return aggregate + value


def _empty() -> str:
    return ""


def _sum_parsed(key: Any, value: str, aggregate: int) -> int:
    return aggregate + int(value)


def _sum(key: Any, value: int, aggregate: int) -> int:
    return aggregate + value


def _adder(key: Any, value: Any, aggregate: str) -> str:
    return f"{aggregate}+{value}"


def _remover(key: Any, value: Any, aggregate: str) -> str:
    return f"{aggregate}-{value}"


def _describe(*lines: str) -> str:
    """Kafka's describe() text from its lines; a blank line ends each sub-topology."""
    return "\n".join(lines) + "\n"


def _rows(driver: Any, value_serde: Any = S) -> list[tuple[Any, Any, int]]:
    out = driver.create_output_topic("output", S, value_serde)
    return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def _pipe(topic: Any, rows: list[tuple[Any, Any, int]]) -> None:
    for key, value, ts in rows:
        topic.pipe_input(key, value, ts)


# --- refused arguments ------------------------------------------------------------------------


def _cogrouped() -> tuple[Any, Any]:
    grouped = StreamsBuilder().stream("topic", STRINGS).group_by_key(Grouped.with_(S, S))
    return grouped, grouped.cogroup(_adder)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda g, c: c.cogroup(None, _adder), id="cogroup-grouped-stream"),
        pytest.param(lambda g, c: c.cogroup(g, None), id="cogroup-aggregator"),
        pytest.param(lambda g, c: c.aggregate(None), id="aggregate-initializer"),
        pytest.param(lambda g, c: c.aggregate(None, Named.as_("name")), id="named"),
        pytest.param(lambda g, c: c.aggregate(None, Materialized.as_("store")), id="materialized"),
        pytest.param(
            lambda g, c: c.aggregate(None, Named.as_("name"), Materialized.as_("store")),
            id="named-and-materialized",
        ),
        pytest.param(lambda g, c: c.windowed_by(None), id="windowed-by"),
    ],
)
def test_a_missing_argument_is_refused_when_the_topology_is_written(call):
    """shouldThrowNPEInCogroupIfKGroupedStreamIsNull, shouldNotHaveNullAggregatorOnCogroup,
    shouldNotHaveNullInitializerOnAggregate{,WitNamed,WitMaterialized,WitNamedAndMaterialized},
    shouldNotHaveNullWindowOnWindowedBy{Time,Session,Sliding}"""
    grouped, cogrouped = _cogrouped()
    with pytest.raises((TypeError, ValueError)):
        call(grouped, cogrouped)


@pytest.mark.parametrize(
    "windows",
    [TimeWindows.of_size_with_no_grace(10), SessionWindows.of_inactivity_gap_with_no_grace(10),
     SlidingWindows.of_time_difference_with_no_grace(10)],
    ids=["time", "session", "sliding"],
)  # fmt: skip
def test_a_cogrouped_stream_takes_each_window_type(windows):
    """shouldNotHaveNullWindowOnWindowedBy{Time,Session,Sliding} (the windows they pass when not null)"""
    _, cogrouped = _cogrouped()
    assert cogrouped.windowed_by(windows) is not None


# --- names in describe() ----------------------------------------------------------------------


def test_named_cogroup_names_its_processors_and_uses_the_named_store():
    """shouldNameProcessorsAndStoreBasedOnNamedParameter"""
    builder = StreamsBuilder()
    grouped_one = builder.stream("one", STRINGS).group_by_key()
    grouped_two = builder.stream("two", STRINGS).group_by_key()
    grouped_one.cogroup(_concat).cogroup(grouped_two, _concat).aggregate(
        _empty, Named.as_("test"), Materialized.as_("store")
    ).to_stream().to("output")
    assert str(builder.build().describe()) == _describe(
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [one])",
        "      --> test-cogroup-agg-0",
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [two])",
        "      --> test-cogroup-agg-1",
        "    Processor: test-cogroup-agg-0 (stores: [store])",
        "      --> test-cogroup-merge",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: test-cogroup-agg-1 (stores: [store])",
        "      --> test-cogroup-merge",
        "      <-- KSTREAM-SOURCE-0000000001",
        "    Processor: test-cogroup-merge (stores: [])",
        "      --> KTABLE-TOSTREAM-0000000005",
        "      <-- test-cogroup-agg-0, test-cogroup-agg-1",
        "    Processor: KTABLE-TOSTREAM-0000000005 (stores: [])",
        "      --> KSTREAM-SINK-0000000006",
        "      <-- test-cogroup-merge",
        "    Sink: KSTREAM-SINK-0000000006 (topic: output)",
        "      <-- KTABLE-TOSTREAM-0000000005",
        "",
    )


def test_grouped_name_names_the_cogroup_s_repartition_topic():
    """shouldNameRepartitionTopic"""
    builder = StreamsBuilder()
    stream_one, stream_two = builder.stream("one", STRINGS), builder.stream("two", STRINGS)
    grouped_one = stream_one.map(lambda k, v: KeyValue(v, k)).group_by_key(Grouped.as_("repartition-test"))
    grouped_two = stream_two.group_by_key()
    grouped_one.cogroup(_concat).cogroup(grouped_two, _concat).aggregate(_empty).to_stream().to("output")
    store = "COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003"
    assert str(builder.build().describe()) == _describe(
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [one])",
        "      --> KSTREAM-MAP-0000000002",
        "    Processor: KSTREAM-MAP-0000000002 (stores: [])",
        "      --> repartition-test-repartition-filter",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: repartition-test-repartition-filter (stores: [])",
        "      --> repartition-test-repartition-sink",
        "      <-- KSTREAM-MAP-0000000002",
        "    Sink: repartition-test-repartition-sink (topic: repartition-test-repartition)",
        "      <-- repartition-test-repartition-filter",
        "",
        "  Sub-topology: 1",
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [two])",
        "      --> COGROUPKSTREAM-AGGREGATE-0000000008",
        "    Source: repartition-test-repartition-source (topics: [repartition-test-repartition])",
        "      --> COGROUPKSTREAM-AGGREGATE-0000000007",
        f"    Processor: COGROUPKSTREAM-AGGREGATE-0000000007 (stores: [{store}])",
        "      --> COGROUPKSTREAM-MERGE-0000000009",
        "      <-- repartition-test-repartition-source",
        f"    Processor: COGROUPKSTREAM-AGGREGATE-0000000008 (stores: [{store}])",
        "      --> COGROUPKSTREAM-MERGE-0000000009",
        "      <-- KSTREAM-SOURCE-0000000001",
        "    Processor: COGROUPKSTREAM-MERGE-0000000009 (stores: [])",
        "      --> KTABLE-TOSTREAM-0000000010",
        "      <-- COGROUPKSTREAM-AGGREGATE-0000000007, COGROUPKSTREAM-AGGREGATE-0000000008",
        "    Processor: KTABLE-TOSTREAM-0000000010 (stores: [])",
        "      --> KSTREAM-SINK-0000000011",
        "      <-- COGROUPKSTREAM-MERGE-0000000009",
        "    Sink: KSTREAM-SINK-0000000011 (topic: output)",
        "      <-- KTABLE-TOSTREAM-0000000010",
        "",
    )


def test_a_key_changing_step_before_a_cogroup_adds_a_repartition_named_for_the_store():
    """shouldInsertRepartitionsTopicForUpstreamKeyModification"""
    builder = StreamsBuilder()
    stream_one, stream_two = builder.stream("one", STRINGS), builder.stream("two", STRINGS)
    grouped_one = stream_one.map(lambda k, v: KeyValue(v, k)).group_by_key()
    grouped_two = stream_two.group_by_key()
    grouped_one.cogroup(_concat).cogroup(grouped_two, _concat).aggregate(
        _empty, Named.as_("test"), Materialized.as_("store")
    ).to_stream().to("output")
    assert str(builder.build().describe()) == _describe(
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [one])",
        "      --> KSTREAM-MAP-0000000002",
        "    Processor: KSTREAM-MAP-0000000002 (stores: [])",
        "      --> store-repartition-filter",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: store-repartition-filter (stores: [])",
        "      --> store-repartition-sink",
        "      <-- KSTREAM-MAP-0000000002",
        "    Sink: store-repartition-sink (topic: store-repartition)",
        "      <-- store-repartition-filter",
        "",
        "  Sub-topology: 1",
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [two])",
        "      --> test-cogroup-agg-1",
        "    Source: store-repartition-source (topics: [store-repartition])",
        "      --> test-cogroup-agg-0",
        "    Processor: test-cogroup-agg-0 (stores: [store])",
        "      --> test-cogroup-merge",
        "      <-- store-repartition-source",
        "    Processor: test-cogroup-agg-1 (stores: [store])",
        "      --> test-cogroup-merge",
        "      <-- KSTREAM-SOURCE-0000000001",
        "    Processor: test-cogroup-merge (stores: [])",
        "      --> KTABLE-TOSTREAM-0000000009",
        "      <-- test-cogroup-agg-0, test-cogroup-agg-1",
        "    Processor: KTABLE-TOSTREAM-0000000009 (stores: [])",
        "      --> KSTREAM-SINK-0000000010",
        "      <-- test-cogroup-merge",
        "    Sink: KSTREAM-SINK-0000000010 (topic: output)",
        "      <-- KTABLE-TOSTREAM-0000000009",
        "",
    )


def test_a_grouping_reused_by_a_plain_aggregate_gets_its_own_repartition():
    """shouldInsertRepartitionsTopicForUpstreamKeyModificationWithGroupedReused"""
    builder = StreamsBuilder()
    stream_one, stream_two = builder.stream("one", STRINGS), builder.stream("two", STRINGS)
    grouped_one = stream_one.map(lambda k, v: KeyValue(v, k)).group_by_key()
    grouped_two = stream_two.group_by_key()
    grouped_one.cogroup(_concat).cogroup(grouped_two, _concat).aggregate(_empty)
    grouped_one.aggregate(_empty, _concat)
    cogroup_store = "COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003"
    store = "KSTREAM-AGGREGATE-STATE-STORE-0000000010"
    assert str(builder.build().describe()) == _describe(
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [one])",
        "      --> KSTREAM-MAP-0000000002",
        "    Processor: KSTREAM-MAP-0000000002 (stores: [])",
        f"      --> {cogroup_store}-repartition-filter, KSTREAM-FILTER-0000000013",
        "      <-- KSTREAM-SOURCE-0000000000",
        f"    Processor: {cogroup_store}-repartition-filter (stores: [])",
        f"      --> {cogroup_store}-repartition-sink",
        "      <-- KSTREAM-MAP-0000000002",
        "    Processor: KSTREAM-FILTER-0000000013 (stores: [])",
        "      --> KSTREAM-SINK-0000000012",
        "      <-- KSTREAM-MAP-0000000002",
        f"    Sink: {cogroup_store}-repartition-sink (topic: {cogroup_store}-repartition)",
        f"      <-- {cogroup_store}-repartition-filter",
        f"    Sink: KSTREAM-SINK-0000000012 (topic: {store}-repartition)",
        "      <-- KSTREAM-FILTER-0000000013",
        "",
        "  Sub-topology: 1",
        f"    Source: {cogroup_store}-repartition-source (topics: [{cogroup_store}-repartition])",
        "      --> COGROUPKSTREAM-AGGREGATE-0000000007",
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [two])",
        "      --> COGROUPKSTREAM-AGGREGATE-0000000008",
        f"    Processor: COGROUPKSTREAM-AGGREGATE-0000000007 (stores: [{cogroup_store}])",
        "      --> COGROUPKSTREAM-MERGE-0000000009",
        f"      <-- {cogroup_store}-repartition-source",
        f"    Processor: COGROUPKSTREAM-AGGREGATE-0000000008 (stores: [{cogroup_store}])",
        "      --> COGROUPKSTREAM-MERGE-0000000009",
        "      <-- KSTREAM-SOURCE-0000000001",
        "    Processor: COGROUPKSTREAM-MERGE-0000000009 (stores: [])",
        "      --> none",
        "      <-- COGROUPKSTREAM-AGGREGATE-0000000007, COGROUPKSTREAM-AGGREGATE-0000000008",
        "",
        "  Sub-topology: 2",
        f"    Source: KSTREAM-SOURCE-0000000014 (topics: [{store}-repartition])",
        "      --> KSTREAM-AGGREGATE-0000000011",
        f"    Processor: KSTREAM-AGGREGATE-0000000011 (stores: [{store}])",
        "      --> none",
        "      <-- KSTREAM-SOURCE-0000000014",
        "",
    )


def test_a_cogroup_aggregated_twice_shares_the_named_repartition():
    """shouldInsertRepartitionsTopicForCogroupsUsedTwice"""
    builder = StreamsBuilder()
    grouped = builder.stream("one", STRINGS).map(lambda k, v: KeyValue(v, k)).group_by_key(Grouped.as_("foo"))
    one = grouped.cogroup(_concat)
    one.aggregate(_empty)
    one.aggregate(_empty)
    assert str(builder.build().describe()) == _describe(
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [one])",
        "      --> KSTREAM-MAP-0000000001",
        "    Processor: KSTREAM-MAP-0000000001 (stores: [])",
        "      --> foo-repartition-filter",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: foo-repartition-filter (stores: [])",
        "      --> foo-repartition-sink",
        "      <-- KSTREAM-MAP-0000000001",
        "    Sink: foo-repartition-sink (topic: foo-repartition)",
        "      <-- foo-repartition-filter",
        "",
        "  Sub-topology: 1",
        "    Source: foo-repartition-source (topics: [foo-repartition])",
        "      --> COGROUPKSTREAM-AGGREGATE-0000000006, COGROUPKSTREAM-AGGREGATE-0000000012",
        f"    Processor: COGROUPKSTREAM-AGGREGATE-0000000006 (stores: [{STORE}-0000000002])",
        "      --> COGROUPKSTREAM-MERGE-0000000007",
        "      <-- foo-repartition-source",
        f"    Processor: COGROUPKSTREAM-AGGREGATE-0000000012 (stores: [{STORE}-0000000008])",
        "      --> COGROUPKSTREAM-MERGE-0000000013",
        "      <-- foo-repartition-source",
        "    Processor: COGROUPKSTREAM-MERGE-0000000007 (stores: [])",
        "      --> none",
        "      <-- COGROUPKSTREAM-AGGREGATE-0000000006",
        "    Processor: COGROUPKSTREAM-MERGE-0000000013 (stores: [])",
        "      --> none",
        "      <-- COGROUPKSTREAM-AGGREGATE-0000000012",
        "",
    )


# --- processing -------------------------------------------------------------------------------


def _one_stream(drive: Any) -> Any:
    builder = StreamsBuilder()
    builder.stream("one", STRINGS).group_by_key().cogroup(_concat).aggregate(_empty).to_stream().to("output")
    return drive(builder.build())


def test_cogroup_of_a_single_stream_aggregates_it(drive):
    """shouldCogroupAndAggregateSingleKStreams"""
    driver = _one_stream(drive)
    _pipe(
        driver.create_input_topic("one", S, S),
        [("k1", "A", 0), ("k2", "B", 0), ("k2", "B", 0), ("k1", "A", 0)],
    )
    assert _rows(driver) == [("k1", "A", 0), ("k2", "B", 0), ("k2", "BB", 0), ("k1", "AA", 0)]


def test_cogroup_skips_null_values(drive):
    """testCogroupHandleNullValues"""
    driver = _one_stream(drive)
    rows = [("k1", "A", 0), ("k2", "B", 0), ("k2", None, 0), ("k2", "B", 0), ("k1", "A", 0)]
    _pipe(driver.create_input_topic("one", S, S), rows)
    assert _rows(driver) == [("k1", "A", 0), ("k2", "B", 0), ("k2", "BB", 0), ("k1", "AA", 0)]


def _two_streams(drive: Any, aggregator_one: Any = _concat, aggregator_two: Any = _concat, **kw: Any) -> Any:
    builder = StreamsBuilder()
    grouped_one = builder.stream("one", STRINGS).group_by_key()
    grouped_two = builder.stream("two", kw.get("consumed_two", STRINGS)).group_by_key()
    grouped_one.cogroup(aggregator_one).cogroup(grouped_two, aggregator_two).aggregate(
        kw.get("initializer", _empty), *kw.get("materialized", ())
    ).to_stream().to("output")
    return drive(builder.build())


def test_cogroup_of_two_streams_with_distinct_keys_keeps_the_newest_timestamp(drive):
    """shouldCogroupAndAggregateTwoKStreamsWithDistinctKeys"""
    driver = _two_streams(drive)
    _pipe(
        driver.create_input_topic("one", S, S),
        [("k1", "A", 0), ("k1", "A", 1), ("k1", "A", 10), ("k1", "A", 100)],
    )
    _pipe(
        driver.create_input_topic("two", S, S),
        [
            ("k2", "B", 100),
            ("k2", "B", 200),
            ("k2", "B", 1),
            ("k2", "B", 500),
            ("k2", "B", 500),
            ("k2", "B", 100),
        ],
    )
    assert _rows(driver) == [
        ("k1", "A", 0), ("k1", "AA", 1), ("k1", "AAA", 10), ("k1", "AAAA", 100),
        ("k2", "B", 100), ("k2", "BB", 200), ("k2", "BBB", 200), ("k2", "BBBB", 500),
        ("k2", "BBBBB", 500), ("k2", "BBBBBB", 500),
    ]  # fmt: skip


SHARED_ONE = [("k1", "A", 0), ("k2", "A", 1), ("k1", "A", 10), ("k2", "A", 100)]
SHARED_TWO = [
    ("k2", "B", 100), ("k2", "B", 200), ("k1", "B", 1), ("k2", "B", 500),
    ("k1", "B", 500), ("k2", "B", 500), ("k3", "B", 500), ("k2", "B", 100),
]  # fmt: skip
SHARED_OUT = [
    ("k1", "A", 0), ("k2", "A", 1), ("k1", "AA", 10), ("k2", "AA", 100), ("k2", "AAB", 100),
    ("k2", "AABB", 200), ("k1", "AAB", 10), ("k2", "AABBB", 500), ("k1", "AABB", 500),
    ("k2", "AABBBB", 500),
]  # fmt: skip


def test_cogroup_of_two_streams_with_shared_keys(drive):
    """shouldCogroupAndAggregateTwoKStreamsWithSharedKeys (Kafka checks the first ten records)"""
    driver = _two_streams(drive)
    _pipe(driver.create_input_topic("one", S, S), SHARED_ONE)
    _pipe(driver.create_input_topic("two", S, S), SHARED_TWO)
    assert _rows(driver)[:10] == SHARED_OUT


INT_TWO = [(k, v, ts) for k, v, ts in SHARED_TWO]
SUM_OUT = [
    ("k1", 1, 0), ("k2", 1, 1), ("k1", 2, 10), ("k2", 2, 100), ("k2", 4, 100), ("k2", 6, 200),
    ("k1", 4, 10), ("k2", 8, 500), ("k1", 6, 500), ("k2", 11, 500),
]  # fmt: skip
SUM_TWO = [("k2", 2, 100), ("k2", 2, 200), ("k1", 2, 1), ("k2", 2, 500), ("k1", 2, 500), ("k2", 3, 500),
           ("k3", 2, 500), ("k2", 2, 100)]  # fmt: skip
SUM_ONE = [("k1", "1", 0), ("k2", "1", 1), ("k1", "1", 10), ("k2", "1", 100)]


def test_cogroup_aggregate_may_have_another_type_than_its_inputs(drive):
    """shouldAllowDifferentOutputTypeInCoGroup (Kafka checks the first ten records)"""
    driver = _two_streams(
        drive,
        _sum_parsed,
        _sum_parsed,
        initializer=lambda: 0,
        materialized=[Materialized.as_("store1").with_value_serde(I)],
    )
    _pipe(driver.create_input_topic("one", S, S), SUM_ONE)
    _pipe(driver.create_input_topic("two", S, S), [(k, str(v), ts) for k, v, ts in SUM_TWO])
    assert _rows(driver, I)[:10] == SUM_OUT


def test_cogroup_takes_streams_of_different_value_types(drive):
    """shouldCoGroupStreamsWithDifferentInputTypes"""
    driver = _two_streams(
        drive,
        _sum_parsed,
        _sum,
        consumed_two=Consumed.with_(S, I),
        initializer=lambda: 0,
        materialized=[Materialized.as_("store1").with_value_serde(I)],
    )
    _pipe(driver.create_input_topic("one", S, S), SUM_ONE)
    _pipe(driver.create_input_topic("two", S, I), SUM_TWO)
    assert _rows(driver, I)[:11] == [*SUM_OUT, ("k3", 2, 500)]


def test_cogroup_applies_each_stream_s_own_aggregator(drive):
    """testCogroupKeyMixedAggregators"""
    driver = _two_streams(
        drive,
        _remover,
        _adder,
        initializer=lambda: "0",
        materialized=[Materialized.as_("store1").with_value_serde(S)],
    )
    _pipe(
        driver.create_input_topic("one", S, S),
        [("k1", "1", 0), ("k2", "1", 1), ("k1", "1", 10), ("k2", "1", 100)],
    )
    _pipe(
        driver.create_input_topic("two", S, S),
        [("k1", "2", 500), ("k2", "2", 500), ("k1", "2", 500), ("k2", "2", 100)],
    )
    assert _rows(driver) == [
        ("k1", "0-1", 0), ("k2", "0-1", 1), ("k1", "0-1-1", 10), ("k2", "0-1-1", 100),
        ("k1", "0-1-1+2", 500), ("k2", "0-1-1+2", 500), ("k1", "0-1-1+2+2", 500), ("k2", "0-1-1+2+2", 500),
    ]  # fmt: skip


def test_cogroup_of_three_streams(drive):
    """testCogroupWithThreeGroupedStreams"""
    builder = StreamsBuilder()
    grouped = [builder.stream(name, STRINGS).group_by_key() for name in ("one", "two", "three")]
    grouped[0].cogroup(_concat).cogroup(grouped[1], _concat).cogroup(grouped[2], _concat).aggregate(
        _empty
    ).to_stream().to("output")
    driver = drive(builder.build())
    _pipe(driver.create_input_topic("one", S, S), SHARED_ONE)
    _pipe(driver.create_input_topic("two", S, S), SHARED_TWO[:4])
    _pipe(
        driver.create_input_topic("three", S, S),
        [("k1", "B", 500), ("k2", "B", 500), ("k3", "B", 500), ("k2", "B", 100)],
    )
    assert _rows(driver)[:11] == [*SHARED_OUT, ("k3", "B", 500)]


def test_cogrouped_table_joins_a_table(drive):
    """testCogroupWithKTableKTableInnerJoin"""
    builder = StreamsBuilder()
    grouped_one = builder.stream("one", STRINGS).group_by_key()
    grouped_two = builder.stream("two", STRINGS).group_by_key()
    table1 = (
        grouped_one.cogroup(_concat)
        .cogroup(grouped_two, _concat)
        .aggregate(_empty, Named.as_("name"), Materialized.as_("store"))
    )
    table2 = builder.table("three", STRINGS)
    table1.join(table2, lambda v1, v2: f"{v1}+{v2}", Materialized.with_(S, S)).to_stream().to("output")
    driver = drive(builder.build())
    driver.create_input_topic("one", S, S).pipe_input("k1", "A", 5)
    driver.create_input_topic("two", S, S).pipe_input("k2", "B", 6)
    assert _rows(driver) == []
    _pipe(driver.create_input_topic("three", S, S), [("k1", "C", 0), ("k2", "D", 10)])
    assert _rows(driver) == [("k1", "A+C", 5), ("k2", "B+D", 10)]
