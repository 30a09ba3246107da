"""The batch kernels give the per-record Python result, or say they cannot."""

from __future__ import annotations

import json
import operator
import random
import struct
from typing import Any

import numpy as np
import pytest

from kstreams._native import kernels
from kstreams._native.record_batch import RecordBatch, default_partition
from kstreams._native.record_cache import RecordCache
from kstreams.errors import SerializationException
from kstreams.predicates import json_field, key, value
from kstreams.serdes import Serdes
from kstreams.state.window_key_schema import (
    SEQ_SIZE,
    TIMESTAMP_SIZE,
    changelog_key,
    key_and_start,
    window_key,
)

LONG = struct.Struct(">q")


def batch_of(keys, values, timestamps=None):  # type: ignore[no-untyped-def]
    if timestamps is None:
        timestamps = list(range(len(keys)))
    return RecordBatch.from_columns(keys, values, timestamps, 0, list(range(len(keys))))


def docs(n: int, seed: int = 3) -> list[bytes | None]:
    """JSON values of mixed shapes: fields of every kind, missing fields, non-objects, nulls."""
    rng = random.Random(seed)
    kinds = [
        lambda: rng.randrange(-5, 6),
        lambda: rng.random() * 10 - 5,
        lambda: rng.choice([True, False]),
        lambda: None,
        lambda: rng.choice(["a", "b", "é", "zz", ""]),
        lambda: [1, 2],
        lambda: {"x": 1},
    ]
    out: list[bytes | None] = []
    for i in range(n):
        if i % 17 == 0:
            out.append(None)
            continue
        if i % 13 == 0:
            out.append(json.dumps(rng.choice([5, "s", [1], None])).encode())
            continue
        doc = {}
        for name in ("n", "bot", "lang"):
            if rng.random() < 0.8:
                doc[name] = rng.choice(kinds)()
        separators = (",", ":") if i % 2 else (", ", ": ")
        out.append(json.dumps(doc, separators=separators, ensure_ascii=i % 3 == 0).encode())
    return out


def python_select(predicate, batch, decode_key, decode_value):  # type: ignore[no-untyped-def]
    return [
        i
        for i, (k, v) in enumerate(zip(batch.keys(), batch.values(), strict=True))
        if predicate(decode_key(k), decode_value(v))
    ]


def _json(data: bytes | None):  # type: ignore[no-untyped-def]
    return None if data is None else json.loads(data)


PREDICATES = [
    json_field("n").gt(2),
    json_field("n").le(0.5),
    json_field("n").eq(1) | json_field("bot").eq(True),
    json_field("bot").eq(False) & json_field("lang").ne("a"),
    ~json_field("lang").lt("b"),
    json_field("lang").ge("é"),
    json_field("n").is_null(),
    value().is_null(),
    value().eq(5),
    json_field("bot").eq(0),  # a bool never equals a number
]


@pytest.mark.parametrize("predicate", PREDICATES, ids=repr)
def test_compiled_predicates_select_what_python_selects(predicate) -> None:  # type: ignore[no-untyped-def]
    values = docs(400)
    batch = batch_of([b"k"] * len(values), values)
    nodes, root = predicate.nodes()
    compiled = kernels.Predicate(nodes, root, kernels.STRING, kernels.JSON)
    selected = compiled.select(batch)
    assert selected is not None
    assert selected.tolist() == python_select(predicate, batch, bytes.decode, _json)


def tricky_docs(n: int, seed: int = 9) -> list[bytes | None]:
    """Valid JSON documents that are hard to skip: escaped quotes and backslash runs in strings,
    brackets inside strings, nested values, duplicate member names (the last one counts),
    whitespace, non-objects."""
    rng = random.Random(seed)
    strings = ['a"b', "c\\", 'd\\"}', "]},[", "{", "é", "", "\\\\", 'q"\\"q', "\n"]
    values: list[Any] = [
        *strings,
        1,
        -2.5e3,
        2**70,
        True,
        None,
        [1, "]", {"bot": 1}],
        {"bot": {"n": "}"}},
        [],
        {},
    ]
    out: list[bytes | None] = [None, b"5", b'"str"', b"[]", b"{}", b'{"n":1,"n":2}', b' {"bot" : false} ']
    for _ in range(n):
        members = [
            (rng.choice(["n", "bot", "lang", "nn", "x", "é"]), rng.choice(values))
            for _ in range(rng.randrange(6))
        ]
        space = rng.choice(["", " ", "\n\t "])
        ascii_values = rng.random() < 0.5
        text = (
            "{"
            + space
            + ("," + space).join(
                json.dumps(k, ensure_ascii=False)
                + space
                + ":"
                + space
                + json.dumps(v, ensure_ascii=ascii_values)
                for k, v in members
            )
            + space
            + "}"
        )
        out.append(text.encode())
    return out


