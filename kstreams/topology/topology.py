"""Topology: the Processor API builder of a stream processing application (Kafka's ``Topology``).

Add sources that read topics, processors that transform what their parents forward, sinks that
write topics, and state stores connected to processors. Every mistake is reported at once with a
``TopologyException`` naming the node and the fix. ``describe()`` shows the subtopologies in Kafka's
text format; ``build(application_id, config)`` resolves the topology into the ``TopologyPlan`` the
runtime executes.

For the DSL (``StreamsBuilder``), the topology also keeps:
- internal topics (``add_internal_topic``): repartition topics named unprefixed; sources and sinks
  use the unprefixed name, and ``build`` prefixes it with ``<application.id>-``. A source or sink
  whose topic is an internal topic is a repartition source or sink;
- co-partition groups (``copartition_sources``): sources whose topics must have equal partition
  counts because their records are joined;
- one name counter per topology (``new_name``, ``new_store_name``) generating Kafka's names such as
  ``KSTREAM-SOURCE-0000000000`` and ``KSTREAM-AGGREGATE-STATE-STORE-0000000003``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kstreams.errors import TopologyException
from kstreams.topology.description import TopologyDescription, describe_topology
from kstreams.topology.nodes import (
    InternalTopicProperties,
    NodeSpec,
    ProcessorNodeSpec,
    SinkNodeSpec,
    SourceNodeSpec,
)

if TYPE_CHECKING:
    from kstreams.state.store import StoreBuilder
    from kstreams.topology.plan import TopologyPlan

# TopologyDescription is re-exported: Kafka keeps it beside Topology.
__all__ = ["Topology", "TopologyDescription"]

logger = logging.getLogger(__name__)

_OFFSET_RESETS = ("earliest", "latest")


class Topology:
    """A directed acyclic graph of sources, processors and sinks, with state stores.

    Methods return the topology, so calls chain. Nodes must be added parents first; node names are
    unique across sources, processors and sinks; a topic is read by at most one source.
    """

    def __init__(self) -> None:
        self._nodes: dict[str, NodeSpec] = {}
        self._topic_sources: dict[str, str] = {}  # topic -> the source reading it
        self._store_builders: dict[str, StoreBuilder] = {}
        self._store_users: dict[str, dict[str, None]] = {}  # store -> processors (ordered set)
        self._internal_topics: dict[str, InternalTopicProperties] = {}
        self._copartition_groups: list[frozenset[str]] = []
        self._index = 0
        # Global stores (add_global_store): store name -> (source, update processor) feeding it.
        self._global_stores: dict[str, tuple[str, str]] = {}

    # ------------------------------------------------------------------ nodes

    def add_source(
        self,
        name: str,
        *topics: str | re.Pattern[str],
        key_deserializer: Any = None,
        value_deserializer: Any = None,
        offset_reset: str | None = None,
        timestamp_extractor: Any = None,
    ) -> Topology:
        """Add a source reading ``topics``, or every topic whose whole name matches one compiled
        pattern (``add_source(name, re.compile("orders-.*"))``, Kafka's pattern source).

        A deserializer is any object with ``deserialize(topic, data)`` (a ``Serde`` works); None
        means the ``default.key.serde``/``default.value.serde`` of the config given to ``build``.
        ``offset_reset`` ("earliest" or "latest") overrides ``auto.offset.reset`` for these topics.
        ``timestamp_extractor`` is ``extract(record, partition_time) -> int`` (a callable or an
        object with that method); ``record`` is the deserialized ``Record`` carrying the log
        timestamp. Records it gives a negative timestamp are skipped with a warning, as in Kafka.
        """
        self._check_new_name(name, "source")
        if not topics:
            raise TopologyException(
                f"Source {name} has no topics: pass at least one topic name, "
                f"e.g. add_source({name!r}, 'input-topic')."
            )
        pattern = self._source_pattern(name, topics)
        for topic in () if pattern is not None else topics:
            if not isinstance(topic, str) or not topic:
                raise TopologyException(
                    f"Source {name} has an invalid topic name {topic!r}: use a non-empty str."
                )
            owner = self._topic_sources.get(topic)
            if owner is not None or topics.count(topic) > 1:
                raise TopologyException(
                    f"Topic {topic} has already been registered by another source"
                    f" ({owner or name}); source {name} cannot read it too. Read each topic with one "
                    "source and give that source several children instead."
                )
            for other in self._nodes.values():
                if isinstance(other, SourceNodeSpec) and other.pattern and other.pattern.fullmatch(topic):
                    raise TopologyException(
                        f"Topic {topic} of source {name} matches the pattern {other.pattern.pattern} of "
                        f"source {other.name}: a topic is read by one source only. Narrow the pattern or "
                        "read the topic through that source."
                    )
        if offset_reset is not None:
            offset_reset = str(getattr(offset_reset, "value", offset_reset)).lower()
            if offset_reset not in _OFFSET_RESETS:
                raise TopologyException(
                    f"Source {name} has offset_reset={offset_reset!r}: use 'earliest', 'latest' or None."
                )
        for role, deserializer in (
            ("key_deserializer", key_deserializer),
            ("value_deserializer", value_deserializer),
        ):
            if deserializer is not None and not callable(getattr(deserializer, "deserialize", None)):
                raise TopologyException(
                    f"Source {name} has a {role} without a deserialize(topic, data) method: "
                    "pass a Serde such as Serdes.string(), or None for the default serde."
                )
        if timestamp_extractor is not None and not (
            callable(timestamp_extractor) or callable(getattr(timestamp_extractor, "extract", None))
        ):
            raise TopologyException(
                f"Source {name} has a timestamp_extractor that is neither callable nor has "
                "extract(record, partition_time): pass one of those."
            )
        if pattern is not None:
            self._nodes[name] = SourceNodeSpec(
                name, (), key_deserializer, value_deserializer, offset_reset, timestamp_extractor, pattern
            )
            return self
        self._nodes[name] = SourceNodeSpec(
            name,
            tuple(topics),  # type: ignore[arg-type]  # only str left: a pattern returned above
            key_deserializer,
            value_deserializer,
            offset_reset,
            timestamp_extractor,
        )
        for topic in topics:
            self._topic_sources[topic] = name  # type: ignore[index]
        return self

    def _source_pattern(self, name: str, topics: tuple[str | re.Pattern[str], ...]) -> re.Pattern[str] | None:
        """The pattern of a pattern source (None for topic names), checked against the topics and
        patterns other sources already read."""
        patterns = [t for t in topics if isinstance(t, re.Pattern)]
        if not patterns:
            return None
        if len(topics) > 1:
            raise TopologyException(
                f"Source {name} mixes a pattern with other topics or patterns: a pattern source takes "
                "exactly one compiled pattern (join alternatives with |, e.g. re.compile('a|b'))."
            )
        pattern = patterns[0]
        if not isinstance(pattern.pattern, str):
            raise TopologyException(f"Source {name} has a bytes pattern: compile the pattern from a str.")
        for topic, owner in self._topic_sources.items():
            if pattern.fullmatch(topic):
                raise TopologyException(
                    f"Pattern {pattern.pattern} of source {name} matches topic {topic}, already "
                    f"registered by source {owner}: a topic is read by one source only."
                )
        return pattern

    def add_processor(self, name: str, supplier: Callable[[], Any], *parent_names: str) -> Topology:
        """Add a processor; ``supplier`` is a zero-argument callable (a Processor subclass works)
        returning a new ``Processor`` each call: every task gets its own instance.

        A supplier with a ``stores()`` method (Kafka's ConnectedStoreProvider) has the store
        builders it returns added and connected to this processor.
        """
        self._check_new_name(name, "processor")
        from kstreams.processor import Processor

        if isinstance(supplier, Processor) or not callable(supplier):
            raise TopologyException(
                f"Processor {name} was given {supplier!r} instead of a supplier: pass a zero-argument "
                "callable that returns a new Processor for each task (the Processor class itself, or "
                "a lambda creating one); one instance cannot be shared between tasks."
            )
        self._check_parents(name, "Processor", parent_names)
        self._nodes[name] = ProcessorNodeSpec(name, supplier, tuple(parent_names))
        connected = getattr(supplier, "stores", None)
        if callable(connected) and not isinstance(supplier, type):
            for builder in connected() or ():
                self.add_state_store(builder, name)
        return self

    def add_sink(
        self,
        name: str,
        topic_or_extractor: Any,
        *parent_names: str,
        key_serializer: Any = None,
        value_serializer: Any = None,
        partitioner: Any = None,
    ) -> Topology:
        """Add a sink writing to a topic, or to the topic ``extractor(key, value, record_metadata)``
        (a callable or an object with ``extract``) returns for each record.

        A serializer is any object with ``serialize(topic, data)``; None means the default serde.
        ``partitioner(topic, key, value, num_partitions) -> int | None`` (a callable or an object
        with ``partition``) picks the partition; None (or a None result) means the default: Kafka's
        murmur2 hash of the serialized key, and round robin for null keys.
        """
        self._check_new_name(name, "sink")
        if isinstance(topic_or_extractor, str):
            if not topic_or_extractor:
                raise TopologyException(f"Sink {name} has an empty topic name: give the topic to write to.")
            topic, extractor = topic_or_extractor, None
        elif callable(topic_or_extractor) or callable(getattr(topic_or_extractor, "extract", None)):
            topic, extractor = None, topic_or_extractor
        else:
            raise TopologyException(
                f"Sink {name} was given {topic_or_extractor!r} as its topic: pass a topic name or a "
                "topic name extractor (key, value, record_metadata) -> topic."
            )
        for role, serializer in (("key_serializer", key_serializer), ("value_serializer", value_serializer)):
            if serializer is not None and not callable(getattr(serializer, "serialize", None)):
                raise TopologyException(
                    f"Sink {name} has a {role} without a serialize(topic, data) method: "
                    "pass a Serde such as Serdes.string(), or None for the default serde."
                )
        if partitioner is not None and not (
            callable(partitioner) or callable(getattr(partitioner, "partition", None))
        ):
            raise TopologyException(
                f"Sink {name} has a partitioner that is neither callable nor has "
                "partition(topic, key, value, num_partitions): pass one of those."
            )
        self._check_parents(name, "Sink", parent_names)
        self._nodes[name] = SinkNodeSpec(
            name, tuple(parent_names), topic, extractor, key_serializer, value_serializer, partitioner
        )
        return self

    # ---------------------------------------------------------- global stores

    def add_global_store(
        self,
        store_builder: StoreBuilder,
        source_name: str,
        key_deserializer: Any,
        value_deserializer: Any,
        topic: str,
        processor_name: str,
        state_update_supplier: Callable[[], Any],
        *,
        timestamp_extractor: Any = None,
    ) -> Topology:
        """Add a global store (Kafka's ``addGlobalStore``): every client holds all of it, fed from
        every partition of ``topic`` by a source ``source_name`` and the processor
        ``processor_name`` that ``state_update_supplier`` makes, which writes the records it wants
        into the store (and forwards nothing).

        The store is not logged: ``topic`` is its changelog, and each client bootstraps it from
        there before it runs. Any processor of the topology may read it with
        ``context.get_state_store(name)`` without being connected to it; it is queryable with
        ``KafkaStreams.store(name)``. Its source and processor form a subtopology of their own,
        which ``describe()`` prints as ``Sub-topology: N for global store (will not generate
        tasks)``.
        """
        name = getattr(store_builder, "name", None)
        if not isinstance(name, str) or not callable(getattr(store_builder, "build", None)):
            raise TopologyException(
                f"{store_builder!r} is not a StoreBuilder: build one with kstreams.state.Stores "
                "(or implement kstreams.state.store.StoreBuilder)."
            )
        if getattr(store_builder, "logging_enabled", False):
            raise TopologyException(
                f"StateStore {name} for global table must not have logging enabled: its source topic "
                f"{topic!r} is its changelog. Build it with .with_logging_disabled()."
            )
        if name in self._store_builders:
            raise TopologyException(
                f"A StateStore named {name} is already added: give the global store a unique name."
            )
        if not isinstance(topic, str) or not topic:
            raise TopologyException(
                f"Global store {name} needs one non-empty source topic name, got {topic!r}."
            )
        self.add_source(
            source_name,
            topic,
            key_deserializer=key_deserializer,
            value_deserializer=value_deserializer,
            timestamp_extractor=timestamp_extractor,
        )
        try:
            self.add_processor(processor_name, state_update_supplier, source_name)
        except TopologyException:
            del self._nodes[source_name]
            del self._topic_sources[topic]
            raise
        # The global thread is the store's only writer while stream threads read it; a record
        # cache in between would be a second, unsynchronized copy of its rows.
        store_builder.with_caching_disabled()
        self.add_state_store(store_builder, processor_name)
        self._global_stores[name] = (source_name, processor_name)
        return self

    @property
    def global_stores(self) -> Mapping[str, tuple[str, str]]:
        """Global store name -> (its source node, its update processor)."""
        return self._global_stores

    @property
    def global_node_names(self) -> frozenset[str]:
        """The sources and update processors of the global stores."""
        return frozenset(n for pair in self._global_stores.values() for n in pair)

    @property
    def has_pattern_sources(self) -> bool:
        return any(isinstance(s, SourceNodeSpec) and s.pattern is not None for s in self._nodes.values())

    # ----------------------------------------------------------------- stores

    def add_state_store(self, store_builder: StoreBuilder, *processor_names: str) -> Topology:
        """Add a store (one instance per task, built by ``store_builder``) and connect it to the
        named processors. Adding the same builder again only connects more processors."""
        name = getattr(store_builder, "name", None)
        if not isinstance(name, str) or not callable(getattr(store_builder, "build", None)):
            raise TopologyException(
                f"{store_builder!r} is not a StoreBuilder: build one with kstreams.state.Stores "
                "(or implement kstreams.state.store.StoreBuilder)."
            )
        existing = self._store_builders.get(name)
        if name in self._global_stores and processor_names:
            raise TopologyException(
                f"StateStore {name} is a global store: it cannot be connected to processors (every "
                "processor reads it with context.get_state_store without connecting)."
            )
        if existing is not None and existing is not store_builder:
            raise TopologyException(
                f"A different StateStore has already been added with the name {name}: give each "
                "store a unique name, or connect the existing one with connect_processor_and_state_stores."
            )
        self._store_builders[name] = store_builder
        self._store_users.setdefault(name, {})
        for processor_name in processor_names:
            self._connect(processor_name, name)
        return self

    def connect_processor_and_state_stores(self, processor_name: str, *store_names: str) -> Topology:
        """Give a processor access to stores added with ``add_state_store``."""
        if not store_names:
            raise TopologyException(
                f"No store names given to connect to processor {processor_name}: name at least one store."
            )
        for store_name in store_names:
            if store_name in self._global_stores:
                raise TopologyException(
                    f"StateStore {store_name} is a global store: processor {processor_name} reads it "
                    "with context.get_state_store without connecting it."
                )
            self._connect(processor_name, store_name)
        return self

    def _connect(self, processor_name: str, store_name: str) -> None:
        if store_name not in self._store_builders:
            raise TopologyException(
                f"StateStore {store_name} is not added yet: add it with add_state_store(builder) before "
                f"connecting it to processor {processor_name}."
            )
        node = self._nodes.get(processor_name)
        if node is None:
            raise TopologyException(
                f"Processor {processor_name} is not added yet: add it with add_processor before "
                f"connecting store {store_name} to it."
            )
        if not isinstance(node, ProcessorNodeSpec):
            kind = "source" if isinstance(node, SourceNodeSpec) else "sink"
            raise TopologyException(
                f"cannot connect a state store {store_name} to a source node or a sink node "
                f"({processor_name} is a {kind}): connect it to a processor."
            )
        node.stores[store_name] = None
        self._store_users[store_name][processor_name] = None

    # -------------------------------------------------------- internal topics

    def add_internal_topic(
        self, name: str, partitions: int | None = None, config: Mapping[str, str] | None = None
    ) -> Topology:
        """Declare an internal (repartition) topic, named without the application id prefix.

        Sources and sinks refer to it by this unprefixed name; ``build`` resolves it to
        ``<application.id>-<name>``. ``partitions`` fixes its partition count (None: computed
        from the writing subtopology's sources); ``config`` holds topic configs it needs.
        """
        if not isinstance(name, str) or not name:
            raise TopologyException(f"Internal topic name {name!r} is invalid: use a non-empty str.")
        if partitions is not None and (not isinstance(partitions, int) or partitions < 1):
            raise TopologyException(
                f"Internal topic {name} has partitions={partitions!r}: use a positive int, or None to "
                "let the application compute it."
            )
        self._internal_topics[name] = InternalTopicProperties(
            partitions, {k: str(v) for k, v in (config or {}).items()}
        )
        return self

    def copartition_sources(self, *source_names: str) -> Topology:
        """Declare that the topics of these sources must be co-partitioned (their records are
        joined by key). Groups sharing a topic merge when the plan is built."""
        for source_name in source_names:
            if not isinstance(self._nodes.get(source_name), SourceNodeSpec):
                raise TopologyException(
                    f"Cannot co-partition {source_name}: it is not a source of this topology. Name "
                    "the sources whose topics are joined."
                )
        if source_names:
            self._copartition_groups.append(frozenset(source_names))
        return self

    # ----------------------------------------------------------------- naming

    def new_name(self, prefix: str) -> str:
        """A generated node name: ``prefix`` + a 10-digit index, e.g. ``KSTREAM-SOURCE-0000000000``.
        Nodes and stores share one counter per topology, as in Kafka."""
        name = f"{prefix}{self._index:010d}"
        self._index += 1
        return name

    def new_store_name(self, prefix: str) -> str:
        """A generated store name, e.g. ``KSTREAM-AGGREGATE-STATE-STORE-0000000003``."""
        name = f"{prefix}STATE-STORE-{self._index:010d}"
        self._index += 1
        return name

    # ----------------------------------------------------------- introspection

    @property
    def nodes(self) -> Mapping[str, NodeSpec]:
        """Every node by name, in the order added."""
        return self._nodes

    @property
    def store_builders(self) -> Mapping[str, StoreBuilder]:
        return self._store_builders

    @property
    def store_users(self) -> Mapping[str, tuple[str, ...]]:
        """Store name -> the processors connected to it."""
        return {store: tuple(users) for store, users in self._store_users.items()}

    @property
    def internal_topics(self) -> Mapping[str, InternalTopicProperties]:
        return self._internal_topics

    @property
    def copartition_groups(self) -> tuple[frozenset[str], ...]:
        """Groups of source node names declared with ``copartition_sources``."""
        return tuple(self._copartition_groups)

    # ------------------------------------------------------ describe and build

    def describe(self) -> TopologyDescription:
        """The subtopologies and their nodes; ``str()`` of it prints Kafka's text format."""
        return describe_topology(self)

    def build(
        self,
        application_id: str,
        config: Mapping[str, Any] | None = None,
        topics: Iterable[str] | None = None,
    ) -> TopologyPlan:
        """Resolve the topology for one application: numbered subtopologies, prefixed internal
        topic names, changelog topics, co-partition groups, and a graph factory per subtopology.

        ``config`` (a StreamsConfig or a plain mapping) supplies the default serdes used where a
        source or sink has none, and ``statestore.cache.max.bytes``: 0 turns store caching off.
        ``topics`` are the topics that exist: a pattern source reads those its pattern matches
        (internal topics excluded); None matches none yet.
        """
        from kstreams.topology.builder import build_plan

        return build_plan(self, application_id, config, topics)

    def __str__(self) -> str:
        return str(self.describe())

    # ------------------------------------------------------------- validation

    def _check_new_name(self, name: str, kind: str) -> None:
        if not isinstance(name, str) or not name:
            raise TopologyException(f"A {kind} needs a non-empty str name, got {name!r}.")
        if name in self._nodes:
            raise TopologyException(
                f"Processor {name} is already added: every source, processor and sink needs a unique name."
            )

    def _check_parents(self, name: str, kind: str, parent_names: tuple[str, ...]) -> None:
        if not parent_names:
            raise TopologyException(
                f"{kind} {name} must have at least one parent: name the source or processor it reads from."
            )
        for parent in parent_names:
            if parent == name:
                raise TopologyException(f"Processor {name} cannot be a predecessor of itself.")
            node = self._nodes.get(parent)
            if node is None:
                raise TopologyException(
                    f"Predecessor processor {parent} is not added yet for {name}: add {parent} before {name}."
                )
            if isinstance(node, SinkNodeSpec):
                raise TopologyException(
                    f"Sink {parent} cannot be used a parent of {name}: a sink has no children. Use the "
                    f"processor feeding {parent} as the parent instead."
                )
