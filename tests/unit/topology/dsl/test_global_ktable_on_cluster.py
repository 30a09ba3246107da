"""GlobalKTable, global stores and pattern sources run by KafkaStreams on both cluster adapters.

The global topic has more partitions than the stream joined with it: a global table needs no
co-partitioning, because every client bootstraps and keeps all of its partitions.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kstreams import KafkaStreams
from kstreams.cluster import EmbeddedCluster
from kstreams.cluster.port import TopicPartition
from kstreams.processor import Processor, ProcessorContext, Record
from kstreams.runtime.restore_listener import StateRestoreListener
from kstreams.serdes import Serdes
from kstreams.state import Stores
from kstreams.topology import Consumed, Materialized, StreamsBuilder, Topology

S = Serdes.string()
Row = tuple[str | None, str | None, int]


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Check ``condition`` every 20 ms until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def client_config(cluster: Any, app_id: str, state_dir: Path) -> tuple[dict[str, object], float]:
    config: dict[str, object] = {
        "application.id": app_id,
        "default.key.serde": "string",
        "default.value.serde": "string",
        "state.dir": str(state_dir),
    }
    if isinstance(cluster, EmbeddedCluster):
        config.update({"commit.interval.ms": 50, "session.timeout.ms": 1000})
        return config, 30.0
    config.update(
        {"commit.interval.ms": 100, "session.timeout.ms": 6000, "main.consumer.max.poll.interval.ms": 10000}
    )
    return config, 90.0


def read(cluster: Any, topic: str) -> list[Row]:
    return [
        (S.deserialize(topic, r.key), S.deserialize(topic, r.value), r.timestamp) for r in cluster.read(topic)
    ]


@pytest.fixture
def run(cluster: Any, app_id: str, tmp_path: Path) -> Iterator[Callable[..., tuple[KafkaStreams, float]]]:
    started: list[KafkaStreams] = []

    def start(topology: Topology, listener: StateRestoreListener | None = None) -> tuple[KafkaStreams, float]:
        config, timeout = client_config(cluster, app_id, tmp_path / "state")
        streams = KafkaStreams(topology, config, cluster=cluster)
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
