"""KStream-KTable join: each stream record looks up the table's current value for its key.

The table side never triggers output: a table update only changes what later stream records
see. Inner join: a stream record whose key has no table row is dropped. Left join: it is joined
with None. Records with a null value are dropped; a null key drops the record in an inner join
and joins with None in a left join (KIP-962). The result keeps the stream record's timestamp,
whatever the timestamp of the table row (Kafka's KStreamKTableJoinProcessor).

With a grace period (KIP-923, ``Joined.with_grace_period``, on a versioned table) stream records
wait in a buffer store (``<join name>-Buffer``) until the buffer's stream time (the largest
timestamp put into it) has passed theirs by the grace period; they then leave in timestamp order
and join with the table as of their own timestamp, with their own headers. A record already
older than the buffer's stream time minus the grace period is joined at once. As in Kafka, the
buffer is emptied only when a record is put into it: table updates and late records evict
nothing. A left join with a grace period fails on a stream record with a null key, as Kafka's
does (its buffer refuses null keys, even of late records): without a grace period the record
is joined with None.

The buffer is a key-value store whose keys sort as Kafka's time-first buffer keys do: the
timestamp (8 bytes, big-endian), the key's bytes, then a sequence number (4 bytes) that keeps
records of equal key and time apart in arrival order. Its values are the record's value bytes and
headers (``StreamRecordSerde``).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Mapping
from typing import Any

from kstreams.errors import StreamsException
from kstreams.processor import Processor, ProcessorContext, Record
from kstreams.serdes import serde_from_config
from kstreams.topology.dsl.processors.store_access import get_store
from kstreams.topology.dsl.processors.table import ValueGetterSupplier

__all__ = ["BufferKeySerde", "StreamRecordSerde", "StreamTableJoinSupplier"]

logger = logging.getLogger(__name__)

_TIMESTAMP = struct.Struct(">q")
_SEQUENCE = struct.Struct(">i")
_LENGTH = struct.Struct(">i")
_NO_BYTES = -1


class _DefaultedSerde:
    """A serde that may be None until the application's default serde is known (at init)."""

    def __init__(self, inner: Any, config_key: str) -> None:
        self.inner = inner
        self._config_key = config_key

    def bind_defaults(self, configs: Mapping[str, Any]) -> None:
        if self.inner is None:
            self.inner = serde_from_config(configs, self._config_key)
        if self.inner is None:
            raise ValueError(
                "A stream-table join with a grace period has no serde for its stream's "
                f"{self._config_key.split('.')[1]}s: give one with Joined.with_(...) or set "
                f"{self._config_key}."
            )

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        self.bind_defaults(configs)

    def serializer(self) -> Any:
        return self

    def deserializer(self) -> Any:
        return self


class BufferKeySerde(_DefaultedSerde):
    """Key of the grace-period buffer, ``(timestamp, key, sequence)``: the timestamp (8 bytes,
    big-endian), the stream key's bytes, the sequence number (4 bytes), so that keys sort by
    timestamp, then key bytes, then arrival."""

    name = "stream-table-join-buffer-key"

    def __init__(self, key_serde: Any) -> None:
        super().__init__(key_serde, "default.key.serde")

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        timestamp, key, sequence = data
        key_bytes = self.inner.serialize(topic, key) or b""
        return _TIMESTAMP.pack(timestamp) + key_bytes + _SEQUENCE.pack(sequence)

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        data = bytes(data)
        (timestamp,) = _TIMESTAMP.unpack_from(data)
        (sequence,) = _SEQUENCE.unpack_from(data, len(data) - 4)
        return (timestamp, self.inner.deserialize(topic, data[8:-4]), sequence)


class StreamRecordSerde(_DefaultedSerde):
    """Value of the grace-period buffer, ``(value, headers)``: the value's bytes (length-prefixed),
    then the number of headers and each header's key and value (length-prefixed; -1 for a None
    value)."""

    name = "stream-table-join-buffer-value"

    def __init__(self, value_serde: Any) -> None:
        super().__init__(value_serde, "default.value.serde")

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        value, headers = data
        value_bytes = self.inner.serialize(topic, value) or b""
        parts = [_LENGTH.pack(len(value_bytes)), value_bytes, _LENGTH.pack(len(headers or ()))]
        for header_key, header_value in headers or ():
            key_bytes = header_key.encode()
            parts += [_LENGTH.pack(len(key_bytes)), key_bytes]
            if header_value is None:
                parts.append(_LENGTH.pack(_NO_BYTES))
            else:
                parts += [_LENGTH.pack(len(header_value)), bytes(header_value)]
        return b"".join(parts)

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        data = bytes(data)
        (length,) = _LENGTH.unpack_from(data)
        value = self.inner.deserialize(topic, data[4 : 4 + length])
        offset = 4 + length
        (count,) = _LENGTH.unpack_from(data, offset)
        offset += 4
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(count):
            (key_length,) = _LENGTH.unpack_from(data, offset)
            header_key = data[offset + 4 : offset + 4 + key_length].decode()
            offset += 4 + key_length
            (value_length,) = _LENGTH.unpack_from(data, offset)
            offset += 4
            if value_length == _NO_BYTES:
                headers.append((header_key, None))
            else:
                headers.append((header_key, data[offset : offset + value_length]))
                offset += value_length
        return (value, headers)


