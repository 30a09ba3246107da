"""State stores: the ``Stores`` factory, the store interfaces, and read-only query views.

Store layers, outermost first: metered (typed) -> caching -> change-logging -> inner (in-memory or
RocksDB). See ``store.py`` for the contracts and ``stores.py`` for building stores.
"""

from __future__ import annotations

from kstreams.state.query import ReadOnlyKeyValueStore, ReadOnlySessionStore, ReadOnlyWindowStore
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
from kstreams.state.stores import (
    KeyValueBytesStoreSupplier,
    KeyValueStoreBuilder,
    SessionBytesStoreSupplier,
    SessionStoreBuilder,
    Stores,
    WindowBytesStoreSupplier,
    WindowStoreBuilder,
)
from kstreams.state.timestamped import TimestampedKeyValueStoreBuilder, TimestampedWindowStoreBuilder
from kstreams.state.value_and_timestamp import ValueAndTimestamp, ValueAndTimestampSerde
from kstreams.state.versioned import (
    VersionedBytesStoreSupplier,
    VersionedKeyValueStore,
    VersionedRecord,
)
from kstreams.state.versioned_layers import VersionedKeyValueStoreBuilder
from kstreams.state.window import Window

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
