"""Record-at-a-time processors of KStream: filter, map, flat_map, select_key, peek, foreach,
branch, pass-through.

Each supplier keeps its user function as an attribute and returns a new processor per task. A
processor forwards records with the input's timestamp and headers unless the operation changes
them. Filter, map and map_values, the most used, are C processors (``kstreams._native.per_record``)
with this module's classes on top.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from kstreams._native.per_record import FilterCore, MapCore, MapValuesCore, key_value_of
from kstreams.processor import Processor, ProcessorContext, Record

__all__ = [
    "BranchSupplier",
    "FilterSupplier",
    "FlatMapSupplier",
    "FlatMapValuesSupplier",
    "ForeachSupplier",
    "MapSupplier",
    "MapValuesSupplier",
    "PassThroughSupplier",
    "PeekSupplier",
    "SelectKeySupplier",
    "key_value_of",
]

logger = logging.getLogger(__name__)


class _Forwarding(Processor[Any, Any, Any, Any]):
    """A processor that keeps its context for forwarding."""

    context: ProcessorContext[Any, Any]

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context


class FilterSupplier:
    """Keeps records for which ``predicate(key, value)`` is true (false when ``negate``)."""

    kind = "filter"

    def __init__(self, predicate: Callable[[Any, Any], bool], negate: bool = False) -> None:
        self.predicate = predicate
        self.negate = negate

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _Filter(self.predicate, self.negate)


class _Filter(FilterCore, _Forwarding):
    """The filter processor (its ``process`` is C: ``FilterCore``)."""


class MapSupplier:
    """Replaces key and value with ``mapper(key, value)`` -> KeyValue."""

    kind = "map"

    def __init__(self, mapper: Callable[[Any, Any], Any]) -> None:
        self.mapper = mapper

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _Map(self.mapper)


class _Map(MapCore, _Forwarding):
    """The map processor (its ``process`` is C: ``MapCore``)."""


class MapValuesSupplier:
    """Replaces the value with ``mapper(value)``, or ``mapper(key, value)`` when ``with_key``."""

    kind = "map_values"

    def __init__(self, mapper: Callable[..., Any], with_key: bool = False) -> None:
        self.mapper = mapper
        self.with_key = with_key

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _MapValues(self.mapper, self.with_key)


class _MapValues(MapValuesCore, _Forwarding):
    """The map_values processor (its ``process`` is C: ``MapValuesCore``)."""


class FlatMapSupplier:
    """Replaces each record with the KeyValues ``mapper(key, value)`` returns (zero or more)."""

    kind = "flat_map"

    def __init__(self, mapper: Callable[[Any, Any], Iterable[Any]]) -> None:
        self.mapper = mapper

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _FlatMap(self.mapper)


class _FlatMap(_Forwarding):
    def __init__(self, mapper: Callable[[Any, Any], Iterable[Any]]) -> None:
        self.mapper = mapper

    def process(self, record: Record[Any, Any]) -> None:
        for result in self.mapper(record.key, record.value):
            key, value = key_value_of(result, "flat_map")
            self.context.forward(Record(key, value, record.timestamp, record.headers))


class FlatMapValuesSupplier:
    """Replaces each record with one record per value ``mapper(value)`` returns, same key."""

    kind = "flat_map_values"

    def __init__(self, mapper: Callable[..., Iterable[Any]], with_key: bool = False) -> None:
        self.mapper = mapper
        self.with_key = with_key

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _FlatMapValues(self.mapper, self.with_key)


class _FlatMapValues(_Forwarding):
    def __init__(self, mapper: Callable[..., Iterable[Any]], with_key: bool) -> None:
        self.mapper = mapper
        self.with_key = with_key

    def process(self, record: Record[Any, Any]) -> None:
        values = self.mapper(record.key, record.value) if self.with_key else self.mapper(record.value)
        for value in values:
            self.context.forward(record.with_value(value))


class SelectKeySupplier:
    """Replaces the key with ``selector(key, value)``; the value stays."""

    kind = "select_key"

    def __init__(self, selector: Callable[[Any, Any], Any]) -> None:
        self.selector = selector

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _SelectKey(self.selector)


class _SelectKey(_Forwarding):
    def __init__(self, selector: Callable[[Any, Any], Any]) -> None:
        self.selector = selector

    def process(self, record: Record[Any, Any]) -> None:
        self.context.forward(record.with_key(self.selector(record.key, record.value)))


class PeekSupplier:
    """Calls ``action(key, value)`` on each record, then forwards it unchanged."""

    kind = "peek"

    def __init__(self, action: Callable[[Any, Any], None]) -> None:
        self.action = action

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _Peek(self.action)


class _Peek(_Forwarding):
    def __init__(self, action: Callable[[Any, Any], None]) -> None:
        self.action = action

    def process(self, record: Record[Any, Any]) -> None:
        self.action(record.key, record.value)
        self.context.forward(record)


class ForeachSupplier:
    """Calls ``action(key, value)`` on each record; a terminal node (forwards nothing)."""

    kind = "foreach"

    def __init__(self, action: Callable[[Any, Any], None]) -> None:
        self.action = action

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _Foreach(self.action)


class _Foreach(Processor[Any, Any, Any, Any]):
    def __init__(self, action: Callable[[Any, Any], None]) -> None:
        self.action = action

    def process(self, record: Record[Any, Any]) -> None:
        self.action(record.key, record.value)


class BranchSupplier:
    """Sends each record to the first branch whose predicate holds (the default branch, when one
    exists, has no predicate and takes the rest); records matching no branch are dropped.

    ``predicates`` and ``child_names`` are shared with the ``BranchedKStream`` that builds them,
    so branches added after this node was created are seen by every processor it makes.
    """

    kind = "branch"

    def __init__(self, predicates: list[Callable[[Any, Any], bool]], child_names: list[str]) -> None:
        self.predicates = predicates
        self.child_names = child_names

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _Branch(tuple(self.predicates), tuple(self.child_names))


class _Branch(_Forwarding):
    def __init__(
        self, predicates: tuple[Callable[[Any, Any], bool], ...], child_names: tuple[str, ...]
    ) -> None:
        self.predicates = predicates
        self.child_names = child_names

    def process(self, record: Record[Any, Any]) -> None:
        for predicate, child in zip(self.predicates, self.child_names, strict=False):
            if predicate(record.key, record.value):
                self.context.forward(record, child)
                return
        if len(self.child_names) > len(self.predicates):
            self.context.forward(record, self.child_names[len(self.predicates)])


class PassThroughSupplier:
    """Forwards every record unchanged (branch children, merge, join merge)."""

    kind = "pass_through"

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _PassThrough()


class _PassThrough(_Forwarding):
    def process(self, record: Record[Any, Any]) -> None:
        self.context.forward(record)
