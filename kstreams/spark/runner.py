"""``run_topology``: a kstreams topology over Spark DataFrames of records.

Each subtopology runs as one Spark stage (``plan_compiler``), in dependency order:

- a stateless stage runs one ``StreamTask`` per input partition through ``mapInArrow``;
- a stateful stage (one with stores) first shuffles its records on the serialized key, so every
  record of a key lands in one Spark partition, sorts each partition by timestamp (then input
  partition, offset and topic), and runs one task per Spark partition with in-memory stores.

A stage whose operations all have Spark equivalents (``sql_lowering``) runs as Spark SQL instead.

A task gets its records through ``StreamTask.process`` in batches, as on the streaming runtime:
operations with compiled kernels run over whole batches, and the rest (Python lambdas and
processors included, as they are) run record by record in Spark's Python workers.

Records a stage writes to a repartition topic (or to any topic another subtopology reads) become
the input of the reading stage; records for the other topics are returned. Because the task of a
key sees all of that key's records in timestamp order, the final aggregates equal those of the
streaming runtime over the same records. Ordering differs in one respect: the streaming runtime
processes each input partition in offset order, so a record with a timestamp older than stream
time arrives late there (and windowed operations may drop it after the grace period), while here
every record is processed in timestamp order and is never late.

State is partitioned by the key a stage's records arrive with, as the key's partition does on
Kafka: a processor that keeps state under other keys needs its records re-keyed (repartitioned)
by those keys first, on Spark as on a multi-partition topic.

Output rows of one key appear in the order the task wrote them, so the last row of a key in a
DataFrame's row order (``collect()``, or Parquet files read back in order) is its final value.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterable, Iterator, Mapping
from functools import reduce
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel, TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, LongType, StringType, TimestampType

from kstreams.config import StreamsConfig
from kstreams.errors import ConfigException, TopologyException
from kstreams.spark.partition_task import StageTaskSpec, run_stage_partition
from kstreams.spark.plan_compiler import ExecutionPlan, Stage, compile_plan
from kstreams.spark.sql_lowering import lower_stage
from kstreams.topology.nodes import SinkNodeSpec

__all__ = ["DEFAULT_APPLICATION_ID", "INPUT_COLUMNS", "LOWERED_COLUMNS", "refuse_unrunnable", "run_topology"]

logger = logging.getLogger(__name__)

DEFAULT_APPLICATION_ID = "kstreams-spark"
# The columns every stage reads, in this order (what StagePartitionTask.process expects).
INPUT_COLUMNS = ("topic", "key", "value", "timestamp", "partition", "offset")
# The columns a stage lowered to Spark SQL reads (sql_lowering).
LOWERED_COLUMNS = ("key", "value", "timestamp")
_STAGE_OUTPUT_DDL = "topic string, partition int, offset long, key binary, value binary, timestamp long"

_python_notice_logged = False


def run_topology(
    spark: SparkSession,
    topology: Any,
    inputs: Mapping[str, DataFrame],
    config: Mapping[str, Any] | None = None,
    *,
    partitions: int | None = None,
    lower_to_sql: bool = True,
) -> dict[str, DataFrame]:
    """Run ``topology`` over ``inputs`` (source topic -> DataFrame) and return its output topics.

    Input DataFrames have the columns key and value (binary; strings are taken as UTF-8) and
    timestamp (epoch milliseconds as a long, or a Spark timestamp), and optionally partition and
    offset (the record's position in its topic, used to order records with equal timestamps).
    Each output DataFrame (output topic -> DataFrame) has the columns key, value and timestamp.

    ``config`` is the application's kstreams configuration (``application.id`` defaults to
    "kstreams-spark"; default serdes and ``statestore.cache.max.bytes`` apply as in the streaming
    runtime: with caching on, a stateful stage writes fewer intermediate updates). ``partitions``
    is the number of Spark partitions (tasks) of each stateful stage, by default
    ``spark.sql.shuffle.partitions``.

    With ``lower_to_sql`` (the default), a stage whose operations all have Spark equivalents
    (compiled filters, count and reduce with built-in reducers, tumbling/hopping window counts,
    built-in serdes; ``sql_lowering``) runs as Spark SQL and writes each key's final aggregate
    only; ``explain_topology`` shows which stages do. False runs every stage as tasks.

    The outputs are lazy DataFrames; a stage whose output feeds more than one consumer is
    persisted (MEMORY_AND_DISK) so its Python runs once. A streaming input is a ConfigException
    at once: ``run_topology_stream`` runs those.
    """
    # Checked first: a streaming input would otherwise fail only deep inside Spark, when the plan
    # it cannot run in batch is executed.
    streaming_inputs = sorted(topic for topic, df in inputs.items() if df.isStreaming)
    if streaming_inputs:
        raise ConfigException(
            f"run_topology got streaming DataFrames for {streaming_inputs}: it runs batch jobs over static "
            "DataFrames. Run a topology over streaming inputs with kstreams.spark.run_topology_stream, "
            "or read the topics with spark.read instead of spark.readStream."
        )
    props = dict(config or {})
    props.setdefault("application.id", DEFAULT_APPLICATION_ID)
    streams_config = StreamsConfig(props)
    task_partitions = partitions if partitions is not None else _shuffle_partitions(spark)
    if task_partitions < 1:
        raise ConfigException(
            f"run_topology needs partitions >= 1 for stateful stages, got {task_partitions}."
        )
    # Pattern sources read the input DataFrames whose topic names they match.
    plan = topology.build(streams_config.application_id, streams_config, topics=list(inputs))
    refuse_unrunnable(topology, plan, "run_topology")
    execution = compile_plan(plan, inputs)
    _log_python_execution_once()
    dynamic_sinks = any(
        isinstance(spec, SinkNodeSpec) and spec.topic is None for spec in topology.nodes.values()
    )

    # Normalized when a task stage first reads them: every DataFrame call is a round trip to the JVM.
    normalized: dict[str, DataFrame] = {}
    produced: dict[str, list[DataFrame]] = {}
    outputs: dict[str, list[DataFrame]] = {}
    for stage in execution.stages:
        lowering = (
            lower_stage(stage, plan.subtopology(stage.subtopology), execution) if lower_to_sql else None
        )
        if lowering is not None:
            logger.info("run_topology %s: %s", streams_config.application_id, lowering.describe())
        if lowering is not None and lowering.lowered:
            add_lowered_stage(lowering, stage, inputs, produced, outputs)
            continue
        for topic in stage.external_inputs:
            if topic not in normalized:
                normalized[topic] = _normalize_input(inputs[topic], topic)
        spec = StageTaskSpec(topology, props, stage.subtopology, task_partitions)
        stage_input = _stage_input(stage, normalized, produced)
        written = _run_stage(stage_input, spec, stage.stateful, task_partitions)
        topics = list(stage.sink_topics)
        if dynamic_sinks:
            written = written.persist(StorageLevel.MEMORY_AND_DISK)
            found = [row.topic for row in written.select("topic").distinct().collect()]
            topics.extend(sorted(t for t in found if t not in topics))
        elif _consumers(execution, stage) > 1:
            written = written.persist(StorageLevel.MEMORY_AND_DISK)
        route_stage_output(written, topics, execution, produced, outputs)
    logger.info(
        "run_topology %s: %d stages (%d stateful, %d partitions each), outputs %s",
        streams_config.application_id,
        len(execution.stages),
        sum(s.stateful for s in execution.stages),
        task_partitions,
        sorted(outputs),
    )
    return {topic: reduce(DataFrame.unionByName, frames) for topic, frames in outputs.items()}


def add_lowered_stage(
    lowering: Any,
    stage: Any,
    inputs: Mapping[str, DataFrame],
    produced: Mapping[str, list[DataFrame]],
    outputs: dict[str, list[DataFrame]],
) -> None:
    """Add what a stage lowered to Spark SQL (``sql_lowering.StageLowering``) writes to ``outputs``:
    a lowered stage writes one returned topic and feeds no other stage."""
    written = [df for t in stage.produced_inputs for df in produced.get(t, [])]
    given = [inputs[t] for t in stage.external_inputs]
    if len(given) + len(written) == 1 and _has_lowered_types((given or written)[0]):
        # The lowered query reads these columns only: a select of them would cost Spark's driver
        # one more analysis of the plan.
        stage_input = (given or written)[0]
    else:
        # Without the topic, partition and offset columns, which only order a task's records: a
        # generated offset (monotonically_increasing_id) would cost Spark a pass of its own.
        frames = [_normalize_input(inputs[t], t, positions=False) for t in stage.external_inputs]
        frames.extend(df.select(*LOWERED_COLUMNS) for df in written)
        stage_input = reduce(DataFrame.unionByName, frames)
    outputs.setdefault(str(lowering.topic), []).append(lowering.apply(stage_input))


def _has_lowered_types(df: DataFrame) -> bool:
    """Whether ``df``'s key and value are binary and its timestamp a long (epoch ms)."""
    types = {f.name: f.dataType for f in df.schema.fields}
    return (
        isinstance(types.get("key"), BinaryType)
        and isinstance(types.get("value"), BinaryType)
        and isinstance(types.get("timestamp"), LongType)
    )


