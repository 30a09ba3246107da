"""What every DSL object shares: the topology being built, the name counter, and the steps that
several operations need (repartitioning, store attachment, co-partitioning).

The DSL writes straight into the Processor API ``Topology`` as operations are called; nothing is
deferred except the materialization of source tables, whose stores are added only when a join,
a query name or a downstream need asks for them, and the null-key filter of a repartition, which
a later join may relax (``relax_null_keys``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from kstreams.topology.dsl import naming
from kstreams.topology.dsl.processors.stateless import FilterSupplier

__all__ = ["InternalStreamsBuilder"]

logger = logging.getLogger(__name__)


def _key_not_null(key: Any, value: Any) -> bool:
    return key is not None


def _any_key(key: Any, value: Any) -> bool:
    return True


class InternalStreamsBuilder:
    """The builder behind ``StreamsBuilder`` and every KStream/KTable it made."""

    def __init__(self, topology: Any, dsl_store_suppliers: Any = None) -> None:
        self.topology = topology
        # The builder's TopologyConfig's DslStoreSuppliers (None: the client's config or RocksDB
        # decides), given to each store the DSL makes with the default.
        self.dsl_store_suppliers = dsl_store_suppliers
        # The source of each repartition topic -> the filter node and supplier in front of its sink.
        self._repartition_filters: dict[str, tuple[str, FilterSupplier]] = {}

    # --- names: the topology's one counter, shared by processors and stores ------------------

    def new_processor_name(self, prefix: str) -> str:
        return self.topology.new_name(prefix)  # type: ignore[no-any-return]

    def new_store_name(self, prefix: str) -> str:
        return self.topology.new_store_name(prefix)  # type: ignore[no-any-return]

    def name_or_generate(self, name: str | None, prefix: str) -> str:
        """The user's name if given, else a generated one. As Kafka's operations name their nodes
        (``NamedInternal.orElseGenerateWithPrefix``), a given name still draws its index, so the
        names generated after it do not depend on whether it was given."""
        generated = self.new_processor_name(prefix)
        return name if name is not None else generated

    def suffixed_or_generate(self, base: str | None, suffix: str, prefix: str) -> str:
        """``base + suffix`` when an operation is named ``base``, else a generated name; the index
        is drawn either way (Kafka's ``NamedInternal.suffixWithOrElseGet``)."""
        generated = self.new_processor_name(prefix)
        return generated if base is None else base + suffix

    def name_or_new(self, name: str | None, prefix: str) -> str:
        """The user's name if given, drawing no index (as Kafka's ``process``, ``processValues``
        and ``suppress`` do), else a generated one."""
        return name if name is not None else self.new_processor_name(prefix)

    # --- topology writes -------------------------------------------------------------------

    def add_source(
        self,
        name: str,
        topics: Iterable[str],
        key_serde: Any,
        value_serde: Any,
        offset_reset: str | None = None,
        timestamp_extractor: Any = None,
    ) -> None:
        kwargs: dict[str, Any] = {
            "key_deserializer": key_serde,
            "value_deserializer": value_serde,
            "offset_reset": offset_reset,
        }
        if timestamp_extractor is not None:
            kwargs["timestamp_extractor"] = timestamp_extractor
        self.topology.add_source(name, *topics, **kwargs)

    def add_processor(self, name: str, supplier: Any, *parents: str) -> None:
        self.topology.add_processor(name, supplier, *parents)

    def add_sink(
        self, name: str, topic: Any, parent: str, key_serde: Any, value_serde: Any, partitioner: Any = None
    ) -> None:
        self.topology.add_sink(
            name,
            topic,
            parent,
            key_serializer=key_serde,
            value_serializer=value_serde,
            partitioner=partitioner,
        )

    def add_store(self, store_builder: Any, *processor_names: str) -> None:
        self.topology.add_state_store(self.with_dsl_store_suppliers(store_builder), *processor_names)

    def with_dsl_store_suppliers(self, store_builder: Any) -> Any:
        """``store_builder``, its supplier made by the builder's DSL store suppliers when the DSL
        made it with the default and the builder has a TopologyConfig that names a set."""
        if self.dsl_store_suppliers is not None:
            from kstreams.state.dsl_store_suppliers import apply_dsl_store_suppliers

            apply_dsl_store_suppliers(store_builder, self.dsl_store_suppliers)
        return store_builder

    def connect_stores(self, processor_name: str, store_names: Iterable[str]) -> None:
        names = tuple(store_names)
        if names:
            self.topology.connect_processor_and_state_stores(processor_name, *names)

    def copartition(self, source_names: Iterable[str]) -> None:
        """Ask that the topics of these source nodes have equal partition counts (joins)."""
        names = sorted(set(source_names))
        if names:
            self.topology.copartition_sources(*names)

    # --- repartitioning --------------------------------------------------------------------

    def draw_repartition_names(self) -> tuple[str, str, str]:
        """The generated names of a repartition's sink, null-key filter and source, in the order
        Kafka draws them. Called alone where Kafka draws them for a repartition it then does not
        add (it reuses one), so that the names generated after it are Kafka's."""
        sink = self.new_processor_name(naming.SINK)
        null_key_filter = self.new_processor_name(naming.FILTER)
        source = self.new_processor_name(naming.SOURCE)
        return sink, null_key_filter, source

    def repartition(
        self,
        parent: str,
        topic_prefix: str,
        key_serde: Any,
        value_serde: Any,
        partitions: int | None = None,
        partitioner: Any = None,
    ) -> str:
        """Insert a repartition topic after ``parent``: a null-key filter and a sink writing the
        topic, and a new source reading it (the start of a new subtopology). Returns the source.
        The filter drops records with a null key unless a join that keeps them is added
        downstream later (``relax_null_keys``).

        The topic is ``<topic_prefix>-repartition`` (the topology prefixes the application id).
        Node names are generated when the prefix itself was generated, else derived from the
        topic ("<topic>-filter", "<topic>-sink", "<topic>-source"), as in Kafka.
        """
        if topic_prefix.endswith(naming.REPARTITION_SUFFIX):
            topic = topic_prefix
        else:
            topic = topic_prefix + naming.REPARTITION_SUFFIX
        # Kafka always draws the three indexes, so later generated names do not depend on
        # whether the repartition was named.
        sink, null_key_filter, source = self.draw_repartition_names()
        if not naming.is_generated(topic_prefix):
            sink, null_key_filter, source = f"{topic}-sink", f"{topic}-filter", f"{topic}-source"
        self.topology.add_internal_topic(topic, partitions=partitions)
        key_filter = FilterSupplier(_key_not_null)
        self.add_processor(null_key_filter, key_filter, parent)
        self.add_sink(sink, topic, null_key_filter, key_serde, value_serde, partitioner)
        self.add_source(source, (topic,), key_serde, value_serde)
        self._repartition_filters[source] = (null_key_filter, key_filter)
        logger.debug("Repartition topic %s inserted after %s.", topic, parent)
        return source

    def relax_null_keys(self, *node_names: str) -> None:
        """Let records with a null key through every repartition upstream of these nodes: the
        inputs of a join that joins such records (a stream-table or stream-global left join, a
        stream-stream left or outer join; KIP-962).

        As Kafka's ``NodesWithRelaxedNullKeyJoinDownstream``: a repartition keeps its null-key
        filter only when no such join is anywhere downstream of it; one that has one forwards
        every record, and the processors after it (aggregations, table sources, inner joins)
        drop null keys themselves where Kafka's do. The walk goes up the processors' parents and
        across repartition topics to the nodes writing them.
        """
        nodes = self.topology.nodes
        pending, seen = list(node_names), set()
        while pending:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            relaxed = self._repartition_filters.get(name)
            if relaxed is not None:
                filter_name, key_filter = relaxed
                key_filter.predicate = _any_key
                pending.append(filter_name)
            pending.extend(nodes[name].predecessors)
