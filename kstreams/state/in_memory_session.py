"""The in-memory session store: per session end time, per key, per start time, the aggregate.

Like Kafka's in-memory session store, sessions are indexed by end time first, so expiry drops whole
end times: a session whose end is at or before (observed stream time - retention) is gone, and
writes to such sessions are ignored. Nothing survives a restart; a logged store is rebuilt from its
changelog through the restore callback registered at init.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator

from kstreams.errors import TopologyException
from kstreams.state.store import SessionStore, StateStore, StateStoreContext, WindowedKey
from kstreams.state.window_key_schema import from_session_key

__all__ = ["InMemorySessionStore"]

logger = logging.getLogger(__name__)

_NO_TIMESTAMP = -1
_MAX_LONG = 2**63 - 1


class InMemorySessionStore(SessionStore[bytes, bytes]):
    """A session store of bytes held in dicts."""

    def __init__(self, name: str, retention_ms: int) -> None:
        if retention_ms < 0:
            raise TopologyException(
                f"Session store {name}: the retention ({retention_ms} ms) must not be negative."
            )
        self._name = name
        self._retention_ms = retention_ms
        self._sessions: dict[int, dict[bytes, dict[int, bytes]]] = {}  # end -> key -> start -> value
        self._ends: list[int] = []
        self._observed_stream_time = _NO_TIMESTAMP
        self._open = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def is_open(self) -> bool:
        return self._open

    @property
    def retention_ms(self) -> int:
        return self._retention_ms

    @property
    def observed_stream_time(self) -> int:
        """The latest session end written so far (-1 before the first write)."""
        return self._observed_stream_time

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        context.register(root, self.restore_batch)
        self._open = True

    def restore_batch(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Apply changelog records, whose keys are ``session_key(key, start, end)``."""
        for store_key, value in records:
            key, start, end = from_session_key(store_key)
            self._write(key, start, end, value)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._sessions.clear()
        self._ends.clear()
        self._open = False

    def put(self, session: WindowedKey[bytes], aggregate: bytes | None) -> None:
        self._write(session.key, session.start, session.end, aggregate)

    def remove(self, session: WindowedKey[bytes]) -> None:
        self._write(session.key, session.start, session.end, None)

    def _min_live(self) -> int:
        return self._observed_stream_time - self._retention_ms + 1

    def _write(self, key: bytes, start: int, end: int, value: bytes | None) -> None:
        self._observed_stream_time = max(self._observed_stream_time, end)
        self._expire()
        if end < self._min_live():
            logger.debug("Store %s: skipping a write to an expired session ending at %d.", self._name, end)
            return
        by_key = self._sessions.get(end)
        if value is None:
            if by_key is None:
                return
            starts = by_key.get(key)
            if starts is None:
                return
            starts.pop(start, None)
            if not starts:
                del by_key[key]
            if not by_key:
                del self._sessions[end]
                del self._ends[bisect.bisect_left(self._ends, end)]
            return
        if by_key is None:
            by_key = {}
            self._sessions[end] = by_key
            if not self._ends or end > self._ends[-1]:
                self._ends.append(end)
            else:
                bisect.insort(self._ends, end)
        by_key.setdefault(key, {})[start] = value

    def _expire(self) -> None:
        ends = self._ends
        min_live = self._min_live()
        if ends and ends[0] < min_live:
            cut = bisect.bisect_left(ends, min_live)
            for end in ends[:cut]:
                del self._sessions[end]
            del ends[:cut]

    def fetch_session(self, key: bytes, session_start: int, session_end: int) -> bytes | None:
        if session_end < self._min_live():
            return None
        return self._sessions.get(session_end, {}).get(key, {}).get(session_start)

    def find_sessions(
        self, key: bytes, earliest_session_end: int, latest_session_start: int
    ) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        ends = self._ends
        first = max(earliest_session_end, self._min_live())
        for end in ends[bisect.bisect_left(ends, first) :]:
            starts = self._sessions.get(end, {}).get(key)
            if not starts:
                continue
            for start in sorted(starts):
                if start > latest_session_start:
                    break
                value = starts.get(start)
                if value is not None:
                    yield WindowedKey(key, start, end), value

    def fetch(self, key: bytes) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        return self.find_sessions(key, -_MAX_LONG, _MAX_LONG)
