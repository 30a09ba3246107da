"""A smoke test on Tansu, the second Kafka-protocol broker: the KafkaCluster's topics, produce,
read and a group member's consumption work there too. Tansu lacks CreatePartitions, reports wrong
end offsets and shows aborted records to read_committed readers, so nothing more is run on it."""

from __future__ import annotations

import time

import pytest

from kstreams.cluster.port import TopicPartition

pytestmark = pytest.mark.integration


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
