"""One stage's StreamTask running inside one Spark task, fed Arrow batches.

This is the executor side of ``run_topology``: Spark calls ``run_stage_partition`` with the Arrow
batches of one Spark partition (via ``mapInArrow``), and it runs them through the same
``StreamTask`` the streaming runtime and the test driver use, with a real ``RecordCollector``.
Records enter as ``RecordBatch`` built from the Arrow columns and go through the task's batch API
(``StreamTask.process``), so whatever the task runs for a batch (Python processors today,
compiled kernels when the topology has them) runs here unchanged.

Stores are in memory and not change-logged: a Spark task holds its partition's state for one pass
and Spark, not changelogs, re-runs a failed task from its input. The task's output (everything
its sinks write, in write order) leaves as Arrow batches with the columns of ``OUTPUT_SCHEMA``.
"""

from __future__ import annotations

import gc
import logging
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from kstreams._native.record_batch import RecordBatch
from kstreams._native.record_collector import RecordCollector
from kstreams.cluster.port import TopicPartition
from kstreams.config import StreamsConfig
from kstreams.processing.record_cache import single_thread_cache
from kstreams.processing.task import StreamTask
from kstreams.processor import TaskId
from kstreams.state.stores import Stores
from kstreams.state.suppliers import (
    KeyValueBytesStoreSupplier,
    SessionBytesStoreSupplier,
    WindowBytesStoreSupplier,
)

__all__ = [
    "OUTPUT_SCHEMA",
    "StagePartitionTask",
    "StageTaskSpec",
    "freeze_worker_heap",
    "run_stage_partition",
]

logger = logging.getLogger(__name__)

# What a stage's tasks write: every sink record, its topic and partition, and an offset that is
# unique across the stage (the Spark partition id in the high bits, the write sequence below)
# so a reading stage can order records with equal timestamps as they were written.
OUTPUT_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("timestamp", pa.int64()),
    ]
)
OFFSET_SEQUENCE_BITS = 40


@dataclass
class StageTaskSpec:
    """What a Spark task needs to run one stage: shipped to executors with the closure.

    ``topology`` arrives as the executor's own copy (pickled), so preparing its stores for Spark
    never touches the caller's topology object.
    """

    topology: Any
    config: Mapping[str, Any]
    subtopology: int
    partitions: int  # partition count the sinks see for every topic


class StagePartitionTask:
    """A StreamTask for one Spark partition of one stage: ``process`` Arrow batches, then ``finish``."""

    def __init__(self, spec: StageTaskSpec, partition_id: int) -> None:
        self.partition_id = partition_id
        self._state_dir = tempfile.mkdtemp(prefix=f"kstreams-spark-{spec.subtopology}_{partition_id}-")
        self._sequence = 0
        self._offset_base = partition_id << OFFSET_SEQUENCE_BITS
        try:
            use_in_memory_stores(spec.topology, logged=False)
            built = build_stage_task(
                spec.topology, spec.config, spec.subtopology, spec.partitions, partition_id, self._state_dir
            )
            self.task, self.collector = built.task, built.collector
            self.task.initialize()
            self.task.initialize_processors()
        except BaseException:
            shutil.rmtree(self._state_dir, ignore_errors=True)
            raise

    def process(self, batch: pa.RecordBatch) -> pa.RecordBatch | None:
        """Run an Arrow batch (columns topic, key, value, timestamp, partition, offset) through the
        task, in row order; returns what the task wrote meanwhile (None if nothing)."""
        n = batch.num_rows
        if n == 0:
            return None
        topics = batch.column("topic")
        keys = batch.column("key").to_pylist()
        values = batch.column("value").to_pylist()
        timestamps = _int_column(batch, "timestamp", np.int64)
        partitions = _int_column(batch, "partition", np.int32)
        offsets = _int_column(batch, "offset", np.int64)
        for topic, start, stop in _topic_runs(topics):
            part = partitions[start:stop]
            records = RecordBatch.from_columns(
                keys[start:stop], values[start:stop], timestamps[start:stop], part, offsets[start:stop]
            )
            # The records of one run may come from several input partitions; the task sees them
            # as the partition of the first one (stream time is per task, not per partition).
            self.task.process(TopicPartition(topic, int(part[0])), records)
        return self._drain()

    def finish(self) -> pa.RecordBatch | None:
        """Flush the stores (caches forward what they hold), close the task and return the rest
        of its output."""
        try:
            self.task.maybe_punctuate_wall_clock(self.task.wall_clock_ms())
            self.task.flush()
            output = self._drain()
            self.task.close(clean=True)
            return output
        finally:
            shutil.rmtree(self._state_dir, ignore_errors=True)

    def abort(self) -> None:
        """Close the task dirty after a failure (the failure itself propagates to Spark)."""
        try:
            self.task.close(clean=False)
        finally:
            shutil.rmtree(self._state_dir, ignore_errors=True)

    def _drain(self) -> pa.RecordBatch | None:
        drained = self.collector.drain()
        if not drained:
            return None
        topics: list[str] = []
        partitions: list[np.ndarray] = []
        keys: list[bytes | None] = []
        values: list[bytes | None] = []
        timestamps: list[np.ndarray] = []
        for topic, partition, records in drained:
            count = len(records)
            topics.extend([topic] * count)
            partitions.append(np.full(count, partition, dtype=np.int32))
            keys.extend(records.keys())
            values.extend(records.values())
            timestamps.append(records.timestamps_array())
        total = len(keys)
        offsets = self._offset_base + self._sequence + np.arange(total, dtype=np.int64)
        self._sequence += total
        return pa.RecordBatch.from_arrays(
            [
                pa.array(topics, pa.string()),
                pa.array(np.concatenate(partitions), pa.int32()),
                pa.array(offsets, pa.int64()),
                pa.array(keys, pa.binary()),
                pa.array(values, pa.binary()),
                pa.array(np.concatenate(timestamps), pa.int64()),
            ],
            schema=OUTPUT_SCHEMA,
        )