def _selected(predicate: Any, batch: RecordBatch, validated: bool = False) -> list[int] | None:
    selected = predicate.select(batch, validated)
    return None if selected is None else selected.tolist()


@pytest.mark.parametrize("predicate", PREDICATES, ids=repr)
def test_validated_batches_select_and_project_as_a_full_parse_does(predicate) -> None:  # type: ignore[no-untyped-def]
    values = [*docs(300), *tricky_docs(400)]
    assert kernels.validate(batch_of([b"k"] * len(values), values), kernels.STRING, kernels.JSON) == -1
    nodes, root = predicate.nodes()
    compiled = kernels.Predicate(nodes, root, kernels.STRING, kernels.JSON)
    # Record by record, what the Python path must take included (a number beyond int64, ...).
    handled = []
    for v in values:
        one = batch_of([b"k"], [v])
        assert _selected(compiled, one, True) == _selected(compiled, one), v
        if _selected(compiled, one) is not None:
            handled.append(v)
    assert len(handled) > 500
    batch = batch_of([b"k"] * len(handled), handled)
    assert _selected(compiled, batch, True) == _selected(compiled, batch) is not None
    everything = batch_of([b"k"] * len(values), values)
    for field in ("n", "bot", "lang", "x", "é"):
        by_parse = kernels.project(everything, 1, field, 1)
        by_skip = kernels.project(everything, 1, field, 1, True)
        assert by_parse is not None and by_skip is not None
        assert list(by_skip) == list(by_parse)
    # A member name with an escape might spell the field: both leave that record to Python.
    for doc in (b'{"b\\u006ft":true}', b'{"x\\"":1,"bot":true}', b'{"bot":true,"\\n":1}'):
        one = batch_of([b"k"], [doc])
        assert _selected(compiled, one, True) == _selected(compiled, one)
        assert kernels.project(one, 1, "bot", 1, True) is kernels.project(one, 1, "bot", 1) is None


@pytest.mark.parametrize("predicate", PREDICATES, ids=repr)
def test_fields_captured_by_validation_select_and_project_as_a_scan_does(predicate) -> None:  # type: ignore[no-untyped-def]
    values = [*docs(300), *tricky_docs(400), b'{"b\\u006ft":true,"n":1}', b'{"x\\"":1,"bot":true}']
    keys = [json.dumps({"n": i % 7, "k": "é" * (i % 4)}).encode() for i in range(len(values))]
    nodes, root = predicate.nodes()
    fields = [(1, field) for _, _, field, *_ in nodes if field is not None] + [(1, "x"), (0, "n"), (0, "k")]
    compiled = kernels.Predicate(nodes, root, kernels.JSON, kernels.JSON)
    for v in values:  # one record per batch: a record the kernels leave to Python fails its batch
        scanned = batch_of([b'{"n":1}'], [v])
        captured = batch_of([b'{"n":1}'], [v])
        assert kernels.validate(scanned, kernels.JSON, kernels.JSON) == -1
        assert kernels.validate(captured, kernels.JSON, kernels.JSON, fields) == -1
        assert kernels.indexed_fields(scanned) is None
        assert kernels.indexed_fields(captured) == [(0, "n"), (0, "k"), *fields[:-2]]
        assert _selected(compiled, captured, True) == _selected(compiled, scanned, True), v
        for side, field in fields:
            by_index = kernels.project(captured, side, field, 1, True)
            by_scan = kernels.project(scanned, side, field, 1, True)
            assert (by_index is None) == (by_scan is None), v
            if by_scan is not None:
                assert list(by_index) == list(by_scan), v
    # Whole batches, and the rows a take keeps (in a new order) stay with their records.
    handled = [
        v
        for v in values
        if _selected(compiled, batch_of([b"{}"], [v]), True) is not None
        and all(kernels.project(batch_of([b"{}"], [v]), 1, f, 1, True) is not None for _, f in fields)
    ]
    captured = batch_of(keys[: len(handled)], handled)
    assert kernels.validate(captured, kernels.JSON, kernels.JSON, fields) == -1
    scanned = batch_of(keys[: len(handled)], handled)
    order = np.arange(len(handled) - 1, -1, -3, dtype=np.int32)
    taken, taken_scan = kernels.take(captured, order), kernels.take(scanned, order)
    assert kernels.indexed_fields(taken) == kernels.indexed_fields(captured)
    assert _selected(compiled, taken, True) == _selected(compiled, taken_scan, True) is not None
    for side, field in fields:
        assert list(kernels.project(taken, side, field, 1, True)) == list(
            kernels.project(taken_scan, side, field, 1, True)
        )
    # Predicates on the key's captured fields (a string is read from the key's own bytes).
    for on_key in (key().field_of("n").ge(3), key().field_of("k").eq("é")):
        compiled_on_key = kernels.Predicate(*on_key.nodes(), kernels.JSON, kernels.JSON)
        selected = _selected(compiled_on_key, taken, True)
        assert selected == _selected(compiled_on_key, taken_scan, True) is not None
        assert len(selected or []) > 10
    # Batches with other columns (or other rows) carry no index.
    assert kernels.indexed_fields(kernels.project(taken, 1, "n", 1, True)) is None
    assert kernels.indexed_fields(captured.slice(0, 3)) is None


