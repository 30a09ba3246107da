"""Sink steps: a batch re-encoded in bulk and handed, one batch per partition, to the record
collector (``SinkStep``), or columns of Python objects below a chain of Python functions
serialized and sent the same way (``ColumnSinkStep``). Sinks record their own end-to-end latency,
in ``SinkNode.send_serialized`` / ``send_batch``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kstreams._native import kernels
from kstreams._native.record_batch import RecordBatch
from kstreams.processing.compiled.columns import Columns
from kstreams.processing.compiled.steps import SegmentTask, Step

if TYPE_CHECKING:
    from kstreams.topology.graph import SinkNode

__all__ = [
    "ColumnSinkStep",
    "SinkStep",
]


class ColumnSinkStep(Step):
    """A sink that takes batches, below a chain of Python functions: serializes the columns and
    sends one batch per partition."""

    kernel = "sink[python]"
    carries_headers = True
    node: SinkNode

    def __init__(self, node: SinkNode, reuses_keys: bool) -> None:
        super().__init__(node, [])
        self.e2e_latency = None  # send_batch records it
        # The sink would write the keys exactly as the source read them (same built-in serde,
        # one whose bytes survive a decode and encode): the source's bytes are sent as they are.
        self._reuses_keys = reuses_keys

    def run_columns(self, task: SegmentTask, columns: Columns) -> None:
        task.context.node = self.node
        timestamps, offsets = columns.arrays()
        self.node.send_batch(
            columns.keys,
            columns.values,
            timestamps,
            offsets,
            columns.raw_keys if self._reuses_keys else None,
            columns.headers_from,
        )


class SinkStep(Step):
    """A sink to a fixed topic with the default partitioner and built-in serializers: re-encode
    in bulk, split by partition, hand each partition's batch to the record collector."""

    kernel = "sink"
    calls_python = False
    carries_headers = True

    node: SinkNode

    def __init__(self, node: SinkNode, key_enc: int, value_enc: int) -> None:
        super().__init__(node, [])
        self.e2e_latency = None  # send_serialized records it (and run, when it leaves the batch to Python)
        self._key_dst = key_enc
        self._value_dst = value_enc

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        converted = kernels.convert(batch, key_enc, self._key_dst, value_enc, self._value_dst)
        if converted is None:
            self.boundary(task, batch, key_enc, value_enc)
            if self.node.e2e_latency is not None:
                self.node.e2e_latency.record_timestamps(batch.timestamps_array())
            return
        self.node.send_serialized(converted)
