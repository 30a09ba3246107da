"""Standby replicas (``num.standby.replicas``): what one is (``assignment/standby_placement.py``
keeps this client's as its assignment says).

A standby task is a copy of a stateful task's stores on a client that does not own the task. The
restore thread keeps it current from the task's changelogs; it never processes input. When the
owner fails or leaves and the task moves to a client holding a standby, that client turns the
standby into the active task (the same stores, already open) and restores only the lag.

Placement is decided by the group's leader with the active tasks (kstreams.runtime.assignment.task_assignor:
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
    from kstreams.processing.task import StreamTask
    from kstreams.runtime.tasks.checkpoints import TaskCheckpoint
    from kstreams.state.directory import StateDirectory

__all__ = ["StandbyTask"]

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
