"""Apache Kafka's KStreamKTableJoinTest (kstream/internals), ported: the inner join of a stream
with a table (only stream records trigger it; a table tombstone removes the match), with a grace
period on a versioned table (KIP-923), the refusals of a grace period the table cannot serve, and
the repartition topics of a re-keyed stream joined twice, in ``describe()``.

Kafka runs each case twice, with and without ``dsl.store.format=headers`` (the header-keeping DSL
stores of KIP-1271); kstreams has no such setting, so each case runs once. Kafka raises its
refusals as ``IllegalArgumentException``, from ``join`` or from ``build`` when the table's store is
inherited; kstreams raises ``TopologyException`` ("Invalid topology: " then Kafka's message, then
what to do) when the join is written, so these cases expect the refusal from writing and building
the topology together. Kafka pipes the table with
random timestamps (they do not change the output of a join on an unversioned table); here they come
from a seeded generator. ``shouldLogAndMeterWhenSkippingNullLeftKey`` / ``...NullLeftValue`` keep
only their observable part: the record is dropped (the log line and metric are not compared).
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest

from kstreams import Consumed, Joined, KeyValue, Materialized, Serdes, Stores, StreamsBuilder
from kstreams.errors import TopologyException

pytestmark = pytest.mark.on_cluster(
    representative="test_grace_period_holds_stream_records_until_stream_time_passes_it"
)

S = Serdes.string()
I = Serdes.integer()  # noqa: E741 - Kafka's Serdes.Integer(), beside S
CONSUMED = Consumed.with_(I, S)
KEYS = (0, 1, 2, 3)


def _joiner(value1: Any, value2: Any) -> str:
    return f"{value1}+{value2}"


class _Join:
    """Kafka's fixture: ``streamTopic`` joined with the table of ``tableTopic`` (or, with a grace
    period, of the versioned ``tableTopic2``), every result kept by ``captured``."""

    def __init__(self, drive: Any, captured: Any, grace: timedelta | None = None) -> None:
        builder = StreamsBuilder()
        stream = builder.stream("streamTopic", CONSUMED)
        if grace is None:
            table_topic = "tableTopic"
            stream.join(builder.table(table_topic, CONSUMED), _joiner).process(captured.supplier)
        else:
            table_topic = "tableTopic2"
            versioned = Stores.persistent_versioned_key_value_store("V-grace", timedelta(minutes=5))
            table = builder.table(table_topic, CONSUMED, Materialized.as_(versioned))
            stream.join(table, _joiner, Joined.with_(I, S, S, "Grace", grace)).process(captured.supplier)
        self.builder = builder
        self.driver = drive(builder.build())
        self.stream = self.driver.create_input_topic("streamTopic", I, S)
        self.table = self.driver.create_input_topic(table_topic, I, S)
        self.captured = captured
        self._random = random.Random(20)

    def push_to_stream(self, count: int, prefix: str) -> None:
        for i in range(count):
            self.stream.pipe_input(KEYS[i], f"{prefix}{KEYS[i]}", i)

    def push_to_table(self, count: int, prefix: str, random_time: bool = True) -> None:
        for i in range(count):
            ts = self._random.randrange(2**31 - 1) if random_time else 0
            self.table.pipe_input(KEYS[i], f"{prefix}{KEYS[i]}", ts)

    def push_null_values_to_table(self) -> None:
        for i in range(2):
            self.table.pipe_input(KEYS[i], None)

    def take(self) -> list[tuple[Any, Any, int]]:
        return self.captured.take()


def test_stream_table_join_is_copartitioned(drive, captured):
    """shouldRequireCopartitionedStreams"""
    join = _Join(drive, captured)
    assert join.builder.build().build("app").copartition_groups == (frozenset({"streamTopic", "tableTopic"}),)


def test_stream_records_meet_no_row_of_an_empty_table(drive, captured):
    """shouldNotJoinWithEmptyTableOnStreamUpdates"""
    join = _Join(drive, captured)
    join.push_to_stream(2, "X")
    assert join.take() == []


def test_table_updates_trigger_no_join(drive, captured):
    """shouldNotJoinOnTableUpdates"""
    join = _Join(drive, captured)
    join.push_to_stream(2, "X")
    assert join.take() == []
    join.push_to_table(2, "Y")
    assert join.take() == []
    join.push_to_stream(4, "X")
    assert join.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]
    join.push_to_table(4, "YY")
    assert join.take() == []
    join.push_to_stream(4, "X")
    assert join.take() == [(0, "X0+YY0", 0), (1, "X1+YY1", 1), (2, "X2+YY2", 2), (3, "X3+YY3", 3)]
    join.push_to_table(4, "YYY")
    assert join.take() == []


def test_stream_record_joins_only_when_the_table_has_its_key(drive, captured):
    """shouldJoinOnlyIfMatchFoundOnStreamUpdates"""
    join = _Join(drive, captured)
    join.push_to_table(2, "Y")
    assert join.take() == []
    join.push_to_stream(4, "X")
    assert join.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]


def test_table_tombstone_removes_the_row_a_stream_record_would_meet(drive, captured):
    """shouldClearTableEntryOnNullValueUpdates"""
    join = _Join(drive, captured)
    join.push_to_table(4, "Y")
    assert join.take() == []
    join.push_to_stream(4, "X")
    assert join.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1), (2, "X2+Y2", 2), (3, "X3+Y3", 3)]
    join.push_null_values_to_table()
    assert join.take() == []
    join.push_to_stream(4, "XX")
    assert join.take() == [(2, "XX2+Y2", 2), (3, "XX3+Y3", 3)]


@pytest.mark.parametrize(("key", "value"), [(None, "A"), (1, None)], ids=["null-key", "null-value"])
def test_stream_record_with_a_null_key_or_value_is_dropped(drive, captured, key, value):
    """shouldLogAndMeterWhenSkippingNullLeftKey, shouldLogAndMeterWhenSkippingNullLeftValue (their
    observable part)"""
    join = _Join(drive, captured)
    join.push_to_table(2, "Y")
    join.stream.pipe_input(key, value)
    assert join.take() == []


def test_grace_period_holds_stream_records_until_stream_time_passes_it(drive, captured):
    """shouldDelayJoinByGracePeriod"""
    join = _Join(drive, captured, grace=timedelta(milliseconds=2))
    join.push_to_table(4, "Y", random_time=False)
    assert join.take() == []
    join.push_to_stream(4, "X")
    assert join.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]
    join.push_to_table(4, "YY", random_time=False)
    assert join.take() == []
    join.push_to_stream(4, "X")
    assert join.take() == [(0, "X0+YY0", 0), (1, "X1+YY1", 1)]
    join.stream.pipe_input(5, "test", 7)
    assert join.take() == [(2, "X2+YY2", 2), (2, "X2+YY2", 2), (3, "X3+YY3", 3), (3, "X3+YY3", 3)]
    join.push_to_table(4, "YYY", random_time=False)
    assert join.take() == []


def test_late_stream_record_joins_at_once_without_evicting_others(drive, captured):
    """shouldHandleLateJoinsWithGracePeriod"""
    join = _Join(drive, captured, grace=timedelta(milliseconds=2))
    join.push_to_table(4, "Y", random_time=False)
    assert join.take() == []
    join.push_to_stream(4, "X")
    assert join.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]
    join.push_to_stream(1, "X")
    assert join.take() == [(0, "X0+Y0", 0)]


def _grace_join(table_store: Any, inherited: bool, grace: timedelta) -> None:
    builder = StreamsBuilder()
    stream = builder.stream("topic", Consumed.with_(S, S))
    source = builder.table("topic2", Consumed.with_(S, S), *([table_store] if table_store else []))
    table = source.filter(lambda k, v: True) if inherited else source
    stream.join(table, lambda v1, v2: v1 + v2, Joined.with_(S, S, S, "first-join", grace)).to("out-one")
    builder.build().build("app")


def test_grace_period_on_an_unversioned_table_is_refused(drive):
    """shouldFailIfTableIsNotVersioned"""
    with pytest.raises(TopologyException, match=r"KTable must be versioned to use a grace period"):
        _grace_join(None, False, timedelta(milliseconds=6))


def test_grace_period_on_a_table_inheriting_an_unversioned_store_is_refused(drive):
    """shouldFailIfTableIsNotVersionedButMaterializationIsInherited"""
    store = Materialized.as_(Stores.in_memory_key_value_store("tableB"))
    with pytest.raises(TopologyException, match=r"KTable must be versioned to use a grace period"):
        _grace_join(store, True, timedelta(milliseconds=6))


def test_grace_period_on_a_table_inheriting_a_versioned_store_is_accepted(drive):
    """shouldNotFailIfTableIsVersionedButMaterializationIsInherited"""
    store = Materialized.as_(Stores.persistent_versioned_key_value_store("tableB", timedelta(minutes=5)))
    _grace_join(store, True, timedelta(milliseconds=6))


def test_grace_period_longer_than_the_history_retention_is_refused(drive):
    """shouldFailIfGracePeriodIsLongerThanHistoryRetention"""
    store = Materialized.as_(Stores.persistent_versioned_key_value_store("tableB", timedelta(minutes=5)))
    with pytest.raises(TopologyException, match=r"History retention must be at least grace period"):
        _grace_join(store, False, timedelta(minutes=6))


def test_grace_period_longer_than_an_inherited_store_s_history_retention_is_refused(drive):
    """shouldFailIfGracePeriodIsLongerThanHistoryRetentionAndInheritedStore"""
    store = Materialized.as_(Stores.persistent_versioned_key_value_store("V-grace", timedelta(0)))
    with pytest.raises(TopologyException, match=r"History retention must be at least grace period"):
        _grace_join(store, True, timedelta(milliseconds=6))


def _rekeyed_joined_twice(joined: tuple[Any, Any]) -> str:
    builder = StreamsBuilder()
    stream = builder.stream("topic", Consumed.with_(S, S))
    table_b = builder.table("topic2", Consumed.with_(S, S))
    table_c = builder.table("topic3", Consumed.with_(S, S))
    rekeyed = stream.map(lambda k, v: KeyValue(v, k))
    rekeyed.join(table_b, lambda v1, v2: v1 + v2, *joined[:1]).to("out-one")
    rekeyed.join(table_c, lambda v1, v2: v1 + v2, *joined[1:]).to("out-two")
    return str(builder.build().describe())


def test_rekeyed_stream_joined_twice_shares_one_generated_repartition_topic():
    """shouldReuseRepartitionTopicWithGeneratedName"""
    assert _rekeyed_joined_twice(()) == "\n".join([
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])",
        "      --> KSTREAM-MAP-0000000007",
        "    Processor: KSTREAM-MAP-0000000007 (stores: [])",
        "      --> KSTREAM-FILTER-0000000009",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: KSTREAM-FILTER-0000000009 (stores: [])",
        "      --> KSTREAM-SINK-0000000008",
        "      <-- KSTREAM-MAP-0000000007",
        "    Sink: KSTREAM-SINK-0000000008 (topic: KSTREAM-MAP-0000000007-repartition)",
        "      <-- KSTREAM-FILTER-0000000009",
        "",
        "  Sub-topology: 1",
        "    Source: KSTREAM-SOURCE-0000000010 (topics: [KSTREAM-MAP-0000000007-repartition])",
        "      --> KSTREAM-JOIN-0000000011, KSTREAM-JOIN-0000000016",
        "    Processor: KSTREAM-JOIN-0000000011 (stores: [topic2-STATE-STORE-0000000001])",
        "      --> KSTREAM-SINK-0000000012",
        "      <-- KSTREAM-SOURCE-0000000010",
        "    Processor: KSTREAM-JOIN-0000000016 (stores: [topic3-STATE-STORE-0000000004])",
        "      --> KSTREAM-SINK-0000000017",
        "      <-- KSTREAM-SOURCE-0000000010",
        "    Source: KSTREAM-SOURCE-0000000002 (topics: [topic2])",
        "      --> KTABLE-SOURCE-0000000003",
        "    Source: KSTREAM-SOURCE-0000000005 (topics: [topic3])",
        "      --> KTABLE-SOURCE-0000000006",
        "    Sink: KSTREAM-SINK-0000000012 (topic: out-one)",
        "      <-- KSTREAM-JOIN-0000000011",
        "    Sink: KSTREAM-SINK-0000000017 (topic: out-two)",
        "      <-- KSTREAM-JOIN-0000000016",
        "    Processor: KTABLE-SOURCE-0000000003 (stores: [topic2-STATE-STORE-0000000001])",
        "      --> none",
        "      <-- KSTREAM-SOURCE-0000000002",
        "    Processor: KTABLE-SOURCE-0000000006 (stores: [topic3-STATE-STORE-0000000004])",
        "      --> none",
        "      <-- KSTREAM-SOURCE-0000000005",
        "",
        "",
    ])  # fmt: skip


def test_rekeyed_stream_joined_twice_with_names_gets_a_repartition_topic_per_join():
    """shouldCreateRepartitionTopicsWithUserProvidedName"""
    joined = (Joined.with_(S, S, S, "first-join"), Joined.with_(S, S, S, "second-join"))
    assert _rekeyed_joined_twice(joined) == "\n".join([
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])",
        "      --> KSTREAM-MAP-0000000007",
        "    Processor: KSTREAM-MAP-0000000007 (stores: [])",
        "      --> first-join-repartition-filter, second-join-repartition-filter",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: first-join-repartition-filter (stores: [])",
        "      --> first-join-repartition-sink",
        "      <-- KSTREAM-MAP-0000000007",
        "    Processor: second-join-repartition-filter (stores: [])",
        "      --> second-join-repartition-sink",
        "      <-- KSTREAM-MAP-0000000007",
        "    Sink: first-join-repartition-sink (topic: first-join-repartition)",
        "      <-- first-join-repartition-filter",
        "    Sink: second-join-repartition-sink (topic: second-join-repartition)",
        "      <-- second-join-repartition-filter",
        "",
        "  Sub-topology: 1",
        "    Source: first-join-repartition-source (topics: [first-join-repartition])",
        "      --> first-join",
        "    Source: KSTREAM-SOURCE-0000000002 (topics: [topic2])",
        "      --> KTABLE-SOURCE-0000000003",
        "    Processor: first-join (stores: [topic2-STATE-STORE-0000000001])",
        "      --> KSTREAM-SINK-0000000012",
        "      <-- first-join-repartition-source",
        "    Sink: KSTREAM-SINK-0000000012 (topic: out-one)",
        "      <-- first-join",
        "    Processor: KTABLE-SOURCE-0000000003 (stores: [topic2-STATE-STORE-0000000001])",
        "      --> none",
        "      <-- KSTREAM-SOURCE-0000000002",
        "",
        "  Sub-topology: 2",
        "    Source: second-join-repartition-source (topics: [second-join-repartition])",
        "      --> second-join",
        "    Source: KSTREAM-SOURCE-0000000005 (topics: [topic3])",
        "      --> KTABLE-SOURCE-0000000006",
        "    Processor: second-join (stores: [topic3-STATE-STORE-0000000004])",
        "      --> KSTREAM-SINK-0000000017",
        "      <-- second-join-repartition-source",
        "    Sink: KSTREAM-SINK-0000000017 (topic: out-two)",
        "      <-- second-join",
        "    Processor: KTABLE-SOURCE-0000000006 (stores: [topic3-STATE-STORE-0000000004])",
        "      --> none",
        "      <-- KSTREAM-SOURCE-0000000005",
        "",
        "",
    ])  # fmt: skip
