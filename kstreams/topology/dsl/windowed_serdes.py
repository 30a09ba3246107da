"""Serdes for windowed keys, to write windowed aggregation results to a topic.

The wire format is Kafka's ``TimeWindowedSerializer``: the inner key's bytes followed by the
window start as an 8-byte big-endian long. The end is not written; the deserializer rebuilds it
from the window size it is given (Kafka does the same).
"""

from __future__ import annotations

import logging
import struct
from typing import Any

from kstreams.errors import SerializationException
from kstreams.state.store import WindowedKey

__all__ = ["TimeWindowedSerde", "WindowedSerdes"]

logger = logging.getLogger(__name__)

_START = struct.Struct(">q")
_MAX_END = (1 << 63) - 1


class TimeWindowedSerde:
    """Serializes ``WindowedKey(key, start, end)`` as inner key bytes + 8-byte start.

    Without a window size, a deserialized key's end is the largest long (Kafka's behaviour when
    the window size is not configured); give the size to get exact ends back.
    """

    def __init__(self, inner: Any, window_size_ms: int | None = None) -> None:
        if inner is None:
            raise ValueError("TimeWindowedSerde needs the serde of the inner (unwindowed) key.")
        self.inner = inner
        self.window_size_ms = window_size_ms
        self.name = f"time-windowed<{getattr(inner, 'name', 'custom')}>"

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        if not isinstance(data, WindowedKey):
            raise SerializationException(
                f"The {self.name} serde cannot serialize a {type(data).__name__} for topic {topic}: "
                "it expects a WindowedKey (the key of a windowed aggregation's result)."
            )
        inner = self.inner.serialize(topic, data.key)
        return (inner or b"") + _START.pack(data.start)

    def deserialize(self, topic: str | None, data: bytes | None) -> WindowedKey[Any] | None:
        if data is None:
            return None
        if len(data) < _START.size:
            raise SerializationException(
                f"The {self.name} serde cannot deserialize {len(data)} bytes for topic {topic}: a "
                "time-windowed key has at least 8 bytes (the window start)."
            )
        start = _START.unpack_from(data, len(data) - _START.size)[0]
        key = self.inner.deserialize(topic, bytes(data[: len(data) - _START.size]))
        end = _MAX_END if self.window_size_ms is None else min(start + self.window_size_ms, _MAX_END)
        return WindowedKey(key, start, end)

    def serializer(self) -> TimeWindowedSerde:
        return self

    def deserializer(self) -> TimeWindowedSerde:
        return self

    def configure(self, configs: Any, is_key: bool) -> None:
        configure = getattr(self.inner, "configure", None)
        if configure is not None:
            configure(configs, is_key)

    def __repr__(self) -> str:
        return f"TimeWindowedSerde({self.inner!r}, window_size_ms={self.window_size_ms})"


class WindowedSerdes:
    """Factories of windowed-key serdes (Kafka's ``WindowedSerdes``)."""

    @staticmethod
    def time_windowed_serde_from(inner: Any, window_size_ms: int) -> TimeWindowedSerde:
        """A serde for keys of a time-windowed aggregation with windows of that size."""
        return TimeWindowedSerde(inner, window_size_ms)

    # Kafka's spelling
    timeWindowedSerdeFrom = time_windowed_serde_from