def test_validation_captures_nothing_for_columns_that_are_not_json_or_invalid_batches() -> None:
    batch = batch_of([b"k"], [b'{"n":1}'])
    assert kernels.validate(batch, kernels.STRING, kernels.BYTES, [(0, "n"), (1, "n")]) == -1
    assert kernels.indexed_fields(batch) is None
    bad = batch_of([b"k", b"k"], [b'{"n":1}', b'{"n":'])
    assert kernels.validate(bad, kernels.STRING, kernels.JSON, [(1, "n")]) == 1
    assert kernels.indexed_fields(bad) is None


def test_long_value_predicate_matches_python() -> None:
    numbers = [random.Random(1).randrange(-100, 100) for _ in range(300)]
    values = [LONG.pack(n) for n in numbers] + [None]
    batch = batch_of([b"k"] * len(values), values)
    predicate = value().gt(5) & key().eq("k")
    nodes, root = predicate.nodes()
    selected = kernels.Predicate(nodes, root, kernels.STRING, kernels.LONG).select(batch)
    expected = [i for i, n in enumerate(numbers) if n > 5]
    assert selected.tolist() == expected


def test_escaped_strings_compare_by_their_text_and_lone_surrogates_are_left_to_python() -> None:
    predicate = json_field("lang").eq("a😀")
    nodes, root = predicate.nodes()
    compiled = kernels.Predicate(nodes, root, kernels.STRING, kernels.JSON)
    batch = batch_of([b"k", b"k"], [b'{"lang":"\\u0061\\ud83d\\ude00"}', b'{"lang":"a\\n"}'])
    assert compiled.select(batch).tolist() == [0]
    assert compiled.select(batch_of([b"k"], [b'{"lang":"\\ud83d"}'])) is None
    big = json_field("n").gt(1)
    nodes, root = big.nodes()
    compiled = kernels.Predicate(nodes, root, kernels.STRING, kernels.JSON)
    assert compiled.select(batch_of([b"k"], [b'{"n":123456789012345678901234567890}'])) is None


def test_validation_finds_every_bad_byte_in_strings_of_any_length() -> None:
    # The string scan skips 8 plain bytes at a time: a quote, backslash, control character or
    # non-ASCII byte at any position of any length of string must still be looked at.
    serde = Serdes.json()

    def python_accepts(doc: bytes) -> bool:
        try:
            serde.deserialize("t", doc)
        except SerializationException:
            return False
        return True

    def check(doc: bytes) -> None:
        valid = kernels.validate(batch_of([b"k"], [doc]), kernels.STRING, kernels.JSON) == -1
        assert valid == python_accepts(doc), doc

    for length in range(0, 34):
        check(json.dumps({"s": "é" * length, "n": 1}, ensure_ascii=False).encode())
        for at in range(length):
            for bad in (None, 0x01, 0x1F, 0xFF, 0x80, 0x22, 0x5C, 0x7F, 0x20):
                doc = bytearray(json.dumps({"s": "x" * length, "n": 1}).encode())
                if bad is not None:
                    doc[7 + at] = bad  # within the string: '{"s": "' is 7 bytes
                check(bytes(doc))
                # The same string as the whole document: its last bytes are the document's
                # last, read short of a full word; cut anywhere, it is unterminated.
                whole = bytearray(json.dumps("x" * length).encode())
                if bad is not None:
                    whole[1 + at] = bad
                check(bytes(whole))
                check(bytes(whole[: 1 + at]))


def test_string_keys_with_a_non_ascii_byte_anywhere_validate_as_the_serde_decodes() -> None:
    for length in range(1, 20):
        for at in range(length):
            for bad, valid in ((b"\xc3\xa9", True), (b"\xff", False), (b"\xc3", False)):
                key = b"k" * at + bad + b"k" * (length - at - 1)
                batch = batch_of([key], [b"1"])
                assert (kernels.validate(batch, kernels.STRING, kernels.JSON) == -1) == valid, key


