"""``run_topology_stream``: a kstreams topology as a Spark Structured Streaming query.

A sibling of ``run_topology`` rather than a mode of it, because the two promise different things:
``run_topology`` processes finite input in timestamp order and returns each key's final result
(and lowers stages to Spark SQL); a streaming run processes records as they arrive, micro-batch
by micro-batch, with the streaming runtime's ordering (a record older than its task's stream time
is late) and its update stream, and keeps every task's state across micro-batches and restarts.
Streaming DataFrames in, streaming DataFrames out::

    outputs = run_topology_stream(spark, topology, {"words": words_stream}, {"application.id": "wc"})
    query = (outputs["counts"].writeStream.format("kstreams").option("bootstrap.servers", bs)
             .option("topic", "counts").option("checkpointLocation", path).start())

Each subtopology is a stage, as in ``run_topology``:

- a stateless stage runs one ``StreamTask`` per Spark partition of each micro-batch (``mapInArrow``);
- a stateful stage is grouped by *task*: the Kafka partition of the record's key
  (``murmur2(key) % partitions``, what the runtime's partitioner gives a repartition topic), so
  one Spark state group is one task, holding exactly the keys its partition would. Records reach
  it through Spark's shuffle (the repartition between subtopologies), and it runs in
  ``transformWithStateInPandas`` (``streaming_task``), its stores' changelog kept in Spark's state
  store. Spark's checkpoint therefore covers the task state: a query stopped or killed mid-stream
  and restarted from its checkpoint gives the same output as an uninterrupted run.

Why ``transformWithStateInPandas`` and not ``applyInPandasWithState``: the latter keeps one row of
state per group and hands the whole row in and out with every micro-batch, so a task's whole
store would be serialized twice per micro-batch; the former has list state, to which a
micro-batch appends only what changed (the changelog chunk), and any number of timers per group
(wall-clock punctuation), where the latter has one timeout. It needs the RocksDB state store
provider, which ``run_topology_stream`` sets on the session when the session still uses the default.

Timers and windows: windows close, and emit-on-close, suppression and stream-time punctuation
fire, on the task's stream time, which only records advance, exactly as on the streaming runtime
(and in Kafka Streams); Spark's watermark is a different, query-wide clock, and closing windows on
it would make the results differ. Wall-clock punctuation runs after each micro-batch that gives a
task records; with ``wall_clock_punctuation=True`` the query also runs in processing-time mode and
registers a timer per task for its next due punctuation, so punctuators run on idle tasks too
(Spark then runs a micro-batch on every trigger to fire timers, so use a processing-time trigger:
``availableNow`` would never end). A task's punctuation schedule is kept in its Spark state with
its stores, so a task rebuilt in another Python worker, or after a restart from the checkpoint,
punctuates when it was due (once for any intervals missed while the query was down), not one
interval after it was rebuilt.

With ``lower_to_sql=True``, a stage whose operations all have Spark equivalents runs as Spark's
own streaming query instead of tasks (``sql_lowering``: compiled filters, then ``count`` or
``reduce`` with ``operator.add``/``min``/``max``, built-in serdes; windowed aggregations stay
tasks, since their windows close on the tasks' stream time). A lowered aggregation is a Spark
streaming aggregation, kept in Spark's state store: its output DataFrame is written with
``outputMode("update")``, and each micro-batch gives one row per key it updated (its aggregate
so far, with the largest timestamp of its records), what the task path gives when the record
cache holds a micro-batch's keys, not one row per record. Its state lives in the checkpoint as
Spark's, not as a task's stores: a query's checkpoint is for one setting of ``lower_to_sql``.
``explain_topology(..., streaming=True)`` tells which stages are lowered.

Output DataFrames have the columns key, value (binary) and timestamp (epoch ms), in append mode
(a lowered aggregation's: in update mode).
Rows of one key come from one task and, within a micro-batch, in the order the task wrote them.
Each output DataFrame is its own query when started: to write several topics, start one query per
output (each with its own checkpoint) or write the stage's rows once with ``foreachBatch``.

Not supported (``TopologyException``): global stores, foreign-key joins (as ``run_topology``),
versioned stores (Spark keeps the latest record per key), sinks that choose their topic per record
(the output topics of a streaming query are fixed when it starts), and subtopologies that read
what a later one writes (a loop).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from functools import reduce
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StructField, StructType

from kstreams.config import StreamsConfig
from kstreams.errors import ConfigException, TopologyException
from kstreams.spark.column_kernels import partition_column
from kstreams.spark.partition_task import (
    OFFSET_SEQUENCE_BITS,
    StageTaskSpec,
    freeze_worker_heap,
    run_stage_partition,
)
from kstreams.spark.plan_compiler import Stage, compile_plan
from kstreams.spark.runner import (
    DEFAULT_APPLICATION_ID,
    INPUT_COLUMNS,
    _normalize_input,
    add_lowered_stage,
    refuse_unrunnable,
    route_stage_output,
)
from kstreams.spark.sql_lowering import lower_stage
from kstreams.spark.streaming_task import StreamingStageSpec, TaskStateProcessor
from kstreams.topology.nodes import SinkNodeSpec

__all__ = ["ROCKSDB_PROVIDER", "run_topology_stream"]

logger = logging.getLogger(__name__)

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
_PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
_DEFAULT_PROVIDERS = ("", "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider")
_STAGE_OUTPUT_DDL = "topic string, partition int, offset long, key binary, value binary, timestamp long"


def run_topology_stream(
    spark: SparkSession,
    topology: Any,
    inputs: Mapping[str, DataFrame],
    config: Mapping[str, Any] | None = None,
    *,
    partitions: int | None = None,
    wall_clock_punctuation: bool = False,
    lower_to_sql: bool = False,
) -> dict[str, DataFrame]:
    """Run ``topology`` over streaming ``inputs`` (source topic -> streaming DataFrame) and return
    its output topics as streaming DataFrames (columns key, value, timestamp; append mode).

    Inputs have the columns of ``run_topology``'s: key and value (binary or string), timestamp
    (epoch ms or a Spark timestamp), and optionally partition and offset (the record's position
    in its topic: records of one partition are processed in offset order; without them, in the
    order of each micro-batch's rows). The ``kstreams`` data source gives all of them.

    ``partitions`` is the number of tasks of every stateful stage (by default
    ``spark.sql.shuffle.partitions``); it is fixed for the life of the query's checkpoint, as a
    topic's partition count fixes a Kafka Streams application's tasks. ``config`` is the
    application's kstreams configuration (``application.id`` defaults to "kstreams-spark").
    See the module docstring for ``wall_clock_punctuation``, ``lower_to_sql`` and for what is
    refused.
    """
    props = dict(config or {})
    props.setdefault("application.id", DEFAULT_APPLICATION_ID)
    streams_config = StreamsConfig(props)
    task_partitions = (
        partitions if partitions is not None else int(spark.conf.get("spark.sql.shuffle.partitions") or 200)
    )
    if task_partitions < 1:
        raise ConfigException(f"run_topology_stream needs partitions >= 1, got {task_partitions}.")
    batch_inputs = sorted(topic for topic, df in inputs.items() if not df.isStreaming)
    if batch_inputs:
        raise ConfigException(
            f"run_topology_stream got static DataFrames for {batch_inputs}: it runs streaming queries. Read "
            "them with spark.readStream, or run the topology over static DataFrames with run_topology."
        )
    plan = topology.build(streams_config.application_id, streams_config, topics=list(inputs))
    refuse_unrunnable(topology, plan, "run_topology_stream")
    dynamic = sorted(
        name for name, spec in topology.nodes.items() if isinstance(spec, SinkNodeSpec) and spec.topic is None
    )
    if dynamic:
        raise TopologyException(
            f"run_topology_stream cannot run sinks that choose their topic per record ({dynamic}): a "
            "streaming query's outputs are fixed when it starts. Write to fixed topics (branch the stream "
            "first), or use run_topology for a batch run."
        )
    execution = compile_plan(plan, inputs)
    if any(stage.stateful for stage in execution.stages):
        _use_rocksdb_state_store(spark)
    run_token = uuid.uuid4().hex
    # Inputs without offsets are numbered in the one Arrow pass that also gives records their task.
    numbered = {topic for topic, df in inputs.items() if "offset" not in df.columns}
    normalized = {
        topic: _normalize_input(df if topic not in numbered else df.withColumn("offset", F.lit(0)), topic)
        for topic, df in inputs.items()
    }
    produced: dict[str, list[DataFrame]] = {}
    outputs: dict[str, list[DataFrame]] = {}
    for stage in execution.stages:
        lowering = (
            lower_stage(stage, plan.subtopology(stage.subtopology), execution, streaming=True)
            if lower_to_sql
            else None
        )
        if lowering is not None:
            logger.info("run_topology_stream %s: %s", streams_config.application_id, lowering.describe())
        if lowering is not None and lowering.lowered:
            add_lowered_stage(lowering, stage, inputs, produced, outputs)
            continue
        if stage.stateful:
            spec = StreamingStageSpec(topology, props, stage.subtopology, task_partitions, run_token)
            written = _stateful_stage(stage, spec, normalized, numbered, produced, wall_clock_punctuation)
        else:
            frames = [_positioned(normalized[t], t in numbered, None) for t in stage.external_inputs]
            frames.extend(df for t in stage.produced_inputs for df in produced.get(t, []))
            stateless = StageTaskSpec(topology, props, stage.subtopology, task_partitions)
            written = _stateless_stage(reduce(DataFrame.unionByName, frames), stateless)
        route_stage_output(written, stage.sink_topics, execution, produced, outputs)
    logger.info(
        "run_topology_stream %s: %d stages (%d stateful, %d tasks each), outputs %s",
        streams_config.application_id,
        len(execution.stages),
        sum(s.stateful for s in execution.stages),
        task_partitions,
        sorted(outputs),
    )
    return {topic: reduce(DataFrame.unionByName, frames) for topic, frames in outputs.items()}


def _stateful_stage(
    stage: Stage,
    spec: StreamingStageSpec,
    normalized: Mapping[str, DataFrame],
    numbered: AbstractSet[str],
    produced: Mapping[str, list[DataFrame]],
    timers: bool,
) -> DataFrame:
    """The stage's tasks over its inputs, grouped by task; ``partition`` becomes the input a
    record came from (topic partition, or the Spark partition of the stage that wrote it), which
    orders a task's records."""
    frames = [_positioned(normalized[t], t in numbered, spec.partitions) for t in stage.external_inputs]
    for topic in stage.produced_inputs:
        for df in produced.get(topic, []):
            # The writing stage's sink partitioned the record by murmur2 % partitions: its task.
            frames.append(
                df.withColumn("task", F.col("partition")).withColumn(
                    "partition", F.shiftright(F.col("offset"), OFFSET_SEQUENCE_BITS).cast("int")
                )
            )
    stage_input = reduce(DataFrame.unionByName, frames).select("task", *INPUT_COLUMNS)
    return stage_input.groupBy("task").transformWithStateInPandas(
        TaskStateProcessor(spec, timers),
        _STAGE_OUTPUT_DDL,
        "Append",
        "ProcessingTime" if timers else "None",
    )


def _stateless_stage(stage_input: DataFrame, spec: StageTaskSpec) -> DataFrame:
    """One fresh task per Spark partition of each micro-batch (a stateless stage keeps nothing)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        partition_id = context.partitionId() if context is not None else 0
        yield from run_stage_partition(spec, partition_id, batches)

    return stage_input.mapInArrow(run, _STAGE_OUTPUT_DDL)


def _positioned(df: DataFrame, number: bool, partitions: int | None) -> DataFrame:
    """``df`` (normalized input rows) in one Arrow pass: with ``number``, each row's offset is its
    position in its micro-batch (the Spark partition in the high bits), which keeps the rows'
    order among equal timestamps (Spark refuses ``monotonically_increasing_id`` in streaming
    queries; this is the same numbering); with ``partitions``, a ``task`` column first: the Kafka
    partition of the key (murmur2, 0 for a null key), what ``F.partition_for`` gives."""
    if not number and partitions is None:
        return df
    fields = list(df.schema.fields)
    if partitions is not None:
        fields.insert(0, StructField("task", IntegerType(), nullable=False))
    # A new StructType: ``df.schema.add`` would change the schema object ``df`` caches.
    schema = StructType(fields)

    def position(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        freeze_worker_heap()
        context = TaskContext.get()
        next_offset = (context.partitionId() if context is not None else 0) << OFFSET_SEQUENCE_BITS
        for batch in batches:
            if number:
                offsets = pa.array(np.arange(next_offset, next_offset + batch.num_rows, dtype=np.int64))
                next_offset += batch.num_rows
                batch = batch.set_column(batch.schema.get_field_index("offset"), "offset", offsets)
            if partitions is not None:
                tasks = partition_column(batch.column("key"), partitions).fill_null(0)
                names = ["task", *batch.schema.names]
                batch = pa.RecordBatch.from_arrays([tasks, *batch.columns], names=names)
            yield batch

    return df.mapInArrow(position, schema)


def _use_rocksdb_state_store(spark: SparkSession) -> None:
    """transformWithState keeps its state in RocksDB only: switch a session that still uses the
    default provider; refuse one configured for another."""
    provider = spark.conf.get(_PROVIDER_KEY, "") or ""
    if provider == ROCKSDB_PROVIDER:
        return
    if provider not in _DEFAULT_PROVIDERS:
        raise ConfigException(
            f"run_topology_stream keeps task state with transformWithStateInPandas, which needs "
            f"{_PROVIDER_KEY}={ROCKSDB_PROVIDER}; this session sets {provider}. Use the RocksDB provider "
            "for this query's session."
        )
    spark.conf.set(_PROVIDER_KEY, ROCKSDB_PROVIDER)
    logger.info(
        "run_topology_stream set %s to %s (transformWithState needs it)", _PROVIDER_KEY, ROCKSDB_PROVIDER
    )
