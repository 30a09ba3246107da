"""Change-logging layers: every write to the store below is also sent to the store's changelog.

The changelog is ``<application.id>-<store>-changelog``; the task's context routes each change to
the changelog partition of the task through the record collector (which keeps only the newest
record per key until the next commit). A changelog record carries the timestamp of the record being
processed, or, for writes a cache flushes, the timestamp the cache kept with the entry.

Window changelog keys are (record key, window start, sequence number), Kafka's layout; the sequence
number is 0 unless the store retains duplicates. Session changelog keys are (record key, end, start).

A timestamped store (``kstreams.state.timestamped``) holds an 8-byte timestamp before each value;
its changelog holds what Kafka's ``ChangeLoggingTimestampedKeyValueBytesStore`` and
``ChangeLoggingTimestampedWindowBytesStore`` write: the plain value, in a record stamped with the
value's timestamp (``ChangelogSender.split_timestamps``). Restoring puts the record's timestamp back
in front (``Task.register_store``). So a changelog Kafka Streams wrote restores a kstreams store,
and the reverse.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from kstreams._native.store_core import ChangelogSender, LoggedPut, LoggedWindowPoints, UniqueWindowPoints
from kstreams.errors import ProcessorStateException
from kstreams.state.in_memory_lru import MemoryLRUCache
from kstreams.state.layer import SessionLayer, StoreLayer, WindowLayer
from kstreams.state.store import (
    KeyValueStore,
    SessionStore,
    StateStore,
    StateStoreContext,
    WindowedKey,
    WindowStore,
)
from kstreams.state.value_and_timestamp import TIMESTAMP_BYTES
from kstreams.state.window_key_schema import changelog_key, session_key

if TYPE_CHECKING:
    from kstreams._native.record_batch import RecordBatch

__all__ = [
    "ChangeLoggingKeyValueStore",
    "ChangeLoggingSessionStore",
    "ChangeLoggingWindowStore",
    "SequencedWindowStore",
    "change_pairs",
]

logger = logging.getLogger(__name__)


def change_pairs(changes: RecordBatch) -> Iterator[tuple[bytes, bytes | None]]:
    """A batch of changes (changelog records) as (key, value or None) pairs, made one at a time
    as they are consumed: a list of them would be thousands of objects per batch for the garbage
    collector to count and scan."""
    return zip(changes.keys(), changes.values(), strict=True)  # type: ignore[arg-type]  # keys are never null


def _split_timestamps(
    log_change: Callable[[str, bytes, bytes | None, int], None],
) -> Callable[[str, bytes, bytes | None, int], None]:
    """``log_change`` of a context without a ``ChangelogSender``, for a timestamped store: each
    value logged without its timestamp, in a record stamped with it (``ChangelogSender``)."""

    def log(store_name: str, key: bytes, value: bytes | None, timestamp: int) -> None:
        if value is not None:
            timestamp = int.from_bytes(value[:TIMESTAMP_BYTES], "big", signed=True)
            value = value[TIMESTAMP_BYTES:]
        log_change(store_name, key, value, timestamp)

    return log


class SequencedWindowStore(Protocol):
    """What the change-logging window layer needs of the inner window store beyond WindowStore."""

    @property
    def retain_duplicates(self) -> bool: ...

    def next_seq(self) -> int: ...

    def put_with_seq(self, key: bytes, value: bytes | None, window_start: int, seq: int) -> None: ...

    def put_changes(self, records: Iterable[tuple[bytes, bytes | None]]) -> None: ...

    def fetch_many(self, window_keys: list[bytes]) -> list[bytes | None]: ...


class _ChangeLogging(StoreLayer):
    """The context handling all change-logging layers share."""

    def __init__(self, wrapped: StateStore) -> None:
        super().__init__(wrapped)
        # Bound once: logging runs for every write.
        self._store_name = wrapped.name
        # A task's sender bound to the changelog partition (None in other contexts).
        self._sender: ChangelogSender | None = None
        # (key, value, timestamp) -> the change sent to the store's changelog
        self._send_change: Callable[[bytes, bytes | None, int], None] = self._not_initialized
        # (key, value) -> the change sent with the current record's timestamp
        self._log_current: Callable[[bytes, bytes | None], None] = self._not_initialized_log
        self._log_changes: Callable[[str, RecordBatch], None] = self._not_initialized_batch

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        # A task's context hands out a sender bound to the changelog partition: no lookups per write.
        change_logger = getattr(context, "change_logger", None)
        timestamped = bool(getattr(root, "timestamped", False))
        if change_logger is not None:
            sender = self._sender = change_logger(self._store_name)
            if timestamped:
                sender.split_timestamps()
            self._send_change, self._log_current = sender, sender.log
            self._log_changes = context.log_changes if not timestamped else self._send_batch
        else:
            self._sender = None
            log_change: Callable[[str, bytes, bytes | None, int], None] = context.log_change
            name = self._store_name
            current_timestamp = context.current_timestamp
            if timestamped:
                log_change = _split_timestamps(log_change)
            self._send_change = lambda key, value, timestamp: log_change(name, key, value, timestamp)
            self._log_current = lambda key, value: log_change(name, key, value, current_timestamp())
            self._log_changes = context.log_changes if not timestamped else self._send_each
        self.wrapped.init(context, root)

    def _send_batch(self, store_name: str, changes: RecordBatch) -> None:
        assert self._sender is not None
        self._sender.send_batch(changes)

    def _send_each(self, store_name: str, changes: RecordBatch) -> None:
        for i in range(len(changes)):
            self._send_change(changes.key(i), changes.value(i), changes.timestamp(i))  # type: ignore[arg-type]

    def _log(self, key: bytes, value: bytes | None, timestamp: int | None) -> None:
        if timestamp is None:
            self._log_current(key, value)
        else:
            self._send_change(key, value, timestamp)

    def _logged_put(self) -> LoggedPut:
        """This layer's logged put over the store below: the sender's in C where there is one."""
        return LoggedPut(self.wrapped, self._sender or self._log_current)

    def _not_initialized(self, key: bytes, value: bytes | None, timestamp: int) -> None:
        raise ProcessorStateException(
            f"Store {self._store_name} was written before init(); a store is usable only once its task "
            "opened it."
        )

    def _not_initialized_log(self, key: bytes, value: bytes | None) -> None:
        self._not_initialized(key, value, 0)

    def _not_initialized_batch(self, store_name: str, changes: RecordBatch) -> None:
        self._not_initialized(b"", None, 0)


class ChangeLoggingKeyValueStore(_ChangeLogging, KeyValueStore[bytes, bytes]):
    """Logs every put and delete of a key-value store of bytes. ``logged_put`` is its ``put`` in C
    (``LoggedPut``), which the metered layer's per-record accessor calls without a Python frame."""

    wrapped: KeyValueStore[bytes, bytes]

    def __init__(self, wrapped: KeyValueStore[bytes, bytes]) -> None:
        super().__init__(wrapped)
        self.logged_put = self._logged_put()
        # The timestamp of the put in progress, when it has its own (a cache flushing an entry).
        self._put_timestamp: int | None = None

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        super().init(context, root)
        self.logged_put = self._logged_put()
        if isinstance(self.wrapped, MemoryLRUCache):
            # An entry an LRU store drops to make room is gone from the store, so it goes from the
            # changelog too: a tombstone, with the timestamp of the put that made it drop.
            self.wrapped.when_eldest_removed(self._log_removal)

    def _log_removal(self, key: bytes, value: bytes) -> None:
        self._log(key, None, self._put_timestamp)

    def put_timestamped(self, key: bytes, value: bytes | None, timestamp: int | None) -> None:
        """Put, logging the change with an explicit timestamp (a cache flushing an entry)."""
        self._put_timestamp = timestamp
        try:
            self.wrapped.put(key, value)
        finally:
            self._put_timestamp = None
        self._log(key, value, timestamp)

    def get(self, key: bytes) -> bytes | None:
        return self.wrapped.get(key)

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        return self.wrapped.get_many(keys)

    def put(self, key: bytes, value: bytes | None) -> None:
        self.logged_put(key, value)

    def write_changes(self, changes: RecordBatch) -> None:
        """Put a batch of changes (key, value or None to delete, timestamp) and log them, each
        with its own timestamp, as a put per change would: the batch goes to the changelog as it is."""
        if isinstance(self.wrapped, MemoryLRUCache):
            # Each put may drop an entry, whose tombstone goes between the changes around it.
            for i in range(len(changes)):
                self.put_timestamped(changes.key(i), changes.value(i), changes.timestamp(i))  # type: ignore[arg-type]
            return
        self.wrapped.put_all(list(change_pairs(changes)))
        self._log_changes(self._store_name, changes)

    def put_if_absent(self, key: bytes, value: bytes) -> bytes | None:
        previous = self.wrapped.put_if_absent(key, value)
        if previous is None:
            self._log(key, value, None)
        return previous

    def put_all(self, entries: list[tuple[bytes, bytes | None]]) -> None:
        self.wrapped.put_all(entries)
        for key, value in entries:
            self._log(key, value, None)

    def delete(self, key: bytes) -> bytes | None:
        old = self.wrapped.delete(key)
        self._log(key, None, None)
        return old

    def range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        return self.wrapped.range(from_key, to_key)

    def reverse_range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        return self.wrapped.reverse_range(from_key, to_key)

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return self.wrapped.all()

    def prefix_scan(self, prefix: Any) -> Iterator[tuple[bytes, bytes]]:
        return self.wrapped.prefix_scan(prefix)

    def approximate_num_entries(self) -> int:
        return self.wrapped.approximate_num_entries()


