"""Lowering a stage to Spark SQL: the DSL operations Spark can compute itself, with the same results.

``run_topology`` runs each subtopology as a Spark stage. A stage whose whole chain has Spark
equivalents runs as Spark expressions and a ``groupBy`` aggregation instead of ``StreamTask``s in
Python workers (Spark's own shuffle, partial aggregation and code generation: ~3x the records/s
of the task path on a count per key, within 1.4x of Spark's own ``groupBy().count()``).
A stage is lowered when it is one linear chain

    source -> filter* -> [count | reduce(add/min/max) | windowed count -> to_stream] -> sink

where:

- the source and the sink use built-in serdes and the key's serde is the same on both sides (the
  key bytes pass through unchanged: deserializing and serializing them again gives the same bytes);
- filters are compiled predicates (``kstreams.predicates``), evaluated by the same kernel as on the
  streaming runtime (``kstreams.spark.functions.matches``, an Arrow UDF: Spark has no equivalent of
  their JSON comparison rules, and one predicate vocabulary keeps one set of rules);
- ``count`` and ``reduce`` with ``operator.add``/``min``/``max`` over long or int values become
  ``groupBy(key).agg(...)``; a time-windowed (tumbling or hopping) ``count`` gives each record a row
  per window it falls in (``TimeWindows.windows_for``), then groups by key and window start.

The result is each key's (or key and window's) final aggregate, as the task path's last row of
that key: the value encoded by the sink's serde, the timestamp the largest timestamp of the records
that made it (Kafka's rule), the key bytes (for windows, the inner key plus the 8-byte window start,
``TimeWindowedSerde``) identical. Records Kafka skips are skipped: null keys, and null values in a
plain count or reduce (a windowed count counts them, as Kafka's does). Only the final row is
written, not each update, so a stage is lowered only when its output is returned to the caller: a
stage reading it would see fewer updates than from the task path. Windows never drop a record
here, as on the task path, because a stage's records are processed in timestamp order and never
arrive after their window closed.

Everything else (Python lambdas and processors, projections, joins, session and sliding windows,
suppression, emit-on-close, custom serdes or timestamp extractors, branches) runs as tasks.
One difference remains: the task path deserializes every key and value at its source, so a record
its serdes reject (malformed bytes) fails the task there, while a lowered stage reads only what it
needs (a count never reads its values); and a sum outside the value serde's range fails the
task path's serializer, while Spark wraps it around.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kstreams.config import StreamsConfig
from kstreams.errors import ConfigException
from kstreams.spark import functions as kernel_functions
from kstreams.spark.column_kernels import SERDES
from kstreams.spark.plan_compiler import ExecutionPlan, Stage, compile_plan
from kstreams.topology.compiled_ops import kernel_for_supplier
from kstreams.topology.dsl.processors.aggregate import StreamAggregateSupplier, WindowedAggregateSupplier
from kstreams.topology.dsl.processors.table import TableToStreamSupplier
from kstreams.topology.dsl.windowed_serdes import TimeWindowedSerde
from kstreams.topology.graph import ProcessorNode, SinkNode, SourceNode
from kstreams.topology.plan import SubtopologyPlan

__all__ = ["StageLowering", "explain_topology", "lower_stage"]

logger = logging.getLogger(__name__)

# Key serdes whose deserialize+serialize round trip gives back the same bytes (json re-formats,
# floats may change a NaN's payload): a lowered stage passes those key bytes through.
_PASS_THROUGH_KEYS = ("bytes", "string", "long", "int", "short")
# Value serdes a lowered reduce decodes and encodes as Spark expressions (integers: a sum of
# doubles depends on the order of the additions, which a Spark aggregation does not keep).
_REDUCE_VALUES = ("long", "int")


@dataclass(frozen=True)
class StageLowering:
    """How a stage runs: lowered to Spark SQL (``steps`` say what each operation became) or, with
    ``reason`` saying why not, as ``StreamTask``s."""

    subtopology: int
    steps: tuple[str, ...] = ()
    reason: str | None = None
    build: Callable[[DataFrame], DataFrame] | None = None
    topic: str | None = None  # the one (returned) topic a lowered stage writes

    @property
    def lowered(self) -> bool:
        return self.build is not None

    def apply(self, stage_input: DataFrame) -> DataFrame:
        """The records the stage writes to ``topic`` (key, value, timestamp) from its input's."""
        if self.build is None:
            raise ValueError(f"Stage {self.subtopology} is not lowered: {self.reason}")
        return self.build(stage_input)

    def describe(self) -> str:
        if self.lowered:
            return f"stage {self.subtopology}: Spark SQL: " + " -> ".join(self.steps)
        return f"stage {self.subtopology}: StreamTasks ({self.reason})"


