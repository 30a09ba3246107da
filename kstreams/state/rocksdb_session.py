"""The persistent session store: time segments (``segments.py``) by session end, each one RocksDB
database under ``<task state dir>/rocksdb/<store>/``.

Keys are ``session_key(key, start, end)``: record key, end, start; so within a segment one key's
sessions are one contiguous byte range ordered by end time, and a segment expires as a whole once
all its sessions ended more than the retention ago. Session times are never negative (as in Kafka).

Sessions of every key by end time (``find_sessions_by_end``) have no index on disk: the key schema
is key first (Kafka's ``SessionKeySchema``, so changelogs and local state keep their bytes). A
session aggregation that emits on window close asks for them at every advance of stream time, and
a scan of the segments covering the range per record cost 0.8 ms a record. So the store keeps an
index of session ends in memory (``_EndIndex``), built by one scan at the first such read and kept
by every write from then on (restoration included). It holds only the ends at or after the lowest
end the latest read asked for: reads on close move forward, so it holds the sessions not yet
emitted; a read below it scans, as without the index. Kafka's time-ordered session store keeps
such an index on disk instead; adding one here would change the on-disk layout of existing stores.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator

from kstreams.state.inner_windowed import InnerSessionStore
from kstreams.state.segments import SegmentedLifecycle, Segments, default_segment_interval
from kstreams.state.store import StateStore, StateStoreContext, WindowedKey
from kstreams.state.window_key_schema import MAX_LONG, SESSION_SUFFIX, from_session_key, session_key

__all__ = ["RocksDBSessionStore"]

logger = logging.getLogger(__name__)


class _EndIndex:
    """The stored sessions with an end at or after ``floor``: end -> {(key, start)}, and the ends in
    ascending order."""

    def __init__(self, floor: int) -> None:
        self.floor = floor
        self.sessions: dict[int, set[tuple[bytes, int]]] = {}
        self.ends: list[int] = []

    def add(self, key: bytes, start: int, end: int) -> None:
        at_end = self.sessions.get(end)
        if at_end is None:
            at_end = self.sessions[end] = set()
            bisect.insort(self.ends, end)
        at_end.add((key, start))

    def discard(self, key: bytes, start: int, end: int) -> None:
        at_end = self.sessions.get(end)
        if at_end is None:
            return
        at_end.discard((key, start))
        if not at_end:
            del self.sessions[end]
            del self.ends[bisect.bisect_left(self.ends, end)]

    def raise_floor(self, floor: int) -> None:
        """Forget the ends below ``floor``."""
        if floor <= self.floor:
            return
        below = bisect.bisect_left(self.ends, floor)
        for end in self.ends[:below]:
            del self.sessions[end]
        del self.ends[:below]
        self.floor = floor

    def between(self, first: int, last: int) -> list[tuple[int, bytes, int]]:
        """(end, key, start) of the sessions with first <= end <= last, in that order."""
        ends = self.ends
        found = [
            (end, key, start)
            for end in ends[bisect.bisect_left(ends, first) : bisect.bisect_right(ends, last)]
            for key, start in self.sessions[end]
        ]
        found.sort()
        return found


class RocksDBSessionStore(SegmentedLifecycle, InnerSessionStore):
    """A persistent session store of bytes, segmented by session end."""

    _kind = "session"

    def __init__(self, name: str, retention_ms: int, segment_interval_ms: int | None = None) -> None:
        super().__init__(name, retention_ms)
        interval = segment_interval_ms or default_segment_interval(retention_ms)
        self._segments = Segments(name, retention_ms, interval)
        self._ends: _EndIndex | None = None  # built by the first find_sessions_by_end

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._ends = None
        super().init(context, root)

    def close(self) -> None:
        self._ends = None
        super().close()

    def _write(self, key: bytes, start: int, end: int, value: bytes | None) -> None:
        segment = self._segments.for_write(end)
        if segment is None:
            logger.debug("Store %s: skipping a write to an expired session ending at %d.", self._name, end)
            return
        segment.put(session_key(key, start, end), value)
        index = self._ends
        if index is not None and end >= index.floor:
            if value is None:
                index.discard(key, start, end)
            else:
                index.add(key, start, end)

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
        index = self._ends
        if index is None:
            index = self._ends = self._build_end_index(first)
        if first < index.floor:
            found = self._scan_by_end(first, latest_session_end)
        else:
            index.raise_floor(first)
            # Read in full before yielding: the caller may write while it iterates.
            found = []
            for end, key, start in index.between(first, latest_session_end):
                value = self.fetch_session(key, start, end)
                if value is not None:
                    found.append((end, key, start, value))
        for end, key, start, value in found:
            yield WindowedKey(key, start, end), value

    def _scan_by_end(self, first: int, last: int) -> list[tuple[int, bytes, int, bytes]]:
        """(end, key, start, value) of the sessions with first <= end <= last, in that order: a
        scan of the segments that cover the range."""
        found: list[tuple[int, bytes, int, bytes]] = []
        for segment in self._segments.between(first, last):
            for store_key, value in segment.scan(None, None):
                key, start, end = from_session_key(store_key)
                if first <= end <= last:
                    found.append((end, key, start, value))
        found.sort()
        return found

    def _build_end_index(self, floor: int) -> _EndIndex:
        index = _EndIndex(floor)
        for end, key, start, _ in self._scan_by_end(floor, MAX_LONG):
            index.add(key, start, end)
        logger.debug("Store %s: indexed %d session ends from %d.", self._name, len(index.ends), floor)
        return index
