"""The record cache: a byte-bounded LRU of named caches (one per "<task>-<store>").

Semantics follow Kafka's ThreadCache/NamedCache:
- put marks an entry dirty and most-recently-used; dirty keys are kept in arrival order.
- While the cache is over its limit after a put, the LRU tail of the namespace written to is evicted;
  evicting a dirty entry flushes the whole namespace through its listener: the evicted entry first,
  then the namespace's other dirty entries in arrival order. Clean entries are dropped silently.
- flush(namespace) hands every dirty entry to the listener in arrival order and marks them clean;
  entries whose value is None (tombstones) are removed from the cache after the flush.
- delete removes an entry without flushing it.
- With max_bytes 0, every put is flushed at once.
- resize: shrinking evicts round-robin across namespaces until within the limit; growing raises it.

Listener: listener(entries: list[tuple[bytes, bytes | None, int]]) with (key, value, timestamp).
It is called with the GIL and without the cache's internal mutex, so it may read the cache.
Thread safety: every method takes the internal mutex; namespaces can be moved between caches.

Details:
- ENTRY_OVERHEAD is 64: entry bytes = len(key) + len(value or b"") + 64.
- Re-putting a dirty key moves it to the end of the dirty (arrival) order, as Kafka's NamedCache does.
- A namespace that does not exist raises KeyError (add it first); add_namespace on an existing
  namespace replaces its listener and keeps its entries.
- put_clean leaves a dirty entry of the same key untouched (the pending write is newer).
- put_if_absent treats a cached tombstone as present (as NamedCache does) and counts a hit or miss.
- A listener error propagates after every pending listener ran; the entries stay marked clean.
- move_namespace raises KeyError if this cache lacks the namespace, ValueError if the other has it.
- lru_keys(namespace) and namespace_bytes(namespace) show the eviction order and a namespace's size.
"""

from collections.abc import Callable

FlushListener = Callable[[list[tuple[bytes, bytes | None, int]]], None]

class RecordCache:
    ENTRY_OVERHEAD: int  # fixed bytes counted per entry besides key and value
    def __init__(self, max_bytes: int) -> None: ...
    def add_namespace(self, namespace: str, listener: FlushListener) -> None: ...
    def remove_namespace(self, namespace: str) -> None:
        """Drop a namespace and its entries without flushing (a task closed dirty)."""
    def has_namespace(self, namespace: str) -> bool: ...
    def namespaces(self) -> list[str]: ...
    def get(self, namespace: str, key: bytes) -> tuple[bytes | None, int] | None:
        """(value, timestamp) if cached (value None: a cached tombstone); None on a miss.
        A hit moves the entry to most-recently-used."""
    def put(self, namespace: str, key: bytes, value: bytes | None, timestamp: int) -> None: ...
    def put_if_absent(self, namespace: str, key: bytes, value: bytes | None, timestamp: int) -> bool: ...
    def put_clean(self, namespace: str, key: bytes, value: bytes | None, timestamp: int) -> None:
        """Cache a value read from the store (not dirty: never flushed)."""
    def delete(self, namespace: str, key: bytes) -> tuple[bytes | None, int] | None: ...
    def flush(self, namespace: str | None = None) -> None:
        """Flush one namespace, or every namespace (in name order) when None."""
    def dirty_count(self, namespace: str | None = None) -> int: ...
    def keys(self, namespace: str) -> list[bytes]:
        """Keys of a namespace in ascending byte order, without touching them."""
    def range_items(
        self, namespace: str, lo: bytes | None, hi: bytes | None, key_size: int = -1, touch: bool = True
    ) -> list[tuple[bytes, bytes | None]]:
        """(key, value or None for a tombstone) of the entries with lo <= key <= hi (None: unbounded),
        ascending; with key_size >= 0 only those of keys that long. With touch, each entry returned
        counts as a hit and becomes most recently used in key order, as get() would."""
    def touch_range(self, namespace: str, lo: bytes, hi: bytes, key_size: int = -1) -> None:
        """What range_items(namespace, lo, hi, key_size) does to the cache (hits, recency), without
        copying the entries out."""
    def prefix_items(self, namespace: str, prefix: bytes) -> list[tuple[bytes, bytes | None]]:
        """As range_items, for the entries whose key begins with ``prefix``."""
    def lru_keys(self, namespace: str) -> list[bytes]:
        """Keys from least to most recently used (the eviction order)."""
    def move_namespace(self, namespace: str, other: RecordCache) -> None:
        """Move a namespace with all its entries (dirty state kept) into another cache; the other
        cache then evicts from it while over its own limit."""
    def resize(self, max_bytes: int) -> None: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def size_bytes(self) -> int: ...
    def __len__(self) -> int: ...
    def namespace_size(self, namespace: str) -> int:
        """Number of entries in a namespace."""
    def namespace_bytes(self, namespace: str) -> int:
        """Bytes a namespace holds, as counted against max_bytes."""
    @property
    def hits(self) -> int: ...
    @property
    def misses(self) -> int: ...
    @property
    def evictions(self) -> int:
        """Entries evicted to stay within the limit, clean or dirty."""
    @property
    def flushes(self) -> int:
        """Namespace flushes that handed at least one entry to a listener."""
