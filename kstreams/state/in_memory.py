"""In-memory inner stores: a key-value store and a window store, both holding bytes, and the
time buckets the in-memory window and session stores keep their entries in.

Neither survives a restart: a logged in-memory store is rebuilt from its changelog when its task
starts. Each registers a restore callback at init that writes changelog records straight into it.
Both are used by one thread at a time (see ``store.py``); iterators are lazy but take a snapshot of
the keys they cover when created, so writing to the store while iterating is safe (a value deleted
meanwhile is skipped, a value changed meanwhile is returned as it is now).
"""

from __future__ import annotations

import abc
import bisect
import logging
from collections.abc import Callable, Container, Iterator
from typing import Any

from kstreams.state.inner_windowed import NO_TIMESTAMP, InnerWindowStore
from kstreams.state.store import KeyValueStore, StateStore, StateStoreContext, WindowedKey

__all__ = [
    "InMemoryKeyValueStore",
    "InMemoryLifecycle",
    "InMemoryWindowStore",
    "TimeBuckets",
    "insert_sorted",
    "remove_sorted",
]

logger = logging.getLogger(__name__)


class _SortedKeys:
    """The sorted key set of a dict, kept up to date lazily.

    Keys arriving in ascending order are appended (the common case for time-like keys); others wait
    in ``_added`` until a range query merges them in, which sorts only the newcomers and merges two
    runs. Deleted keys stay in the list until the next merge; readers check membership anyway.
    """

    __slots__ = ("_added", "_keys", "_removed")

    def __init__(self) -> None:
        self._keys: list[bytes] = []
        self._added: list[bytes] = []
        self._removed = 0

    def on_insert(self, key: bytes) -> None:
        keys = self._keys
        if not self._added and (not keys or key > keys[-1]):
            keys.append(key)
        else:
            self._added.append(key)

    def on_remove(self) -> None:
        self._removed += 1

    def clear(self) -> None:
        self._keys.clear()
        self._added.clear()
        self._removed = 0

    def sorted_keys(self, live: Container[bytes]) -> list[bytes]:
        """The sorted list (may still hold keys no longer in ``live``: callers check)."""
        if self._added or self._removed > max(64, len(self._keys) // 2):
            merged = self._keys + self._added
            merged.sort()
            keys: list[bytes] = []
            previous = None
            for key in merged:
                # A key deleted and inserted again sits in both runs: keep it once.
                if key != previous and key in live:
                    keys.append(key)
                previous = key
            self._keys = keys
            self._added = []
            self._removed = 0
        return self._keys


class InMemoryLifecycle(abc.ABC):
    """Opening and closing of an in-memory store: ``init`` registers its restore callback (what
    the store holds comes from its changelog alone), ``flush`` has nothing to write, and ``close``
    drops the contents."""

    _open = False
    restore_batch: Callable[[list[tuple[bytes, bytes | None]]], None]

    @property
    def is_open(self) -> bool:
        return self._open

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        context.register(root, self.restore_batch)
        self._open = True

    def flush(self) -> None:
        """Nothing to write: every write is already in memory."""
        return

    def close(self) -> None:
        self._clear()
        self._open = False

    @abc.abstractmethod
    def _clear(self) -> None:
        """Drop everything the store holds."""


class InMemoryKeyValueStore(InMemoryLifecycle, KeyValueStore[bytes, bytes]):
    """A key-value store in a dict, with ranges in key byte order."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._map: dict[bytes, bytes] = {}
        self._index = _SortedKeys()

    @property
    def name(self) -> str:
        return self._name

    def restore_batch(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Apply changelog records (a None value deletes the key)."""
        for key, value in records:
            self.put(key, value)

    def _clear(self) -> None:
        self._map.clear()
        self._index.clear()

    def get(self, key: bytes) -> bytes | None:
        return self._map.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            if self._map.pop(key, None) is not None:
                self._index.on_remove()
            return
        if key not in self._map:
            self._index.on_insert(key)
        self._map[key] = value

    def put_if_absent(self, key: bytes, value: bytes) -> bytes | None:
        existing = self._map.get(key)
        if existing is None:
            self.put(key, value)
        return existing

    def put_all(self, entries: list[tuple[bytes, bytes | None]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def delete(self, key: bytes) -> bytes | None:
        old = self._map.pop(key, None)
        if old is not None:
            self._index.on_remove()
        return old

    def range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        return self._iterate(self._slice(from_key, to_key))

    def reverse_range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        keys = self._slice(from_key, to_key)
        keys.reverse()
        return self._iterate(keys)

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return self._iterate(self._slice(None, None))

    def prefix_scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        keys = self._index.sorted_keys(self._map)
        lo = bisect.bisect_left(keys, prefix)
        hi = lo
        while hi < len(keys) and keys[hi].startswith(prefix):
            hi += 1
        return self._iterate(keys[lo:hi])

    def approximate_num_entries(self) -> int:
        return len(self._map)

    def _slice(self, from_key: bytes | None, to_key: bytes | None) -> list[bytes]:
        """A snapshot of the keys in [from_key, to_key] (None: unbounded), ascending."""
        if from_key is not None and to_key is not None and from_key > to_key:
            logger.warning(
                "Returning an empty range from store %s: the range's first key is larger than its "
                "last key, which is never valid (check the order of the range's bounds).",
                self._name,
            )
            return []
        keys = self._index.sorted_keys(self._map)
        lo = 0 if from_key is None else bisect.bisect_left(keys, from_key)
        hi = len(keys) if to_key is None else bisect.bisect_right(keys, to_key)
        return keys[lo:hi]

    def _iterate(self, keys: list[bytes]) -> Iterator[tuple[bytes, bytes]]:
        data = self._map
        for key in keys:
            value = data.get(key)
            if value is not None:
                yield key, value


def insert_sorted(values: list[int], value: int) -> None:
    """Insert ``value`` (not in it yet) into the ascending list ``values``; the common case, a
    time later than every other, appends without a search."""
    if not values or value > values[-1]:
        values.append(value)
    else:
        bisect.insort(values, value)


def remove_sorted(values: list[int], value: int) -> None:
    """Remove ``value`` (which is in it) from the ascending list ``values``."""
    del values[bisect.bisect_left(values, value)]


class TimeBuckets:
    """The entries of an in-memory windowed store grouped by a timestamp (a window's start, a
    session's end): one dict per timestamp, the timestamps kept sorted.

    Stream time is the largest timestamp written; as it advances, buckets whose timestamp is at or
    before (stream time - retention) are dropped whole, and writes to them are refused, as Kafka's
    in-memory window and session stores do.
    """

    __slots__ = ("_buckets", "_on_expire", "_times", "observed_stream_time", "retention_ms")

    def __init__(
        self, retention_ms: int, on_expire: Callable[[int, dict[bytes, Any]], None] | None = None
    ) -> None:
        """``on_expire(timestamp, bucket)`` is called for each bucket that expires, as it is dropped."""
        self.retention_ms = retention_ms
        self.observed_stream_time = NO_TIMESTAMP
        self._buckets: dict[int, dict[bytes, Any]] = {}
        self._times: list[int] = []
        self._on_expire = on_expire

    def min_live(self) -> int:
        """The oldest timestamp still within the retention."""
        return self.observed_stream_time - self.retention_ms + 1

    def advance(self, timestamp: int) -> bool:
        """Advance stream time to ``timestamp`` when it is later, drop the buckets that expire, and
        say whether ``timestamp`` itself is still within the retention."""
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp
        min_live = self.min_live()
        times = self._times
        if times and times[0] < min_live:
            cut = bisect.bisect_left(times, min_live)
            on_expire = self._on_expire
            for expired in times[:cut]:
                bucket = self._buckets.pop(expired)
                if on_expire is not None:
                    on_expire(expired, bucket)
            del times[:cut]
        return timestamp >= min_live

    def get(self, timestamp: int) -> dict[bytes, Any] | None:
        return self._buckets.get(timestamp)

    def live(self, timestamp: int) -> dict[bytes, Any] | None:
        """The bucket of ``timestamp`` when it exists and is within the retention."""
        if timestamp < self.min_live():
            return None
        return self._buckets.get(timestamp)

    def create(self, timestamp: int) -> dict[bytes, Any]:
        """A new, empty bucket for ``timestamp`` (which has none)."""
        bucket: dict[bytes, Any] = {}
        self._buckets[timestamp] = bucket
        insert_sorted(self._times, timestamp)
        return bucket

    def remove(self, timestamp: int) -> None:
        """Drop the bucket of ``timestamp`` (once it is empty)."""
        del self._buckets[timestamp]
        remove_sorted(self._times, timestamp)

    def between(self, time_from: int, time_to: int) -> list[int]:
        """A snapshot of the live timestamps in [time_from, time_to], ascending."""
        time_from = max(time_from, self.min_live())
        if time_from > time_to:
            return []
        times = self._times
        return times[bisect.bisect_left(times, time_from) : bisect.bisect_right(times, time_to)]

    def clear(self) -> None:
        self._buckets.clear()
        self._times.clear()


class InMemoryWindowStore(InMemoryLifecycle, InnerWindowStore):
    """A window store: per window start, a dict of record key to value (with duplicates retained,
    of record key to {sequence number: value})."""

    def __init__(self, name: str, retention_ms: int, window_size_ms: int, retain_duplicates: bool) -> None:
        super().__init__(name, retention_ms, window_size_ms, retain_duplicates)
        self._windows = TimeBuckets(retention_ms)

    def _clear(self) -> None:
        self._windows.clear()

    def _write(self, key: bytes, value: bytes | None, start: int, seq: int) -> None:
        windows = self._windows
        if not windows.advance(start):
            logger.debug("Store %s: skipping a write to expired window %d.", self._name, start)
            return
        window = windows.get(start)
        if window is None:
            if value is None:
                return
            window = windows.create(start)
        if self._retain_duplicates:
            values = window.get(key)
            if value is None:
                if values is not None:
                    values.pop(seq, None)
                    if not values:
                        del window[key]
            else:
                if values is None:
                    values = {}
                    window[key] = values
                values[seq] = value
        elif value is None:
            window.pop(key, None)
        else:
            window[key] = value
        if not window:
            windows.remove(start)

    def fetch(self, key: bytes, window_start: int) -> bytes | None:
        window = self._windows.live(window_start)
        if window is None:
            return None
        value = window.get(key)
        if self._retain_duplicates and value is not None:
            # With duplicates, a point read returns the earliest value still held.
            return next(iter(value.values()))
        return value

    def fetch_range(self, key: bytes, time_from: int, time_to: int) -> Iterator[tuple[int, bytes]]:
        windows = self._windows
        for start in windows.between(time_from, time_to):
            window = windows.get(start)
            if window is None:
                continue
            value = window.get(key)
            if value is None:
                continue
            if self._retain_duplicates:
                for seq in sorted(value):
                    yield start, value[seq]
            else:
                yield start, value

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        """Every window with time_from <= start <= time_to, by window start then key bytes."""
        size = self._window_size_ms
        windows = self._windows
        for start in windows.between(time_from, time_to):
            window = windows.get(start)
            if window is None:
                continue
            for key in sorted(window):
                value = window.get(key)
                if value is None:
                    continue
                windowed = WindowedKey(key, start, start + size)
                if self._retain_duplicates:
                    for seq in sorted(value):
                        yield windowed, value[seq]
                else:
                    yield windowed, value
