"""Apache Kafka's KStreamKStreamJoinTest (kstream/internals), ported: the inner (and, with a long
grace, outer) windowed join of two streams: which records meet, in which order, with which
timestamp, under symmetric and asymmetric windows; the checks of user-given window store
suppliers; changelog settings from ``StreamJoined``; repartition topics in ``describe()``.

kstreams' refusals of a store supplier are ``StreamsException`` as in Kafka, with messages of
their own (what is wrong and what to do, per the project's style) instead of Kafka's text, so the
refusal cases match the exception and its subject. Not ported:
``shouldLogAndMeterOnSkippedRecordsWithNullValue...`` (a log line; the null-value record is dropped
here as there, which other ports check), ``shouldJoinWithDslStoreSuppliers...`` and
``shouldJoinWithNonTimestampedStore`` (they count calls into, or unwrap, Kafka's internal store
suppliers), ``shouldThrottleEmitNonJoinedOuterRecordsEvenWhenClockDrift`` (it drives Kafka's
internal join processor with a mock context).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from kstreams import Consumed, JoinWindows, KeyValue, Serdes, Stores, StreamJoined, StreamsBuilder
from kstreams.errors import StreamsException

pytestmark = pytest.mark.on_cluster(representative="test_join_emits_every_pair_of_records_in_the_window")

S = Serdes.string()
I = Serdes.integer()  # noqa: E741 - Kafka's Serdes.Integer(), beside S
CONSUMED = Consumed.with_(I, S)
KEYS = (0, 1, 2, 3)
MS = timedelta(milliseconds=1)


def _joiner(value1: Any, value2: Any) -> str:
    return f"{value1}+{value2}"


def _same_time(topic: str, prefix: str, ts: int, keys: tuple[int, ...] = KEYS) -> tuple[str, list[Any]]:
    """Kafka's loop over the keys, every record at ``ts``."""
    return topic, [(k, f"{prefix}{k}", ts) for k in keys]


def _rising(topic: str, prefix: str, ts: int) -> tuple[str, list[Any]]:
    """Kafka's loop over the keys, key ``i`` at ``ts + i``."""
    return topic, [(k, f"{prefix}{k}", ts + i) for i, k in enumerate(KEYS)]


def _run(drive: Any, captured: Any, join: str, windows: JoinWindows, steps: list[Any]) -> None:
    builder = StreamsBuilder()
    stream1, stream2 = builder.stream("topic1", CONSUMED), builder.stream("topic2", CONSUMED)
    getattr(stream1, join)(stream2, _joiner, windows, StreamJoined.with_(I, S, S)).process(captured.supplier)
    topology = builder.build()
    assert topology.build("app").copartition_groups == (frozenset({"topic1", "topic2"}),)
    driver = drive(topology)
    topics = {name: driver.create_input_topic(name, I, S) for name in ("topic1", "topic2")}
    for (name, rows), expected in steps:
        for key, value, ts in rows:
            topics[name].pipe_input(key, value, ts)
        assert captured.take() == expected, (name, rows)


# testJoin and testOuterJoin (grace 24 h: no record is ever left unjoined): every record at 0.
JOIN_STEPS = [
    (_same_time("topic1", "A", 0, KEYS[:2]), []),
    (_same_time("topic2", "a", 0, KEYS[:2]), [(0, "A0+a0", 0), (1, "A1+a1", 0)]),
    (_same_time("topic1", "B", 0), [(0, "B0+a0", 0), (1, "B1+a1", 0)]),
    (_same_time("topic2", "b", 0), [(0, "A0+b0", 0), (0, "B0+b0", 0), (1, "A1+b1", 0), (1, "B1+b1", 0),
                                    (2, "B2+b2", 0), (3, "B3+b3", 0)]),
    (_same_time("topic1", "C", 0), [(0, "C0+a0", 0), (0, "C0+b0", 0), (1, "C1+a1", 0), (1, "C1+b1", 0),
                                    (2, "C2+b2", 0), (3, "C3+b3", 0)]),
    (_same_time("topic2", "c", 0, KEYS[:2]), [(0, "A0+c0", 0), (0, "B0+c0", 0), (0, "C0+c0", 0),
                                              (1, "A1+c1", 0), (1, "B1+c1", 0), (1, "C1+c1", 0)]),
]  # fmt: skip


def test_join_emits_every_pair_of_records_in_the_window(drive, captured):
    """testJoin"""
    _run(drive, captured, "join", JoinWindows.of_time_difference_with_no_grace(100 * MS), JOIN_STEPS)


