"""Standby placement: this client keeps the standby tasks (standbys and warm-ups) its last
assignment gives it (``tasks/standby.py`` says what a standby task is).

The polling thread calls it after each rebalance (``rebalanced``) and when it assigns a task
(``take``), inside the rebalance callbacks; it reads the assignor's last assignment, the task
manager and the state updater through their thread-safe accessors.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kstreams.processor import TaskId

if TYPE_CHECKING:
    from kstreams.cluster.port import Consumer
    from kstreams.runtime.assignment.streams_assignor import StreamsAssignor
    from kstreams.runtime.restoration.state_updater import StateUpdater
    from kstreams.runtime.tasks.standby import StandbyTask
    from kstreams.runtime.tasks.task_manager import TaskManager

__all__ = ["StandbyPlacer"]

logger = logging.getLogger(__name__)


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
