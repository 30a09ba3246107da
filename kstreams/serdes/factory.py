"""Serdes (the built-ins under Python and Kafka names), ListSerde, and default-serde resolution.

``Serdes`` offers the built-ins under Python names (``Serdes.string()``, ``Serdes.long()``) and
under Kafka's spelling (``Serdes.String()``, ``Serdes.Long()``). ``serde_from_config`` resolves the
``default.key.serde`` and ``default.value.serde`` configs. ListSerde lives here because it resolves
and configures its inner serde as those configs are resolved.
"""

from __future__ import annotations

import importlib
import logging
import struct
from collections.abc import Callable, Mapping
from typing import Any

from kstreams.errors import ConfigException
from kstreams.serdes.builtin import (
    _BOOLEAN,
    _BY_NAME,
    _BYTES,
    _DOUBLE,
    _FLOAT,
    _INTEGER,
    _JSON,
    _LONG,
    _SHORT,
    _STRING,
    _UUID,
    _VOID,
)
from kstreams.serdes.serde import FunctionSerde, Serde, _DeserializeFn, _SerializeFn

__all__ = ["ListSerde", "Serdes", "resolve_serde", "serde_from_config"]

logger = logging.getLogger(__name__)

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
        """Avro through a Confluent Schema Registry (``kstreams.serdes.schema_registry.AvroSerde``)."""
        from kstreams.serdes.schema_registry import AvroSerde

        return AvroSerde(schema, registry, is_key=is_key, conf=conf)

    @staticmethod
    def json_schema(schema: str, registry: Any = None, *, is_key: bool = False, conf: Any = None) -> Serde:
        """JSON Schema through a Confluent Schema Registry (``kstreams.serdes.schema_registry``)."""
        from kstreams.serdes.schema_registry import JsonSchemaSerde

        return JsonSchemaSerde(schema, registry, is_key=is_key, conf=conf)

    @staticmethod
    def protobuf(
        message_type: type, registry: Any = None, *, is_key: bool = False, conf: Any = None
    ) -> Serde:
        """Protobuf through a Confluent Schema Registry (``kstreams.serdes.schema_registry``)."""
        from kstreams.serdes.schema_registry import ProtobufSerde

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
