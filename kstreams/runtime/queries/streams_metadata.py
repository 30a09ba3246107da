"""Where an application's state lives: Kafka Streams' metadata for interactive queries.

Holds ``StreamsMetadataState`` (its public value types, ``HostInfo``, ``StreamsMetadata`` and
``KeyQueryMetadata``, are in ``kstreams.queries``), which turns the latest view of every live client
of the application
(``MemberMetadata``, kept current by ``metadata_channel.MetadataChannel``) into the answers of
``KafkaStreams.metadata_for_all_streams_clients()``, ``streams_metadata_for_store()`` and
``query_metadata_for_key()``, following Kafka's ``StreamsMetadataState``:

- only clients with an ``application.server`` appear (Kafka's assignor maps hosts, not members);
  clients sharing one host:port are merged into one ``StreamsMetadata``;
- a client's stores are those of the subtopologies whose source partitions it holds, plus every
  global store; standby stores likewise from its standby partitions;
- a key's partition is the one the store's source topic partitioner gives (murmur2 of the
  serialized key, or a custom partitioner given the source topic with the most partitions and its
  partition count); its active host holds that partition of a source topic of the store's
  subtopology, its standby hosts hold a standby of it;
- before the first rebalance (nothing known yet) the answers are empty lists and
  ``KeyQueryMetadata.NOT_AVAILABLE``; a key of a global store is on every client (this one first).

Guarantees: answers are computed from one snapshot of the view, so one answer is self-consistent.
Like Kafka's, they can be stale for the length of a rebalance: a query that fails with
InvalidStateStoreException should rediscover and retry.

Threads: any thread. The object holds no lock; the member view it reads is copied under the
channel's lock (a leaf).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kstreams._native.record_batch import default_partition
from kstreams.cluster.port import TopicPartition
from kstreams.queries import HostInfo, KeyQueryMetadata, StreamsMetadata

if TYPE_CHECKING:
    from kstreams.runtime.queries.metadata_channel import MemberMetadata
    from kstreams.topology.plan import TopologyPlan

__all__ = ["StreamsMetadataState"]


# A key serializer: a Serde/Serializer with ``serialize(topic, key)``, or a plain function of the key.
KeySerializer = Any
# Kafka's StreamPartitioner: ``partition(topic, key, value, num_partitions)`` or a function of those.
StreamPartitioner = Any


class StreamsMetadataState:
    """Answers metadata queries from the plan, the member view and the source topics' partition
    counts (see the module docstring).

    ``members`` returns the current view (None until this client has seen its own metadata after
    a rebalance: the view is not initialized); ``this_host`` is this client's application.server;
    ``partition_counts`` gives partition counts of topics ({} for unknown ones).
    """

    def __init__(
        self,
        plan: TopologyPlan,
        this_host: HostInfo | None,
        members: Callable[[], list[MemberMetadata] | None],
        partition_counts: Callable[[Collection[str]], Mapping[str, int]],
    ) -> None:
        self._plan = plan
        self._this_host = this_host
        self._members = members
        self._partition_counts = partition_counts
        self._global_stores = frozenset(plan.global_store_names)
        # store -> the source topics of its subtopology (external and repartition, resolved).
        self._store_topics: dict[str, tuple[str, ...]] = {}
        for sub in plan.subtopologies:
            for store in sub.stores:
                self._store_topics[store] = sub.source_topics

    # -- the three queries ------------------------------------------------------------------

    def all_metadata(self) -> list[StreamsMetadata] | None:
        """Every client with an application.server, by host (None when not initialized)."""
        members = self._members()
        if members is None:
            return None
        by_host: dict[HostInfo, tuple[set[TopicPartition], set[TopicPartition]]] = {}
        for member in members:
            if member.host is None:
                continue
            active, standby = by_host.setdefault(member.host, (set(), set()))
            active.update(member.active)
            standby.update(member.standby)
        return [
            StreamsMetadata(
                host,
                frozenset(self._stores_on(active)) | self._global_stores,
                frozenset(active),
                frozenset(self._stores_on(standby)),
                frozenset(standby),
            )
            for host, (active, standby) in sorted(by_host.items())
        ]

    def metadata_for_store(self, store_name: str) -> list[StreamsMetadata]:
        """The clients holding the store, active or standby ([] when not initialized)."""
        everyone = self.all_metadata()
        if everyone is None:
            return []
        if store_name in self._global_stores:
            return everyone
        if store_name not in self._store_topics:
            return []
        return [
            m
            for m in everyone
            if store_name in m.state_store_names or store_name in m.standby_state_store_names
        ]

    def key_metadata(
        self,
        store_name: str,
        key: Any,
        key_serializer: KeySerializer = None,
        partitioner: StreamPartitioner = None,
    ) -> KeyQueryMetadata | None:
        """Where ``key`` of ``store_name`` lives; None for a store no subtopology has (Kafka's
        null), NOT_AVAILABLE before the view is initialized. Raises ValueError when the
        partitioner names more than one partition or no partition can be computed."""
        if key is None:
            raise ValueError("The key of query_metadata_for_key() must not be None.")
        everyone = self.all_metadata()
        if everyone is None:
            return KeyQueryMetadata.NOT_AVAILABLE
        if store_name in self._global_stores:
            # Global stores are on every client: this one, or the first known one.
            if self._this_host is not None:
                return KeyQueryMetadata(self._this_host, frozenset(), -1)
            return KeyQueryMetadata(everyone[0].host_info, frozenset(), -1) if everyone else None
        topics = self._store_topics.get(store_name)
        if topics is None:
            return None
        counts = self._partition_counts(topics)
        known = [(counts[t], t) for t in topics if t in counts]
        if not known:
            return KeyQueryMetadata.NOT_AVAILABLE
        # Kafka asks the partitioner about the source topic with the most partitions.
        max_partitions, topic = max(known, key=lambda c: (c[0], c[1]))
        partition = _partition_of(key, topic, max_partitions, key_serializer, partitioner)
        matching = {TopicPartition(t, partition) for t in topics}
        active_host = HostInfo.UNAVAILABLE
        standby_hosts: set[HostInfo] = set()
        for metadata in everyone:
            if store_name in metadata.state_store_names and matching & metadata.topic_partitions:
                active_host = metadata.host_info
            if (
                store_name in metadata.standby_state_store_names
                and matching & metadata.standby_topic_partitions
            ):
                standby_hosts.add(metadata.host_info)
        return KeyQueryMetadata(active_host, frozenset(standby_hosts), partition)

    # -- helpers ----------------------------------------------------------------------------

    def source_topics_of(self, store_name: str) -> tuple[str, ...]:
        """The source topics of the store's subtopology (() for a global or unknown store)."""
        return self._store_topics.get(store_name, ())

    def _stores_on(self, partitions: Iterable[TopicPartition]) -> set[str]:
        topics = {tp.topic for tp in partitions}
        return {store for store, sources in self._store_topics.items() if topics.intersection(sources)}


