"""``Stores``: the factory of store suppliers and builders (Kafka's ``Stores``).

A supplier makes the inner store of one kind (in-memory or RocksDB; key-value, window or session)
holding bytes; a builder wraps it, per task, in the layers the topology asks for, outermost first:
metered (typed, serdes) -> caching (when enabled) -> change-logging (when enabled) -> inner.
Logging is on and caching off by default, as in Kafka.

    supplier = Stores.persistent_key_value_store("counts")
    builder = Stores.key_value_store_builder(supplier, Serdes.string(), Serdes.long()).with_caching_enabled()
    store = builder.build()   # a new, unopened MeteredKeyValueStore for one task
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from kstreams.errors import TopologyException
from kstreams.state.caching import CachingKeyValueStore, CachingSessionStore, CachingWindowStore
from kstreams.state.changelogging import (
    ChangeLoggingKeyValueStore,
    ChangeLoggingSessionStore,
    ChangeLoggingWindowStore,
)
from kstreams.state.in_memory import InMemoryKeyValueStore, InMemoryWindowStore
from kstreams.state.in_memory_session import InMemorySessionStore
from kstreams.state.metered import MeteredKeyValueStore, MeteredSessionStore, MeteredWindowStore
from kstreams.state.rocksdb import RocksDBKeyValueStore
from kstreams.state.rocksdb_session import RocksDBSessionStore
from kstreams.state.rocksdb_window import RocksDBWindowStore
from kstreams.state.segments import default_segment_interval
from kstreams.state.store import KeyValueStore, SessionStore, StoreBuilder, WindowStore

__all__ = [
    "KeyValueBytesStoreSupplier",
    "KeyValueStoreBuilder",
    "SessionBytesStoreSupplier",
    "SessionStoreBuilder",
    "Stores",
    "WindowBytesStoreSupplier",
    "WindowStoreBuilder",
]

logger = logging.getLogger(__name__)

Millis = int | timedelta


def _millis(value: Millis, what: str, store: str) -> int:
    ms = int(value.total_seconds() * 1000) if isinstance(value, timedelta) else int(value)
    if ms < 0:
        raise TopologyException(f"Store {store}: {what} must not be negative, got {ms} ms.")
    return ms


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name:
        raise TopologyException(f"A store needs a non-empty name, got {name!r}.")


class KeyValueBytesStoreSupplier:
    """Makes inner key-value stores of bytes: in-memory or RocksDB."""

    def __init__(self, name: str, persistent: bool) -> None:
        _check_name(name)
        self.name = name
        self.persistent = persistent

    @property
    def metrics_scope(self) -> str:
        return "rocksdb" if self.persistent else "in-memory"

    def get(self) -> KeyValueStore[bytes, bytes]:
        """A new inner store."""
        return RocksDBKeyValueStore(self.name) if self.persistent else InMemoryKeyValueStore(self.name)

    def __repr__(self) -> str:
        return f"KeyValueBytesStoreSupplier({self.name!r}, {self.metrics_scope})"


class WindowBytesStoreSupplier:
    """Makes inner window stores of bytes: in-memory or RocksDB (segmented)."""

    def __init__(
        self, name: str, retention_ms: int, window_size_ms: int, retain_duplicates: bool, persistent: bool
    ) -> None:
        _check_name(name)
        if retention_ms < window_size_ms:
            raise TopologyException(
                f"Window store {name}: the retention period ({retention_ms} ms) must be no smaller than its "
                f"window size ({window_size_ms} ms); raise the retention (grace + window size)."
            )
        self.name = name
        self.retention_ms = retention_ms
        self.window_size_ms = window_size_ms
        self.retain_duplicates = retain_duplicates
        self.persistent = persistent

    @property
    def segment_interval_ms(self) -> int:
        return default_segment_interval(self.retention_ms)

    @property
    def metrics_scope(self) -> str:
        return "rocksdb-window" if self.persistent else "in-memory-window"

    def get(self) -> WindowStore[bytes, bytes]:
        """A new inner store."""
        cls = RocksDBWindowStore if self.persistent else InMemoryWindowStore
        return cls(self.name, self.retention_ms, self.window_size_ms, self.retain_duplicates)

    def __repr__(self) -> str:
        return (
            f"WindowBytesStoreSupplier({self.name!r}, {self.metrics_scope}, "
            f"retention_ms={self.retention_ms}, window_size_ms={self.window_size_ms}, "
            f"retain_duplicates={self.retain_duplicates})"
        )


class SessionBytesStoreSupplier:
    """Makes inner session stores of bytes: in-memory or RocksDB (segmented by session end)."""

    def __init__(self, name: str, retention_ms: int, persistent: bool) -> None:
        _check_name(name)
        self.name = name
        self.retention_ms = retention_ms
        self.persistent = persistent

    @property
    def segment_interval_ms(self) -> int:
        return default_segment_interval(self.retention_ms)

    @property
    def metrics_scope(self) -> str:
        return "rocksdb-session" if self.persistent else "in-memory-session"

    def get(self) -> SessionStore[bytes, bytes]:
        """A new inner store."""
        if self.persistent:
            return RocksDBSessionStore(self.name, self.retention_ms)
        return InMemorySessionStore(self.name, self.retention_ms)

    def __repr__(self) -> str:
        scope = self.metrics_scope
        return f"SessionBytesStoreSupplier({self.name!r}, {scope}, retention_ms={self.retention_ms})"


class KeyValueStoreBuilder(StoreBuilder):
    """Builds typed key-value stores (store_type "keyvalue": a compacted changelog)."""

    def __init__(self, supplier: KeyValueBytesStoreSupplier, key_serde: Any, value_serde: Any) -> None:
        super().__init__(supplier.name)
        self.supplier = supplier
        self.key_serde = key_serde
        self.value_serde = value_serde

    @property
    def store_type(self) -> str:
        return "keyvalue"

    def build(self) -> MeteredKeyValueStore[Any, Any]:
        store: KeyValueStore[bytes, bytes] = self.supplier.get()
        if self.logging_enabled:
            store = ChangeLoggingKeyValueStore(store)
        if self.caching_enabled:
            store = CachingKeyValueStore(store)
        return MeteredKeyValueStore(store, self.key_serde, self.value_serde)


class WindowStoreBuilder(StoreBuilder):
    """Builds typed window stores (store_type "window": a compacted and time-retained changelog).

    A store that retains duplicates is never cached: a cache keeps one value per key and window.
    """

    def __init__(self, supplier: WindowBytesStoreSupplier, key_serde: Any, value_serde: Any) -> None:
        super().__init__(supplier.name)
        self.supplier = supplier
        self.key_serde = key_serde
        self.value_serde = value_serde

    @property
    def store_type(self) -> str:
        return "window"

    @property
    def retention_ms(self) -> int:
        return self.supplier.retention_ms

    def with_caching_enabled(self) -> StoreBuilder:
        if self.supplier.retain_duplicates:
            logger.warning(
                "Not caching window store %s: it retains duplicates, which a cache cannot hold.", self.name
            )
            return self
        return super().with_caching_enabled()

    def build(self) -> MeteredWindowStore[Any, Any]:
        store: WindowStore[bytes, bytes] = self.supplier.get()
        if self.logging_enabled:
            store = ChangeLoggingWindowStore(store)
        if self.caching_enabled and not self.supplier.retain_duplicates:
            store = CachingWindowStore(store)
        return MeteredWindowStore(store, self.key_serde, self.value_serde)


class SessionStoreBuilder(StoreBuilder):
    """Builds typed session stores (store_type "session": a compacted and time-retained changelog)."""

    def __init__(self, supplier: SessionBytesStoreSupplier, key_serde: Any, value_serde: Any) -> None:
        super().__init__(supplier.name)
        self.supplier = supplier
        self.key_serde = key_serde
        self.value_serde = value_serde

    @property
    def store_type(self) -> str:
        return "session"

    @property
    def retention_ms(self) -> int:
        return self.supplier.retention_ms

    def build(self) -> MeteredSessionStore[Any, Any]:
        store: SessionStore[bytes, bytes] = self.supplier.get()
        if self.logging_enabled:
            store = ChangeLoggingSessionStore(store)
        if self.caching_enabled:
            store = CachingSessionStore(store)
        return MeteredSessionStore(store, self.key_serde, self.value_serde)


class Stores:
    """Factory methods for store suppliers and builders. Times are milliseconds (or timedeltas)."""

    @staticmethod
    def in_memory_key_value_store(name: str) -> KeyValueBytesStoreSupplier:
        return KeyValueBytesStoreSupplier(name, persistent=False)

    @staticmethod
    def persistent_key_value_store(name: str) -> KeyValueBytesStoreSupplier:
        return KeyValueBytesStoreSupplier(name, persistent=True)

    @staticmethod
    def in_memory_window_store(
        name: str, retention_ms: Millis, window_size_ms: Millis, retain_duplicates: bool = False
    ) -> WindowBytesStoreSupplier:
        return WindowBytesStoreSupplier(
            name,
            _millis(retention_ms, "retention", name),
            _millis(window_size_ms, "window size", name),
            retain_duplicates,
            persistent=False,
        )

    @staticmethod
    def persistent_window_store(
        name: str, retention_ms: Millis, window_size_ms: Millis, retain_duplicates: bool = False
    ) -> WindowBytesStoreSupplier:
        return WindowBytesStoreSupplier(
            name,
            _millis(retention_ms, "retention", name),
            _millis(window_size_ms, "window size", name),
            retain_duplicates,
            persistent=True,
        )

    @staticmethod
    def in_memory_session_store(name: str, retention_ms: Millis) -> SessionBytesStoreSupplier:
        return SessionBytesStoreSupplier(name, _millis(retention_ms, "retention", name), persistent=False)

    @staticmethod
    def persistent_session_store(name: str, retention_ms: Millis) -> SessionBytesStoreSupplier:
        return SessionBytesStoreSupplier(name, _millis(retention_ms, "retention", name), persistent=True)

    @staticmethod
    def key_value_store_builder(
        supplier: KeyValueBytesStoreSupplier, key_serde: Any = None, value_serde: Any = None
    ) -> KeyValueStoreBuilder:
        return KeyValueStoreBuilder(supplier, key_serde, value_serde)

    @staticmethod
    def window_store_builder(
        supplier: WindowBytesStoreSupplier, key_serde: Any = None, value_serde: Any = None
    ) -> WindowStoreBuilder:
        return WindowStoreBuilder(supplier, key_serde, value_serde)

    @staticmethod
    def session_store_builder(
        supplier: SessionBytesStoreSupplier, key_serde: Any = None, value_serde: Any = None
    ) -> SessionStoreBuilder:
        return SessionStoreBuilder(supplier, key_serde, value_serde)
