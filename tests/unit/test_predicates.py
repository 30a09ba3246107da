"""The predicate vocabulary: plain callables with the documented comparison rules."""

from __future__ import annotations

import math

import pytest

from kstreams.predicates import Predicate, json_field, key, value


def test_comparisons_hold_only_between_values_of_one_kind() -> None:
    assert value().gt(5)(None, 6)
    assert not value().gt(5)(None, "6")  # a string never orders with a number
    assert not value().gt(5)(None, None)  # null orders with nothing instead of raising
    assert value().eq(1)(None, 1.0)  # numbers compare by value
    assert not value().eq(1)(None, True)  # a bool is not a number
    assert value().ne(1)(None, True)
    assert value().lt("b")(None, "a")
    assert not value().ge(0.0)(None, math.nan)
    assert value().eq(b"x")(None, b"x")


def test_json_fields_read_top_level_fields_of_objects() -> None:
    bot = json_field("bot")
    assert bot.eq(False)(None, {"bot": False})
    assert not bot.eq(False)(None, {"bot": 0})
    assert bot.is_null()(None, {"other": 1})
    assert bot.is_null()(None, [1, 2])
    assert bot(None, {"bot": True}) is True  # an extractor: select_key(json_field(...))
    assert bot({"bot": 3}) == 3  # and a value mapper: map_values(json_field(...))


def test_predicates_combine_and_short_circuit() -> None:
    both = json_field("n").gt(1) & json_field("n").lt(5)
    either = key().eq("a") | value().is_null()
    assert both(None, {"n": 3}) and not both(None, {"n": 7})
    assert either("a", 1) and either("b", None) and not either("b", 1)
    assert (~either)("b", 1)


def test_predicates_flatten_to_kernel_nodes() -> None:
    nodes, root = (json_field("n").gt(1) & ~key().eq("a")).nodes()
    assert root == len(nodes) - 1
    assert nodes[root][0] == "and"
    assert ("cmp", 1, "n", "gt", "num", 1, 0, 0) in nodes


def test_bad_constants_are_refused_at_construction() -> None:
    with pytest.raises(TypeError):
        value().eq([1])
    with pytest.raises(TypeError):
        value().gt(None)
    with pytest.raises(TypeError):
        json_field("a") & (lambda k, v: True)  # type: ignore[operator]
    assert isinstance(value().is_null(), Predicate)