def _partition_of(
    key: Any,
    topic: str,
    num_partitions: int,
    key_serializer: KeySerializer,
    partitioner: StreamPartitioner,
) -> int:
    """The partition a sink with this partitioner (or the default one) would write ``key`` to."""
    if partitioner is not None:
        partition_fn: Callable[..., Any] = getattr(partitioner, "partition", None) or partitioner
        chosen = partition_fn(topic, key, None, num_partitions)
        if chosen is not None and not isinstance(chosen, int) and hasattr(chosen, "__iter__"):
            # KIP-837: a multicasting partitioner cannot place a key for a query.
            several = sorted({int(p) for p in chosen})
            if len(several) != 1:
                raise ValueError(
                    f"The partitioner returned partitions {several} for the key: when used for fetching "
                    "KeyQueryMetadata it must return exactly one partition."
                )
            chosen = several[0]
        if chosen is not None:
            if not 0 <= int(chosen) < num_partitions:
                raise ValueError(
                    f"The partitioner returned partition {chosen} of topic {topic}, which has "
                    f"{num_partitions} partitions."
                )
            return int(chosen)
        # None: the sink falls back to the default partitioner, and so does the query.
    if key_serializer is None:
        raise ValueError(
            "query_metadata_for_key() needs a key serializer (or a partitioner that names a partition) "
            "to compute the key's partition; the store's key serde is unknown."
        )
    serialize = getattr(key_serializer, "serialize", None)
    key_bytes = serialize(topic, key) if serialize is not None else key_serializer(key)
    if key_bytes is None:
        raise ValueError(f"The key serializer turned key {key!r} into None: it has no partition.")
    return default_partition(bytes(key_bytes), num_partitions)