def test_outer_join_emits_only_pairs_while_every_record_still_may_join(drive, captured):
    """testOuterJoin"""
    windows = JoinWindows.of_time_difference_and_grace(100 * MS, timedelta(hours=24))
    _run(drive, captured, "outer_join", windows, JOIN_STEPS)


def test_join_pairs_records_no_more_than_the_time_difference_apart(drive, captured):
    """testWindowing"""
    steps = [
        (_same_time("topic1", "A", 0, KEYS[:2]), []),
        (_same_time("topic2", "a", 0, KEYS[:2]), [(0, "A0+a0", 0), (1, "A1+a1", 0)]),
        (_rising("topic1", "B", 1000), []),
        (_same_time("topic2", "b", 1100), [(0, "B0+b0", 1100), (1, "B1+b1", 1100), (2, "B2+b2", 1100),
                                           (3, "B3+b3", 1100)]),
        (_same_time("topic2", "c", 1101), [(1, "B1+c1", 1101), (2, "B2+c2", 1101), (3, "B3+c3", 1101)]),
        (_same_time("topic2", "d", 1102), [(2, "B2+d2", 1102), (3, "B3+d3", 1102)]),
        (_same_time("topic2", "e", 1103), [(3, "B3+e3", 1103)]),
        (_same_time("topic2", "f", 1104), []),
        (_same_time("topic2", "g", 899), []),
        (_same_time("topic2", "h", 900), [(0, "B0+h0", 1000)]),
        (_same_time("topic2", "i", 901), [(0, "B0+i0", 1000), (1, "B1+i1", 1001)]),
        (_same_time("topic2", "j", 902), [(0, "B0+j0", 1000), (1, "B1+j1", 1001), (2, "B2+j2", 1002)]),
        (_same_time("topic2", "k", 903), [(0, "B0+k0", 1000), (1, "B1+k1", 1001), (2, "B2+k2", 1002),
                                          (3, "B3+k3", 1003)]),
        (_rising("topic2", "l", 2000), []),
        (_same_time("topic1", "C", 2100), [(0, "C0+l0", 2100), (1, "C1+l1", 2100), (2, "C2+l2", 2100),
                                           (3, "C3+l3", 2100)]),
        (_same_time("topic1", "D", 2101), [(1, "D1+l1", 2101), (2, "D2+l2", 2101), (3, "D3+l3", 2101)]),
        (_same_time("topic1", "E", 2102), [(2, "E2+l2", 2102), (3, "E3+l3", 2102)]),
        (_same_time("topic1", "F", 2103), [(3, "F3+l3", 2103)]),
        (_same_time("topic1", "G", 2104), []),
        (_same_time("topic1", "H", 1899), []),
        (_same_time("topic1", "I", 1900), [(0, "I0+l0", 2000)]),
        (_same_time("topic1", "J", 1901), [(0, "J0+l0", 2000), (1, "J1+l1", 2001)]),
        (_same_time("topic1", "K", 1902), [(0, "K0+l0", 2000), (1, "K1+l1", 2001), (2, "K2+l2", 2002)]),
        (_same_time("topic1", "L", 1903), [(0, "L0+l0", 2000), (1, "L1+l1", 2001), (2, "L2+l2", 2002),
                                           (3, "L3+l3", 2003)]),
    ]  # fmt: skip
    _run(drive, captured, "join", JoinWindows.of_time_difference_with_no_grace(100 * MS), steps)


def test_join_window_only_after_pairs_later_other_records(drive, captured):
    """testAsymmetricWindowingAfter"""
    steps = [
        (_rising("topic1", "A", 1000), []),
        (_same_time("topic2", "a", 999), []),
        (_same_time("topic2", "b", 1000), [(0, "A0+b0", 1000)]),
        (_same_time("topic2", "c", 1001), [(0, "A0+c0", 1001), (1, "A1+c1", 1001)]),
        (_same_time("topic2", "d", 1002), [(0, "A0+d0", 1002), (1, "A1+d1", 1002), (2, "A2+d2", 1002)]),
        (_same_time("topic2", "e", 1003), [(0, "A0+e0", 1003), (1, "A1+e1", 1003), (2, "A2+e2", 1003),
                                           (3, "A3+e3", 1003)]),
        (_same_time("topic2", "f", 1100), [(0, "A0+f0", 1100), (1, "A1+f1", 1100), (2, "A2+f2", 1100),
                                           (3, "A3+f3", 1100)]),
        (_same_time("topic2", "g", 1101), [(1, "A1+g1", 1101), (2, "A2+g2", 1101), (3, "A3+g3", 1101)]),
        (_same_time("topic2", "h", 1102), [(2, "A2+h2", 1102), (3, "A3+h3", 1102)]),
        (_same_time("topic2", "i", 1103), [(3, "A3+i3", 1103)]),
        (_same_time("topic2", "j", 1104), []),
    ]  # fmt: skip
    windows = JoinWindows.of_time_difference_with_no_grace(0 * MS).after(100 * MS)
    _run(drive, captured, "join", windows, steps)