@pytest.mark.parametrize(
    ("key_enc", "value_enc", "record", "bad"),
    [
        (kernels.STRING, kernels.BYTES, (b"\xff", b"x"), True),
        (kernels.STRING, kernels.LONG, (b"k", b"1234567"), True),
        (kernels.STRING, kernels.LONG, (b"k", LONG.pack(7)), False),
        (kernels.STRING, kernels.JSON, (b"k", b'{"a":1,}'), True),
        (kernels.STRING, kernels.JSON, (b"k", b'{"a":NaN}'), True),  # Python accepts it: its call
        (kernels.STRING, kernels.JSON, (b"k", b' {"a": [1, 2.5e3, "x"]} '), False),
        (kernels.STRING, kernels.JSON, (b"k", None), False),
        (kernels.INT, kernels.DOUBLE, (b"\x00\x00\x00\x01", b"\x00" * 8), False),
    ],
)
def test_validate_flags_what_the_serdes_would_reject(key_enc, value_enc, record, bad) -> None:  # type: ignore[no-untyped-def]
    batch = batch_of([b"ok", record[0]], [b"1" if value_enc == kernels.JSON else None, record[1]])
    if key_enc != kernels.STRING:
        batch = batch.slice(1, 2)
        assert kernels.validate(batch, key_enc, value_enc) == (0 if bad else -1)
    else:
        assert kernels.validate(batch, key_enc, value_enc) == (1 if bad else -1)


def test_validate_flags_negative_timestamps() -> None:
    batch = RecordBatch.from_columns([b"a", b"b"], [b"1", b"2"], [5, -1])
    assert kernels.validate(batch, kernels.BYTES, kernels.BYTES) == 1


def test_project_and_convert_give_what_python_serializes() -> None:
    values = [
        b'{"user":"u1","n":3}',
        b'{"user":"caf\xc3\xa9","n":-4}',
        b'{"n":5}',
        b'{"user":null}',
        b"[1]",
        None,
    ]
    batch = batch_of([b"k"] * len(values), values)
    projected = kernels.project(batch, 1, "user", 1)
    converted = kernels.convert(projected, kernels.STRING, kernels.STRING, kernels.JSON, kernels.STRING)
    string = Serdes.string()
    expected = [string.serialize("t", json_field("user")(_json(v))) for v in values]
    assert converted.values() == expected
    numbers = kernels.convert(
        kernels.project(batch, 1, "n", 1), kernels.STRING, kernels.STRING, kernels.JSON, kernels.LONG
    )
    assert numbers.values() == [Serdes.long().serialize("t", json_field("n")(_json(v))) for v in values]
    # key from a value field
    rekeyed = kernels.project(batch, 1, "user", 0)
    assert rekeyed.keys()[:2] == [b'"u1"', '"café"'.encode()]


def test_convert_refuses_what_python_would_write_differently() -> None:
    spaced = batch_of([b"k"], [b'{"a": 1}'])
    assert kernels.convert(spaced, kernels.STRING, kernels.STRING, kernels.JSON, kernels.JSON) is None
    compact = batch_of([b"k"], [b'{"a":1,"b":[true,null,"x"]}'])
    same = kernels.convert(compact, kernels.STRING, kernels.STRING, kernels.JSON, kernels.JSON)
    assert same.values() == compact.values()
    number_as_string = batch_of([b"k"], [b"5"])
    assert (
        kernels.convert(number_as_string, kernels.STRING, kernels.STRING, kernels.JSON, kernels.STRING)
        is None
    )
    for doc in (b'{"a":1,"a":2}', b'{"a":1.5}', b'"\\/"', b"-0"):
        batch = batch_of([b"k"], [doc])
        assert kernels.convert(batch, kernels.STRING, kernels.STRING, kernels.JSON, kernels.JSON) is None, doc


def test_take_keeps_records_in_order_with_their_columns() -> None:
    batch = RecordBatch.from_columns([b"a", None, b"c"], [b"1", b"2", None], [10, 20, 30], 1, [7, 8, 9])
    taken = kernels.take(batch, np.array([2, 0], dtype=np.int32))
    assert taken.to_list() == [(b"c", None, 30, 1, 9, None), (b"a", b"1", 10, 1, 7, None)]


def test_split_partitions_uses_the_default_partitioner_and_round_robin() -> None:
    keys = [f"k{i}".encode() for i in range(50)] + [None, None, None]
    batch = batch_of(keys, [b"v"] * len(keys))
    parts, next_rr = kernels.split_partitions(batch, 3, 1)
    by_offset = {}
    for partition, part in parts:
        offsets = [record[4] for record in part]
        assert offsets == sorted(offsets)  # input order within a partition
        for record in part:
            assert record[3] == partition
            by_offset[record[4]] = partition
    for offset, k in enumerate(keys[:50]):
        assert by_offset[offset] == default_partition(k, 3)
    assert [by_offset[50], by_offset[51], by_offset[52]] == [1, 2, 0]
    assert next_rr == 1
    assert sum(len(p) for _, p in parts) == len(keys)


