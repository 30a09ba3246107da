"""Which DSL operations run in batch form: the one place that recognises them, from the DSL
processors' suppliers.

The DSL's suppliers say what they compute (a filter's predicate, a mapper, an aggregation's kind,
reducer and window spec), so operations are recognised here with no change to user code:

- with a kernel (``native``): filters written with ``kstreams.predicates``, projections of a
  JSON field, pass-throughs, and counts and reductions with the built-in reducers
  (``operator.add``, ``min``, ``max``), plain or over time windows;
- in batch form around a Python function: a ``filter`` with a plain predicate, a
  ``map``/``map_values``/``select_key`` with a plain function, a ``reduce`` with a Python reducer
  (the aggregation kernel calls it on numbers), and an ``aggregate`` with Python functions (plain
  or over time windows), and a session-window ``count`` (each key's sessions read once per batch).

This module decides from the topology's definition only (``describe()`` labels the kernels); the
runtime's compiler (``kstreams.processing.compiled``) then checks the serdes and stores of the running
task and falls back to the per-record path where they do not fit.
"""

from __future__ import annotations

import builtins
import logging
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from kstreams.predicates import Expr, Predicate
from kstreams.topology.dsl.processors.aggregate import StreamAggregateSupplier, WindowedAggregateSupplier
from kstreams.topology.dsl.processors.session_aggregate import SessionAggregateSupplier
from kstreams.topology.dsl.processors.stateless import (
    FilterSupplier,
    MapSupplier,
    MapValuesSupplier,
    PassThroughSupplier,
    SelectKeySupplier,
)
from kstreams.topology.dsl.windows import TimeWindows

__all__ = [
    "AGGREGATIONS",
    "PYTHON_AGGREGATE",
    "PYTHON_FILTER",
    "PYTHON_MAP",
    "PYTHON_OPS",
    "PYTHON_REDUCE",
    "PYTHON_SESSION_COUNT",
    "REDUCERS",
    "MapShape",
    "OperationKernel",
    "kernel_for_supplier",
]

logger = logging.getLogger(__name__)

# The reducers with kernels, by identity: reduce(operator.add) is a sum.
REDUCERS: dict[Any, str] = {operator.add: "sum", builtins.min: "min", builtins.max: "max"}

# How a Python mapper's result becomes the record: "map" returns (key, value); "values" and
# "values_with_key" return the value (from the value, or from key and value); "key" the key.
MapShape = Literal["map", "values", "values_with_key", "key"]

# Operations around Python functions: batch form, but no kernel (describe() does not label them).
PYTHON_FILTER = "filter[python]"
PYTHON_MAP = "map[python]"
PYTHON_REDUCE = "reduce[python]"
PYTHON_AGGREGATE = "aggregate[python]"
# A session count needs no function, but its step is Python over the store and cache (no kernel).
PYTHON_SESSION_COUNT = "session-count[python]"
PYTHON_OPS = (PYTHON_FILTER, PYTHON_MAP, PYTHON_REDUCE, PYTHON_AGGREGATE, PYTHON_SESSION_COUNT)
# The aggregations: each has a batch form over a cached store (with a kernel or around Python).
AGGREGATIONS = ("count", "sum", "min", "max", PYTHON_REDUCE, PYTHON_AGGREGATE)


@dataclass(frozen=True)
class OperationKernel:
    """What a DSL operation runs as in batch form: ``name`` (filter, project, pass, count, sum,
    min, max with kernels; one of ``PYTHON_OPS`` around a Python function) and its parameters."""

    name: str
    predicate: Predicate | None = None
    negate: bool = False
    expr: Expr | None = None
    dst_side: int = 1  # project: 0 replaces the key, 1 the value
    windows: TimeWindows | None = None
    store_name: str | None = None
    function: Callable[..., Any] | None = None  # the Python predicate, mapper or reducer
    shape: MapShape = "map"

    @property
    def native(self) -> bool:
        """Whether a kernel runs it (not a Python function called per record)."""
        return self.name not in PYTHON_OPS

    @property
    def label(self) -> str:
        """How describe() marks the node, e.g. ``filter`` or ``windowed-count``."""
        return f"windowed-{self.name}" if self.windows is not None else self.name


def kernel_for_supplier(supplier: Any) -> OperationKernel | None:
    """What a DSL processor supplier runs as in batch form, or None when it runs record by record."""
    if isinstance(supplier, FilterSupplier):
        if isinstance(supplier.predicate, Predicate):
            return OperationKernel("filter", predicate=supplier.predicate, negate=supplier.negate)
        if callable(supplier.predicate):
            return OperationKernel(PYTHON_FILTER, negate=supplier.negate, function=supplier.predicate)
        return None
    if isinstance(supplier, SelectKeySupplier):
        if isinstance(supplier.selector, Expr):
            return OperationKernel("project", expr=supplier.selector, dst_side=0)
        return OperationKernel(PYTHON_MAP, function=supplier.selector, shape="key")
    if isinstance(supplier, MapValuesSupplier):
        mapper = supplier.mapper
        if isinstance(mapper, Expr):
            if supplier.with_key or mapper.side == 1:
                return OperationKernel("project", expr=mapper, dst_side=1)
            return None
        shape: MapShape = "values_with_key" if supplier.with_key else "values"
        return OperationKernel(PYTHON_MAP, function=mapper, shape=shape)
    if isinstance(supplier, MapSupplier):
        return OperationKernel(PYTHON_MAP, function=supplier.mapper, shape="map")
    if isinstance(supplier, PassThroughSupplier):
        return OperationKernel("pass")
    if isinstance(supplier, SessionAggregateSupplier):
        # Only count: reduce and aggregate call merger and aggregator per record, with no step yet.
        # Emitting at session close runs record by record, as for time windows.
        if supplier.kind == "count" and not supplier.emit_strategy.on_close:
            return OperationKernel(PYTHON_SESSION_COUNT, store_name=supplier.store_name)
        return None
    if isinstance(supplier, WindowedAggregateSupplier) and supplier.emit_strategy.on_close:
        # The batch kernels forward per update; emitting at window close runs record by record.
        return None
    if isinstance(supplier, StreamAggregateSupplier | WindowedAggregateSupplier):
        windows = supplier.windows if isinstance(supplier, WindowedAggregateSupplier) else None
        name = _kernel_of_aggregation(supplier)
        if name is not None:
            return OperationKernel(name, windows=windows, store_name=supplier.store_name)
        if supplier.kind == "reduce":
            return OperationKernel(
                PYTHON_REDUCE, windows=windows, store_name=supplier.store_name, function=supplier.aggregator
            )
        return OperationKernel(PYTHON_AGGREGATE, windows=windows, store_name=supplier.store_name)
    return None


def _kernel_of_aggregation(supplier: StreamAggregateSupplier | WindowedAggregateSupplier) -> str | None:
    """count, or reduce with a built-in reducer: the kernel's name; None for Python functions."""
    if supplier.kind == "count":
        return "count"
    if supplier.kind == "reduce":
        try:
            return REDUCERS.get(supplier.aggregator)
        except TypeError:  # an unhashable callable object: not a built-in reducer
            return None
    return None