def test_join_window_only_before_pairs_earlier_other_records(drive, captured):
    """testAsymmetricWindowingBefore"""
    steps = [
        (_rising("topic1", "A", 1000), []),
        (_same_time("topic2", "a", 899), []),
        (_same_time("topic2", "b", 900), [(0, "A0+b0", 1000)]),
        (_same_time("topic2", "c", 901), [(0, "A0+c0", 1000), (1, "A1+c1", 1001)]),
        (_same_time("topic2", "d", 902), [(0, "A0+d0", 1000), (1, "A1+d1", 1001), (2, "A2+d2", 1002)]),
        (_same_time("topic2", "e", 903), [(0, "A0+e0", 1000), (1, "A1+e1", 1001), (2, "A2+e2", 1002),
                                          (3, "A3+e3", 1003)]),
        (_same_time("topic2", "f", 1000), [(0, "A0+f0", 1000), (1, "A1+f1", 1001), (2, "A2+f2", 1002),
                                           (3, "A3+f3", 1003)]),
        (_same_time("topic2", "g", 1001), [(1, "A1+g1", 1001), (2, "A2+g2", 1002), (3, "A3+g3", 1003)]),
        (_same_time("topic2", "h", 1002), [(2, "A2+h2", 1002), (3, "A3+h3", 1003)]),
        (_same_time("topic2", "i", 1003), [(3, "A3+i3", 1003)]),
        (_same_time("topic2", "j", 1004), []),
    ]  # fmt: skip
    windows = JoinWindows.of_time_difference_with_no_grace(0 * MS).before(100 * MS)
    _run(drive, captured, "join", windows, steps)


# --- store suppliers -------------------------------------------------------------------------

WINDOWS = JoinWindows.of_time_difference_and_grace(50 * MS, 50 * MS)


def _window_store(name: str, retention: int, size: int, retain_duplicates: bool) -> Any:
    return Stores.in_memory_window_store(name, retention * MS, size * MS, retain_duplicates)


def _left_right() -> tuple[StreamsBuilder, Any, Any]:
    builder = StreamsBuilder()
    return (
        builder,
        builder.stream("left", Consumed.with_(S, I)),
        builder.stream("right", Consumed.with_(S, I)),
    )


@pytest.mark.parametrize(
    ("this", "other", "refusal"),
    [
        ((500, 100, True), (150, 100, True), "Window settings mismatch: the this store"),
        ((150, 150, True), (150, 100, True), "Window settings mismatch: the this store"),
        ((150, 100, False), (150, 100, True), "The this store supplier .* must retain duplicates"),
        ((150, 100, True), (500, 100, True), "Window settings mismatch: the other store"),
        ((150, 100, True), (150, 150, True), "Window settings mismatch: the other store"),
        ((150, 100, True), (150, 100, False), "The other store supplier .* must retain duplicates"),
    ],
    ids=[
        "shouldThrowExceptionThisStoreSupplierRetentionDoNotMatchWindowsSizeAndGrace",
        "shouldThrowExceptionThisStoreSupplierWindowSizeDoesNotMatchJoinWindowsWindowSize",
        "shouldThrowExceptionWhenThisJoinStoreSetsRetainDuplicatesFalse",
        "shouldThrowExceptionOtherStoreSupplierRetentionDoNotMatchWindowsSizeAndGrace",
        "shouldThrowExceptionOtherStoreSupplierWindowSizeDoesNotMatchJoinWindowsWindowSize",
        "shouldThrowExceptionWhenOtherJoinStoreSetsRetainDuplicatesFalse",
    ],
)
def test_join_refuses_a_store_supplier_not_fitting_the_windows(this, other, refusal):
    """shouldThrowException... (six cases: retention, window size, duplicates; this and other side)"""
    _, left, right = _left_right()
    joined = (
        StreamJoined.with_(S, I, I)
        .with_this_store_supplier(_window_store("in-memory-join-store", *this))
        .with_other_store_supplier(_window_store("in-memory-join-store-other", *other))
    )
    with pytest.raises(StreamsException, match=refusal):
        left.join(right, lambda a, b: a + b, WINDOWS, joined)


