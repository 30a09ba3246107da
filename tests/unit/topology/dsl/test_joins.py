"""Joins: KStream-KTable, KStream-KStream (windowed) and KTable-KTable.

The module is marked ``on_cluster``: its tests using ``drive`` run on a KafkaStreams client over an
EmbeddedCluster too (tests/unit/topology/dsl/conftest.py), and the tests at its end check on a
cluster what the driver cannot show."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kstreams.cluster import EmbeddedCluster
from kstreams.errors import InvalidStateStoreException, StreamsException
from kstreams.serdes import Serdes
from kstreams.state.stores import Stores
from kstreams.topology import (
    Joined,
    JoinWindows,
    KeyValue,
    Materialized,
    StreamJoined,
    StreamsBuilder,
)
from tests.support.clients import Clients, client_settings
from tests.support.waiting import wait_until

S = Serdes.string()

pytestmark = pytest.mark.on_cluster(representative="test_stream_table_join_across_partitions")


def _joiner(left: Any, right: Any) -> str:
    return f"{left}+{right}"


def _records(driver: Any, topic: str = "out") -> list[tuple[Any, Any, int]]:
    records = driver.create_output_topic(topic, S, S).read_records_to_list()
    return [(r.key, r.value, r.timestamp) for r in records]


# --- stream-table ----------------------------------------------------------------------------


def _stream_table(drive: Any, left: bool) -> tuple[Any, Any, Any]:
    builder = StreamsBuilder()
    table = builder.table("table")
    stream = builder.stream("stream")
    (stream.left_join if left else stream.join)(table, _joiner).to("out")
    driver = drive(builder.build())
    return driver, driver.create_input_topic("stream", S, S), driver.create_input_topic("table", S, S)


def test_stream_table_join_looks_up_the_current_table_value(drive):
    driver, stream, table = _stream_table(drive, left=False)
    table.pipe_input("a", "A1", timestamp=1)
    stream.pipe_input("a", "x", timestamp=5)
    stream.pipe_input("b", "y", timestamp=6)  # no row for b: dropped
    table.pipe_input("a", "A2", timestamp=7)  # table updates emit nothing themselves
    stream.pipe_input("a", "z", timestamp=8)
    table.pipe_input("a", None, timestamp=9)  # deletion
    stream.pipe_input("a", "w", timestamp=10)
    assert _records(driver) == [("a", "x+A1", 5), ("a", "z+A2", 8)]


def test_stream_table_left_join_joins_missing_rows_with_none(drive):
    driver, stream, table = _stream_table(drive, left=True)
    table.pipe_input("a", "A", timestamp=3)
    stream.pipe_input("a", "x", timestamp=1)
    stream.pipe_input("b", "y", timestamp=2)
    # The result keeps the stream record's timestamp, whatever the table row's (Kafka's rule).
    assert _records(driver) == [("a", "x+A", 1), ("b", "y+None", 2)]


def test_stream_table_join_materializes_the_table_and_copartitions_its_topics():
    builder = StreamsBuilder()
    table = builder.table("table")
    assert not builder.build().store_builders  # nothing needs the table's values yet
    builder.stream("stream").join(table, _joiner).to("out")
    topology = builder.build()
    assert list(topology.store_builders) == ["table-STATE-STORE-0000000000"]
    plan = topology.build("app")
    assert len(plan.subtopologies) == 1
    assert frozenset({"stream", "table"}) in plan.copartition_groups
    assert "app-table-STATE-STORE-0000000000-changelog" in plan.internal_topics


def test_stream_table_join_after_a_key_change_repartitions_the_stream(drive):
    builder = StreamsBuilder()
    table = builder.table("table")
    builder.stream("stream").select_key(lambda k, v: v).join(table, _joiner).to("out")
    topology = builder.build()
    plan = topology.build("app")
    assert "app-KSTREAM-KEY-SELECT-0000000004-repartition" in plan.internal_topics
    assert len(plan.subtopologies) == 2
    driver = drive(topology)
    driver.create_input_topic("table", S, S).pipe_input("a", "A", timestamp=5)
    driver.create_input_topic("stream", S, S).pipe_input("ignored", "a", timestamp=4)
    assert _records(driver) == [("a", "a+A", 4)]


def test_stream_table_join_with_joined_name_names_the_repartition_topic():
    builder = StreamsBuilder()
    table = builder.table("table")
    builder.stream("stream").select_key(lambda k, v: v).join(table, _joiner, Joined.as_("j")).to("out")
    topology = builder.build()
    assert "app-j-repartition" in topology.build("app").internal_topics
    assert "j" in topology.nodes


def test_join_of_a_filtered_table_sees_only_passing_rows(drive):
    builder = StreamsBuilder()
    table = builder.table("table").filter(lambda k, v: v.startswith("keep"))
    builder.stream("stream").join(table, _joiner).to("out")
    driver = drive(builder.build())
    rows = driver.create_input_topic("table", S, S)
    rows.pipe_input("a", "keep-a", timestamp=1)
    rows.pipe_input("b", "drop-b", timestamp=2)
    stream = driver.create_input_topic("stream", S, S)
    stream.pipe_input("a", "x", timestamp=3)
    stream.pipe_input("b", "y", timestamp=4)
    assert _records(driver) == [("a", "x+keep-a", 3)]


def test_stream_stream_join_rejects_missing_windows():
    builder = StreamsBuilder()
    with pytest.raises(TypeError, match="JoinWindows"):
        builder.stream("a").join(builder.stream("b"), _joiner)


# --- stream-stream ---------------------------------------------------------------------------


def _stream_stream(drive: Any, kind: str, windows: JoinWindows) -> tuple[Any, Any, Any]:
    builder = StreamsBuilder()
    left = builder.stream("left")
    right = builder.stream("right")
    getattr(left, kind)(right, _joiner, windows).to("out")
    driver = drive(builder.build())
    return driver, driver.create_input_topic("left", S, S), driver.create_input_topic("right", S, S)


def test_stream_stream_inner_join_within_the_window(drive):
    driver, left, right = _stream_stream(drive, "join", JoinWindows.of_time_difference_with_no_grace(100))
    left.pipe_input("a", "L1", timestamp=0)
    right.pipe_input("a", "R1", timestamp=50)  # within 100 ms: joins, at the later timestamp
    right.pipe_input("a", "R2", timestamp=150)  # 150 ms after L1: too far
    left.pipe_input("a", "L2", timestamp=160)  # joins R1 (110 ms before? no) and R2 (10 ms before)
    right.pipe_input("b", "R3", timestamp=170)  # no partner
    assert _records(driver) == [("a", "L1+R1", 50), ("a", "L2+R2", 160)]


def test_stream_stream_join_window_can_be_asymmetric(drive):
    windows = JoinWindows.of_time_difference_with_no_grace(0).after(100)
    driver, left, right = _stream_stream(drive, "join", windows)
    right.pipe_input("a", "R-before", timestamp=50)
    left.pipe_input("a", "L", timestamp=100)  # R-before is earlier than L: outside [L, L + 100]
    right.pipe_input("a", "R-after", timestamp=150)
    assert _records(driver) == [("a", "L+R-after", 150)]


def test_stream_stream_left_join_emits_unjoined_records_when_their_window_closes(drive):
    windows = JoinWindows.of_time_difference_with_no_grace(100)
    driver, left, right = _stream_stream(drive, "left_join", windows)
    left.pipe_input("a", "L1", timestamp=0)
    left.pipe_input("b", "L2", timestamp=10)
    right.pipe_input("b", "R1", timestamp=60)  # joins L2: L2 is never emitted unjoined
    assert _records(driver) == [("b", "L2+R1", 60)]
    right.pipe_input("z", "R-late", timestamp=101)  # stream time 101 closes L1's window [0, 100]
    assert _records(driver) == [("a", "L1+None", 0)]


def test_stream_stream_outer_join_emits_both_sides_unjoined(drive):
    windows = JoinWindows.of_time_difference_with_no_grace(10)
    driver, left, right = _stream_stream(drive, "outer_join", windows)
    left.pipe_input("a", "L", timestamp=0)
    right.pipe_input("b", "R", timestamp=5)
    left.pipe_input("c", "X", timestamp=100)
    assert sorted(_records(driver)) == [("a", "L+None", 0), ("b", "None+R", 5)]


@pytest.mark.parametrize(("grace", "joined"), [(50, False), (250, True)])
def test_stream_stream_join_grace_bounds_how_late_a_record_may_join(drive, grace, joined):
    windows = JoinWindows.of_time_difference_and_grace(10, grace)
    driver, left, right = _stream_stream(drive, "join", windows)
    right.pipe_input("a", "R", timestamp=100)
    right.pipe_input("z", "advance", timestamp=300)
    # 200 ms late: R is still kept only if the window store's retention (20 + grace) covers it.
    left.pipe_input("a", "L", timestamp=95)
    assert _records(driver) == ([("a", "L+R", 100)] if joined else [])


def test_stream_stream_outer_side_emits_null_key_records_at_once(drive):
    driver, left, right = _stream_stream(drive, "left_join", JoinWindows.of_time_difference_with_no_grace(10))
    left.pipe_input(None, "L", timestamp=5)
    right.pipe_input(None, "R", timestamp=5)  # the inner side drops it
    assert _records(driver) == [(None, "L+None", 5)]


def test_stream_stream_join_topology_shape_follows_kafka():
    builder = StreamsBuilder()
    builder.stream("left").join(
        builder.stream("right"), _joiner, JoinWindows.of_time_difference_with_no_grace(100)
    ).to("out")
    topology = builder.build()
    assert list(topology.nodes) == [
        "KSTREAM-SOURCE-0000000000",
        "KSTREAM-SOURCE-0000000001",
        "KSTREAM-WINDOWED-0000000002",
        "KSTREAM-WINDOWED-0000000003",
        "KSTREAM-JOINTHIS-0000000004",
        "KSTREAM-JOINOTHER-0000000005",
        "KSTREAM-MERGE-0000000006",
        "KSTREAM-SINK-0000000007",
    ]
    stores = topology.store_builders
    assert set(stores) == {"KSTREAM-JOINTHIS-0000000004-store", "KSTREAM-JOINOTHER-0000000005-store"}
    assert stores["KSTREAM-JOINTHIS-0000000004-store"].retention_ms == 200
    plan = topology.build("app")
    assert frozenset({"left", "right"}) in plan.copartition_groups
    assert plan.internal_topics["app-KSTREAM-JOINTHIS-0000000004-store-changelog"].windowed


def test_left_join_adds_the_shared_outer_store():
    builder = StreamsBuilder()
    builder.stream("left").left_join(
        builder.stream("right"), _joiner, JoinWindows.of_time_difference_with_no_grace(100)
    )
    topology = builder.build()
    assert set(topology.store_builders) == {
        "KSTREAM-JOINTHIS-0000000004-store",
        "KSTREAM-OUTEROTHER-0000000005-store",
        "KSTREAM-OUTERSHARED-0000000004-store",
    }
    # A key-value store, as Kafka's: its changelog is compacted, not windowed.
    assert topology.store_builders["KSTREAM-OUTERSHARED-0000000004-store"].store_type == "keyvalue"
    changelog = topology.build("app").internal_topics["app-KSTREAM-OUTERSHARED-0000000004-store-changelog"]
    assert not changelog.windowed


def test_stream_joined_names_processors_stores_and_repartition_topics():
    builder = StreamsBuilder()
    left = builder.stream("left").select_key(lambda k, v: v)
    left.join(
        builder.stream("right"),
        _joiner,
        JoinWindows.of_time_difference_with_no_grace(100),
        StreamJoined.with_(S, S, S).with_name("j").with_store_name("s"),
    )
    topology = builder.build()
    names = {"j-this-windowed", "j-other-windowed", "j-this-join", "j-other-join", "j-merge"}
    assert names <= set(topology.nodes)
    assert {"s-this-join-store", "s-other-join-store"} == set(topology.store_builders)
    assert "app-j-left-repartition" in topology.build("app").internal_topics


# --- stream-stream: StreamJoined store suppliers (Kafka's KStreamKStreamJoinTest) -------------


def _supplied_join(kind: str, joined: StreamJoined, windows: JoinWindows | None = None) -> StreamsBuilder:
    builder = StreamsBuilder()
    getattr(builder.stream("left"), kind)(
        builder.stream("right"), _joiner, windows or JoinWindows.of_time_difference_and_grace(100, 10), joined
    ).to("out")
    return builder


def test_store_suppliers_name_the_join_stores_and_their_changelogs(drive):
    joined = (
        StreamJoined.with_(S, S, S)
        .with_this_store_supplier(
            Stores.in_memory_window_store("this-side", 210, 200, retain_duplicates=True)
        )
        .with_other_store_supplier(
            Stores.persistent_window_store("other-side", 210, 200, retain_duplicates=True)
        )
    )
    topology = _supplied_join("outer_join", joined).build()
    stores = topology.store_builders
    # The outer store is named after this side's supplier and kept as it is: in memory.
    assert set(stores) == {"this-side", "other-side", "this-side-outer-shared-join-store"}
    assert not stores["this-side"].supplier.persistent and stores["other-side"].supplier.persistent
    assert not stores["this-side-outer-shared-join-store"].supplier.persistent
    topics = topology.build("app").internal_topics
    assert topics["app-this-side-changelog"].windowed and topics["app-other-side-changelog"].windowed
    assert "app-this-side-outer-shared-join-store-changelog" in topics
    driver = drive(topology)
    driver.create_input_topic("left", S, S).pipe_input("a", "L", timestamp=5)
    driver.create_input_topic("right", S, S).pipe_input("a", "R", timestamp=50)
    assert _records(driver) == [("a", "L+R", 50)]
    assert [(k.key, v) for k, v in driver.get_window_store("this-side").all()] == [("a", "L")]
    assert [(k.key, v) for k, v in driver.get_window_store("other-side").all()] == [("a", "R")]


def test_one_store_supplier_leaves_the_other_side_named_by_the_join(drive):
    supplier = Stores.in_memory_window_store("mine", 210, 200, retain_duplicates=True)
    joined = StreamJoined.with_(S, S, S).with_store_name("s").with_other_store_supplier(supplier)
    assert set(_supplied_join("join", joined).build().store_builders) == {"s-this-join-store", "mine"}


def test_store_suppliers_can_be_given_as_kafkas_with_overload():
    this = Stores.in_memory_window_store("a-side", 210, 200, retain_duplicates=True)
    other = Stores.in_memory_window_store("b-side", 210, 200, retain_duplicates=True)
    joined = StreamJoined.with_(this, other)
    assert (joined.this_store_supplier, joined.other_store_supplier) == (this, other)
    with pytest.raises(TypeError, match="window store supplier"):
        StreamJoined.with_(S, S, S).with_this_store_supplier("a-side")


@pytest.mark.parametrize(
    ("this", "other", "message"),
    [
        (("x", 210, 200, False), None, "must retain duplicates"),
        (("x", 210, 100, True), None, "Window settings mismatch.*window size 100 ms"),
        (None, ("y", 200, 200, True), "Window settings mismatch.*retention 200 ms"),
        (("same", 210, 200, True), ("same", 210, 200, True), "Both store suppliers .* 'same'"),
    ],
)
def test_store_suppliers_must_match_the_join_windows(this, other, message):
    joined = StreamJoined.with_(S, S, S)
    if this is not None:
        joined = joined.with_this_store_supplier(Stores.in_memory_window_store(*this))
    if other is not None:
        joined = joined.with_other_store_supplier(Stores.persistent_window_store(*other))
    with pytest.raises(StreamsException, match=message):
        _supplied_join("left_join", joined)


# --- stream-stream: cases of Kafka's KStreamKStreamLeftJoinTest and KStreamKStreamOuterJoinTest --


INT = Serdes.integer()


def _kafka_joiner(left: Any, right: Any) -> str:
    # Kafka's tests join with value1 + "+" + value2, so a missing side reads "null".
    return f"{'null' if left is None else left}+{'null' if right is None else right}"


def _integer_keyed_join(drive: Any, kind: str, windows: JoinWindows) -> tuple[Any, Any, Any]:
    builder = StreamsBuilder()
    left = builder.stream("left")
    right = builder.stream("right")
    getattr(left, kind)(right, _kafka_joiner, windows).to("out")
    driver = drive(builder.build(), default_key_serde="integer")
    return driver, driver.create_input_topic("left", INT, S), driver.create_input_topic("right", INT, S)


def _integer_keyed_records(driver: Any) -> list[tuple[Any, Any, int]]:
    records = driver.create_output_topic("out", INT, S).read_records_to_list()
    return [(r.key, r.value, r.timestamp) for r in records]


@pytest.mark.parametrize("kind", ["left_join", "outer_join"])
def test_unjoined_records_with_the_same_key_and_timestamp_are_all_emitted(drive, kind):
    windows = JoinWindows.of_time_difference_and_grace(100, 10)
    driver, left, right = _integer_keyed_join(drive, kind, windows)
    left.pipe_input(0, "A0", timestamp=0)
    left.pipe_input(0, "A0-0", timestamp=0)  # a duplicate of key and time: kept beside the first
    right.pipe_input(5, "advance", timestamp=500)  # closes both records' windows
    assert _integer_keyed_records(driver) == [(0, "A0+null", 0), (0, "A0-0+null", 0)]


def test_a_join_partner_removes_every_waiting_record_of_its_key_and_time(drive):
    driver, left, right = _integer_keyed_join(
        drive, "left_join", JoinWindows.of_time_difference_and_grace(100, 10)
    )
    left.pipe_input(0, "A0", timestamp=0)
    left.pipe_input(0, "A0-0", timestamp=0)
    right.pipe_input(0, "a0", timestamp=50)
    right.pipe_input(5, "advance", timestamp=500)
    assert _integer_keyed_records(driver) == [(0, "A0+a0", 50), (0, "A0-0+a0", 50)]


def test_outer_join_emits_the_right_side_first_at_equal_timestamps(drive):
    windows = JoinWindows.of_time_difference_and_grace(100, 10)
    driver, left, right = _integer_keyed_join(drive, "outer_join", windows)
    left.pipe_input(0, "A0", timestamp=0)
    right.pipe_input(1, "b1", timestamp=0)
    left.pipe_input(9, "advance", timestamp=500)
    assert _integer_keyed_records(driver) == [(1, "null+b1", 0), (0, "A0+null", 0)]


def test_outer_join_emits_waiting_records_by_timestamp_then_side_then_key(drive):
    windows = JoinWindows.of_time_difference_and_grace(100, 10)
    driver, left, right = _integer_keyed_join(drive, "outer_join", windows)
    left.pipe_input(1, "A1", timestamp=7)
    left.pipe_input(3, "A3", timestamp=0)
    left.pipe_input(0, "A0", timestamp=0)
    right.pipe_input(4, "b4", timestamp=0)
    right.pipe_input(2, "b2", timestamp=0)
    right.pipe_input(5, "b5", timestamp=3)
    left.pipe_input(9, "advance", timestamp=500)
    assert _integer_keyed_records(driver) == [
        (2, "null+b2", 0),
        (4, "null+b4", 0),
        (0, "A0+null", 0),
        (3, "A3+null", 0),
        (5, "null+b5", 3),
        (1, "A1+null", 7),
    ]


def test_late_unjoined_result_carries_the_headers_of_the_record_that_closed_its_window(drive):
    # Kafka forwards the unjoined record while processing the record that closed its window.
    builder = StreamsBuilder()
    builder.stream("left").left_join(
        builder.stream("right"), _kafka_joiner, JoinWindows.of_time_difference_and_grace(0, 3)
    ).to("out")
    driver = drive(builder.build())
    driver.create_input_topic("left", S, S).pipe_input("d", "zzz", timestamp=12)
    driver.create_input_topic("right", S, S).pipe_input("a", "z", timestamp=17, headers=[("h", b"1")])
    (record,) = driver.create_output_topic("out", S, S).read_records_to_list()
    assert (record.key, record.value, record.timestamp) == ("d", "zzz+null", 12)
    assert list(record.headers) == [("h", b"1")]


def test_a_scan_of_waiting_records_resumes_from_the_last_one_it_looked_at(drive):
    # Kafka's scan leaves its "oldest waiting" time at the last record it looked at (b@13 here,
    # not d@10), so at a@32 it skips the scan and d@10 stays waiting (Kafka Streams' answer).
    windows = JoinWindows.of_time_difference_and_grace(10, 10)
    driver, left, _ = _stream_stream(drive, "left_join", windows)
    for key, value, timestamp in [
        ("d", "ab", 10),
        ("b", "x", 13),
        ("b", "q", 8),
        ("d", "xz", 30),
        ("a", "z", 32),
    ]:
        left.pipe_input(key, value, timestamp=timestamp)
    assert _records(driver) == [("b", "q+None", 8)]


def test_asymmetric_outer_join_closes_each_side_by_its_own_look_ahead(drive):
    # before 0, after 5: a left record waits 5 ms for right partners, a right record none for left
    # ones, so right b@8 is emitted at stream time 11 while left ab@7 (open until 12) still waits.
    windows = JoinWindows.of_time_difference_with_no_grace(5).before(0)
    driver, left, right = _stream_stream(drive, "outer_join", windows)
    left.pipe_input("ab", "q", timestamp=7)
    right.pipe_input("b", "z", timestamp=8)
    right.pipe_input("b", "z", timestamp=11)
    assert _records(driver) == [("b", "None+z", 8)]


# --- table-table -----------------------------------------------------------------------------


def _table_table(drive: Any, kind: str, materialized: Materialized | None = None) -> tuple[Any, Any, Any]:
    builder = StreamsBuilder()
    left = builder.table("left")
    right = builder.table("right")
    getattr(left, kind)(right, _joiner, materialized).to_stream().to("out")
    driver = drive(builder.build())
    return driver, driver.create_input_topic("left", S, S), driver.create_input_topic("right", S, S)


def test_table_table_inner_join_updates_from_both_sides(drive):
    driver, left, right = _table_table(drive, "join")
    left.pipe_input("a", "1")
    right.pipe_input("a", "X")
    left.pipe_input("a", "2")
    right.pipe_input("b", "Y")  # no left row: nothing
    right.pipe_input("a", None)  # the joined row disappears
    assert [(k, v) for k, v, _ in _records(driver)] == [("a", "1+X"), ("a", "2+X"), ("a", None)]


def test_table_table_left_and_outer_joins(drive):
    driver, left, right = _table_table(drive, "left_join")
    left.pipe_input("a", "1")
    right.pipe_input("a", "X")
    right.pipe_input("b", "Y")
    assert [(k, v) for k, v, _ in _records(driver)] == [("a", "1+None"), ("a", "1+X")]

    driver, left, right = _table_table(drive, "outer_join")
    right.pipe_input("b", "Y")
    left.pipe_input("b", "2")
    assert [(k, v) for k, v, _ in _records(driver)] == [("b", "None+Y"), ("b", "2+Y")]


def test_materialized_table_table_join_is_queryable(drive):
    driver, left, right = _table_table(drive, "join", Materialized.as_("joined"))
    left.pipe_input("a", "1")
    right.pipe_input("a", "X")
    assert driver.get_key_value_store("joined").get("a") == "1+X"


def test_join_results_can_feed_further_operations(drive):
    builder = StreamsBuilder()
    table = builder.table("table")
    builder.stream("stream").join(table, _joiner).map(lambda k, v: KeyValue(v, k)).to("out")
    driver = drive(builder.build())
    driver.create_input_topic("table", S, S).pipe_input("a", "A", timestamp=2)
    driver.create_input_topic("stream", S, S).pipe_input("a", "x", timestamp=1)
    assert _records(driver) == [("x+A", "a", 1)]


# -- on a cluster ----------------------------------------------------------------------------------
# Run by KafkaStreams on the embedded cluster: co-partitioned topics of several partitions, which
# the test driver (one partition) does not cover.


def _latest(cluster: EmbeddedCluster, topic: str, value_serde: Any) -> dict[object, object]:
    latest: dict[object, object] = {}
    for record in cluster.read(topic):
        latest[S.deserialize(topic, record.key)] = value_serde.deserialize(topic, record.value)
    return latest


def test_stream_table_join_across_partitions(
    embedded_cluster: EmbeddedCluster, app_id: str, tmp_path: Path, clients: Clients
) -> None:
    embedded_cluster.create_topic("users", partitions=2)
    embedded_cluster.create_topic("clicks", partitions=2)
    embedded_cluster.create_topic("enriched", partitions=2)
    builder = StreamsBuilder()
    users = builder.table("users", materialized=Materialized.as_("users-by-id"))
    builder.stream("clicks").join(users, lambda click, name: f"{name} clicked {click}").to("enriched")
    config = client_settings(embedded_cluster, app_id, tmp_path)
    streams = clients.start(builder.build(), config, embedded_cluster)
    for user, name in [("u1", "Ann"), ("u2", "Bob")]:
        embedded_cluster.produce("users", user.encode(), name.encode(), timestamp=1)

    def table_loaded() -> bool:
        try:
            store = streams.store("users-by-id")
            return store.get("u1") == "Ann" and store.get("u2") == "Bob"
        except InvalidStateStoreException:
            return False

    # The join reads the table's current state: let the rows arrive before the clicks.
    wait_until(table_loaded, 20.0, "the users table")
    embedded_cluster.produce("clicks", b"u1", b"home", timestamp=5)
    embedded_cluster.produce("clicks", b"u2", b"cart", timestamp=6)
    expected = {"u1": "Ann clicked home", "u2": "Bob clicked cart"}
    wait_until(lambda: _latest(embedded_cluster, "enriched", S) == expected, 20.0, f"the joins {expected}")