def route_stage_output(
    written: DataFrame,
    topics: Iterable[str],
    execution: Any,
    produced: dict[str, list[DataFrame]],
    outputs: dict[str, list[DataFrame]],
) -> None:
    """Split what a stage wrote by topic: into ``produced`` where a later stage reads the topic
    (as its input columns), into ``outputs`` where the topic goes back to the caller."""
    for topic in topics:
        records = written.where(F.col("topic") == topic)
        if any(topic in later.produced_inputs for later in execution.stages):
            produced.setdefault(topic, []).append(records.select(*INPUT_COLUMNS))
        if execution.is_output_topic(topic):
            outputs.setdefault(topic, []).append(records.select("key", "value", "timestamp"))


def refuse_unrunnable(topology: Any, plan: Any, caller: str) -> None:
    """Raise ``TopologyException`` for what no Spark run can do: global stores and foreign-key joins."""
    if plan.global_subtopologies:
        # A global store must hold its whole topic before any task processes and stay current
        # while tasks run: Spark tasks have no such order between inputs.
        stores = ", ".join(plan.global_store_names)
        raise TopologyException(
            f"{caller} cannot run a topology with global stores or GlobalKTables ({stores}): "
            "Spark tasks have no global thread to bootstrap them before processing. Use a KTable "
            "(co-partitioned join) for the Spark run, or run the topology with KafkaStreams."
        )
    fk_joins = sorted(
        name
        for name, spec in topology.nodes.items()
        if getattr(getattr(spec, "supplier", None), "kind", None) == "fk_subscription_send"
    )
    if fk_joins:
        # Registrations and answers loop between the two tables' subtopologies through two topics:
        # Spark's stages run in one direction only.
        raise TopologyException(
            f"{caller} cannot run a foreign-key table join (KTable.join/left_join with a "
            f"foreign_key_extractor; subscription processors {fk_joins}): its subscription and response "
            "topics form a loop between subtopologies. Run the topology with KafkaStreams, or join the "
            "tables on Spark before the run."
        )