def test_join_refuses_two_store_suppliers_of_one_name():
    """shouldExceptionWhenJoinStoresDoNotHaveUniqueNames"""
    _, left, right = _left_right()
    joined = (
        StreamJoined.with_(S, I, I)
        .with_this_store_supplier(_window_store("in-memory-join-store", 150, 100, True))
        .with_other_store_supplier(_window_store("in-memory-join-store", 150, 100, True))
    )
    windows = JoinWindows.of_time_difference_and_grace(100 * MS, 50 * MS)
    with pytest.raises(StreamsException, match=r"Both store suppliers .* are named 'in-memory-join-store'"):
        left.join(right, lambda a, b: a + b, windows, joined)


def test_join_with_fitting_default_stores_builds():
    """shouldBuildJoinWithCustomStoresAndCorrectWindowSettings"""
    builder, left, right = _left_right()
    left.join(right, lambda a, b: a + b, WINDOWS, StreamJoined.with_(S, I, I))
    builder.build()


def _run_join(drive: Any, captured: Any, joined: Any) -> None:
    builder = StreamsBuilder()
    left, right = builder.stream("left", Consumed.with_(S, I)), builder.stream("right", Consumed.with_(S, I))
    windows = JoinWindows.of_time_difference_with_no_grace(100 * MS)
    left.join(right, lambda a, b: a + b, windows, joined).process(captured.supplier)
    driver = drive(builder.build())
    topics = {name: driver.create_input_topic(name, S, I) for name in ("left", "right")}
    for name, key, value, ts in [
        ("left", "A", 1, 1),
        ("left", "B", 1, 2),
        ("right", "A", 1, 1),
        ("right", "B", 2, 2),
    ]:
        topics[name].pipe_input(key, value, ts)
    assert captured.take() == [("A", 2, 1), ("B", 3, 2)]


@pytest.mark.parametrize("sides", ["both", "this", "other"])
def test_join_with_in_memory_store_suppliers_joins(drive, captured, sides):
    """shouldJoinWithCustomStoreSuppliers (two custom stores, this side's only, other side's only)"""
    this = Stores.in_memory_window_store("in-memory-join-store", 200 * MS, 200 * MS, True)
    other = Stores.in_memory_window_store("in-memory-join-store-other", 200 * MS, 200 * MS, True)
    joined = StreamJoined.with_(S, I, I)
    if sides in ("both", "this"):
        joined = joined.with_this_store_supplier(this)
    if sides in ("both", "other"):
        joined = joined.with_other_store_supplier(other)
    _run_join(drive, captured, joined)


# --- changelogs ------------------------------------------------------------------------------


def _joined_with_store(joined: Any) -> Any:
    builder, left, right = _left_right()
    windows = JoinWindows.of_time_difference_and_grace(100 * MS, 50 * MS)
    left.join(right, lambda a, b: a + b, windows, joined)
    return builder.build()


def test_stream_joined_can_turn_the_changelogs_off():
    """shouldDisableLoggingOnStreamJoined"""
    topology = _joined_with_store(
        StreamJoined.with_(S, I, I).with_store_name("store").with_logging_disabled()
    )
    stores = topology.store_builders
    assert not stores["store-this-join-store"].logging_enabled
    assert not stores["store-other-join-store"].logging_enabled


def test_stream_joined_changelogs_take_the_given_topic_config():
    """shouldEnableLoggingWithCustomConfigOnStreamJoined"""
    joined = StreamJoined.with_(S, I, I).with_store_name("store").with_logging_enabled({"test": "property"})
    topology = _joined_with_store(joined)
    assert topology.store_builders["store-this-join-store"].logging_enabled
    assert topology.store_builders["store-other-join-store"].logging_enabled
    changelogs = [t for t in topology.build("app").internal_topics.values() if t.kind == "changelog"]
    assert sorted(t.store for t in changelogs) == ["store-other-join-store", "store-this-join-store"]
    assert all(t.subtopology == 0 and t.config.get("test") == "property" for t in changelogs)


# --- names in describe() ---------------------------------------------------------------------


