"""The built-in serdes, in Kafka's wire formats: string, bytes, short, integer, long, float, double,
UUID, JSON, void and boolean, one shared instance of each (they are stateless), and the names
``default.key.serde``/``default.value.serde`` accept for them.

Data written by a Java Kafka Streams application reads back here and the other way round. Every
built-in serde carries a ``name`` ("string", "long", ...) by which compiled kernels recognise it.
"""

from __future__ import annotations

import json
import logging
import operator
import struct
import uuid
from collections.abc import Callable
from typing import Any

from kstreams.serdes.serde import Serde

__all__ = [
    "BooleanSerde",
    "BytesSerde",
    "DoubleSerde",
    "FloatSerde",
    "IntegerSerde",
    "JsonSerde",
    "LongSerde",
    "ShortSerde",
    "StringSerde",
    "UUIDSerde",
    "VoidSerde",
    "json_loads",
]

logger = logging.getLogger(__name__)


class StringSerde(Serde):
    """UTF-8 text (Kafka's StringSerde)."""

    name = "string"

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        if type(data) is not str and not isinstance(data, str):
            self._fail("serialize", topic, f"a {type(data).__name__} (expected str)")
        return data.encode("utf-8")  # type: ignore[no-any-return]

    def deserialize(self, topic: str | None, data: bytes | None) -> str | None:
        if data is None:
            return None
        try:
            return data.decode("utf-8") if type(data) is bytes else bytes(data).decode("utf-8")
        except (UnicodeDecodeError, TypeError) as exc:
            self._fail("deserialize", topic, f"{len(data)} bytes that are not valid UTF-8", exc)


class BytesSerde(Serde):
    """Raw bytes, unchanged (Kafka's ByteArraySerde and BytesSerde)."""

    name = "bytes"

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None or type(data) is bytes:
            return data  # type: ignore[no-any-return]
        if isinstance(data, bytes | bytearray | memoryview):
            return bytes(data)
        self._fail("serialize", topic, f"a {type(data).__name__} (expected bytes)")

    def deserialize(self, topic: str | None, data: bytes | None) -> bytes | None:
        return data


class _FixedWidthSerde(Serde):
    """A number in a fixed number of big-endian bytes."""

    _format: struct.Struct
    _kafka_name: str

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) != self._format.size:
            self._fail(
                "deserialize",
                topic,
                f"{len(data)} bytes: size of data received by {self._kafka_name}Deserializer "
                f"is not {self._format.size}",
            )
        return self._format.unpack(data)[0]


class _IntegralSerde(_FixedWidthSerde):
    _bits: int

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        try:
            if type(data) is bool:
                raise TypeError("bool")
            return self._format.pack(data if type(data) is int else operator.index(data))
        except TypeError as exc:
            self._fail("serialize", topic, f"a {type(data).__name__} (expected int)", exc)
        except struct.error as exc:
            self._fail("serialize", topic, f"{data}: outside the signed {self._bits}-bit range", exc)


class ShortSerde(_IntegralSerde):
    """2-byte big-endian signed integers (Kafka's ShortSerde)."""

    name = "short"
    _format = struct.Struct(">h")
    _kafka_name = "Short"
    _bits = 16


class IntegerSerde(_IntegralSerde):
    """4-byte big-endian signed integers (Kafka's IntegerSerde)."""

    name = "int"
    _format = struct.Struct(">i")
    _kafka_name = "Integer"
    _bits = 32


class LongSerde(_IntegralSerde):
    """8-byte big-endian signed integers (Kafka's LongSerde)."""

    name = "long"
    _format = struct.Struct(">q")
    _kafka_name = "Long"
    _bits = 64


class _FloatingSerde(_FixedWidthSerde):
    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        if type(data) is bool or not isinstance(data, int | float):
            # numpy floats and ints are int/float subclasses or convert through __float__
            if not hasattr(data, "__float__") or type(data) is bool:
                self._fail("serialize", topic, f"a {type(data).__name__} (expected float)")
        try:
            return self._format.pack(float(data))
        except (OverflowError, struct.error) as exc:
            self._fail("serialize", topic, f"{data}: out of range", exc)


class FloatSerde(_FloatingSerde):
    """4-byte big-endian IEEE 754 floats (Kafka's FloatSerde)."""

    name = "float"
    _format = struct.Struct(">f")
    _kafka_name = "Float"


class DoubleSerde(_FloatingSerde):
    """8-byte big-endian IEEE 754 doubles (Kafka's DoubleSerde)."""

    name = "double"
    _format = struct.Struct(">d")
    _kafka_name = "Double"


