"""Serdes: how keys and values become bytes and back.

A ``Serde`` turns a Python object into ``bytes`` for a topic and back. ``None`` always passes
through unchanged in both directions (a null key, or a tombstone value), as in Kafka. The built-in
serdes use Kafka's wire formats, so data written by a Java Kafka Streams application reads back
here and the other way round. Every built-in serde carries a ``name`` ("string", "long", ...) by
which compiled kernels recognise it.

``Serdes`` offers the built-ins under Python names (``Serdes.string()``, ``Serdes.long()``) and
under Kafka's spelling (``Serdes.String()``, ``Serdes.Long()``). ``serde_from_config`` resolves the
``default.key.serde`` and ``default.value.serde`` configs.
"""

from __future__ import annotations

import abc
import importlib
import json
import logging
import operator
import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from kstreams.errors import ConfigException, SerializationException

__all__ = [
    "BooleanSerde",
    "BytesSerde",
    "DoubleSerde",
    "FloatSerde",
    "FunctionSerde",
    "IntegerSerde",
    "JsonSerde",
    "ListSerde",
    "LongSerde",
    "Serde",
    "Serdes",
    "ShortSerde",
    "StringSerde",
    "UUIDSerde",
    "VoidSerde",
    "resolve_serde",
    "serde_from_config",
]

logger = logging.getLogger(__name__)

_SerializeFn = Callable[[Any], bytes]
_DeserializeFn = Callable[[bytes], Any]