def lower_stage(
    stage: Stage, sub: SubtopologyPlan, execution: ExecutionPlan, *, streaming: bool = False
) -> StageLowering:
    """How ``stage`` (the stage of ``sub`` in ``execution``) runs; see the module docstring.
    ``streaming``: in a streaming query (``run_topology_stream``), where windowed aggregations
    stay tasks."""
    readers = execution.consumers_of(stage.subtopology)
    if readers:
        return StageLowering(
            stage.subtopology,
            reason=f"its output feeds stage(s) {list(readers)}, which must see every update",
        )
    try:
        graph = sub.create_graph()
    except ConfigException as exc:  # the task path raises it when the stage runs
        return StageLowering(stage.subtopology, reason=f"its graph cannot be built: {exc}")
    try:
        return _lower_chain(stage.subtopology, graph, streaming)
    except _NotLowered as exc:
        return StageLowering(stage.subtopology, reason=str(exc))


def explain_topology(
    topology: Any,
    inputs: Iterable[str] | Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
    *,
    streaming: bool = False,
) -> str:
    """Which stages of ``run_topology(spark, topology, inputs, config)`` (with ``streaming``: of
    ``run_topology_stream(..., lower_to_sql=True)``) run as Spark SQL and which as StreamTasks,
    one line per stage in run order. ``inputs`` is the inputs mapping or its topic names; nothing
    runs (no Spark job)."""
    props = dict(config or {})
    props.setdefault("application.id", "kstreams-spark")
    streams_config = StreamsConfig(props)
    topics = list(inputs)
    plan = topology.build(streams_config.application_id, streams_config, topics=topics)
    execution = compile_plan(plan, topics)
    lines = [
        lower_stage(s, plan.subtopology(s.subtopology), execution, streaming=streaming).describe()
        for s in execution.stages
    ]
    return "\n".join(lines)


class _NotLowered(Exception):
    """Why a stage's chain has no Spark SQL form (the stage runs as tasks)."""


def _lower_chain(subtopology: int, graph: Any, streaming: bool) -> StageLowering:
    if graph.pattern_sources:
        raise _NotLowered("it reads topics by pattern")
    sources = {id(node): node for node in graph.sources_by_topic.values()}
    if len(sources) != 1:
        raise _NotLowered("it has more than one source node")
    source: SourceNode = next(iter(sources.values()))
    if source.timestamp_extractor is not None:
        raise _NotLowered("its source has a timestamp extractor")
    key_serde = _serde_name(source.key_deserializer, "source key")
    value_serde = _serde_name(source.value_deserializer, "source value")

    steps: list[str] = []
    filters: list[Column] = []
    aggregation: tuple[str, Any] | None = None  # (kernel name, supplier)
    to_stream = False
    node: Any = source
    while not isinstance(node, SinkNode):
        if len(node.children) != 1:
            raise _NotLowered(f"{node.name} forwards to {len(node.children)} nodes (not one chain)")
        node = node.children[0]
        if isinstance(node, SinkNode):
            break
        assert isinstance(node, ProcessorNode)
        supplier = node.supplier
        if aggregation is not None and not to_stream:
            if isinstance(supplier, TableToStreamSupplier) and supplier.mapper is None:
                to_stream = True
                steps.append("to_stream")
                continue
            raise _NotLowered(f"{node.name} follows the aggregation on the table (not to_stream)")
        if to_stream:
            raise _NotLowered(f"{node.name} follows the aggregation's to_stream")
        kernel = kernel_for_supplier(supplier)
        if kernel is None:
            raise _NotLowered(f"{node.name} runs record by record")
        if kernel.name == "pass":
            continue
        if kernel.name == "filter" and kernel.predicate is not None:
            holds = kernel_functions.matches(
                kernel.predicate, "value", "key", value_serde=value_serde, key_serde=key_serde
            )
            filters.append(~holds if kernel.negate else holds)
            steps.append(f"filter({kernel.predicate!r}) [kernel UDF]")
            continue
        if kernel.name in ("count", "sum", "min", "max") and isinstance(
            supplier, StreamAggregateSupplier | WindowedAggregateSupplier
        ):
            if kernel.windows is not None and kernel.name != "count":
                raise _NotLowered(f"{node.name} is a windowed {kernel.name} (only windowed count is lowered)")
            if kernel.windows is not None and streaming:
                # Records arrive out of order across micro-batches; a task drops those whose window
                # closed on its stream time, a Spark streaming aggregation has no such clock.
                raise _NotLowered(f"{node.name} is windowed (windows close on the tasks' stream time)")
            aggregation = (kernel.name, supplier)
            continue
        if not kernel.native:
            raise _NotLowered(f"{node.name} ({kernel.label}) calls a Python function")
        raise _NotLowered(f"{node.name} ({kernel.label}) is not lowered")
    sink: SinkNode = node
    if sink.topic is None:
        raise _NotLowered("its sink picks topics per record")
    if aggregation is not None and not to_stream:
        raise _NotLowered("its aggregation is not followed by to_stream")

    topic = sink.topic
    if aggregation is None:
        # A filter chain: records pass through unchanged when the serdes are the same both sides.
        if (
            _serde_name(sink.key_serializer, "sink key") != key_serde
            or _serde_name(sink.value_serializer, "sink value") != value_serde
            or key_serde not in _PASS_THROUGH_KEYS
            or value_serde not in _PASS_THROUGH_KEYS
        ):
            raise _NotLowered("its sink's serdes differ from its source's (the bytes would change)")

        def build_stateless(df: DataFrame) -> DataFrame:
            if filters:
                df = df.where(reduce(Column.__and__, filters))
            return df

        return StageLowering(
            subtopology, tuple([*steps, f"sink({topic})"]), build=build_stateless, topic=topic
        )

    name, supplier = aggregation
    if key_serde not in _PASS_THROUGH_KEYS:
        raise _NotLowered(f"its key serde {key_serde} does not give back the same bytes")
    windows = supplier.windows if isinstance(supplier, WindowedAggregateSupplier) else None
    sink_key = sink.key_serializer
    if windows is not None:
        if not isinstance(sink_key, TimeWindowedSerde):
            raise _NotLowered("its windowed result is written without a TimeWindowedSerde key")
        sink_key = sink_key.inner
    if _serde_name(sink_key, "sink key") != key_serde:
        raise _NotLowered("its sink's key serde differs from its source's")
    sink_value = _serde_name(sink.value_serializer, "sink value")
    if name == "count" and sink_value != "long":
        raise _NotLowered(f"its count is written with the {sink_value} serde (not long)")
    if name != "count" and not (sink_value == value_serde and value_serde in _REDUCE_VALUES):
        raise _NotLowered(f"its reduce over {value_serde} values is written as {sink_value} (not long/int)")

    def build_aggregate(df: DataFrame) -> DataFrame:
        # Few DataFrame calls, of SQL text: Spark's driver analyses the plan again at every
        # DataFrame call (~5-8 ms each), and a Column is a round trip to the JVM per function.
        kept = "key IS NOT NULL AND " + (
            # A negative timestamp falls in no window (TimeWindows.windows_for).
            "value IS NOT NULL" if windows is None else "`timestamp` >= 0"
        )
        # One where for all conditions. Spark does not promise to evaluate And's sides in order,
        # so a kernel UDF also sees skipped records.
        df = df.where(reduce(Column.__and__, filters, F.expr(kept))) if filters else df.where(kept)
        key = "key"
        if windows is not None:
            starts = _window_starts(windows.size_ms, windows.advance_ms)
            df = df.selectExpr("key", "value", "`timestamp`", f"explode({starts}) AS window_start")
            # The windowed key's bytes, the inner key's then the start's 8, identify the pair.
            key = f"concat(key, {_encode('window_start', 'long')})"
        result = "count(1)" if name == "count" else f"{name}({_decode('value', value_serde)})"
        return df.groupBy(F.expr(f"{key} AS key")).agg(
            F.expr(f"{_encode(result, sink_value)} AS value"), F.expr("max(`timestamp`) AS `timestamp`")
        )

    window_step = ""
    if windows is not None:
        window_step = f"window(size={windows.size_ms}, advance={windows.advance_ms}) [explode] -> "
    operation = "count" if name == "count" else f"reduce({name})"
    step = f"{window_step}groupBy(key).agg({operation}, max(timestamp))"
    return StageLowering(
        subtopology, tuple([*steps[:-1], step, f"sink({topic})"]), build=build_aggregate, topic=topic
    )


