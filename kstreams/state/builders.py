"""Store builders: per task, the supplier's inner store wrapped in the layers the topology asks
for (Kafka's ``KeyValueStoreBuilder``, ``TimestampedKeyValueStoreBuilder``, ``WindowStoreBuilder``,
``TimestampedWindowStoreBuilder``, ``SessionStoreBuilder``, ``VersionedKeyValueStoreBuilder``).

Layers, outermost first: metered (typed, serdes) -> caching (when enabled) -> change-logging (when
enabled) -> inner. Logging is on and caching off by default, as in Kafka. A timestamped builder
takes the *value's* serde: its metered layer adds the timestamp around it. A versioned builder is
never cached (a cache keeps one value per key, a versioned store all of its versions) and gives its
changelog Kafka's ``min.compaction.lag.ms`` of history retention + 24 h.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from kstreams.state.caching import CachingKeyValueStore, CachingSessionStore, CachingWindowStore
from kstreams.state.changelogging import (
    ChangeLoggingKeyValueStore,
    ChangeLoggingSessionStore,
    ChangeLoggingWindowStore,
)
from kstreams.state.metered import MeteredKeyValueStore, MeteredSessionStore, MeteredWindowStore
from kstreams.state.store import StateStore, StoreBuilder
from kstreams.state.suppliers import (
    KeyValueBytesStoreSupplier,
    SessionBytesStoreSupplier,
    VersionedBytesStoreSupplier,
    WindowBytesStoreSupplier,
)
from kstreams.state.timestamped import MeteredTimestampedKeyValueStore, MeteredTimestampedWindowStore
from kstreams.state.versioned import VersionedKeyValueStore
from kstreams.state.versioned_layers import ChangeLoggingVersionedKeyValueStore, MeteredVersionedKeyValueStore

__all__ = [
    "KeyValueStoreBuilder",
    "SessionStoreBuilder",
    "TimestampedKeyValueStoreBuilder",
    "TimestampedWindowStoreBuilder",
    "VersionedKeyValueStoreBuilder",
    "WindowStoreBuilder",
]

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")
S = TypeVar("S", bound=StateStore)

# Kafka's extra compaction lag of versioned changelogs beyond the history retention.
_CHANGELOG_COMPACTION_LAG_EXTRA_MS = 24 * 60 * 60 * 1000


class _LayeredStoreBuilder(StoreBuilder, Generic[S]):
    """Builds, per task, the supplier's inner store wrapped in change-logging (when enabled), then
    caching (when enabled), then the metered layer with the builder's serdes and the supplier's
    metrics scope (the store type its metrics are tagged with)."""

    _change_logging_layer: Callable[[Any], Any]
    _caching_layer: Callable[[Any], Any]
    _metered_layer: Callable[[Any, Any, Any, str], S]
    # What the DSL made the supplier from when the operation named no store type (a
    # ``dsl_store_suppliers.DslParams``); None for a supplier that stays.
    dsl_params: Any = None

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


class TimestampedKeyValueStoreBuilder(KeyValueStoreBuilder):
    """Builds timestamped key-value stores; ``value_serde`` is the serde of the plain value."""

    _metered_layer = MeteredTimestampedKeyValueStore  # type: ignore[assignment]
    timestamped = True


class TimestampedWindowStoreBuilder(WindowStoreBuilder):
    """Builds timestamped window stores; ``value_serde`` is the serde of the plain value."""

    _metered_layer = MeteredTimestampedWindowStore  # type: ignore[assignment]
    timestamped = True


class VersionedKeyValueStoreBuilder(StoreBuilder, Generic[K, V]):
    """Builds typed versioned stores (store_type "keyvalue": a compacted changelog whose
    compaction lag covers the history retention)."""

    def __init__(self, supplier: VersionedBytesStoreSupplier, key_serde: Any, value_serde: Any) -> None:
        if not isinstance(supplier, VersionedBytesStoreSupplier):
            raise TypeError(
                "versioned_key_value_store_builder() takes a versioned store supplier "
                "(Stores.persistent_versioned_key_value_store(name, history_retention)), "
                f"got {supplier!r}."
            )
        super().__init__(supplier.name)
        self.supplier = supplier
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.log_config = self._changelog_defaults()

    def _changelog_defaults(self) -> dict[str, str]:
        lag = self.supplier.history_retention_ms + _CHANGELOG_COMPACTION_LAG_EXTRA_MS
        return {"min.compaction.lag.ms": str(lag)}

    @property
    def store_type(self) -> str:
        return "keyvalue"

    @property
    def history_retention_ms(self) -> int:
        return self.supplier.history_retention_ms

    def with_logging_enabled(self, config: dict[str, str] | None = None) -> StoreBuilder:
        self.logging_enabled = True
        self.log_config = {**self._changelog_defaults(), **(config or {})}
        return self

    def with_caching_enabled(self) -> StoreBuilder:
        logger.warning(
            "Not caching versioned store %s: a cache keeps one value per key, a versioned store all "
            "of its versions.",
            self.name,
        )
        return self

    def build(self) -> MeteredVersionedKeyValueStore[K, V]:
        store: VersionedKeyValueStore[bytes, bytes] = self.supplier.get()
        if self.logging_enabled:
            store = ChangeLoggingVersionedKeyValueStore(store)
        return MeteredVersionedKeyValueStore(
            store, self.key_serde, self.value_serde, self.supplier.metrics_scope
        )
