"""The suppression buffer: an in-memory, time-ordered store of the latest table update per key
(Kafka's ``InMemoryTimeOrderedKeyValueChangeBuffer``), change-logged so a restart restores it.

Each key holds one entry: the newest ``Change(new, old)`` of that key, the value the key had
before it was first buffered (the *prior* value, what the suppressed table still shows), and the
record context (timestamp, headers, topic, partition, offset) of the record that brought the
newest change. Entries are ordered by their *buffer time* (the window end or the record time,
chosen by the suppress processor) and then by serialized key, bytes compared unsigned, as Kafka's
buffer orders them; a key updated while buffered keeps its place (Kafka's non-resetting
semantics), so a rate limit cannot be dodged by updating a key again and again.

An entry's size, which ``BufferConfig.max_bytes`` bounds, is what Kafka's
``InMemoryTimeOrderedKeyValueChangeBuffer`` counts: the buffer time (8), the serialized key, the
prior, old and new values (the old one not again when it equals the prior one), and the record
context's ``residentMemorySizeEstimate`` (timestamp 8, offset 8, partition 4, the topic name's
length, each header's name length and value bytes). A buffer therefore fills at the same record
as Kafka's.

Guarantees: the changelog (``<application.id>-<store>-changelog``, compacted) is written at
``flush``, that is, at commit: the newest entry of every key changed since the last commit, and a
tombstone for every key evicted since, so the tombstone of an emitted entry is in the same commit
as the record emitted from it. Restoring the changelog rebuilds exactly the buffer of the last
commit. The changelog record is Kafka's version 3: its value the record context, prior value,
old value or a marker that it equals the prior one, new value and buffer time, its header ``v``
the version (one byte, 3), so Kafka Streams restores a buffer kstreams wrote and the reverse.
Restoring tells the versions apart by the value's first byte (restore callbacks see no headers):
a version 3 value begins with the record timestamp, whose first byte is 0 for every timestamp
before the year 10^6 (and 0xff for -1); kstreams' earlier values begin with their version byte, 1
or 2. Version 2 values (kstreams 0.2: a version byte then the version 3 body) and version 1 values
(kstreams 0.1: its own layout, keys with a type byte) are still read: a restored entry of either is
written back in version 3 at the next flush (a version 1 entry under its new key, its old key
getting a tombstone).

Keys are serialized as Kafka's suppress buffer serializes them with the table's key serde: a plain
key as the key serde writes it; a windowed key (``WindowedKey``) as Kafka's windowed serializers
do, the inner key's bytes then the window start for time (and sliding) windows, then end and start
for sessions (``WindowedKeyFormat``, from the windowed aggregation upstream). The store is used
only by the thread holding its task (see ``kstreams.state.store``), so it has no lock.
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
    "WindowedKeyFormat",
]

logger = logging.getLogger(__name__)

# The minimum timestamp of an empty buffer: no buffer time reaches it.
EMPTY_MIN_TIMESTAMP = (1 << 63) - 1

# kstreams 0.2's layout: this version byte, then Kafka's version 3 body.
_KSTREAMS_V2 = 2
_LEGACY_VERSION = 1
# Kafka's header of a version 3 buffer changelog record (InMemoryTimeOrderedKeyValueChangeBuffer).
_KAFKA_V3_HEADERS = [("v", b"\x03")]
_VERSION = struct.Struct(">B")
_LONG = struct.Struct(">q")
_LENGTH = struct.Struct(">i")
_CONTEXT_HEAD = struct.Struct(">qq")  # record timestamp, offset
_END_START = struct.Struct(">qq")
# Kafka's BufferValue: an old value equal to the prior one is written as this length, not again.
_OLD_IS_PRIOR = -2
# Version 1 (kstreams' own layout): version, buffer time, record timestamp; keys with a type byte.
_LEGACY_HEADER = struct.Struct(">Bqq")
# A plain key's type byte was 0x00.
_LEGACY_WINDOWED_KEY = b"\x01"
# What Kafka counts for an entry besides its bytes: the buffer time (8), and the record context's
# timestamp, offset and partition (8 + 8 + 4).
_ENTRY_OVERHEAD = 28


@dataclass(frozen=True, slots=True)
class WindowedKeyFormat:
    """How the buffer serializes a ``WindowedKey``: Kafka's ``SessionWindowedSerializer`` layout
    (inner key, end, start) for sessions, else its ``TimeWindowedSerializer`` layout (inner key,
    start), whose end is rebuilt from ``window_size_ms`` (the size of time windows, the time
    difference of sliding windows)."""

    session: bool
    window_size_ms: int = 0


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
    topic: str | None
    partition: int
    offset: int
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


def _java_length(text: str) -> int:
    """``String.toCharArray().length`` in Java: UTF-16 code units, what Kafka counts for names."""
    return len(text.encode("utf-16-le")) // 2


def _entry_size(
    key: bytes,
    prior: bytes | None,
    old: bytes | None,
    new: bytes | None,
    headers: Headers | None,
    topic: str | None,
) -> int:
    """Kafka's ``computeRecordSize`` of an entry (see the module docstring)."""
    size = _ENTRY_OVERHEAD + len(key)
    if topic is not None:
        size += _java_length(topic)
    for name, value in headers or ():
        size += _java_length(name) + (len(value) if value is not None else 0)
    if prior is not None:
        size += len(prior)
    # Kafka's BufferValue keeps one array for an old value equal to the prior one (the first
    # buffering of a key): counted once.
    if old is not None and old != prior:
        size += len(old)
    if new is not None:
        size += len(new)
    return size