class UUIDSerde(Serde):
    """UUIDs as their 36-character text form (Kafka's UUIDSerde)."""

    name = "uuid"

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        if not isinstance(data, uuid.UUID):
            self._fail("serialize", topic, f"a {type(data).__name__} (expected uuid.UUID)")
        return str(data).encode("ascii")

    def deserialize(self, topic: str | None, data: bytes | None) -> uuid.UUID | None:
        if data is None:
            return None
        try:
            return uuid.UUID(bytes(data).decode("ascii"))
        except (ValueError, UnicodeDecodeError) as exc:
            self._fail("deserialize", topic, f"{bytes(data)[:64]!r}: not a UUID", exc)


# json.dumps/json.loads with non-default arguments build an encoder per call, and loads(bytes)
# detects the encoding in Python first; one encoder and the decoder's scanner, made once, give the
# same results at a fraction of the cost per record.
_json_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_json_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def json_loads(data: bytes) -> Any:
    """``json.loads(data)``, faster for the usual case: UTF-8 text holding one JSON value with no
    surrounding whitespace. Anything else (other encodings, whitespace, invalid JSON) goes through
    ``json.loads``, which decides and raises as it always does."""
    try:
        text = data.decode("utf-8")
        value, end = _json_scan(text, 0)
    except (UnicodeDecodeError, StopIteration):
        return json.loads(data)
    if end != len(text):
        return json.loads(data)
    return value


class JsonSerde(Serde):
    """Compact UTF-8 JSON (no spaces; non-ASCII characters kept as UTF-8)."""

    name = "json"

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        try:
            return _json_encode(data).encode("utf-8")
        except (TypeError, ValueError) as exc:
            self._fail("serialize", topic, f"a {type(data).__name__}: {exc}", exc)

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return json_loads(data)
        except (ValueError, TypeError) as exc:
            self._fail("deserialize", topic, f"{bytes(data)[:64]!r}: not valid JSON ({exc})", exc)


class VoidSerde(Serde):
    """Only None (Kafka's VoidSerde): for topics whose keys or values are always null."""

    name = "void"

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is not None:
            self._fail("serialize", topic, f"a {type(data).__name__}: the void serde holds only None")
        return None

    def deserialize(self, topic: str | None, data: bytes | None) -> None:
        if data is not None:
            self._fail("deserialize", topic, f"{len(data)} bytes: data should be null for a VoidDeserializer")
        return None


class BooleanSerde(Serde):
    """One byte, 0x01 for True and 0x00 for False (Kafka's BooleanSerde)."""

    name = "boolean"

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        if type(data) is not bool:
            self._fail("serialize", topic, f"a {type(data).__name__} (expected bool)")
        return b"\x01" if data else b"\x00"

    def deserialize(self, topic: str | None, data: bytes | None) -> bool | None:
        if data is None:
            return None
        if len(data) != 1:
            self._fail(
                "deserialize",
                topic,
                f"{len(data)} bytes: size of data received by BooleanDeserializer is not 1",
            )
        if data[0] not in (0, 1):
            self._fail("deserialize", topic, f"the byte {data[0]}: a boolean is 0x00 or 0x01")
        return data[0] == 1


# Built-in serdes are stateless, so one shared instance of each suffices.
_STRING = StringSerde()
_BYTES = BytesSerde()
_SHORT = ShortSerde()
_INTEGER = IntegerSerde()
_LONG = LongSerde()
_FLOAT = FloatSerde()
_DOUBLE = DoubleSerde()
_UUID = UUIDSerde()
_JSON = JsonSerde()
_VOID = VoidSerde()
_BOOLEAN = BooleanSerde()

# Names accepted by default.key.serde / default.value.serde, lower-cased, including Kafka's class
# names so configs copied from a Java application keep working.
_BY_NAME: dict[str, Serde] = {}
for _serde, _aliases in (
    (_STRING, ("string", "str", "stringserde")),
    (_BYTES, ("bytes", "bytearray", "bytearrayserde", "bytesserde")),
    (_SHORT, ("short", "shortserde")),
    (_INTEGER, ("int", "integer", "integerserde")),
    (_LONG, ("long", "longserde")),
    (_FLOAT, ("float", "floatserde")),
    (_DOUBLE, ("double", "doubleserde")),
    (_UUID, ("uuid", "uuidserde")),
    (_JSON, ("json", "jsonserde")),
    (_VOID, ("void", "voidserde")),
    (_BOOLEAN, ("boolean", "bool", "booleanserde")),
):
    for _alias in _aliases:
        _BY_NAME[_alias] = _serde
