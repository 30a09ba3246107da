"""What DSL operators pass around: KeyValue (a user's key-value pair) and Change (a table update).

A KTable's processors forward ``Change(new, old)`` values to each other; ``to_stream()`` turns each
change into a plain record whose value is the new value (None for a deletion).
"""

from __future__ import annotations

import logging
from typing import Generic, NamedTuple, TypeVar

__all__ = ["Change", "KeyValue"]

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")


class KeyValue(NamedTuple, Generic[K, V]):
    """A key and a value: what ``map`` and ``flat_map`` mappers return (a plain tuple works too)."""

    key: K
    value: V

    @staticmethod
    def pair(key: K, value: V) -> KeyValue[K, V]:
        return KeyValue(key, value)


class Change(Generic[V]):
    """An update of one table row: the new value and, when known, the old one (None if absent)."""

    __slots__ = ("new_value", "old_value")

    def __init__(self, new_value: V | None, old_value: V | None = None) -> None:
        self.new_value = new_value
        self.old_value = old_value

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Change)
            and self.new_value == other.new_value
            and self.old_value == other.old_value
        )

    def __hash__(self) -> int:
        return hash((self.new_value, self.old_value))

    def __repr__(self) -> str:
        return f"Change(new={self.new_value!r}, old={self.old_value!r})"
