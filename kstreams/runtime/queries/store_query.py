"""What ``KafkaStreams.store()`` may read: the choice of the local store instances that answer a
query (its public types, ``StoreQueryParameters`` and ``QueryableStoreTypes``, are in ``kstreams.queries``).

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

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kstreams.errors import InvalidStateStoreException
from kstreams.queries import StoreQueryParameters

if TYPE_CHECKING:
    from kstreams.runtime.tasks.standby import StandbyTask
    from kstreams.runtime.tasks.task_manager import TaskEntry

__all__ = ["local_store_instances"]


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
    from kstreams.runtime.tasks.task_manager import TaskState

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
