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
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kstreams.errors import TopologyException
from kstreams.state.caching import CachingKeyValueStore, CachingSessionStore, CachingWindowStore
from kstreams.state.changelogging import (
    ChangeLoggingKeyValueStore,
    ChangeLoggingSessionStore,
    ChangeLoggingWindowStore,
)
from kstreams.state.in_memory import InMemoryKeyValueStore, InMemoryWindowStore
from kstreams.state.in_memory_session import InMemorySessionStore
from kstreams.state.inner_windowed import check_window_retention
from kstreams.state.metered import MeteredKeyValueStore, MeteredSessionStore, MeteredWindowStore
from kstreams.state.rocksdb import RocksDBKeyValueStore
from kstreams.state.rocksdb_session import RocksDBSessionStore
from kstreams.state.rocksdb_window import RocksDBWindowStore
from kstreams.state.segments import default_segment_interval
from kstreams.state.store import KeyValueStore, SessionStore, StateStore, StoreBuilder, WindowStore

if TYPE_CHECKING:
    from kstreams.state.versioned import VersionedBytesStoreSupplier
    from kstreams.state.versioned_layers import VersionedKeyValueStoreBuilder

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
S = TypeVar("S", bound=StateStore)


def _millis(value: Millis, what: str, store: str) -> int:
    ms = int(value.total_seconds() * 1000) if isinstance(value, timedelta) else int(value)
    if ms < 0:
        raise TopologyException(f"Store {store}: {what} must not be negative, got {ms} ms.")
    return ms


def _window_supplier(
    name: str, retention_ms: Millis, window_size_ms: Millis, retain_duplicates: bool, persistent: bool
) -> WindowBytesStoreSupplier:
    return WindowBytesStoreSupplier(
        name,
        _millis(retention_ms, "retention", name),
        _millis(window_size_ms, "window size", name),
        retain_duplicates,
        persistent,
    )


class _BytesStoreSupplier:
    """Makes inner stores of bytes of one kind, in memory or in RocksDB (``persistent``)."""

    # What follows "rocksdb" / "in-memory" in the metrics scope of this kind of store.
    _scope_suffix = ""

    def __init__(self, name: str, persistent: bool) -> None:
        if not isinstance(name, str) or not name:
            raise TopologyException(f"A store needs a non-empty name, got {name!r}.")
        self.name = name
        self.persistent = persistent

    @property
    def metrics_scope(self) -> str:
        return ("rocksdb" if self.persistent else "in-memory") + self._scope_suffix


class KeyValueBytesStoreSupplier(_BytesStoreSupplier):
    """Makes inner key-value stores of bytes: in-memory or RocksDB."""

    def get(self) -> KeyValueStore[bytes, bytes]:
        """A new inner store."""
        return RocksDBKeyValueStore(self.name) if self.persistent else InMemoryKeyValueStore(self.name)

    def __repr__(self) -> str:
        return f"KeyValueBytesStoreSupplier({self.name!r}, {self.metrics_scope})"


class WindowBytesStoreSupplier(_BytesStoreSupplier):
    """Makes inner window stores of bytes: in-memory or RocksDB (segmented)."""

    _scope_suffix = "-window"

    def __init__(
        self, name: str, retention_ms: int, window_size_ms: int, retain_duplicates: bool, persistent: bool
    ) -> None:
        super().__init__(name, persistent)
        check_window_retention(name, retention_ms, window_size_ms)
        self.retention_ms = retention_ms
        self.window_size_ms = window_size_ms
        self.retain_duplicates = retain_duplicates

    @property
    def segment_interval_ms(self) -> int:
        return default_segment_interval(self.retention_ms)

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


class SessionBytesStoreSupplier(_BytesStoreSupplier):
    """Makes inner session stores of bytes: in-memory or RocksDB (segmented by session end)."""

    _scope_suffix = "-session"

    def __init__(self, name: str, retention_ms: int, persistent: bool) -> None:
        super().__init__(name, persistent)
        self.retention_ms = retention_ms

    @property
    def segment_interval_ms(self) -> int:
        return default_segment_interval(self.retention_ms)

    def get(self) -> SessionStore[bytes, bytes]:
        """A new inner store."""
        cls = RocksDBSessionStore if self.persistent else InMemorySessionStore
        return cls(self.name, self.retention_ms)

    def __repr__(self) -> str:
        scope = self.metrics_scope
        return f"SessionBytesStoreSupplier({self.name!r}, {scope}, retention_ms={self.retention_ms})"


class _LayeredStoreBuilder(StoreBuilder, Generic[S]):
    """Builds, per task, the supplier's inner store wrapped in change-logging (when enabled), then
    caching (when enabled), then the metered layer with the builder's serdes and the supplier's
    metrics scope (the store type its metrics are tagged with)."""

    _change_logging_layer: Callable[[Any], Any]
    _caching_layer: Callable[[Any], Any]
    _metered_layer: Callable[[Any, Any, Any, str], S]

    def __init__(self, supplier: Any, key_serde: Any, value_serde: Any) -> None:
        super().__init__(supplier.name)
        self.supplier = supplier
        self.key_serde = key_serde
        self.value_serde = value_serde

    def _caches(self) -> bool:
        return self.caching_enabled

    def build(self) -> S:
        store = self.supplier.get()
        if self.logging_enabled:
            store = self._change_logging_layer(store)
        if self._caches():
            store = self._caching_layer(store)
        return self._metered_layer(store, self.key_serde, self.value_serde, self.supplier.metrics_scope)


