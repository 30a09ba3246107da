"""StreamsBuilder: the entry point of the DSL.

``stream`` and ``table`` read topics; the KStream/KTable operations build on them; ``build()``
returns the Processor API ``Topology`` they wrote, which ``KafkaStreams`` runs and ``describe()``
prints with Kafka's node names.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from kstreams.state.store import StoreBuilder
from kstreams.topology.dsl import naming
from kstreams.topology.dsl.global_ktable import GlobalKTable, global_table
from kstreams.topology.dsl.internal_builder import InternalStreamsBuilder
from kstreams.topology.dsl.kstream import KStream
from kstreams.topology.dsl.ktable import KTable, updates_table
from kstreams.topology.dsl.parameters import Consumed, Materialized, consumed_and_materialized

__all__ = ["StreamsBuilder"]

logger = logging.getLogger(__name__)


def _new_topology() -> Any:
    from kstreams.topology.topology import Topology

    return Topology()


class StreamsBuilder:
    """Builds a topology with the DSL. One builder makes one topology."""

    def __init__(self, topology_config: Any = None) -> None:
        """``StreamsBuilder()``, or ``StreamsBuilder(TopologyConfig(StreamsConfig(props)))`` to build
        with its DSL store choice (``default.dsl.store``, ``dsl.store.suppliers.class``)."""
        from kstreams.topology.topology_config import TopologyConfig

        if topology_config is not None and not isinstance(topology_config, TopologyConfig):
            raise TypeError(
                f"StreamsBuilder takes a TopologyConfig (or nothing), got {topology_config!r}: "
                "StreamsBuilder(TopologyConfig(StreamsConfig(props)))."
            )
        suppliers = None if topology_config is None else topology_config.resolve_dsl_store_suppliers()
        self._internal = InternalStreamsBuilder(_new_topology(), suppliers)

    def stream(
        self, topics: str | Iterable[str] | re.Pattern[str], consumed: Consumed | None = None
    ) -> KStream[Any, Any]:
        """A KStream of the records of one topic or several (read as one stream), or of every
        topic whose whole name matches a compiled pattern (``re.compile("orders-.*")``). Its key
        and value types are ``Any``: the serdes do not declare the types they produce."""
        topic_list: tuple[Any, ...]
        if isinstance(topics, re.Pattern):
            topic_list = (topics,)
        else:
            topic_list = (topics,) if isinstance(topics, str) else tuple(topics)
            if not topic_list or not all(isinstance(t, str) and t for t in topic_list):
                raise ValueError(
                    f"stream() needs one or more non-empty topic names or one re.Pattern, got {topics!r}."
                )
        if consumed is not None and not isinstance(consumed, Consumed):
            raise TypeError(f"stream() takes (topics[, Consumed]), got {consumed!r} where a Consumed goes.")
        consumed = consumed or Consumed()
        name = self._internal.name_or_generate(consumed.name, naming.SOURCE)
        self._internal.add_source(
            name,
            topic_list,
            consumed.key_serde,
            consumed.value_serde,
            consumed.offset_reset,
            consumed.timestamp_extractor,
        )
        return KStream(self._internal, name, consumed.key_serde, consumed.value_serde, False, (name,))

    def table(
        self,
        topic: str,
        consumed: Consumed | Materialized | None = None,
        materialized: Materialized | None = None,
    ) -> KTable[Any, Any]:
        """A KTable of a topic: each record is the new value of its key (None deletes the key).
        Takes Kafka's overloads: ``(topic[, Consumed][, Materialized])``.

        The table gets a store (with its own changelog) when ``materialized`` names one, or as
        soon as a join or lookup needs its values. Its key and value types are ``Any``, as for
        ``stream``.
        """
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"table() needs one non-empty topic name, got {topic!r}.")
        consumed, materialized = consumed_and_materialized(consumed, materialized, "table()")
        key_serde = consumed.key_serde if consumed.key_serde is not None else materialized.key_serde
        value_serde = consumed.value_serde if consumed.value_serde is not None else materialized.value_serde
        internal = self._internal
        # Kafka draws the store name first, so it gets the lowest index.
        store_name = materialized.store_name or internal.new_store_name(f"{topic}-")
        # As Kafka's table(): a Consumed name names the processor; its source is "<name>-source".
        source = internal.name_or_generate(_suffixed(consumed.name, "-source"), naming.SOURCE)
        table_source = internal.name_or_generate(consumed.name, naming.KTABLE_SOURCE)
        internal.add_source(
            source, (topic,), key_serde, value_serde, consumed.offset_reset, consumed.timestamp_extractor
        )
        return updates_table(
            internal, table_source, source, topic, store_name, materialized, key_serde, value_serde, (source,)
        )

    def add_state_store(self, store_builder: StoreBuilder) -> StreamsBuilder:
        """Add a store (built per task by ``store_builder``, e.g. from ``kstreams.state.Stores``)
        that ``process``, ``process_values`` and ``transform_values`` can then name to use it."""
        if not isinstance(store_builder, StoreBuilder):
            raise TypeError(
                f"add_state_store() takes a StoreBuilder (from kstreams.state.Stores, e.g. "
                f"Stores.key_value_store_builder(...)), got {store_builder!r}."
            )
        self._internal.add_store(store_builder)
        return self

    def global_table(
        self,
        topic: str,
        consumed: Consumed | Materialized | None = None,
        materialized: Materialized | None = None,
    ) -> GlobalKTable[Any, Any]:
        """A GlobalKTable of every partition of ``topic``, held in full by every client: a global
        store, bootstrapped from the topic before the client runs and kept current after. Join a
        stream with it without repartitioning (``KStream.join(table, key_selector, joiner)``);
        ``materialized`` may name the store to query it with ``KafkaStreams.store``. Takes Kafka's
        overloads: ``(topic[, Consumed][, Materialized])``."""
        consumed, materialized = consumed_and_materialized(consumed, materialized, "global_table()")
        return global_table(self._internal, topic, consumed, materialized)

    def build(self) -> Any:
        """The topology built so far (the same object on every call)."""
        return self._internal.topology


def _suffixed(name: str | None, suffix: str) -> str | None:
    return None if name is None else name + suffix