_worker_heap_frozen = False


def freeze_worker_heap() -> None:
    """Once per Python worker process: leave every object alive now (what the worker imported to
    run this stage: pyspark, pandas, pyarrow, kstreams) out of the cyclic collector's passes.

    PySpark's daemon runs a full ``gc.collect()`` after every task a reused worker runs, and a
    full pass traverses every container object of those modules; profiles of streaming queries
    put about a third of a stateful stage's worker time there. Those objects live as long as the
    process anyway (``gc.freeze``, as pre-fork servers use it); objects made later are collected
    as before.
    """
    global _worker_heap_frozen
    if not _worker_heap_frozen:
        _worker_heap_frozen = True
        gc.freeze()


def run_stage_partition(
    spec: StageTaskSpec, partition_id: int, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Run every batch of one Spark partition through a fresh task, yielding its output as it
    goes; the task's final flush comes last."""
    freeze_worker_heap()
    runner = StagePartitionTask(spec, partition_id)
    try:
        for batch in batches:
            output = runner.process(batch)
            if output is not None:
                yield output
    except BaseException:
        runner.abort()
        raise
    output = runner.finish()
    if output is not None:
        yield output


def use_in_memory_stores(topology: Any, logged: bool) -> None:
    """Make every store of (this copy of) the topology in memory, change-logged or not: a Spark
    batch task keeps nothing (``logged=False``), a streaming task's changelog is what Spark's state
    keeps (``logged=True``). Stores built from kstreams' own suppliers switch to the in-memory kind;
    a user's own supplier is kept (it gets the task's state directory if it needs one).
    """
    for builder in topology.store_builders.values():
        if logged:
            builder.with_logging_enabled(builder.log_config)
        else:
            builder.with_logging_disabled()
        supplier = getattr(builder, "supplier", None)
        if getattr(builder, "dsl_params", None) is not None:
            builder.dsl_params = None  # settled here: the client's DSL store suppliers keep off it
        if isinstance(supplier, KeyValueBytesStoreSupplier) and supplier.persistent:
            builder.supplier = Stores.in_memory_key_value_store(supplier.name)
        elif isinstance(supplier, WindowBytesStoreSupplier) and supplier.persistent:
            builder.supplier = Stores.in_memory_window_store(
                supplier.name, supplier.retention_ms, supplier.window_size_ms, supplier.retain_duplicates
            )
        elif isinstance(supplier, SessionBytesStoreSupplier) and supplier.persistent:
            builder.supplier = Stores.in_memory_session_store(supplier.name, supplier.retention_ms)


@dataclass
class BuiltStageTask:
    """A stage's StreamTask for one partition, with what built it."""

    task: StreamTask
    collector: RecordCollector
    config: StreamsConfig
    plan: Any
    subtopology: Any


def build_stage_task(
    topology: Any, props: Mapping[str, Any], subtopology: int, partitions: int, partition: int, state_dir: str
) -> BuiltStageTask:
    """The StreamTask of ``partition`` of a subtopology, its sinks seeing ``partitions`` partitions
    for every topic, its state under ``state_dir``, its record cache per the config."""
    config = StreamsConfig({**props, "state.dir": state_dir})
    plan = topology.build(config.application_id, config)
    sub = plan.subtopology(subtopology)
    collector = RecordCollector()
    task = StreamTask(
        TaskId(sub.id, partition),
        sub,
        [TopicPartition(t, partition) for t in sub.source_topics],
        config,
        collector,
        lambda topic: partitions,
        f"{state_dir}/{config.application_id}",
    )
    cache = single_thread_cache(config, plan.store_builders, sub.stores)
    if cache is not None:
        task.record_cache = cache
    return BuiltStageTask(task, collector, config, plan, sub)


def _int_column(batch: pa.RecordBatch, name: str, dtype: Any) -> np.ndarray:
    column = batch.column(name)
    if column.null_count:
        raise ValueError(
            f"Column {name} of a record batch has {column.null_count} null values: every record needs a "
            f"{name}. Fill it before run_topology (timestamp is epoch milliseconds)."
        )
    # Arrow hands out read-only views; RecordBatch.from_columns takes writable buffers.
    return np.require(column.to_numpy(zero_copy_only=False), dtype=dtype, requirements=["C", "W"])


def _topic_runs(topics: pa.Array) -> Iterator[tuple[str, int, int]]:
    """(topic, start, stop) of each run of consecutive rows with the same topic."""
    n = len(topics)
    if n == 0:
        return
    if len(topics.unique()) == 1:
        yield topics[0].as_py(), 0, n
        return
    names = topics.to_pylist()
    start = 0
    for i in range(1, n + 1):
        if i == n or names[i] != names[start]:
            yield names[start], start, i
            start = i