class Serde(abc.ABC):
    """Serializes objects to bytes and back for one kind of data.

    Guarantees: ``serialize(topic, None) is None`` and ``deserialize(topic, None) is None``; data
    the serde cannot handle raises ``SerializationException`` naming the serde and the problem.
    A serde is both its own serializer and deserializer (``serializer()``/``deserializer()``
    return it), so it can be passed wherever either is expected.
    """

    name: str = "custom"

    @abc.abstractmethod
    def serialize(self, topic: str | None, data: Any) -> bytes | None: ...

    @abc.abstractmethod
    def deserialize(self, topic: str | None, data: bytes | None) -> Any: ...

    def serializer(self) -> Serde:
        return self

    def deserializer(self) -> Serde:
        return self

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:  # noqa: B027 - optional hook
        """Receives the application's configs when the serde comes from a default serde config."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def _fail(
        self, action: str, topic: str | None, problem: str, cause: BaseException | None = None
    ) -> NoReturn:
        where = f" for topic {topic}" if topic else ""
        raise SerializationException(f"The {self.name} serde cannot {action} {problem}{where}.") from cause


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


class FunctionSerde(Serde):
    """A serde made of two plain functions (``Serdes.serde_from``); None passes through."""

    def __init__(
        self,
        serialize: Callable[[Any], bytes],
        deserialize: Callable[[bytes], Any],
        name: str = "custom",
    ) -> None:
        self._serialize = serialize
        self._deserialize = deserialize
        self.name = name

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        try:
            return self._serialize(data)
        except SerializationException:
            raise
        except Exception as exc:
            self._fail("serialize", topic, f"a {type(data).__name__}: {exc!r}", exc)

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return self._deserialize(data)
        except SerializationException:
            raise
        except Exception as exc:
            self._fail("deserialize", topic, f"{bytes(data)[:64]!r}: {exc!r}", exc)

    def __repr__(self) -> str:
        return f"FunctionSerde(name={self.name!r})"


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


_INT32 = struct.Struct(">i")
# Kafka's ListSerde writes a per-entry length of -1 for a null entry of a variable-size list.
_NULL_ENTRY = -1
# Serialization strategies (the first byte of Kafka's list format).
_CONSTANT_SIZE, _VARIABLE_SIZE = 0, 1


class ListSerde(Serde):
    """Lists of values of one inner serde, in Kafka's ListSerde format.

    One strategy byte, then for inner serdes of fixed size (short, int, float, long, double, uuid:
    CONSTANT_SIZE, 0) the count and indexes of null entries, the entry count and each non-null
    entry's bytes; for all others (VARIABLE_SIZE, 1) the entry count, then per entry its length
    (-1 for a null entry) and its bytes. Integers are 4-byte big-endian. Deserialized lists are made
    with ``list_class`` (``list`` by default; ``tuple``, ``collections.deque``... work too).

    Made bare (as ``default.value.serde=list`` does), it is configured from
    ``default.list.key.serde.type``/``.inner`` or ``default.list.value.serde.type``/``.inner``,
    as Kafka's ListSerde is.
    """

    name = "list"

    def __init__(self, list_class: Callable[[Any], Any] | None = None, inner: Any = None) -> None:
        self.list_class: Callable[[Any], Any] = list_class if list_class is not None else list
        self.inner: Any = None
        self._entry_size: int | None = None
        if inner is not None:
            self._set_inner(resolve_serde(inner, "ListSerde inner serde"))

    def _set_inner(self, inner: Any) -> None:
        if isinstance(inner, ListSerde) and inner is self:
            raise ConfigException("A ListSerde cannot be its own inner serde.")
        self.inner = inner
        # Kafka decides by the inner serializer's class: only the built-in fixed-size serdes count.
        builtin = any(inner is serde for serde in _BY_NAME.values())
        self._entry_size = _FIXED_ENTRY_SIZES.get(str(inner.name)) if builtin else None

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        if self.inner is not None:
            return  # made with its inner serde: nothing to learn from the configs
        which = "key" if is_key else "value"
        type_key, inner_key = f"default.list.{which}.serde.type", f"default.list.{which}.serde.inner"
        inner = configs.get(inner_key)
        if inner is None:
            raise ConfigException(
                f"The list serde has no inner serde: set {inner_key} (e.g. 'string') or construct it "
                "with Serdes.list_serde(list, inner_serde)."
            )
        self._set_inner(serde_from_config(configs, inner_key))
        list_type = configs.get(type_key)
        if list_type is not None:
            self.list_class = _list_class(list_type, type_key)

    def _check_configured(self, action: str, topic: str | None) -> None:
        if self.inner is None:
            self._fail(action, topic, "data before it has an inner serde: use Serdes.list_serde(list, inner)")

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        self._check_configured("serialize", topic)
        if isinstance(data, str | bytes | bytearray | Mapping) or not hasattr(data, "__iter__"):
            self._fail("serialize", topic, f"a {type(data).__name__} (expected a list or other sequence)")
        entries = list(data)
        serialize = self.inner.serialize
        out = bytearray()
        if self._entry_size is not None:
            out.append(_CONSTANT_SIZE)
            nulls = [i for i, entry in enumerate(entries) if entry is None]
            out += _INT32.pack(len(nulls))
            for index in nulls:
                out += _INT32.pack(index)
            out += _INT32.pack(len(entries))
            for entry in entries:
                if entry is not None:
                    out += serialize(topic, entry)
        else:
            out.append(_VARIABLE_SIZE)
            out += _INT32.pack(len(entries))
            for entry in entries:
                if entry is None:
                    out += _INT32.pack(_NULL_ENTRY)
                    continue
                raw = serialize(topic, entry)
                if raw is None:
                    self._fail("serialize", topic, f"the entry {entry!r}: its inner serde gave null bytes")
                out += _INT32.pack(len(raw))
                out += raw
        return bytes(out)

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        self._check_configured("deserialize", topic)
        view = memoryview(data)
        try:
            entries = self._entries(topic, view)
        except struct.error as exc:
            self._fail("deserialize", topic, f"{len(data)} bytes: they end inside a list entry", exc)
        return self.list_class(entries)

    def _entries(self, topic: str | None, view: memoryview) -> list[Any]:
        if len(view) < 1:
            self._fail("deserialize", topic, "0 bytes: a list starts with its strategy byte")
        strategy, pos = view[0], 1
        deserialize = self.inner.deserialize
        entries: list[Any] = []
        if strategy == _CONSTANT_SIZE:
            size = self._entry_size
            if size is None:
                self._fail(
                    "deserialize",
                    topic,
                    f"a fixed-size list: its inner {self.inner.name} serde is not fixed-size",
                )
            (null_count,) = _INT32.unpack_from(view, pos)
            pos += 4
            nulls = set()
            for _ in range(null_count):
                nulls.add(_INT32.unpack_from(view, pos)[0])
                pos += 4
            (count,) = _INT32.unpack_from(view, pos)
            pos += 4
            for i in range(count):
                if i in nulls:
                    entries.append(None)
                    continue
                if pos + size > len(view):
                    raise struct.error("entry past the end")
                entries.append(deserialize(topic, bytes(view[pos : pos + size])))
                pos += size
        elif strategy == _VARIABLE_SIZE:
            (count,) = _INT32.unpack_from(view, pos)
            pos += 4
            for _ in range(count):
                (length,) = _INT32.unpack_from(view, pos)
                pos += 4
                if length == _NULL_ENTRY:
                    entries.append(None)
                    continue
                if length < 0 or pos + length > len(view):
                    raise struct.error("entry past the end")
                entries.append(deserialize(topic, bytes(view[pos : pos + length])))
                pos += length
        else:
            self._fail("deserialize", topic, f"a list with the unknown serialization strategy {strategy}")
        if pos != len(view):
            self._fail(
                "deserialize", topic, f"{len(view)} bytes: {len(view) - pos} bytes follow the last entry"
            )
        return entries

    def __repr__(self) -> str:
        return f"ListSerde({getattr(self.list_class, '__name__', self.list_class)!r}, {self.inner!r})"


def _list_class(spec: Any, config_key: str) -> Callable[[Any], Any]:
    """The list type a ``default.list.*.serde.type`` config names (a type, a dotted path, or
    Java's ArrayList/LinkedList, which both mean ``list``)."""
    if callable(spec):
        return spec  # type: ignore[no-any-return]
    if isinstance(spec, str):
        simple = spec.rsplit(".", 1)[-1]
        if simple in ("ArrayList", "LinkedList", "list"):
            return list
        if simple == "tuple":
            return tuple
        module_name, _, attr = spec.rpartition(".")
        try:
            target = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError, ValueError):
            target = None
        if callable(target):
            return target  # type: ignore[no-any-return]
    raise ConfigException(
        f"{config_key}={spec!r} is not a list type: give list, tuple or a dotted path to one."
    )


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

