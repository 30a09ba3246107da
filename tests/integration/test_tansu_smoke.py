"""A smoke test on Tansu, the second Kafka-protocol broker: the KafkaCluster's topics, produce,
read and a group member's consumption work there too, and a KafkaStreams application processes.
Tansu lacks CreatePartitions, reports wrong end offsets (a partition's end is the last batch's
base offset plus one) and shows aborted records to read_committed readers, so nothing more is run
on it. Its ConsumerGroupDescribe answer lists no members of a classic group; the client lists them
with DescribeGroups instead and says so in a warning."""

from __future__ import annotations

import logging
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kstreams.client import KafkaStreams
from kstreams.cluster.port import TopicPartition
from kstreams.serdes import Serdes
from tests.support.topologies import count_topology

pytestmark = pytest.mark.integration

STRING = Serdes.string()
LONG = Serdes.long()


class Listener:
    def __init__(self) -> None:
        self.owned: set[TopicPartition] = set()

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.owned.difference_update(partitions)

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.owned.update(partitions)

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self.owned.difference_update(partitions)

    def on_assignment_error(self, code: int) -> None:
        pass


def test_produce_and_consume_round_trip_on_tansu(tansu_cluster, app_id):
    name = f"{app_id}-smoke"
    tansu_cluster.create_topic(name, partitions=2)
    assert tansu_cluster.topics()[name].partitions == 2
    sent = {(f"k{i}".encode(), f"v{i}".encode()) for i in range(10)}
    for key, value in sorted(sent):
        tansu_cluster.produce(name, key, value)

    consumer = tansu_cluster.consumer(f"{app_id}-group", {"auto.offset.reset": "earliest"})
    listener = Listener()
    received: set[tuple[bytes | None, bytes | None]] = set()
    try:
        consumer.subscribe([name], listener)
        deadline = time.monotonic() + 60
        while received != sent:
            assert time.monotonic() < deadline, f"consumed only {len(received)} of {len(sent)} records"
            for _tp, batch in consumer.poll(0.1):
                received.update((key, value) for key, value, *_ in batch)
        assert listener.owned == {TopicPartition(name, 0), TopicPartition(name, 1)}
    finally:
        consumer.close()


def read_latest_counts(bootstrap: str, topic: str, expected: Counter[str], timeout: float) -> dict[str, int]:
    """The latest count per key on ``topic``, read until it equals ``expected`` or ``timeout``
    passes. Not ``cluster.read``: that reads up to the end offsets, which Tansu reports wrong for
    a topic written in batches (the application's producer batches)."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "kstreams-assign-only", "log_level": 3})
    latest: dict[str, int] = {}
    try:
        reader.assign([KafkaTopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while latest != expected and time.monotonic() < deadline:
            for message in reader.consume(500, 0.2):
                if message.error() is None:
                    key = STRING.deserialize(topic, message.key())
                    latest[key] = LONG.deserialize(topic, message.value())
    finally:
        reader.close()
    return latest


def test_count_application_processes_on_tansu(tansu_cluster, app_id, tmp_path, caplog):
    caplog.set_level(logging.WARNING, "kstreams.cluster")
    source, sink = f"{app_id}-in", f"{app_id}-out"
    tansu_cluster.create_topic(source, partitions=1)
    tansu_cluster.create_topic(sink, partitions=1)
    expected: Counter[str] = Counter()
    for i in range(30):
        key = f"key-{i % 3}"
        tansu_cluster.produce(source, key.encode(), f"value-{i}".encode())
        expected[key] += 1
    config = {
        "application.id": app_id,
        "commit.interval.ms": 100,
        # Tansu's coordinator needs the session timeout of TANSU_TEST_CONFIG (see tests/conftest.py).
        "session.timeout.ms": 6000,
        "state.dir": str(tmp_path),
    }
    streams = KafkaStreams(count_topology(source, sink), config, cluster=tansu_cluster)
    streams.start()
    try:
        counts = read_latest_counts(tansu_cluster.bootstrap_servers, sink, expected, timeout=60)
        assert counts == dict(expected)
        [wait] = [v for m, v in streams.metrics().items() if m.name == "assignment-wait-seconds"]
        assert wait == 0.0
    finally:
        assert streams.close(timeout=30)
    # The client names the broker's gap it works around.
    assert any(
        "ConsumerGroupDescribe" in r.getMessage() and "DescribeGroups" in r.getMessage()
        for r in caplog.records
    )
