"""Serdes for windowed keys, to write windowed aggregation results to a topic.

The wire format is Kafka's ``TimeWindowedSerializer``: the inner key's bytes followed by the
window start as an 8-byte big-endian long. The end is not written; the deserializer rebuilds it
from the window size it is given (Kafka does the same).

Session-windowed keys use Kafka's ``SessionWindowedSerializer`` format instead: the inner key's
bytes, then the session end, then the session start (8-byte big-endian longs each), so both ends
travel with the key.

Records with windowed keys written to a topic are partitioned by the inner key alone
(``WindowedStreamPartitioner``, as Kafka's sinks do for windowed serializers), so every window
and session of a key lands in the key's partition, in order.
"""

from __future__ import annotations

import abc
import logging
import struct
from typing import TYPE_CHECKING, Any

from kstreams.errors import SerializationException
from kstreams.state.store import WindowedKey

if TYPE_CHECKING:
    from typing import Self  # Python 3.11+; only the annotations name it

__all__ = ["SessionWindowedSerde", "TimeWindowedSerde", "WindowedSerdes", "WindowedStreamPartitioner"]

logger = logging.getLogger(__name__)

_START = struct.Struct(">q")
_END_START = struct.Struct(">qq")
_MAX_END = (1 << 63) - 1


class _WindowedKeySerde(abc.ABC):
    """What both windowed-key serdes share: the inner key's serde, the check that a key is a
    ``WindowedKey``, and the serde protocol around it. Subclasses say how the window travels."""

    # How the serde names itself, and the result whose keys it writes (both for error messages).
    _kind: str
    _result: str

    def __init__(self, inner: Any) -> None:
        if inner is None:
            raise ValueError(f"{type(self).__name__} needs the serde of the inner (unwindowed) key.")
        self.inner = inner
        self.name = f"{self._kind}<{getattr(inner, 'name', 'custom')}>"

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        if not isinstance(data, WindowedKey):
            raise SerializationException(
                f"The {self.name} serde cannot serialize a {type(data).__name__} for topic {topic}: "
                f"it expects a WindowedKey (the key of a {self._result})."
            )
        inner = self.inner.serialize(topic, data.key)
        return (inner or b"") + self._pack_window(data)

    @abc.abstractmethod
    def _pack_window(self, data: WindowedKey[Any]) -> bytes:
        """The window's bytes after the inner key's."""

    def serialize_base_key(self, topic: str | None, data: WindowedKey[Any]) -> bytes | None:
        """The inner key's bytes (what ``WindowedStreamPartitioner`` hashes)."""
        return self.inner.serialize(topic, data.key)  # type: ignore[no-any-return]

    def serializer(self) -> Self:
        return self

    def deserializer(self) -> Self:
        return self

    def configure(self, configs: Any, is_key: bool) -> None:
        configure = getattr(self.inner, "configure", None)
        if configure is not None:
            configure(configs, is_key)


class TimeWindowedSerde(_WindowedKeySerde):
    """Serializes ``WindowedKey(key, start, end)`` as inner key bytes + 8-byte start.

    Without a window size, a deserialized key's end is the largest long (Kafka's behaviour when
    the window size is not configured); give the size to get exact ends back.
    """

    _result = "windowed aggregation's result"
    _kind = "time-windowed"

    def __init__(self, inner: Any, window_size_ms: int | None = None) -> None:
        super().__init__(inner)
        self.window_size_ms = window_size_ms

    def _pack_window(self, data: WindowedKey[Any]) -> bytes:
        return _START.pack(data.start)

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

    def __repr__(self) -> str:
        return f"TimeWindowedSerde({self.inner!r}, window_size_ms={self.window_size_ms})"


class SessionWindowedSerde(_WindowedKeySerde):
    """Serializes ``WindowedKey(key, start, end)`` of a session as inner key bytes + 8-byte end +
    8-byte start (Kafka's ``SessionKeySchema``)."""

    _result = "session-windowed aggregation's result"
    _kind = "session-windowed"

    def _pack_window(self, data: WindowedKey[Any]) -> bytes:
        return _END_START.pack(data.end, data.start)

    def deserialize(self, topic: str | None, data: bytes | None) -> WindowedKey[Any] | None:
        if data is None:
            return None
        if len(data) < _END_START.size:
            raise SerializationException(
                f"The {self.name} serde cannot deserialize {len(data)} bytes for topic {topic}: a "
                "session-windowed key has at least 16 bytes (the session end and start)."
            )
        split = len(data) - _END_START.size
        end, start = _END_START.unpack_from(data, split)
        return WindowedKey(self.inner.deserialize(topic, bytes(data[:split])), start, end)

    def __repr__(self) -> str:
        return f"SessionWindowedSerde({self.inner!r})"


class WindowedStreamPartitioner:
    """Partitions windowed keys by their inner key: Kafka's default partitioner (murmur2) over the
    bytes ``serializer.serialize_base_key`` gives, so all windows of a key share its partition."""

    def __init__(self, serializer: Any) -> None:
        self.serializer = serializer
        # The compiled default partitioner, looked up at the first record: describing a topology
        # needs no compiled core (and an import statement per record cost 0.7 us).
        self._default_partition: Any = None

    def partition(self, topic: str, key: Any, value: Any, num_partitions: int) -> int | None:
        if not isinstance(key, WindowedKey):
            return None  # the default partitioner decides (a null key: round robin)
        base = self.serializer.serialize_base_key(topic, key)
        if base is None:
            return None
        default_partition = self._default_partition
        if default_partition is None:
            from kstreams._native.record_batch import default_partition

            self._default_partition = default_partition
        return default_partition(base, num_partitions)  # type: ignore[no-any-return]

    def __call__(self, topic: str, key: Any, value: Any, num_partitions: int) -> int | None:
        return self.partition(topic, key, value, num_partitions)

    def __repr__(self) -> str:
        return f"WindowedStreamPartitioner({self.serializer!r})"


class WindowedSerdes:
    """Factories of windowed-key serdes (Kafka's ``WindowedSerdes``)."""

    @staticmethod
    def time_windowed_serde_from(inner: Any, window_size_ms: int) -> TimeWindowedSerde:
        """A serde for keys of a time-windowed aggregation with windows of that size."""
        return TimeWindowedSerde(inner, window_size_ms)

    @staticmethod
    def session_windowed_serde_from(inner: Any) -> SessionWindowedSerde:
        """A serde for keys of a session-windowed aggregation."""
        return SessionWindowedSerde(inner)

    # Kafka's spelling
    timeWindowedSerdeFrom = time_windowed_serde_from
    sessionWindowedSerdeFrom = session_windowed_serde_from