# Inner serdes whose entries a ListSerde writes without a length (Kafka's FIXED_LENGTH_SERIALIZERS).
_FIXED_ENTRY_SIZES = {"short": 2, "int": 4, "float": 4, "long": 8, "double": 8, "uuid": 36}


class Serdes:
    """Constructors of the built-in serdes, in Python spelling and in Kafka's spelling."""

    @staticmethod
    def string() -> Serde:
        return _STRING

    @staticmethod
    def bytes() -> Serde:
        return _BYTES

    @staticmethod
    def short() -> Serde:
        return _SHORT

    @staticmethod
    def int() -> Serde:
        return _INTEGER

    @staticmethod
    def integer() -> Serde:
        return _INTEGER

    @staticmethod
    def long() -> Serde:
        return _LONG

    @staticmethod
    def float() -> Serde:
        return _FLOAT

    @staticmethod
    def double() -> Serde:
        return _DOUBLE

    @staticmethod
    def uuid() -> Serde:
        return _UUID

    @staticmethod
    def json() -> Serde:
        return _JSON

    @staticmethod
    def avro(
        schema: str | None = None, registry: Any = None, *, is_key: bool = False, conf: Any = None
    ) -> Serde:
        """Avro through a Confluent Schema Registry (``kstreams.schema_registry.AvroSerde``)."""
        from kstreams.schema_registry import AvroSerde

        return AvroSerde(schema, registry, is_key=is_key, conf=conf)

    @staticmethod
    def json_schema(schema: str, registry: Any = None, *, is_key: bool = False, conf: Any = None) -> Serde:
        """JSON Schema through a Confluent Schema Registry (``kstreams.schema_registry``)."""
        from kstreams.schema_registry import JsonSchemaSerde

        return JsonSchemaSerde(schema, registry, is_key=is_key, conf=conf)

    @staticmethod
    def protobuf(
        message_type: type, registry: Any = None, *, is_key: bool = False, conf: Any = None
    ) -> Serde:
        """Protobuf through a Confluent Schema Registry (``kstreams.schema_registry``)."""
        from kstreams.schema_registry import ProtobufSerde

        return ProtobufSerde(message_type, registry, is_key=is_key, conf=conf)

    @staticmethod
    def void() -> Serde:
        return _VOID

    @staticmethod
    def boolean() -> Serde:
        return _BOOLEAN

    @staticmethod
    def list_serde(list_class: Callable[[Any], Any], inner_serde: Any) -> ListSerde:
        """Lists of ``inner_serde`` values in Kafka's ListSerde format, read back as ``list_class``."""
        if not callable(list_class):
            raise TypeError(
                f"list_serde() takes a list type such as list or tuple first, got {list_class!r}."
            )
        if inner_serde is None:
            raise TypeError("list_serde() needs an inner serde for the entries, e.g. Serdes.string().")
        return ListSerde(list_class, inner_serde)

    @staticmethod
    def serde_from(serialize: _SerializeFn, deserialize: _DeserializeFn, name: str = "custom") -> Serde:
        """A serde from two functions of non-None data (None passes through them untouched)."""
        return FunctionSerde(serialize, deserialize, name)

    # Kafka's spelling.
    String = string
    ByteArray = bytes
    Bytes = bytes
    Short = short
    Integer = integer
    Long = long
    Float = float
    Double = double
    UUID = uuid
    Void = void
    Boolean = boolean
    ListSerde = list_serde

    @staticmethod
    def by_name(name: str) -> Serde:
        """The built-in serde called ``name`` ("string", "long", "Serdes$LongSerde", ...)."""
        key = name.rsplit("$", 1)[-1].rsplit(".", 1)[-1].lower()
        if key in ("list", "listserde"):
            raise ConfigException(
                f"The list serde ({name!r}) needs its inner serde, which a name cannot carry: pass the "
                "instance instead, e.g. default.value.serde=Serdes.list_serde(list, Serdes.string())."
            )
        serde = _BY_NAME.get(key)
        if serde is None:
            raise ConfigException(
                f"No built-in serde is called {name!r}; use one of "
                f"{', '.join(sorted({s.name for s in _BY_NAME.values()}))}, a Serde instance or class, "
                "or a dotted path to one."
            )
        return serde


