"""ValueAndTimestamp (a C type) behaves as the immutable value object stores and processors rely on."""

from __future__ import annotations

import pickle

import pytest

from kstreams.state import ValueAndTimestamp


def test_make_and_fields() -> None:
    made = ValueAndTimestamp.make({"a": 1}, 5)
    assert made is not None
    assert (made.value, made.timestamp) == ({"a": 1}, 5)
    assert ValueAndTimestamp.make(None, 5) is None  # a deletion, as Kafka's make
    assert ValueAndTimestamp.get_value_or_null(made) == {"a": 1}
    assert ValueAndTimestamp.get_value_or_null(None) is None
    with pytest.raises(AttributeError):
        made.value = 2  # type: ignore[misc]


def test_equality_hash_repr_pickle_and_match() -> None:
    assert ValueAndTimestamp(1, 5) == ValueAndTimestamp.make(1, 5)
    assert ValueAndTimestamp(1, 5) != ValueAndTimestamp(1, 6)
    assert ValueAndTimestamp(1, 5) != ValueAndTimestamp(2, 5)
    assert ValueAndTimestamp(1, 5) != (1, 5)
    assert len({ValueAndTimestamp(1, 5), ValueAndTimestamp(1, 5), ValueAndTimestamp(1, 6)}) == 2
    assert repr(ValueAndTimestamp("v", 5)) == "ValueAndTimestamp(value='v', timestamp=5)"
    assert pickle.loads(pickle.dumps(ValueAndTimestamp("v", 5))) == ValueAndTimestamp("v", 5)
    match ValueAndTimestamp("v", 5):
        case ValueAndTimestamp(value, timestamp):
            assert (value, timestamp) == ("v", 5)
        case _:
            pytest.fail("ValueAndTimestamp did not match by position")
    assert ValueAndTimestamp[int].__args__ == (int,)  # type: ignore[attr-defined]
