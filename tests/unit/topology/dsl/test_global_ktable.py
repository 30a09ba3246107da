"""GlobalKTable, add_global_store and pattern sources: the DSL, describe() and the test driver."""

from __future__ import annotations

import re

import pytest

from kstreams.errors import TopologyException
from kstreams.processor import Processor, ProcessorContext, Record
from kstreams.serdes import Serdes
from kstreams.state import Stores
from kstreams.topology import GlobalKTable, Materialized, Named, StreamsBuilder, Topology

S = Serdes.string()


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
        "      --> KSTREAM-JOIN-0000000003\n"
        "    Processor: KSTREAM-JOIN-0000000003 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000004\n"
        "      <-- KSTREAM-SOURCE-0000000002\n"
        "    Sink: KSTREAM-SINK-0000000004 (topic: out)\n"
        "      <-- KSTREAM-JOIN-0000000003\n\n"
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
