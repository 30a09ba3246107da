"""What DSL operators pass around: KeyValue (a user's key-value pair) and Change (a table update).

A KTable's processors forward ``Change(new, old)`` values to each other (a C type, made once per
update); ``to_stream()`` turns each change into a plain record whose value is the new value (None
for a deletion).
"""

from __future__ import annotations

import logging
from typing import Generic, NamedTuple, TypeVar

from kstreams._native.record import Change

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
