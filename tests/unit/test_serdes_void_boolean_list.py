"""Serdes.void(), Serdes.boolean() and Serdes.list_serde(): Kafka's byte formats and errors."""

from __future__ import annotations

import struct
from collections import deque

import pytest

from kstreams.errors import ConfigException, SerializationException
from kstreams.serdes import ListSerde, Serdes, serde_from_config


def ints(*values: int) -> bytes:
    return b"".join(struct.pack(">i", v) for v in values)


def test_void_serde_holds_only_none() -> None:
    void = Serdes.void()
    assert void.serialize("t", None) is None
    assert void.deserialize("t", None) is None
    with pytest.raises(SerializationException, match="only None"):
        void.serialize("t", 1)
    with pytest.raises(SerializationException, match="should be null"):
        void.deserialize("t", b"x")


def test_boolean_serde_is_one_byte() -> None:
    boolean = Serdes.boolean()
    assert boolean.serialize("t", True) == b"\x01"
    assert boolean.serialize("t", False) == b"\x00"
    assert boolean.deserialize("t", b"\x01") is True
    assert boolean.deserialize("t", b"\x00") is False
    assert boolean.serialize("t", None) is None and boolean.deserialize("t", None) is None
    with pytest.raises(SerializationException, match="expected bool"):
        boolean.serialize("t", 1)
    with pytest.raises(SerializationException, match="not 1"):
        boolean.deserialize("t", b"\x01\x00")
    with pytest.raises(SerializationException, match="0x00 or 0x01"):
        boolean.deserialize("t", b"\x02")


def test_void_and_boolean_are_usable_by_name() -> None:
    config = {
        "default.key.serde": "void",
        "default.value.serde": "org.apache.kafka.common.serialization.Serdes$BooleanSerde",
    }
    assert serde_from_config(config, "default.key.serde") is Serdes.void()
    assert serde_from_config(config, "default.value.serde") is Serdes.boolean()
    assert Serdes.Boolean() is Serdes.boolean() and Serdes.Void() is Serdes.void()


def test_list_of_variable_size_entries_has_a_length_per_entry_and_minus_one_for_null() -> None:
    serde = Serdes.list_serde(list, Serdes.string())
    data = serde.serialize("t", ["a", None, "bc"])
    assert data == b"\x01" + ints(3) + ints(1) + b"a" + ints(-1) + ints(2) + b"bc"
    assert serde.deserialize("t", data) == ["a", None, "bc"]


def test_list_of_fixed_size_entries_lists_null_indexes_first() -> None:
    serde = Serdes.list_serde(list, Serdes.integer())
    data = serde.serialize("t", [1, None, 3])
    assert data == b"\x00" + ints(1, 1) + ints(3) + ints(1) + ints(3)
    assert serde.deserialize("t", data) == [1, None, 3]
    longs = Serdes.list_serde(tuple, Serdes.long())
    assert longs.deserialize("t", longs.serialize("t", [2**40, -1])) == (2**40, -1)


def test_list_serde_empty_lists_null_and_list_class() -> None:
    serde = Serdes.list_serde(deque, Serdes.string())
    assert serde.serialize("t", []) == b"\x01" + ints(0)
    assert serde.deserialize("t", b"\x01" + ints(0)) == deque()
    assert serde.serialize("t", None) is None and serde.deserialize("t", None) is None


def test_list_serde_errors_say_what_is_wrong() -> None:
    serde = Serdes.list_serde(list, Serdes.string())
    with pytest.raises(SerializationException, match="expected a list"):
        serde.serialize("t", "abc")
    with pytest.raises(SerializationException, match="end inside"):
        serde.deserialize("t", b"\x01" + ints(2) + ints(1) + b"a")
    with pytest.raises(SerializationException, match="unknown serialization strategy"):
        serde.deserialize("t", b"\x07" + ints(0))
    with pytest.raises(SerializationException, match="follow the last entry"):
        serde.deserialize("t", b"\x01" + ints(0) + b"zz")
    with pytest.raises(TypeError, match="inner serde"):
        Serdes.list_serde(list, None)
    with pytest.raises(ConfigException, match="inner serde"):
        Serdes.by_name("list")
    with pytest.raises(SerializationException, match="before it has an inner serde"):
        ListSerde().serialize("t", ["a"])


def test_list_serde_instance_as_default_value_serde_and_configured_bare() -> None:
    serde = Serdes.list_serde(list, Serdes.string())
    assert serde_from_config({"default.value.serde": serde}, "default.value.serde") is serde
    bare = ListSerde()
    bare.configure(
        {"default.list.value.serde.inner": "long", "default.list.value.serde.type": "java.util.ArrayList"},
        False,
    )
    assert bare.deserialize("t", bare.serialize("t", [5, None])) == [5, None]
