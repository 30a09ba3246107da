"""Task scheduling for the stream threads, with per-task locks and the commit barrier.

Lock order: the scheduler's single internal mutex is a leaf; nothing is called while it is held.
Every blocking call waits on a condition variable without the GIL.

Details:
- next_task: timeout 0 polls, < 0 waits until woken; equal counts go to the least recently served task.
- While unregister waits for a task, the task is not handed out (so a busy task cannot starve it).
- release raises KeyError for an unknown task and RuntimeError for a task nobody holds;
  fail/reset raise KeyError for an unknown task; signal ignores unknown ids (the task went away).
- register raises ValueError for a negative id, TypeError for a buffer that is not a RecordBuffer.
- is_failed(task_id) and __len__ (registered tasks) serve tests and metrics. Compiled callers may cimport
  TaskScheduler and call c_next_task(timeout) / c_release(task_id) / c_notify() without the GIL.
"""

from collections.abc import Sequence

from kstreams._native.record_buffer import RecordBuffer

class TaskScheduler:
    def __init__(self) -> None: ...
    def register(self, task_id: int, buffers: Sequence[RecordBuffer]) -> None:
        """Make a task schedulable; its buffered count is the sum of its buffers' lengths (one buffer
        per input partition), read without the GIL. task_id is a non-negative integer chosen by the
        caller. Raises ValueError if it is already registered."""
    def unregister(self, task_id: int, timeout: float = -1.0) -> bool:
        """Remove a task once no thread holds it (waits up to timeout seconds; < 0 waits forever).
        Returns False on timeout (the task stays registered). Unknown ids return True."""
    def next_task(self, timeout: float) -> int:
        """Lock and return an unheld, non-failed task: a signalled one first (even with an empty
        buffer; a due punctuation must not wait for busier tasks), else the one with the most
        buffered records. Waits up to timeout seconds
        for one; returns -1 on timeout, on wake_all(), while paused past the timeout, or after
        shutdown(). Never hands one task to two threads."""
    def release(self, task_id: int) -> None:
        """Unlock a task held by the caller, waking waiters (pause_all, unregister, next_task)."""
    def notify(self) -> None:
        """Records were pushed: wake threads waiting in next_task."""
    def signal(self, task_id: int) -> None:
        """Make a task eligible once even with an empty buffer (due punctuation, a commit request);
        cleared when the task is next handed out. Also ends a deferral."""
    def defer(self, task_id: int) -> None:
        """Keep a task's records from being handed out until resume(task_id) or signal(task_id):
        the task waits for input on its other partitions (max.task.idle.ms). Unknown ids are
        ignored. A signalled task is still handed out (a due punctuation)."""
    def resume(self, task_id: int) -> None:
        """Make a deferred task eligible again by its buffered records. Unknown ids are ignored."""
    def is_deferred(self, task_id: int) -> bool:
        """Whether the task is deferred (False for an unknown id)."""
    def wake_all(self) -> None:
        """Make every current next_task waiter return -1 at once (a thread was asked to stop)."""
    def pause_all(self, timeout: float = -1.0) -> bool:
        """The commit barrier: block new acquisitions, then wait until no task is held.
        Returns False on timeout (acquisitions stay blocked until resume_all)."""
    def resume_all(self) -> None: ...
    @property
    def pause_requested(self) -> bool:
        """True while pause_all is pending or in force: a thread holding a task releases it."""
    def fail(self, task_id: int) -> None:
        """Mark a task failed: it is never handed out until reset()."""
    def reset(self, task_id: int) -> None: ...
    def is_held(self, task_id: int) -> bool: ...
    def holder_count(self) -> int: ...
    def shutdown(self) -> None:
        """Every next_task returns -1 from now on; waiters wake at once."""
    def task_ids(self) -> list[int]: ...
    def buffered(self, task_id: int) -> int: ...
    def is_failed(self, task_id: int) -> bool:
        """Whether the task is marked failed (False for an unknown id)."""
    def __len__(self) -> int:
        """Number of registered tasks."""
