"""Delivery reports of the KafkaCluster's producer: librdkafka reports failed records only, to one
callback per producer, and a failure still surfaces from send or flush naming the partition."""

from __future__ import annotations

import time

import pytest

from kstreams._native.record_batch import RecordBatch
from kstreams.cluster.port import ClusterError

pytestmark = pytest.mark.integration

NOW = int(time.time() * 1000)


def test_a_record_that_cannot_be_delivered_fails_the_flush_naming_its_partition(kafka_cluster, app_id):
    topic = f"{app_id}-one-partition"
    kafka_cluster.create_topic(topic, 1)
    producer = kafka_cluster.producer({"message.timeout.ms": 5000})
    batch = RecordBatch.from_columns([b"k"], [b"v"], [NOW])
    try:
        # Partition 3 does not exist: librdkafka refuses the record when it sends it (or at once,
        # when it already knows the topic's partitions).
        with pytest.raises(ClusterError, match=f"{topic}-3"):
            producer.send(topic, 3, batch)
            producer.flush(10.0)
        # The failure is reported once: the producer goes on working.
        producer.send(topic, 0, batch)
        producer.flush(10.0)
    finally:
        producer.close()
    assert [(r.key, r.value) for r in kafka_cluster.read(topic)] == [(b"k", b"v")]


def test_a_batch_with_headers_and_records_without_timestamps_is_delivered(kafka_cluster, app_id):
    topic = f"{app_id}-headers"
    kafka_cluster.create_topic(topic, 1)
    producer = kafka_cluster.producer()
    batch = RecordBatch.from_columns([b"a", None], [b"1", None], [NOW, -1], 0, -1, [[("h", b"x")], None])
    try:
        producer.send(topic, 0, batch)
        producer.flush(10.0)
    finally:
        producer.close()
    records = kafka_cluster.read(topic)
    assert [(r.key, r.value) for r in records] == [(b"a", b"1"), (None, None)]
    assert records[0].timestamp == NOW
    assert records[1].timestamp > 0
    assert list(records[0].headers or []) == [("h", b"x")]
