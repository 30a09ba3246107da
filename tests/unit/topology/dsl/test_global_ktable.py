"""GlobalKTable, add_global_store and pattern sources: the DSL, describe() and the test driver.

The module is marked ``on_cluster``: its tests using ``drive`` run on a KafkaStreams client over an
EmbeddedCluster too (tests/unit/topology/dsl/conftest.py), and the tests at its end check on a
cluster what the driver cannot show."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kstreams import KafkaStreams
from kstreams.cluster.port import TopicPartition
from kstreams.errors import TopologyException
from kstreams.processor import Processor, ProcessorContext, Record
from kstreams.serdes import Serdes
from kstreams.state import Stores
from kstreams.state.restore_listener import StateRestoreListener
from kstreams.topology import Consumed, GlobalKTable, Materialized, Named, StreamsBuilder, Topology
from tests.support.clients import client_settings, wait_timeout
from tests.support.waiting import wait_until

S = Serdes.string()

pytestmark = pytest.mark.on_cluster(representative="test_orders_enriched_from_global_table_on_both_clusters")
# The reasons of the tests of this module that do not run, or run differently, on the cluster driver.
A_PATTERN_SOURCE = (
    "a pattern source names no topic for the cluster driver to create (the cluster case is "
    "test_pattern_source_reads_every_matching_topic)"
)
PIPES_INTO_A_GLOBAL_STORE = (
    "pipes into a global table's topic, whose records no committed offset covers (the cluster case is "
    "test_add_global_store_with_custom_update_processor)"
)
PIPES_INTO_A_GLOBAL_TABLE = (
    "pipes into a global table's topic, whose records no committed offset covers (the cluster case is "
    "test_orders_enriched_from_global_table_on_both_clusters)"
)


def enrich(left: bool = False) -> tuple[StreamsBuilder, GlobalKTable]:
    builder = StreamsBuilder()
    customers = builder.global_table("customers", materialized=Materialized.as_("customers-store"))
    orders = builder.stream("orders")
    join = orders.left_join if left else orders.join
    join(customers, lambda order_id, order: order.split(":")[0], lambda order, name: f"{order}/{name}").to(
        "out"
    )
    return builder, customers


def rows(driver, topic: str = "out") -> list[tuple[object, object, int]]:
    return [
        (r.key, r.value, r.timestamp) for r in driver.create_output_topic(topic, S, S).read_records_to_list()
    ]


@pytest.mark.driver_only(reason=PIPES_INTO_A_GLOBAL_TABLE)
@pytest.mark.parametrize("left", [False, True])
def test_stream_global_table_join_looks_up_the_selected_key(drive, left: bool) -> None:
    builder, _ = enrich(left)
    driver = drive(builder.build())
    customers = driver.create_input_topic("customers", S, S)
    orders = driver.create_input_topic("orders", S, S)
    customers.pipe_input("c1", "Alice", 100)
    orders.pipe_input("o1", "c1:book", 10)  # older than the table row: still joins
    orders.pipe_input("o2", "c2:pen", 11)  # no row for c2
    customers.pipe_input("c2", "Bob", 12)
    orders.pipe_input("o3", "c2:ink", 13)
    customers.pipe_input("c1", None, 14)  # tombstone deletes c1
    orders.pipe_input("o4", "c1:cup", 15)
    orders.pipe_input("o5", None, 16)  # null value: dropped by both joins
    orders.pipe_input(None, "c2:mug", 17)  # null stream key: the selector still finds c2
    expected_inner = [("o1", "c1:book/Alice", 10), ("o3", "c2:ink/Bob", 13), (None, "c2:mug/Bob", 17)]
    expected_left = [
        ("o1", "c1:book/Alice", 10),
        ("o2", "c2:pen/None", 11),
        ("o3", "c2:ink/Bob", 13),
        ("o4", "c1:cup/None", 15),
        (None, "c2:mug/Bob", 17),
    ]
    assert rows(driver) == (expected_left if left else expected_inner)
    assert driver.get_key_value_store("customers-store").get("c2") == "Bob"
    assert driver.get_key_value_store("customers-store").get("c1") is None
    assert driver.get_timestamped_key_value_store("customers-store").get("c2").timestamp == 12


@pytest.mark.driver_only(reason=PIPES_INTO_A_GLOBAL_TABLE)
@pytest.mark.parametrize("left", [False, True])
def test_a_null_selected_key_is_dropped_by_an_inner_join_and_joined_with_none_by_a_left_join(
    drive, left: bool
) -> None:
    """As Kafka Streams 4.1 answers (the oracle's case global-table-left-join)."""
    builder = StreamsBuilder()
    table = builder.global_table("customers")
    stream = builder.stream("orders")
    join = stream.left_join if left else stream.join
    join(table, lambda k, v: None if v == "none" else v, lambda v, name: f"{v}/{name}").to("out")
    driver = drive(builder.build())
    driver.create_input_topic("customers", S, S).pipe_input("c1", "Alice", 1)
    orders = driver.create_input_topic("orders", S, S)
    orders.pipe_input("o1", "none", 2)
    orders.pipe_input(None, "none", 3)
    orders.pipe_input("o2", "c1", 4)
    unjoined = [("o1", "none/None", 2), (None, "none/None", 3)] if left else []
    assert rows(driver) == [*unjoined, ("o2", "c1/Alice", 4)]


def test_global_table_describe_matches_kafka() -> None:
    builder, _ = enrich()
    assert str(builder.build().describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0 for global store (will not generate tasks)\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [customers])\n"
        "      --> KTABLE-SOURCE-0000000001\n"
        "    Processor: KTABLE-SOURCE-0000000001 (stores: [customers-store])\n"
        "      --> none\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000002 (topics: [orders])\n"
        # Kafka's globalTableJoin names inner joins KSTREAM-LEFTJOIN- too.
        "      --> KSTREAM-LEFTJOIN-0000000003\n"
        "    Processor: KSTREAM-LEFTJOIN-0000000003 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000004\n"
        "      <-- KSTREAM-SOURCE-0000000002\n"
        "    Sink: KSTREAM-SINK-0000000004 (topic: out)\n"
        "      <-- KSTREAM-LEFTJOIN-0000000003\n\n"
    )