def resolve_serde(spec: Any, config_key: str = "serde") -> Serde:
    """A serde from a Serde instance, a Serde class (instantiated), a built-in name ("string"),
    Kafka's class name ("org.apache.kafka.common.serialization.Serdes$StringSerde"), or a dotted
    path ("mypackage.serdes.MySerde") to a class, a factory or an instance."""
    if isinstance(spec, str):
        if "$" in spec or "." not in spec:
            return Serdes.by_name(spec)
        module_name, _, attr = spec.rpartition(".")
        try:
            target = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError, ValueError) as exc:
            raise ConfigException(f"{config_key}={spec!r} names nothing importable: {exc}.") from None
        return resolve_serde(target, config_key)
    if isinstance(spec, type):
        try:
            instance = spec()
        except TypeError as exc:
            raise ConfigException(
                f"{config_key}={spec.__name__} cannot be created without arguments ({exc}); "
                "pass an instance instead."
            ) from None
        return resolve_serde(instance, config_key)
    if hasattr(spec, "serialize") and hasattr(spec, "deserialize"):
        return spec  # type: ignore[no-any-return]
    if callable(spec):
        return resolve_serde(spec(), config_key)
    raise ConfigException(
        f"{config_key}={spec!r} is not a serde: give a Serde instance or class, a built-in name such "
        "as 'string' or 'long', or a dotted path."
    )


def serde_from_config(config: Mapping[str, Any] | None, config_key: str) -> Serde | None:
    """The serde configured under ``default.key.serde`` or ``default.value.serde``, configured
    with the application's configs; None when the config is not set."""
    if config is None:
        return None
    spec = config.get(config_key)
    if spec is None:
        return None
    serde = resolve_serde(spec, config_key)
    configure = getattr(serde, "configure", None)
    if configure is not None and serde not in _BY_NAME.values():
        configure(dict(config), config_key == "default.key.serde")
    return serde
