"""ProcessorGraph: one task's running instance of a subtopology.

``GraphTemplate`` (made by ``Topology.build``) holds a subtopology's resolved nodes; each call of
``create()`` makes a ``ProcessorGraph`` with new ``Processor`` instances (one supplier call per
processor) and new, unopened stores (one ``StoreBuilder.build()`` per store). The task binds the
graph to its context and record collector, opens the stores and runs records through it.

Routing: a record enters at the source of its topic; ``ProcessorContext.forward`` hands it to
every child of the current node, or to one child by name. Every node has a ``process(record)``
attribute: for processor nodes it is the user processor's bound ``process`` (no wrapper call on
the hot path), for sinks their ``send_record`` or, with a fixed topic, the default partitioner
and built-in serializers, a C ``SinkSender`` that hands it any record it cannot send the same way.

Sinks serialize the record and choose its partition: the sink's partitioner when it has one and
it returns a partition (or a collection of partitions: the record goes to each, KIP-837's
multicast; an empty collection drops it); otherwise Kafka's default partitioner (murmur2 of the
serialized key) for non-null keys. Null-key records go round robin over the topic's partitions,
starting at the task's partition so that tasks spread their null-key records instead of all
starting at partition 0 (the Java producer's sticky partitioner also spreads them, batch by batch;
exact placement of null-key records is unspecified in Kafka too).

A sink with a fixed topic and the default partitioner also takes whole batches (``send_batch``,
``send_serialized``) from the compiled path, with the same partitioning.
"""

from __future__ import annotations

import logging
import struct
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kstreams._native import kernels
from kstreams._native.per_record import SERIAL_BYTES, SERIAL_LONG, SERIAL_STRING, NodeBase, SinkSender
from kstreams._native.record_batch import RecordBatch, default_partition
from kstreams._native.record_collector import RecordCollector
from kstreams.errors import ConfigException, StreamsException
from kstreams.serdes import BytesSerde, IntegerSerde, LongSerde, ShortSerde, StringSerde

if TYPE_CHECKING:
    from kstreams.state.store import StateStore, StoreBuilder

__all__ = [
    "GraphTemplate",
    "ProcessorGraph",
    "ProcessorNode",
    "SinkNode",
    "SinkTemplate",
    "SourceNode",
    "SourceTemplate",
]

logger = logging.getLogger(__name__)


class _Node(NodeBase):
    """What every running node has: a name, its children, and ``process(record)`` (the fields are
    C: ``NodeBase``, which the per-record loops read without attribute lookups)."""

    __slots__ = ()

    def __init__(self, name: str) -> None:
        self.name = name
        self.children: list[Any] = []
        self.children_by_name: dict[str, Any] = {}

    def add_child(self, child: Any) -> None:
        self.children.append(child)
        self.children_by_name[child.name] = child

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class SourceNode(_Node):
    """Entry of the records of its topics; the task deserializes them with its deserializers."""

    __slots__ = ("key_deserializer", "timestamp_extractor", "topics", "value_deserializer")

    def __init__(
        self,
        name: str,
        topics: tuple[str, ...],
        key_deserializer: Any,
        value_deserializer: Any,
        timestamp_extractor: Callable[[Any, int], int] | None,
    ) -> None:
        super().__init__(name)
        self.topics = topics
        self.key_deserializer = key_deserializer
        self.value_deserializer = value_deserializer
        self.timestamp_extractor = timestamp_extractor

    def process(self, record: Any) -> None:
        raise StreamsException(f"Source {self.name} cannot be forwarded to: a source has no parents.")


class ProcessorNode(_Node):
    """A user ``Processor`` and the stores connected to it; ``supplier`` made the processor (the
    batch compiler reads what DSL suppliers compute from it)."""

    __slots__ = ("processor", "stores", "supplier")

    def __init__(self, name: str, processor: Any, stores: tuple[str, ...], supplier: Any = None) -> None:
        super().__init__(name)
        self.processor = processor
        self.stores = stores
        self.process = processor.process
        self.supplier = supplier