def _serde_name(serde: Any, what: str) -> str:
    """The name of a built-in serde (``column_kernels.SERDES``); raises _NotLowered for others."""
    name = getattr(serde, "name", None)
    if not isinstance(name, str) or name not in SERDES or type(serde) is not type(SERDES[name][1]):
        raise _NotLowered(f"its {what} serde {serde!r} is not a built-in serde")
    return name


def _window_starts(size_ms: int, advance_ms: int) -> str:
    """SQL: the starts of every window containing the record's timestamp (``TimeWindows.windows_for``)."""
    earliest = f"greatest(0L, `timestamp` - {size_ms}L + {advance_ms}L)"
    return (
        f"sequence({earliest} - pmod({earliest}, {advance_ms}L), "
        f"`timestamp` - pmod(`timestamp`, {advance_ms}L), {advance_ms}L)"
    )


def _decode(value: str, serde: str) -> str:
    """SQL: big-endian signed integer bytes as a long (LongSerde/IntegerSerde.deserialize)."""
    if serde == "long":
        # A negative to-base makes conv read the 64 bits as signed.
        return f"CAST(conv(hex({value}), 16, -10) AS BIGINT)"
    unsigned = f"CAST(conv(hex({value}), 16, 10) AS BIGINT)"
    return f"({unsigned} - CASE WHEN {unsigned} >= 2147483648L THEN 4294967296L ELSE 0L END)"


def _encode(number: str, serde: str) -> str:
    """SQL: a long as the serde's big-endian bytes (LongSerde/IntegerSerde.serialize)."""
    if serde == "long":
        # hex of a negative long is its 64-bit two's complement.
        return f"unhex(lpad(hex(CAST({number} AS BIGINT)), 16, '0'))"
    return f"unhex(lpad(hex(CAST({number} AS BIGINT) & 4294967295L), 8, '0'))"
