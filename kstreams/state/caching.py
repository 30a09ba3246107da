"""Caching layers: writes collect in the stream thread's record cache and reach the store below
(and, through it, the changelog) only when the cache flushes: at commit, or when the cache evicts a
dirty entry. Repeated updates of a key between flushes thus cost one store write, one changelog
record and one downstream update.

The cache is a namespace ``"<task id>-<store>"`` of the compiled ``RecordCache`` that belongs to the
thread processing the task now; the runtime moves the namespace when the task moves to another
thread, so the layer looks the cache up on every access and adds the namespace when it is missing.
Without a cache (``context.record_cache()`` is None) the layer passes every call through, and
a write reaches the flush listener at once, as with a cache of size 0.

A flush writes each dirty entry to the store below and, when a flush listener is set, calls it with
(key, new value, old value, timestamp, headers), the old value read from the store below before the
write. Like Kafka's cache entries, which keep the record context of their last write, the layer
remembers the headers of the record that last wrote each dirty entry (``header_notes``, by cache key;
only entries written by a record with headers are in it; a compiled batch notes them as the batch
stores them, undecoded) and hands a copy to the listener: the update forwarded downstream carries
them. While any are held, a task runs compiled only the segments that keep the notes current.
Reads see the newest write: the cache first, then the store below. Range reads merge the cache's
entries (the cache lists a namespace's keys in byte order) with the store's, the cache winning.

Interactive queries read through these layers from other threads; they must not add entries to the
cache (an addition can evict and so flush from the wrong thread), so they read inside
``no_cache_fill()``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from kstreams._native.record_batch import copy_headers
from kstreams._native.store_access import CachedKeyValueAccess, CachedWindowAccess
from kstreams.errors import ProcessorStateException
from kstreams.state.changelogging import (
    ChangeLoggingKeyValueStore,
    ChangeLoggingSessionStore,
    ChangeLoggingWindowStore,
)
from kstreams.state.layer import SessionLayer, StoreLayer, WindowLayer
from kstreams.state.store import (
    KeyValueStore,
    SessionStore,
    StateStore,
    StateStoreContext,
    WindowedKey,
    WindowStore,
)
from kstreams.state.window_key_schema import (
    MAX_LONG,
    MIN_LONG,
    SESSION_SUFFIX,
    TIMESTAMP_SIZE,
    from_session_key,
    key_and_start,
    session_key,
    window_key,
)

__all__ = ["CachingKeyValueStore", "CachingSessionStore", "CachingWindowStore", "no_cache_fill"]

logger = logging.getLogger(__name__)

# A thread reading for an interactive query sets this so cache misses do not fill the cache.
_query_reads = threading.local()

CacheEntries = list[tuple[bytes, bytes | None, int]]


@contextlib.contextmanager
def no_cache_fill() -> Iterator[None]:
    """Within this block, reads on this thread never add store values to a record cache."""
    previous = getattr(_query_reads, "active", False)
    _query_reads.active = True
    try:
        yield
    finally:
        _query_reads.active = previous


def _filling_allowed() -> bool:
    return not getattr(_query_reads, "active", False)


class _Caching(StoreLayer):
    """Namespace and cache lookup that all caching layers share."""

    # Each layer defines how a flushed entry reaches its store.
    _on_flush: Callable[[CacheEntries], None]
    # The C accessor of the metered layer's per-record read and write over this layer, if any.
    _ACCESS: ClassVar[type | None] = None

    def __init__(self, wrapped: StateStore) -> None:
        super().__init__(wrapped)
        self._context: StateStoreContext | None = None
        self._namespace = ""
        # The cache last seen holding the namespace. A task's namespaces move with the task into
        # the cache of the thread that runs it, so while that thread's cache is the current one
        # the namespace is known to be there and needs no lookup per read and write.
        self._holding: Any = None
        self._listener: Callable[..., None] | None = None
        # cache key -> headers of the record that last wrote the (dirty) entry, when it had any
        self.header_notes: dict[bytes, Any] = {}

    @property
    def namespace(self) -> str:
        """The store's namespace in the record cache: ``"<task id>-<store>"``."""
        return self._namespace

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._context = context
        self._namespace = f"{context.task_id}-{self.wrapped.name}"
        self._holding = None
        self.header_notes.clear()
        track = getattr(context, "track_header_notes", None)
        if track is not None:
            track(self.header_notes)
        self.wrapped.init(context, root)

    def set_flush_listener(self, listener: Callable[..., None] | None) -> bool:
        """Entries this layer flushes go to listener(key, new, old, timestamp, headers) as bytes
        (the metered layer above turns them typed)."""
        self._listener = listener
        return True

    def record_access(self, store: Any, string_keys: bool, bytes_keys: bool, stamped_longs: bool) -> Any:
        """An accessor doing the per-record read and write of ``store`` (the metered layer right
        above) through this layer's cache in one C call each on the common path (``_ACCESS``, see
        ``kstreams._native.store_access``); None for a store not open in a task (its context
        holds no task's cache) or a layer without one."""
        context = self._context
        holder = getattr(context, "cache_holder", None)
        if self._ACCESS is None or holder is None or not self._namespace:
            return None
        namespace = self._namespace
        return self._ACCESS(store, self, holder, context, namespace, string_keys, bytes_keys, stamped_longs)

    def current_cache(self) -> Any:
        """The current thread's cache with this store's namespace in it, or None without caching."""
        context = self._context
        if context is None:
            raise ProcessorStateException(
                f"Store {self.wrapped.name} was used before init(); a store is usable only once its "
                "task opened it."
            )
        cache = context.record_cache()
        if cache is not None and cache is not self._holding:
            if not cache.has_namespace(self._namespace):
                cache.add_namespace(self._namespace, self._on_flush)
            self._holding = cache
        return cache

    def _timestamp(self) -> int:
        context = self._context
        return 0 if context is None else context.current_timestamp()

    def note_headers(self, cache_key: bytes, headers: Any) -> None:
        """Remember ``headers`` as those of the record that last wrote the entry at ``cache_key``
        (forget any remembered when it had none)."""
        if headers:
            self.header_notes[cache_key] = headers
        elif self.header_notes:
            self.header_notes.pop(cache_key, None)

    def _put(self, cache_key: bytes, value: bytes | None) -> None:
        """Write an entry into the cache (None: a tombstone) stamped with the current timestamp."""
        record_context = getattr(self._context, "record_context", None)
        self.note_headers(cache_key, getattr(record_context, "headers", None))
        cache = self.current_cache()
        if cache is None:
            # No cache: write through at once, still telling the listener (processors rely on it).
            self._on_flush([(cache_key, value, self._timestamp())])
        else:
            cache.put(self._namespace, cache_key, value, self._timestamp())

    def _cached(self, cache_key: bytes) -> tuple[bytes | None, ...] | None:
        """The cache's entry for ``cache_key`` (its value first, None for a tombstone), or None on a
        miss or without a cache. Never fills the cache."""
        cache = self.current_cache()
        if cache is None:
            return None
        return cache.get(self._namespace, cache_key)  # type: ignore[no-any-return]

    def flush(self) -> None:
        cache = self.current_cache() if self._context is not None else None
        if cache is not None:
            cache.flush(self._namespace)
        self.wrapped.flush()

    def close(self) -> None:
        try:
            if self._context is not None:
                cache = self._context.record_cache()
                if cache is not None and cache.has_namespace(self._namespace):
                    cache.flush(self._namespace)
                    cache.remove_namespace(self._namespace)
        finally:
            self._holding = None
            self.wrapped.close()

    def _cached_between(
        self, cache: Any, lo: bytes | None, hi: bytes | None, key_size: int = -1
    ) -> list[tuple[bytes, bytes | None]]:
        """A snapshot of the cached (key, value-or-tombstone) pairs with lo <= key <= hi, ascending,
        of keys ``key_size`` long only when it is given (every entry in the range counts as a hit
        and becomes most recently used, as a get would)."""
        return cache.range_items(self._namespace, lo, hi, key_size)  # type: ignore[no-any-return]