_INTEGRAL_SERDES = (LongSerde, IntegerSerde, ShortSerde)
# Serializers the C sender applies itself (exact types: a subclass may serialize otherwise).
_SERIAL_KINDS = {StringSerde: SERIAL_STRING, LongSerde: SERIAL_LONG, BytesSerde: SERIAL_BYTES}


def _serialize_column(serializer: Any, topic: str, column: list[Any]) -> list[bytes | None]:
    """``serializer.serialize(topic, x)`` of every ``x`` in the column. The string serde of a
    column of str is ``str.encode`` mapped from C, and an integer serde of a column of int its
    ``struct`` packing, without a Python call per record; anything else (a null, a value of another
    type, a number out of range) goes through the serializer, which decides or fails."""
    kind = type(serializer)
    if kind is StringSerde:
        try:
            return list(map(str.encode, column))
        except TypeError:
            pass
    elif kind in _INTEGRAL_SERDES and set(map(type, column)) == {int}:
        try:
            return list(map(serializer._format.pack, column))
        except struct.error:
            pass  # out of range: the serializer says so
    serialize = serializer.serialize
    return [serialize(topic, x) for x in column]


class SinkNode(_Node):
    """Serializes records and sends them to the record collector."""

    __slots__ = (
        "_collector",
        "_context",
        "_extract",
        "_key_serialize",
        "_next_round_robin",
        "_partition",
        "_partition_count",
        "_partitions_must_exist",
        "_value_serialize",
        "key_serializer",
        "on_serialization_error",
        "topic",
        "value_serializer",
    )

    def __init__(
        self,
        name: str,
        topic: str | None,
        topic_extractor: Any,
        key_serializer: Any,
        value_serializer: Any,
        partitioner: Any,
    ) -> None:
        super().__init__(name)
        self.topic = topic
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        self._key_serialize = key_serializer.serialize
        self._value_serialize = value_serializer.serialize
        self._extract = _as_function(topic_extractor, "extract")
        self._partition = _as_function(partitioner, "partition")
        self._collector: Any = None
        self._partition_count: Callable[[str], int] = _unbound_partition_count
        self._partitions_must_exist = True
        self._context: Any = None
        self._next_round_robin = 0
        # The production exception handler's say on a serializer failure (set by the task when one
        # is configured): ``(sink, record, exc, is_key) -> True`` drops the record and goes on.
        self.on_serialization_error: Callable[[str, Any, Exception, bool], bool] | None = None
        # ``process(record)``: the sink's own, or once bound a C sender that falls back to it.
        # (Its KIP-613 ``e2e_latency`` sensor, a NodeBase field, is recorded by the per-record
        # loops after ``process`` and by ``send_serialized`` for a batch.)
        self.process: Callable[[Any], None] = self.send_record

    def add_child(self, child: Any) -> None:
        raise StreamsException(f"Sink {self.name} cannot have children.")

    def bind(
        self,
        context: Any,
        collector: Any,
        partition_count: Callable[[str], int],
        task_partition: int,
        partitions_must_exist: bool = True,
    ) -> None:
        """Connect the sink to its task. ``partitions_must_exist`` False (the test driver) lets a
        partitioner name a partition past the topic's count, as Kafka's TopologyTestDriver writes
        to whatever partition it is given; on a cluster the partition must exist."""
        self._context = context
        self._collector = collector
        self._partition_count = partition_count
        self._partitions_must_exist = partitions_must_exist
        self._next_round_robin = task_partition
        # A fixed topic, the default partitioner and built-in serializers: C sends the record.
        key_kind = _SERIAL_KINDS.get(type(self.key_serializer))
        value_kind = _SERIAL_KINDS.get(type(self.value_serializer))
        self.process = self.send_record
        if (
            self.topic is not None
            and self._partition is None
            and key_kind is not None
            and value_kind is not None
            and isinstance(collector, RecordCollector)
        ):
            sender = SinkSender(
                self.topic, key_kind, value_kind, partition_count, collector, self.send_record
            )
            self.process = sender.process

    def send_record(self, record: Any) -> None:
        """Serialize ``record``, choose its partition and hand it to the record collector."""
        topic = self.topic
        if topic is None:
            topic = self._extract(record.key, record.value, self._context.record_metadata())  # type: ignore[misc]
            if not isinstance(topic, str) or not topic:
                raise StreamsException(
                    f"The topic name extractor of sink {self.name} returned {topic!r}: "
                    "it must return a topic name."
                )
        timestamp = record.timestamp
        if timestamp < 0:
            raise StreamsException(
                f"Invalid (negative) timestamp of {timestamp} for output record "
                f"<{record.key!r}:{record.value!r}> "
                f"at sink {self.name}: give the record a timestamp >= 0 with record.with_timestamp()."
            )
        try:
            key_bytes = self._key_serialize(topic, record.key)
        except Exception as exc:
            if self.on_serialization_error is not None and self.on_serialization_error(
                self.name, record, exc, True
            ):
                return
            raise self._serialization_error("key", self.key_serializer, topic, exc) from exc
        try:
            value_bytes = self._value_serialize(topic, record.value)
        except Exception as exc:
            if self.on_serialization_error is not None and self.on_serialization_error(
                self.name, record, exc, False
            ):
                return
            raise self._serialization_error("value", self.value_serializer, topic, exc) from exc
        num_partitions = self._partition_count(topic)
        partition = None
        if self._partition is not None:
            partition = self._partition(topic, record.key, record.value, num_partitions)
            if partition is not None and hasattr(partition, "__iter__"):
                # KIP-837 multicast: a collection of partitions (empty: the record is dropped)
                self._multicast(topic, partition, num_partitions, key_bytes, value_bytes, record)
                return
            if partition is not None and not self._valid_partition(partition, num_partitions):
                raise self._bad_partition(topic, partition, num_partitions)
        if partition is None:
            if key_bytes is not None:
                partition = default_partition(key_bytes, num_partitions)
            else:
                partition = self._next_round_robin % num_partitions
                self._next_round_robin = partition + 1
        self._collector.send(topic, partition, key_bytes, value_bytes, timestamp, record.headers)

    def _multicast(
        self,
        topic: str,
        partitions: Any,
        num_partitions: int,
        key_bytes: bytes | None,
        value_bytes: bytes | None,
        record: Any,
    ) -> None:
        try:
            chosen = sorted({int(p) for p in partitions})
        except (TypeError, ValueError):
            raise StreamsException(
                f"The partitioner of sink {self.name} returned {partitions!r} for topic {topic}: return a "
                "partition number, a collection of partition numbers, or None."
            ) from None
        for partition in chosen:
            if not self._valid_partition(partition, num_partitions):
                raise self._bad_partition(topic, partition, num_partitions)
            self._collector.send(topic, partition, key_bytes, value_bytes, record.timestamp, record.headers)

    @property
    def sends_batches(self) -> bool:
        """Whether the sink takes whole batches: its topic is fixed and it partitions by default."""
        return self.topic is not None and self._partition is None

    def send_batch(
        self,
        keys: list[Any],
        values: list[Any],
        timestamps: Any,
        offsets: Any,
        key_bytes: list[bytes | None] | None = None,
        headers_from: tuple[RecordBatch, Any] | None = None,
    ) -> None:
        """Serialize and send records given as columns (timestamps and offsets as int64 arrays),
        as ``process`` would one by one; ``key_bytes``, when given, are the keys already
        serialized; ``headers_from``, the batch the records came from and their indices in it
        (None: all), whose headers they carry. Only for a sink that ``sends_batches``."""
        topic = self._batch_topic()
        if key_bytes is None:
            try:
                key_bytes = _serialize_column(self.key_serializer, topic, keys)
            except Exception as exc:
                raise self._serialization_error("key", self.key_serializer, topic, exc) from exc
        try:
            value_bytes = _serialize_column(self.value_serializer, topic, values)
        except Exception as exc:
            raise self._serialization_error("value", self.value_serializer, topic, exc) from exc
        batch = RecordBatch.from_columns(key_bytes, value_bytes, timestamps, 0, offsets)
        if headers_from is not None:
            batch = kernels.carry_headers(batch, *headers_from)
        self.send_serialized(batch)

    def send_serialized(self, batch: RecordBatch) -> None:
        """Send a batch whose keys and values are already in the sink's serialized form, split by
        Kafka's default partitioner (null keys round robin). Only for a sink that ``sends_batches``."""
        topic = self._batch_topic()
        if self.e2e_latency is not None:
            self.e2e_latency.record_timestamps(batch.timestamps_array())
        parts, self._next_round_robin = kernels.split_partitions(
            batch, self._partition_count(topic), self._next_round_robin
        )
        send_batch = self._collector.send_batch
        for partition, part in parts:
            send_batch(topic, partition, part)

    def _batch_topic(self) -> str:
        if self.topic is None or self._partition is not None:
            raise StreamsException(
                f"Sink {self.name} cannot send batches: it has a topic name extractor or a partitioner, "
                "which choose per record."
            )
        return self.topic

    def _valid_partition(self, partition: int, num_partitions: int) -> bool:
        return 0 <= partition and (partition < num_partitions or not self._partitions_must_exist)

    def _bad_partition(self, topic: str, partition: int, num_partitions: int) -> StreamsException:
        return StreamsException(
            f"The partitioner of sink {self.name} chose partition {partition} of topic {topic}, which has "
            f"{num_partitions} partitions: return partitions in [0, {num_partitions}) or None."
        )

    def _serialization_error(
        self, what: str, serializer: Any, topic: str, exc: Exception
    ) -> StreamsException:
        return StreamsException(
            f"Sink {self.name} could not serialize the {what} of a record for topic {topic} with "
            f"{serializer!r}: {exc} Give the sink a {what} serializer that fits the data "
            f"(add_sink(..., {what}_serializer=...) or Produced), or change default.{what}.serde."
        )


