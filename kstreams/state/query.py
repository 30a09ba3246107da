"""Read-only views of stores for interactive queries (``KafkaStreams.store(name)``).

A view covers every local instance of one store (one per task of the store's subtopology on this
client). It asks its ``provider`` for the current instances on each call, so it keeps working as
tasks come and go. Each read takes the store's ``query_lock`` (the metered layer's writes hold it
too) and reads everything it returns before letting go, so results are consistent per store and an
iterator handed to the caller never races with the stream thread. Reads never fill record caches.

Keys are partitioned, so a key lives in at most one instance: point reads return the first hit,
ranges concatenate the instances' results (each in key order), as Kafka's composite stores do.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from kstreams.errors import InvalidStateStoreException
from kstreams.state.caching import no_cache_fill
from kstreams.state.store import KeyValueStore, SessionStore, StateStore, WindowedKey, WindowStore

__all__ = ["ReadOnlyKeyValueStore", "ReadOnlySessionStore", "ReadOnlyWindowStore"]

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")
S = TypeVar("S", bound=StateStore)
T = TypeVar("T")

_MAX_LONG = 2**63 - 1


class _View(Generic[S]):
    """The local instances of one store, and how a read goes over them."""

    def __init__(self, store_name: str, provider: Callable[[], Sequence[S]] | Sequence[S]) -> None:
        self.store_name = store_name
        self._provider = provider

    def _stores(self) -> list[S]:
        stores = list(self._provider() if callable(self._provider) else self._provider)
        for store in stores:
            if not store.is_open:
                raise InvalidStateStoreException(
                    f"State store {self.store_name} is not available anymore and may have been migrated to "
                    "another instance; re-discover its location and query again."
                )
        return stores

    @contextlib.contextmanager
    def _reading(self, store: S) -> Iterator[None]:
        lock = getattr(store, "query_lock", None)
        with lock if lock is not None else contextlib.nullcontext(), no_cache_fill():
            yield

    def _first_value(self, read: Callable[[S], T | None]) -> T | None:
        """The first instance's non-None answer (a key lives in at most one instance)."""
        for store in self._stores():
            with self._reading(store):
                value = read(store)
            if value is not None:
                return value
        return None

    def _first_found(self, read: Callable[[S], Iterator[T]]) -> Iterator[T]:
        """The entries of the first instance that has any for the key, read in full."""
        for store in self._stores():
            with self._reading(store):
                found = list(read(store))
            if found:
                return iter(found)
        return iter(())

    def _collect(self, read: Callable[[S], Iterator[T]]) -> Iterator[T]:
        """Every instance's entries, one instance after the other, read in full."""
        results: list[T] = []
        for store in self._stores():
            with self._reading(store):
                results.extend(read(store))
        return iter(results)


class ReadOnlyKeyValueStore(_View[KeyValueStore[K, V]], Generic[K, V]):
    """Reads of a key-value store: get, range, reverse_range, all, prefix_scan, approximate_num_entries."""

    def get(self, key: K) -> V | None:
        return self._first_value(lambda store: store.get(key))

    def range(self, from_key: K | None, to_key: K | None) -> Iterator[tuple[K, V]]:
        return self._collect(lambda store: store.range(from_key, to_key))

    def reverse_range(self, from_key: K | None, to_key: K | None) -> Iterator[tuple[K, V]]:
        return self._collect(lambda store: store.reverse_range(from_key, to_key))

    def all(self) -> Iterator[tuple[K, V]]:
        return self._collect(lambda store: store.all())

    def prefix_scan(self, prefix: Any, prefix_serializer: Any = None) -> Iterator[tuple[K, V]]:
        def scan(store: KeyValueStore[K, V]) -> Iterator[tuple[K, V]]:
            if prefix_serializer is None:
                return store.prefix_scan(prefix)
            return store.prefix_scan(prefix, prefix_serializer)  # type: ignore[call-arg]

        return self._collect(scan)

    def approximate_num_entries(self) -> int:
        total = 0
        for store in self._stores():
            with self._reading(store):
                total += store.approximate_num_entries()
        return min(total, _MAX_LONG)


class ReadOnlyWindowStore(_View[WindowStore[K, V]], Generic[K, V]):
    """Reads of a window store: fetch, fetch_range, fetch_all, all."""

    def fetch(self, key: K, window_start: int) -> V | None:
        return self._first_value(lambda store: store.fetch(key, window_start))

    def fetch_range(self, key: K, time_from: int, time_to: int) -> Iterator[tuple[int, V]]:
        """One key's windows with time_from <= start <= time_to, ascending by start."""
        return self._first_found(lambda store: store.fetch_range(key, time_from, time_to))

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[tuple[WindowedKey[K], V]]:
        return self._collect(lambda store: store.fetch_all(time_from, time_to))

    def all(self) -> Iterator[tuple[WindowedKey[K], V]]:
        return self._collect(lambda store: store.all())


class ReadOnlySessionStore(_View[SessionStore[K, V]], Generic[K, V]):
    """Reads of a session store: fetch (every session of a key), find_sessions, fetch_session."""

    def fetch(self, key: K) -> Iterator[tuple[WindowedKey[K], V]]:
        return self._first_found(lambda store: store.fetch(key))

    def find_sessions(
        self, key: K, earliest_session_end: int, latest_session_start: int
    ) -> Iterator[tuple[WindowedKey[K], V]]:
        return self._first_found(
            lambda store: store.find_sessions(key, earliest_session_end, latest_session_start)
        )

    def fetch_session(self, key: K, session_start: int, session_end: int) -> V | None:
        return self._first_value(lambda store: store.fetch_session(key, session_start, session_end))

    def find_sessions_by_end(
        self, earliest_session_end: int, latest_session_end: int
    ) -> Iterator[tuple[WindowedKey[K], V]]:
        """Every key's sessions with an end in range, instance after instance (each by end)."""
        return self._collect(
            lambda store: store.find_sessions_by_end(earliest_session_end, latest_session_end)
        )
