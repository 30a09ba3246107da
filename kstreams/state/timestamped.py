"""Timestamped stores: key-value and window stores whose values carry a timestamp (Kafka's
``TimestampedKeyValueStore`` and ``TimestampedWindowStore``), and plain-value facades over them.

A timestamped store takes and returns ``ValueAndTimestamp``; below its metered layer every layer
holds Kafka's bytes (8-byte big-endian timestamp, then the value's own bytes), so the timestamp
survives the record cache; the changelog holds the plain value in a record stamped with that
timestamp, as Kafka's does, and restoring puts it back in front
(``kstreams.state.changelogging``). The builders (``builders.py``) take the *value's* serde, as
Kafka's do: the metered layer adds the timestamp around it, so the application's default value
serde still fills a serde left None.

The DSL keeps its tables and aggregations in these stores. Readers that expect plain values
(interactive queries, ``TopologyTestDriver.get_key_value_store``) see them through the facades,
as Kafka's ``KeyValueStoreFacade`` and ``ReadOnlyWindowStoreFacade`` do: values without
timestamps, and a plain put stamped with no timestamp (-1).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from kstreams.serdes import Serdes
from kstreams.state.metered import MeteredKeyValueStore, MeteredWindowStore
from kstreams.state.store import WindowedKey
from kstreams.state.value_and_timestamp import TIMESTAMP_BYTES, ValueAndTimestamp, raw_timestamp

__all__ = [
    "NO_TIMESTAMP",
    "KeyValueStoreFacade",
    "MeteredTimestampedKeyValueStore",
    "MeteredTimestampedWindowStore",
    "WindowStoreFacade",
    "is_timestamped",
    "plain_value_view",
]

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")

# Kafka's ConsumerRecord.NO_TIMESTAMP: what a facade stamps on a value put without a timestamp.
NO_TIMESTAMP = -1

_TIMESTAMP = struct.Struct(">q")
# A timestamp and a long value (Serdes.long()), the values of counts: read and written in one step.
_TIMESTAMP_LONG = struct.Struct(">qq")
_LONG_SERDE = Serdes.long()


class _TimestampedValues:
    """The value (de)serialization of a timestamped metered layer: ``ValueAndTimestamp`` in and
    out, the timestamp as 8 bytes before the bytes of ``value_serde``. Mixed in before a metered
    layer, whose ``_value_bytes``/``_value`` handle the plain value."""

    timestamped = True

    def _value_bytes(self, value: Any) -> bytes | None:
        if value is None:
            return None
        if not isinstance(value, ValueAndTimestamp):
            raise TypeError(
                f"Timestamped store {self.name} holds ValueAndTimestamp values, got "  # type: ignore[attr-defined]
                f"{type(value).__name__}: put ValueAndTimestamp.make(value, timestamp)."
            )
        return self._stamped_bytes(value.value, value.timestamp)

    def _value(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) == _TIMESTAMP_LONG.size and self.value_serde is _LONG_SERDE:  # type: ignore[attr-defined]
            # Counts, read per record by the DSL's aggregations: one struct step.
            timestamp, count = _TIMESTAMP_LONG.unpack(data)
            return ValueAndTimestamp.make(count, timestamp)
        if len(data) < TIMESTAMP_BYTES:
            raise ValueError(
                f"Timestamped store {self.name}: stored bytes must start with an 8-byte timestamp, "  # type: ignore[attr-defined]
                f"got {len(data)} bytes (a store written before it was timestamped? reset its state)."
            )
        value = super()._value(data[TIMESTAMP_BYTES:])  # type: ignore[misc]
        return ValueAndTimestamp.make(value, raw_timestamp(data))

    def _stamped_bytes(self, value: Any, timestamp: int) -> bytes | None:
        """``_value_bytes(ValueAndTimestamp.make(value, timestamp))`` without making one (batch
        steps write many)."""
        if value is None:
            return None
        if type(value) is int and self.value_serde is _LONG_SERDE:  # type: ignore[attr-defined]
            try:
                return _TIMESTAMP_LONG.pack(timestamp, value)
            except struct.error:
                pass  # out of range: the serde says so in its own words below
        data: bytes | None = super()._value_bytes(value)  # type: ignore[misc]
        return None if data is None else _TIMESTAMP.pack(timestamp) + data

    def _stamped_value(self, data: bytes | None) -> tuple[Any, int] | None:
        """(value, timestamp) of what ``_value(data)`` reads, None where it reads None, without
        making a ``ValueAndTimestamp`` (batch steps read many)."""
        if data is None:
            return None
        if len(data) == _TIMESTAMP_LONG.size and self.value_serde is _LONG_SERDE:  # type: ignore[attr-defined]
            timestamp, count = _TIMESTAMP_LONG.unpack(data)
            return count, timestamp
        if len(data) < TIMESTAMP_BYTES:
            return self._value(data)  # type: ignore[no-any-return]  # raises: not timestamped bytes
        value = super()._value(data[TIMESTAMP_BYTES:])  # type: ignore[misc]
        return None if value is None else (value, raw_timestamp(data))


class MeteredTimestampedKeyValueStore(_TimestampedValues, MeteredKeyValueStore[K, Any], Generic[K, V]):
    """A typed key-value store of ``ValueAndTimestamp[V]`` (Kafka's ``MeteredTimestampedKeyValueStore``)."""


class MeteredTimestampedWindowStore(_TimestampedValues, MeteredWindowStore[K, Any], Generic[K, V]):
    """A typed window store of ``ValueAndTimestamp[V]`` (Kafka's ``MeteredTimestampedWindowStore``)."""


def is_timestamped(store_or_builder: Any) -> bool:
    """Whether a store (or store builder) holds ``ValueAndTimestamp`` values."""
    return bool(getattr(store_or_builder, "timestamped", False))


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, ValueAndTimestamp) else value


