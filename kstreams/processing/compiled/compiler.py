"""Builds a task's compiled segments: for each source, the tree of batch steps its records take.

Called once a task's processors are initialised (stores open, DSL processors bound to them). A
node gets a batch step when ``kstreams.topology.compiled_ops`` recognises its operation and the
running task fits it: built-in serdes on the way in and out, a sink with a fixed topic and the default
partitioner, an aggregation whose store's serdes match the stream, over a cached store or one
without a cache whose every update goes to sinks (a session count over any session store, cached
or not: ``session_steps``). Any other node is
a boundary: from there on its records go record by record through the Python processors, exactly
as without compilation. A source whose subtree has no kernel at all gets no segment.

Whether a task runs compiled at all, source by source, is decided in one place,
``compiled_or_per_record``, whose docstring lists every reason a task, a source or a batch runs
per record (``processing.compiled=false`` among them: how tests and benchmarks compare both
paths on the same input).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from kstreams._native import kernels
from kstreams.processing.compiled.aggregate_steps import (
    AggregateStep,
    CountColumnsStep,
    PythonAggregateStep,
    PythonWindowedAggregateStep,
    change_writer,
)
from kstreams.processing.compiled.columns import encoding_of
from kstreams.processing.compiled.session_steps import KEY_ENCODINGS, SessionCountStep
from kstreams.processing.compiled.sink_steps import ColumnSinkStep, SinkStep
from kstreams.processing.compiled.stateless_steps import (
    FilterStep,
    PassThroughStep,
    ProjectStep,
    PythonChainStep,
    PythonFilterStep,
    keeps_keys,
)
from kstreams.processing.compiled.steps import BoundaryStep, SegmentTask, Step, run_step
from kstreams.state.caching import CachingKeyValueStore, CachingSessionStore, CachingWindowStore
from kstreams.state.changelogging import ChangeLoggingSessionStore
from kstreams.state.in_memory_lru import MemoryLRUCache
from kstreams.state.inner_windowed import InnerSessionStore
from kstreams.state.layer import StoreLayer
from kstreams.state.metered import MeteredKeyValueStore, MeteredSessionStore, MeteredWindowStore
from kstreams.state.timestamped import is_timestamped
from kstreams.topology.compiled_ops import (
    AGGREGATIONS,
    PYTHON_AGGREGATE,
    PYTHON_FILTER,
    PYTHON_MAP,
    PYTHON_REDUCE,
    PYTHON_SESSION_COUNT,
    OperationKernel,
    kernel_for_supplier,
)
from kstreams.topology.dsl.processors.aggregate import StreamAggregateProcessor, WindowedAggregateProcessor
from kstreams.topology.dsl.processors.session_aggregate import SessionAggregateProcessor
from kstreams.topology.dsl.processors.table import TableToStreamSupplier
from kstreams.topology.graph import ProcessorGraph, ProcessorNode, SinkNode, SourceNode

if TYPE_CHECKING:
    from kstreams._native.per_record import NodeBase
    from kstreams._native.record_batch import RecordBatch
    from kstreams.config import StreamsConfig
    from kstreams.predicates import Predicate
    from kstreams.processor import TaskId

__all__ = ["CompiledSource", "CompilingTask", "compiled_or_per_record"]

logger = logging.getLogger(__name__)

_INT64 = (-(1 << 63), (1 << 63) - 1)
_OPS = {"count": kernels.COUNT, "sum": kernels.SUM, "min": kernels.MIN, "max": kernels.MAX}
_NUMERIC = (kernels.LONG, kernels.INT, kernels.DOUBLE)


class CompilingTask(SegmentTask, Protocol):
    """What the compiler reads of a task whose processors are initialised (``StreamTask`` is one)."""

    @property
    def task_id(self) -> TaskId: ...

    @property
    def config(self) -> StreamsConfig: ...

    @property
    def graph(self) -> ProcessorGraph: ...


class CompiledSource:
    """The compiled segment of one source node: validates a batch in the source's encodings,
    then runs it through the steps below the source."""

    def __init__(self, source: SourceNode, key_enc: int, value_enc: int, children: list[Step]) -> None:
        self.source = source
        self.key_enc = key_enc
        self.value_enc = value_enc
        self.children = children
        # The top-level JSON fields the steps look up: validation parses every document anyway,
        # so it captures where they are and the steps find them without another scan.
        self.fields = sorted({field for step in self.steps() for field in step.json_fields()})
        # Batches with headers run through the segment only when every step passes them on.
        self.carries_headers = all(step.carries_headers for step in self.steps())

    def accepts(self, batch: RecordBatch) -> bool:
        """False when some record needs the per-record path from the source on (bytes its
        deserializers reject, a negative timestamp)."""
        return kernels.validate(batch, self.key_enc, self.value_enc, self.fields) < 0  # type: ignore[no-any-return]

    def run(self, task: SegmentTask, batch: RecordBatch) -> None:
        """Process an accepted batch."""
        for child in self.children:
            run_step(child, task, batch, self.key_enc, self.value_enc)

    @property
    def calls_python(self) -> bool:
        """Whether some step of the segment calls Python code per record (holds the GIL)."""
        return any(step.calls_python for step in self.steps())

    def steps(self) -> list[Step]:
        """Every step, parents first."""
        found: list[Step] = []
        pending = list(self.children)
        while pending:
            step = pending.pop(0)
            found.append(step)
            pending.extend(step.children)
        return found

    def __repr__(self) -> str:
        return f"CompiledSource({self.source.name!r}, steps={self.steps()})"


def compiled_or_per_record(task: CompilingTask, *, records_guarded: bool) -> dict[str, CompiledSource]:
    """The one decision whether a task's batches run compiled or record by record: source topic ->
    the compiled segment its batches run through; a topic not in it (every topic, when empty) runs
    per record. ``kstreams.topology.compiled_ops`` recognises which operations have a batch form;
    this decides whether the running task may use them.

    The whole task runs per record when:

    - ``processing.compiled`` is false (tests and benchmarks compare both paths on one input);
    - its record errors are guarded (``records_guarded``: ``RecordErrors.enabled``, a processing
      exception handler): each failure must name one record and one node, and a compiled batch
      cannot say which record failed.

    A source runs per record (``_compile_source``) when it has a timestamp extractor (called per
    record), a deserializer that is not a built-in serde (no kernel reads its bytes), no node below
    it with a batch form, two sinks writing one topic from different branches (a batch would
    interleave their records differently from record order), or branches that fork where one runs
    Python processors beside another that writes state (a batch runs one branch after the other,
    Kafka runs each record through every branch in turn).

    Decided per batch, since they change between batches (``StreamTask.process``): a batch with
    headers, or any batch while a cache holds header notes, goes per record unless every step
    carries headers; a batch in which a stream-time punctuation falls due goes per record; and a
    batch its segment does not accept (bytes the deserializers reject, a negative timestamp) goes
    per record from the source on. Below the source, a step whose kernel cannot treat a record
    exactly as Python does hands its batch to its node's processor (the boundary, ``Step.boundary``).
    """
    if records_guarded or not task.config["processing.compiled"]:
        return {}
    segments: dict[str, CompiledSource] = {}
    for source in {id(s): s for s in task.graph.sources_by_topic.values()}.values():
        segment = _compile_source(source)
        if segment is None:
            continue
        for topic in source.topics:
            segments[topic] = segment
        logger.debug("Task %s compiled %s", task.task_id, segment)
    return segments


def _compile_source(source: SourceNode) -> CompiledSource | None:
    if source.timestamp_extractor is not None:
        return None
    key_enc = encoding_of(source.key_deserializer)
    value_enc = encoding_of(source.value_deserializer)
    if key_enc is None or value_enc is None:
        return None
    children = [_compile_node(child, key_enc, value_enc) for child in source.children]
    segment = CompiledSource(source, key_enc, value_enc, children)
    steps = segment.steps()
    if all(isinstance(step, BoundaryStep) for step in steps):
        return None
    # Batch order differs from record order only across branches: two sinks writing one topic
    # from different branches would interleave differently, so such trees stay per record.
    sink_topics = Counter(step.node.topic for step in steps if isinstance(step, SinkStep | ColumnSinkStep))
    if any(count > 1 for count in sink_topics.values()):
        return None
    # Kafka runs each record depth first through every branch before the next record. A batch
    # runs through one branch after another instead, which is only the same when at most one
    # branch at each fork can have effects another branch may observe: a store written by an
    # aggregation and read by a join in a sibling branch would see the whole batch's updates.
    if _stateful_branches_fork(children):
        logger.debug("Source %s stays per record: stateful branches fork below it", source.name)
        return None
    return segment


_AGGREGATES = (
    AggregateStep,
    CountColumnsStep,
    PythonAggregateStep,
    PythonWindowedAggregateStep,
    SessionCountStep,
)


def _contains(step: Step, kinds: tuple[type, ...]) -> bool:
    return isinstance(step, kinds) or any(_contains(child, kinds) for child in step.children)


def _runs_python(step: Step) -> bool:
    """Whether a Python processor that may read any store runs somewhere in the step's subtree."""
    if isinstance(step, BoundaryStep) and not _lone_aggregation(step.node):
        return True
    return any(_runs_python(child) for child in step.children)


