"""Standby replicas (``num.standby.replicas``): where they go, and what one is.

A standby task is a copy of a stateful task's stores on a client that does not own the task. The
restore thread keeps it current from the task's changelogs; it never processes input. When the
owner fails or leaves and the task moves to a client holding a standby, that client turns the
standby into the active task (the same stores, already open) and restores only the lag.

Placement is computed by every client from the same data, the group's current assignment of every
member, so all clients agree without talking to each other: with the members sorted by member id,
the standbys of a task owned by member ``i`` go to the next ``k`` members ``i+1 .. i+k`` (mod n),
where ``k`` is ``num.standby.replicas`` capped at ``n - 1``. It is recomputed on every rebalance.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kstreams.cluster.port import ClusterError, TopicPartition
from kstreams.processor import TaskId

if TYPE_CHECKING:
    from kstreams.cluster.port import Consumer
    from kstreams.runtime.checkpoints import TaskCheckpoint
    from kstreams.runtime.state_updater import StateUpdater
    from kstreams.runtime.task import StreamTask
    from kstreams.runtime.task_manager import TaskManager
    from kstreams.state.directory import StateDirectory

__all__ = ["StandbyPlacer", "StandbyTask", "place_standbys"]

logger = logging.getLogger(__name__)

TasksOf = Callable[[Iterable[TopicPartition]], Mapping[TaskId, Sequence[TopicPartition]]]


def place_standbys(
    assignment: Mapping[str, Sequence[TopicPartition]],
    replicas: int,
    tasks_of: TasksOf,
    is_stateful: Callable[[TaskId], bool],
) -> dict[str, dict[TaskId, list[TopicPartition]]]:
    """Standby tasks per member: {member id: {task id: the task's input partitions}}.

    ``assignment`` is the group's assignment of every member ({member id: partitions});
    ``tasks_of`` groups partitions by task; only tasks for which ``is_stateful`` holds (they have
    changelogs to replicate) get standbys. A member never gets a standby of a task it owns.
    """
    members = sorted(assignment)
    placed: dict[str, dict[TaskId, list[TopicPartition]]] = {member: {} for member in members}
    count = len(members)
    k = min(replicas, count - 1)
    if k <= 0:
        return placed
    owners: dict[TaskId, set[int]] = {}
    partitions: dict[TaskId, set[TopicPartition]] = {}
    for index, member in enumerate(members):
        for task_id, tps in tasks_of(assignment[member]).items():
            owners.setdefault(task_id, set()).add(index)
            partitions.setdefault(task_id, set()).update(tps)
    for task_id, owned_by in owners.items():
        if not is_stateful(task_id):
            continue
        first = min(owned_by)
        placed_count = 0
        step = 1
        while placed_count < k and step < count:
            candidate = (first + step) % count
            step += 1
            if candidate in owned_by:
                continue
            placed[members[candidate]][task_id] = sorted(partitions[task_id])
            placed_count += 1
    return placed


class StandbyTask:
    """One standby replica: a task whose stores are open and restored, but that never processes.

    It holds its task directory's lock from creation to ``close``. The restore thread owns it while
    it is updated; the polling thread gets it back before turning it into an active task.
    """

    def __init__(self, task: StreamTask, checkpoint: TaskCheckpoint, directory: StateDirectory) -> None:
        self.task = task
        self.checkpoint = checkpoint
        self._directory = directory
        self.closed = False

    @property
    def task_id(self) -> TaskId:
        return self.task.task_id

    @property
    def partitions(self) -> tuple[TopicPartition, ...]:
        return self.task.partitions

    def changelog_partitions(self) -> dict[TopicPartition, Any]:
        return self.task.changelog_partitions()

    def close(self) -> None:
        """Checkpoint what the stores hold, close them, and release the task directory."""
        if self.closed:
            return
        self.closed = True
        try:
            self.task.close(clean=True)
            # A standby holds only changelog data: its positions are always safe to record.
            self.checkpoint.write()
        except Exception:
            logger.warning(
                "Closing standby task %s failed; its next owner restores it from the changelog",
                self.task_id,
                exc_info=True,
            )
            self.checkpoint.delete()
        finally:
            self._directory.unlock(self.task_id)
        logger.info("Closed standby task %s", self.task_id)

    def __repr__(self) -> str:
        return f"StandbyTask({self.task_id})"


class StandbyPlacer:
    """Keeps this client's standby tasks where ``place_standbys`` puts them. Used by the polling
    thread after each rebalance (``rebalanced``) and when it assigns a task (``take``)."""

    def __init__(
        self, replicas: int, consumer: Consumer, tasks: TaskManager, state_updater: StateUpdater
    ) -> None:
        self._replicas = replicas
        self._consumer = consumer
        self._tasks = tasks
        self._state_updater = state_updater

    def take(self, task_id: TaskId) -> StandbyTask | None:
        """This client's standby of a task that is now assigned to it, released by the restore
        thread for recycling into the active task (None when there is none)."""
        return self._state_updater.remove_standby(task_id)

    def rebalanced(self) -> None:
        """Create the standbys this client should hold now and close those it should not."""
        held = self._state_updater.standby_ids()
        if self._replicas <= 0 and not held:
            return
        wanted: dict[TaskId, list[TopicPartition]] = {}
        mine: set[TaskId] = set()
        if self._replicas > 0:
            try:
                assignment = self._consumer.group_assignment()
            except ClusterError as exc:
                # Standbys are an optimisation: keep the current ones until the next rebalance.
                logger.warning("Could not read the group's assignment to place standby tasks: %s", exc)
                return
            member = self._consumer.member_id
            placed = place_standbys(
                assignment, self._replicas, self._tasks.tasks_for_partitions, self._tasks.is_stateful
            )
            wanted = placed.get(member, {})
            mine = set(self._tasks.tasks_for_partitions(assignment.get(member, [])))
        for task_id in sorted(held - set(wanted)):
            if task_id in mine and self._tasks.entry(task_id) is None:
                continue  # assigned here but not handed over yet: the standby becomes the active task
            standby = self._state_updater.remove_standby(task_id)
            if standby is not None:
                standby.close()
        for task_id, partitions in sorted(wanted.items()):
            if task_id in held or self._tasks.entry(task_id) is not None:
                continue
            try:
                standby = self._tasks.create_standby(task_id, partitions)
            except Exception:
                logger.warning(
                    "Could not create standby task %s; the next rebalance tries again", task_id, exc_info=True
                )
                continue
            if standby is not None:
                self._state_updater.add_standby(standby)