def _normalize_input(df: DataFrame, topic: str, *, positions: bool = True) -> DataFrame:
    """``df`` with the columns of ``INPUT_COLUMNS`` and their types (see ``run_topology``); without
    ``positions``, only key, value and timestamp (``LOWERED_COLUMNS``)."""
    fields = {f.name: f.dataType for f in df.schema.fields}
    missing = [c for c in ("key", "value", "timestamp") if c not in fields]
    if missing:
        raise ConfigException(
            f"The input DataFrame of topic {topic} has no column {missing}: give it key and value (binary) "
            f"and timestamp (epoch ms) columns. Its columns are {sorted(fields)}."
        )
    # SQL text: each Column call would be a round trip to the JVM.
    texts = [_binary_column(name, fields[name], topic) for name in ("key", "value")]
    if isinstance(fields["timestamp"], TimestampType):
        texts.append("unix_millis(`timestamp`) AS `timestamp`")
    else:
        texts.append("CAST(`timestamp` AS BIGINT) AS `timestamp`")
    if not positions:
        return df.selectExpr(*texts)
    texts.append("CAST(`partition` AS INT) AS `partition`" if "partition" in fields else "0 AS `partition`")
    columns = [F.lit(topic).cast(StringType()).alias("topic"), *(F.expr(text) for text in texts)]
    if "offset" in fields:
        columns.append(F.expr("CAST(`offset` AS BIGINT) AS `offset`"))
    else:
        # Unique, and increasing in the DataFrame's row order: keeps the input order among
        # records with equal timestamps.
        columns.append(F.monotonically_increasing_id().alias("offset"))
    return df.select(*columns)


