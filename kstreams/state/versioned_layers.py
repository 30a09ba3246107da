"""The layers of a versioned key-value store (KIP-889); ``builders.py`` stacks them.

Outermost first: metered (typed, serdes, metrics) -> change-logging -> ``VersionedBytesStore``.
There is no caching layer: a cache keeps one value per key, a versioned store keeps many, so
Kafka offers none and ``with_caching_enabled`` is refused with a warning.

The change-logging layer sends every put and delete to the changelog with the version's timestamp
as the record timestamp (Kafka's layout), so a restore replays the same puts. Versions of one key
must all reach the changelog: the builder marks the store so the task does not suppress changelog
records per key between commits (``keeps_every_changelog_record``), and gives the changelog topic
Kafka's ``min.compaction.lag.ms`` of history retention + 24 h so compaction keeps the history.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from kstreams.errors import ProcessorStateException
from kstreams.state.layer import StoreLayer
from kstreams.state.metered import _Metered
from kstreams.state.store import StateStore, StateStoreContext
from kstreams.state.versioned import (
    VersionedKeyValueStore,
    VersionedRecord,
)

__all__ = [
    "ChangeLoggingVersionedKeyValueStore",
    "MeteredVersionedKeyValueStore",
]

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")


class _VersionedLayer(StoreLayer):
    """A layer over a versioned store of bytes."""

    wrapped: VersionedKeyValueStore[bytes, bytes]

    @property
    def history_retention_ms(self) -> int:
        return self.wrapped.history_retention_ms

    @property
    def keeps_every_changelog_record(self) -> bool:
        """The task must not suppress this store's changelog records per key: each is a version."""
        return True


class ChangeLoggingVersionedKeyValueStore(_VersionedLayer, VersionedKeyValueStore[bytes, bytes]):
    """Logs every put and delete of a versioned store of bytes, at the version's timestamp."""

    def __init__(self, wrapped: VersionedKeyValueStore[bytes, bytes]) -> None:
        super().__init__(wrapped)
        self._store_name = wrapped.name
        self._log_change: Callable[[str, bytes, bytes | None, int], None] = self._not_initialized

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._log_change = context.log_change
        self.wrapped.init(context, root)

    def _not_initialized(self, store_name: str, key: bytes, value: bytes | None, timestamp: int) -> None:
        raise ProcessorStateException(
            f"Store {store_name} was written before init(); a store is usable only once its task opened it."
        )

    def put(self, key: bytes, value: bytes | None, timestamp: int) -> int:
        valid_to = self.wrapped.put(key, value, timestamp)
        # Logged even when the store dropped it as too old, as Kafka does: a restore drops it again.
        self._log_change(self._store_name, key, value, timestamp)
        return valid_to

    def delete(self, key: bytes, timestamp: int) -> VersionedRecord[bytes] | None:
        existing = self.wrapped.delete(key, timestamp)
        self._log_change(self._store_name, key, None, timestamp)
        return existing

    def get(self, key: bytes, as_of_timestamp: int | None = None) -> VersionedRecord[bytes] | None:
        return self.wrapped.get(key, as_of_timestamp)


class MeteredVersionedKeyValueStore(_Metered[K, V], _VersionedLayer, VersionedKeyValueStore[K, V]):
    """The typed versioned store processors use: keys and values through the builder's serdes."""

    _METERED = (
        *_Metered._METERED,
        ("put", "put", False),
        ("get", "get", False),
        ("delete", "delete", False),
    )
    _SCOPE_SUFFIX = "-versioned"

    def _typed(self, record: VersionedRecord[bytes] | None) -> VersionedRecord[V] | None:
        if record is None:
            return None
        return VersionedRecord(self._value(record.value), record.timestamp, record.valid_to)  # type: ignore[arg-type]

    def put(self, key: K, value: V | None, timestamp: int) -> int:
        if key is None:
            raise ValueError(f"Store {self.name}: a versioned store's key cannot be None.")
        raw_key, raw_value = self.raw_key(key), self._value_bytes(value)
        with self.query_lock:
            return self.wrapped.put(raw_key, raw_value, timestamp)

    def delete(self, key: K, timestamp: int) -> VersionedRecord[V] | None:
        if key is None:
            raise ValueError(f"Store {self.name}: a versioned store's key cannot be None.")
        raw_key = self.raw_key(key)
        with self.query_lock:
            return self._typed(self.wrapped.delete(raw_key, timestamp))

    def get(self, key: K, as_of_timestamp: int | None = None) -> VersionedRecord[V] | None:
        return self._typed(self.wrapped.get(self.raw_key(key), as_of_timestamp))
