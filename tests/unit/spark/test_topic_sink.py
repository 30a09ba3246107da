"""The kstreams Spark data source writes DataFrames to a topic: batch writes round-trip every
column, and a streaming query killed between its tasks' writes and the driver's commit of a
micro-batch, then restarted from its checkpoint, leaves each row in the topic once.

Spark runs the sink in its Python workers, which cannot reach an in-process EmbeddedCluster: these
tests use the session's broker (test_topic_writer.py runs the producing core on both clusters)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kstreams.spark.data_sink import TopicStreamWriter
from kstreams.spark.data_source import KStreamsDataSource

pytestmark = [pytest.mark.spark, pytest.mark.integration]

PARTITIONS = 3
T0 = 1_700_000_000_000
HEADERS_TYPE = "array<struct<key:string,value:binary>>"


@pytest.fixture
def kafka(kafka_broker: str) -> Iterator[Any]:
    from kstreams.cluster.kafka import KafkaCluster

    cluster = KafkaCluster(str(kafka_broker))
    yield cluster
    cluster.close()


def _topic(kafka: Any, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(name, PARTITIONS, {"retention.ms": "-1"})
    return name


def test_a_batch_write_round_trips_keys_values_timestamps_headers_and_partitions(
    spark: Any, kafka: Any, kafka_broker: str
) -> None:
    from kstreams._native.record_batch import default_partition

    topic = _topic(kafka, "sink-batch")
    rows = [
        (
            None if i % 5 == 0 else f"key-{i}".encode(),
            f"value-{i}".encode(),
            T0 + i,
            i % PARTITIONS if i % 2 == 0 else None,
            [("trace", f"t{i}".encode()), ("empty", None)] if i % 3 == 0 else None,
        )
        for i in range(40)
    ]
    schema = f"key binary, value binary, timestamp long, partition int, headers {HEADERS_TYPE}"
    df = spark.createDataFrame(rows, schema).repartition(2)

    df.write.format("kstreams").mode("append").option("bootstrap.servers", kafka_broker).option(
        "topic", topic
    ).save()

    written = {r.value: r for r in kafka.read(topic)}
    assert sorted(written) == sorted(r[1] for r in rows)
    for key, value, timestamp, partition, headers in rows:
        record = written[value]
        assert (record.key, record.timestamp) == (key, timestamp)
        assert (record.headers or None) == headers
        if partition is not None:
            assert record.partition == partition
        elif key is not None:
            assert record.partition == default_partition(key, PARTITIONS)
    read_back = spark.read.format("kstreams").option("bootstrap.servers", kafka_broker).option("topic", topic)
    assert sorted((r.value, r.key, r.timestamp, r.partition) for r in read_back.load().collect()) == sorted(
        (v, written[v].key, written[v].timestamp, written[v].partition) for v in written
    )


def test_a_write_without_a_value_column_fails_naming_it(spark: Any, kafka_broker: str) -> None:
    df = spark.createDataFrame([(b"k",)], "key binary")
    with pytest.raises(Exception, match="writes a column value"):
        df.write.format("kstreams").mode("append").option("bootstrap.servers", kafka_broker).option(
            "topic", "unused"
        ).save()


class _KilledBeforeCommitWriter(TopicStreamWriter):
    """The sink, but the driver dies (raises) before committing one micro-batch: the tasks' rows
    are already in the topic, Spark's commit log lacks the batch, and a restart replays it."""

    crash_at: int = -1

    def commit(self, messages: Any, batchId: int) -> None:
        if batchId == self.crash_at:
            raise RuntimeError(f"killed between the writes and the commit of micro-batch {batchId}")
        super().commit(messages, batchId)


class KilledBeforeCommitSink(KStreamsDataSource):
    @classmethod
    def name(cls) -> str:
        return "kstreams_killed_before_commit"

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        writer = super().streamWriter(schema, overwrite)
        killed = _KilledBeforeCommitWriter(writer.options)  # type: ignore[attr-defined]
        killed.crash_at = int(self.options["crash.at.batch"])
        return killed


def _values(kafka: Any, topic: str, isolation: str) -> list[bytes]:
    return sorted(r.value for r in kafka.read(topic, isolation))


