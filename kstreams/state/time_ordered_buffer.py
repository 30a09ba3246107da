"""The suppression buffer: an in-memory, time-ordered store of the latest table update per key
(Kafka's ``InMemoryTimeOrderedKeyValueChangeBuffer``), change-logged so a restart restores it.

Each key holds one entry: the newest ``Change(new, old)`` of that key, the value the key had
before it was first buffered (the *prior* value, what the suppressed table still shows), and the
timestamp and headers of the record that brought the newest change. Entries are ordered by their
*buffer time* (the window end or the record time, chosen by the suppress processor) and then by
serialized key; a key updated while buffered keeps its place (Kafka's non-resetting semantics), so
a rate limit cannot be dodged by updating a key again and again.

Guarantees: the changelog (``<application.id>-<store>-changelog``, compacted) is written at
``flush``, that is, at commit: the newest entry of every key changed since the last commit, and a
tombstone for every key evicted since, so the tombstone of an emitted entry is in the same commit
as the record emitted from it. Restoring the changelog rebuilds exactly the buffer of the last
commit. The changelog value layout is kstreams' own (a version byte, buffer time, record
timestamp, prior/old/new values, headers); Kafka's binary layout is not reproduced.

Keys are serialized with the key serde, windowed keys (``WindowedKey``) as their window and inner
key, so the buffer serves windowed and plain tables alike. The store is used only by the thread
holding its task (see ``kstreams.state.store``), so it has no lock.
"""

from __future__ import annotations

import heapq
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kstreams.errors import ProcessorStateException
from kstreams.processor import Headers
from kstreams.state.store import StateStore, StateStoreContext, StoreBuilder, WindowedKey

__all__ = [
    "BufferedRecord",
    "InMemoryTimeOrderedKeyValueBuffer",
    "TimeOrderedKeyValueBufferBuilder",
]

logger = logging.getLogger(__name__)

# The minimum timestamp of an empty buffer: no buffer time reaches it.
EMPTY_MIN_TIMESTAMP = (1 << 63) - 1

_CHANGELOG_VERSION = 1
_HEADER = struct.Struct(">Bqq")  # version, buffer time, record timestamp
_LENGTH = struct.Struct(">i")
_WINDOW = struct.Struct(">qq")
_PLAIN_KEY = b"\x00"
_WINDOWED_KEY = b"\x01"
# What Kafka counts for a buffered record's context besides its bytes: timestamp, offset and
# partition (8 + 8 + 4), and the buffer time (8).
_ENTRY_OVERHEAD = 28


@dataclass(frozen=True, slots=True)
class BufferedRecord:
    """What an eviction hands the suppress processor: the key, the newest change and the record
    (timestamp, headers) it came with."""

    key: Any
    new_value: Any
    old_value: Any
    timestamp: int
    headers: Headers | None


@dataclass(slots=True)
class _Entry:
    time: int
    prior: bytes | None
    old: bytes | None
    new: bytes | None
    timestamp: int
    headers: Headers | None
    size: int


def _optional_bytes(data: bytes | None) -> bytes:
    if data is None:
        return _LENGTH.pack(-1)
    return _LENGTH.pack(len(data)) + data


def _read_optional(data: bytes, offset: int) -> tuple[bytes | None, int]:
    (length,) = _LENGTH.unpack_from(data, offset)
    offset += _LENGTH.size
    if length < 0:
        return None, offset
    return bytes(data[offset : offset + length]), offset + length


def _headers_size(headers: Headers | None) -> int:
    if not headers:
        return 0
    return sum(len(name) + (len(value) if value is not None else 0) for name, value in headers)


def _entry_size(key: bytes, prior: bytes | None, old: bytes | None, new: bytes | None, headers: Any) -> int:
    size = _ENTRY_OVERHEAD + len(key) + _headers_size(headers)
    # The prior value is usually the old one (the first buffering of a key): counted once then.
    for part in (old, new) if prior is old else (prior, old, new):
        if part is not None:
            size += len(part)
    return size


def encode_entry(entry: _Entry) -> bytes:
    """The changelog value of a buffered entry."""
    parts = [
        _HEADER.pack(_CHANGELOG_VERSION, entry.time, entry.timestamp),
        _optional_bytes(entry.prior),
        _optional_bytes(entry.old),
        _optional_bytes(entry.new),
    ]
    headers = entry.headers or []
    parts.append(_LENGTH.pack(len(headers) if entry.headers is not None else -1))
    for name, value in headers:
        parts.append(_optional_bytes(name.encode()))
        parts.append(_optional_bytes(value))
    return b"".join(parts)


