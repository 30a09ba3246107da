"""Stateless batch steps: ``filter``/``filter_not`` with a compiled predicate or a Python one,
``select_key``/``map_values`` projecting a JSON field, a chain of Python functions straight into
sinks (``PythonChainStep``), and a pass-through. Each gives the records, in the order, that the
per-record path gives, or leaves its batch to its node's processor (``Step.boundary``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from kstreams._native import kernels, python_chain
from kstreams._native.record_batch import RecordBatch
from kstreams.processing.compiled.columns import Columns, decode_column
from kstreams.processing.compiled.steps import SegmentTask, Step, run_columns_step
from kstreams.topology.compiled_ops import PYTHON_FILTER

if TYPE_CHECKING:
    from kstreams.topology.compiled_ops import OperationKernel
    from kstreams.topology.graph import ProcessorNode

__all__ = [
    "FilterStep",
    "PassThroughStep",
    "ProjectStep",
    "PythonChainStep",
    "PythonFilterStep",
    "keeps_keys",
]


class FilterStep(Step):
    """``filter``/``filter_not`` with a compiled predicate (``kstreams.predicates``), built for
    the encodings the compiler determined for this step."""

    kernel = "filter"
    calls_python = False
    carries_headers = True

    def __init__(
        self,
        node: ProcessorNode,
        children: list[Step],
        predicate: kernels.Predicate,
        key_enc: int,
        value_enc: int,
        fields: list[tuple[int, str]],
    ) -> None:
        super().__init__(node, children)
        self._predicate = predicate
        self._encodings = (key_enc, value_enc)
        self._fields = fields

    def json_fields(self) -> list[tuple[int, str]]:
        return self._fields

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        # Every batch in a segment passed the source's validate: its JSON is known valid.
        selected = self._predicate.select(batch, True) if (key_enc, value_enc) == self._encodings else None
        if selected is None:
            self.boundary(task, batch, key_enc, value_enc)
            return
        if len(selected) != len(batch):
            batch = kernels.take(batch, selected)
        self._forward(task, batch, key_enc, value_enc)


class PythonFilterStep(Step):
    """``filter`` with a plain Python predicate: called per record with the GIL, but without a
    Record, a context switch or a forward per record."""

    kernel = "filter[python]"
    carries_headers = True

    def __init__(
        self, node: ProcessorNode, children: list[Step], predicate: Callable[[Any, Any], Any], negate: bool
    ) -> None:
        super().__init__(node, children)
        self._predicate = predicate
        self._negate = negate

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        topic = task.context.record_context.topic
        predicate = self._predicate
        negate = self._negate
        task.context.node = self.node  # an exception then names this processor
        keys = decode_column(key_enc, topic, batch.keys())
        values = decode_column(value_enc, topic, batch.values())
        keep = [
            i for i, (k, v) in enumerate(zip(keys, values, strict=True)) if bool(predicate(k, v)) != negate
        ]
        if len(keep) != len(batch):
            batch = kernels.take(batch, np.asarray(keep, dtype=np.int32))
        self._forward(task, batch, key_enc, value_enc)


class PythonChainStep(Step):
    """A chain of ``filter``/``map``/``map_values``/``select_key`` with plain Python functions,
    straight into sinks: each record goes through the functions in turn, called from C
    (``python_chain.run_chain``, with the GIL), and the survivors are serialized for each sink and
    sent as one batch per partition, without a Record, a context switch or a forward per record.

    The functions see the same records, in the same order of calls, as on the per-record path,
    and the sinks get the same records in the same order.
    """

    kernel = "chain[python]"
    carries_headers = True

    def __init__(self, nodes: list[ProcessorNode], ops: list[OperationKernel], children: list[Step]):
        super().__init__(nodes[0], children)
        self.nodes = nodes
        self._ops = ops
        self._chain = [_chain_op(op) for op in ops]
        self.keeps_keys = keeps_keys(ops)

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        context = task.context
        topic = context.record_context.topic
        context.node = self.node  # an exception then names the processor that raised
        raw_keys = batch.keys()
        keys = decode_column(key_enc, topic, raw_keys)
        values = decode_column(value_enc, topic, batch.values())
        failed = [0, 0]
        try:
            keys, values, kept = python_chain.run_chain(self._chain, keys, values, failed)
        except BaseException:
            # Name the processor and the record, as the per-record path's error does.
            operation, record = failed
            context.node = self.nodes[operation]
            context.record_context.offset = int(batch.offsets_array()[record])
            context.record_context.timestamp = int(batch.timestamps_array()[record])
            raise
        if not keys:
            return
        timestamps = batch.timestamps_array()
        offsets = batch.offsets_array()
        rows = None
        if kept is not None:
            index = np.asarray(kept, dtype=np.intp)
            timestamps = timestamps[index]
            offsets = offsets[index]
            if self.keeps_keys:
                raw_keys = [raw_keys[i] for i in kept]
            rows = index.astype(np.int32)
        raw = raw_keys if self.keeps_keys else None
        columns = Columns(keys, values, timestamps.tolist(), offsets.tolist(), raw, timestamps, offsets)
        if batch.has_headers:
            columns.headers_from = (batch, rows)
        for child in self.children:
            run_columns_step(child, task, columns)


# The run_chain kind of a Python map by its shape.
_MAP_KINDS = {
    "values": python_chain.VALUES,
    "values_with_key": python_chain.VALUES_WITH_KEY,
    "key": python_chain.KEY,
    "map": python_chain.MAP,
}


def _chain_op(op: OperationKernel) -> tuple[int, Any, bool]:
    """An operation as ``run_chain`` takes it: (kind, function, negate)."""
    kind = python_chain.FILTER if op.name == PYTHON_FILTER else _MAP_KINDS[op.shape]
    return kind, op.function, op.negate


def keeps_keys(ops: list[OperationKernel]) -> bool:
    """Whether a chain of Python operations leaves every record's key as it was."""
    return all(op.name == PYTHON_FILTER or op.shape in ("values", "values_with_key") for op in ops)


class ProjectStep(Step):
    """``select_key``/``map_values`` with an extractor (``kstreams.predicates``) of a JSON
    field: the new column holds the field's JSON text."""

    kernel = "project"
    calls_python = False
    carries_headers = True

    def __init__(
        self, node: ProcessorNode, children: list[Step], src_side: int, field: str | None, dst_side: int
    ) -> None:
        super().__init__(node, children)
        self._src_side = src_side
        self._field = field
        self._dst_side = dst_side

    def json_fields(self) -> list[tuple[int, str]]:
        return [] if self._field is None else [(self._src_side, self._field)]

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        src_enc = key_enc if self._src_side == 0 else value_enc
        if src_enc != kernels.JSON:
            if self._field is None:  # key()/value() of another encoding: copy the column
                if self._src_side == self._dst_side:
                    self._forward(task, batch, key_enc, value_enc)
                    return
            self.boundary(task, batch, key_enc, value_enc)
            return
        projected = kernels.project(batch, self._src_side, self._field, self._dst_side, True)
        if projected is None:
            self.boundary(task, batch, key_enc, value_enc)
            return
        if self._dst_side == 0:
            self._forward(task, projected, kernels.JSON, value_enc)
        else:
            self._forward(task, projected, key_enc, kernels.JSON)


class PassThroughStep(Step):
    kernel = "pass"
    calls_python = False
    carries_headers = True

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        self._forward(task, batch, key_enc, value_enc)
