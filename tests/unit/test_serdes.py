from __future__ import annotations

import math
import uuid

import pytest

from kstreams.errors import ConfigException, SerializationException
from kstreams.serdes import LongSerde, Serde, Serdes, resolve_serde, serde_from_config


@pytest.mark.parametrize(
    ("serde", "value", "wire"),
    [
        (Serdes.string(), "héllo", "héllo".encode()),
        (Serdes.bytes(), b"\x00\x01", b"\x00\x01"),
        (Serdes.int(), -2, b"\xff\xff\xff\xfe"),
        (Serdes.long(), 1, b"\x00\x00\x00\x00\x00\x00\x00\x01"),
        (Serdes.double(), 1.5, b"\x3f\xf8\x00\x00\x00\x00\x00\x00"),
        (Serdes.json(), {"a": [1, "é"]}, '{"a":[1,"é"]}'.encode()),
    ],
)
def test_builtin_serdes_use_kafka_wire_formats_and_round_trip(
    serde: Serde, value: object, wire: bytes
) -> None:
    assert serde.serialize("t", value) == wire
    assert serde.deserialize("t", wire) == value


@pytest.mark.parametrize(
    "serde", [Serdes.string(), Serdes.bytes(), Serdes.int(), Serdes.long(), Serdes.double(), Serdes.json()]
)
def test_none_passes_through_every_serde(serde: Serde) -> None:
    assert serde.serialize("t", None) is None
    assert serde.deserialize("t", None) is None


def test_kafka_spelling_aliases_are_the_same_serdes() -> None:
    assert Serdes.String() is Serdes.string()
    assert Serdes.Long() is Serdes.long()
    assert Serdes.Integer() is Serdes.int()
    assert Serdes.Double() is Serdes.double()
    assert Serdes.ByteArray() is Serdes.bytes()
    assert Serdes.Bytes() is Serdes.bytes()


def test_builtin_serdes_carry_names_for_compiled_kernels() -> None:
    names = [s.name for s in (Serdes.string(), Serdes.bytes(), Serdes.int(), Serdes.long(), Serdes.double())]
    assert names == ["string", "bytes", "int", "long", "double"]
    assert Serdes.json().name == "json"


def test_long_keeps_the_full_signed_64_bit_range() -> None:
    for value in (-(2**63), 2**63 - 1, 0):
        assert Serdes.long().deserialize("t", Serdes.long().serialize("t", value)) == value


def test_double_keeps_special_values() -> None:
    assert math.isinf(Serdes.double().deserialize("t", Serdes.double().serialize("t", float("inf"))))
    assert Serdes.double().deserialize("t", Serdes.double().serialize("t", 3)) == 3.0


@pytest.mark.parametrize(
    ("serde", "value", "fragment"),
    [
        (Serdes.int(), 2**31, "int serde cannot serialize 2147483648"),
        (Serdes.long(), "1", "long serde cannot serialize a str"),
        (Serdes.string(), 5, "string serde cannot serialize a int"),
        (Serdes.json(), object(), "json serde cannot serialize"),
        (Serdes.bytes(), "x", "bytes serde cannot serialize a str"),
        (Serdes.int(), True, "int serde cannot serialize a bool"),
    ],
)
def test_unserializable_data_raises_naming_the_serde(serde: Serde, value: object, fragment: str) -> None:
    with pytest.raises(SerializationException, match=fragment):
        serde.serialize("topic-a", value)


@pytest.mark.parametrize(
    ("serde", "data", "fragment"),
    [
        (Serdes.long(), b"abc", "LongDeserializer is not 8"),
        (Serdes.int(), b"abcde", "IntegerDeserializer is not 4"),
        (Serdes.double(), b"", "DoubleDeserializer is not 8"),
        (Serdes.string(), b"\xff\xfe", "not valid UTF-8"),
        (Serdes.json(), b"{", "not valid JSON"),
    ],
)
def test_undeserializable_data_raises_naming_the_serde_and_topic(
    serde: Serde, data: bytes, fragment: str
) -> None:
    with pytest.raises(SerializationException, match=fragment) as info:
        serde.deserialize("topic-a", data)
    assert "topic-a" in str(info.value)


def test_serde_from_functions_wraps_their_errors() -> None:
    serde = Serdes.serde_from(lambda u: u.bytes, lambda b: uuid.UUID(bytes=b), name="uuid-bytes")
    u = uuid.uuid4()
    assert serde.deserialize("t", serde.serialize("t", u)) == u
    with pytest.raises(SerializationException, match="uuid-bytes serde cannot deserialize"):
        serde.deserialize("t", b"short")


@pytest.mark.parametrize(
    "spec",
    [
        "long",
        "Long",
        "org.apache.kafka.common.serialization.Serdes$LongSerde",
        "kstreams.serdes.LongSerde",
        LongSerde,
        Serdes.long(),
    ],
)
def test_resolve_serde_accepts_names_classes_paths_and_instances(spec: object) -> None:
    assert resolve_serde(spec, "default.key.serde").name == "long"


def test_resolve_serde_rejects_unknown_names_with_the_choices() -> None:
    with pytest.raises(ConfigException, match=r"default\.value\.serde"):
        resolve_serde("no.such.module.Serde", "default.value.serde")
    with pytest.raises(ConfigException, match="string"):
        resolve_serde("nosuchserde", "default.value.serde")
    with pytest.raises(ConfigException, match="is not a serde"):
        resolve_serde(42, "default.value.serde")


def test_serde_from_config_reads_default_serdes_and_configures_custom_ones() -> None:
    class Configurable(Serde):
        seen: tuple[dict[str, object], bool] | None = None

        def configure(self, configs, is_key):  # type: ignore[no-untyped-def]
            Configurable.seen = (configs, is_key)

        def serialize(self, topic, data):  # type: ignore[no-untyped-def]
            return data

        def deserialize(self, topic, data):  # type: ignore[no-untyped-def]
            return data

    config = {"default.key.serde": Configurable, "default.value.serde": "string"}
    assert isinstance(serde_from_config(config, "default.key.serde"), Configurable)
    assert Configurable.seen is not None and Configurable.seen[1] is True
    assert serde_from_config(config, "default.value.serde") is Serdes.string()
    assert serde_from_config({}, "default.value.serde") is None


@pytest.mark.parametrize(
    "data",
    [
        b'{"user":"u1","bot":false,"ms":12}',
        b' {"a": [1, 2.5, null]}\n',
        b'"caf\xc3\xa9"',
        b"NaN",
        '{"\u00e9":1}'.encode("utf-16"),
        '{"\u00e9":1}'.encode("utf-32"),
        b'{"a":1}x',
        b"",
        b"{",
        b"\xc3",
    ],
)
def test_json_serde_reads_exactly_what_json_loads_reads(data: bytes) -> None:
    import json

    serde = Serdes.json()
    try:
        expected = json.loads(data)
    except ValueError:
        with pytest.raises(SerializationException):
            serde.deserialize("t", data)
        return
    got = serde.deserialize("t", data)
    assert got == expected or (got != got and expected != expected)  # NaN


def test_json_serde_writes_compact_utf8() -> None:
    assert Serdes.json().serialize("t", {"\u00e9": [1, 2.5, None], "b": True}) == (
        b'{"\xc3\xa9":[1,2.5,null],"b":true}'
    )