def test_generated_global_store_name_and_ids_follow_kafka() -> None:
    builder = StreamsBuilder()
    builder.stream("orders").to("out")
    table = builder.global_table("customers")
    assert table.queryable_store_name is None
    assert table.store_name == "customers-STATE-STORE-0000000002"
    text = str(builder.build().describe())
    assert "Sub-topology: 1 for global store (will not generate tasks)\n" in text
    assert "Source: KSTREAM-SOURCE-0000000003 (topics: [customers])" in text
    plan = builder.build().build("app", {"default.key.serde": "string", "default.value.serde": "string"})
    assert [s.id for s in plan.subtopologies] == [0]
    assert [s.id for s in plan.global_subtopologies] == [1]
    assert plan.global_subtopologies[0].changelog_topics == {}
    assert not plan.internal_topics  # the topic is the store's changelog


def test_named_join_and_wrong_arguments() -> None:
    builder = StreamsBuilder()
    table = builder.global_table("customers")
    stream = builder.stream("orders")
    stream.join(table, lambda k, v: v, lambda v, t: v, Named.as_("enrich")).to("out")
    assert "Processor: enrich (stores: [])" in str(builder.build().describe())
    with pytest.raises(TypeError, match="key_selector"):
        stream.join(table, "not callable", lambda v, t: v)
    with pytest.raises(TypeError, match="joiner"):
        stream.left_join(table, lambda k, v: v, None)
    with pytest.raises(ValueError, match="topic"):
        builder.global_table("")


class _CountingUpdater(Processor[str, str, None, None]):
    """Keeps the number of updates seen per key (not the value): a custom update processor."""

    def init(self, context: ProcessorContext[None, None]) -> None:
        self.store = context.get_state_store("seen")

    def process(self, record: Record[str, str]) -> None:
        self.store.put(record.key, str(int(self.store.get(record.key) or 0) + 1))