class ChangeLoggingWindowStore(_ChangeLogging, WindowLayer, WindowStore[bytes, bytes]):
    """Logs every put of a window store of bytes, keyed by (key, window start, sequence number).

    ``logged_points``, in a task over a store that keeps one value per window in C
    (``UniqueWindowPoints``), is its ``put`` and ``fetch`` in C (``LoggedWindowPoints``), which
    the metered layer's per-record accessor calls without a Python frame; None otherwise."""

    def __init__(self, wrapped: WindowStore[bytes, bytes]) -> None:
        super().__init__(wrapped)
        self._sequenced: SequencedWindowStore = wrapped  # type: ignore[assignment]
        self.logged_points: LoggedWindowPoints | None = None

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        super().init(context, root)
        points = getattr(self.wrapped, "points", None)
        self.logged_points = None
        if isinstance(points, UniqueWindowPoints) and self._sender is not None:
            self.logged_points = LoggedWindowPoints(points, self._sender)

    def put(self, key: bytes, value: bytes | None, window_start: int) -> None:
        points = self.logged_points
        if points is not None:
            points.put(key, value, window_start)
            return
        self.put_timestamped(key, value, window_start, None)

    def put_timestamped(
        self, key: bytes, value: bytes | None, window_start: int, timestamp: int | None
    ) -> None:
        """Put, logging the change with an explicit timestamp (a cache flushing an entry)."""
        inner = self._sequenced
        if inner.retain_duplicates:
            if value is None:
                return  # duplicates are never deleted, so there is nothing to log either
            seq = inner.next_seq()
            inner.put_with_seq(key, value, window_start, seq)
        else:
            seq = 0
            self.wrapped.put(key, value, window_start)
        self._log(changelog_key(key, window_start, seq), value, timestamp)

    def write_changes(self, changes: RecordBatch) -> None:
        """Put a batch of changes keyed as the changelog is (record key, window start, sequence
        number 0: a store that does not retain duplicates) and log them, each with its own
        timestamp, as a put per change would: the batch goes to the changelog as it is."""
        if self._sequenced.retain_duplicates:
            raise ProcessorStateException(
                f"Store {self._store_name} retains duplicates, so a batch of changes cannot name their "
                "sequence numbers in advance; write them one by one with put()."
            )
        self._sequenced.put_changes(change_pairs(changes))
        self._log_changes(self._store_name, changes)

    def fetch(self, key: bytes, window_start: int) -> bytes | None:
        return self.wrapped.fetch(key, window_start)

    def fetch_many(self, window_keys: list[bytes]) -> list[bytes | None]:
        """``fetch`` of many windows, each named by its ``window_key`` (record key, window start)."""
        return self._sequenced.fetch_many(window_keys)

    def fetch_range(self, key: bytes, time_from: int, time_to: int) -> Iterator[tuple[int, bytes]]:
        return self.wrapped.fetch_range(key, time_from, time_to)

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        return self.wrapped.fetch_all(time_from, time_to)

    def all(self) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        return self.wrapped.all()


