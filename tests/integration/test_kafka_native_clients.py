"""kstreams' own librdkafka clients. The fetcher (consumers outside a group, and the fetching
consumer of a member whose assignor decides its partitions) reads records exactly as
confluent-kafka's consumer gives them; the sender (every producer) writes them exactly, reports
refused and undelivered records with their contents, and runs transactions. Both are left for
confluent-kafka's clients when asked to or when a setting needs them."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kstreams._native.record_batch import RecordBatch
from kstreams.cluster.kafka_native import NATIVE_ENV, native_unavailable_reason
from kstreams.cluster.port import RecordRejectedError, TopicPartition
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
    assert native_unavailable_reason() is None
    topic = f"{app_id}-varied"
    kafka_cluster.create_topic(topic, 2)
    _produce_varied(kafka_broker, topic)
    ours, (fetcher, positions) = _with_kstreams(kafka_cluster, topic)
    assert type(fetcher).__name__ == "KafkaFetcher"
    reference = _with_confluent(kafka_broker, topic)
    assert sum(map(len, ours.values())) == RECORDS
    assert ours == reference  # keys, values, None for either, timestamps, offsets, headers
    assert positions == {0: RECORDS // 2, 1: RECORDS // 2}


def test_the_switch_and_callable_settings_keep_confluent_kafkas_clients(
    kafka_cluster, kafka_broker, app_id, monkeypatch
):
    topic = f"{app_id}-plain"
    kafka_cluster.create_topic(topic, 2)
    _produce_varied(kafka_broker, topic)
    monkeypatch.setenv(NATIVE_ENV, "confluent")
    ours, (fetcher, _positions) = _with_kstreams(kafka_cluster, topic)
    assert isinstance(fetcher, Consumer)
    producer = kafka_cluster.producer()
    try:
        assert isinstance(producer._producer, Producer)
    finally:
        producer.close()
    assert sum(map(len, ours.values())) == RECORDS
    monkeypatch.delenv(NATIVE_ENV)
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


def _read_back(bootstrap: str, topic: str, count: int) -> list[tuple[Any, ...]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reference", "enable.auto.commit": False}
    )
    consumer.assign([KafkaTopicPartition(topic, 0, 0)])
    records: list[tuple[Any, ...]] = []
    deadline = time.monotonic() + WAIT
    try:
        while len(records) < count and time.monotonic() < deadline:
            for m in consumer.consume(100, 0.2):
                assert m.error() is None, m.error()
                records.append((m.key(), m.value(), m.timestamp()[1], m.headers()))
    finally:
        consumer.close()
    return records


def test_the_sender_writes_records_as_they_are(kafka_cluster, kafka_broker, app_id):
    topic = f"{app_id}-sent"
    kafka_cluster.create_topic(topic, 1)
    now = int(time.time() * 1000)
    rows = [
        (b"k", b"v", now, [("h", b"x"), ("none", None)]),
        (None, b"no key", now + 1, None),
        (b"no value", None, now + 2, None),
        (b"", b"", now + 3, [("empty", b"")]),
        (b"k", b"no timestamp", -1, None),
    ]
    batch = RecordBatch.from_columns(
        [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], 0, -1, [r[3] for r in rows]
    )
    producer = kafka_cluster.producer()
    assert type(producer._producer).__name__ == "KafkaSender"
    try:
        producer.send(topic, 0, batch)
        producer.flush(WAIT)
    finally:
        producer.close()
    records = _read_back(kafka_broker, topic, len(rows))
    assert [r[:2] for r in records] == [r[:2] for r in rows]
    assert [r[2] for r in records[:4]] == [r[2] for r in rows[:4]]
    assert records[4][2] >= now  # -1: stamped when produced
    assert [r[3] for r in records] == [r[3] for r in rows]


def test_a_record_too_large_is_rejected_with_its_contents_and_the_others_are_written(
    kafka_cluster, kafka_broker, app_id
):
    topic = f"{app_id}-large"
    kafka_cluster.create_topic(topic, 1)
    now = int(time.time() * 1000)
    big = b"x" * 5_000
    batch = RecordBatch.from_columns(
        [b"a", b"big", b"c"], [b"1", big, b"3"], [now, now + 1, now + 2], 0, -1, [None, [("h", b"v")], None]
    )
    producer = kafka_cluster.producer({"message.max.bytes": 2_000})
    try:
        with pytest.raises(RecordRejectedError) as rejected:
            producer.send(topic, 0, batch)
        [record] = rejected.value.records
        assert (record.topic, record.partition, record.key, record.value) == (topic, 0, b"big", big)
        assert (record.timestamp, record.headers) == (now + 1, [("h", b"v")])
        assert "MSG_SIZE_TOO_LARGE" in record.reason
        producer.flush(WAIT)
    finally:
        producer.close()
    assert [r[:2] for r in _read_back(kafka_broker, topic, 2)] == [(b"a", b"1"), (b"c", b"3")]


def test_an_aborted_transaction_is_not_read_and_a_committed_one_is(kafka_cluster, app_id):
    topic = f"{app_id}-txn"
    kafka_cluster.create_topic(topic, 1)
    now = int(time.time() * 1000)
    producer = kafka_cluster.producer({"transactional.id": f"{app_id}-tx"})
    assert type(producer._producer).__name__ == "KafkaSender"
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, 0, RecordBatch.from_columns([b"a"], [b"aborted"], [now]))
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, 0, RecordBatch.from_columns([b"b"], [b"committed"], [now]))
        producer.commit_transaction()
    finally:
        producer.close()
    committed = [(r.key, r.value) for r in kafka_cluster.read(topic)]
    assert committed == [(b"b", b"committed")]


def test_a_poll_returns_once_records_arrive_or_at_a_wakeup(kafka_cluster, kafka_broker, app_id):
    """librdkafka's batch call waits until the batch is full or the timeout passed; a poll must
    return as soon as records are there (Kafka's poll), else every record waited out poll.ms.
    A wakeup from another thread ends a waiting poll, and one that comes before a poll ends it."""
    topic = f"{app_id}-wake"
    kafka_cluster.create_topic(topic, 1)
    consumer = kafka_cluster.consumer(None)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek(TopicPartition(topic, 0), 0)
    try:
        assert consumer.poll(0.5) == []  # the fetcher is running
        producer = Producer({"bootstrap.servers": kafka_broker})
        threading.Timer(0.3, lambda: (producer.produce(topic, b"v", b"k"), producer.flush())).start()
        began = time.monotonic()
        polled = consumer.poll(20.0)
        assert [len(batch) for _, batch in polled] == [1]
        assert time.monotonic() - began < 10.0, "the poll waited out its timeout"

        threading.Timer(0.3, consumer.wakeup).start()
        began = time.monotonic()
        assert consumer.poll(20.0) == []
        assert time.monotonic() - began < 10.0, "a wakeup did not end the poll"

        consumer.wakeup()
        began = time.monotonic()
        assert consumer.poll(20.0) == []
        assert time.monotonic() - began < 10.0, "a wakeup before the poll was lost"
    finally:
        consumer.close()


def test_batches_read_from_a_broker_are_written_back_with_their_headers(kafka_cluster, kafka_broker, app_id):
    # The fetcher keeps each record's headers undecoded; the sender writes them from that form.
    topic, copy = f"{app_id}-source", f"{app_id}-copy"
    kafka_cluster.create_topic(topic, 2)
    kafka_cluster.create_topic(copy, 2)
    _produce_varied(kafka_broker, topic)
    consumer = kafka_cluster.consumer(None)
    tps = [TopicPartition(topic, p) for p in (0, 1)]
    consumer.assign(tps)
    consumer.seek_to_beginning(tps)
    producer = kafka_cluster.producer()
    sent = 0
    deadline = time.monotonic() + WAIT
    try:
        while sent < RECORDS and time.monotonic() < deadline:
            for tp, batch in consumer.poll(0.2):
                producer.send(copy, tp.partition, batch)
                sent += len(batch)
        producer.flush()
    finally:
        consumer.close()
        producer.close()
    assert sent == RECORDS

    def without_offsets(records: dict[int, list[tuple[Any, ...]]]) -> dict[int, list[tuple[Any, ...]]]:
        return {p: [(k, v, ts, h) for k, v, ts, _, h in rows] for p, rows in records.items()}

    written = without_offsets(_with_confluent(kafka_broker, copy))
    assert written == without_offsets(_with_confluent(kafka_broker, topic))
    assert sum(1 for rows in written.values() for *_, h in rows if h) == RECORDS // 100
