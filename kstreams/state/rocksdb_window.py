"""The persistent window store: time segments (``segments.py``) by window start, each one RocksDB
database under ``<task state dir>/rocksdb/<store>/``.

Keys inside a segment are ``window_key_schema`` keys: record key + window start (+ a sequence number
when duplicates are retained), so one key's windows are one contiguous byte range. Reads and writes
honour the exact retention (start > observed stream time - retention), so both window stores
answer alike.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from kstreams.errors import TopologyException
from kstreams.state.rocksdb import RocksDBDatabase, rocksdb_path
from kstreams.state.segments import Segments, default_segment_interval
from kstreams.state.store import StateStore, StateStoreContext, WindowedKey, WindowStore
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


class RocksDBWindowStore(WindowStore[bytes, bytes]):
    """A persistent window store of bytes, segmented by window start.

    With ``retain_duplicates`` (stream-stream joins) each put appends a value under a new sequence
    number and a None value is ignored.
    """

    def __init__(
        self,
        name: str,
        retention_ms: int,
        window_size_ms: int,
        retain_duplicates: bool,
        segment_interval_ms: int | None = None,
    ) -> None:
        if retention_ms < 0 or window_size_ms < 0:
            raise TopologyException(
                f"Window store {name}: retention ({retention_ms} ms) and window size ({window_size_ms} ms) "
                "must not be negative."
            )
        if retention_ms < window_size_ms:
            raise TopologyException(
                f"Window store {name}: the retention period ({retention_ms} ms) must be no smaller than "
                f"its window size ({window_size_ms} ms); raise the retention (grace + window size)."
            )
        self._name = name
        self._retention_ms = retention_ms
        self._window_size_ms = window_size_ms
        self._retain_duplicates = retain_duplicates
        self._suffix = TIMESTAMP_SIZE + (SEQ_SIZE if retain_duplicates else 0)
        self._segments = Segments(
            name, retention_ms, segment_interval_ms or default_segment_interval(retention_ms)
        )
        self._seq = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def persistent(self) -> bool:
        return True

    @property
    def is_open(self) -> bool:
        return self._segments.is_open

    @property
    def retention_ms(self) -> int:
        return self._retention_ms

    @property
    def window_size_ms(self) -> int:
        return self._window_size_ms

    @property
    def retain_duplicates(self) -> bool:
        return self._retain_duplicates

    @property
    def segment_interval_ms(self) -> int:
        return self._segments.interval

    @property
    def observed_stream_time(self) -> int:
        return self._segments.observed_stream_time

    def segment_ids(self) -> list[int]:
        """The ids of the segments open now, ascending."""
        return self._segments.ids()

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._segments.open(rocksdb_path(context, self._name))
        context.register(root, self.restore_batch)
        logger.debug("Opened RocksDB window store %s (%d segments)", self._name, len(self._segments.ids()))

    def restore_batch(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Apply changelog records (keys: record key, window start, sequence number) in batches."""
        for store_key, value in records:
            key, start, seq = from_changelog_key(store_key)
            self._write(key, value, start, seq)
        self.flush()

    def flush(self) -> None:
        self._segments.flush()

    def close(self) -> None:
        self._segments.close()

    def next_seq(self) -> int:
        """The sequence number the next duplicate-retaining put gets (wraps like Kafka's int)."""
        self._seq = (self._seq + 1) & 0x7FFFFFFF
        return self._seq

    def put(self, key: bytes, value: bytes | None, window_start: int) -> None:
        if self._retain_duplicates:
            if value is None:
                return
            self._write(key, value, window_start, self.next_seq())
        else:
            self._write(key, value, window_start, 0)

    def put_with_seq(self, key: bytes, value: bytes | None, window_start: int, seq: int) -> None:
        """Write under an explicit sequence number (the change-logging layer numbers duplicates)."""
        self._write(key, value, window_start, seq)

    def _write(self, key: bytes, value: bytes | None, start: int, seq: int) -> None:
        segment = self._segments.for_write(start)
        if segment is None:
            logger.debug("Store %s: skipping a write to expired window %d.", self._name, start)
            return
        store_key = changelog_key(key, start, seq) if self._retain_duplicates else window_key(key, start)
        segment.put(store_key, value)

    def fetch(self, key: bytes, window_start: int) -> bytes | None:
        segment = self._segments.for_read(window_start)
        if segment is None:
            return None
        if not self._retain_duplicates:
            return segment.get(window_key(key, window_start))
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
        """Every window with time_from <= start <= time_to: segment by segment, in key byte order."""
        time_from = max(time_from, self._segments.min_live())
        if time_from > time_to:
            return
        size = self._window_size_ms
        for segment in self._segments.between(time_from, time_to):
            for store_key, value in segment.scan(None, None):
                key, start = self._split(store_key)
                if time_from <= start <= time_to:
                    yield WindowedKey(key, start, start + size), value

    def all(self) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        return self.fetch_all(self._segments.min_live(), 2**63 - 1)