class KeyValueStoreBuilder(_LayeredStoreBuilder[MeteredKeyValueStore[Any, Any]]):
    """Builds typed key-value stores (store_type "keyvalue": a compacted changelog)."""

    supplier: KeyValueBytesStoreSupplier
    _change_logging_layer = ChangeLoggingKeyValueStore
    _caching_layer = CachingKeyValueStore
    _metered_layer = MeteredKeyValueStore

    @property
    def store_type(self) -> str:
        return "keyvalue"


class WindowStoreBuilder(_LayeredStoreBuilder[MeteredWindowStore[Any, Any]]):
    """Builds typed window stores (store_type "window": a compacted and time-retained changelog).

    A store that retains duplicates is never cached: a cache keeps one value per key and window.
    """

    supplier: WindowBytesStoreSupplier
    _change_logging_layer = ChangeLoggingWindowStore
    _caching_layer = CachingWindowStore
    _metered_layer = MeteredWindowStore

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

    def _caches(self) -> bool:
        # Checked again here: caching_enabled may be set directly, or the supplier replaced later.
        return self.caching_enabled and not self.supplier.retain_duplicates


class SessionStoreBuilder(_LayeredStoreBuilder[MeteredSessionStore[Any, Any]]):
    """Builds typed session stores (store_type "session": a compacted and time-retained changelog)."""

    supplier: SessionBytesStoreSupplier
    _change_logging_layer = ChangeLoggingSessionStore
    _caching_layer = CachingSessionStore
    _metered_layer = MeteredSessionStore

    @property
    def store_type(self) -> str:
        return "session"

    @property
    def retention_ms(self) -> int:
        return self.supplier.retention_ms


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
        return _window_supplier(name, retention_ms, window_size_ms, retain_duplicates, persistent=False)

    @staticmethod
    def persistent_window_store(
        name: str, retention_ms: Millis, window_size_ms: Millis, retain_duplicates: bool = False
    ) -> WindowBytesStoreSupplier:
        return _window_supplier(name, retention_ms, window_size_ms, retain_duplicates, persistent=True)

    @staticmethod
    def in_memory_session_store(name: str, retention_ms: Millis) -> SessionBytesStoreSupplier:
        return SessionBytesStoreSupplier(name, _millis(retention_ms, "retention", name), persistent=False)

    @staticmethod
    def persistent_session_store(name: str, retention_ms: Millis) -> SessionBytesStoreSupplier:
        return SessionBytesStoreSupplier(name, _millis(retention_ms, "retention", name), persistent=True)

    @staticmethod
    def persistent_versioned_key_value_store(
        name: str, history_retention: Millis
    ) -> VersionedBytesStoreSupplier:
        """A versioned store (KIP-889) in RocksDB keeping each key's history for ``history_retention``
        (which is also its grace period for out-of-order puts)."""
        from kstreams.state.versioned import VersionedBytesStoreSupplier  # it builds on this module

        return VersionedBytesStoreSupplier(name, _millis(history_retention, "history retention", name), True)

    @staticmethod
    def in_memory_versioned_key_value_store(
        name: str, history_retention: Millis
    ) -> VersionedBytesStoreSupplier:
        """A versioned store kept in memory (restored from its changelog); Kafka has only the
        persistent one."""
        from kstreams.state.versioned import VersionedBytesStoreSupplier  # it builds on this module

        return VersionedBytesStoreSupplier(name, _millis(history_retention, "history retention", name), False)

    @staticmethod
    def versioned_key_value_store_builder(
        supplier: VersionedBytesStoreSupplier, key_serde: Any = None, value_serde: Any = None
    ) -> VersionedKeyValueStoreBuilder[Any, Any]:
        """A builder of typed versioned stores (logged; never cached)."""
        from kstreams.state.versioned_layers import VersionedKeyValueStoreBuilder  # it builds on this module

        return VersionedKeyValueStoreBuilder(supplier, key_serde, value_serde)

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

    @staticmethod
    def timestamped_key_value_store_builder(
        supplier: KeyValueBytesStoreSupplier, key_serde: Any = None, value_serde: Any = None
    ) -> KeyValueStoreBuilder:
        """A builder of key-value stores of ``ValueAndTimestamp`` (``value_serde``: the plain value's)."""
        from kstreams.state.timestamped import TimestampedKeyValueStoreBuilder  # it builds on this module

        return TimestampedKeyValueStoreBuilder(supplier, key_serde, value_serde)

    @staticmethod
    def timestamped_window_store_builder(
        supplier: WindowBytesStoreSupplier, key_serde: Any = None, value_serde: Any = None
    ) -> WindowStoreBuilder:
        """A builder of window stores of ``ValueAndTimestamp`` (``value_serde``: the plain value's)."""
        from kstreams.state.timestamped import TimestampedWindowStoreBuilder  # it builds on this module

        return TimestampedWindowStoreBuilder(supplier, key_serde, value_serde)