def _make_entry(
    key: bytes,
    time: int,
    prior: bytes | None,
    old: bytes | None,
    new: bytes | None,
    timestamp: int,
    headers: Headers | None,
    topic: str | None,
    partition: int,
    offset: int,
) -> _Entry:
    size = _entry_size(key, prior, old, new, headers, topic)
    return _Entry(time, prior, old, new, timestamp, headers, topic, partition, offset, size)


def encode_entry(entry: _Entry) -> bytes:
    """The changelog value of a buffered entry: Kafka's version 3 (see the module docstring)."""
    parts = [_CONTEXT_HEAD.pack(entry.timestamp, entry.offset)]
    # Kafka's record context always has a topic; a punctuation's forward has none here (-1).
    parts.append(_optional_bytes(None if entry.topic is None else entry.topic.encode()))
    parts.append(_LENGTH.pack(entry.partition))
    headers = entry.headers or []
    # No headers is written as -1, which Kafka reads as empty headers.
    parts.append(_LENGTH.pack(len(headers) if entry.headers is not None else -1))
    for name, value in headers:
        parts.append(_optional_bytes(name.encode()))
        parts.append(_optional_bytes(value))
    parts.append(_optional_bytes(entry.prior))
    if entry.old is not None and entry.old == entry.prior:
        parts.append(_LENGTH.pack(_OLD_IS_PRIOR))
    else:
        parts.append(_optional_bytes(entry.old))
    parts.append(_optional_bytes(entry.new))
    parts.append(_LONG.pack(entry.time))
    return b"".join(parts)


def decode_entry(key: bytes, data: bytes, offset: int = 0) -> _Entry:
    """A buffered entry from its version 3 changelog value (see ``encode_entry``) starting at
    ``offset`` (1 in a kstreams version 2 value, after its version byte)."""
    timestamp, record_offset = _CONTEXT_HEAD.unpack_from(data, offset)
    offset += _CONTEXT_HEAD.size
    topic_bytes, offset = _read_optional(data, offset)
    (partition,) = _LENGTH.unpack_from(data, offset)
    offset += _LENGTH.size
    headers, offset = _read_headers(data, offset)
    prior, offset = _read_optional(data, offset)
    (old_length,) = _LENGTH.unpack_from(data, offset)
    if old_length == _OLD_IS_PRIOR:
        old, offset = prior, offset + _LENGTH.size
    else:
        old, offset = _read_optional(data, offset)
    new, offset = _read_optional(data, offset)
    (time,) = _LONG.unpack_from(data, offset)
    topic = None if topic_bytes is None else topic_bytes.decode()
    return _make_entry(key, time, prior, old, new, timestamp, headers, topic, partition, record_offset)


