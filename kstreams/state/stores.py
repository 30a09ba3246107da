"""``Stores``: the factory of store suppliers and builders (Kafka's ``Stores``).

A supplier makes the inner store of one kind (in-memory or RocksDB; key-value, window or session)
holding bytes; a builder wraps it, per task, in the layers the topology asks for, outermost first:
metered (typed, serdes) -> caching (when enabled) -> change-logging (when enabled) -> inner.
Logging is on and caching off by default, as in Kafka. The suppliers are in ``suppliers.py``,
the builders in ``builders.py``; this module only makes them.

    supplier = Stores.persistent_key_value_store("counts")
    builder = Stores.key_value_store_builder(supplier, Serdes.string(), Serdes.long()).with_caching_enabled()
    store = builder.build()   # a new, unopened MeteredKeyValueStore for one task
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from kstreams.errors import TopologyException
from kstreams.state.builders import (
    KeyValueStoreBuilder,
    SessionStoreBuilder,
    TimestampedKeyValueStoreBuilder,
    TimestampedWindowStoreBuilder,
    VersionedKeyValueStoreBuilder,
    WindowStoreBuilder,
)
from kstreams.state.suppliers import (
    KeyValueBytesStoreSupplier,
    LRUMapStoreSupplier,
    SessionBytesStoreSupplier,
    VersionedBytesStoreSupplier,
    WindowBytesStoreSupplier,
)

__all__ = ["Stores"]

logger = logging.getLogger(__name__)

Millis = int | timedelta


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


class Stores:
    """Factory methods for store suppliers and builders. Times are milliseconds (or timedeltas)."""

    @staticmethod
    def in_memory_key_value_store(name: str) -> KeyValueBytesStoreSupplier:
        return KeyValueBytesStoreSupplier(name, persistent=False)

    @staticmethod
    def persistent_key_value_store(name: str) -> KeyValueBytesStoreSupplier:
        return KeyValueBytesStoreSupplier(name, persistent=True)

    @staticmethod
    def persistent_timestamped_key_value_store(name: str) -> KeyValueBytesStoreSupplier:
        """A RocksDB key-value store for ``timestamped_key_value_store_builder``. Kafka's stores
        timestamped values in a format of their own; here every RocksDB store holds bytes, and the
        builder puts each value's timestamp in front, so this is ``persistent_key_value_store``."""
        return KeyValueBytesStoreSupplier(name, persistent=True)

    @staticmethod
    def lru_map(name: str, max_cache_size: int) -> KeyValueBytesStoreSupplier:
        """An in-memory key-value store of at most ``max_cache_size`` entries that removes the least
        recently read or written one to make room (Kafka's ``lruMap``). Logged, a removal is a
        tombstone in the changelog, so restoration brings back only what the store held."""
        if isinstance(max_cache_size, bool) or not isinstance(max_cache_size, int):
            raise TopologyException(
                f"Store {name}: max_cache_size must be an int (a number of entries), got {max_cache_size!r}."
            )
        if max_cache_size < 0:
            raise TopologyException(f"Store {name}: max_cache_size cannot be negative, got {max_cache_size}.")
        return LRUMapStoreSupplier(name, max_cache_size)

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
    def persistent_timestamped_window_store(
        name: str, retention_ms: Millis, window_size_ms: Millis, retain_duplicates: bool = False
    ) -> WindowBytesStoreSupplier:
        """A RocksDB window store for ``timestamped_window_store_builder``; as
        ``persistent_timestamped_key_value_store``, the same store as ``persistent_window_store``."""
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

        return VersionedBytesStoreSupplier(name, _millis(history_retention, "history retention", name), True)

    @staticmethod
    def in_memory_versioned_key_value_store(
        name: str, history_retention: Millis
    ) -> VersionedBytesStoreSupplier:
        """A versioned store kept in memory (restored from its changelog); Kafka has only the
        persistent one."""

        return VersionedBytesStoreSupplier(name, _millis(history_retention, "history retention", name), False)

    @staticmethod
    def versioned_key_value_store_builder(
        supplier: VersionedBytesStoreSupplier, key_serde: Any = None, value_serde: Any = None
    ) -> VersionedKeyValueStoreBuilder[Any, Any]:
        """A builder of typed versioned stores (logged; never cached)."""

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

        return TimestampedKeyValueStoreBuilder(supplier, key_serde, value_serde)

    @staticmethod
    def timestamped_window_store_builder(
        supplier: WindowBytesStoreSupplier, key_serde: Any = None, value_serde: Any = None
    ) -> WindowStoreBuilder:
        """A builder of window stores of ``ValueAndTimestamp`` (``value_serde``: the plain value's)."""

        return TimestampedWindowStoreBuilder(supplier, key_serde, value_serde)