def _seen_store():
    return Stores.key_value_store_builder(
        Stores.in_memory_key_value_store("seen"), S, S
    ).with_logging_disabled()


@pytest.mark.driver_only(reason=PIPES_INTO_A_GLOBAL_STORE)
def test_add_global_store_runs_the_update_processor_in_the_driver(drive) -> None:
    topology = Topology()
    topology.add_global_store(_seen_store(), "src", S, S, "events", "counter", _CountingUpdater)
    topology.add_source("in", "queries", key_deserializer=S, value_deserializer=S)

    class Look(Processor[str, str, str, str]):
        def init(self, context: ProcessorContext[str, str]) -> None:
            self.context = context
            self.store = context.get_state_store("seen")

        def process(self, record: Record[str, str]) -> None:
            self.context.forward(record.with_value(str(self.store.get(record.value))))

    topology.add_processor("look", Look, "in")
    topology.add_sink("out", "out", "look", key_serializer=S, value_serializer=S)
    assert str(topology.describe()).startswith(
        "Topologies:\n"
        "   Sub-topology: 0 for global store (will not generate tasks)\n"
        "    Source: src (topics: [events])\n"
        "      --> counter\n"
        "    Processor: counter (stores: [seen])\n"
        "      --> none\n"
        "      <-- src\n"
        "  Sub-topology: 1\n"
    )
    driver = drive(topology)
    events = driver.create_input_topic("events", S, S)
    events.pipe_input("a", "x", 1)
    events.pipe_input("a", "y", 2)
    driver.create_input_topic("queries", S, S).pipe_input("q", "a", 3)
    assert rows(driver) == [("q", "2", 3)]
    assert driver.get_key_value_store("seen").get("a") == "2"


def test_add_global_store_rejects_misuse() -> None:
    topology = Topology()
    logged = Stores.key_value_store_builder(Stores.in_memory_key_value_store("seen"), S, S)
    with pytest.raises(TopologyException, match="must not have logging enabled"):
        topology.add_global_store(logged, "src", S, S, "events", "counter", _CountingUpdater)
    assert not topology.nodes
    topology.add_global_store(_seen_store(), "src", S, S, "events", "counter", _CountingUpdater)
    topology.add_source("in", "queries")
    topology.add_processor("p", _CountingUpdater, "in")
    with pytest.raises(TopologyException, match="is a global store"):
        topology.connect_processor_and_state_stores("p", "seen")
    with pytest.raises(TopologyException, match="already been registered"):
        topology.add_source("again", "events")
    with pytest.raises(TopologyException, match="already added"):
        topology.add_global_store(_seen_store(), "src2", S, S, "other", "counter2", _CountingUpdater)


@pytest.mark.driver_only(reason=A_PATTERN_SOURCE)
def test_pattern_source_describe_and_driver(drive) -> None:
    builder = StreamsBuilder()
    builder.stream(re.compile("orders-.*")).map_values(str.upper).to("out")
    topology = builder.build()
    assert str(topology.describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: orders-.*)\n"
        "      --> KSTREAM-MAPVALUES-0000000001\n"
        "    Processor: KSTREAM-MAPVALUES-0000000001 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000002\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Sink: KSTREAM-SINK-0000000002 (topic: out)\n"
        "      <-- KSTREAM-MAPVALUES-0000000001\n\n"
    )
    driver = drive(topology)
    driver.create_input_topic("orders-eu", S, S).pipe_input("k1", "a", 1)
    driver.create_input_topic("orders-us", S, S).pipe_input("k2", "b", 2)
    with pytest.raises(ValueError, match="Unknown topic"):
        driver.create_input_topic("orders", S, S).pipe_input("k3", "c", 3)  # a full match is needed
    assert rows(driver) == [("k1", "A", 1), ("k2", "B", 2)]


