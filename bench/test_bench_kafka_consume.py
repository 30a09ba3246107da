"""KafkaConsumer turning a librdkafka poll's messages into per-partition RecordBatches.

The messages are built in memory (confluent_kafka.Message), as one poll returns them: runs of
5,000 per partition, two partitions interleaved, 20,000 in all. Run with
``pytest bench/test_bench_kafka_consume.py``; not part of the default test run.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Message

from kstreams.cluster.kafka_admin import KafkaAdmin
from kstreams.cluster.kafka_consumer import KafkaConsumer
from kstreams.cluster.kafka_membership import GroupMembers
from kstreams.cluster.port import TopicPartition

BENCH = pytest.mark.benchmark(max_time=1.0, min_rounds=20, warmup=False)


@pytest.fixture(scope="module")
def consumer() -> KafkaConsumer:
    # Never connects: only the conversion of already fetched messages runs.
    client = Consumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "bench"})
    kafka = KafkaConsumer(
        client,
        KafkaAdmin(None),
        group_id=None,
        control=None,
        members=GroupMembers(),
        auto_offset_reset="earliest",  # type: ignore[arg-type]
    )
    kafka._assignment = {TopicPartition("in", 0), TopicPartition("in", 1)}
    return kafka


@pytest.fixture(scope="module")
def messages() -> list[Message]:
    out = []
    for run in range(4):
        partition = run % 2
        for i in range(5_000):
            offset = (run // 2) * 5_000 + i
            out.append(
                Message(
                    topic="in",
                    partition=partition,
                    offset=offset,
                    key=f"user-{i % 1000}".encode(),
                    value=b"x" * 100,
                    timestamp=(1, 1_700_000_000_000 + offset),
                )
            )
    return out


@BENCH
@pytest.mark.benchmark(group="kafka consumer: 20,000 messages -> RecordBatches")
def test_batches_from_a_poll(benchmark, consumer: KafkaConsumer, messages: list[Message]) -> None:
    result = benchmark(consumer._batches, messages)
    assert sorted((tp.partition, len(b)) for tp, b in result) == [(0, 10_000), (1, 10_000)]
