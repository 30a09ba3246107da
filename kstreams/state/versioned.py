"""Versioned key-value stores (KIP-889): every value a key had, each with the time it became valid.

``VersionedKeyValueStore`` is the interface; ``VersionedBytesStore`` the inner store of bytes that
implements it over a plain key-value store (in memory or RocksDB) holding, per key, the list of the
key's versions. The guarantees are Kafka's:

- A version is ``(value, timestamp)``; it is valid from its timestamp until the next version's
  (``valid_to``), the latest one until further notice (``valid_to`` None). A deletion is a version
  with no value (a tombstone): ``get`` as of a time it covers gives None.
- The store tracks its *observed stream time*, the largest timestamp put. History older than
  ``observed stream time - history retention`` is not kept: ``get(key, as_of)`` for such a time
  answers only from the latest version (which never expires) and else gives None, and a put with
  such a timestamp is dropped (the grace period equals the history retention), returning
  ``PUT_RETURN_CODE_NOT_PUT``.
- A put at a timestamp that already has a version replaces that version's value.
- ``put`` returns the new version's ``valid_to``, or ``PUT_RETURN_CODE_VALID_TO_UNDEFINED`` when
  it became the latest; ``delete(key, timestamp)`` returns the record that was valid at that time.

Restore: the changelog holds one record per put, key and value as put and the version's timestamp
as the record timestamp (Kafka's layout); replaying it in order rebuilds the same versions. The
inner store asks the task for the records' timestamps (``with_timestamps`` on its restore callback).
Like every store, one task's thread uses it at a time; it has no lock.
"""

from __future__ import annotations

import abc
import bisect
import logging
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kstreams.state.store import KeyValueStore, RestoreCallback, StateStore, StateStoreContext

__all__ = [
    "PUT_RETURN_CODE_NOT_PUT",
    "PUT_RETURN_CODE_VALID_TO_UNDEFINED",
    "TimestampedRestoreCallback",
    "VersionedBytesStore",
    "VersionedKeyValueStore",
    "VersionedRecord",
]

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")

# Kafka's VersionedKeyValueStore return codes of put().
PUT_RETURN_CODE_VALID_TO_UNDEFINED = -1
PUT_RETURN_CODE_NOT_PUT = -(2**63)

# A key's versions, oldest first: 8-byte timestamp, 4-byte value length (-1: tombstone), value.
_HEADER = struct.Struct(">qi")
_TOMBSTONE = -1
# What a changelog batch carries to a timestamped restore: key, value (None deletes), timestamp.
TimestampedChangelogRecord = tuple[bytes, "bytes | None", int]


@dataclass(frozen=True, slots=True)
class VersionedRecord(Generic[V]):
    """One version of a key: its value, the time it became valid, and the time the next version
    replaced it (None for the latest version)."""

    value: V
    timestamp: int
    valid_to: int | None = None


class VersionedKeyValueStore(StateStore, Generic[K, V]):
    """A key-value store that keeps each key's history for ``history_retention_ms``."""

    @property
    @abc.abstractmethod
    def history_retention_ms(self) -> int: ...

    @abc.abstractmethod
    def put(self, key: K, value: V | None, timestamp: int) -> int:
        """Add the version ``value`` (None: a deletion) valid from ``timestamp``; returns its
        valid_to, ``PUT_RETURN_CODE_VALID_TO_UNDEFINED`` if it is the latest, or
        ``PUT_RETURN_CODE_NOT_PUT`` if ``timestamp`` is older than the history retention."""

    @abc.abstractmethod
    def delete(self, key: K, timestamp: int) -> VersionedRecord[V] | None:
        """Put a deletion at ``timestamp``; returns the record valid at that time (None if none)."""

    @abc.abstractmethod
    def get(self, key: K, as_of_timestamp: int | None = None) -> VersionedRecord[V] | None:
        """The latest version (``as_of_timestamp`` None), or the one valid at that time; None when
        that is a deletion, when there is none, or when the time is beyond the history retention
        and the latest version is newer."""


def _decode(data: bytes | None) -> list[tuple[int, bytes | None]]:
    versions: list[tuple[int, bytes | None]] = []
    if data is None:
        return versions
    pos, end = 0, len(data)
    while pos < end:
        timestamp, length = _HEADER.unpack_from(data, pos)
        pos += _HEADER.size
        if length == _TOMBSTONE:
            versions.append((timestamp, None))
        else:
            versions.append((timestamp, data[pos : pos + length]))
            pos += length
    return versions


def _encode(versions: list[tuple[int, bytes | None]]) -> bytes | None:
    if not versions:
        return None
    out = bytearray()
    for timestamp, value in versions:
        if value is None:
            out += _HEADER.pack(timestamp, _TOMBSTONE)
        else:
            out += _HEADER.pack(timestamp, len(value))
            out += value
    return bytes(out)


class TimestampedRestoreCallback:
    """A restore callback that takes (key, value, record timestamp) triples: the task passes the
    changelog records' timestamps to callbacks whose ``with_timestamps`` is True."""

    with_timestamps = True

    def __init__(self, store: VersionedBytesStore) -> None:
        self._store = store

    def __call__(self, records: list[TimestampedChangelogRecord]) -> None:
        self._store.restore_versions(records)


