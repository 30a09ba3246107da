"""The column kernels behind kstreams.spark.functions equal the Python path record by record, on
random inputs with nulls, escaped JSON strings, numbers outside int64 and malformed bytes."""

from __future__ import annotations

import json
import random
import struct
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kstreams.errors import SerializationException
from kstreams.predicates import json_field, key, value
from kstreams.serdes import Serdes
from kstreams.spark.column_kernels import (
    decode_column,
    encode_column,
    json_field_column,
    partition_column,
    predicate_column,
)

# --- the Python path, written out independently of the kernels --------------------------------

_JSON = Serdes.json()


def _python_field(raw: bytes | None, name: str) -> str | None:
    decoded = _JSON.deserialize(None, raw)
    field = decoded.get(name) if isinstance(decoded, dict) else None
    if field is None or isinstance(field, str):
        return field
    return json.dumps(field, separators=(",", ":"), ensure_ascii=False)


def _or_null(fn: Any) -> Any:
    try:
        return fn()
    except SerializationException:
        return None


def _murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (seed 0x9747b28c), as a signed 32-bit int."""
    m, r, mask = 0x5BD1E995, 24, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(length // 4):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail = length & ~3
    rest = length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


# --- random records --------------------------------------------------------------------------

# json.dumps escapes quotes, backslashes and control characters (and, with ensure_ascii, the rest).
_texts = st.text(alphabet=st.sampled_from(list('ab"\\/\n\té€😀 \u0000')), max_size=6)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),  # outside int64 too
    st.floats(allow_nan=False, allow_infinity=False),
    _texts,
)
_fields = st.one_of(_scalars, st.lists(_scalars, max_size=3), st.dictionaries(_texts, _scalars, max_size=2))


@st.composite
def _json_values(draw: Any) -> bytes | None:
    kind = draw(st.sampled_from(["object", "object", "object", "null", "array", "number", "malformed"]))
    if kind == "null":
        return None
    if kind == "malformed":
        return draw(
            st.sampled_from([b'{"user":', b"\xff\xfe", b"{user:1}", b"", b'{"bot":tru}', b'{"a":1}x'])
        )
    if kind == "array":
        return b"[1,2]"
    if kind == "number":
        return str(draw(st.integers())).encode()
    obj = draw(st.dictionaries(st.sampled_from(["bot", "user", "n", "lang"]), _fields, max_size=4))
    spaced = draw(st.booleans())
    text = json.dumps(
        obj, ensure_ascii=draw(st.booleans()), separators=(", ", ": ") if spaced else (",", ":")
    )
    return text.encode("utf-8")


_predicates = st.sampled_from(
    [
        json_field("bot").eq(False),
        json_field("bot").eq(False) & json_field("lang").eq("en"),
        json_field("n").gt(5) | json_field("user").is_null(),
        ~json_field("user").eq('a"b'),
        json_field("n").le(2**63) & json_field("n").ge(-1.5),
        json_field("user").lt("b"),
    ]
)


def _array(items: list[Any]) -> pa.Array:
    return pa.array(items, pa.binary())


@settings(max_examples=60, deadline=None)
@given(values=st.lists(_json_values(), max_size=40), predicate=_predicates)
def test_predicates_over_json_values_equal_the_python_predicate(
    values: list[bytes | None], predicate: Any
) -> None:
    expected_null = [_or_null(lambda v=v: predicate(None, _JSON.deserialize(None, v))) for v in values]
    assert predicate_column(predicate, None, _array(values), on_error="null").to_pylist() == expected_null
    if any(e is None for e in expected_null):
        with pytest.raises(SerializationException):
            predicate_column(predicate, None, _array(values))


@settings(max_examples=60, deadline=None)
@given(values=st.lists(_json_values(), max_size=40), name=st.sampled_from(["bot", "user", "n", "missing"]))
def test_json_field_equals_the_python_json_field(values: list[bytes | None], name: str) -> None:
    expected = [_or_null(lambda v=v: _python_field(v, name)) for v in values]
    assert json_field_column(_array(values), name, on_error="null").to_pylist() == expected


def test_a_bad_record_sends_only_its_chunk_through_python_and_fails_naming_the_serde() -> None:
    values = [b'{"user":"u%d","bot":false}' % i for i in range(5000)]
    values[4321] = b'{"user":'
    out = json_field_column(_array(values), "user", on_error="null").to_pylist()
    assert out[4321] is None and out[:3] == ["u0", "u1", "u2"] and out[-1] == "u4999"
    with pytest.raises(SerializationException, match="json serde cannot deserialize"):
        json_field_column(_array(values), "user")


def test_key_and_value_predicates_over_string_and_long_serdes() -> None:
    rng = random.Random(7)
    keys = [None if rng.random() < 0.1 else rng.choice(["a", "b", "é"]).encode() for _ in range(300)]
    longs = [
        None if rng.random() < 0.1 else struct.pack(">q", rng.randint(-(2**63), 2**63 - 1))
        for _ in range(300)
    ]
    predicate = key().eq("a") | value().gt(0)
    expected = [
        predicate(Serdes.string().deserialize(None, k), Serdes.long().deserialize(None, v))
        for k, v in zip(keys, longs, strict=True)
    ]
    got = predicate_column(predicate, _array(keys), _array(longs), key_serde="string", value_serde="long")
    assert got.to_pylist() == expected


_NUMBER_CASES = {
    "long": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "int": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "double": (pa.float64(), st.floats(allow_nan=False)),
}


@pytest.mark.parametrize("serde", sorted(_NUMBER_CASES))
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_number_encode_and_decode_equal_the_serdes(serde: str, data: Any) -> None:
    arrow_type, numbers = _NUMBER_CASES[serde]
    items = data.draw(st.lists(st.one_of(st.none(), numbers), max_size=30))
    python = getattr(Serdes, serde)()
    encoded = encode_column(pa.array(items, arrow_type), serde)
    assert encoded.to_pylist() == [python.serialize(None, v) for v in items]
    raw = encoded.to_pylist() + data.draw(st.lists(st.binary(max_size=9), max_size=3))  # wrong widths too
    expected = [_or_null(lambda b=b: python.deserialize(None, b)) for b in raw]
    assert decode_column(_array(raw), serde, on_error="null").to_pylist() == expected


def test_encoding_a_number_outside_the_serde_fails_or_gives_null() -> None:
    column = pa.array([1, 2**40, None], pa.int64())
    assert encode_column(column, "int", on_error="null").to_pylist() == [b"\x00\x00\x00\x01", None, None]
    with pytest.raises(SerializationException):
        encode_column(column, "int")


@settings(max_examples=40, deadline=None)
@given(items=st.lists(st.one_of(st.none(), st.binary(max_size=12)), max_size=30))
def test_strings_decode_and_encode_as_the_string_serde(items: list[bytes | None]) -> None:
    python = Serdes.string()
    expected = [_or_null(lambda b=b: python.deserialize(None, b)) for b in items]
    assert decode_column(_array(items), "string", on_error="null").to_pylist() == expected
    texts = [t for t in expected if t is not None]
    assert encode_column(pa.array(texts, pa.string()), "string").to_pylist() == [t.encode() for t in texts]


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=30), n=st.integers(1, 64))
def test_partition_for_is_kafkas_murmur2_partition(keys: list[bytes | None], n: int) -> None:
    expected = [None if k is None else (_murmur2(k) & 0x7FFFFFFF) % n for k in keys]
    assert partition_column(_array(keys), n).to_pylist() == expected
    # Arrow's other layouts of the same keys: a slice, large_binary, a string column, chunks.
    padded = pa.array([b"x", *keys, b"y"], pa.binary()).slice(1, len(keys))
    assert partition_column(padded, n).to_pylist() == expected
    assert partition_column(pa.array(keys, pa.large_binary()), n).to_pylist() == expected
    assert partition_column(pa.chunked_array([_array(keys)], pa.binary()), n).to_pylist() == expected
    texts = [None if k is None else k.decode("latin-1") for k in keys]
    encoded = [None if t is None else (_murmur2(t.encode()) & 0x7FFFFFFF) % n for t in texts]
    assert partition_column(pa.array(texts, pa.string()), n).to_pylist() == encoded


def test_murmur2_reference_matches_kafkas_published_values() -> None:
    # From Kafka's UtilsTest.testMurmur2.
    assert _murmur2(b"21") == -973932308
    assert _murmur2(b"foobar") == -790332482
    assert _murmur2(b"a-little-bit-long-string") == -985981536
    assert _murmur2(b"a-little-bit-longer-string") == -1486304829
    assert _murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert _murmur2(b"abc") == 479470107


_EDGE_VALUES = [
    b'{"user":"a","user":"b"}',  # the last of duplicate fields, as json.loads
    b' {"user":-0}',
    b'{"user":1E400}',
    b'{"user":NaN}',
    b'{"user":"a\\u0000b\\"c"}',
    b'{"user":[1, {"x" : "y"}]}',
    b'{"user":"\xc3\xa9"}',
    b'{"user":"\xff"}',
    b'{"user":01}',
    b'{"user":"tab\there"}',
    b'{"bot":false,"bot":true}',
]


def test_json_edge_cases_equal_the_python_path() -> None:
    expected = [_or_null(lambda v=v: _python_field(v, "user")) for v in _EDGE_VALUES]
    assert json_field_column(_array(_EDGE_VALUES), "user", on_error="null").to_pylist() == expected
    predicate = json_field("bot").eq(False)
    expected_bot = [_or_null(lambda v=v: predicate(None, _JSON.deserialize(None, v))) for v in _EDGE_VALUES]
    assert (
        predicate_column(predicate, None, _array(_EDGE_VALUES), on_error="null").to_pylist() == expected_bot
    )


def test_a_field_no_spark_string_can_hold_fails_or_gives_null() -> None:
    lone_surrogate = _array([b'{"user":"\\ud800"}'])
    assert json_field_column(lone_surrogate, "user", on_error="null").to_pylist() == [None]
    with pytest.raises(SerializationException, match="lone surrogate"):
        json_field_column(lone_surrogate, "user")
