"""The commit barrier: the one way the runtime stops every stream thread outside its tasks.

``barrier(scheduler, purpose)`` blocks new task acquisitions and waits until no stream thread holds
a task, runs the body, and lets the threads go again, whatever the body raises. Commits, rebalance
callbacks, aborts and rewinds, the final commit and cache shrinking all enter it here, with one
timeout and one failure policy: a thread that keeps its task past ``BARRIER_TIMEOUT_S`` means a
processor is blocked, and nothing that needs the barrier may go ahead without it (closing or
committing a task that is being processed would corrupt it), so the barrier raises
``StreamsException`` naming what waited, which reaches the uncaught exception handler.

Threads: entered by the polling thread (and by a client thread only when no polling thread runs);
the scheduler's internal mutex is a leaf.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kstreams._native.scheduler import TaskScheduler
from kstreams.errors import StreamsException

__all__ = ["BARRIER_TIMEOUT_S", "barrier"]

# Longest a stream thread may keep one task once the barrier asks for it: it gives a task back
# after each batch (at most task.time.slice.ms of work), so only a blocked processor takes longer.
BARRIER_TIMEOUT_S = 60.0


@contextmanager
def barrier(scheduler: TaskScheduler, purpose: str, timeout_s: float = BARRIER_TIMEOUT_S) -> Iterator[None]:
    """Hold every stream thread outside its task for the body (see the module docstring)."""
    if not scheduler.pause_all(timeout_s):
        scheduler.resume_all()
        raise StreamsException(
            f"Stream threads did not release their tasks within {timeout_s:.0f}s for {purpose}; a "
            "processor is probably blocked. Check for blocking calls in processors."
        )
    try:
        yield
    finally:
        scheduler.resume_all()
