"""Predicates and extractors that the DSL compiles to batch kernels.

A plain Python lambda given to ``filter``, ``select_key`` or ``map_values`` runs record by record
with the GIL. The same operations written with this vocabulary run as compiled kernels over whole
batches without the GIL, wherever the stream's serdes are built-in (string, bytes, long, int, short,
double, float, json); they remain ordinary callables, so they also work anywhere else::

    from kstreams.predicates import json_field, key, value

    stream.filter(value().gt(5))                       # a long value above 5
    stream.filter(json_field("bot").eq(False) & json_field("lang").eq("en"))
    stream.select_key(json_field("user"))              # key = the value's "user" field
    stream.map_values(json_field("user"))

Comparison rules (the same compiled and in Python): ``eq``/``ne`` compare values of one kind
(null, bool, number, string, bytes); a bool never equals a number and numbers compare by value
(1 == 1.0). ``lt``/``le``/``gt``/``ge`` hold only between two numbers, two strings (code point
order) or two byte strings, and are false otherwise (null included) instead of raising. A field
of a value that is not a JSON object, or a missing field, is None. Number comparisons between an
integer and a float go through float64 (exact for integers up to 2**53).
"""

from __future__ import annotations

import logging
import math
from typing import Any

__all__ = ["Expr", "Predicate", "json_field", "key", "value"]

logger = logging.getLogger(__name__)

_KEY, _VALUE = 0, 1

# One compiled node: (kind, side, field, cmp, category, constant, a, b); see kernels.Predicate.
Node = tuple[str, int, "str | None", "str | None", "str | None", Any, int, int]


def _category(v: Any) -> str:
    if v is None:
        return "null"
    t = type(v)
    if t is bool:
        return "bool"
    if t is int or t is float:
        return "num"
    if t is str:
        return "str"
    if t is bytes:
        return "bytes"
    return "other"


def _equal(a: Any, b: Any) -> bool:
    ca = _category(a)
    if ca != _category(b) or ca == "other":
        return False
    if ca == "num" and (type(a) is float or type(b) is float):
        return float(a) == float(b)
    return bool(a == b)


def _order(a: Any, b: Any) -> int | None:
    """-1/0/1, or None when the two do not order (different kinds, null, NaN)."""
    ca = _category(a)
    if ca != _category(b) or ca not in ("num", "str", "bytes"):
        return None
    if ca == "num" and (type(a) is float or type(b) is float):
        x, y = float(a), float(b)
        if math.isnan(x) or math.isnan(y):
            return None
        return (x > y) - (x < y)
    return (a > b) - (a < b)


class Expr:
    """A value taken from a record: its key, its value, or a top-level field of a JSON value.

    Callable as ``expr(key, value)`` (a key selector) or ``expr(value)`` (a value mapper, for
    expressions of the value only).
    """

    __slots__ = ("field", "side")

    def __init__(self, side: int, field: str | None = None) -> None:
        self.side = side
        self.field = field

    def field_of(self, name: str) -> Expr:
        """A top-level field of this JSON object (None when absent or not an object)."""
        if self.field is not None:
            raise ValueError(f"{self!r} is already a field: nested fields are not supported yet.")
        if not isinstance(name, str):
            raise TypeError(f"A JSON field name is a str, got {name!r}.")
        return Expr(self.side, name)

    def extract(self, record_key: Any, record_value: Any) -> Any:
        base = record_key if self.side == _KEY else record_value
        if self.field is None:
            return base
        return base.get(self.field) if isinstance(base, dict) else None

    def __call__(self, *args: Any) -> Any:
        if len(args) == 2:
            return self.extract(args[0], args[1])
        if len(args) == 1 and self.side == _VALUE:
            return self.extract(None, args[0])
        raise TypeError(
            f"{self!r} is called as expr(key, value), or as expr(value) when it reads the value only."
        )

    def _cmp(self, op: str, constant: Any) -> Predicate:
        category = _category(constant)
        if category in ("other", "null") and op != "is_null":
            raise TypeError(
                f"Compare {self!r} with a bool, number, str or bytes (got {constant!r}); "
                "use is_null() to test for null."
            )
        return Predicate(("cmp", self, op, constant))

    def eq(self, constant: Any) -> Predicate:
        return self._cmp("eq", constant)

    def ne(self, constant: Any) -> Predicate:
        return self._cmp("ne", constant)

    def lt(self, constant: Any) -> Predicate:
        return self._cmp("lt", constant)

    def le(self, constant: Any) -> Predicate:
        return self._cmp("le", constant)

    def gt(self, constant: Any) -> Predicate:
        return self._cmp("gt", constant)

    def ge(self, constant: Any) -> Predicate:
        return self._cmp("ge", constant)

    def is_null(self) -> Predicate:
        return Predicate(("cmp", self, "is_null", None))

    def __repr__(self) -> str:
        base = "key()" if self.side == _KEY else "value()"
        return base if self.field is None else f"{base}.field_of({self.field!r})"


