"""KafkaStreams end to end on a real broker through the KafkaCluster: the same runtime that the
embedded tests drive, with librdkafka's eager range rebalances and the control topic."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from kstreams.client import KafkaStreams
from kstreams.processor import Processor, Record
from kstreams.serdes import Serdes
from kstreams.topology.topology import Topology
from tests.support.topologies import count_topology
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

LONG = Serdes.long()
STRING = Serdes.string()
# Timestamps near now: within every topic's retention.
NOW = int(time.time() * 1000)


# How long a test waits for what other threads do, unless it gives a timeout of its own.
WAIT_S = 60.0


class Upper(Processor):
    def init(self, context):  # type: ignore[no-untyped-def]
        self.context = context

    def process(self, record: Record) -> None:
        self.context.forward(record.with_value(record.value.upper()))


def upper_topology(source: str, sink: str) -> Topology:
    topology = Topology()
    topology.add_source("src", source, key_deserializer=STRING, value_deserializer=STRING)
    topology.add_processor("upper", Upper, "src")
    topology.add_sink("sink", sink, "upper", key_serializer=STRING, value_serializer=STRING)
    return topology


def latest(cluster, topic: str) -> dict[str, int]:
    return {r.key.decode(): LONG.deserialize(topic, r.value) for r in cluster.read(topic)}


def produce_words(cluster, topic: str, count: int, keys: int, start: int = 0) -> Counter[str]:
    expected: Counter[str] = Counter()
    for i in range(start, start + count):
        key = f"key-{i % keys}"
        cluster.produce(topic, key.encode(), f"value-{i}".encode(), timestamp=NOW + i)
        expected[key] += 1
    return expected


def new_client(
    topology: Topology, cluster, app_id: str, tmp_path, name: str, **overrides: object
) -> KafkaStreams:
    config = {
        "application.id": app_id,
        "client.id": f"{app_id}-{name}",
        "num.stream.threads": 2,
        "commit.interval.ms": 100,
        "session.timeout.ms": 6000,
        "state.dir": str(tmp_path / name),
    }
    config.update(overrides)
    return KafkaStreams(topology, config, cluster=cluster)


def test_stateless_pipeline_on_kafka(kafka_cluster, app_id, tmp_path):
    source, sink = f"{app_id}-in", f"{app_id}-out"
    kafka_cluster.create_topic(source, partitions=2)
    kafka_cluster.create_topic(sink, partitions=2)
    for i in range(200):
        kafka_cluster.produce(source, f"k{i}".encode(), f"v{i}".encode())
    streams = new_client(upper_topology(source, sink), kafka_cluster, app_id, tmp_path, "a")
    streams.start()
    try:
        wait_until(lambda: len(kafka_cluster.read(sink)) >= 200, WAIT_S, "200 outputs")
        # The group member fetches with the compiled fetcher (its assignor picks its partitions).
        assert streams._runtime is not None
        assert type(streams._runtime.consumer._consumer).__name__ == "KafkaFetcher"
    finally:
        assert streams.close(timeout=30)
    assert sorted(r.value.decode() for r in kafka_cluster.read(sink)) == sorted(f"V{i}" for i in range(200))


def counted_at_least(cluster, sink: str, expected: Counter[str]) -> bool:
    out = latest(cluster, sink)
    return set(out) == set(expected) and all(out[k] >= n for k, n in expected.items())


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_counts_with_two_clients_and_after_one_leaves_on_kafka(kafka_cluster, app_id, tmp_path, guarantee):
    source, sink = f"{app_id}-in", f"{app_id}-out"
    kafka_cluster.create_topic(source, partitions=4)
    kafka_cluster.create_topic(sink, partitions=4)
    extra = {"processing.guarantee": guarantee}
    first = new_client(count_topology(source, sink), kafka_cluster, app_id, tmp_path, "a", **extra)
    second = new_client(count_topology(source, sink), kafka_cluster, app_id, tmp_path, "b", **extra)
    first.start()
    second.start()
    try:
        expected = produce_words(kafka_cluster, source, 400, keys=20)
        wait_until(
            lambda: latest(kafka_cluster, sink) == dict(expected), WAIT_S, "exact counts with two clients"
        )
        assert first.close(timeout=30)
        expected += produce_words(kafka_cluster, source, 200, keys=20, start=400)
        # Under both guarantees: the leaving member commits before it gives its partitions up.
        wait_until(
            lambda: latest(kafka_cluster, sink) == dict(expected), WAIT_S, "exact counts after takeover"
        )
    finally:
        first.close(timeout=30)
        second.close(timeout=30)
    assert kafka_cluster.topics()[f"{app_id}-counts-changelog"].partitions == 4


def test_shutdown_application_stops_every_client_on_kafka(kafka_cluster, app_id, tmp_path):
    source, sink = f"{app_id}-in", f"{app_id}-out"
    kafka_cluster.create_topic(source, partitions=2)
    kafka_cluster.create_topic(sink, partitions=2)
    first = new_client(upper_topology(source, sink), kafka_cluster, app_id, tmp_path, "a")
    second = new_client(upper_topology(source, sink), kafka_cluster, app_id, tmp_path, "b")
    first.start()
    second.start()
    try:
        assert first.wait_for_state(KafkaStreams.State.RUNNING, timeout=30)
        assert second.wait_for_state(KafkaStreams.State.RUNNING, timeout=30)
        # The request travels on the application's control topic to both clients.
        assert first.shutdown_application() is True
        assert first.wait_for_state(KafkaStreams.State.ERROR, timeout=30)
        assert second.wait_for_state(KafkaStreams.State.ERROR, timeout=30)
    finally:
        first.close(timeout=30)
        second.close(timeout=30)


def active_tasks(streams: KafkaStreams) -> set:
    return {entry.task_id for entry in streams._task_manager.running()}


def standby_tasks(streams: KafkaStreams) -> set:
    return streams._state_updater.standby_ids()


def test_standby_replicas_are_placed_from_the_group_assignment_on_kafka(kafka_cluster, app_id, tmp_path):
    source, sink = f"{app_id}-in", f"{app_id}-out"
    kafka_cluster.create_topic(source, partitions=4)
    kafka_cluster.create_topic(sink, partitions=4)
    extra = {"num.standby.replicas": 1, "num.stream.threads": 1}
    first = new_client(count_topology(source, sink), kafka_cluster, app_id, tmp_path, "a", **extra)
    second = new_client(count_topology(source, sink), kafka_cluster, app_id, tmp_path, "b", **extra)
    first.start()
    second.start()
    try:
        wait_until(
            lambda: (
                len(active_tasks(first) | active_tasks(second)) == 4
                and active_tasks(first).isdisjoint(active_tasks(second))
                and standby_tasks(first) == active_tasks(second)
                and standby_tasks(second) == active_tasks(first)
            ),
            WAIT_S,
            "each client holding standbys of the other's tasks",
        )
        expected = produce_words(kafka_cluster, source, 200, keys=20)
        wait_until(lambda: latest(kafka_cluster, sink) == dict(expected), WAIT_S, "exact counts")
    finally:
        first.close(timeout=30)
        second.close(timeout=30)