def _rekeyed_joined_twice(joined: tuple[Any, Any], second_topic: str) -> str:
    builder = StreamsBuilder()
    stream1 = builder.stream("topic", Consumed.with_(S, S))
    stream2 = builder.stream("topic2", Consumed.with_(S, S))
    stream3 = builder.stream("topic3", Consumed.with_(S, S))
    rekeyed = stream1.map(lambda k, v: KeyValue(v, k))
    windows = JoinWindows.of_time_difference_with_no_grace(100 * MS)
    rekeyed.join(stream2, lambda v1, v2: v1 + v2, windows, *joined[:1]).to("out-one")
    rekeyed.join(stream3, lambda v1, v2: v1 + v2, windows, *joined[1:]).to(second_topic)
    return str(builder.build().describe())


def test_rekeyed_stream_joined_twice_shares_one_generated_repartition_topic():
    """shouldReuseRepartitionTopicWithGeneratedName"""
    assert _rekeyed_joined_twice((), "out-to") == "\n".join([
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])",
        "      --> KSTREAM-MAP-0000000003",
        "    Processor: KSTREAM-MAP-0000000003 (stores: [])",
        "      --> KSTREAM-FILTER-0000000005",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: KSTREAM-FILTER-0000000005 (stores: [])",
        "      --> KSTREAM-SINK-0000000004",
        "      <-- KSTREAM-MAP-0000000003",
        "    Sink: KSTREAM-SINK-0000000004 (topic: KSTREAM-MAP-0000000003-repartition)",
        "      <-- KSTREAM-FILTER-0000000005",
        "",
        "  Sub-topology: 1",
        "    Source: KSTREAM-SOURCE-0000000006 (topics: [KSTREAM-MAP-0000000003-repartition])",
        "      --> KSTREAM-WINDOWED-0000000007, KSTREAM-WINDOWED-0000000016",
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [topic2])",
        "      --> KSTREAM-WINDOWED-0000000008",
        "    Source: KSTREAM-SOURCE-0000000002 (topics: [topic3])",
        "      --> KSTREAM-WINDOWED-0000000017",
        "    Processor: KSTREAM-WINDOWED-0000000007 (stores: [KSTREAM-JOINTHIS-0000000009-store])",
        "      --> KSTREAM-JOINTHIS-0000000009",
        "      <-- KSTREAM-SOURCE-0000000006",
        "    Processor: KSTREAM-WINDOWED-0000000008 (stores: [KSTREAM-JOINOTHER-0000000010-store])",
        "      --> KSTREAM-JOINOTHER-0000000010",
        "      <-- KSTREAM-SOURCE-0000000001",
        "    Processor: KSTREAM-WINDOWED-0000000016 (stores: [KSTREAM-JOINTHIS-0000000018-store])",
        "      --> KSTREAM-JOINTHIS-0000000018",
        "      <-- KSTREAM-SOURCE-0000000006",
        "    Processor: KSTREAM-WINDOWED-0000000017 (stores: [KSTREAM-JOINOTHER-0000000019-store])",
        "      --> KSTREAM-JOINOTHER-0000000019",
        "      <-- KSTREAM-SOURCE-0000000002",
        "    Processor: KSTREAM-JOINOTHER-0000000010 (stores: [KSTREAM-JOINTHIS-0000000009-store])",
        "      --> KSTREAM-MERGE-0000000011",
        "      <-- KSTREAM-WINDOWED-0000000008",
        "    Processor: KSTREAM-JOINOTHER-0000000019 (stores: [KSTREAM-JOINTHIS-0000000018-store])",
        "      --> KSTREAM-MERGE-0000000020",
        "      <-- KSTREAM-WINDOWED-0000000017",
        "    Processor: KSTREAM-JOINTHIS-0000000009 (stores: [KSTREAM-JOINOTHER-0000000010-store])",
        "      --> KSTREAM-MERGE-0000000011",
        "      <-- KSTREAM-WINDOWED-0000000007",
        "    Processor: KSTREAM-JOINTHIS-0000000018 (stores: [KSTREAM-JOINOTHER-0000000019-store])",
        "      --> KSTREAM-MERGE-0000000020",
        "      <-- KSTREAM-WINDOWED-0000000016",
        "    Processor: KSTREAM-MERGE-0000000011 (stores: [])",
        "      --> KSTREAM-SINK-0000000012",
        "      <-- KSTREAM-JOINTHIS-0000000009, KSTREAM-JOINOTHER-0000000010",
        "    Processor: KSTREAM-MERGE-0000000020 (stores: [])",
        "      --> KSTREAM-SINK-0000000021",
        "      <-- KSTREAM-JOINTHIS-0000000018, KSTREAM-JOINOTHER-0000000019",
        "    Sink: KSTREAM-SINK-0000000012 (topic: out-one)",
        "      <-- KSTREAM-MERGE-0000000011",
        "    Sink: KSTREAM-SINK-0000000021 (topic: out-to)",
        "      <-- KSTREAM-MERGE-0000000020",
        "",
        "",
    ])  # fmt: skip