def test_pattern_source_matches_existing_topics_but_not_internal_ones() -> None:
    topology = Topology().add_source("s", re.compile("app-.*|orders-.*"))
    topology.add_sink("out", "out", "s")
    plan = topology.build(
        "app",
        {"default.key.serde": "string", "default.value.serde": "string"},
        topics=[
            "orders-1",
            "orders-2",
            "app-store-changelog",
            "app-x-repartition",
            "__consumer_offsets",
            "other",
        ],
    )
    assert plan.subtopologies[0].source_topics == ("orders-1", "orders-2")
    assert plan.source_patterns == {"s": "app-.*|orders-.*"}


def test_pattern_source_rejects_overlaps_and_mixtures() -> None:
    topology = Topology().add_source("named", "orders-1")
    with pytest.raises(TopologyException, match="matches topic orders-1"):
        topology.add_source("pattern", re.compile("orders-.*"))
    topology = Topology().add_source("pattern", re.compile("orders-.*"))
    with pytest.raises(TopologyException, match="matches the pattern"):
        topology.add_source("named", "orders-2")
    with pytest.raises(TopologyException, match="exactly one compiled pattern"):
        Topology().add_source("mixed", re.compile("a.*"), "b")
    with pytest.raises(ValueError, match=r"re\.Pattern"):
        StreamsBuilder().stream([re.compile("a.*")])  # type: ignore[list-item]


# -- on a cluster ----------------------------------------------------------------------------------
# GlobalKTable, global stores and pattern sources run by KafkaStreams on both cluster adapters.
#
# The global topic has more partitions than the stream joined with it: a global table needs no
# co-partitioning, because every client bootstraps and keeps all of its partitions.


Row = tuple[str | None, str | None, int]


def read(cluster: Any, topic: str) -> list[Row]:
    return [
        (S.deserialize(topic, r.key), S.deserialize(topic, r.value), r.timestamp) for r in cluster.read(topic)
    ]


@pytest.fixture
def run(cluster: Any, app_id: str, tmp_path: Path) -> Iterator[Callable[..., tuple[KafkaStreams, float]]]:
    started: list[KafkaStreams] = []

    def start(topology: Topology, listener: StateRestoreListener | None = None) -> tuple[KafkaStreams, float]:
        timeout = wait_timeout(cluster, kafka=90.0)
        streams = KafkaStreams(
            topology, client_settings(cluster, app_id, tmp_path / "state"), cluster=cluster
        )
        if listener is not None:
            streams.set_global_state_restore_listener(listener)
        started.append(streams)
        streams.start()
        wait_until(lambda: streams.state is KafkaStreams.State.RUNNING, timeout, "RUNNING")
        return streams, timeout

    yield start
    for streams in started:
        streams.close(timeout=30)


def enrich_orders(orders: str, customers: str, out: str) -> Topology:
    """Kafka's example: enrich each order with its customer from a global table."""
    builder = StreamsBuilder()
    table = builder.global_table(customers, materialized=Materialized.as_(f"{customers}-store"))
    stream = builder.stream(orders)
    # An order's value is "<customer id>:<item>"; the result "<item> for <customer name>".
    stream.join(
        table,
        lambda order_id, order: order.split(":")[0],
        lambda order, name: f"{order.split(':')[1]} for {name}",
    ).to(out)
    stream.left_join(
        table,
        lambda order_id, order: order.split(":")[0],
        lambda order, name: f"{order.split(':')[1]} for {name}",
    ).to(f"{out}-left")
    return builder.build()


def produce(cluster: Any, topic: str, key: str, value: str | None, timestamp: int) -> None:
    cluster.produce(topic, key.encode(), None if value is None else value.encode(), timestamp=timestamp)


def by_key(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda row: (row[0] or "", row[2]))