def _lone_aggregation(node: NodeBase) -> bool:
    """A DSL aggregation without children: it touches only its own store."""
    return (
        isinstance(node, ProcessorNode)
        and isinstance(
            node.processor, StreamAggregateProcessor | WindowedAggregateProcessor | SessionAggregateProcessor
        )
        and not node.children
    )


def _stateful_branches_fork(children: list[Step]) -> bool:
    """At some fork, a branch of Python processors (which may read any store of the task) runs
    beside another branch that writes state (an aggregation) or runs Python too. Sibling
    aggregations alone never observe each other: each writes its own store, and so does a DSL
    aggregation run record by record that forwards nowhere else."""
    python = sum(1 for child in children if _runs_python(child))
    stateful = sum(1 for child in children if _runs_python(child) or _contains(child, _AGGREGATES))
    if python >= 1 and stateful >= 2:
        return True
    return any(_stateful_branches_fork(child.children) for child in children)


def _compile_node(node: NodeBase, key_enc: int, value_enc: int) -> Step:
    if isinstance(node, SinkNode):
        return _compile_sink(node, key_enc, value_enc)
    if not isinstance(node, ProcessorNode):
        return BoundaryStep(node, [])
    op = kernel_for_supplier(node.supplier)
    if op is None:
        return BoundaryStep(node, [])
    if op.name in (PYTHON_FILTER, PYTHON_MAP):
        chain = _compile_python_chain(node, op, key_enc)
        if chain is not None:
            return chain
        if op.name == PYTHON_MAP:
            return BoundaryStep(node, [])
        assert op.function is not None
        children = [_compile_node(child, key_enc, value_enc) for child in node.children]
        return PythonFilterStep(node, children, op.function, op.negate)
    if op.name == PYTHON_AGGREGATE:
        return _compile_python_aggregate(node, key_enc) or BoundaryStep(node, [])
    if op.name == PYTHON_SESSION_COUNT:
        return _compile_session_count(node, key_enc) or BoundaryStep(node, [])
    if op.name == "pass":
        return PassThroughStep(node, [_compile_node(c, key_enc, value_enc) for c in node.children])
    if op.name == "filter":
        predicate = op.predicate
        assert predicate is not None
        if op.negate:
            predicate = ~predicate
        if not _predicate_fits(predicate, key_enc, value_enc):
            return BoundaryStep(node, [])
        nodes, root = predicate.nodes()
        try:
            compiled = kernels.Predicate(list(nodes), root, key_enc, value_enc)
        except (ValueError, TypeError, OverflowError, UnicodeError) as exc:
            # e.g. a str constant UTF-8 cannot hold: Python compares it, the kernel cannot
            logger.debug("Filter %s stays per record: %r", node.name, exc)
            return BoundaryStep(node, [])
        children = [_compile_node(c, key_enc, value_enc) for c in node.children]
        fields = [(side, field) for _, side, field, *_ in nodes if field is not None]
        return FilterStep(node, children, compiled, key_enc, value_enc, fields)
    if op.name == "project":
        expr = op.expr
        assert expr is not None
        src_enc = key_enc if expr.side == 0 else value_enc
        if expr.field is None and expr.side == op.dst_side:
            return PassThroughStep(node, [_compile_node(c, key_enc, value_enc) for c in node.children])
        if src_enc != kernels.JSON:
            return BoundaryStep(node, [])
        new_key, new_value = (kernels.JSON, value_enc) if op.dst_side == 0 else (key_enc, kernels.JSON)
        children = [_compile_node(c, new_key, new_value) for c in node.children]
        return ProjectStep(node, children, expr.side, expr.field, op.dst_side)
    return (
        _kernel_aggregate(node, op, key_enc, value_enc)
        or _compile_python_aggregate(node, key_enc)
        or BoundaryStep(node, [])
    )