class StreamTableJoinSupplier:
    """Joins stream records with ``joiner(stream_value, table_value)``, or with
    ``joiner(key, stream_value, table_value)`` when ``with_key`` (Kafka's ValueJoinerWithKey).
    With ``grace_ms`` (a versioned table), stream records wait in the store ``buffer_store_name``
    for the grace period first (module docstring)."""

    kind = "stream_table_join"

    def __init__(
        self,
        table: ValueGetterSupplier,
        joiner: Callable[..., Any],
        left: bool,
        with_key: bool = False,
        *,
        grace_ms: int | None = None,
        buffer_store_name: str | None = None,
        buffer_serdes: tuple[BufferKeySerde, StreamRecordSerde] | None = None,
    ) -> None:
        self.table = table
        self.joiner = joiner
        self.left = left
        self.with_key = with_key
        self.grace_ms = grace_ms
        self.buffer_store_name = buffer_store_name
        self.buffer_serdes = buffer_serdes

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _StreamTableJoin(self)


class _StreamTableJoin(Processor[Any, Any, Any, Any]):
    def __init__(self, spec: StreamTableJoinSupplier) -> None:
        self.spec = spec
        self.buffer: Any = None
        # The buffer's stream time and the next sequence number; both recovered from the buffer's
        # contents at init, so a restart neither reorders nor overwrites what waits there.
        self.buffer_time = -1
        self.sequence = 0

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.table = self.spec.table.get(context)
        # A versioned table (KIP-914) is looked up as of each stream record's timestamp.
        self.table_as_of = self.spec.table.get_as_of(context) if self.spec.table.is_versioned() else None
        if self.spec.buffer_store_name is not None:
            for serde in self.spec.buffer_serdes or ():
                serde.bind_defaults(context.app_configs)
            self.buffer = get_store(context, self.spec.buffer_store_name)
            for (timestamp, _, sequence), _ in self.buffer.all():
                self.buffer_time = max(self.buffer_time, timestamp)
                self.sequence = max(self.sequence, sequence + 1)

    def process(self, record: Record[Any, Any]) -> None:
        if record.value is None or (record.key is None and not self.spec.left):
            logger.debug("Skipping a record with a null key or value in a stream-table join.")
            return
        if self.buffer is None:
            self._join(record)
            return
        if record.key is None:
            # Kafka's RocksDBTimeOrderedKeyValueBuffer.put requires a key, before it looks at the
            # record's time: a left join with a grace period fails the task on such a record.
            raise StreamsException(
                "A stream-table left join with a grace period got a stream record with a null key, "
                f"which its buffer {self.spec.buffer_store_name} cannot hold (Kafka Streams fails "
                "here too): drop null keys before the join (filter), or join without a grace period, "
                "which joins such a record with None."
            )
        grace = self.spec.grace_ms or 0
        if record.timestamp < self.buffer_time - grace:
            self._join(record)  # already past the grace period: nothing later can change it
            return
        self.buffer.put((record.timestamp, record.key, self.sequence), (record.value, record.headers))
        self.sequence = (self.sequence + 1) & 0x7FFFFFFF
        self.buffer_time = max(self.buffer_time, record.timestamp)
        self._evict(self.buffer_time - grace)

    def _evict(self, up_to: int) -> None:
        """Join and remove, in buffer order, every buffered record with a timestamp <= ``up_to``."""
        due = []
        for buffer_key, buffered in self.buffer.all():
            if buffer_key[0] > up_to:
                break
            due.append((buffer_key, buffered))
        # Joined and removed after the iteration, which must not see the store change under it.
        for buffer_key, (value, headers) in due:
            timestamp, key, _ = buffer_key
            self._join(Record(key, value, timestamp, headers))
            self.buffer.delete(buffer_key)

    def _join(self, record: Record[Any, Any]) -> None:
        if record.key is None:
            stored = None
        elif self.table_as_of is not None:
            stored = self.table_as_of(record.key, record.timestamp)
        else:
            stored = self.table(record.key)
        table_value = None if stored is None else stored.value
        if table_value is None and not self.spec.left:
            return
        spec = self.spec
        result = (
            spec.joiner(record.key, record.value, table_value)
            if spec.with_key
            else spec.joiner(record.value, table_value)
        )
        self.context.forward(record.with_value(result))
