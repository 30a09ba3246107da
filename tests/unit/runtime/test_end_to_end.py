"""The threaded runtime end to end on the embedded cluster: polling thread, stream threads,
restore thread, commit, rebalances between clients, and takeover after a crash."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import pytest

from kstreams.client import KafkaStreams
from kstreams.cluster import EmbeddedCluster
from kstreams.processor import Processor, PunctuationType, Record
from kstreams.serdes import Serdes
from kstreams.state import Stores
from kstreams.topology.topology import Topology

LONG = Serdes.long()
STRING = Serdes.string()


def wait_until(condition: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    """Wait for a condition that other threads make true (checked every 20 ms)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


class Upper(Processor):
    def init(self, context):  # type: ignore[no-untyped-def]
        self.context = context

    def process(self, record: Record) -> None:
        self.context.forward(record.with_value(record.value.upper()))


class CountPerKey(Processor):
    """Counts records per key in a logged store and forwards the running count."""

    def init(self, context):  # type: ignore[no-untyped-def]
        self.context = context
        self.store = context.get_state_store("counts")

    def process(self, record: Record) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(record.with_value(count))


def upper_topology() -> Topology:
    topology = Topology()
    topology.add_source("src", "in", key_deserializer=STRING, value_deserializer=STRING)
    topology.add_processor("upper", Upper, "src")
    topology.add_sink("sink", "out", "upper", key_serializer=STRING, value_serializer=STRING)
    return topology


def count_topology() -> Topology:
    topology = Topology()
    topology.add_source("src", "in", key_deserializer=STRING, value_deserializer=STRING)
    topology.add_processor("count", CountPerKey, "src")
    topology.add_state_store(
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("counts"), STRING, LONG), "count"
    )
    topology.add_sink("sink", "out", "count", key_serializer=STRING, value_serializer=LONG)
    return topology


def latest(cluster: EmbeddedCluster, topic: str) -> dict[str, int]:
    return {r.key.decode(): LONG.deserialize(topic, r.value) for r in cluster.read(topic)}


def produce_words(cluster: EmbeddedCluster, count: int, keys: int, start: int = 0) -> Counter[str]:
    expected: Counter[str] = Counter()
    for i in range(start, start + count):
        key = f"key-{i % keys}"
        cluster.produce("in", key.encode(), f"value-{i}".encode(), timestamp=1_000 + i)
        expected[key] += 1
    return expected


@pytest.fixture
def cluster() -> EmbeddedCluster:
    cluster = EmbeddedCluster()
    cluster.create_topic("in", 4)
    cluster.create_topic("out", 4)
    yield cluster
    cluster.close()


def new_client(
    topology: Topology, cluster: EmbeddedCluster, tmp_path, name: str = "a", **overrides: object
) -> KafkaStreams:
    config = {
        "application.id": "e2e",
        "client.id": f"client-{name}",
        "num.stream.threads": 2,
        "commit.interval.ms": 50,
        "session.timeout.ms": 1000,
        "state.dir": str(tmp_path / name),
    }
    config.update(overrides)
    return KafkaStreams(topology, config, cluster=cluster)


def test_stateless_pipeline_processes_every_record_once(cluster: EmbeddedCluster, tmp_path) -> None:
    for i in range(2000):
        cluster.produce("in", f"k{i}".encode(), f"v{i}".encode())
    streams = new_client(upper_topology(), cluster, tmp_path)
    streams.start()
    try:
        wait_until(lambda: len(cluster.read("out")) >= 2000, what="2000 outputs")
    finally:
        assert streams.close(timeout=30)
    values = sorted(r.value.decode() for r in cluster.read("out"))
    assert values == sorted(f"V{i}" for i in range(2000))
    assert streams.state is KafkaStreams.State.NOT_RUNNING


def test_stream_threads_are_named_after_the_client(cluster: EmbeddedCluster, tmp_path) -> None:
    streams = new_client(upper_topology(), cluster, tmp_path, **{"num.stream.threads": 3})
    streams.start()
    try:
        names = sorted(t.thread_name for t in streams.metadata_for_local_threads())
        assert names == [f"client-a-StreamThread-{i}" for i in (1, 2, 3)]
    finally:
        streams.close(timeout=30)


def test_counts_are_exact_with_two_clients_and_after_one_leaves(cluster: EmbeddedCluster, tmp_path) -> None:
    first = new_client(count_topology(), cluster, tmp_path, "a")
    second = new_client(count_topology(), cluster, tmp_path, "b")
    first.start()
    second.start()
    try:
        expected = produce_words(cluster, 3000, keys=50)
        wait_until(lambda: latest(cluster, "out") == dict(expected), what="exact counts with two clients")
        assert first.close(timeout=30)
        # The survivor takes over every task (restoring the counts from the changelog).
        expected += produce_words(cluster, 2000, keys=50, start=3000)
        wait_until(lambda: latest(cluster, "out") == dict(expected), what="exact counts after takeover")
    finally:
        first.close(timeout=30)
        second.close(timeout=30)
    assert cluster.topics()["e2e-counts-changelog"].partitions == 4


