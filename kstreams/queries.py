"""The public types of interactive queries: what ``KafkaStreams.store()`` takes and what the
metadata calls answer (Kafka's ``StoreQueryParameters``, ``QueryableStoreTypes``, ``HostInfo``,
``StreamsMetadata``, ``KeyQueryMetadata``).

Immutable values, safe to share between threads. The runtime answers queries with them
(``kstreams.runtime.queries``: ``store_query`` picks the local store instances that answer,
``streams_metadata`` computes the metadata); this module holds only the types, so it imports nothing
of the runtime.

- By default only the stores of active tasks that are running (processing) answer, and only while
  the client is RUNNING, as in Kafka.
- ``enable_stale_stores()`` adds the stores of active tasks that are still restoring and of this
  client's standby tasks, and allows queries while the client is REBALANCING: reads may then be
  behind the active task (Kafka's stale stores).
- ``with_partition(p)`` / ``with_partitions(ps)`` restrict the query to the tasks of those
  partitions; a partition no local task holds makes the read raise InvalidStateStoreException.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import ClassVar

from kstreams.cluster.port import TopicPartition

__all__ = [
    "HostInfo",
    "KeyQueryMetadata",
    "QueryableStoreType",
    "QueryableStoreTypes",
    "StoreQueryParameters",
    "StreamsMetadata",
]


@dataclass(frozen=True, slots=True)
class QueryableStoreType:
    """Which kind of store a query expects, and whether it wants ``ValueAndTimestamp`` values."""

    store_type: str  # "keyvalue", "window" or "session" (StoreBuilder.store_type)
    timestamped: bool = False

    def accepts(self, store_type: str) -> bool:
        return self.store_type == store_type


class QueryableStoreTypes:
    """Kafka's ``QueryableStoreTypes``: the query types ``StoreQueryParameters`` takes."""

    @staticmethod
    def key_value_store() -> QueryableStoreType:
        return QueryableStoreType("keyvalue")

    @staticmethod
    def timestamped_key_value_store() -> QueryableStoreType:
        return QueryableStoreType("keyvalue", timestamped=True)

    @staticmethod
    def window_store() -> QueryableStoreType:
        return QueryableStoreType("window")

    @staticmethod
    def timestamped_window_store() -> QueryableStoreType:
        return QueryableStoreType("window", timestamped=True)

    @staticmethod
    def session_store() -> QueryableStoreType:
        return QueryableStoreType("session")


@dataclass(frozen=True, slots=True)
class StoreQueryParameters:
    """A store query: the store, its query type, the partitions asked for and whether stale stores
    may answer. Immutable: each ``with_``/``enable_`` method returns a new one, as in Kafka."""

    store_name: str
    query_type: QueryableStoreType | None = None
    partitions: frozenset[int] | None = None  # None: every local partition
    stale_stores: bool = False

    @staticmethod
    def from_name_and_type(store_name: str, query_type: QueryableStoreType | None) -> StoreQueryParameters:
        return StoreQueryParameters(store_name, query_type)

    def with_partition(self, partition: int | None) -> StoreQueryParameters:
        """Only the task of this partition (None: all partitions), Kafka's ``withPartition``."""
        return replace(self, partitions=None if partition is None else frozenset([int(partition)]))

    def with_partitions(self, partitions: Iterable[int] | None) -> StoreQueryParameters:
        """Only the tasks of these partitions (None: all partitions)."""
        return replace(self, partitions=None if partitions is None else frozenset(int(p) for p in partitions))

    def with_all_partitions(self) -> StoreQueryParameters:
        return replace(self, partitions=None)

    def enable_stale_stores(self) -> StoreQueryParameters:
        """Let restoring and standby stores answer too (reads may be behind the active task)."""
        return replace(self, stale_stores=True)

    @property
    def partition(self) -> int | None:
        """The single partition asked for (Kafka's ``partition()``), None when not exactly one."""
        if self.partitions is not None and len(self.partitions) == 1:
            return next(iter(self.partitions))
        return None

    @property
    def stale_stores_enabled(self) -> bool:
        return self.stale_stores


@dataclass(frozen=True, order=True, slots=True)
class HostInfo:
    """A client's ``application.server``: where it answers interactive queries."""

    host: str
    port: int

    UNAVAILABLE: ClassVar[HostInfo]

    @staticmethod
    def parse(server: str) -> HostInfo | None:
        """The HostInfo of "host:port" ("[v6]:port" too); None for "" (no application.server).
        Raises ValueError for anything else."""
        if not server:
            return None
        host, sep, port = server.rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not sep or not host or not port.isdigit():
            raise ValueError(f"Error parsing host address {server!r}. Expected format host:port.")
        return HostInfo(host, int(port))

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


# Kafka's StreamsMetadataState.UNKNOWN_HOST.
HostInfo.UNAVAILABLE = HostInfo("unavailable", -1)


@dataclass(frozen=True, slots=True)
class StreamsMetadata:
    """One client (host) of the application: the stores and partitions it holds, active and standby."""

    host_info: HostInfo
    state_store_names: frozenset[str]
    topic_partitions: frozenset[TopicPartition]
    standby_state_store_names: frozenset[str] = frozenset()
    standby_topic_partitions: frozenset[TopicPartition] = frozenset()

    @property
    def host(self) -> str:
        return self.host_info.host

    @property
    def port(self) -> int:
        return self.host_info.port


@dataclass(frozen=True, slots=True)
class KeyQueryMetadata:
    """Where one key of one store lives: the active host, the standby hosts, and its partition."""

    active_host: HostInfo
    standby_hosts: frozenset[HostInfo] = field(default_factory=frozenset)
    partition: int = -1

    NOT_AVAILABLE: ClassVar[KeyQueryMetadata]

    @property
    def all_hosts(self) -> list[HostInfo]:
        """The active host first, then the standby hosts (Kafka's ``allHosts()``)."""
        return [self.active_host, *sorted(self.standby_hosts)]


KeyQueryMetadata.NOT_AVAILABLE = KeyQueryMetadata(HostInfo.UNAVAILABLE, frozenset(), -1)