def _read_headers(data: bytes, offset: int) -> tuple[Headers | None, int]:
    (count,) = _LENGTH.unpack_from(data, offset)
    offset += _LENGTH.size
    if count < 0:
        return None, offset
    headers: Headers = []
    for _ in range(count):
        name, offset = _read_optional(data, offset)
        value, offset = _read_optional(data, offset)
        headers.append(((name or b"").decode(), value))
    return headers, offset


def decode_legacy_entry(
    data: bytes,
) -> tuple[int, int, bytes | None, bytes | None, bytes | None, Headers | None]:
    """(buffer time, record timestamp, prior, old, new, headers) of a version 1 changelog value."""
    _, time, timestamp = _LEGACY_HEADER.unpack_from(data, 0)
    offset = _LEGACY_HEADER.size
    prior, offset = _read_optional(data, offset)
    old, offset = _read_optional(data, offset)
    new, offset = _read_optional(data, offset)
    headers, _ = _read_headers(data, offset)
    return time, timestamp, prior, old, new, headers


class InMemoryTimeOrderedKeyValueBuffer(StateStore):
    """The latest change per key, ordered by buffer time (see the module docstring).

    ``key_serde`` (of plain keys, or of the keys inside windows) and ``value_serde`` may be None
    until ``with_default_serdes`` binds the application's defaults (the suppress processor does,
    at init). ``window_format`` says how windowed keys are written: a buffer without one holds
    plain keys only.
    """

    def __init__(
        self,
        name: str,
        key_serde: Any,
        value_serde: Any,
        logging_enabled: bool = True,
        window_format: WindowedKeyFormat | None = None,
    ) -> None:
        self._name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.logging_enabled = logging_enabled
        self.window_format = window_format
        self._index: dict[bytes, _Entry] = {}
        # (buffer time, key): entries whose key left the index or got a new time are stale and
        # skipped when they reach the top.
        self._heap: list[tuple[int, bytes]] = []
        # Keys changed since the last flush -> the timestamp of their latest change, for the
        # changelog record (a tombstone's is the evicted record's).
        self._dirty: dict[bytes, int] = {}
        self._size = 0
        self._topic = name
        self._log_change: Callable[..., None] | None = None
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
                log(self._name, key, encode_entry(entry), entry.timestamp, headers=_KAFKA_V3_HEADERS)
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
        """The bytes the buffer holds: keys, values and record contexts, as Kafka counts them
        (see the module docstring)."""
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

    def put(
        self,
        time: int,
        key: Any,
        new: Any,
        old: Any,
        timestamp: int,
        headers: Headers | None,
        *,
        topic: str | None = None,
        partition: int = -1,
        offset: int = -1,
    ) -> None:
        """Buffer ``Change(new, old)`` of ``key`` from a record at ``timestamp``, at buffer ``time``
        unless the key is buffered already (it then keeps its time and its prior value).
        ``topic``, ``partition`` and ``offset`` are the record's context (counted in the size and
        kept in the changelog, as Kafka does)."""
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
        entry = _make_entry(
            key_bytes, time_kept, prior, old_bytes, new_bytes, timestamp, headers, topic, partition, offset
        )
        self._index[key_bytes] = entry
        self._size += entry.size
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
            self._remove(key)
            if value is None:
                continue
            value = bytes(value)
            (first,) = _VERSION.unpack_from(value, 0)
            try:
                if first == _LEGACY_VERSION:
                    self._restore_legacy(key, value)
                    continue
                if first == _KSTREAMS_V2:
                    entry = decode_entry(key, value, _VERSION.size)
                    if self.logging_enabled:
                        self._dirty[key] = entry.timestamp  # written again in version 3
                else:
                    entry = decode_entry(key, value)
            except (struct.error, UnicodeDecodeError) as exc:
                raise ProcessorStateException(
                    f"A suppression buffer changelog record of {self._name} cannot be read ({exc}): this "
                    "kstreams reads Kafka's version 3 and kstreams' versions 1 and 2. Reset the "
                    "application (or delete the changelog) to rebuild the buffer."
                ) from exc
            self._insert(key, entry)

    def _restore_legacy(self, legacy_key: bytes, value: bytes) -> None:
        """A version 1 entry under its version 2 key; both keys are marked dirty, so the next
        flush writes the entry anew and a tombstone for the old key (which nothing else deletes
        in the compacted changelog)."""
        time, timestamp, prior, old, new, headers = decode_legacy_entry(value)
        if legacy_key[:1] == _LEGACY_WINDOWED_KEY:
            start, end = _END_START.unpack_from(legacy_key, 1)  # version 1 wrote start first
            key = self._pack_window(legacy_key[1 + _END_START.size :], start, end)
        else:
            key = legacy_key[1:]
        self._remove(key)
        self._insert(key, _make_entry(key, time, prior, old, new, timestamp, headers, None, -1, -1))
        if self.logging_enabled:
            self._dirty[legacy_key] = timestamp
            self._dirty[key] = timestamp

    def _insert(self, key: bytes, entry: _Entry) -> None:
        self._index[key] = entry
        self._size += entry.size
        heapq.heappush(self._heap, (entry.time, key))

    def _remove(self, key: bytes) -> None:
        # The heap's item of a removed key is skipped when it reaches the top (min_timestamp).
        previous = self._index.pop(key, None)
        if previous is not None:
            self._size -= previous.size

    def _serialize_key(self, key: Any) -> bytes:
        if isinstance(key, WindowedKey):
            inner = self._serde("key").serialize(self._topic, key.key)
            return self._pack_window(bytes(inner or b""), key.start, key.end)
        data = self._serde("key").serialize(self._topic, key)
        if data is None:
            raise ProcessorStateException(f"Suppression buffer {self._name} cannot hold a null key.")
        return bytes(data)

    def _pack_window(self, inner: bytes, start: int, end: int) -> bytes:
        window_format = self.window_format
        if window_format is None:
            raise ProcessorStateException(
                f"Suppression buffer {self._name} got a windowed key, but its table was not found to "
                "come from a windowed aggregation, so the buffer does not know how to write its "
                "window: give the table a windowed key serde (WindowedSerdes) or suppress the "
                "windowed aggregation's table itself."
            )
        if window_format.session:
            return inner + _END_START.pack(end, start)
        return inner + _LONG.pack(start)

    def _deserialize_key(self, data: bytes) -> Any:
        serde = self._serde("key")
        window_format = self.window_format
        if window_format is None:
            return serde.deserialize(self._topic, data)
        if window_format.session:
            split = len(data) - _END_START.size
            end, start = _END_START.unpack_from(data, split)
        else:
            split = len(data) - _LONG.size
            (start,) = _LONG.unpack_from(data, split)
            end = start + window_format.window_size_ms
        return WindowedKey(serde.deserialize(self._topic, data[:split]), start, end)

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

    def __init__(
        self,
        name: str,
        key_serde: Any = None,
        value_serde: Any = None,
        window_format: WindowedKeyFormat | None = None,
    ) -> None:
        super().__init__(name)
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.window_format = window_format

    @property
    def store_type(self) -> str:
        return "keyvalue"

    def with_caching_enabled(self) -> StoreBuilder:
        return self

    def build(self) -> InMemoryTimeOrderedKeyValueBuffer:
        return InMemoryTimeOrderedKeyValueBuffer(
            self.name, self.key_serde, self.value_serde, self.logging_enabled, self.window_format
        )
