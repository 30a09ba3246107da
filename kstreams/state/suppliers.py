"""Store suppliers: what makes the inner store of one kind, holding bytes (Kafka's
``KeyValueBytesStoreSupplier``, ``WindowBytesStoreSupplier``, ``SessionBytesStoreSupplier`` and
``VersionedBytesStoreSupplier``): in memory, or in RocksDB (``persistent``).

``Stores`` (``stores.py``) makes them; a builder (``builders.py``) calls ``get()`` once per task
and wraps the store it returns in its layers.
"""

from __future__ import annotations

import logging

from kstreams.errors import TopologyException
from kstreams.state.in_memory import InMemoryKeyValueStore, InMemoryWindowStore
from kstreams.state.in_memory_lru import MemoryLRUCache
from kstreams.state.in_memory_session import InMemorySessionStore
from kstreams.state.inner_windowed import check_window_retention
from kstreams.state.rocksdb import RocksDBKeyValueStore
from kstreams.state.rocksdb_session import RocksDBSessionStore
from kstreams.state.rocksdb_window import RocksDBWindowStore
from kstreams.state.segments import default_segment_interval
from kstreams.state.store import KeyValueStore, SessionStore, WindowStore
from kstreams.state.versioned import VersionedBytesStore

__all__ = [
    "KeyValueBytesStoreSupplier",
    "LRUMapStoreSupplier",
    "SessionBytesStoreSupplier",
    "VersionedBytesStoreSupplier",
    "WindowBytesStoreSupplier",
]

logger = logging.getLogger(__name__)


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


class LRUMapStoreSupplier(KeyValueBytesStoreSupplier):
    """Makes in-memory key-value stores that keep at most ``max_cache_size`` entries, the least
    recently used removed first (``Stores.lru_map``)."""

    _scope_suffix = "-lru"

    def __init__(self, name: str, max_cache_size: int) -> None:
        super().__init__(name, persistent=False)
        self.max_cache_size = max_cache_size

    def get(self) -> KeyValueStore[bytes, bytes]:
        return MemoryLRUCache(self.name, self.max_cache_size)

    def __repr__(self) -> str:
        return f"LRUMapStoreSupplier({self.name!r}, max_cache_size={self.max_cache_size})"


class WindowBytesStoreSupplier(_BytesStoreSupplier):
    """Makes inner window stores of bytes: in-memory or RocksDB (segmented).

    ``time_ordered`` (RocksDB only) makes Kafka's time-ordered window store, which the DSL gives a
    windowed aggregation that emits on window close (see ``RocksDBWindowStore``); no public factory
    makes one, as in Kafka."""

    _scope_suffix = "-window"

    def __init__(
        self,
        name: str,
        retention_ms: int,
        window_size_ms: int,
        retain_duplicates: bool,
        persistent: bool,
        time_ordered: bool = False,
    ) -> None:
        super().__init__(name, persistent)
        check_window_retention(name, retention_ms, window_size_ms)
        self.retention_ms = retention_ms
        self.window_size_ms = window_size_ms
        self.retain_duplicates = retain_duplicates
        self.time_ordered = time_ordered and persistent

    @property
    def segment_interval_ms(self) -> int:
        return default_segment_interval(self.retention_ms)

    def get(self) -> WindowStore[bytes, bytes]:
        """A new inner store."""
        if self.persistent:
            return RocksDBWindowStore(
                self.name,
                self.retention_ms,
                self.window_size_ms,
                self.retain_duplicates,
                time_ordered=self.time_ordered,
            )
        return InMemoryWindowStore(self.name, self.retention_ms, self.window_size_ms, self.retain_duplicates)

    def __repr__(self) -> str:
        ordered = ", time_ordered=True" if self.time_ordered else ""
        return (
            f"WindowBytesStoreSupplier({self.name!r}, {self.metrics_scope}, "
            f"retention_ms={self.retention_ms}, window_size_ms={self.window_size_ms}, "
            f"retain_duplicates={self.retain_duplicates}{ordered})"
        )


class SessionBytesStoreSupplier(_BytesStoreSupplier):
    """Makes inner session stores of bytes: in-memory or RocksDB (segmented by session end).

    ``time_ordered`` (RocksDB only) makes Kafka's time-ordered session store, which the DSL gives a
    session aggregation that emits on window close (see ``RocksDBSessionStore``)."""

    _scope_suffix = "-session"

    def __init__(self, name: str, retention_ms: int, persistent: bool, time_ordered: bool = False) -> None:
        super().__init__(name, persistent)
        self.retention_ms = retention_ms
        self.time_ordered = time_ordered and persistent

    @property
    def segment_interval_ms(self) -> int:
        return default_segment_interval(self.retention_ms)

    def get(self) -> SessionStore[bytes, bytes]:
        """A new inner store."""
        if self.persistent:
            return RocksDBSessionStore(self.name, self.retention_ms, time_ordered=self.time_ordered)
        return InMemorySessionStore(self.name, self.retention_ms)

    def __repr__(self) -> str:
        scope = self.metrics_scope
        ordered = ", time_ordered=True" if self.time_ordered else ""
        return f"SessionBytesStoreSupplier({self.name!r}, {scope}, retention_ms={self.retention_ms}{ordered})"


class VersionedBytesStoreSupplier:
    """Makes inner versioned stores of bytes, over RocksDB (``persistent``) or memory."""

    def __init__(self, name: str, history_retention_ms: int, persistent: bool) -> None:
        if not isinstance(name, str) or not name:
            raise TopologyException(f"A store needs a non-empty name, got {name!r}.")
        if history_retention_ms < 0:
            raise TopologyException(
                f"Store {name}: history retention must not be negative, got {history_retention_ms} ms."
            )
        self.name = name
        self.history_retention_ms = history_retention_ms
        self.persistent = persistent

    @property
    def metrics_scope(self) -> str:
        return ("rocksdb" if self.persistent else "in-memory") + "-versioned"

    def get(self) -> VersionedBytesStore:
        """A new inner store."""
        return VersionedBytesStore(
            KeyValueBytesStoreSupplier(self.name, self.persistent).get(), self.history_retention_ms
        )

    def __repr__(self) -> str:
        return (
            f"VersionedBytesStoreSupplier({self.name!r}, {self.metrics_scope}, "
            f"history_retention_ms={self.history_retention_ms})"
        )