def _aggregate(cache, batch, op, value_enc=kernels.LONG, store=None, reducer=None, **window):  # type: ignore[no-untyped-def]
    store = {} if store is None else store
    store_enc = kernels.LONG if op == kernels.COUNT else value_enc
    return kernels.aggregate(
        cache, "0_0-s", batch, op, value_enc, store_enc, store.get, bool(window), **window, reducer=reducer
    )


def _flushed(cache):  # type: ignore[no-untyped-def]
    cache.flush("0_0-s")


def _wavy(aggregate: int, value: int) -> int:
    """A reducer no kernel has, whose result depends on the order of the values."""
    return aggregate * 3 - value if value % 4 else aggregate + value


@pytest.mark.parametrize(
    ("op", "fold"),
    [(kernels.SUM, operator.add), (kernels.MIN, min), (kernels.MAX, max), (kernels.REDUCE, _wavy)],
)
def test_aggregate_reduces_per_key_like_python(op, fold) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(op)
    keys = [f"k{rng.randrange(20)}".encode() for _ in range(500)]
    numbers = [rng.randrange(-50, 50) for _ in keys]
    batch = batch_of([*keys, None, b"k1"], [*(LONG.pack(n) for n in numbers), LONG.pack(1), None])
    flushed: list = []
    cache = RecordCache(1 << 20)
    cache.add_namespace("0_0-s", flushed.extend)
    store = {b"k3": LONG.pack(1000)}  # an aggregate the cache does not hold yet
    reducer = fold if op == kernels.REDUCE else None
    assert _aggregate(cache, batch, op, store=store, reducer=reducer) == (-1, 0)
    expected: dict[bytes, int] = {b"k3": 1000}
    last_ts: dict[bytes, int] = {}
    for i, (k, n) in enumerate(zip(keys, numbers, strict=True)):
        expected[k] = fold(expected[k], n) if k in expected else n
        last_ts[k] = i
    cache.flush("0_0-s")
    got = {k: LONG.unpack(v)[0] for k, v, _ in flushed}
    assert got == expected
    assert {k: ts for k, _, ts in flushed} == last_ts
    # dirty order: the order of each key's last update, as record-by-record puts leave it
    assert [k for k, _, _ in flushed] == sorted(last_ts, key=last_ts.__getitem__)


def test_aggregate_counts_and_continues_from_the_cache() -> None:
    cache = RecordCache(1 << 20)
    flushed: list = []
    cache.add_namespace("0_0-s", flushed.extend)
    batch = batch_of([b"a", b"b", b"a"], [b"x", b"y", b"z"])
    _aggregate(cache, batch, kernels.COUNT)
    _aggregate(cache, batch, kernels.COUNT)
    cache.flush("0_0-s")
    assert {k: LONG.unpack(v)[0] for k, v, _ in flushed} == {b"a": 4, b"b": 2}


def test_windowed_count_buckets_hopping_windows_and_drops_closed_ones() -> None:
    cache = RecordCache(1 << 20)
    flushed: list = []
    cache.add_namespace("0_0-s", flushed.extend)
    timestamps = [0, 5, 12, 30, 3]  # 3 arrives after stream time 30: windows ending by 30 - grace close
    batch = batch_of([b"a"] * 5, [b"v"] * 5, timestamps)
    observed, dropped = _aggregate(
        cache, batch, kernels.COUNT, size_ms=10, advance_ms=5, grace_ms=2, observed_time=-1
    )
    assert observed == 30
    cache.flush("0_0-s")
    counts = {struct.unpack(">q", k[-8:])[0]: LONG.unpack(v)[0] for k, v, _ in flushed}
    expected: dict[int, int] = {}
    stream_time, expected_dropped = -1, 0
    for ts in timestamps:
        stream_time = max(stream_time, ts)
        start = max(0, ts - 10 + 5) // 5 * 5
        while start <= ts:
            if start + 10 <= stream_time - 2:
                expected_dropped += 1
            else:
                expected[start] = expected.get(start, 0) + 1
            start += 5
    assert counts == expected
    assert dropped == expected_dropped


@pytest.mark.parametrize("result", [2**63, 1.5, "1", None, True])
def test_a_python_reducer_result_the_long_cannot_hold_leaves_the_batch_to_python(result) -> None:  # type: ignore[no-untyped-def]
    cache = RecordCache(1 << 20)
    cache.add_namespace("0_0-s", lambda entries: None)
    batch = batch_of([b"a", b"b", b"a"], [LONG.pack(1), LONG.pack(2), LONG.pack(3)])
    assert _aggregate(cache, batch, kernels.REDUCE, reducer=lambda a, v: result) is None
    assert cache.namespace_size("0_0-s") == 0


