"""How a client's tasks are shown per stream thread (``KafkaStreams.metadata_for_local_threads``).

Kafka pins each task to one stream thread, and users read ``ThreadMetadata`` to see where tasks
run. Here a task runs on whichever thread picks it next, so the listing is a division made for
reporting, with Kafka's invariant: every active and standby task of the client appears under
exactly one live thread.

- An active task (restoring or running) goes to the thread whose record cache holds its cache
  namespaces, i.e. the thread that processed it last (a thread adopts a task's cache when it picks
  the task). A task no live thread has processed yet goes to the thread with the fewest tasks.
- Standby tasks are kept current by the restore thread, not by a stream thread; they are spread
  over the stream threads in turn (by task id), so each shows under one thread as in Kafka.

With no live thread nothing is listed. Pure function, no threads.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

__all__ = ["divide_tasks"]


def divide_tasks(
    threads: Sequence[tuple[str, Any]],
    active: Sequence[tuple[Hashable, Any]],
    standby: Sequence[Hashable],
) -> dict[str, tuple[list[Any], list[Any]]]:
    """{thread name: (active task ids, standby task ids)}.

    ``threads`` are (name, record cache) of the live stream threads; ``active`` are (task id, the
    record cache the task uses now or None); ``standby`` the standby task ids.
    """
    divided: dict[str, tuple[list[Any], list[Any]]] = {name: ([], []) for name, _ in threads}
    if not threads:
        return divided
    by_cache = {id(cache): name for name, cache in threads}
    unplaced = []
    for task_id, cache in sorted(active, key=lambda a: str(a[0])):
        owner = by_cache.get(id(cache)) if cache is not None else None
        if owner is None:
            unplaced.append(task_id)
        else:
            divided[owner][0].append(task_id)
    names = [name for name, _ in threads]
    for task_id in unplaced:
        fewest = min(names, key=lambda n: (len(divided[n][0]), names.index(n)))
        divided[fewest][0].append(task_id)
    for index, task_id in enumerate(sorted(standby, key=str)):
        divided[names[index % len(names)]][1].append(task_id)
    return divided
