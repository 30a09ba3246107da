"""What ``KafkaStreams.store()`` may read: Kafka's ``StoreQueryParameters`` and ``QueryableStoreTypes``,
and the choice of the local store instances that answer a query.

- By default only the stores of active tasks that are running (processing) answer, and only while
  the client is RUNNING, as in Kafka.
- ``enable_stale_stores()`` adds the stores of active tasks that are still restoring and of this
  client's standby tasks, and allows queries while the client is REBALANCING: reads may then be
  behind the active task (Kafka's stale stores).
- ``with_partition(p)`` / ``with_partitions(ps)`` restrict the query to the tasks of those
  partitions; a partition no local task holds makes the read raise InvalidStateStoreException.

Restoration and standby updates write under each store's ``query_lock`` (``StreamTask.restore``),
the same lock every read holds, so a stale read never sees half a batch.

Threads: any thread; the instances are looked up afresh on every read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from kstreams.errors import InvalidStateStoreException

if TYPE_CHECKING:
    from kstreams.runtime.standby import StandbyTask
    from kstreams.runtime.task_manager import TaskEntry

__all__ = ["QueryableStoreType", "QueryableStoreTypes", "StoreQueryParameters", "local_store_instances"]


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


def local_store_instances(
    params: StoreQueryParameters,
    entries: Callable[[], list[TaskEntry]],
    standbys: Callable[[], list[StandbyTask]],
    view: Callable[[Any], Any],
) -> list[Any]:
    """The local instances of ``params.store_name`` that may answer, each through ``view``.

    ``entries`` are the client's active tasks, ``standbys`` its standby tasks. Raises
    InvalidStateStoreException when partitions were asked for and no allowed local task holds any.
    """
    from kstreams.runtime.task_manager import TaskState

    name = params.store_name
    allowed = {TaskState.RUNNING, TaskState.RESTORING} if params.stale_stores else {TaskState.RUNNING}
    tasks = [e.task for e in entries() if e.state in allowed]
    if params.stale_stores:
        tasks += [s.task for s in standbys()]
    if params.partitions is not None:
        tasks = [t for t in tasks if t.task_id.partition in params.partitions]
    found = [view(t.get_store(name)) for t in tasks if name in t.store_names()]
    if params.partitions is not None and not found:
        raise InvalidStateStoreException(
            f"The specified partitions {sorted(params.partitions)} for store {name} do not exist on this "
            "client" + (" (active, restoring or standby)." if params.stale_stores else " (active, running).")
        )
    return found