def _compile_python_chain(node: ProcessorNode, op: OperationKernel, key_enc: int) -> Step | None:
    """Python filters and mappers in a line (each the only child of the one before) run as one
    step when what follows the line can take their results as columns (sinks that take batches,
    aggregations with a cache); None when nothing after the line would."""
    nodes, ops = [node], [op]
    while len(nodes[-1].children) == 1:
        child = nodes[-1].children[0]
        child_op = kernel_for_supplier(child.supplier) if isinstance(child, ProcessorNode) else None
        if child_op is None or child_op.name not in (PYTHON_FILTER, PYTHON_MAP):
            break
        nodes.append(child)
        ops.append(child_op)
    source_keys = key_enc if keeps_keys(ops) else None
    children = [_column_step(child, source_keys) for child in nodes[-1].children]
    if all(isinstance(child, BoundaryStep) for child in children):
        return None
    sinks = [child.node.topic for child in children if isinstance(child, ColumnSinkStep)]
    if len(set(sinks)) != len(sinks):
        return None  # two sinks of one topic: per-record order interleaves them
    return PythonChainStep(nodes, ops, children)


def _column_step(node: NodeBase, key_enc: int | None) -> Step:
    """The step for a node below a chain of Python functions (records as Python objects);
    ``key_enc`` is the source's key encoding when the chain kept the keys."""
    if isinstance(node, SinkNode) and node.sends_batches:
        same_key_bytes = (
            key_enc is not None and key_enc != kernels.JSON and key_enc == encoding_of(node.key_serializer)
        )
        return ColumnSinkStep(node, same_key_bytes)
    if isinstance(node, ProcessorNode):
        op = kernel_for_supplier(node.supplier)
        if op is not None and op.name == "count" and key_enc is not None:
            count = _kernel_aggregate(node, op, key_enc, kernels.BYTES)
            if count is not None:
                return CountColumnsStep(node, count, key_enc)
        if op is not None and op.name in AGGREGATIONS:
            return _compile_python_aggregate(node, key_enc) or BoundaryStep(node, [])
    return BoundaryStep(node, [])


