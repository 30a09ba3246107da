"""The persistent session store: time segments (``segments.py``) by session end, each one RocksDB
database under ``<task state dir>/rocksdb/<store>/``.

Keys are ``session_key(key, start, end)``: record key, end, start; so within a segment one key's
sessions are one contiguous byte range ordered by end time, and a segment expires as a whole once
all its sessions ended more than the retention ago. Session times are never negative (as in Kafka).

Sessions of every key by end time (``find_sessions_by_end``) have no index on disk: the key schema
is key first (Kafka's ``SessionKeySchema``, so changelogs and local state keep their bytes). A
session aggregation that emits on window close asks for them at every advance of stream time, and
a scan of the segments covering the range per record cost 0.8 ms a record. So the store keeps an
index of session ends in memory (a ``TimeBuckets`` of end -> key -> starts), built by one scan at
the first such read and kept by every write from then on (restoration included). It holds only
the ends at or after the lowest end the latest read asked for: reads on close move forward, so it
holds the sessions not yet emitted; a read below it scans, as without the index. Kafka's
time-ordered session store keeps such an index on disk instead; adding one here would change the
on-disk layout of existing stores.

``time_ordered`` makes ``find_sessions_by_end`` answer as Kafka's time-ordered session store
(``RocksDBTimeOrderedSessionStore``, what the DSL's default RocksDB supplier gives a session
aggregation that emits on window close): it lists every session in range that a live segment still
holds, expired or not (Kafka's ``fetchSessions`` applies no retention to its reads, only its
segments' lifetime does), by end, then start, then key bytes (its keys begin with the end, then
the start). Its other reads apply the retention as the default store does, as Kafka's do; its
writes reach a session past the retention too while its segment lives, as Kafka's do.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from kstreams.state.in_memory import TimeBuckets
from kstreams.state.inner_windowed import InnerSessionStore
from kstreams.state.segments import SegmentedLifecycle, Segments, default_segment_interval
from kstreams.state.store import StateStore, StateStoreContext, WindowedKey
from kstreams.state.window_key_schema import MAX_LONG, SESSION_SUFFIX, from_session_key, session_key

__all__ = ["RocksDBSessionStore"]

logger = logging.getLogger(__name__)


def _end_index(floor: int) -> TimeBuckets:
    """An empty index of session ends from ``floor`` on: end -> key -> its starts. Its retention of
    one millisecond makes its stream time the floor (``min_live()``): advancing it to a later
    floor drops the ends below."""
    index = TimeBuckets(1)
    index.advance(floor)
    return index


def _end_start_key(row: tuple[int, bytes, int, bytes]) -> tuple[int, int, bytes]:
    """The order of Kafka's time-first session keys: end, start, key bytes."""
    end, key, start, _ = row
    return end, start, key


def _index_session(index: TimeBuckets, key: bytes, start: int, end: int, stored: bool) -> None:
    """Add a session to an end index (``stored``) or drop it from it."""
    by_key = index.get(end)
    if stored:
        if by_key is None:
            by_key = index.create(end)
        by_key.setdefault(key, set()).add(start)
        return
    if by_key is None or key not in by_key:
        return
    starts = by_key[key]
    starts.discard(start)
    if not starts:
        del by_key[key]
        if not by_key:
            index.remove(end)


class RocksDBSessionStore(SegmentedLifecycle, InnerSessionStore):
    """A persistent session store of bytes, segmented by session end."""

    _kind = "session"

    def __init__(
        self,
        name: str,
        retention_ms: int,
        segment_interval_ms: int | None = None,
        time_ordered: bool = False,
    ) -> None:
        super().__init__(name, retention_ms)
        interval = segment_interval_ms or default_segment_interval(retention_ms)
        self._segments = Segments(name, retention_ms, interval)
        self._ends: TimeBuckets | None = None  # built by the first find_sessions_by_end
        self.time_ordered = time_ordered

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._ends = None
        super().init(context, root)

    def close(self) -> None:
        self._ends = None
        super().close()

    def _write(self, key: bytes, start: int, end: int, value: bytes | None) -> None:
        if self.time_ordered:
            # Kafka's time-ordered store writes a session past the retention while its segment
            # lives (find_sessions_by_end lists it; the other reads skip it).
            segment = self._segments.for_live_segment_write(end, create=value is not None)
        else:
            segment = self._segments.for_write(end)
        if segment is None:
            logger.debug("Store %s: skipping a write to an expired session ending at %d.", self._name, end)
            return
        segment.put(session_key(key, start, end), value)
        index = self._ends
        if index is not None and end >= index.min_live():
            _index_session(index, key, start, end, value is not None)

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
        floor = 0 if self.time_ordered else self._segments.min_live()
        first = max(earliest_session_end, floor, 0)
        if first > latest_session_end:
            return
        index = self._ends
        if index is None:
            index = self._ends = self._build_end_index(first)
        if first < index.min_live():
            found = self._scan_by_end(first, latest_session_end)
        else:
            index.advance(first)
            # Read in full before yielding: the caller may write while it iterates.
            found = []
            read = self._held if self.time_ordered else self.fetch_session
            for end in index.between(first, latest_session_end):
                by_key = index.get(end) or {}
                for key, starts in sorted(by_key.items()):
                    for start in sorted(starts):
                        value = read(key, start, end)
                        if value is not None:
                            found.append((end, key, start, value))
            if self.time_ordered:
                found.sort(key=_end_start_key)
        for end, key, start, value in found:
            yield WindowedKey(key, start, end), value

    def _held(self, key: bytes, start: int, end: int) -> bytes | None:
        """A session's aggregate while a live segment holds it, past the retention or not."""
        segment = self._segments.holding(end)
        return None if segment is None else segment.get(session_key(key, start, end))

    def _scan_by_end(self, first: int, last: int) -> list[tuple[int, bytes, int, bytes]]:
        """(end, key, start, value) of the sessions with first <= end <= last: a scan of the
        segments that cover the range, by end, key and start (time-ordered: end, start, key)."""
        found: list[tuple[int, bytes, int, bytes]] = []
        for segment in self._segments.between(first, last):
            for store_key, value in segment.scan(None, None):
                key, start, end = from_session_key(store_key)
                if first <= end <= last:
                    found.append((end, key, start, value))
        found.sort(key=_end_start_key if self.time_ordered else None)
        return found

    def _build_end_index(self, floor: int) -> TimeBuckets:
        index = _end_index(floor)
        for end, key, start, _ in self._scan_by_end(floor, MAX_LONG):
            _index_session(index, key, start, end, True)
        logger.debug("Store %s: indexed the session ends from %d.", self._name, floor)
        return index
