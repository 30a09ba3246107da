"""The persistent session store: time segments (``segments.py``) by session end, each one RocksDB
database under ``<task state dir>/rocksdb/<store>/``.

Keys are ``session_key(key, start, end)``: record key, end, start; so within a segment one key's
sessions are one contiguous byte range ordered by end time, and a segment expires as a whole once
all its sessions ended more than the retention ago. Session times are never negative (as in Kafka).

Sessions of every key by end time (``find_sessions_by_end``) have no index of their own: the key
schema is key first (Kafka's ``SessionKeySchema``, so changelogs and local state keep their bytes),
so such a read scans the segments that cover the end-time range and keeps the sessions in it.
Segments are by end time, so it reads only those segments: for the emission of closed sessions, the
oldest one or two live segments. Kafka's time-ordered session store keeps an end-time index instead;
adding one here would change the on-disk layout of existing stores.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from kstreams.state.inner_windowed import InnerSessionStore
from kstreams.state.segments import SegmentedLifecycle, Segments, default_segment_interval
from kstreams.state.store import WindowedKey
from kstreams.state.window_key_schema import MAX_LONG, SESSION_SUFFIX, from_session_key, session_key

__all__ = ["RocksDBSessionStore"]

logger = logging.getLogger(__name__)


class RocksDBSessionStore(SegmentedLifecycle, InnerSessionStore):
    """A persistent session store of bytes, segmented by session end."""

    _kind = "session"

    def __init__(self, name: str, retention_ms: int, segment_interval_ms: int | None = None) -> None:
        super().__init__(name, retention_ms)
        interval = segment_interval_ms or default_segment_interval(retention_ms)
        self._segments = Segments(name, retention_ms, interval)

    def _write(self, key: bytes, start: int, end: int, value: bytes | None) -> None:
        segment = self._segments.for_write(end)
        if segment is None:
            logger.debug("Store %s: skipping a write to an expired session ending at %d.", self._name, end)
            return
        segment.put(session_key(key, start, end), value)

    def min_live(self) -> int:
        return self._segments.min_live()

    def fetch_session(self, key: bytes, session_start: int, session_end: int) -> bytes | None:
        segment = self._segments.for_read(session_end)
        if segment is None:
            return None
        return segment.get(session_key(key, session_start, session_end))

    def find_sessions(
        self, key: bytes, earliest_session_end: int, latest_session_start: int
    ) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        first = max(earliest_session_end, self._segments.min_live(), 0)
        lo = session_key(key, 0, first)
        hi = session_key(key, MAX_LONG, MAX_LONG)
        expected = len(key) + SESSION_SUFFIX
        for segment in self._segments.between(first, MAX_LONG):
            for store_key, value in segment.scan(lo, hi):
                # A longer record key that begins with ``key`` can sort inside the range: skip it.
                if len(store_key) != expected:
                    continue
                _, start, end = from_session_key(store_key)
                if start <= latest_session_start:
                    yield WindowedKey(key, start, end), value

    def find_sessions_by_end(
        self, earliest_session_end: int, latest_session_end: int
    ) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        first = max(earliest_session_end, self._segments.min_live(), 0)
        if first > latest_session_end:
            return
        # Each segment is read in full before yielding: the caller may write while it iterates.
        found: list[tuple[int, bytes, int, bytes]] = []
        for segment in self._segments.between(first, latest_session_end):
            for store_key, value in segment.scan(None, None):
                key, start, end = from_session_key(store_key)
                if first <= end <= latest_session_end:
                    found.append((end, key, start, value))
        found.sort()
        for end, key, start, value in found:
            yield WindowedKey(key, start, end), value