def _compile_python_aggregate(
    node: ProcessorNode, key_enc: int | None
) -> PythonAggregateStep | PythonWindowedAggregateStep | None:
    """A DSL aggregation with Python functions (plain or windowed), over a cached store or, when
    every update it forwards can go to sinks as a batch (``_uncached_sinks``), over a timestamped
    store without a cache. ``key_enc``: the encoding of the key bytes the step's records come
    with (None: it has none), which the store reuses when its key serde writes the same bytes."""
    processor = node.processor
    aggregates = isinstance(processor, StreamAggregateProcessor | WindowedAggregateProcessor)
    store = processor.store if aggregates else None
    if store is not None and _forgets_keys(store):
        return None
    sinks = _uncached_sinks(node) if store is not None and is_timestamped(store) else None
    same_keys = (
        store is not None
        and key_enc is not None
        and key_enc != kernels.JSON
        and encoding_of(store.key_serde) == key_enc
    )
    if isinstance(processor, StreamAggregateProcessor) and isinstance(store, MeteredKeyValueStore):
        caching = store.wrapped
        if processor.forwarder.cached and isinstance(caching, CachingKeyValueStore):
            return PythonAggregateStep(node, processor, store, caching, sinks, same_keys)
        if not processor.forwarder.cached and sinks is not None and _writes_every_change(caching):
            return PythonAggregateStep(node, processor, store, None, sinks, same_keys)
    if isinstance(processor, WindowedAggregateProcessor) and isinstance(store, MeteredWindowStore):
        # Emitting on window close forwards from the processor, not per update: not done here.
        sinks = None if processor.emit_on_close else sinks
        window_caching = store.wrapped
        if processor.forwarder.cached and isinstance(window_caching, CachingWindowStore):
            return PythonWindowedAggregateStep(node, processor, store, window_caching, sinks, same_keys)
        if not processor.forwarder.cached and sinks is not None and _writes_every_change(window_caching):
            return PythonWindowedAggregateStep(node, processor, store, None, sinks, same_keys)
    return None


