"""An in-memory key-value store of bounded size that forgets its least recently used key (Kafka's
``MemoryNavigableLRUCache``, made by ``Stores.lru_map``).

A ``get`` or ``put`` of a key makes it the most recently used; once a put brings the store past
``max_cache_size`` entries, the least recently used entry is removed. When the store is
change-logged, the logging layer is told of each removal (``when_eldest_removed``) and logs a
tombstone for it, so a restored store holds what the store held, not every key it ever saw.
Removals while restoring are not logged: the changelog already holds what restoration replays.
Ranges, ``all`` and ``prefix_scan`` are in key byte order and leave the usage order as it is.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from kstreams.state.in_memory import InMemoryKeyValueStore

__all__ = ["EldestEntryRemovalListener", "MemoryLRUCache"]

# (key, value) of the entry just removed to make room.
EldestEntryRemovalListener = Callable[[bytes, bytes], None]


class MemoryLRUCache(InMemoryKeyValueStore):
    """A key-value store of bytes holding at most ``max_cache_size`` entries, the least recently
    used removed first. Used by one thread at a time, as every inner store."""

    def __init__(self, name: str, max_cache_size: int) -> None:
        super().__init__(name)
        self.max_cache_size = max_cache_size
        # Least recently used first.
        self._map: OrderedDict[bytes, bytes] = OrderedDict()
        self._listener: EldestEntryRemovalListener | None = None
        self._restoring = False

    def when_eldest_removed(self, listener: EldestEntryRemovalListener | None) -> None:
        """Call ``listener(key, value)`` for each entry removed to make room (not while restoring)."""
        self._listener = listener

    def restore_batch(self, records: list[tuple[bytes, bytes | None]]) -> None:
        self._restoring = True
        try:
            super().restore_batch(records)
        finally:
            self._restoring = False

    def get(self, key: bytes) -> bytes | None:
        value = self._map.get(key)
        if value is not None:
            self._map.move_to_end(key)
        return value

    def put(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self.delete(key)
            return
        data = self._map
        if key in data:
            data.move_to_end(key)
        else:
            self._index.on_insert(key)
        data[key] = value
        # As Kafka's, the entry just written counts: with a size of 0 it is removed at once.
        while len(data) > self.max_cache_size:
            eldest, eldest_value = data.popitem(last=False)
            self._index.on_remove()
            if self._listener is not None and not self._restoring:
                self._listener(eldest, eldest_value)

    def put_if_absent(self, key: bytes, value: bytes) -> bytes | None:
        existing = self.get(key)
        if existing is None:
            self.put(key, value)
        return existing
