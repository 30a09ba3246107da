"""The sink's producing core writes rows to the partitions Kafka's producer would pick, and writes
a streaming micro-batch's rows once however often the task runs (on both cluster adapters)."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
import pytest

from kstreams._native.record_batch import default_partition
from kstreams.errors import StreamsException
from kstreams.spark.topic_writer import (
    TopicWriterOptions,
    committed_batch,
    fence,
    produce_exactly_once,
    produce_rows,
    records_of,
    transactional_id,
)

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
# Record timestamps near now: within the topics' retention.
BASE_TS = int(time.time() * 1000) - 60_000


def _rows(n: int, start: int = 0, **extra: Any) -> pa.RecordBatch:
    columns = {
        "key": pa.array([None if i % 4 == 0 else f"k{i}".encode() for i in range(start, start + n)]),
        "value": pa.array([f"v{i}".encode() for i in range(start, start + n)]),
        "timestamp": pa.array([BASE_TS + i for i in range(start, start + n)], pa.int64()),
    }
    columns.update(extra)
    return pa.RecordBatch.from_pydict(columns)


def test_rows_go_to_their_partition_column_else_the_key_hash_else_round_robin() -> None:
    batch = _rows(
        8,
        partition=pa.array([None, 2, None, None, 0, None, None, 1], pa.int32()),
        headers=pa.array([[{"key": "h", "value": b"x"}], None, [], None, None, None, None, None], HEADERS),
    )

    out, next_slot = records_of(batch, 3, "t", round_robin=5)

    placed = {rec[1]: (p, rec) for p, records in out.items() for rec in records}
    assert placed[b"v1"][0] == 2 and placed[b"v4"][0] == 0 and placed[b"v7"][0] == 1
    assert placed[b"v0"][0] == 5 % 3  # null key, no partition: round robin from slot 5
    for i in (2, 3, 5, 6):
        assert placed[f"v{i}".encode()][0] == default_partition(f"k{i}".encode(), 3)
    assert next_slot == 6
    assert placed[b"v0"][1][5] == [("h", b"x")]
    assert placed[b"v2"][1][2] == BASE_TS + 2


def test_a_partition_beyond_the_topic_fails_naming_it() -> None:
    batch = _rows(2, partition=pa.array([0, 7], pa.int32()))
    with pytest.raises(StreamsException, match="partition 7 of topic t, which has 3 partitions"):
        records_of(batch, 3, "t")


def _options(topic: str) -> TopicWriterOptions:
    return TopicWriterOptions.from_options({"bootstrap.servers": "unused:9092", "topic": topic})


def _values(cluster: Any, topic: str, isolation: str = "read_committed") -> list[bytes]:
    return sorted(r.value for r in cluster.read(topic, isolation))


def test_produce_rows_writes_every_row_with_its_timestamp(cluster: Any, app_id: str) -> None:
    topic = f"{app_id}-sink"
    cluster.create_topic(topic, 3)

    assert produce_rows(cluster, _options(topic), [_rows(10), _rows(5, start=10)]) == 15

    records = cluster.read(topic)
    assert sorted((r.value, r.timestamp) for r in records) == [
        (f"v{i}".encode(), BASE_TS + i) for i in sorted(range(15), key=lambda i: f"v{i}")
    ]


def test_a_replayed_micro_batch_task_writes_nothing_a_second_time(cluster: Any, app_id: str) -> None:
    topic = f"{app_id}-eos"
    cluster.create_topic(topic, 2)
    options = _options(topic)

    first = produce_exactly_once(cluster, options, app_id, 0, 1, iter([_rows(6)]))
    replay = produce_exactly_once(cluster, options, app_id, 0, 1, iter([_rows(6)]))
    following = produce_exactly_once(cluster, options, app_id, 1, 1, iter([_rows(3, start=6)]))

    assert (first.rows, first.skipped) == (6, False)
    assert (replay.rows, replay.skipped) == (0, True)
    assert (following.rows, following.skipped) == (3, False)
    assert committed_batch(cluster, app_id, topic, 1) == 1
    assert committed_batch(cluster, app_id, topic, 0) == -1  # another Spark partition: nothing yet
    assert _values(cluster, topic) == sorted(f"v{i}".encode() for i in range(9))


def test_an_attempt_that_died_mid_transaction_is_fenced_and_its_rows_never_show(
    cluster: Any, app_id: str
) -> None:
    topic = f"{app_id}-fenced"
    cluster.create_topic(topic, 1)
    options = _options(topic)
    zombie = cluster.producer({"transactional.id": transactional_id(app_id, 4, 0)})
    zombie.init_transactions()
    zombie.begin_transaction()
    per_partition, _ = records_of(_rows(5, start=100), 1, topic)
    zombie.send(topic, 0, per_partition[0])
    zombie.flush(30)  # in the log, but its transaction never commits

    retry = produce_exactly_once(cluster, options, app_id, 4, 0, iter([_rows(5)]))

    assert (retry.rows, retry.skipped) == (5, False)
    assert _values(cluster, topic) == sorted(f"v{i}".encode() for i in range(5))
    with pytest.raises(Exception):  # noqa: B017 - each adapter names fencing its own way
        zombie.commit_transaction()


def _failing_after_first(batches: list[pa.RecordBatch]) -> Any:
    yield batches[0]
    raise RuntimeError("the task died mid-write")


def test_a_task_that_fails_mid_write_leaves_no_rows_and_no_marker(cluster: Any, app_id: str) -> None:
    topic = f"{app_id}-failed"
    cluster.create_topic(topic, 2)
    options = _options(topic)

    with pytest.raises(RuntimeError, match="died mid-write"):
        produce_exactly_once(cluster, options, app_id, 2, 0, _failing_after_first([_rows(4)]))

    assert _values(cluster, topic) == []
    assert committed_batch(cluster, app_id, topic, 0) == -1
    retry = produce_exactly_once(cluster, options, app_id, 2, 0, iter([_rows(4)]))
    assert (retry.rows, retry.skipped) == (4, False)
    assert _values(cluster, topic) == sorted(f"v{i}".encode() for i in range(4))


def test_fencing_a_dead_tasks_transaction_releases_read_committed_readers(cluster: Any, app_id: str) -> None:
    topic = f"{app_id}-release"
    cluster.create_topic(topic, 1)
    options = _options(topic)
    txid = transactional_id(app_id, 0, 3)
    dead = cluster.producer({"transactional.id": txid})
    dead.init_transactions()
    dead.begin_transaction()
    dead.send(topic, 0, records_of(_rows(3, start=50), 1, topic)[0][0])
    dead.flush(30)

    fence(cluster, options, txid)
    produce_rows(cluster, options, [_rows(2)])

    assert _values(cluster, topic) == [b"v0", b"v1"]
