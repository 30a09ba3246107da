"""RepeatedFailures: how long a failed task waits before REPLACE_THREAD restarts it.

A task that failed restarts from its last commit. When the failure is deterministic (a record no
serializer or processor can handle), the restarted task fails again at the same record, and an
immediate restart spins: thousands of handler calls a second and, under at_least_once, the records
before the poison one written again on every turn. Kafka Streams replaces a thread once per
rebalance, so its loop is slow; kstreams needs no rebalance, so it slows the loop itself.

Guarantee: a task's first failure at a record restarts it at once (a transient failure costs
nothing). Each further failure of that task at the same record (topic, partition, offset; or both
without a record, e.g. a punctuation) delays its restart: ``retry.backoff.ms`` the first time,
doubling up to ``MAX_RESTART_BACKOFF_S``. A failure at another record starts over. Each repeat is
counted (``repeated-task-failures``) and logged once at WARNING, naming the record and the delay.

Threads: used by the polling thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_RESTART_BACKOFF_S", "RepeatedFailures"]

logger = logging.getLogger(__name__)

# The longest a task waits before a restart: long enough that a poison record costs a few
# handler calls a minute, short enough that a fixed dependency is noticed soon.
MAX_RESTART_BACKOFF_S = 5.0

Position = tuple[str, int, int] | None


class RepeatedFailures:
    """The failures of each task at one record, and the restart delays they earn."""

    def __init__(
        self,
        backoff_s: float,
        on_repeat: Callable[[float], None] | None = None,
    ) -> None:
        self._backoff_s = backoff_s
        self._on_repeat = on_repeat
        # Task id -> (where it last failed, failures there in a row).
        self._last: dict[Any, tuple[Position, int]] = {}
        self.last_delay_s = 0.0  # the delay of the latest repeat (a gauge shows it)

    def failed(self, task_id: Any, position: Position) -> float:
        """Count a failure of ``task_id`` at ``position``; the seconds its restart must wait."""
        previous = self._last.get(task_id)
        repeats = previous[1] + 1 if previous is not None and previous[0] == position else 1
        self._last[task_id] = (position, repeats)
        if repeats == 1:
            return 0.0
        delay = min(self._backoff_s * 2 ** (repeats - 2), MAX_RESTART_BACKOFF_S)
        # retry.backoff.ms=0 must not turn the backoff off: a repeat always waits a little.
        delay = max(delay, 0.01)
        self.last_delay_s = delay
        if self._on_repeat is not None:
            self._on_repeat(delay)
        where = (
            f"topic {position[0]}, partition {position[1]}, offset {position[2]}"
            if position is not None
            else "no input record (a punctuation or the task's start)"
        )
        logger.warning(
            "Task %s failed again at the same record (%s): the failure repeats (%d times in a row), "
            "so the task restarts in %.0f ms. Fix the cause, or let an exception handler skip the "
            "record (processing.exception.handler, production.exception.handler).",
            task_id,
            where,
            repeats,
            delay * 1000,
        )
        return delay

    def forget(self, task_id: Any) -> None:
        """The task left this client (revoked, lost): its history goes with it."""
        self._last.pop(task_id, None)