def decode_entry(key: bytes, data: bytes) -> _Entry:
    """A buffered entry from its changelog value (see ``encode_entry``)."""
    version, time, timestamp = _HEADER.unpack_from(data, 0)
    if version != _CHANGELOG_VERSION:
        raise ProcessorStateException(
            f"A suppression buffer changelog record has version {version}; this kstreams reads version "
            f"{_CHANGELOG_VERSION}. Reset the application (or delete the changelog) to rebuild the buffer."
        )
    offset = _HEADER.size
    prior, offset = _read_optional(data, offset)
    old, offset = _read_optional(data, offset)
    new, offset = _read_optional(data, offset)
    (count,) = _LENGTH.unpack_from(data, offset)
    offset += _LENGTH.size
    headers: Headers | None = None
    if count >= 0:
        headers = []
        for _ in range(count):
            name, offset = _read_optional(data, offset)
            value, offset = _read_optional(data, offset)
            headers.append(((name or b"").decode(), value))
    if prior == old:
        prior = old  # one object again, so its size is counted once
    return _Entry(time, prior, old, new, timestamp, headers, _entry_size(key, prior, old, new, headers))


class InMemoryTimeOrderedKeyValueBuffer(StateStore):
    """The latest change per key, ordered by buffer time (see the module docstring).

    ``key_serde`` and ``value_serde`` may be None until ``with_default_serdes`` binds the
    application's defaults (the suppress processor does, at init).
    """

    def __init__(self, name: str, key_serde: Any, value_serde: Any, logging_enabled: bool = True) -> None:
        self._name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.logging_enabled = logging_enabled
        self._index: dict[bytes, _Entry] = {}
        # (buffer time, key): entries whose key left the index or got a new time are stale and
        # skipped when they reach the top.
        self._heap: list[tuple[int, bytes]] = []
        # Keys changed since the last flush -> the timestamp of their latest change, for the
        # changelog record (a tombstone's is the evicted record's).
        self._dirty: dict[bytes, int] = {}
        self._size = 0
        self._topic = name
        self._log_change: Callable[[str, bytes, bytes | None, int], None] | None = None
        self._open = False

    # ------------------------------------------------------------------ StateStore

    @property
    def name(self) -> str:
        return self._name

    @property
    def is_open(self) -> bool:
        return self._open

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._topic = f"{context.application_id}-{self._name}-changelog"
        if self.logging_enabled:
            self._log_change = context.log_change
            context.register(root, self._restore)
        self._open = True

    def flush(self) -> None:
        """Write the newest entry of every key changed since the last flush to the changelog, and a
        tombstone for every key evicted since."""
        log = self._log_change
        if log is None or not self._dirty:
            self._dirty.clear()
            return
        for key, timestamp in self._dirty.items():
            entry = self._index.get(key)
            if entry is None:
                log(self._name, key, None, timestamp)
            else:
                log(self._name, key, encode_entry(entry), entry.timestamp)
        self._dirty.clear()

    def close(self) -> None:
        self._open = False
        self._index.clear()
        self._heap.clear()
        self._dirty.clear()
        self._size = 0

    def with_default_serdes(self, key_serde: Any, value_serde: Any) -> None:
        """Use the application's default serdes where the topology gave none."""
        if self.key_serde is None:
            self.key_serde = key_serde
        if self.value_serde is None:
            self.value_serde = value_serde

    # ------------------------------------------------------------------ the buffer

    def num_records(self) -> int:
        return len(self._index)

    def buffer_size(self) -> int:
        """The bytes the buffer holds: keys, values and record contexts, as Kafka counts them."""
        return self._size

    def min_timestamp(self) -> int:
        """The smallest buffer time of the entries (a huge number when empty)."""
        heap = self._heap
        while heap:
            time, key = heap[0]
            entry = self._index.get(key)
            if entry is not None and entry.time == time:
                return time
            heapq.heappop(heap)
        return EMPTY_MIN_TIMESTAMP

    def put(self, time: int, key: Any, new: Any, old: Any, timestamp: int, headers: Headers | None) -> None:
        """Buffer ``Change(new, old)`` of ``key`` from a record at ``timestamp``, at buffer ``time``
        unless the key is buffered already (it then keeps its time and its prior value)."""
        key_bytes = self._serialize_key(key)
        old_bytes = self._serialize_value(old)
        new_bytes = self._serialize_value(new)
        buffered = self._index.get(key_bytes)
        if buffered is None:
            prior = old_bytes
            time_kept = time
        else:
            prior = buffered.prior
            time_kept = buffered.time
            self._size -= buffered.size
        size = _entry_size(key_bytes, prior, old_bytes, new_bytes, headers)
        entry = _Entry(time_kept, prior, old_bytes, new_bytes, timestamp, headers, size)
        self._index[key_bytes] = entry
        self._size += size
        if buffered is None:
            heapq.heappush(self._heap, (time_kept, key_bytes))
        if self.logging_enabled:
            self._dirty[key_bytes] = timestamp

    def evict_while(self, predicate: Callable[[], bool], callback: Callable[[BufferedRecord], None]) -> int:
        """Hand the oldest entry to ``callback`` and remove it, while ``predicate()`` holds; returns
        how many were evicted. An entry is removed after its callback returned."""
        evicted = 0
        while self._index and predicate():
            self.min_timestamp()  # drops stale heads
            _, key_bytes = self._heap[0]
            entry = self._index[key_bytes]
            callback(
                BufferedRecord(
                    self._deserialize_key(key_bytes),
                    self._deserialize_value(entry.new),
                    self._deserialize_value(entry.old),
                    entry.timestamp,
                    entry.headers,
                )
            )
            heapq.heappop(self._heap)
            del self._index[key_bytes]
            self._size -= entry.size
            if self.logging_enabled:
                self._dirty[key_bytes] = entry.timestamp
            evicted += 1
        return evicted

    def prior_value_for_buffered(self, key: Any) -> tuple[bool, Any]:
        """(True, the value ``key`` had before it was buffered) when it is buffered, else (False, None)."""
        entry = self._index.get(self._serialize_key(key))
        if entry is None:
            return False, None
        return True, self._deserialize_value(entry.prior)

    # ------------------------------------------------------------------ restore and serdes

    def _restore(self, batch: list[tuple[bytes, bytes | None]]) -> None:
        for key, value in batch:
            key = bytes(key)
            previous = self._index.pop(key, None)
            if previous is not None:
                self._size -= previous.size
            if value is None:
                continue
            entry = decode_entry(key, bytes(value))
            self._index[key] = entry
            self._size += entry.size
            heapq.heappush(self._heap, (entry.time, key))

    def _serialize_key(self, key: Any) -> bytes:
        if isinstance(key, WindowedKey):
            inner = self._serde("key").serialize(self._topic, key.key)
            return _WINDOWED_KEY + _WINDOW.pack(key.start, key.end) + (inner or b"")
        data = self._serde("key").serialize(self._topic, key)
        if data is None:
            raise ProcessorStateException(f"Suppression buffer {self._name} cannot hold a null key.")
        return bytes(_PLAIN_KEY + data)

    def _deserialize_key(self, data: bytes) -> Any:
        serde = self._serde("key")
        if data[:1] == _WINDOWED_KEY:
            start, end = _WINDOW.unpack_from(data, 1)
            return WindowedKey(serde.deserialize(self._topic, data[1 + _WINDOW.size :]), start, end)
        return serde.deserialize(self._topic, data[1:])

    def _serialize_value(self, value: Any) -> bytes | None:
        if value is None:
            return None
        data = self._serde("value").serialize(self._topic, value)
        return None if data is None else bytes(data)

    def _deserialize_value(self, data: bytes | None) -> Any:
        return None if data is None else self._serde("value").deserialize(self._topic, data)

    def _serde(self, which: str) -> Any:
        serde = self.key_serde if which == "key" else self.value_serde
        if serde is None:
            raise ProcessorStateException(
                f"Suppression buffer {self._name} has no {which} serde: give the suppressed table's "
                f"{which} serde (Materialized.with_{which}_serde) or set default.{which}.serde."
            )
        return serde

    def __repr__(self) -> str:
        return (
            f"InMemoryTimeOrderedKeyValueBuffer({self._name!r}, records={len(self._index)}, "
            f"bytes={self._size}, logging={self.logging_enabled})"
        )


class TimeOrderedKeyValueBufferBuilder(StoreBuilder):
    """Builds one suppression buffer per task. Change-logged by default (a compacted changelog);
    caching does not apply to a buffer and is ignored, as in Kafka."""

    def __init__(self, name: str, key_serde: Any = None, value_serde: Any = None) -> None:
        super().__init__(name)
        self.key_serde = key_serde
        self.value_serde = value_serde

    @property
    def store_type(self) -> str:
        return "keyvalue"

    def with_caching_enabled(self) -> StoreBuilder:
        return self

    def build(self) -> InMemoryTimeOrderedKeyValueBuffer:
        return InMemoryTimeOrderedKeyValueBuffer(
            self.name, self.key_serde, self.value_serde, self.logging_enabled
        )