def _unbound_partition_count(topic: str) -> int:
    raise StreamsException(f"The graph is not bound to a task: cannot look up the partitions of {topic}.")


def _as_function(target: Any, method: str) -> Any:
    """A user hook given as a plain callable or as an object with the named method."""
    if target is None:
        return None
    bound = getattr(target, method, None)
    return bound if callable(bound) else target


@dataclass(frozen=True)
class SourceTemplate:
    name: str
    topics: tuple[str, ...]  # resolved names
    key_deserializer: Any
    value_deserializer: Any
    timestamp_extractor: Any
    pattern: Any = None  # a pattern source's compiled regex: it also reads topics matched later


@dataclass(frozen=True)
class ProcessorTemplate:
    name: str
    supplier: Callable[[], Any]
    predecessors: tuple[str, ...]
    stores: tuple[str, ...]


@dataclass(frozen=True)
class SinkTemplate:
    name: str
    predecessors: tuple[str, ...]
    topic: str | None  # resolved name; None when an extractor picks it
    topic_extractor: Any
    key_serializer: Any
    value_serializer: Any
    partitioner: Any


@dataclass
class GraphTemplate:
    """A subtopology's resolved nodes, in the order they were added (parents before children)."""

    subtopology: int
    nodes: Sequence[SourceTemplate | ProcessorTemplate | SinkTemplate]
    store_builders: dict[str, StoreBuilder]  # the subtopology's stores, in first-use order
    _last_processors: dict[str, Any] = field(default_factory=dict, repr=False)

    def create(self) -> ProcessorGraph:
        """A fresh graph: new processors from the suppliers, new unopened stores."""
        graph = ProcessorGraph(self.subtopology)
        for spec in self.nodes:
            node: Any
            if isinstance(spec, SourceTemplate):
                node = SourceNode(
                    spec.name,
                    spec.topics,
                    _require_serde(spec.key_deserializer, spec.name, "key", "deserializer"),
                    _require_serde(spec.value_deserializer, spec.name, "value", "deserializer"),
                    _as_function(spec.timestamp_extractor, "extract"),
                )
                for topic in spec.topics:
                    graph.sources_by_topic[topic] = node
                if spec.pattern is not None:
                    graph.pattern_sources.append((spec.pattern, node))
            elif isinstance(spec, ProcessorTemplate):
                node = ProcessorNode(spec.name, self._new_processor(spec), spec.stores, spec.supplier)
                graph.processor_nodes.append(node)
            else:
                node = SinkNode(
                    spec.name,
                    spec.topic,
                    spec.topic_extractor,
                    _require_serde(spec.key_serializer, spec.name, "key", "serializer"),
                    _require_serde(spec.value_serializer, spec.name, "value", "serializer"),
                    spec.partitioner,
                )
                graph.sink_nodes.append(node)
            graph.nodes[spec.name] = node
            if not isinstance(spec, SourceTemplate):
                for parent in spec.predecessors:
                    graph.nodes[parent].add_child(node)
        for store_name, builder in self.store_builders.items():
            store = builder.build()
            if getattr(store, "name", store_name) != store_name:
                raise StreamsException(
                    f"Store builder {store_name} built a store named {store.name!r}: a builder must "
                    "build stores with its own name."
                )
            graph.stores[store_name] = store
        return graph

    def _new_processor(self, spec: ProcessorTemplate) -> Any:
        try:
            processor = spec.supplier()
        except Exception as exc:
            raise StreamsException(f"The supplier of processor {spec.name} failed: {exc!r}") from exc
        if not callable(getattr(processor, "process", None)):
            raise StreamsException(
                f"The supplier of processor {spec.name} returned {processor!r}, which has no process(record) "
                "method: return a kstreams.processor.Processor."
            )
        previous = self._last_processors.get(spec.name)
        if previous is not None and previous() is processor:
            raise StreamsException(
                f"The supplier of processor {spec.name} returned the same Processor object twice: it must "
                "return a new Processor object each time it is called (one per task)."
            )
        try:
            self._last_processors[spec.name] = weakref.ref(processor)
        except TypeError:
            pass  # a processor class with __slots__ and no __weakref__: cannot check, nothing to keep
        return processor