def test_rekeyed_stream_joined_twice_with_names_gets_a_repartition_topic_per_join():
    """shouldCreateRepartitionTopicsWithUserProvidedName"""
    joined = StreamJoined.with_(S, S, S)
    names = (joined.with_name("first-join"), joined.with_name("second-join"))
    assert _rekeyed_joined_twice(names, "out-two") == "\n".join([
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])",
        "      --> KSTREAM-MAP-0000000003",
        "    Processor: KSTREAM-MAP-0000000003 (stores: [])",
        "      --> second-join-left-repartition-filter, first-join-left-repartition-filter",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: first-join-left-repartition-filter (stores: [])",
        "      --> first-join-left-repartition-sink",
        "      <-- KSTREAM-MAP-0000000003",
        "    Processor: second-join-left-repartition-filter (stores: [])",
        "      --> second-join-left-repartition-sink",
        "      <-- KSTREAM-MAP-0000000003",
        "    Sink: first-join-left-repartition-sink (topic: first-join-left-repartition)",
        "      <-- first-join-left-repartition-filter",
        "    Sink: second-join-left-repartition-sink (topic: second-join-left-repartition)",
        "      <-- second-join-left-repartition-filter",
        "",
        "  Sub-topology: 1",
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [topic2])",
        "      --> first-join-other-windowed",
        "    Source: first-join-left-repartition-source (topics: [first-join-left-repartition])",
        "      --> first-join-this-windowed",
        "    Processor: first-join-other-windowed (stores: [KSTREAM-JOINOTHER-0000000010-store])",
        "      --> first-join-other-join",
        "      <-- KSTREAM-SOURCE-0000000001",
        "    Processor: first-join-this-windowed (stores: [KSTREAM-JOINTHIS-0000000009-store])",
        "      --> first-join-this-join",
        "      <-- first-join-left-repartition-source",
        "    Processor: first-join-other-join (stores: [KSTREAM-JOINTHIS-0000000009-store])",
        "      --> first-join-merge",
        "      <-- first-join-other-windowed",
        "    Processor: first-join-this-join (stores: [KSTREAM-JOINOTHER-0000000010-store])",
        "      --> first-join-merge",
        "      <-- first-join-this-windowed",
        "    Processor: first-join-merge (stores: [])",
        "      --> KSTREAM-SINK-0000000012",
        "      <-- first-join-this-join, first-join-other-join",
        "    Sink: KSTREAM-SINK-0000000012 (topic: out-one)",
        "      <-- first-join-merge",
        "",
        "  Sub-topology: 2",
        "    Source: KSTREAM-SOURCE-0000000002 (topics: [topic3])",
        "      --> second-join-other-windowed",
        "    Source: second-join-left-repartition-source (topics: [second-join-left-repartition])",
        "      --> second-join-this-windowed",
        "    Processor: second-join-other-windowed (stores: [KSTREAM-JOINOTHER-0000000019-store])",
        "      --> second-join-other-join",
        "      <-- KSTREAM-SOURCE-0000000002",
        "    Processor: second-join-this-windowed (stores: [KSTREAM-JOINTHIS-0000000018-store])",
        "      --> second-join-this-join",
        "      <-- second-join-left-repartition-source",
        "    Processor: second-join-other-join (stores: [KSTREAM-JOINTHIS-0000000018-store])",
        "      --> second-join-merge",
        "      <-- second-join-other-windowed",
        "    Processor: second-join-this-join (stores: [KSTREAM-JOINOTHER-0000000019-store])",
        "      --> second-join-merge",
        "      <-- second-join-this-windowed",
        "    Processor: second-join-merge (stores: [])",
        "      --> KSTREAM-SINK-0000000021",
        "      <-- second-join-this-join, second-join-other-join",
        "    Sink: KSTREAM-SINK-0000000021 (topic: out-two)",
        "      <-- second-join-merge",
        "",
        "",
    ])  # fmt: skip
