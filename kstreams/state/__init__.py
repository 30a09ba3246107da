"""State stores: the ``Stores`` factory, the store interfaces, read-only query views and the
``StateRestoreListener`` that watches their restoration.

Store layers, outermost first: metered (typed) -> caching -> change-logging -> inner (in-memory or
RocksDB). See ``store.py`` for the contracts, ``stores.py`` for the factory, ``suppliers.py``
(inner stores) and ``builders.py`` (the layers stacked per task) for building stores.
"""

from __future__ import annotations

from kstreams.state.builders import (
    KeyValueStoreBuilder,
    SessionStoreBuilder,
    TimestampedKeyValueStoreBuilder,
    TimestampedWindowStoreBuilder,
    VersionedKeyValueStoreBuilder,
    WindowStoreBuilder,
)
from kstreams.state.query import ReadOnlyKeyValueStore, ReadOnlySessionStore, ReadOnlyWindowStore
from kstreams.state.restore_listener import StateRestoreListener
from kstreams.state.store import (
    FlushListener,
    KeyValueStore,
    RestoreCallback,
    SessionStore,
    StateStore,
    StateStoreContext,
    StoreBuilder,
    WindowedKey,
    WindowStore,
)
from kstreams.state.stores import Stores
from kstreams.state.suppliers import (
    KeyValueBytesStoreSupplier,
    SessionBytesStoreSupplier,
    VersionedBytesStoreSupplier,
    WindowBytesStoreSupplier,
)
from kstreams.state.value_and_timestamp import ValueAndTimestamp, ValueAndTimestampSerde
from kstreams.state.versioned import VersionedKeyValueStore, VersionedRecord
from kstreams.window import Window

__all__ = [
    "FlushListener",
    "KeyValueBytesStoreSupplier",
    "KeyValueStore",
    "KeyValueStoreBuilder",
    "ReadOnlyKeyValueStore",
    "ReadOnlySessionStore",
    "ReadOnlyWindowStore",
    "RestoreCallback",
    "SessionBytesStoreSupplier",
    "SessionStore",
    "SessionStoreBuilder",
    "StateRestoreListener",
    "StateStore",
    "StateStoreContext",
    "StoreBuilder",
    "Stores",
    "TimestampedKeyValueStoreBuilder",
    "TimestampedWindowStoreBuilder",
    "ValueAndTimestamp",
    "ValueAndTimestampSerde",
    "VersionedBytesStoreSupplier",
    "VersionedKeyValueStore",
    "VersionedKeyValueStoreBuilder",
    "VersionedRecord",
    "Window",
    "WindowBytesStoreSupplier",
    "WindowStore",
    "WindowStoreBuilder",
    "WindowedKey",
]
