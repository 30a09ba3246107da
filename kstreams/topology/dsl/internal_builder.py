"""What every DSL object shares: the topology being built, the name counter, and the steps that
several operations need (repartitioning, store attachment, co-partitioning).

The DSL writes straight into the Processor API ``Topology`` as operations are called; nothing is
deferred except the materialization of source tables, whose stores are added only when a join,
a query name or a downstream need asks for them.
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


class InternalStreamsBuilder:
    """The builder behind ``StreamsBuilder`` and every KStream/KTable it made."""

    def __init__(self, topology: Any) -> None:
        self.topology = topology

    # --- names: the topology's one counter, shared by processors and stores ------------------

    def new_processor_name(self, prefix: str) -> str:
        return self.topology.new_name(prefix)  # type: ignore[no-any-return]

    def new_store_name(self, prefix: str) -> str:
        return self.topology.new_store_name(prefix)  # type: ignore[no-any-return]

    def name_or_generate(self, name: str | None, prefix: str) -> str:
        """The user's name if given (no index used), else a generated one."""
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
        self.topology.add_state_store(store_builder, *processor_names)

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
        sink = self.new_processor_name(naming.SINK)
        null_key_filter = self.new_processor_name(naming.FILTER)
        source = self.new_processor_name(naming.SOURCE)
        if not naming.is_generated(topic_prefix):
            sink, null_key_filter, source = f"{topic}-sink", f"{topic}-filter", f"{topic}-source"
        self.topology.add_internal_topic(topic, partitions=partitions)
        self.add_processor(null_key_filter, FilterSupplier(_key_not_null), parent)
        self.add_sink(sink, topic, null_key_filter, key_serde, value_serde, partitioner)
        self.add_source(source, (topic,), key_serde, value_serde)
        logger.debug("Repartition topic %s inserted after %s.", topic, parent)
        return source
