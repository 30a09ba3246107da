"""Metered layers: the outermost, typed face of a store. They turn keys and values into bytes with
the store's serdes (below them every layer holds bytes) and back, and hand typed entries to a cache
flush listener.

Serdes see the store's changelog topic name, ``<application.id>-<store>-changelog``, as Kafka's do.
A serde left None is filled in at init with the application's ``default.key.serde`` /
``default.value.serde`` (or earlier with ``with_default_serdes``); with neither, keys and values are
bytes as they are.

Every write (and flush and close) holds ``query_lock``, and interactive-query views hold it while
they read, so a query never sees a store in the middle of a change, whichever thread writes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

from kstreams.errors import SerializationException
from kstreams.serdes import serde_from_config
from kstreams.state.layer import SessionLayer, StoreLayer, WindowLayer
from kstreams.state.store import (
    FlushListener,
    KeyValueStore,
    SessionStore,
    StateStore,
    StateStoreContext,
    WindowedKey,
    WindowStore,
)

__all__ = ["MeteredKeyValueStore", "MeteredSessionStore", "MeteredWindowStore"]

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")


class _Metered(StoreLayer, Generic[K, V]):
    """Serdes and locking shared by all metered layers."""

    def __init__(self, wrapped: StateStore, key_serde: Any = None, value_serde: Any = None) -> None:
        super().__init__(wrapped)
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.query_lock = threading.RLock()
        self._topic: str | None = None

    @property
    def changelog_topic(self) -> str | None:
        """The topic name the serdes see (known after init)."""
        return self._topic

    def with_default_serdes(self, key_serde: Any, value_serde: Any) -> None:
        """Use these serdes where the store was given none (the application's default serdes)."""
        if self.key_serde is None:
            self.key_serde = key_serde
        if self.value_serde is None:
            self.value_serde = value_serde

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._topic = f"{context.application_id}-{self.wrapped.name}-changelog"
        if self.key_serde is None or self.value_serde is None:
            # As Kafka does: a store given no serde uses the application's default serde, if set.
            configs = context.app_configs
            if isinstance(configs, Mapping):
                self.with_default_serdes(
                    serde_from_config(configs, "default.key.serde"),
                    serde_from_config(configs, "default.value.serde"),
                )
        self.wrapped.init(context, root)

    def flush(self) -> None:
        with self.query_lock:
            self.wrapped.flush()

    def close(self) -> None:
        with self.query_lock:
            self.wrapped.close()

    def _key_bytes(self, key: K) -> bytes:
        serde = self.key_serde
        data = key if serde is None else serde.serialize(self._topic, key)
        if isinstance(data, bytes):
            return data
        if isinstance(data, (bytearray, memoryview)):
            return bytes(data)
        raise SerializationException(
            f"Store {self.wrapped.name}: the key {key!r} became {type(data).__name__}, not bytes. Give the "
            "store a key serde (Materialized / Stores builders) or set default.key.serde."
        )

    def _value_bytes(self, value: V | None) -> bytes | None:
        if value is None:
            return None
        serde = self.value_serde
        data = value if serde is None else serde.serialize(self._topic, value)
        if data is None or isinstance(data, bytes):
            return data
        if isinstance(data, (bytearray, memoryview)):
            return bytes(data)
        raise SerializationException(
            f"Store {self.wrapped.name}: the value {value!r} became {type(data).__name__}, not bytes. Give "
            "the store a value serde (Materialized / Stores builders) or set default.value.serde."
        )

    def _key(self, data: bytes) -> K:
        serde = self.key_serde
        return data if serde is None else serde.deserialize(self._topic, data)  # type: ignore[return-value]

    def _value(self, data: bytes | None) -> V | None:
        if data is None:
            return None
        serde = self.value_serde
        return data if serde is None else serde.deserialize(self._topic, data)  # type: ignore[return-value]

    def _windowed(self, windowed: WindowedKey[bytes]) -> WindowedKey[K]:
        return WindowedKey(self._key(windowed.key), windowed.start, windowed.end)

    def _set_windowed_flush_listener(self, listener: FlushListener) -> bool:
        """Hand the listener typed windows (or sessions) and values of every entry the cache below
        flushes; True when there is such a cache."""

        def forward(
            windowed: WindowedKey[bytes], new: bytes | None, old: bytes | None, timestamp: int
        ) -> None:
            listener(self._windowed(windowed), self._value(new), self._value(old), timestamp)

        return self.wrapped.set_flush_listener(forward)


class MeteredKeyValueStore(_Metered[K, V], KeyValueStore[K, V]):
    """The typed key-value store processors and queries use."""

    wrapped: KeyValueStore[bytes, bytes]

    def set_flush_listener(self, listener: FlushListener) -> bool:
        def forward(key: bytes, new: bytes | None, old: bytes | None, timestamp: int) -> None:
            listener(self._key(key), self._value(new), self._value(old), timestamp)

        return self.wrapped.set_flush_listener(forward)

    def get(self, key: K) -> V | None:
        return self._value(self.wrapped.get(self._key_bytes(key)))

    def put(self, key: K, value: V | None) -> None:
        key_bytes = self._key_bytes(key)
        value_bytes = self._value_bytes(value)
        with self.query_lock:
            self.wrapped.put(key_bytes, value_bytes)

    def put_if_absent(self, key: K, value: V) -> V | None:
        key_bytes = self._key_bytes(key)
        value_bytes = self._value_bytes(value)
        with self.query_lock:
            previous = self.wrapped.put_if_absent(key_bytes, value_bytes)  # type: ignore[arg-type]
        return self._value(previous)

    def put_all(self, entries: list[tuple[K, V | None]]) -> None:
        serialized = [(self._key_bytes(key), self._value_bytes(value)) for key, value in entries]
        with self.query_lock:
            self.wrapped.put_all(serialized)

    def delete(self, key: K) -> V | None:
        key_bytes = self._key_bytes(key)
        with self.query_lock:
            old = self.wrapped.delete(key_bytes)
        return self._value(old)

    def range(self, from_key: K | None, to_key: K | None) -> Iterator[tuple[K, V]]:
        return self._typed(self.wrapped.range(self._bound(from_key), self._bound(to_key)))

    def reverse_range(self, from_key: K | None, to_key: K | None) -> Iterator[tuple[K, V]]:
        return self._typed(self.wrapped.reverse_range(self._bound(from_key), self._bound(to_key)))

    def all(self) -> Iterator[tuple[K, V]]:
        return self._typed(self.wrapped.all())

    def prefix_scan(self, prefix: Any, prefix_serializer: Any = None) -> Iterator[tuple[K, V]]:
        """Entries whose serialized key starts with the serialized prefix. The prefix is serialized
        with ``prefix_serializer`` (a Serde, or a callable returning bytes) when given, else with the
        key serde; bytes are used as they are."""
        if isinstance(prefix, bytes):
            prefix_bytes = prefix
        elif prefix_serializer is None:
            prefix_bytes = self._key_bytes(prefix)
        elif hasattr(prefix_serializer, "serialize"):
            prefix_bytes = prefix_serializer.serialize(self._topic, prefix)
        else:
            prefix_bytes = prefix_serializer(prefix)
        return self._typed(self.wrapped.prefix_scan(prefix_bytes))

    def approximate_num_entries(self) -> int:
        return self.wrapped.approximate_num_entries()

    def _bound(self, key: K | None) -> bytes | None:
        return None if key is None else self._key_bytes(key)

    def _typed(self, entries: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[K, V]]:
        key, value = self._key, self._value
        for key_bytes, value_bytes in entries:
            yield key(key_bytes), value(value_bytes)  # type: ignore[misc]


class MeteredWindowStore(_Metered[K, V], WindowLayer, WindowStore[K, V]):
    """The typed window store processors and queries use."""

    def set_flush_listener(self, listener: FlushListener) -> bool:
        return self._set_windowed_flush_listener(listener)

    def put(self, key: K, value: V | None, window_start: int) -> None:
        key_bytes = self._key_bytes(key)
        value_bytes = self._value_bytes(value)
        with self.query_lock:
            self.wrapped.put(key_bytes, value_bytes, window_start)

    def fetch(self, key: K, window_start: int) -> V | None:
        return self._value(self.wrapped.fetch(self._key_bytes(key), window_start))

    def fetch_range(self, key: K, time_from: int, time_to: int) -> Iterator[tuple[int, V]]:
        value = self._value
        for start, value_bytes in self.wrapped.fetch_range(self._key_bytes(key), time_from, time_to):
            yield start, value(value_bytes)  # type: ignore[misc]

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[tuple[WindowedKey[K], V]]:
        return self._typed(self.wrapped.fetch_all(time_from, time_to))

    def all(self) -> Iterator[tuple[WindowedKey[K], V]]:
        return self._typed(self.wrapped.all())

    def _typed(
        self, entries: Iterator[tuple[WindowedKey[bytes], bytes]]
    ) -> Iterator[tuple[WindowedKey[K], V]]:
        windowed, value = self._windowed, self._value
        for window, value_bytes in entries:
            yield windowed(window), value(value_bytes)  # type: ignore[misc]


class MeteredSessionStore(_Metered[K, V], SessionLayer, SessionStore[K, V]):
    """The typed session store processors and queries use; sessions are ``WindowedKey[K]``."""

    def set_flush_listener(self, listener: FlushListener) -> bool:
        return self._set_windowed_flush_listener(listener)

    def _session_bytes(self, session: WindowedKey[K]) -> WindowedKey[bytes]:
        return WindowedKey(self._key_bytes(session.key), session.start, session.end)

    def put(self, session: WindowedKey[K], aggregate: V | None) -> None:
        session_bytes = self._session_bytes(session)
        value_bytes = self._value_bytes(aggregate)
        with self.query_lock:
            self.wrapped.put(session_bytes, value_bytes)

    def remove(self, session: WindowedKey[K]) -> None:
        session_bytes = self._session_bytes(session)
        with self.query_lock:
            self.wrapped.remove(session_bytes)

    def fetch_session(self, key: K, session_start: int, session_end: int) -> V | None:
        return self._value(self.wrapped.fetch_session(self._key_bytes(key), session_start, session_end))

    def find_sessions(
        self, key: K, earliest_session_end: int, latest_session_start: int
    ) -> Iterator[tuple[WindowedKey[K], V]]:
        found = self.wrapped.find_sessions(self._key_bytes(key), earliest_session_end, latest_session_start)
        return self._typed_sessions(key, found)

    def fetch(self, key: K) -> Iterator[tuple[WindowedKey[K], V]]:
        return self._typed_sessions(key, self.wrapped.fetch(self._key_bytes(key)))

    def _typed_sessions(
        self, key: K, entries: Iterator[tuple[WindowedKey[bytes], bytes]]
    ) -> Iterator[tuple[WindowedKey[K], V]]:
        value = self._value
        for session, value_bytes in entries:
            yield WindowedKey(key, session.start, session.end), value(value_bytes)  # type: ignore[misc]