def test_reduce_needs_a_reducer_and_only_reduce_takes_one() -> None:
    cache = RecordCache(1 << 20)
    cache.add_namespace("0_0-s", lambda entries: None)
    batch = batch_of([b"a"], [LONG.pack(1)])
    with pytest.raises(ValueError, match="REDUCE needs a reducer"):
        _aggregate(cache, batch, kernels.REDUCE)
    with pytest.raises(ValueError, match="REDUCE needs a reducer"):
        _aggregate(cache, batch, kernels.SUM, reducer=operator.add)


def test_aggregate_leaves_overflow_to_python_and_changes_nothing() -> None:
    cache = RecordCache(1 << 20)
    cache.add_namespace("0_0-s", lambda entries: None)
    batch = batch_of([b"a", b"a"], [LONG.pack(2**62), LONG.pack(2**62)])
    assert _aggregate(cache, batch, kernels.SUM) is None
    assert cache.namespace_size("0_0-s") == 0


def test_aggregate_evictions_flush_through_the_listener() -> None:
    flushed: list = []
    cache = RecordCache(200)  # room for about two entries
    cache.add_namespace("0_0-s", flushed.extend)
    batch = batch_of([f"key-{i}".encode() for i in range(10)], [b"v"] * 10)
    _aggregate(cache, batch, kernels.COUNT)
    assert len(flushed) >= 8
    assert all(LONG.unpack(v)[0] == 1 for _, v, _ in flushed)


def _uncached(batch, op, store, value_enc=kernels.LONG, reducer=None, **window):  # type: ignore[no-untyped-def]
    """aggregate_uncached over a dict store of timestamped aggregates; the keys it loaded too."""
    loaded: list[list[bytes]] = []

    def load_many(keys: list[bytes]) -> list[bytes | None]:
        loaded.append(keys)
        return [store.get(k) for k in keys]

    store_enc = kernels.LONG if op == kernels.COUNT else value_enc
    result = kernels.aggregate_uncached(
        batch,
        op,
        value_enc,
        store_enc,
        load_many,
        bool(window),
        **window,
        reducer=reducer,
        timestamped=True,
        forward=not window,
    )
    return result, loaded


STAMPED = struct.Struct(">qq")  # ValueAndTimestamp of a long: the timestamp, then the value


@pytest.mark.parametrize(
    ("op", "fold"),
    [(kernels.COUNT, None), (kernels.SUM, operator.add), (kernels.MAX, max), (kernels.REDUCE, _wavy)],
)
def test_aggregate_uncached_gives_every_update_and_each_keys_newest_change(op, fold) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(op)
    keys = [f"k{rng.randrange(15)}".encode() for _ in range(400)]
    numbers = [rng.randrange(-50, 50) for _ in keys]
    timestamps = [1000 + rng.randrange(100) for _ in keys]  # out of order
    batch = RecordBatch.from_columns(
        [*keys, None, b"k1"],
        [*(LONG.pack(n) for n in numbers), LONG.pack(1), None],
        np.array([*timestamps, 5, 6], dtype=np.int64),
        0,
        np.arange(100, 100 + len(keys) + 2, dtype=np.int64),
    )
    store = {b"k3": STAMPED.pack(1050, 1000)}  # an aggregate stored before, at time 1050
    reducer = fold if op == kernels.REDUCE else None
    (observed, dropped, changes, updates), loaded = _uncached(batch, op, store, reducer=reducer)
    assert (observed, dropped) == (-1, 0)
    assert len(loaded) == 1 and sorted(loaded[0]) == sorted(set(keys))  # each key read once
    # Every update in record order, as the per-record path forwards it: the aggregate (no
    # timestamp), stamped with the largest timestamp of the records that made it.
    aggregates: dict[bytes, tuple[int, int]] = {b"k3": (1000, 1050)}
    expected_updates, last = [], {}
    for i, (k, n, ts) in enumerate(zip(keys, numbers, timestamps, strict=True)):
        if k in aggregates:
            old, old_ts = aggregates[k]
            aggregates[k] = (old + 1 if op == kernels.COUNT else fold(old, n), max(old_ts, ts))
        else:
            aggregates[k] = (1 if op == kernels.COUNT else n, ts)
        expected_updates.append((k, LONG.pack(aggregates[k][0]), aggregates[k][1], 0, 100 + i, None))
        last[k] = i
    assert list(updates) == expected_updates
    # Each key's newest aggregate once, in the order of the keys' last updates, logged at the
    # timestamp and offset of the record that made it.
    assert list(changes) == [
        (k, STAMPED.pack(aggregates[k][1], aggregates[k][0]), timestamps[i], 0, 100 + i, None)
        for k, i in sorted(last.items(), key=lambda item: item[1])
    ]


