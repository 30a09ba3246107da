"""The compiled fetcher: consumers outside a group, and the fetching consumer of a member whose
assignor decides its partitions, read records exactly as confluent-kafka's consumer gives them;
it is left for confluent-kafka's consumer when asked to or when a setting needs it."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kstreams.cluster.kafka_fetching import FETCHER_ENV, fetcher_unavailable_reason
from kstreams.cluster.port import TopicPartition
from kstreams.errors import ConfigException

pytestmark = pytest.mark.integration

WAIT = 30.0
RECORDS = 3_000


def _produce_varied(bootstrap: str, topic: str) -> None:
    """Records with and without keys, values (tombstones) and headers, over two partitions."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    now = int(time.time() * 1000)
    for i in range(RECORDS):
        producer.produce(
            topic,
            value=f'{{"n": {i}}}'.encode() if i % 7 else None,
            key=f"k{i}".encode() if i % 5 else None,
            partition=i % 2,
            timestamp=now + i,
            headers=[("h", f"v{i}".encode()), ("empty", None)] if i % 100 == 0 else None,
        )
    assert producer.flush(WAIT) == 0


def _with_confluent(bootstrap: str, topic: str) -> dict[int, list[tuple[Any, ...]]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reference", "enable.auto.commit": False}
    )
    consumer.assign([KafkaTopicPartition(topic, p, 0) for p in (0, 1)])
    records: dict[int, list[tuple[Any, ...]]] = {0: [], 1: []}
    deadline = time.monotonic() + WAIT
    try:
        while sum(map(len, records.values())) < RECORDS and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.2):
                assert m.error() is None, m.error()
                records[m.partition()].append((m.key(), m.value(), m.timestamp()[1], m.offset(), m.headers()))
    finally:
        consumer.close()
    return records


def _with_kstreams(cluster: Any, topic: str) -> tuple[dict[int, list[tuple[Any, ...]]], Any]:
    consumer = cluster.consumer(None)
    tps = [TopicPartition(topic, p) for p in (0, 1)]
    consumer.assign(tps)
    consumer.seek_to_beginning(tps)
    records: dict[int, list[tuple[Any, ...]]] = {0: [], 1: []}
    deadline = time.monotonic() + WAIT
    try:
        while sum(map(len, records.values())) < RECORDS and time.monotonic() < deadline:
            for tp, batch in consumer.poll(0.2):
                records[tp.partition].extend(
                    (batch.key(i), batch.value(i), batch.timestamp(i), batch.offset(i), batch.headers(i))
                    for i in range(len(batch))
                )
        positions = {tp.partition: consumer.position(tp) for tp in tps}
    finally:
        fetcher = consumer._consumer
        consumer.close()
    return records, (fetcher, positions)


def test_a_manually_assigned_consumer_reads_what_confluent_kafka_reads(kafka_cluster, kafka_broker, app_id):
    assert fetcher_unavailable_reason() is None
    topic = f"{app_id}-varied"
    kafka_cluster.create_topic(topic, 2)
    _produce_varied(kafka_broker, topic)
    ours, (fetcher, positions) = _with_kstreams(kafka_cluster, topic)
    assert type(fetcher).__name__ == "KafkaFetcher"
    reference = _with_confluent(kafka_broker, topic)
    assert sum(map(len, ours.values())) == RECORDS
    assert ours == reference  # keys, values, None for either, timestamps, offsets, headers
    assert positions == {0: RECORDS // 2, 1: RECORDS // 2}


def test_the_switch_and_callable_settings_keep_confluent_kafkas_consumer(
    kafka_cluster, kafka_broker, app_id, monkeypatch
):
    topic = f"{app_id}-plain"
    kafka_cluster.create_topic(topic, 2)
    _produce_varied(kafka_broker, topic)
    monkeypatch.setenv(FETCHER_ENV, "confluent")
    ours, (fetcher, _positions) = _with_kstreams(kafka_cluster, topic)
    assert isinstance(fetcher, Consumer)
    assert sum(map(len, ours.values())) == RECORDS
    monkeypatch.delenv(FETCHER_ENV)
    settings = {"stats_cb": lambda stats: None, "statistics.interval.ms": 60_000}
    consumer = kafka_cluster.consumer(None, settings)
    try:
        assert isinstance(consumer._consumer, Consumer)
    finally:
        consumer.close()


def test_a_setting_librdkafka_rejects_names_the_consumer(kafka_cluster):
    with pytest.raises(ConfigException, match=r"manually assigned consumer.*fetch\.wait\.max\.ms"):
        kafka_cluster.consumer(None, {"fetch.wait.max.ms": "not a number"})


def test_librdkafka_log_lines_reach_python_logging(kafka_cluster, app_id, caplog):
    topic = f"{app_id}-logged"
    kafka_cluster.create_topic(topic, 1)
    caplog.set_level(logging.DEBUG, logger="kstreams.cluster.librdkafka")
    consumer = kafka_cluster.consumer(None, {"debug": "fetch"})
    try:
        consumer.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + WAIT
        while not any(r.name == "kstreams.cluster.librdkafka" for r in caplog.records):
            assert time.monotonic() < deadline, "no librdkafka log line reached Python logging"
            consumer.poll(0.1)
    finally:
        consumer.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "kstreams.cluster.librdkafka"]
    assert any("[INIT]" in line and "initialized" in line for line in lines), lines