def _require_serde(serde: Any, node: str, what: str, role: str) -> Any:
    if serde is None:
        kind = "Source" if role == "deserializer" else "Sink"
        raise ConfigException(
            f"{kind} {node} has no {what} {role} and default.{what}.serde is not set: pass "
            f"{what}_{role}=... for {node} (Consumed/Produced in the DSL), or set default.{what}.serde "
            "in the config (e.g. 'string')."
        )
    return serde


class ProcessorGraph:
    """The nodes and stores of one task, with the routing between them.

    ``nodes`` is in the order the topology added them (parents before children), which is the
    order processors are initialized and closed in, as in Kafka.
    """

    def __init__(self, subtopology: int) -> None:
        self.subtopology = subtopology
        self.nodes: dict[str, Any] = {}
        self.sources_by_topic: dict[str, SourceNode] = {}
        # (regex, source) of pattern sources, for topics that matched after the plan was built
        self.pattern_sources: list[tuple[Any, SourceNode]] = []
        self.processor_nodes: list[ProcessorNode] = []
        self.sink_nodes: list[SinkNode] = []
        self.stores: dict[str, StateStore] = {}

    def bind(
        self,
        context: Any,
        collector: Any,
        partition_count: Callable[[str], int],
        task_partition: int,
        partitions_must_exist: bool = True,
    ) -> None:
        """Connect the sinks to the task's context, record collector and partition counts (see
        ``SinkNode.bind`` for ``partitions_must_exist``)."""
        for sink in self.sink_nodes:
            sink.bind(context, collector, partition_count, task_partition, partitions_must_exist)

    def source_for(self, topic: str) -> SourceNode:
        source = self.sources_by_topic.get(topic)
        if source is None:
            for pattern, candidate in self.pattern_sources:
                if pattern.fullmatch(topic):
                    source = self.sources_by_topic[topic] = candidate
                    return source
            raise StreamsException(
                f"Subtopology {self.subtopology} has no source for topic {topic}: it reads "
                f"{sorted(self.sources_by_topic)}."
            )
        return source

    def node(self, name: str) -> Any:
        return self.nodes[name]

    def __repr__(self) -> str:
        return f"ProcessorGraph(subtopology={self.subtopology}, nodes={list(self.nodes)})"
