"""PythonGate: lets one stream thread at a time run a batch of Python processors.

Python processors hold the GIL, so two stream threads running them do not run in parallel: they
trade the GIL every ``sys.getswitchinterval()`` and contend with the polling thread for it, which
costs more than it gives (two threads measured slower than one). A stream thread holds
the gate while it runs a batch of a task whose processing calls Python code (``StreamTask.runs_python``)
and gives it up between batches; the other threads wait for it with the GIL released. Compiled
batches, which release the GIL in their kernels, do not take the gate and still run in parallel.

The gate hands itself over in arrival order (a plain ``threading.Lock`` is not fair: the thread that
releases it would take it again before a waiter wakes, and the waiter's task would starve). It only
orders work; the GIL, as always, is what keeps Python objects consistent.

A task whose Python processors wait rather than compute (I/O: a lookup over the network, a sleep)
gains from more threads, since waiting releases the GIL. The stream thread reports each gated
batch's thread CPU time and wall time (``observe``); a batch that used less than half its wall
time on the CPU marks its task as waiting, and the task's batches skip the gate for the next
``IO_BOUND_RECHECK_S`` seconds, after which a gated batch measures it again. (A machine so busy that
a computing batch gets less than half a CPU looks the same: its tasks then run as without the gate.)

Lock: ``PythonGate._lock`` guards the queue, is held only briefly and never while waiting; a stream
thread takes the gate while holding its task (from the scheduler) and takes no other lock under it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from types import TracebackType

__all__ = ["IO_BOUND_RECHECK_S", "PythonGate"]

# How long a task found waiting (I/O-bound) runs without the gate before it is measured again.
IO_BOUND_RECHECK_S = 10.0
# A gated batch shorter than this says too little about its task to change anything.
_MIN_OBSERVED_S = 0.002


class PythonGate:
    """A FIFO lock: ``acquire`` waits until every earlier caller has released it."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._waiters: deque[threading.Lock] = deque()
        self._held = False
        # task -> monotonic time until which its batches skip the gate (set and read with the
        # GIL by the stream threads: single dict operations, no lock needed)
        self._ungated_until: dict[Hashable, float] = {}

    def gates(self, task: Hashable) -> bool:
        """Whether a batch of ``task`` (which calls Python processors) should take the gate: yes,
        unless the task was found waiting rather than computing in the last ``IO_BOUND_RECHECK_S``."""
        until = self._ungated_until.get(task)
        if until is None:
            return True
        if self._clock() < until:
            return False
        self._ungated_until.pop(task, None)
        return True

    def observe(self, task: Hashable, cpu_s: float, wall_s: float) -> None:
        """A gated batch of ``task`` ran ``wall_s`` seconds, ``cpu_s`` of them on the CPU."""
        if wall_s >= _MIN_OBSERVED_S and cpu_s < 0.5 * wall_s:
            self._ungated_until[task] = self._clock() + IO_BOUND_RECHECK_S

    def acquire(self) -> None:
        """Take the gate, after every thread that asked for it before."""
        with self._lock:
            if not self._held:
                self._held = True
                return
            turn = threading.Lock()
            turn.acquire()
            self._waiters.append(turn)
        # released by the holder's ``release``, which hands the gate over without freeing it
        turn.acquire()

    def release(self) -> None:
        """Give the gate to the longest waiting thread, or free it."""
        with self._lock:
            if not self._held:
                raise RuntimeError("PythonGate released while not held")
            if self._waiters:
                self._waiters.popleft().release()
            else:
                self._held = False

    @property
    def held(self) -> bool:
        """Whether some thread holds the gate."""
        return self._held

    def __enter__(self) -> PythonGate:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