def test_crashed_client_loses_nothing_at_least_once(cluster: EmbeddedCluster, tmp_path) -> None:
    crashing = new_client(count_topology(), cluster, tmp_path, "a", **{"commit.interval.ms": 200})
    crashing.start()
    expected = produce_words(cluster, 3000, keys=30)
    wait_until(lambda: sum(latest(cluster, "out").values()) > 0, what="some progress before the crash")
    crashing._abandon()
    expected += produce_words(cluster, 1000, keys=30, start=3000)
    successor = new_client(count_topology(), cluster, tmp_path, "b")
    successor.start()
    try:
        # At least once: every record counted, some possibly twice (processed after the last commit).
        wait_until(
            lambda: all(latest(cluster, "out").get(k, 0) >= n for k, n in expected.items()),
            timeout=60,
            what="every record reflected in the output",
        )
        out = latest(cluster, "out")
        assert set(out) == set(expected)
        # The state matches the committed offsets: each count is what the successor's store holds.
        store = successor.store("counts")
        assert {k: store.get(k) for k in expected} == out
    finally:
        successor.close(timeout=30)


class WallClockTicker(Processor):
    def init(self, context):  # type: ignore[no-untyped-def]
        self.context = context
        context.schedule(50, PunctuationType.WALL_CLOCK_TIME, self.tick)

    def tick(self, timestamp: int) -> None:
        self.context.forward(Record("tick", str(self.context.task_id), timestamp))

    def process(self, record: Record) -> None:
        pass


def test_wall_clock_punctuation_runs_without_input(cluster: EmbeddedCluster, tmp_path) -> None:
    topology = Topology()
    topology.add_source("src", "in", key_deserializer=STRING, value_deserializer=STRING)
    topology.add_processor("ticker", WallClockTicker, "src")
    topology.add_sink("sink", "out", "ticker", key_serializer=STRING, value_serializer=STRING)
    streams = new_client(topology, cluster, tmp_path)
    streams.start()
    try:
        wait_until(
            lambda: {r.value.decode() for r in cluster.read("out")} >= {"0_0", "0_1", "0_2", "0_3"},
            what="a tick from every task",
        )
    finally:
        streams.close(timeout=30)


# -- the DSL on the threaded runtime ----------------------------------------------------------------


def windowed_count_topology():  # type: ignore[no-untyped-def]
    from kstreams import Consumed, Grouped, Materialized, Produced, StreamsBuilder, TimeWindows

    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .group_by(lambda key, value: value.split("-")[0], Grouped.with_(STRING, STRING))  # repartitions
        .windowed_by(TimeWindows.of_size_and_grace(100, 10_000))
        .count(Materialized.as_("per-minute"))
        .to_stream()
        .map(lambda wk, n: (f"{wk.key}@{wk.start}", n))
        .to("out", Produced.with_(STRING, LONG))
    )
    return builder.build()


def test_windowed_count_is_exact_across_two_clients_and_a_takeover(
    cluster: EmbeddedCluster, tmp_path
) -> None:
    first = new_client(windowed_count_topology(), cluster, tmp_path, "a")
    second = new_client(windowed_count_topology(), cluster, tmp_path, "b")
    first.start()
    second.start()
    expected: Counter[str] = Counter()

    def produce(start: int, count: int) -> None:
        for i in range(start, start + count):
            prefix = f"p{i % 7}"
            ts = 10_000 + i  # 100 ms windows: ten records per window and prefix on average
            cluster.produce("in", f"k{i}".encode(), f"{prefix}-{i}".encode(), timestamp=ts)
            expected[f"{prefix}@{ts - ts % 100}"] += 1

    try:
        produce(0, 1500)
        wait_until(lambda: latest(cluster, "out") == dict(expected), what="exact windowed counts")
        assert first.close(timeout=30)
        produce(1500, 1000)
        wait_until(lambda: latest(cluster, "out") == dict(expected), what="exact counts after takeover")
    finally:
        first.close(timeout=30)
        second.close(timeout=30)
    topics = cluster.topics()
    assert "e2e-per-minute-changelog" in topics
    assert any(name.endswith("-repartition") for name in topics)


def test_stream_table_join_is_exact(cluster: EmbeddedCluster, tmp_path) -> None:
    from kstreams import Consumed, Produced, StreamsBuilder

    cluster.create_topic("users", 4)
    builder = StreamsBuilder()
    users = builder.table("users", Consumed.with_(STRING, STRING))
    (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .left_join(users, lambda click, region: f"{click}:{region}")
        .to("out", Produced.with_(STRING, STRING))
    )
    for u in range(20):
        cluster.produce("users", f"u{u}".encode(), f"region-{u % 3}".encode(), timestamp=1)
    streams = new_client(builder.build(), cluster, tmp_path)
    streams.start()
    try:
        assert streams.wait_for_state(KafkaStreams.State.RUNNING, timeout=30)
        wait_until(lambda: streams.store is not None and _table_loaded(streams), what="the table to load")
        for i in range(400):
            cluster.produce("in", f"u{i % 25}".encode(), f"click{i}".encode(), timestamp=10 + i)
        wait_until(lambda: len(cluster.read("out")) >= 400, what="400 joined records")
    finally:
        streams.close(timeout=30)
    joined = sorted((r.key.decode(), r.value.decode()) for r in cluster.read("out"))
    expected = sorted(
        (f"u{i % 25}", f"click{i}:" + (f"region-{(i % 25) % 3}" if i % 25 < 20 else "None"))
        for i in range(400)
    )
    assert joined == expected


def _table_loaded(streams: KafkaStreams) -> bool:
    processed = sum(v for m, v in streams.metrics().items() if m.name == "process-total")
    return processed >= 20