def _merge(
    cached: list[tuple[bytes, bytes | None]], stored: Iterator[tuple[bytes, bytes]], reverse: bool
) -> Iterator[tuple[bytes, bytes]]:
    """Merge two key-ordered streams; a cached entry replaces the stored one, a cached None hides it."""
    if reverse:
        cached.reverse()
    position = 0
    for key, value in stored:
        while position < len(cached):
            cached_key, cached_value = cached[position]
            if (cached_key > key) if reverse else (cached_key < key):
                position += 1
                if cached_value is not None:
                    yield cached_key, cached_value
                continue
            break
        if position < len(cached) and cached[position][0] == key:
            cached_value = cached[position][1]
            position += 1
            if cached_value is not None:
                yield key, cached_value
            continue
        yield key, value
    for cached_key, cached_value in cached[position:]:
        if cached_value is not None:
            yield cached_key, cached_value


class CachingKeyValueStore(_Caching, KeyValueStore[bytes, bytes]):
    """A record-cache layer over a key-value store of bytes."""

    wrapped: KeyValueStore[bytes, bytes]
    _ACCESS = CachedKeyValueAccess

    def __init__(self, wrapped: KeyValueStore[bytes, bytes]) -> None:
        super().__init__(wrapped)
        if isinstance(wrapped, ChangeLoggingKeyValueStore):
            self._write: Callable[[bytes, bytes | None, int], None] = wrapped.put_timestamped
        else:
            self._write = lambda key, value, _timestamp: wrapped.put(key, value)

    def _on_flush(self, entries: CacheEntries) -> None:
        listener = self._listener
        wrapped = self.wrapped
        notes = self.header_notes
        for key, value, timestamp in entries:
            # the headers of the entry's last write, forgotten once flushed
            headers = copy_headers(notes.pop(key, None)) if notes else None
            if listener is None:
                self._write(key, value, timestamp)
                continue
            old = wrapped.get(key)
            if value is None and old is None:
                continue  # deleting what never reached the store: nothing to write or forward
            self._write(key, value, timestamp)
            listener(key, value, old, timestamp, headers)

    def get(self, key: bytes) -> bytes | None:
        cache = self.current_cache()
        if cache is None:
            return self.wrapped.get(key)
        hit = cache.get(self._namespace, key)
        if hit is not None:
            return hit[0]  # type: ignore[no-any-return]
        return self.read_through(cache, key)

    def read_through(self, cache: Any, key: bytes) -> bytes | None:
        """A get after ``cache`` missed: the store below's value, then cached (clean) unless an
        interactive query reads."""
        value = self.wrapped.get(key)
        if value is not None and _filling_allowed():
            cache.put_clean(self._namespace, key, value, self._timestamp())
        return value

    def put(self, key: bytes, value: bytes | None) -> None:
        self._put(key, value)

    def put_if_absent(self, key: bytes, value: bytes) -> bytes | None:
        existing = self.get(key)
        if existing is None:
            self.put(key, value)
        return existing

    def put_all(self, entries: list[tuple[bytes, bytes | None]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def delete(self, key: bytes) -> bytes | None:
        old = self.get(key)
        self.put(key, None)
        return old

    def range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        return self._range(from_key, to_key, reverse=False)

    def reverse_range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        return self._range(from_key, to_key, reverse=True)

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return self._range(None, None, reverse=False)

    def _range(self, lo: bytes | None, hi: bytes | None, reverse: bool) -> Iterator[tuple[bytes, bytes]]:
        stored = self.wrapped.reverse_range(lo, hi) if reverse else self.wrapped.range(lo, hi)
        cache = self.current_cache()
        if cache is None or (lo is not None and hi is not None and lo > hi):
            return stored
        return _merge(self._cached_between(cache, lo, hi), stored, reverse)

    def prefix_scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        stored = self.wrapped.prefix_scan(prefix)
        cache = self.current_cache()
        if cache is None:
            return stored
        return _merge(cache.prefix_items(self._namespace, prefix), stored, reverse=False)

    def approximate_num_entries(self) -> int:
        return self.wrapped.approximate_num_entries()


class CachingWindowStore(_Caching, WindowLayer, WindowStore[bytes, bytes]):
    """A record-cache layer over a window store of bytes; cache keys are ``window_key(key, start)``.

    Flushed entries reach the listener as (WindowedKey[bytes], new, old, timestamp).
    """

    _ACCESS = CachedWindowAccess

    def __init__(self, wrapped: WindowStore[bytes, bytes]) -> None:
        super().__init__(wrapped)
        if isinstance(wrapped, ChangeLoggingWindowStore):
            self._write: Callable[[bytes, bytes | None, int, int], None] = wrapped.put_timestamped
        else:
            self._write = lambda key, value, start, _timestamp: wrapped.put(key, value, start)

    def _on_flush(self, entries: CacheEntries) -> None:
        listener = self._listener
        wrapped = self.wrapped
        notes = self.header_notes
        size = self.wrapped.window_size_ms
        for cache_key, value, timestamp in entries:
            key, start = key_and_start(cache_key)
            headers = copy_headers(notes.pop(cache_key, None)) if notes else None
            if listener is None:
                self._write(key, value, start, timestamp)
                continue
            old = wrapped.fetch(key, start)
            if value is None and old is None:
                continue
            self._write(key, value, start, timestamp)
            listener(WindowedKey(key, start, start + size), value, old, timestamp, headers)

    def put(self, key: bytes, value: bytes | None, window_start: int) -> None:
        self._put(window_key(key, window_start), value)

    def fetch(self, key: bytes, window_start: int) -> bytes | None:
        hit = self._cached(window_key(key, window_start))
        if hit is not None:
            return hit[0]
        return self.wrapped.fetch(key, window_start)

    def fetch_range(self, key: bytes, time_from: int, time_to: int) -> Iterator[tuple[int, bytes]]:
        stored = self.wrapped.fetch_range(key, time_from, time_to)
        cache = self.current_cache()
        # Window starts are never negative; a negative bound would sort above the positive ones.
        time_from = max(time_from, 0)
        if cache is None or time_from > time_to:
            return stored
        # A longer key with the same leading bytes is another key: only this key's length counts.
        cached = self._cached_between(
            cache, window_key(key, time_from), window_key(key, time_to), len(key) + TIMESTAMP_SIZE
        )
        stored_keyed = ((window_key(key, start), value) for start, value in stored)
        return (
            (key_and_start(cache_key)[1], value)
            for cache_key, value in _merge(cached, stored_keyed, reverse=False)
        )

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        """Windows with time_from <= start <= time_to, by window start then key bytes."""
        stored = self.wrapped.fetch_all(time_from, time_to)
        cache = self.current_cache()
        if cache is None:
            return stored
        merged: dict[tuple[int, bytes], bytes | None] = {(w.start, w.key): value for w, value in stored}
        for cache_key, value in self._cached_between(cache, None, None):
            key, start = key_and_start(cache_key)
            if time_from <= start <= time_to:
                merged[(start, key)] = value
        size = self.wrapped.window_size_ms
        return (
            (WindowedKey(key, start, start + size), value)
            for (start, key), value in sorted(merged.items())
            if value is not None
        )

    def all(self) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        return self.fetch_all(MIN_LONG, MAX_LONG)


class CachingSessionStore(_Caching, SessionLayer, SessionStore[bytes, bytes]):
    """A record-cache layer over a session store of bytes; cache keys are ``session_key``s.

    Flushed entries reach the listener as (WindowedKey[bytes] session, new, old, timestamp).
    """

    def __init__(self, wrapped: SessionStore[bytes, bytes]) -> None:
        super().__init__(wrapped)
        if isinstance(wrapped, ChangeLoggingSessionStore):
            self._write: Callable[[WindowedKey[bytes], bytes | None, int], None] = wrapped.put_timestamped
        else:
            self._write = lambda session, value, _timestamp: wrapped.put(session, value)

    def _on_flush(self, entries: CacheEntries) -> None:
        listener = self._listener
        wrapped = self.wrapped
        notes = self.header_notes
        for cache_key, value, timestamp in entries:
            key, start, end = from_session_key(cache_key)
            session = WindowedKey(key, start, end)
            headers = copy_headers(notes.pop(cache_key, None)) if notes else None
            if listener is None:
                self._write(session, value, timestamp)
                continue
            old = wrapped.fetch_session(key, start, end)
            if value is None and old is None:
                continue
            self._write(session, value, timestamp)
            listener(session, value, old, timestamp, headers)

    def put(self, session: WindowedKey[bytes], aggregate: bytes | None) -> None:
        self._put(session_key(session.key, session.start, session.end), aggregate)

    def remove(self, session: WindowedKey[bytes]) -> None:
        self.put(session, None)

    def fetch_session(self, key: bytes, session_start: int, session_end: int) -> bytes | None:
        hit = self._cached(session_key(key, session_start, session_end))
        if hit is not None:
            return hit[0]
        return self.wrapped.fetch_session(key, session_start, session_end)

    def find_sessions(
        self, key: bytes, earliest_session_end: int, latest_session_start: int
    ) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        stored = self.wrapped.find_sessions(key, earliest_session_end, latest_session_start)
        cache = self.current_cache()
        if cache is None:
            return stored
        # Session times are never negative; a negative bound would sort above the positive ones.
        lo = session_key(key, 0, max(earliest_session_end, 0))
        hi = session_key(key, MAX_LONG, MAX_LONG)
        # A longer key with the same leading bytes is another key: only this key's length counts.
        cached = [
            (cache_key, value)
            for cache_key, value in self._cached_between(cache, lo, hi, len(key) + SESSION_SUFFIX)
            if from_session_key(cache_key)[1] <= latest_session_start
        ]
        stored_keyed = ((session_key(s.key, s.start, s.end), value) for s, value in stored)
        return (
            (WindowedKey(*from_session_key(cache_key)), value)
            for cache_key, value in _merge(cached, stored_keyed, reverse=False)
        )

    def fetch(self, key: bytes) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        return self.find_sessions(key, 0, MAX_LONG)

    def find_sessions_by_end(
        self, earliest_session_end: int, latest_session_end: int
    ) -> Iterator[tuple[WindowedKey[bytes], bytes]]:
        """Every key's sessions with an end in range, by end, then key bytes, then start."""
        stored = self.wrapped.find_sessions_by_end(earliest_session_end, latest_session_end)
        cache = self.current_cache()
        if cache is None:
            return stored
        # Cache keys sort by record key first, so the cached sessions in range are found by a scan
        # of the namespace (as fetch_all of the window layer does), then merged by end.
        merged: dict[tuple[int, bytes, int], bytes | None] = {
            (session.end, session.key, session.start): value for session, value in stored
        }
        for cache_key, value in self._cached_between(cache, None, None):
            key, start, end = from_session_key(cache_key)
            if earliest_session_end <= end <= latest_session_end:
                merged[(end, key, start)] = value
        return (
            (WindowedKey(key, start, end), value)
            for (end, key, start), value in sorted(merged.items())
            if value is not None
        )
