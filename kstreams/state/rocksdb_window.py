"""The persistent window store: time segments (``segments.py``) by window start, each one RocksDB
database under ``<task state dir>/rocksdb/<store>/``.

Keys inside a segment are ``window_key_schema`` keys: record key + window start (+ a sequence number
when duplicates are retained), so one key's windows are one contiguous byte range. Reads and writes
honour the exact retention (start > observed stream time - retention), so both window stores
answer alike.

``time_ordered`` makes the store answer as Kafka's time-ordered window store
(``RocksDBTimeOrderedWindowStore``, what the DSL's default RocksDB supplier gives an aggregation
that emits on window close): a window stays readable one millisecond longer (start >= observed
stream time - retention: Kafka's time-first key schema keeps the window starting exactly at the
cut), and ``fetch_all`` lists windows by start, then key bytes (its keys begin with the time).
Observed stream time is the largest window start written, as in both of Kafka's stores. The
layout on disk and the changelog's records are the same as the default store's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

from kstreams._native.kernels import window_change_runs, window_key_runs
from kstreams._native.store_core import UniqueWindowPoints
from kstreams.state.inner_windowed import InnerWindowStore
from kstreams.state.rocksdb import RocksDBDatabase
from kstreams.state.segments import SegmentedLifecycle, Segments, default_segment_interval
from kstreams.state.store import WindowedKey
from kstreams.state.window_key_schema import (
    SEQ_SIZE,
    TIMESTAMP_SIZE,
    changelog_key,
    from_changelog_key,
    key_and_start,
    window_key,
)

__all__ = ["RocksDBWindowStore"]

logger = logging.getLogger(__name__)

_MAX_SEQ_SUFFIX = b"\xff" * SEQ_SIZE


class RocksDBWindowStore(SegmentedLifecycle, InnerWindowStore):
    """A persistent window store of bytes, segmented by window start."""

    _kind = "window"

    def __init__(
        self,
        name: str,
        retention_ms: int,
        window_size_ms: int,
        retain_duplicates: bool,
        segment_interval_ms: int | None = None,
        time_ordered: bool = False,
    ) -> None:
        super().__init__(name, retention_ms, window_size_ms, retain_duplicates)
        self._suffix = TIMESTAMP_SIZE + (SEQ_SIZE if retain_duplicates else 0)
        self.time_ordered = time_ordered
        # The segments expire a window once start <= stream time - their retention: one more
        # millisecond keeps the window at start == stream time - retention (Kafka's time-first rule).
        self._segments = Segments(
            name,
            retention_ms + 1 if time_ordered else retention_ms,
            segment_interval_ms or default_segment_interval(retention_ms),
        )
        # Without duplicates, a window's point read and write in C (the change-logging layer and
        # the DSL's per-record accessor call it without a Python frame).
        self.points = None if retain_duplicates else UniqueWindowPoints(self._segments, name)

    def _write(self, key: bytes, value: bytes | None, start: int, seq: int) -> None:
        if self.points is not None:
            self.points.put(key, value, start)
            return
        segment = self._segments.for_write(start)
        if segment is None:
            logger.debug("Store %s: skipping a write to expired window %d.", self._name, start)
            return
        segment.put(changelog_key(key, start, seq), value)

    def put_changes(self, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        if self._retain_duplicates:
            super().put_changes(records)
            return
        # Without duplicates a window's store key is its changelog key without the sequence number.
        # Records in a row with the same window start go to their segment in one call (looking the
        # segment up again for the same start would change nothing).
        for start, run in window_change_runs(records, TIMESTAMP_SIZE + SEQ_SIZE, SEQ_SIZE):
            segment = self._segments.for_write(start)
            if segment is None:
                logger.debug("Store %s: skipping a write to expired window %d.", self._name, start)
                continue
            segment.put_many(run)

    def fetch_many(self, window_keys: list[bytes]) -> list[bytes | None]:
        if self._retain_duplicates:
            return super().fetch_many(window_keys)
        # Without duplicates a window's store key is its window_key; keys in a row with the same
        # window start are read from their segment in one call.
        out: list[bytes | None] = []
        for start, keys in window_key_runs(window_keys, TIMESTAMP_SIZE):
            segment = self._segments.for_read(start)
            out.extend([None] * len(keys) if segment is None else segment.get_many(keys))
        return out

    def fetch(self, key: bytes, window_start: int) -> bytes | None:
        if self.points is not None:
            return self.points.fetch(key, window_start)
        segment = self._segments.for_read(window_start)
        if segment is None:
            return None
        # With duplicates, a point read returns the earliest value still held.
        for _, value in self._scan_key(segment, key, window_start, window_start):
            return value
        return None

    def fetch_range(self, key: bytes, time_from: int, time_to: int) -> Iterator[tuple[int, bytes]]:
        # Window starts are never negative (as in Kafka), and a negative bound would not sort
        # below the positive ones in the keys' signed big-endian bytes: clamp it to 0.
        time_from = max(time_from, self._segments.min_live(), 0)
        if time_from > time_to:
            return
        for segment in self._segments.between(time_from, time_to):
            yield from self._scan_key(segment, key, time_from, time_to)

    def _scan_key(
        self, segment: RocksDBDatabase, key: bytes, time_from: int, time_to: int
    ) -> Iterator[tuple[int, bytes]]:
        lo = window_key(key, time_from)
        hi = window_key(key, time_to)
        if self._retain_duplicates:
            hi += _MAX_SEQ_SUFFIX
        expected = len(key) + self._suffix
        for store_key, value in segment.scan(lo, hi):
            # A longer record key that begins with ``key`` can sort inside the range: skip it.
            if len(store_key) == expected:
                yield self._start_of(store_key), value

    def _start_of(self, store_key: bytes) -> int:
        if self._retain_duplicates:
            return from_changelog_key(store_key)[1]
        return key_and_start(store_key)[1]

    def _split(self, store_key: bytes) -> tuple[bytes, int]:
        if self._retain_duplicates:
            key, start, _ = from_changelog_key(store_key)
            return key, start
        return key_and_start(store_key)

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        """Every window with time_from <= start <= time_to: segment by segment, in key byte order
        (time-ordered: by window start, then key bytes)."""
        time_from = max(time_from, self._segments.min_live())
        if time_from > time_to:
            return
        size = self._window_size_ms
        for segment in self._segments.between(time_from, time_to):
            if self.time_ordered:
                found = []
                for store_key, value in segment.scan(None, None):
                    key, start = self._split(store_key)
                    if time_from <= start <= time_to:
                        found.append((start, store_key, key, value))
                # the store keys of one start sort as Kafka's time-first keys do after the time:
                # key bytes, then sequence number
                found.sort(key=_by_start_then_key)
                for start, _, key, value in found:
                    yield WindowedKey(key, start, start + size), value
                continue
            for store_key, value in segment.scan(None, None):
                key, start = self._split(store_key)
                if time_from <= start <= time_to:
                    yield WindowedKey(key, start, start + size), value


def _by_start_then_key(row: tuple[int, bytes, bytes, bytes]) -> tuple[int, bytes, bytes]:
    start, store_key, key, _ = row
    return start, key, store_key
