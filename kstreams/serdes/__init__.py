"""Serdes: how keys and values become bytes and back.

A ``Serde`` turns a Python object into ``bytes`` for a topic and back. ``None`` always passes
through unchanged in both directions (a null key, or a tombstone value), as in Kafka. The built-in
serdes use Kafka's wire formats, so data written by a Java Kafka Streams application reads back
here and the other way round. Every built-in serde carries a ``name`` ("string", "long", ...) by
which compiled kernels recognise it.

``Serdes`` offers the built-ins under Python names (``Serdes.string()``, ``Serdes.long()``) and
under Kafka's spelling (``Serdes.String()``, ``Serdes.Long()``). ``serde_from_config`` resolves the
``default.key.serde`` and ``default.value.serde`` configs.

The package: ``serde`` (the interface), ``builtin`` (Kafka's wire formats), ``factory`` (``Serdes``,
``ListSerde``, resolution of the default-serde configs) and ``schema_registry`` (Avro, JSON Schema
and Protobuf on a Confluent Schema Registry, imported only when used).
"""

from __future__ import annotations

from kstreams.serdes.builtin import (
    BooleanSerde,
    BytesSerde,
    DoubleSerde,
    FloatSerde,
    IntegerSerde,
    JsonSerde,
    LongSerde,
    ShortSerde,
    StringSerde,
    UUIDSerde,
    VoidSerde,
    json_loads,
)
from kstreams.serdes.factory import ListSerde, Serdes, resolve_serde, serde_from_config
from kstreams.serdes.serde import FunctionSerde, Serde

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
    "json_loads",
    "resolve_serde",
    "serde_from_config",
]