class Predicate:
    """A test of a record, callable as ``predicate(key, value) -> bool``; combine with ``&``,
    ``|`` and ``~`` (both sides of ``&``/``|`` short-circuit as in Python)."""

    __slots__ = ("_tree",)

    def __init__(self, tree: tuple[Any, ...]) -> None:
        self._tree = tree

    def __call__(self, record_key: Any, record_value: Any) -> bool:
        return _evaluate(self._tree, record_key, record_value)

    def __and__(self, other: Predicate) -> Predicate:
        return Predicate(("and", self._tree, _tree_of(other)))

    def __or__(self, other: Predicate) -> Predicate:
        return Predicate(("or", self._tree, _tree_of(other)))

    def __invert__(self) -> Predicate:
        return Predicate(("not", self._tree))

    def expressions(self) -> list[Expr]:
        """Every expression the predicate reads."""
        found: list[Expr] = []
        _collect(self._tree, found)
        return found

    def constants(self) -> list[Any]:
        """Every constant the predicate compares with."""
        return [node[5] for node in self.nodes()[0] if node[0] == "cmp"]

    def nodes(self) -> tuple[list[Node], int]:
        """The flattened tree for ``kernels.Predicate``: (nodes, root index)."""
        nodes: list[Node] = []
        root = _flatten(self._tree, nodes)
        return nodes, root

    def __repr__(self) -> str:
        return f"Predicate({_show(self._tree)})"


def _tree_of(other: Any) -> tuple[Any, ...]:
    if not isinstance(other, Predicate):
        raise TypeError(f"Combine predicates with predicates, got {other!r}.")
    return other._tree


def _evaluate(tree: tuple[Any, ...], k: Any, v: Any) -> bool:
    kind = tree[0]
    if kind == "cmp":
        _, expr, op, constant = tree
        x = expr.extract(k, v)
        if op == "is_null":
            return x is None
        if op == "eq":
            return _equal(x, constant)
        if op == "ne":
            return not _equal(x, constant)
        order = _order(x, constant)
        if order is None:
            return False
        if op == "lt":
            return order < 0
        if op == "le":
            return order <= 0
        if op == "gt":
            return order > 0
        return order >= 0
    if kind == "and":
        return _evaluate(tree[1], k, v) and _evaluate(tree[2], k, v)
    if kind == "or":
        return _evaluate(tree[1], k, v) or _evaluate(tree[2], k, v)
    return not _evaluate(tree[1], k, v)


def _collect(tree: tuple[Any, ...], found: list[Expr]) -> None:
    if tree[0] == "cmp":
        found.append(tree[1])
    else:
        for sub in tree[1:]:
            _collect(sub, found)


def _flatten(tree: tuple[Any, ...], nodes: list[Node]) -> int:
    kind = tree[0]
    if kind == "cmp":
        _, expr, op, constant = tree
        category = _category(constant) if op != "is_null" else None
        nodes.append(("cmp", expr.side, expr.field, op, category, constant, 0, 0))
        return len(nodes) - 1
    a = _flatten(tree[1], nodes)
    b = _flatten(tree[2], nodes) if kind in ("and", "or") else 0
    nodes.append((kind, 0, None, None, None, None, a, b))
    return len(nodes) - 1


def _show(tree: tuple[Any, ...]) -> str:
    kind = tree[0]
    if kind == "cmp":
        _, expr, op, constant = tree
        return f"{expr!r}.{op}()" if op == "is_null" else f"{expr!r}.{op}({constant!r})"
    if kind == "not":
        return f"~({_show(tree[1])})"
    joiner = " & " if kind == "and" else " | "
    return f"({_show(tree[1])}{joiner}{_show(tree[2])})"


def key() -> Expr:
    """The record's key."""
    return Expr(_KEY)


def value() -> Expr:
    """The record's value."""
    return Expr(_VALUE)


def json_field(name: str) -> Expr:
    """A top-level field of the record's JSON value (None when absent or not an object)."""
    return Expr(_VALUE).field_of(name)
