"""State stores: the ``Stores`` factory, the store interfaces, and read-only query views.

Store layers, outermost first: metered (typed) -> caching -> change-logging -> inner (in-memory or
RocksDB). See ``store.py`` for the contracts and ``stores.py`` for building stores.
"""

from __future__ import annotations

from kstreams.state.query import ReadOnlyKeyValueStore, ReadOnlyWindowStore
from kstreams.state.store import (
    FlushListener,
    KeyValueStore,
    RestoreCallback,
    StateStore,
    StateStoreContext,
    StoreBuilder,
    WindowedKey,
    WindowStore,
)
from kstreams.state.stores import (
    KeyValueBytesStoreSupplier,
    KeyValueStoreBuilder,
    Stores,
    WindowBytesStoreSupplier,
    WindowStoreBuilder,
)

__all__ = [
    "FlushListener",
    "KeyValueBytesStoreSupplier",
    "KeyValueStore",
    "KeyValueStoreBuilder",
    "ReadOnlyKeyValueStore",
    "ReadOnlyWindowStore",
    "RestoreCallback",
    "StateStore",
    "StateStoreContext",
    "StoreBuilder",
    "Stores",
    "WindowBytesStoreSupplier",
    "WindowStore",
    "WindowStoreBuilder",
    "WindowedKey",
]
