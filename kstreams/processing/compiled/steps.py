"""Batch steps: how a batch of one input partition runs through a compiled segment.

A segment is a tree of steps rooted at a source: each step takes a RecordBatch whose key and
value columns are in known encodings (the built-in serdes, see ``kernels``), runs a kernel over
the whole batch and hands its result to its children. A step whose kernel reports a record it
cannot handle exactly like Python (``None`` from the kernel) hands its input batch to its node's
Python processor record by record instead (the *boundary*), and so does every step made for a
node that has no kernel; the result is the per-record path's either way.

Steps hold the task's running ``ProcessorNode`` objects: the Python processor behind an
aggregation step is the same instance the per-record path uses, so state such as a windowed
aggregation's observed stream time is shared. A step reads and sets what its task's processor
context says is running (``SegmentTask``): the node, so that an exception names it, and the
record context, for the records it hands to Python processors.

Below a chain of Python functions the records are Python objects, not bytes: such steps take
``Columns`` (``run_columns``; ``columns`` holds them and the column decoding). A step that cannot
use them hands them record by record to its node.

This module holds what every step is (``Step``, ``BoundaryStep``, how a batch is handed to one, the
per-record boundary); the steps themselves are by kind beside it: ``stateless_steps`` (filters,
projections, chains of Python functions), ``sink_steps``, ``aggregate_steps`` and ``session_steps``.

KIP-613's end-to-end latency of a terminal node (``Step.e2e_latency``) is recorded by whoever
hands the step its batch (``run_step``, ``run_columns_step``), once the step ran, whether its
kernel or its node's processor took the records: a step is handed its batch at one place, while
it may leave it to Python at several. Sinks record their own, in ``SinkNode.send_serialized``.
"""

from __future__ import annotations

from itertools import repeat
from typing import TYPE_CHECKING, Protocol

from kstreams._native.record_batch import RecordBatch
from kstreams.processing.compiled.columns import Columns, decode_column
from kstreams.processor import Record

if TYPE_CHECKING:
    from kstreams._native.e2e_latency import E2ELatencySensor
    from kstreams._native.per_record import NodeBase
    from kstreams.processing.processor_context import ProcessorContextImpl

__all__ = [
    "BoundaryStep",
    "SegmentTask",
    "Step",
    "decoded_columns",
    "run_columns_step",
    "run_per_record",
    "run_step",
]


class SegmentTask(Protocol):
    """What a compiled segment needs of the task that runs it (``StreamTask`` is one)."""

    @property
    def context(self) -> ProcessorContextImpl: ...


class Step:
    """One node of a compiled segment. ``run`` processes a batch in the given encodings;
    ``run_columns`` records given as Python objects."""

    name: str
    kernel: str  # what describe() and logs call the kernel; "" for a boundary
    # Whether the step calls Python code per record (holding the GIL): its batches then take the
    # stream threads' PythonGate. Compiled kernels, which release the GIL, set it False.
    calls_python = True
    # Whether the step passes each record's headers on (to its children, its sink, or the
    # per-record path at a boundary), so batches with headers may run through it. A step that
    # writes a record cache must also keep the cache's header notes current (``kernels.aggregate``).
    carries_headers = False

    def __init__(self, node: NodeBase, children: list[Step]) -> None:
        self.node = node
        self.name = node.name
        self.children = children
        # The end-to-end latency sensor of a terminal node (None: the node has children, or no
        # metrics), recorded by ``run_step`` / ``run_columns_step`` for each batch handed over.
        self.e2e_latency: E2ELatencySensor | None = (
            None if node.children else getattr(node, "e2e_latency", None)
        )

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        raise TypeError(f"{type(self).__name__} does not run batches")

    def json_fields(self) -> list[tuple[int, str]]:
        """The top-level JSON fields (side 0 key, 1 value, name) the step's kernel looks up."""
        return []

    def _forward(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        if len(batch) == 0:
            return
        for child in self.children:
            run_step(child, task, batch, key_enc, value_enc)

    def boundary(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        """Run this step's node record by record (the per-record path from here on)."""
        if len(batch):
            run_per_record(task, self.node, decoded_columns(task, batch, key_enc, value_enc))

    def run_columns(self, task: SegmentTask, columns: Columns) -> None:
        """Hand each record to this step's node (the per-record path from here on)."""
        run_per_record(task, self.node, columns)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def run_step(step: Step, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
    """Hand ``batch`` to ``step``; then, for a terminal node, record its records' latency."""
    step.run(task, batch, key_enc, value_enc)
    if step.e2e_latency is not None:
        step.e2e_latency.record_timestamps(batch.timestamps_array())


def run_columns_step(step: Step, task: SegmentTask, columns: Columns) -> None:
    """``run_step`` for records given as columns."""
    step.run_columns(task, columns)
    if step.e2e_latency is not None:
        step.e2e_latency.record_timestamps(columns.arrays()[0])


def run_per_record(task: SegmentTask, node: NodeBase, columns: Columns) -> None:
    """Hand each record to ``node.process`` with its position, timestamp and headers in the
    context."""
    context = task.context
    position = context.record_context
    process = node.process
    headers = columns.record_headers()
    previous = position.headers
    try:
        for k, v, ts, offset, h in zip(
            columns.keys,
            columns.values,
            columns.timestamps,
            columns.offsets,
            repeat(None, len(columns.keys)) if headers is None else headers,
            strict=True,
        ):
            position.offset = offset
            position.timestamp = ts
            position.headers = h
            context.node = node
            process(Record(k, v, ts, h))
    finally:
        position.headers = previous


class BoundaryStep(Step):
    """A node without a kernel: the per-record path from here on."""

    kernel = ""
    carries_headers = True

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        self.boundary(task, batch, key_enc, value_enc)


def decoded_columns(task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> Columns:
    """A batch's records as Python objects, decoded as the source's serdes would, with the key
    bytes they were decoded from."""
    topic = task.context.record_context.topic
    raw_keys = batch.keys()
    timestamps, offsets = batch.timestamps_array(), batch.offsets_array()
    return Columns(
        decode_column(key_enc, topic, raw_keys),
        decode_column(value_enc, topic, batch.values()),
        timestamps.tolist(),
        offsets.tolist(),
        raw_keys,
        timestamps,
        offsets,
        (batch, None) if batch.has_headers else None,
    )