def test_orders_enriched_from_global_table_on_both_clusters(cluster: Any, app_id: str, run) -> None:
    orders, customers, out = f"{app_id}-orders", f"{app_id}-customers", f"{app_id}-enriched"
    cluster.create_topic(orders, 2)
    cluster.create_topic(customers, 3)  # not co-partitioned with the orders
    cluster.create_topic(out, 2)
    cluster.create_topic(f"{out}-left", 2)
    base = int(time.time() * 1000)
    for i, name in enumerate(["Alice", "Bob", "Carol", "Dan"]):
        produce(cluster, customers, f"c{i}", name, base + i)
    # Written before the client starts: bootstrapped before it goes RUNNING.
    streams, timeout = run(enrich_orders(orders, customers, out))
    store = streams.store(f"{customers}-store")
    assert {k: v for k, v in store.all()} == {"c0": "Alice", "c1": "Bob", "c2": "Carol", "c3": "Dan"}

    produce(cluster, orders, "o1", "c0:book", base + 10)
    produce(cluster, orders, "o2", "c3:pen", base + 11)
    produce(cluster, orders, "o3", "c9:ink", base + 12)  # no such customer
    wait_until(lambda: len(read(cluster, f"{out}-left")) >= 3, timeout, "the first orders")

    # Updates to the global topic while running reach later joins: c0 renamed, c3 deleted.
    produce(cluster, customers, "c0", "Alicia", base + 20)
    produce(cluster, customers, "c3", None, base + 21)
    produce(cluster, customers, "c9", "Ivy", base + 22)
    wait_until(
        lambda: store.get("c0") == "Alicia" and store.get("c3") is None and store.get("c9") == "Ivy",
        timeout,
        "the customer updates",
    )
    produce(cluster, orders, "o4", "c0:cup", base + 30)
    produce(cluster, orders, "o5", "c3:pad", base + 31)
    produce(cluster, orders, "o6", "c9:mug", base + 32)
    wait_until(lambda: len(read(cluster, f"{out}-left")) >= 6, timeout, "the later orders")

    assert by_key(read(cluster, out)) == [
        ("o1", "book for Alice", base + 10),
        ("o2", "pen for Dan", base + 11),
        ("o4", "cup for Alicia", base + 30),
        ("o6", "mug for Ivy", base + 32),
    ]
    assert by_key(read(cluster, f"{out}-left")) == [
        ("o1", "book for Alice", base + 10),
        ("o2", "pen for Dan", base + 11),
        ("o3", "ink for None", base + 12),
        ("o4", "cup for Alicia", base + 30),
        ("o5", "pad for None", base + 31),
        ("o6", "mug for Ivy", base + 32),
    ]
    # The global topic is the store's changelog: no changelog topic is created for it.
    assert not [t for t in cluster.topics() if t.startswith(app_id) and t.endswith("-changelog")]


class _Starts(StateRestoreListener):
    def __init__(self) -> None:
        self.starts: dict[TopicPartition, tuple[int, int]] = {}

    def on_restore_start(
        self, topic_partition: TopicPartition, store_name: str, starting: int, ending: int
    ) -> None:
        self.starts[topic_partition] = (starting, ending)


def test_restart_bootstraps_global_store_from_its_checkpoint(cluster: Any, app_id: str, run) -> None:
    orders, customers, out = f"{app_id}-orders", f"{app_id}-customers", f"{app_id}-enriched"
    cluster.create_topic(orders, 1)
    cluster.create_topic(customers, 1)
    cluster.create_topic(out, 1)
    cluster.create_topic(f"{out}-left", 1)
    base = int(time.time() * 1000)
    for i in range(3):
        produce(cluster, customers, f"c{i}", f"name{i}", base + i)
    first = _Starts()
    streams, _ = run(enrich_orders(orders, customers, out), first)
    assert first.starts == {TopicPartition(customers, 0): (0, 3)}
    assert streams.store(f"{customers}-store").get("c2") == "name2"
    assert streams.close(timeout=30)

    # While no client runs, the topic grows: the next client reads only the tail.
    produce(cluster, customers, "c3", "name3", base + 3)
    produce(cluster, customers, "c0", "renamed", base + 4)
    second = _Starts()
    streams, _ = run(enrich_orders(orders, customers, out), second)
    assert second.starts == {TopicPartition(customers, 0): (3, 5)}
    store = streams.store(f"{customers}-store")
    assert {k: v for k, v in store.all()} == {"c0": "renamed", "c1": "name1", "c2": "name2", "c3": "name3"}