def _uncached_sinks(node: ProcessorNode) -> list[SinkNode] | None:
    """Where an aggregation without a cache forwards each update, when a batch can take them all:
    ``[]`` when nothing is below it; the sinks (fixed topics, default partitioner, one per topic)
    below a ``to_stream()`` without a mapper that is its only child; None for anything else (a
    processor there may read the store, which a batch writes after all its records)."""
    if not node.children:
        return []
    if len(node.children) != 1:
        return None
    child = node.children[0]
    if not isinstance(child, ProcessorNode) or type(child.supplier) is not TableToStreamSupplier:
        return None
    if child.supplier.mapper is not None:
        return None
    sinks = child.children
    if not sinks or not all(isinstance(sink, SinkNode) and sink.sends_batches for sink in sinks):
        return None
    if len({sink.topic for sink in sinks}) != len(sinks):
        return None
    return list(sinks)


def _writes_every_change(layer: Any) -> bool:
    """A layer below a metered store without a cache, whose changelog (if any) the record
    collector may reduce to the newest record per key (a versioned store keeps every record)."""
    return not isinstance(layer, CachingKeyValueStore | CachingWindowStore) and not getattr(
        layer, "keeps_every_changelog_record", False
    )


def _compile_session_count(node: ProcessorNode, key_enc: int) -> Step | None:
    """A session count whose store reads keys in the source's bytes and holds plain longs, over
    the layers the step knows: metered, optionally caching, optionally change-logging, then one
    of kstreams' inner session stores."""
    processor = node.processor
    if not isinstance(processor, SessionAggregateProcessor) or processor.spec.kind != "count":
        return None
    store = processor.store
    if not isinstance(store, MeteredSessionStore) or is_timestamped(store):
        return None
    if key_enc not in KEY_ENCODINGS or encoding_of(store.key_serde) != key_enc:
        return None
    if encoding_of(store.value_serde) != kernels.LONG:
        return None
    layer: Any = store.wrapped
    caching = layer if isinstance(layer, CachingSessionStore) else None
    if caching is not None:
        layer = caching.wrapped
    if isinstance(layer, ChangeLoggingSessionStore):
        layer = layer.wrapped
    if not isinstance(layer, InnerSessionStore):
        return None
    return SessionCountStep(node, processor, store, caching, layer, key_enc)


def _predicate_fits(predicate: Predicate, key_enc: int, value_enc: int) -> bool:
    for expr in predicate.expressions():
        enc = key_enc if expr.side == 0 else value_enc
        if expr.field is not None and enc != kernels.JSON:
            return False
    return not any(
        type(constant) is int and not _INT64[0] <= constant <= _INT64[1] for constant in predicate.constants()
    )


