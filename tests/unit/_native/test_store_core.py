"""The store layers' per-record core in C: changelog sends with the current record's timestamp,
buffered point reads and writes, and which segment a windowed record goes to."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kstreams._native.per_record import ContextRouting
from kstreams._native.record_collector import RecordCollector
from kstreams._native.store_core import BufferedDatabase, ChangelogSender, SegmentIndex
from kstreams.errors import ProcessorStateException
from kstreams.processing.record_context import RecordContext


class _Context(ContextRouting):
    """A task's context as the sender reads it: ``record_context``, swapped by punctuations."""


def _drained(collector: RecordCollector) -> list[tuple[str, bytes | None, bytes | None, int]]:
    return [
        (topic, key, value, timestamp)
        for topic, _, batch in collector.drain()
        for key, value, timestamp, *_ in batch
    ]


def test_a_logged_change_carries_the_current_records_timestamp() -> None:
    collector, context = RecordCollector(), _Context()
    context.record_context = RecordContext("in", 0, 5, timestamp=1_000)
    sender = ChangelogSender(collector, "app-s-changelog", 3, context)
    sender.log(b"k", b"v")
    context.record_context.timestamp = 1_001  # the task moves along its batch
    sender.log(b"k", None)
    context.record_context = RecordContext(timestamp=77)  # a punctuation runs with its own
    sender.log(b"j", b"w")
    sender(b"x", b"y", 5)  # a cache flush names the entry's timestamp
    assert _drained(collector) == [
        ("app-s-changelog", b"k", b"v", 1_000),
        ("app-s-changelog", b"k", None, 1_001),
        ("app-s-changelog", b"j", b"w", 77),
        ("app-s-changelog", b"x", b"y", 5),
    ]
    assert (sender.topic, sender.partition) == ("app-s-changelog", 3)
    with pytest.raises(TypeError):
        sender.log("not bytes", b"v")


class _Database(BufferedDatabase):
    """A BufferedDatabase over a dict, counting the batches it writes."""

    def __init__(self, max_pending: int) -> None:
        super().__init__(max_pending)
        self.stored: dict[bytes, bytes] = {}
        self._db = self.stored
        self.batches: list[dict[bytes, bytes | None]] = []

    def write_pending(self) -> None:
        self.batches.append(dict(self._pending))
        for key, value in self._pending.items():
            if value is None:
                self.stored.pop(key, None)
            else:
                self.stored[key] = value
        self._pending.clear()

    def _database(self) -> Any:
        if self._db is None:
            raise ProcessorStateException("closed")
        return self._db


def test_buffered_writes_are_read_first_and_written_in_batches() -> None:
    rng = random.Random(3)
    db, model = _Database(max_pending=8), {}
    for _ in range(2_000):
        key = f"k{rng.randrange(20)}".encode()
        if rng.random() < 0.5:
            assert db.get(key) == model.get(key)
        else:
            value = None if rng.random() < 0.2 else str(rng.random()).encode()
            db.put(key, value)
            if value is None:
                model.pop(key, None)
            else:
                model[key] = value
        assert len(db._pending) <= 8  # past the limit, the buffer is written as one batch
    assert db.batches and all(len(batch) == 9 for batch in db.batches)
    db.write_pending()
    assert db.stored == model
    db._db = None  # closed: reads and writes say so instead of losing the write
    with pytest.raises(ProcessorStateException, match="closed"):
        db.get(b"k1")
    with pytest.raises(ProcessorStateException, match="closed"):
        db.put(b"k1", b"v")


class _Segments(SegmentIndex):
    """A SegmentIndex whose segments are ids, recording what it creates and drops."""

    def __init__(self, retention_ms: int, interval: int) -> None:
        super().__init__(retention_ms, interval)
        self._directory = "open"
        self.dropped: list[int] = []

    def _drop_expired(self, min_live_segment: int) -> None:
        for segment_id in [i for i in self._segments if i < min_live_segment]:
            del self._segments[segment_id]
            self.dropped.append(segment_id)

    def _create(self, segment_id: int) -> BufferedDatabase:
        segment = self._segments[segment_id] = _Database(10)
        return segment

    def _closed(self) -> None:
        raise ProcessorStateException("not open")


def test_segments_are_chosen_and_expired_as_python_floors_timestamps() -> None:
    # Stream time starts below zero and retention reaches below it: the ids of the oldest live
    # segment are negative, where C's division would round the other way.
    rng = random.Random(9)
    retention, interval = 250, 100
    segments = _Segments(retention, interval)
    stream_time, live = -1, set()
    for _ in range(3_000):
        timestamp = stream_time + rng.randrange(-400, 60)
        if rng.random() < 0.3:
            got = segments.for_read(timestamp)
            if timestamp <= stream_time - retention or timestamp // interval not in live:
                assert got is None
            else:
                assert got is segments._segments[timestamp // interval]
            continue
        segment = segments.for_write(timestamp)
        stream_time = max(stream_time, timestamp)
        live = {i for i in live if i >= (stream_time - retention) // interval}
        if timestamp <= stream_time - retention:
            assert segment is None
        else:
            live.add(timestamp // interval)
            assert segment is segments._segments[timestamp // interval]
        assert set(segments._segments) == live
        assert segments.observed_stream_time == stream_time
        assert segments.min_live() == stream_time - retention + 1
    assert segments.dropped  # segments expired along the way
    segments._directory = None
    with pytest.raises(ProcessorStateException, match="not open"):
        segments.for_write(0)
    with pytest.raises(ValueError, match="positive"):
        SegmentIndex(10, 0)