class _RegisterAs:
    """The task's context as the inner key-value store sees it: its restore registration is
    replaced by the versioned store's, which needs the changelog records' timestamps."""

    def __init__(self, context: StateStoreContext, callback: TimestampedRestoreCallback) -> None:
        self._context = context
        self._callback = callback

    def register(self, store: StateStore, restore_callback: RestoreCallback) -> None:
        self._context.register(store, self._callback)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


class VersionedBytesStore(VersionedKeyValueStore[bytes, bytes]):
    """The inner versioned store: each key's versions, encoded oldest first, as one value of a
    key-value store of bytes (in memory or RocksDB)."""

    def __init__(self, inner: KeyValueStore[bytes, bytes], history_retention_ms: int) -> None:
        self._inner = inner
        self._history_retention_ms = history_retention_ms
        self._observed_stream_time = -1

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def persistent(self) -> bool:
        return self._inner.persistent

    @property
    def is_open(self) -> bool:
        return self._inner.is_open

    @property
    def history_retention_ms(self) -> int:
        return self._history_retention_ms

    @property
    def observed_stream_time(self) -> int:
        return self._observed_stream_time

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._inner.init(_RegisterAs(context, TimestampedRestoreCallback(self)), root)  # type: ignore[arg-type]
        # A persistent store reopened holds versions already: its stream time is their newest.
        self._observed_stream_time = -1
        for _, data in self._inner.all():
            for timestamp, _ in _decode(data):
                self._observed_stream_time = max(self._observed_stream_time, timestamp)

    def flush(self) -> None:
        self._inner.flush()

    def close(self) -> None:
        self._inner.close()

    def restore_versions(self, records: list[TimestampedChangelogRecord]) -> None:
        """Replay changelog records in order, as the puts that wrote them."""
        for key, value, timestamp in records:
            self.put(key, value, timestamp)

    # ---- reads and writes

    def _horizon(self) -> int:
        """The oldest time the store still answers for (history before it has expired)."""
        return self._observed_stream_time - self._history_retention_ms

    def put(self, key: bytes, value: bytes | None, timestamp: int) -> int:
        if timestamp < 0:
            raise ValueError(f"A versioned store's timestamps cannot be negative, got {timestamp}.")
        if timestamp < self._horizon():
            logger.debug(
                "Store %s skipped a put at %d: older than its history retention", self.name, timestamp
            )
            return PUT_RETURN_CODE_NOT_PUT
        self._observed_stream_time = max(self._observed_stream_time, timestamp)
        versions = _decode(self._inner.get(key))
        times = [t for t, _ in versions]
        index = bisect.bisect_left(times, timestamp)
        if index < len(versions) and times[index] == timestamp:
            latest = index == len(versions) - 1 and versions[index][1] is not None
            if value is None and latest and (index == 0 or versions[index - 1][1] is None):
                # As Kafka's RocksDBVersionedStore: a deletion at the latest version's own time
                # removes it from the latest-value store and records nothing in the history; only
                # an earlier value (moved to the history valid to this time) keeps the time. Here
                # there is none, so an older version put next is the latest.
                del versions[index]
                self._inner.put(key, _encode(self._expire(versions)) if versions else None)
                return PUT_RETURN_CODE_VALID_TO_UNDEFINED
            versions[index] = (timestamp, value)
        else:
            versions.insert(index, (timestamp, value))
        valid_to = versions[index + 1][0] if index + 1 < len(versions) else PUT_RETURN_CODE_VALID_TO_UNDEFINED
        self._inner.put(key, _encode(self._expire(versions)))
        return valid_to

    def _expire(self, versions: list[tuple[int, bytes | None]]) -> list[tuple[int, bytes | None]]:
        """Drop the versions no read can reach any more: those replaced before the horizon, and a
        latest deletion made before it."""
        horizon = self._horizon()
        first = 0
        while first + 1 < len(versions) and versions[first + 1][0] <= horizon:
            first += 1
        kept = versions[first:]
        if len(kept) == 1 and kept[0][1] is None and kept[0][0] <= horizon:
            return []
        return kept

    def delete(self, key: bytes, timestamp: int) -> VersionedRecord[bytes] | None:
        existing = self.get(key, timestamp)
        self.put(key, None, timestamp)
        return existing

    def get(self, key: bytes, as_of_timestamp: int | None = None) -> VersionedRecord[bytes] | None:
        versions = _decode(self._inner.get(key))
        if not versions:
            return None
        if as_of_timestamp is None:
            timestamp, value = versions[-1]
            return None if value is None else VersionedRecord(value, timestamp)
        if as_of_timestamp < self._horizon():
            # Beyond the history retention only the latest version (which never expires) answers.
            timestamp, value = versions[-1]
            if value is not None and timestamp <= as_of_timestamp:
                return VersionedRecord(value, timestamp)
            return None
        index = bisect.bisect_right([t for t, _ in versions], as_of_timestamp) - 1
        if index < 0:
            return None
        timestamp, value = versions[index]
        if value is None:
            return None
        valid_to = versions[index + 1][0] if index + 1 < len(versions) else None
        return VersionedRecord(value, timestamp, valid_to)

    def all_versions(self) -> Iterator[tuple[bytes, list[tuple[int, bytes | None]]]]:
        """Every key with its versions, oldest first (expired ones may still be among them)."""
        for key, data in self._inner.all():
            yield key, _decode(data)