class _UpperCaseUpdater(Processor[str, str, None, None]):
    """A custom global store update processor: stores values upper-cased, drops empty ones."""

    def init(self, context: ProcessorContext[None, None]) -> None:
        self.store = context.get_state_store("upper")

    def process(self, record: Record[str, str]) -> None:
        if record.value:
            self.store.put(record.key, record.value.upper())


class _LookUp(Processor[str, str, str, str]):
    """Reads the global store without being connected to it."""

    def init(self, context: ProcessorContext[str, str]) -> None:
        self.context = context
        self.store = context.get_state_store("upper")

    def process(self, record: Record[str, str]) -> None:
        self.context.forward(record.with_value(f"{record.value}={self.store.get(record.value)}"))


def test_add_global_store_with_custom_update_processor(cluster: Any, app_id: str, run) -> None:
    source, lookups, out = f"{app_id}-names", f"{app_id}-lookups", f"{app_id}-out"
    cluster.create_topic(source, 2)
    cluster.create_topic(lookups, 1)
    cluster.create_topic(out, 1)
    base = int(time.time() * 1000)
    produce(cluster, source, "a", "alpha", base)
    produce(cluster, source, "b", "", base + 1)
    topology = Topology()
    topology.add_global_store(
        Stores.key_value_store_builder(
            Stores.in_memory_key_value_store("upper"), S, S
        ).with_logging_disabled(),
        "names-source",
        S,
        S,
        source,
        "names-updater",
        _UpperCaseUpdater,
    )
    topology.add_source("lookups", lookups, key_deserializer=S, value_deserializer=S)
    topology.add_processor("look-up", _LookUp, "lookups")
    topology.add_sink("out", out, "look-up", key_serializer=S, value_serializer=S)
    streams, timeout = run(topology)
    assert streams.store("upper").get("a") == "ALPHA"
    assert streams.store("upper").get("b") is None
    produce(cluster, source, "c", "gamma", base + 2)
    wait_until(lambda: streams.store("upper").get("c") == "GAMMA", timeout, "the update of c")
    for i, key in enumerate(["a", "b", "c"]):
        produce(cluster, lookups, f"q{i}", key, base + 10 + i)
    wait_until(lambda: len(read(cluster, out)) >= 3, timeout, "the look-ups")
    assert read(cluster, out) == [
        ("q0", "a=ALPHA", base + 10),
        ("q1", "b=None", base + 11),
        ("q2", "c=GAMMA", base + 12),
    ]


def test_pattern_source_reads_every_matching_topic(cluster: Any, app_id: str, run) -> None:
    eu, us, other, out = f"{app_id}-orders-eu", f"{app_id}-orders-us", f"{app_id}-refunds", f"{app_id}-out"
    cluster.create_topic(eu, 2)
    cluster.create_topic(us, 2)
    cluster.create_topic(other, 1)
    cluster.create_topic(out, 1)
    builder = StreamsBuilder()
    builder.stream(re.compile(re.escape(app_id) + r"-orders-.*"), Consumed.with_(S, S)).map_values(
        str.upper
    ).to(out)
    topology = builder.build()
    base = int(time.time() * 1000)
    produce(cluster, eu, "k1", "croissant", base)
    produce(cluster, us, "k2", "bagel", base + 1)
    produce(cluster, other, "k3", "refund", base + 2)
    streams, timeout = run(topology)
    assert f"(topics: {re.escape(app_id)}-orders-.*)" in str(topology.describe())
    produce(cluster, eu, "k4", "tart", base + 3)
    wait_until(lambda: len(read(cluster, out)) >= 3, timeout, "the orders of both topics")
    assert sorted(read(cluster, out)) == [
        ("k1", "CROISSANT", base),
        ("k2", "BAGEL", base + 1),
        ("k4", "TART", base + 3),
    ]
    # Two topics of two partitions each in one subtopology: tasks 0_0 and 0_1 read both.
    assert streams.plan.subtopologies[0].source_topics == (eu, us)
