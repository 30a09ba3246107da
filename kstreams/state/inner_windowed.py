"""What the inner window and session stores (in-memory and RocksDB) share.

Both kinds of each store check their retention the same way, write duplicates under the same
sequence numbers, and restore from the same changelog keys (``window_key_schema``). Each kind
implements ``_write``: one record into its time buckets or segments, advancing the store's stream
time and ignoring a record already past the retention; restoration replays changelog records
through it, so a restored store holds what the logged one held.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Iterable, Iterator

from kstreams.errors import TopologyException
from kstreams.state.store import SessionStore, WindowedKey, WindowStore
from kstreams.state.window_key_schema import (
    MAX_LONG,
    MIN_LONG,
    from_changelog_key,
    from_session_key,
    key_and_start,
)

__all__ = [
    "NO_TIMESTAMP",
    "InnerSessionStore",
    "InnerWindowStore",
    "check_window_retention",
]

logger = logging.getLogger(__name__)

# A windowed store's stream time before its first write.
NO_TIMESTAMP = -1


def check_window_retention(name: str, retention_ms: int, window_size_ms: int) -> None:
    """Raise TopologyException when a window store would drop windows before they end."""
    if retention_ms < window_size_ms:
        raise TopologyException(
            f"Window store {name}: the retention period ({retention_ms} ms) must be no smaller than "
            f"its window size ({window_size_ms} ms); raise the retention (grace + window size)."
        )


class InnerWindowStore(WindowStore[bytes, bytes]):
    """A window store of bytes whose windows older than (stream time - retention) are gone.

    With ``retain_duplicates`` (stream-stream joins) each put appends a value under a new sequence
    number and a None value is ignored; otherwise a put replaces the window's value (None deletes).
    """

    def __init__(self, name: str, retention_ms: int, window_size_ms: int, retain_duplicates: bool) -> None:
        if retention_ms < 0 or window_size_ms < 0:
            raise TopologyException(
                f"Window store {name}: retention ({retention_ms} ms) and window size ({window_size_ms} ms) "
                "must not be negative."
            )
        check_window_retention(name, retention_ms, window_size_ms)
        self._name = name
        self._retention_ms = retention_ms
        self._window_size_ms = window_size_ms
        self._retain_duplicates = retain_duplicates
        self._seq = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def retention_ms(self) -> int:
        return self._retention_ms

    @property
    def window_size_ms(self) -> int:
        return self._window_size_ms

    @property
    def retain_duplicates(self) -> bool:
        return self._retain_duplicates

    @abc.abstractmethod
    def _write(self, key: bytes, value: bytes | None, start: int, seq: int) -> None:
        """Write (None: delete) one record's value in window ``start`` under sequence number ``seq``
        (0 unless duplicates are retained), unless the window is past the retention."""

    def restore_batch(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Apply changelog records, whose keys are (record key, window start, sequence number)."""
        self.put_changes(records)
        self.flush()

    def put_changes(self, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Write records keyed as the changelog is (record key, window start, sequence number),
        each as ``put_with_seq`` would."""
        write = self._write
        for store_key, value in records:
            key, start, seq = from_changelog_key(store_key)
            write(key, value, start, seq)

    def fetch_many(self, window_keys: list[bytes]) -> list[bytes | None]:
        """``fetch`` of many windows, each named by its ``window_key`` (record key, window start)."""
        fetch = self.fetch
        return [fetch(*key_and_start(window_key)) for window_key in window_keys]

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

    def all(self) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        # fetch_all keeps to the windows still within the retention.
        return self.fetch_all(MIN_LONG, MAX_LONG)


class InnerSessionStore(SessionStore[bytes, bytes]):
    """A session store of bytes whose sessions that ended at or before (stream time - retention)
    are gone; stream time is the latest session end written."""

    def __init__(self, name: str, retention_ms: int) -> None:
        if retention_ms < 0:
            raise TopologyException(
                f"Session store {name}: the retention ({retention_ms} ms) must not be negative."
            )
        self._name = name
        self._retention_ms = retention_ms

    @property
    def name(self) -> str:
        return self._name

    @property
    def retention_ms(self) -> int:
        return self._retention_ms

    @abc.abstractmethod
    def _write(self, key: bytes, start: int, end: int, value: bytes | None) -> None:
        """Write (None: remove) one session's aggregate, unless its end is past the retention."""

    @abc.abstractmethod
    def min_live(self) -> int:
        """The earliest session end still within the retention now: reads see no session that
        ended before it, and a write to one is ignored (it moves on as writes advance stream time).
        A batch step that keeps sessions between reads asks it (see ``kstreams.processing.compiled``)."""

    def restore_batch(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Apply changelog records, whose keys are ``session_key(key, start, end)``."""
        for store_key, value in records:
            key, start, end = from_session_key(store_key)
            self._write(key, start, end, value)
        self.flush()

    def put(self, session: WindowedKey[bytes], aggregate: bytes | None) -> None:
        self._write(session.key, session.start, session.end, aggregate)

    def remove(self, session: WindowedKey[bytes]) -> None:
        self._write(session.key, session.start, session.end, None)

    def fetch(self, key: bytes) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        # find_sessions keeps to the sessions still within the retention.
        return self.find_sessions(key, MIN_LONG, MAX_LONG)
