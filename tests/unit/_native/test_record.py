"""Record, FixedKeyRecord and Change (C types) behave as the immutable value objects processors rely on."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys

import pytest

from kstreams.processor import FixedKeyRecord, Record
from kstreams.topology.dsl import Change


def test_fields_defaults_and_immutability() -> None:
    record = Record("k", 1)
    assert (record.key, record.value, record.timestamp, record.headers) == ("k", 1, 0, None)
    with pytest.raises(AttributeError):
        record.value = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        record.extra = 1  # type: ignore[attr-defined]


def test_with_methods_return_modified_copies() -> None:
    record = Record("k", 1, 5, [("h", b"v")])
    assert record.with_key("j") == Record("j", 1, 5, [("h", b"v")])
    assert record.with_value(2) == Record("k", 2, 5, [("h", b"v")])
    assert record.with_timestamp(7) == Record("k", 1, 7, [("h", b"v")])
    assert record.with_headers(iter([("x", None)])) == Record("k", 1, 5, [("x", None)])
    assert record.with_headers(None).headers is None
    assert record == Record("k", 1, 5, [("h", b"v")])  # the original is unchanged


def test_negative_timestamp_is_refused() -> None:
    with pytest.raises(ValueError, match="Timestamp must not be negative, got -1"):
        Record("k", 1, 5).with_timestamp(-1)


def test_equality_and_hash_cover_all_four_fields() -> None:
    assert Record("k", 1, 5) == Record("k", 1, 5)
    assert hash(Record("k", 1, 5)) == hash(Record("k", 1, 5))
    assert len({Record("k", 1, 5), Record("k", 1, 5), Record("k", 1, 6)}) == 2
    for other in (Record("j", 1, 5), Record("k", 2, 5), Record("k", 1, 6), Record("k", 1, 5, [])):
        assert Record("k", 1, 5) != other
    assert Record("k", 1, 5) != ("k", 1, 5, None)
    with pytest.raises(TypeError):
        hash(Record("k", 1, 5, [("h", b"v")]))  # a list of headers is not hashable


def test_repr_pickle_copy_and_match() -> None:
    record = Record("k", {"a": 1}, 5, [("h", b"v")])
    assert repr(record) == "Record(key='k', value={'a': 1}, timestamp=5, headers=[('h', b'v')])"
    assert pickle.loads(pickle.dumps(record)) == record
    assert copy.deepcopy(record) == record
    match record:
        case Record(key, value, timestamp):
            assert (key, value, timestamp) == ("k", {"a": 1}, 5)
        case _:
            pytest.fail("Record did not match by position")


def test_subscripted_in_annotations() -> None:
    alias = Record[str, int]
    assert alias.__origin__ is Record  # type: ignore[attr-defined]
    assert alias.__args__ == (str, int)  # type: ignore[attr-defined]


def test_fixed_key_record_keeps_its_key_and_becomes_a_record() -> None:
    record = FixedKeyRecord("k", 1, 5, [("h", b"v")])
    assert not hasattr(record, "with_key")
    assert record.with_value(2) == FixedKeyRecord("k", 2, 5, [("h", b"v")])
    assert record.with_timestamp(7).timestamp == 7
    assert record.with_headers(None).headers is None
    assert record.to_record() == Record("k", 1, 5, [("h", b"v")])
    assert FixedKeyRecord("k", 1, 5) == FixedKeyRecord("k", 1, 5) != FixedKeyRecord("k", 1, 6)
    assert hash(FixedKeyRecord("k", 1, 5, [])) == hash(FixedKeyRecord("k", 1, 5, None))  # not headers
    assert repr(FixedKeyRecord("k", 1, 5)) == "FixedKeyRecord(key='k', value=1, timestamp=5, headers=None)"
    assert pickle.loads(pickle.dumps(record)) == record
    for bad in (-1, 1.5, "5"):
        with pytest.raises(ValueError, match="Timestamp must be a non-negative int of ms"):
            record.with_timestamp(bad)  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        record.key = "j"  # type: ignore[misc]


def test_the_fixed_key_module_imports_on_its_own() -> None:
    """Importing kstreams.processor.fixed_key first (before kstreams.processor.api) works."""
    code = "from kstreams.processor.fixed_key import FixedKeyProcessor, FixedKeyRecord; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_change_is_a_read_only_pair_equal_by_value() -> None:
    change = Change(2, 1)
    assert (change.new_value, change.old_value) == (2, 1)
    assert Change(3).old_value is None
    assert change == Change(2, 1) and change != Change(2, None) and change != (2, 1)
    assert hash(change) == hash(Change(2, 1))
    assert repr(change) == "Change(new=2, old=1)"
    assert pickle.loads(pickle.dumps(change)) == change
    assert copy.copy(change) == change
    with pytest.raises(AttributeError):
        change.new_value = 3  # type: ignore[misc]
    match change:
        case Change(new, old):
            assert (new, old) == (2, 1)
    assert Change[int].__origin__ is Change


def test_a_change_is_the_latest_version_unless_marked_out_of_order() -> None:
    """Kafka's Change.isLatest: False only for an out-of-order update of a versioned table."""
    assert Change(2, 1).is_latest is True
    late = Change(2, 1, is_latest=False)
    assert late.is_latest is False
    assert late != Change(2, 1) and late == Change(2, 1, False)
    assert hash(late) == hash(Change(2, 1, False))
    assert repr(late) == "Change(new=2, old=1, is_latest=False)"
    assert pickle.loads(pickle.dumps(late)) == late and copy.copy(late).is_latest is False
    with pytest.raises(AttributeError):
        late.is_latest = True  # type: ignore[misc]
    match late:
        case Change(new, old, is_latest=False):
            assert (new, old) == (2, 1)


def test_a_windowed_key_is_a_read_only_triple_equal_ordered_and_hashed_as_its_fields() -> None:
    from kstreams.state import WindowedKey

    a = WindowedKey(b"k", 10, 20)
    assert (a.key, a.start, a.end) == (b"k", 10, 20)
    with pytest.raises(AttributeError):
        a.start = 0  # type: ignore[misc]
    assert a == WindowedKey(b"k", 10, 20) and a != WindowedKey(b"k", 10, 21)
    assert a != (b"k", 10, 20)  # only WindowedKeys compare equal
    assert hash(a) == hash(WindowedKey(b"k", 10, 20)) == hash((b"k", 10, 20))
    keys = [WindowedKey(b"k", 10, 30), WindowedKey(b"j", 50, 60), a, WindowedKey(b"k", 5, 40)]
    assert sorted(keys) == [keys[1], keys[3], a, keys[0]]  # by key, then start, then end
    assert a < keys[0] <= keys[0] and keys[0] > a >= a
    with pytest.raises(TypeError):
        _ = a < (b"k", 10, 20)  # type: ignore[operator]
    assert repr(a) == "WindowedKey(key=b'k', start=10, end=20)"
    assert str(WindowedKey("user", 0, 5)) == "[user@0/5]"  # Kafka's Windowed.toString
    assert (a.window().start(), a.window().end()) == (10, 20)
    assert pickle.loads(pickle.dumps(a)) == a == copy.deepcopy(a)
    match a:
        case WindowedKey(key, start, end):
            assert (key, start, end) == (b"k", 10, 20)
    assert WindowedKey[bytes] is not None