class _Facade:
    """Delegates everything but value reads and writes to the timestamped store it wraps, so the
    query views still find ``is_open``, ``query_lock`` and the store's name."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


class KeyValueStoreFacade(_Facade, Generic[K, V]):
    """Plain values over a timestamped key-value store (Kafka's ``KeyValueStoreFacade``)."""

    def get(self, key: K) -> V | None:
        return _plain(self.inner.get(key))  # type: ignore[no-any-return]

    def put(self, key: K, value: V | None) -> None:
        self.inner.put(key, ValueAndTimestamp.make(value, NO_TIMESTAMP))

    def put_if_absent(self, key: K, value: V) -> V | None:
        return _plain(self.inner.put_if_absent(key, ValueAndTimestamp.make(value, NO_TIMESTAMP)))  # type: ignore[no-any-return]

    def put_all(self, entries: list[tuple[K, V | None]]) -> None:
        self.inner.put_all([(k, ValueAndTimestamp.make(v, NO_TIMESTAMP)) for k, v in entries])

    def delete(self, key: K) -> V | None:
        return _plain(self.inner.delete(key))  # type: ignore[no-any-return]

    def range(self, from_key: K | None, to_key: K | None) -> Iterator[tuple[K, V]]:
        return _plain_entries(self.inner.range(from_key, to_key))

    def reverse_range(self, from_key: K | None, to_key: K | None) -> Iterator[tuple[K, V]]:
        return _plain_entries(self.inner.reverse_range(from_key, to_key))

    def all(self) -> Iterator[tuple[K, V]]:
        return _plain_entries(self.inner.all())

    def prefix_scan(self, prefix: Any, prefix_serializer: Any = None) -> Iterator[tuple[K, V]]:
        return _plain_entries(self.inner.prefix_scan(prefix, prefix_serializer))


class WindowStoreFacade(_Facade, Generic[K, V]):
    """Plain values over a timestamped window store (Kafka's ``ReadOnlyWindowStoreFacade``)."""

    def fetch(self, key: K, window_start: int) -> V | None:
        return _plain(self.inner.fetch(key, window_start))  # type: ignore[no-any-return]

    def put(self, key: K, value: V | None, window_start: int) -> None:
        self.inner.put(key, ValueAndTimestamp.make(value, NO_TIMESTAMP), window_start)

    def fetch_range(self, key: K, time_from: int, time_to: int) -> Iterator[tuple[int, V]]:
        return _plain_entries(self.inner.fetch_range(key, time_from, time_to))

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[tuple[WindowedKey[K], V]]:
        return _plain_entries(self.inner.fetch_all(time_from, time_to))

    def all(self) -> Iterator[tuple[WindowedKey[K], V]]:
        return _plain_entries(self.inner.all())


def _plain_entries(entries: Iterator[tuple[Any, Any]]) -> Iterator[Any]:
    for key, value in entries:
        yield key, _plain(value)


def plain_value_view(store: Any) -> Any:
    """``store`` itself, or a facade with plain values when it is timestamped (window stores get a
    window facade, key-value stores a key-value one)."""
    if not is_timestamped(store):
        return store
    if isinstance(store, MeteredWindowStore):
        return WindowStoreFacade(store)
    return KeyValueStoreFacade(store)
