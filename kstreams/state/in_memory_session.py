"""The in-memory session store: per session end time, per key, per start time, the aggregate.

Like Kafka's in-memory session store, sessions are indexed by end time first (``TimeBuckets``), so
expiry drops whole end times: a session whose end is at or before (observed stream time -
retention) is gone, and writes to such sessions are ignored. A key's sessions (``find_sessions``,
which a session aggregation calls per record) are found through a second index, key -> the ends of
its sessions in ascending order, kept by every write and by expiry; Kafka's store visits every end
time in the range instead, which cost time proportional to the records in the last gap. Nothing
survives a restart; a logged store is rebuilt from its changelog through the restore callback
registered at init.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator
from typing import Any

from kstreams.state.in_memory import InMemoryLifecycle, TimeBuckets, insert_sorted, remove_sorted
from kstreams.state.inner_windowed import InnerSessionStore
from kstreams.state.store import WindowedKey

__all__ = ["InMemorySessionStore"]

logger = logging.getLogger(__name__)


class InMemorySessionStore(InMemoryLifecycle, InnerSessionStore):
    """A session store of bytes held in dicts: end -> key -> start -> aggregate."""

    def __init__(self, name: str, retention_ms: int) -> None:
        super().__init__(name, retention_ms)
        self._sessions = TimeBuckets(retention_ms, self._expired)
        # key -> the ends of its live sessions, ascending
        self._ends_of: dict[bytes, list[int]] = {}

    def _clear(self) -> None:
        self._sessions.clear()
        self._ends_of.clear()

    def _expired(self, end: int, by_key: dict[bytes, Any]) -> None:
        for key in by_key:
            self._forget_end(key, end)

    def _forget_end(self, key: bytes, end: int) -> None:
        ends = self._ends_of[key]
        remove_sorted(ends, end)
        if not ends:
            del self._ends_of[key]

    def _write(self, key: bytes, start: int, end: int, value: bytes | None) -> None:
        sessions = self._sessions
        if not sessions.advance(end):
            logger.debug("Store %s: skipping a write to an expired session ending at %d.", self._name, end)
            return
        by_key = sessions.get(end)
        if value is None:
            if by_key is None:
                return
            starts = by_key.get(key)
            if starts is None:
                return
            starts.pop(start, None)
            if not starts:
                del by_key[key]
                self._forget_end(key, end)
            if not by_key:
                sessions.remove(end)
            return
        if by_key is None:
            by_key = sessions.create(end)
        starts = by_key.get(key)
        if starts is None:
            starts = by_key[key] = {}
            insert_sorted(self._ends_of.setdefault(key, []), end)
        starts[start] = value

    def min_live(self) -> int:
        return self._sessions.min_live()

    def fetch_session(self, key: bytes, session_start: int, session_end: int) -> bytes | None:
        by_key = self._sessions.live(session_end)
        if by_key is None:
            return None
        return by_key.get(key, {}).get(session_start)

    def find_sessions(
        self, key: bytes, earliest_session_end: int, latest_session_start: int
    ) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        sessions = self._sessions
        ends = self._ends_of.get(key)
        if ends is None:
            return
        first = max(earliest_session_end, sessions.min_live())
        # A snapshot: the caller may write (and so change the key's ends) while it iterates.
        for end in ends[bisect.bisect_left(ends, first) :]:
            by_key = sessions.get(end)
            starts = by_key.get(key) if by_key is not None else None
            if not starts:
                continue
            for start in sorted(starts):
                if start > latest_session_start:
                    break
                value = starts.get(start)
                if value is not None:
                    yield WindowedKey(key, start, end), value

    def find_sessions_by_end(
        self, earliest_session_end: int, latest_session_end: int
    ) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        # The end-time buckets are the index: only the ends in range are visited.
        sessions = self._sessions
        for end in sessions.between(earliest_session_end, latest_session_end):
            by_key = sessions.get(end)
            if by_key is None:
                continue
            # Snapshots: the caller may write (and so drop an emptied bucket) while it iterates.
            for key in sorted(by_key):
                starts = by_key.get(key)
                if not starts:
                    continue
                for start in sorted(starts):
                    value = starts.get(start)
                    if value is not None:
                        yield WindowedKey(key, start, end), value