def test_a_streaming_write_replayed_after_a_kill_before_commit_leaves_each_row_once(
    spark: Any, kafka: Any, kafka_broker: str, tmp_path: Path
) -> None:
    from pyspark import cloudpickle

    # Spark's Python workers unpickle the killing sink; this test module is not importable there.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(KilledBeforeCommitSink)
    source, sink = _topic(kafka, "eos-in"), _topic(kafka, "eos-out")
    for i in range(90):
        kafka.produce(source, f"k{i % 7}".encode(), f"row-{i}".encode(), T0 + i, i % PARTITIONS)
    checkpoint = str(tmp_path / "checkpoint")

    def run(sink_format: str) -> Any:
        stream = (
            spark.readStream.format("kstreams")
            .option("bootstrap.servers", kafka_broker)
            .option("topic", source)
            .option("maxOffsetsPerTrigger", "40")  # micro-batches of 40, 40 and 10 rows
            .load()
            .select("key", "value", "timestamp")
        )
        query = (
            stream.writeStream.format(sink_format)
            .option("bootstrap.servers", kafka_broker)
            .option("topic", sink)
            .option("crash.at.batch", "1")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination(180)
        except Exception:  # the killed run: its exception is checked below
            pass
        assert not query.isActive, "the availableNow query did not finish within 180 s"
        return query

    killed = run("kstreams_killed_before_commit")
    assert "killed between the writes and the commit of micro-batch 1" in str(killed.exception())
    # Batches 0 and 1 are in the topic; Spark has committed batch 0 only.
    assert len(_values(kafka, sink, "read_committed")) == 80

    restarted = run("kstreams")  # from the same checkpoint: replays micro-batch 1, then batch 2

    assert restarted.exception() is None
    expected = sorted(f"row-{i}".encode() for i in range(90))
    assert _values(kafka, sink, "read_committed") == expected
    # The replay wrote nothing, so not even a read_uncommitted reader sees a duplicate.
    assert _values(kafka, sink, "read_uncommitted") == expected
    replayed = [p for p in restarted.recentProgress if p["batchId"] == 1]
    assert replayed and replayed[0]["numInputRows"] == 40


def test_a_lowered_streaming_count_reaches_a_topic_through_foreach_batch(
    spark: Any, kafka: Any, kafka_broker: str, tmp_path: Path
) -> None:
    # docs/spark-streaming.md: a lowered aggregation is written in update mode, which Spark's
    # Python data sources (this sink among them) refuse; foreachBatch with a batch write takes it.
    from kstreams import Consumed, Produced, Serdes, StreamsBuilder
    from kstreams.spark import run_topology_stream

    builder = StreamsBuilder()
    builder.stream(
        "events", Consumed.with_(Serdes.string(), Serdes.string())
    ).group_by_key().count().to_stream().to("counts", Produced.with_(Serdes.string(), Serdes.long()))
    source, sink = _topic(kafka, "lowered-in"), _topic(kafka, "lowered-out")
    for i in range(60):
        kafka.produce(source, f"k{i % 4}".encode(), b"v", T0 + i, i % PARTITIONS)
    stream = (
        spark.readStream.format("kstreams")
        .option("bootstrap.servers", kafka_broker)
        .option("topic", source)
        .option("maxOffsetsPerTrigger", "25")  # micro-batches of 25, 25 and 10 rows
        .load()
    )
    counts = run_topology_stream(
        spark,
        builder.build(),
        {"events": stream},
        {"application.id": "lowered"},
        partitions=2,
        lower_to_sql=True,
    )["counts"]

    refused = (
        counts.writeStream.format("kstreams")
        .option("bootstrap.servers", kafka_broker)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "refused"))
        .outputMode("update")
        .trigger(availableNow=True)
    )
    with pytest.raises(Exception, match="kstreams does not support Update mode"):
        refused.start().awaitTermination(60)

    def write(df: Any, _batch_id: int) -> None:
        df.write.format("kstreams").mode("append").option("bootstrap.servers", kafka_broker).option(
            "topic", sink
        ).save()

    query = (
        counts.writeStream.foreachBatch(write)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .outputMode("update")
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "the availableNow query did not finish within 180 s"
    assert query.exception() is None, query.exception()
    long = Serdes.long()
    updates = [(r.key, long.deserialize(sink, r.value), r.timestamp) for r in kafka.read(sink)]
    assert len(updates) == 12  # each of the 4 keys once per micro-batch
    last = {key: (count, ts) for key, count, ts in sorted(updates, key=lambda u: u[1])}
    assert last == {f"k{k}".encode(): (15, T0 + 56 + k) for k in range(4)}
