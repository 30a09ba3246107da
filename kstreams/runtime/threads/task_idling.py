"""Task idling (``max.task.idle.ms``): a task with several input partitions waits for records on
all of them before it processes across them, so records are joined and merged in timestamp order.

Kafka's rule (``PartitionGroup.readyToProcess``): a task is ready when every partition has buffered
records. A partition that is empty gets a deadline of now + ``max.task.idle.ms``; until it passes,
the task waits; once it has passed, the task processes its other partitions ("enforced
processing") until the empty one has records again, which removes its deadline (it gets a fresh
one when it is empty again: a task that drains a partition waits anew). With 0 (the
default) or -1 a task never waits. Kafka also waits, without a deadline, while an empty partition's
fetch lag is unknown or positive; kstreams fetches every assigned partition continuously, so it
waits only on the deadline.

Threads: a stream thread holding the task evaluates readiness and, when the task must wait, marks
the entry deferred and asks the scheduler to defer it before releasing it. The polling thread, each
turn after routing new records, resumes deferred tasks that became ready (records arrived or a
deadline passed). The two may race (a resume before the defer): the next turn resumes it again, so
a wake-up is late by one poll at most, never lost. ``TaskEntry.idle_deadlines`` is written only by
the thread holding the task and read by the polling thread (single dict operations, under the GIL).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kstreams._native.scheduler import TaskScheduler
    from kstreams.runtime.tasks.task_manager import TaskEntry

__all__ = ["must_wait", "resume_ready"]


def must_wait(entry: TaskEntry, now: float | None = None) -> bool:
    """Whether the task (held by the caller) must wait for records on an empty partition: some
    partition has records, and some empty partition's idle deadline has not passed."""
    if now is None:
        now = time.monotonic()
    deadlines = entry.idle_deadlines
    has_records = waiting = False
    for tp, buffer in entry.ordered:
        if len(buffer):
            has_records = True
            deadlines.pop(tp, None)  # once empty again, the partition gets a fresh deadline
            continue
        deadline = deadlines.get(tp)
        if deadline is None:
            deadline = deadlines[tp] = now + entry.idle_s
        if now < deadline:
            waiting = True
    return has_records and waiting


def resume_ready(entries: list[TaskEntry], scheduler: TaskScheduler, now: float | None = None) -> None:
    """Resume the deferred tasks among ``entries`` whose wait is over: every partition has records,
    or an empty partition's deadline has passed."""
    if now is None:
        now = time.monotonic()
    for entry in entries:
        if not entry.deferred:
            continue
        deadlines = entry.idle_deadlines
        ready = True
        for tp, buffer in entry.ordered:
            if not len(buffer) and now < deadlines.get(tp, now):
                ready = False
                break
        if ready:
            entry.deferred = False
            scheduler.resume(entry.handle)