def test_aggregate_uncached_windowed_changes_have_the_changelogs_keys() -> None:
    timestamps = [0, 5, 12, 30, 3]  # 3 arrives after stream time 30: windows ending by 30 - grace close
    batch = batch_of([b"a"] * 5, [b"v", None, b"v", b"v", b"v"], timestamps)  # a null value counts
    window_key = struct.Struct(">qi")
    store = {b"a" + struct.pack(">q", 10): STAMPED.pack(2, 7)}
    (observed, dropped, changes, updates), loaded = _uncached(
        batch, kernels.COUNT, store, size_ms=10, advance_ms=5, grace_ms=2, observed_time=-1
    )
    assert (observed, dropped, updates) == (30, 1, None)
    assert sorted(loaded[0]) == sorted(b"a" + struct.pack(">q", s) for s in (0, 5, 10, 25, 30))
    # record key, window start, sequence number 0; newest count and the timestamp it carries
    got = {k[1:]: (STAMPED.unpack(v), ts) for k, v, ts, *_ in changes}
    assert got == {
        window_key.pack(0, 0): ((5, 2), 5),
        window_key.pack(5, 0): ((12, 2), 12),
        window_key.pack(10, 0): ((12, 8), 12),
        window_key.pack(25, 0): ((30, 1), 30),
        window_key.pack(30, 0): ((30, 1), 30),
    }
    with pytest.raises(ValueError, match="windowed keys"):
        kernels.aggregate_uncached(
            batch, kernels.COUNT, kernels.BYTES, kernels.LONG, list, True, 10, 5, forward=True
        )


def test_aggregate_uncached_leaves_what_it_cannot_hold_to_python() -> None:
    batch = batch_of([b"a", b"a"], [LONG.pack(2**62), LONG.pack(2**62)])
    assert _uncached(batch, kernels.SUM, {})[0] is None  # the sum overflows the long
    # bytes in the store that are no timestamped long
    assert _uncached(batch_of([b"a"], [b"v"]), kernels.COUNT, {b"a": b"short"})[0] is None


def test_window_runs_group_keys_in_a_row_by_their_window_start() -> None:
    starts = [0, 0, 5, 5, 5, 0, -1, 2**62, 2**62]
    keys = [window_key(f"k{i % 4}".encode() * (i % 3), s) for i, s in enumerate(starts)]
    runs = kernels.window_key_runs(iter(keys), TIMESTAMP_SIZE)
    assert [(s, len(run)) for s, run in runs] == [(0, 2), (5, 3), (0, 1), (-1, 1), (2**62, 2)]
    assert [k for _, run in runs for k in run] == keys
    # Changelog records: grouped by the start before the sequence number, which is cut off; a
    # later change of a key in a run replaces the earlier one, as a later put would.
    changes = [(changelog_key(key_and_start(k)[0], s, 7), None if i % 2 else b"v%d" % i) for i, (k, s) in
               enumerate(zip(keys, starts, strict=True))]  # fmt: skip
    changes.insert(4, (changes[2][0], b"replaced"))
    runs = kernels.window_change_runs(iter(changes), TIMESTAMP_SIZE + SEQ_SIZE, SEQ_SIZE)
    assert [s for s, _ in runs] == [0, 5, 0, -1, 2**62]
    assert runs[0][1] == {keys[0]: b"v0", keys[1]: None}
    assert runs[1][1] == {keys[2]: b"replaced", keys[3]: None, keys[4]: b"v4"}
    assert list(runs[1][1]) == [keys[2], keys[3], keys[4]]
    assert kernels.window_key_runs([], TIMESTAMP_SIZE) == kernels.window_change_runs([], 12, 4) == []
    with pytest.raises(ValueError, match="window suffix"):
        kernels.window_key_runs([b"short"], TIMESTAMP_SIZE)
    with pytest.raises(TypeError, match="bytes"):
        kernels.window_key_runs(["text-key-long-enough"], TIMESTAMP_SIZE)
    with pytest.raises(ValueError, match="window start"):
        kernels.window_change_runs([], 12, 5)
    with pytest.raises(ValueError, match="window start"):
        kernels.window_key_runs([b"0123456789abcdef"], 4)


def test_numbers_decode_and_encode_for_array_callers() -> None:
    batch = batch_of([b"a", b"b", b"c"], [LONG.pack(5), None, LONG.pack(-7)])
    values, nulls = kernels.decode_numbers(batch, 1, kernels.LONG)
    assert values.tolist() == [5, 0, -7]
    assert nulls.tolist() == [False, True, False]
    assert kernels.encode_numbers(np.array([1, -2]), kernels.LONG) == [LONG.pack(1), LONG.pack(-2)]
    doubles = kernels.encode_numbers(np.array([1.5]), kernels.DOUBLE)
    assert kernels.decode_numbers(batch_of([b"x"], doubles), 1, kernels.DOUBLE)[0].tolist() == [1.5]
    with pytest.raises(ValueError):
        kernels.decode_numbers(batch_of([b"x"], [b"abc"]), 1, kernels.LONG)


