"""The kstreams Spark data source reads every record of a topic from a Kafka-protocol broker, in
batch reads and in streaming queries."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.integration]

PARTITIONS = 3


def _create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    # Keep records forever: the tests' timestamps are older than the broker's default retention.
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1, config={"retention.ms": "-1"})
    futures = admin.create_topics([new])
    futures[topic].result(timeout=30)


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes, int]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, (key, value, timestamp) in enumerate(records):
        producer.produce(topic, value=value, key=key, timestamp=timestamp, partition=i % PARTITIONS)
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} records were not delivered to {topic}"


@pytest.fixture
def bootstrap(kafka_broker: Any) -> str:
    """The session broker's bootstrap servers (the fixture gives a string, or an object with them)."""
    return str(getattr(kafka_broker, "bootstrap", kafka_broker))


@pytest.fixture
def topic(bootstrap: str) -> Iterator[str]:
    name = f"spark-source-{uuid.uuid4().hex[:8]}"
    _create_topic(bootstrap, name)
    yield name


def _records(start: int, count: int) -> list[tuple[bytes | None, bytes, int]]:
    return [
        (None if i % 10 == 0 else f"k{i % 7}".encode(), f"value-{i}".encode(), 1_700_000_000_000 + i)
        for i in range(start, start + count)
    ]


def _rows(df: Any) -> list[tuple[bytes | None, bytes, int]]:
    return sorted(((r.key, r.value, r.timestamp) for r in df.collect()), key=lambda r: r[2])


def test_batch_read_returns_every_record_with_its_position(spark: Any, bootstrap: str, topic: str) -> None:
    records = _records(0, 250)
    _produce(bootstrap, topic, records)

    df = spark.read.format("kstreams").option("bootstrap.servers", bootstrap).option("topic", topic).load()

    assert df.columns == ["key", "value", "timestamp", "partition", "offset", "topic"]
    rows = df.collect()
    assert sorted(((r.key, r.value, r.timestamp) for r in rows), key=lambda r: r[2]) == records
    assert {r.topic for r in rows} == {topic}
    for partition in range(PARTITIONS):
        offsets = sorted(r.offset for r in rows if r.partition == partition)
        assert offsets == list(range(len(offsets)))  # every offset of every partition, once
    assert df.rdd.getNumPartitions() == PARTITIONS


def test_batch_read_honours_starting_and_ending_offsets(spark: Any, bootstrap: str, topic: str) -> None:
    _produce(bootstrap, topic, _records(0, 30))  # 10 records per partition

    df = (
        spark.read.format("kstreams")
        .option("bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("startingOffsets", f'{{"{topic}": {{"0": 4, "1": -2}}}}')
        .option("endingOffsets", f'{{"{topic}": {{"0": 6, "1": 3, "2": -1}}}}')
        .load()
    )

    by_partition: dict[int, list[int]] = {}
    for row in df.collect():
        by_partition.setdefault(row.partition, []).append(row.offset)
    assert {p: sorted(o) for p, o in by_partition.items()} == {0: [4, 5], 1: [0, 1, 2], 2: list(range(10))}


def _stream(spark: Any, bootstrap: str, topic: str) -> Any:
    return (
        spark.readStream.format("kstreams")
        .option("bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


def _await(query: Any) -> None:
    assert query.awaitTermination(120), "the availableNow query did not finish within 120 s"
    assert query.exception() is None


def test_streaming_read_with_available_now_reads_every_record_into_a_memory_sink(
    spark: Any, bootstrap: str, topic: str
) -> None:
    records = _records(0, 120)
    _produce(bootstrap, topic, records)
    table = f"records_{uuid.uuid4().hex[:8]}"

    query = _stream(spark, bootstrap, topic).writeStream.format("memory").queryName(table)
    _await(query.trigger(availableNow=True).start())

    assert _rows(spark.table(table)) == records


def test_a_restarted_streaming_query_reads_only_records_added_since(
    spark: Any, bootstrap: str, topic: str, tmp_path: Path
) -> None:
    first = _records(0, 60)
    _produce(bootstrap, topic, first)
    output = str(tmp_path / "out")

    def run_once() -> None:
        writer = (
            _stream(spark, bootstrap, topic)
            .writeStream.format("parquet")
            .option("path", output)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
        )
        _await(writer.trigger(availableNow=True).start())

    run_once()
    assert _rows(spark.read.parquet(output)) == first

    second = _records(60, 45)
    _produce(bootstrap, topic, second)
    run_once()  # the same checkpoint: resumes after what the first run read

    assert _rows(spark.read.parquet(output)) == first + second


def test_reading_a_topic_that_does_not_exist_fails_naming_it(spark: Any, bootstrap: str) -> None:
    missing = f"no-such-topic-{uuid.uuid4().hex[:8]}"
    df = spark.read.format("kstreams").option("bootstrap.servers", bootstrap).option("topic", missing).load()

    with pytest.raises(Exception, match=f"Topic {missing} does not exist"):
        df.collect()


def test_max_offsets_per_trigger_splits_an_available_now_read_into_bounded_micro_batches(
    spark: Any, bootstrap: str, topic: str
) -> None:
    records = _records(0, 90)
    _produce(bootstrap, topic, records)
    table = f"bounded_{uuid.uuid4().hex[:8]}"

    stream = (
        spark.readStream.format("kstreams")
        .option("bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("maxOffsetsPerTrigger", "40")
        .load()
    )
    query = stream.writeStream.format("memory").queryName(table).trigger(availableNow=True).start()
    _await(query)

    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]
    assert sizes == [40, 40, 10]
    assert _rows(spark.table(table)) == records


def test_read_committed_skips_aborted_transactions(spark: Any, bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(PARTITIONS * 4):
            producer.produce(topic, key=b"k", value=f"{outcome}-{i}".encode(), partition=i % PARTITIONS)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.flush(30)  # the aborted records reach the log (abort alone drops unsent ones)
            producer.abort_transaction(30)

    def values(isolation: str) -> list[str]:
        df = (
            spark.read.format("kstreams")
            .option("bootstrap.servers", bootstrap)
            .option("topic", topic)
            .option("isolation.level", isolation)
            .load()
        )
        return sorted(r.value.decode() for r in df.collect())

    committed = values("read_committed")
    assert len(committed) == 2 * PARTITIONS * 4
    assert all(v.startswith("commit-") for v in committed)
    assert len(values("read_uncommitted")) == 3 * PARTITIONS * 4


def test_a_topic_read_through_the_data_source_backfills_a_topology(
    spark: Any, bootstrap: str, topic: str
) -> None:
    from kstreams import Consumed, Grouped, Produced, Serdes, StreamsBuilder
    from kstreams.spark import run_topology

    builder = StreamsBuilder()
    (
        builder.stream(topic, Consumed.with_(Serdes.string(), Serdes.string()))
        .group_by(lambda _key, value: value.split("-")[0], Grouped.with_(Serdes.string(), Serdes.string()))
        .count()
        .to_stream()
        .to("per-prefix", Produced.with_(Serdes.string(), Serdes.long()))
    )
    _produce(bootstrap, topic, _records(0, 90))  # values "value-<i>"
    df = spark.read.format("kstreams").option("bootstrap.servers", bootstrap).option("topic", topic).load()

    outputs = run_topology(spark, builder.build(), {topic: df})

    final = {r.key: Serdes.long().deserialize("t", r.value) for r in outputs["per-prefix"].collect()}
    assert final == {b"value": 90}