def _binary_column(name: str, data_type: Any, topic: str) -> str:
    """SQL for the input's ``name`` column as binary."""
    if isinstance(data_type, BinaryType):
        return f"`{name}`"
    if isinstance(data_type, StringType):
        return f"encode(`{name}`, 'UTF-8') AS `{name}`"
    raise ConfigException(
        f"Column {name} of the input DataFrame of topic {topic} is {data_type.simpleString()}: it must be "
        f"binary (the serialized {name}) or a string. Serialize it first, e.g. with the topology's serde."
    )


def _stage_input(
    stage: Stage, normalized: Mapping[str, DataFrame], produced: Mapping[str, list[DataFrame]]
) -> DataFrame:
    frames = [normalized[t] for t in stage.external_inputs]
    for topic in stage.produced_inputs:
        frames.extend(produced.get(topic, []))
    return reduce(DataFrame.unionByName, frames)


def _run_stage(stage_input: DataFrame, spec: StageTaskSpec, stateful: bool, partitions: int) -> DataFrame:
    if stateful:
        # Every record of a key in one partition, in timestamp order: the task of that partition
        # holds the key's whole state, as the task of its Kafka partition does.
        # The topic breaks ties last: (partition, offset) is unique within a topic only, and a
        # total order makes a re-run Spark task process (and write) exactly what the first did.
        stage_input = stage_input.repartition(partitions, "key").sortWithinPartitions(
            "timestamp", "partition", "offset", "topic"
        )

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        partition_id = context.partitionId() if context is not None else 0
        yield from run_stage_partition(spec, partition_id, batches)

    return stage_input.mapInArrow(run, _STAGE_OUTPUT_DDL)


def _consumers(execution: ExecutionPlan, stage: Stage) -> int:
    """How many times the stage's output is read: once per reading stage, once per output topic."""
    readers = len(execution.consumers_of(stage.subtopology))
    returned = sum(1 for t in stage.sink_topics if execution.is_output_topic(t))
    return readers + returned


def _shuffle_partitions(spark: SparkSession) -> int:
    return int(spark.conf.get("spark.sql.shuffle.partitions") or 200)


def _log_python_execution_once() -> None:
    global _python_notice_logged
    if _python_notice_logged:
        return
    _python_notice_logged = True
    if importlib.util.find_spec("kstreams._native.kernels") is None:
        logger.info(
            "kstreams.spark runs the topology's processors as Python, record by record, in Spark's Python "
            "workers: no compiled kernels (kstreams._native.kernels) are installed."
        )
    else:
        logger.info(
            "kstreams.spark runs the topology's tasks in Spark's Python workers; operations with compiled "
            "kernels run as whole batches, the rest as Python per record."
        )