class ChangeLoggingSessionStore(_ChangeLogging, SessionLayer, SessionStore[bytes, bytes]):
    """Logs every put and remove of a session store of bytes, keyed by ``session_key``."""

    def put(self, session: WindowedKey[bytes], aggregate: bytes | None) -> None:
        self.put_timestamped(session, aggregate, None)

    def put_timestamped(
        self, session: WindowedKey[bytes], aggregate: bytes | None, timestamp: int | None
    ) -> None:
        """Put, logging the change with an explicit timestamp (a cache flushing an entry)."""
        self.wrapped.put(session, aggregate)
        self._log(session_key(session.key, session.start, session.end), aggregate, timestamp)

    def remove(self, session: WindowedKey[bytes]) -> None:
        self.put_timestamped(session, None, None)

    def fetch_session(self, key: bytes, session_start: int, session_end: int) -> bytes | None:
        return self.wrapped.fetch_session(key, session_start, session_end)

    def find_sessions(
        self, key: bytes, earliest_session_end: int, latest_session_start: int
    ) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        return self.wrapped.find_sessions(key, earliest_session_end, latest_session_start)

    def find_sessions_by_end(
        self, earliest_session_end: int, latest_session_end: int
    ) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        return self.wrapped.find_sessions_by_end(earliest_session_end, latest_session_end)

    def fetch(self, key: bytes) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        return self.wrapped.fetch(key)
