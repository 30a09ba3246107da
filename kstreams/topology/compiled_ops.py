"""Which DSL operations have batch kernels: recognised from the DSL processors' suppliers.

The DSL's suppliers say what they compute (a filter's predicate, a mapper, an aggregation's kind,
reducer and window spec), so operations written with ``kstreams.predicates`` or with the built-in
reducers (``operator.add``, ``min``, ``max``) are recognised here, with no change to user code.
This module decides only from the topology's definition; the runtime (``runtime/batch_compiler``)
also checks the serdes and stores of the running task before it uses a kernel, and falls back to
the per-record path where they do not fit.
"""

from __future__ import annotations

import builtins
import logging
import operator
from dataclasses import dataclass
from typing import Any

from kstreams.predicates import Expr, Predicate
from kstreams.topology.dsl.processors.aggregate import StreamAggregateSupplier, WindowedAggregateSupplier
from kstreams.topology.dsl.processors.stateless import (
    FilterSupplier,
    MapValuesSupplier,
    PassThroughSupplier,
    SelectKeySupplier,
)

__all__ = ["REDUCERS", "OperationKernel", "kernel_for_supplier"]

logger = logging.getLogger(__name__)

# The reducers with kernels, by identity: reduce(operator.add) is a sum.
REDUCERS: dict[Any, str] = {operator.add: "sum", builtins.min: "min", builtins.max: "max"}


@dataclass(frozen=True)
class OperationKernel:
    """The kernel a DSL operation maps to: ``name`` (filter, project, pass, count, sum, min, max)
    and its parameters."""

    name: str
    predicate: Predicate | None = None
    negate: bool = False
    expr: Expr | None = None
    dst_side: int = 1  # project: 0 replaces the key, 1 the value
    windows: Any = None
    store_name: str | None = None

    @property
    def label(self) -> str:
        """How describe() marks the node, e.g. ``filter`` or ``windowed-count``."""
        return f"windowed-{self.name}" if self.windows is not None else self.name


def kernel_for_supplier(supplier: Any) -> OperationKernel | None:
    """The kernel of a DSL processor supplier, or None when it runs record by record."""
    if isinstance(supplier, FilterSupplier):
        if isinstance(supplier.predicate, Predicate):
            return OperationKernel("filter", predicate=supplier.predicate, negate=supplier.negate)
        return None
    if isinstance(supplier, SelectKeySupplier):
        if isinstance(supplier.selector, Expr):
            return OperationKernel("project", expr=supplier.selector, dst_side=0)
        return None
    if isinstance(supplier, MapValuesSupplier):
        mapper = supplier.mapper
        if isinstance(mapper, Expr) and (supplier.with_key or mapper.side == 1):
            return OperationKernel("project", expr=mapper, dst_side=1)
        return None
    if isinstance(supplier, PassThroughSupplier):
        return OperationKernel("pass")
    if isinstance(supplier, StreamAggregateSupplier | WindowedAggregateSupplier):
        windows = getattr(supplier, "windows", None)
        if supplier.kind == "count":
            name = "count"
        elif supplier.kind == "reduce":
            try:
                name = REDUCERS.get(supplier.aggregator, "")
            except TypeError:  # an unhashable callable object: not a built-in reducer
                name = ""
            if not name:
                return None
        else:
            return None
        if windows is not None and not _time_windows(windows):
            return None
        return OperationKernel(name, windows=windows, store_name=supplier.store_name)
    return None


def _time_windows(windows: Any) -> bool:
    return all(hasattr(windows, attr) for attr in ("size_ms", "advance_ms", "grace_ms"))
