"""Columns decoded and serialized a batch at a time read and write what the serdes do per record,
nulls and bad values included."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams._native import kernels
from kstreams.errors import SerializationException
from kstreams.processing.compiled.columns import decode_column
from kstreams.serdes import Serdes
from kstreams.topology.graph import _serialize_column


@pytest.mark.parametrize(("enc", "serde"), [(kernels.STRING, Serdes.string()), (kernels.JSON, Serdes.json())])
def test_decoded_columns_match_the_serde_with_and_without_nulls(enc: int, serde: object) -> None:
    raw = [b'"a"', b'{"x":[1,2]}', b'"caf\xc3\xa9"']
    for column in (raw, [None, *raw, None]):
        assert decode_column(enc, "t", column) == [serde.deserialize("t", b) for b in column]  # type: ignore[attr-defined]


def test_a_bytes_column_is_passed_through() -> None:
    raw = [b"a", None]
    assert decode_column(kernels.BYTES, "t", raw) is raw


def test_string_columns_serialize_like_the_serde_nulls_included() -> None:
    serde = Serdes.string()
    for column in (["a", "caf\u00e9"], [None, "b", None]):
        assert _serialize_column(serde, "t", column) == [serde.serialize("t", s) for s in column]


def test_a_value_the_string_serde_rejects_fails_as_it_does_per_record() -> None:
    with pytest.raises(SerializationException, match="expected str"):
        _serialize_column(Serdes.string(), "t", ["a", 5])


def test_other_serdes_serialize_each_value() -> None:
    serde = Serdes.long()
    assert _serialize_column(serde, "t", [1, None, -2]) == [serde.serialize("t", n) for n in (1, None, -2)]


@pytest.mark.parametrize(
    ("enc", "serde", "numbers"),
    [
        (kernels.LONG, Serdes.long(), [0, -1, 2**63 - 1, -(2**63)]),
        (kernels.INT, Serdes.integer(), [0, -1, 2**31 - 1]),
        (kernels.SHORT, Serdes.short(), [0, -1, 2**15 - 1]),
        (kernels.DOUBLE, Serdes.double(), [0.0, -1.5, 1e300]),
        (kernels.FLOAT, Serdes.float(), [0.0, -1.5, 0.1]),
    ],
)
def test_number_columns_decode_like_the_serde(enc: int, serde: Any, numbers: list[Any]) -> None:
    raw = [serde.serialize("t", n) for n in numbers]
    for column in (raw, [None, *raw]):
        decoded = decode_column(enc, "t", column)
        assert decoded == [serde.deserialize("t", b) for b in column]
        assert [type(d) for d in decoded] == [type(serde.deserialize("t", b)) for b in column]


def test_integer_columns_serialize_like_the_serde() -> None:
    serde = Serdes.long()
    numbers = [1, -2, 2**63 - 1]
    assert _serialize_column(serde, "t", numbers) == [serde.serialize("t", n) for n in numbers]
    with pytest.raises(SerializationException, match="expected int"):
        _serialize_column(serde, "t", [1, True])
    with pytest.raises(SerializationException, match="range"):
        _serialize_column(serde, "t", [1, 2**63])
