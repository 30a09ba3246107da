"""A value with the timestamp of the records that made it, and its serde (Kafka's timestamped stores).

The DSL's tables and aggregations remember, per key (and window), the largest timestamp of the
records that made the current value, so that a later update is forwarded at that timestamp even
when the triggering record is older (Kafka's ``ValueAndTimestamp``). Stored bytes are Kafka's
format: the timestamp as 8 big-endian bytes, then the value's own serialization; a deleted value
is stored as None (no bytes), never as a timestamp alone.
"""

from __future__ import annotations

import struct
from typing import Any

# A C type, made per store read and write (see its module).
from kstreams._native.value_and_timestamp import ValueAndTimestamp
from kstreams.serdes import Serde

__all__ = ["ValueAndTimestamp", "ValueAndTimestampSerde", "raw_timestamp", "raw_value"]

_TIMESTAMP = struct.Struct(">q")
TIMESTAMP_BYTES = _TIMESTAMP.size
_unpack_timestamp = _TIMESTAMP.unpack_from
_pack_timestamp = _TIMESTAMP.pack
_make = ValueAndTimestamp.make


def raw_timestamp(data: bytes) -> int:
    """The timestamp of stored ``ValueAndTimestamp`` bytes."""
    return int(_TIMESTAMP.unpack_from(data)[0])


def raw_value(data: bytes) -> bytes:
    """The value's own bytes inside stored ``ValueAndTimestamp`` bytes."""
    return data[TIMESTAMP_BYTES:]


class ValueAndTimestampSerde(Serde):
    """Serializes ``ValueAndTimestamp`` with ``inner`` for the value: 8-byte big-endian timestamp,
    then the value's bytes. A value the inner serde turns into None is stored as None."""

    def __init__(self, inner: Serde) -> None:
        self.inner = inner
        self._inner_serialize = inner.serialize
        self._inner_deserialize = inner.deserialize

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        if not isinstance(data, ValueAndTimestamp):
            raise TypeError(
                f"A timestamped store holds ValueAndTimestamp values, got {type(data).__name__}: "
                "put ValueAndTimestamp.make(value, timestamp)."
            )
        value = self._inner_serialize(topic, data.value)
        if value is None:
            return None
        return _pack_timestamp(data.timestamp) + value

    def deserialize(self, topic: str | None, data: bytes | None) -> ValueAndTimestamp[Any] | None:
        if data is None:
            return None
        if len(data) < TIMESTAMP_BYTES:
            raise ValueError(
                f"Timestamped store bytes must start with an 8-byte timestamp, got {len(data)} bytes."
            )
        value = self._inner_deserialize(topic, data[TIMESTAMP_BYTES:])
        if value is None:
            return None
        return _make(value, _unpack_timestamp(data)[0])

    def configure(self, configs: Any, is_key: bool) -> None:
        self.inner.configure(configs, is_key)
        self._inner_serialize = self.inner.serialize
        self._inner_deserialize = self.inner.deserialize

    def __repr__(self) -> str:
        return f"ValueAndTimestampSerde({self.inner!r})"