@pytest.mark.parametrize(
    ("serde", "enc", "column"),
    [
        (Serdes.string(), kernels.STRING, ["a", "é", "", None, "zz"]),
        (Serdes.bytes(), kernels.BYTES, [b"\x00", None, b""]),
        (Serdes.long(), kernels.LONG, [0, -(2**63), 2**63 - 1, None]),
        (Serdes.integer(), kernels.INT, [-(2**31), 7, None]),
        (Serdes.short(), kernels.SHORT, [-(2**15), 3, None]),
        (Serdes.double(), kernels.DOUBLE, [1.5, -0.0, None, float("inf")]),
        (Serdes.float(), kernels.FLOAT, [0.1, None, -3.25]),
    ],
)
def test_columns_decode_as_the_serdes_read_each_record(serde, enc, column) -> None:  # type: ignore[no-untyped-def]
    raw = [serde.serialize("t", x) for x in column]
    for side, batch in ((0, batch_of(raw, [b"v"] * len(raw))), (1, batch_of([b"k"] * len(raw), raw))):
        decoded = kernels.decode_objects(batch, side, enc)
        expected = [serde.deserialize("t", b) for b in raw]
        assert decoded == expected
        assert [type(x) for x in decoded] == [type(x) for x in expected]


def test_a_column_with_a_record_the_serde_refuses_is_left_to_record_by_record_decoding() -> None:
    assert kernels.decode_objects(batch_of([b"ok", b"\xff"], [b"v", b"v"]), 0, kernels.STRING) is None
    assert kernels.decode_objects(batch_of([b"k"], [b"short"]), 1, kernels.LONG) is None
    assert kernels.decode_objects(batch_of([b"k"], [LONG.pack(1)]), 1, kernels.INT) is None
    assert kernels.decode_objects(batch_of([b"k"], [b"{}"]), 1, kernels.JSON) is None  # JSON: Python's parser


def test_batch_building_kernels_keep_each_records_headers() -> None:
    # The compiled path runs batches with headers through filters, projections and sinks: each
    # output record keeps the headers of the input record it came from.
    docs_ = [json.dumps({"bot": i % 2 == 0, "user": f"u{i}"}).encode() for i in range(12)]
    headers = [None if i % 3 == 0 else [("trace", f"t{i}".encode()), ("n", None)] for i in range(12)]
    rows = [(f"k{i}".encode(), d, i, 0, i, h) for i, (d, h) in enumerate(zip(docs_, headers, strict=True))]
    batch = RecordBatch.from_records(rows).slice(1, 12)  # a view: its headers start at record 1
    expected = headers[1:12]

    def headers_of(b: RecordBatch) -> list[Any]:
        return [b.headers(i) for i in range(len(b))]

    picked = np.asarray([5, 0, 7], dtype=np.int32)
    assert headers_of(kernels.take(batch, picked)) == [expected[5], expected[0], expected[7]]
    projected = kernels.project(batch, 1, "user", 1)
    assert projected is not None and headers_of(projected) == expected
    converted = kernels.convert(projected, kernels.STRING, kernels.STRING, kernels.JSON, kernels.STRING)
    assert converted is not None and headers_of(converted) == expected
    parts, _ = kernels.split_partitions(converted, 3, 0)
    assert len(parts) > 1
    by_offset = {batch.offset(i): expected[i] for i in range(len(batch))}
    for _, part in parts:
        assert headers_of(part) == [by_offset[part.offset(i)] for i in range(len(part))]
    # A batch a Python step built from columns takes the headers of the records it came from.
    built = batch_of([b"a", b"b"], [b"1", b"2"])
    assert headers_of(kernels.carry_headers(built, batch, picked[:2])) == [expected[5], expected[0]]
    assert headers_of(kernels.carry_headers(batch_of([b"a"] * 11, [b"1"] * 11), batch)) == expected
    with pytest.raises(ValueError, match="2 records cannot take the headers of 3"):
        kernels.carry_headers(built, batch, picked)
    with pytest.raises(IndexError, match="record 11 of a batch of 11"):
        kernels.carry_headers(built, batch, np.asarray([0, 11], dtype=np.int32))
    plain = batch_of([b"k"] * 4, docs_[:4])
    assert not kernels.take(plain, picked[1:2]).has_headers
    assert not kernels.split_partitions(plain, 3, 0)[0][0][1].has_headers
