"""GlobalKTable: a table every client holds in full, and the stream joins that look it up.

``StreamsBuilder.global_table(topic)`` adds a global store (``Topology.add_global_store``) fed by
a source over every partition of ``topic``: each client's global thread bootstraps the whole topic
into the store before the client runs, then keeps it current. The store is never logged (the
topic is its changelog) and is timestamped, as Kafka's. Names follow Kafka: the store name is
drawn first (``<topic>-STATE-STORE-0000000000``), then the source (``KSTREAM-SOURCE-``) and the
update processor (``KTABLE-SOURCE-``).

``KStream.join(global_table, key_selector, joiner)`` and ``left_join`` (built by
``stream_global_table_join``) look the table up with a key computed from each stream record, so
the stream is neither repartitioned nor co-partitioned with the table's topic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kstreams.topology.dsl import naming
from kstreams.topology.dsl.internal_builder import InternalStreamsBuilder
from kstreams.topology.dsl.materialize import key_value_store_builder
from kstreams.topology.dsl.parameters import Consumed, Materialized, Named
from kstreams.topology.dsl.processors.global_table import (
    GlobalTableSourceSupplier,
    StreamGlobalTableJoinSupplier,
)

if TYPE_CHECKING:
    from kstreams.topology.dsl.kstream import KStream

__all__ = ["GlobalKTable", "global_table", "stream_global_table_join"]

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")


class GlobalKTable(Generic[K, V]):
    """A table of all partitions of a topic, held by every client. Create one with
    ``StreamsBuilder.global_table``; join streams with it (``KStream.join``/``left_join``)."""

    def __init__(self, store_name: str, topic: str, queryable: bool) -> None:
        self._store_name = store_name
        self._topic = topic
        self._queryable = queryable

    @property
    def queryable_store_name(self) -> str | None:
        """The store's name when ``Materialized`` named it (Kafka's ``queryableStoreName``), else
        None. ``KafkaStreams.store`` queries it by that name."""
        return self._store_name if self._queryable else None

    @property
    def store_name(self) -> str:
        """The global store's name, generated or given."""
        return self._store_name

    def __repr__(self) -> str:
        return f"GlobalKTable({self._topic!r}, store={self._store_name!r})"


def global_table(
    builder: InternalStreamsBuilder, topic: str, consumed: Consumed, materialized: Materialized
) -> GlobalKTable[Any, Any]:
    """Add the global store, source and update processor of ``topic`` (see the module docstring)."""
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"global_table() needs one non-empty topic name, got {topic!r}.")
    if consumed.offset_reset is not None:
        # As in Kafka, a global table always reads its whole topic: the policy cannot apply.
        logger.warning(
            "global_table(%s) ignores the offset reset policy %r: a global table reads its topic "
            "from the beginning.",
            topic,
            consumed.offset_reset,
        )
    key_serde = consumed.key_serde if consumed.key_serde is not None else materialized.key_serde
    value_serde = consumed.value_serde if consumed.value_serde is not None else materialized.value_serde
    # Kafka draws the store name first, then the source and the processor names.
    store_name = materialized.store_name or builder.new_store_name(f"{topic}-")
    # As Kafka's globalTable(): a Consumed name names the processor; its source is "<name>-source".
    source = builder.name_or_generate(
        None if consumed.name is None else consumed.name + "-source", naming.SOURCE
    )
    processor = builder.name_or_generate(consumed.name, naming.KTABLE_SOURCE)
    store_key_serde = materialized.key_serde if materialized.key_serde is not None else key_serde
    store_value_serde = materialized.value_serde if materialized.value_serde is not None else value_serde
    # The topic is the store's changelog (Kafka's globalTable disables logging itself).
    inner = key_value_store_builder(
        materialized.with_logging_disabled(), store_name, store_key_serde, store_value_serde
    )
    store_builder = builder.with_dsl_store_suppliers(inner)
    builder.topology.add_global_store(
        store_builder,
        source,
        key_serde,
        value_serde,
        topic,
        processor,
        GlobalTableSourceSupplier(topic, store_name),
        timestamp_extractor=consumed.timestamp_extractor,
    )
    logger.debug("Global table of %s in store %s", topic, store_name)
    return GlobalKTable(store_name, topic, materialized.store_name is not None)


def stream_global_table_join(
    stream: KStream[Any, Any],
    table: GlobalKTable[Any, Any],
    key_selector: Callable[[Any, Any], Any],
    joiner: Callable[..., Any],
    named: Named | str | None,
    left: bool,
    with_key: bool = False,
) -> KStream[Any, Any]:
    """The stream of ``stream`` joined with ``table`` (see the module docstring)."""
    from kstreams.topology.dsl.kstream import KStream
    from kstreams.topology.dsl.parameters import named_as

    if not callable(key_selector):
        raise TypeError(
            f"A stream-GlobalKTable join takes (global_table, key_selector, joiner[, named]): "
            f"key_selector {key_selector!r} is not callable."
        )
    if not callable(joiner):
        raise TypeError(
            f"A stream-GlobalKTable join takes (global_table, key_selector, joiner[, named]): "
            f"joiner {joiner!r} is not callable."
        )
    internal = stream._builder
    # Kafka's globalTableJoin generates KSTREAM-LEFTJOIN- names for inner joins too.
    name = internal.name_or_generate(named_as(named), naming.LEFTJOIN)
    internal.add_processor(
        name,
        StreamGlobalTableJoinSupplier(table.store_name, key_selector, joiner, left, with_key),
        stream.name,
    )
    if left:
        # A left join joins a record with a null key (KIP-962): repartitions upstream keep them.
        internal.relax_null_keys(stream.name)
    # The key is unchanged and the lookup needs no partitioning: the stream keeps its state.
    return KStream(internal, name, stream._key_serde, None, stream.repartition_required, stream._source_nodes)