def _compile_sink(sink: SinkNode, key_enc: int, value_enc: int) -> Step:
    if not sink.sends_batches:
        return BoundaryStep(sink, [])
    key_dst = encoding_of(sink.key_serializer)
    value_dst = encoding_of(sink.value_serializer)
    if key_dst is None or value_dst is None:
        return BoundaryStep(sink, [])
    if not kernels.convertible(key_enc, key_dst) or not kernels.convertible(value_enc, value_dst):
        return BoundaryStep(sink, [])
    return SinkStep(sink, key_dst, value_dst)


def _forgets_keys(store: Any) -> bool:
    """Whether the store's inner store is an LRU map: which key it forgets depends on the order of
    every read and write, so it is updated a record at a time, not a key per batch."""
    while isinstance(store, StoreLayer):
        store = store.wrapped
    return isinstance(store, MemoryLRUCache)


def _kernel_aggregate(
    node: ProcessorNode, op: OperationKernel, key_enc: int, value_enc: int
) -> AggregateStep | None:
    """The aggregation kernel's step for a DSL aggregation whose store's serdes are the stream's
    (numbers for sum/min/max/reduce), over a cached store or one without a cache whose updates
    all go to sinks as a batch; None where the kernel does not fit."""
    processor = node.processor
    windowed = op.windows is not None
    layers = (
        (WindowedAggregateProcessor, MeteredWindowStore, CachingWindowStore)
        if windowed
        else (StreamAggregateProcessor, MeteredKeyValueStore, CachingKeyValueStore)
    )
    if not isinstance(processor, layers[0]) or not isinstance(processor.store, layers[1]):
        return None
    metered = processor.store
    if _forgets_keys(metered):
        return None
    store_key = encoding_of(metered.key_serde)
    store_value = encoding_of(metered.value_serde)
    if store_key != key_enc or key_enc == kernels.JSON or store_value is None:
        return None
    if op.name == "count":
        if store_value != kernels.LONG:
            return None
    elif op.name not in _OPS and op.name != PYTHON_REDUCE:
        return None
    elif store_value != value_enc or value_enc not in _NUMERIC:
        return None
    layer = metered.wrapped
    caching = layer if processor.forwarder.cached and isinstance(layer, layers[2]) else None
    write_changes, forward_to = _uncached_writes(node, metered, key_enc, store_value, windowed)
    if caching is None and write_changes is None:
        return None
    code = kernels.REDUCE if op.name == PYTHON_REDUCE else _OPS[op.name]
    step = AggregateStep(
        node,
        code,
        op.label,
        key_enc,
        value_enc,
        store_value,
        metered,
        caching,
        op.windows,
        op.function,
        write_changes,
        forward_to,
    )
    step.python = _compile_python_aggregate(node, key_enc)
    return step


def _uncached_writes(
    node: ProcessorNode, metered: Any, key_enc: int, store_enc: int, windowed: bool
) -> tuple[Callable[[RecordBatch], None] | None, list[Step] | None]:
    """How the aggregation kernel writes a batch without a cache, as the Python batch step would
    (``_compile_python_aggregate``: a timestamped store, every update to sinks that take batches):
    the writer of changes into the layer below the metered store (and its cache, if any), and the
    sinks' steps for the updates; (None, None) where it cannot. Windowed updates would need
    windowed keys, so a windowed aggregation qualifies only with nothing below it."""
    processor = node.processor
    sinks = _uncached_sinks(node) if is_timestamped(metered) else None
    if sinks is None or (windowed and (sinks or processor.emit_on_close)):
        return None, None
    below = metered.wrapped
    if isinstance(below, CachingKeyValueStore | CachingWindowStore):
        if processor.forwarder.cached:
            below = below.wrapped
        else:
            return None, None
    if not _writes_every_change(below):
        return None, None
    write_changes = change_writer(below)
    if write_changes is None:
        return None, None
    forward_to = [_compile_sink(sink, key_enc, store_enc) for sink in sinks]
    if any(not isinstance(step, SinkStep) for step in forward_to):
        return None, None
    return write_changes, forward_to
