"""Standby replicas (``num.standby.replicas``): where they go, and what one is.

A standby task is a copy of a stateful task's stores on a client that does not own the task. The
restore thread keeps it current from the task's changelogs; it never processes input. When the
owner fails or leaves and the task moves to a client holding a standby, that client turns the
standby into the active task (the same stores, already open) and restores only the lag.

Placement is decided by the group's leader with the active tasks (kstreams.runtime.task_assignor:
with the clients sorted, the standbys of a task active on client ``i`` go to the next ``k`` clients,
``k`` being ``num.standby.replicas`` capped at ``n - 1``), and reaches each client in its
assignment, together with its warm-up replicas, which are standby tasks too: a warm-up exists to
catch up before its task moves here (KIP-441).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kstreams.cluster.port import TopicPartition
from kstreams.processor import TaskId

if TYPE_CHECKING:
    from kstreams.cluster.port import Consumer
    from kstreams.runtime.checkpoints import TaskCheckpoint
    from kstreams.runtime.state_updater import StateUpdater
    from kstreams.runtime.streams_assignor import StreamsAssignor
    from kstreams.runtime.task import StreamTask
    from kstreams.runtime.task_manager import TaskManager
    from kstreams.state.directory import StateDirectory

__all__ = ["StandbyPlacer", "StandbyTask"]

logger = logging.getLogger(__name__)


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
    """Keeps this client's standby tasks (standbys and warm-ups) as its last assignment says. Used
    by the polling thread after each rebalance (``rebalanced``) and when it assigns a task
    (``take``)."""

    def __init__(
        self, assignor: StreamsAssignor, consumer: Consumer, tasks: TaskManager, state_updater: StateUpdater
    ) -> None:
        self._assignor = assignor
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
        received = self._assignor.received
        wanted = {t: self._assignor.partitions_of(t) for t in received.standby | received.warmup}
        if not wanted and not held:
            return
        mine = set(self._tasks.tasks_for_partitions(self._consumer.assignment()))
        for task_id in sorted(held - set(wanted)):
            if task_id in mine and self._tasks.entry(task_id) is None:
                continue  # assigned here but not handed over yet: the standby becomes the active task
            standby = self._state_updater.remove_standby(task_id)
            if standby is not None:
                standby.close()
        for task_id, partitions in sorted(wanted.items()):
            if task_id in held or task_id in mine or self._tasks.entry(task_id) is not None:
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
