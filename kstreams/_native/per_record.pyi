"""Stub of csrc/kstreams/_native/per_record.pyx: the per-record path's loops and the DSL's
record-at-a-time processors, in C."""

from collections.abc import Callable, Sequence
from typing import Any

from kstreams._native.e2e_latency import E2ELatencySensor
from kstreams._native.record_batch import RecordBatch

class RecordPosition:
    """The topic, partition, offset and timestamp of the current record, and its input batch."""

    topic: str | None
    partition: int
    offset: int
    timestamp: int
    source: RecordBatch | None

NEVER_DUE: int

class ContextRouting:
    """The node being run, the current record context, the innermost failure, the task's
    record cache and next stream-time punctuation due; ``forward``."""

    node: Any
    record_context: Any
    _failed: tuple[BaseException, str] | None
    task_cache: Any
    next_stream_due: int
    def forward(self, record: Any, child_name: Any = None) -> None:
        """Pass ``record`` to the children of the node being run (or to the named one)."""

class ProcessCore:
    """A processor whose ``process`` is C; graph nodes run it without a Python call."""

    def process(self, record: Any) -> None: ...

class NodeBase:
    """A graph node's name, children, ``process`` and, for a terminal node, its KIP-613
    end-to-end latency sensor (C fields)."""

    name: str
    children: list[Any]
    children_by_name: dict[str, Any]
    e2e_latency: E2ELatencySensor | None
    process: Callable[[Any], None]

class BatchProgress:
    """How far ``run_records`` got: records processed, last offset consumed, partition time."""

    processed: int
    last_offset: int
    partition_time: int
    def __init__(self, partition_time: int) -> None: ...

def run_records(
    # kstreams.processing.record_loop.RecordLoopTask (the engine is above _native: no import here)
    task: Any,
    progress: BatchProgress,
    tp: Any,  # kstreams.cluster.port.TopicPartition
    position: RecordPosition,
    context: ContextRouting,
    children: Sequence[Any],
    batch: RecordBatch,
    decoded_keys: list[Any] | None,
    decoded_values: list[Any] | None,
    key_deserialize: Callable[[str, bytes | None], Any],
    value_deserialize: Callable[[str, bytes | None], Any],
    headers_of: Callable[[int], Any] | None,
    extractor: Any,
) -> None:
    """Run each record of a batch through ``children``, as ``StreamTask.process`` does."""

def key_value_of(result: Any, what: str) -> tuple[Any, Any]:
    """A mapper's result as (key, value); a clear error for anything else."""

class ForwardingCore(ProcessCore):
    """A processor that keeps its context to forward through."""

    context: Any
    def init(self, context: Any) -> None: ...

class FilterCore(ForwardingCore):
    predicate: Callable[[Any, Any], Any]
    negate: bool
    def __init__(self, predicate: Callable[[Any, Any], Any], negate: bool) -> None: ...

class MapCore(ForwardingCore):
    mapper: Callable[[Any, Any], Any]
    def __init__(self, mapper: Callable[[Any, Any], Any]) -> None: ...

class MapValuesCore(ForwardingCore):
    mapper: Callable[..., Any]
    with_key: bool
    def __init__(self, mapper: Callable[..., Any], with_key: bool) -> None: ...

class ToStreamCore(ForwardingCore):
    """to_stream: each update's new value, keyed by ``mapper(key, value)`` when there is one."""

    mapper: Callable[[Any, Any], Any] | None
    def __init__(self, mapper: Callable[[Any, Any], Any] | None, change_type: type) -> None: ...

class AggregateStep:
    """An aggregation's function of (key, value, old aggregate or None) -> new aggregate."""

    def __call__(self, key: Any, value: Any, old: Any) -> Any: ...

class CountStep(AggregateStep): ...

class ReduceStep(AggregateStep):
    reducer: Callable[[Any, Any], Any]
    def __init__(self, reducer: Callable[[Any, Any], Any]) -> None: ...

class AggregatorStep(AggregateStep):
    initializer: Callable[[], Any] | None
    aggregator: Callable[[Any, Any, Any], Any]
    last_initial: Any
    def __init__(
        self, initializer: Callable[[], Any] | None, aggregator: Callable[[Any, Any, Any], Any]
    ) -> None: ...

class AggregateAccess:
    """A store accessor that serves an aggregation step in C."""

class StreamAggregateCore(ProcessCore):
    """``process`` of a stream aggregation, in C."""

    _step: Any
    _apply: Any
    forwarder: Any
    _cached: bool
    def route_changes(self, context: Any, change_type: type) -> None: ...

class WindowedAggregateCore(ProcessCore):
    """``process`` of a time-windowed aggregation, in C."""

    _step: Any
    _apply: Any
    _cached: bool
    emit_on_close: bool
    size_ms: int
    advance_ms: int
    grace_ms: int
    observed_stream_time: int
    dropped: int
    def route_changes(self, context: Any, change_type: type) -> None: ...

SERIAL_STRING: int
SERIAL_LONG: int
SERIAL_BYTES: int

class OutputPartitionCounts:
    """The partition counts of the topics a client writes to, kept once ``describe(topic)``
    gave them; ``clear`` forgets them (and bumps ``generation``)."""

    generation: int

    def __init__(self, describe: Callable[[str], int]) -> None: ...
    def __call__(self, topic: str) -> int: ...
    def clear(self) -> None: ...

class SinkSender(ProcessCore):
    """The per-record send of a sink with a fixed topic, the default partitioner and built-in
    serializers; anything else goes to ``fallback``."""

    def __init__(
        self,
        topic: str,
        key_kind: int,
        value_kind: int,
        partition_count: Callable[[str], int],
        collector: Any,
        fallback: Callable[[Any], None],
    ) -> None: ...
