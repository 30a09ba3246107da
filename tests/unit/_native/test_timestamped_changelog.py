"""A timestamped store's changelog holds what Kafka Streams' holds: the plain value, in a record
stamped with the value's timestamp (the store keeps an 8-byte big-endian timestamp in front of
the value). The same on the per-record path (``sender(key, value, ts)``) and the batch path
(``send_batch``, run by the compiled loop)."""

from __future__ import annotations

import struct

import pytest

from kstreams._native.record_batch import RecordBatch
from kstreams._native.record_collector import RecordCollector
from kstreams._native.store_core import ChangelogSender

TOPIC = "app-counts-changelog"


def stamped(ts: int, value: bytes) -> bytes:
    return struct.pack(">q", ts) + value


def sender() -> tuple[RecordCollector, ChangelogSender]:
    collector = RecordCollector()
    collector.register_changelog(TOPIC, 0)
    changelog = ChangelogSender(collector, TOPIC, 0, None)
    changelog.split_timestamps()
    return collector, changelog


def logged(collector: RecordCollector) -> list[tuple[bytes | None, bytes | None, int]]:
    return [(k, v, ts) for _topic, _partition, batch in collector.drain() for k, v, ts, *_ in batch]


def test_a_change_sent_alone_is_logged_as_kafka_logs_it() -> None:
    collector, changelog = sender()
    changelog(b"a", stamped(1_700, b"one"), 99)
    changelog(b"b", None, 42)  # a tombstone keeps the timestamp it is sent with
    assert logged(collector) == [(b"a", b"one", 1_700), (b"b", None, 42)]


def test_a_batch_of_changes_is_logged_as_kafka_logs_it() -> None:
    collector, changelog = sender()
    batch = RecordBatch.from_records(
        [
            (b"a", stamped(1_700, b"one"), 5, 0, 0, None),
            (b"b", None, 42, 0, 1, None),
            (b"c", stamped(-1, b""), 7, 0, 2, None),
        ]
    )
    changelog.send_batch(batch)
    assert logged(collector) == [(b"a", b"one", 1_700), (b"b", None, 42), (b"c", b"", -1)]


def test_a_value_without_its_timestamp_is_refused_and_nothing_of_the_batch_is_logged() -> None:
    collector, changelog = sender()
    batch = RecordBatch.from_records(
        [(b"a", stamped(1, b"x"), 5, 0, 0, None), (b"b", b"short", 6, 0, 1, None)]
    )
    with pytest.raises(ValueError, match="5 bytes: it must start with an 8-byte timestamp"):
        changelog.send_batch(batch)
    with pytest.raises(ValueError, match="8-byte timestamp"):
        changelog(b"b", b"short", 6)
    assert logged(collector) == []
