"""TaskScheduler against a plain-Python scheduler (threading.Lock + Condition, linear scan).

Run with ``pytest bench/test_bench_scheduler.py``; not part of the default test run.
"""

from __future__ import annotations

import threading
import time

import pytest

from kstreams._native.record_batch import RecordBatch
from kstreams._native.record_buffer import RecordBuffer
from kstreams._native.scheduler import TaskScheduler

__all__ = ["PyTaskScheduler"]

BENCH = pytest.mark.benchmark(max_time=0.5, min_rounds=5, warmup=False)
N_TASKS = 16
CYCLES = 2000


class PyTaskScheduler:
    """next_task/release/notify in plain Python: one Condition, a linear scan for the fullest task."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._buffers: dict[int, list[RecordBuffer]] = {}
        self._held: set[int] = set()

    def register(self, task_id: int, buffers: list[RecordBuffer]) -> None:
        with self._cond:
            self._buffers[task_id] = list(buffers)
            self._cond.notify_all()

    def next_task(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                best, best_n = -1, 0
                for task_id, bufs in self._buffers.items():
                    if task_id in self._held:
                        continue
                    n = sum(len(b) for b in bufs)
                    if n > best_n:
                        best, best_n = task_id, n
                if best >= 0:
                    self._held.add(best)
                    return best
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return -1
                self._cond.wait(remaining)

    def release(self, task_id: int) -> None:
        with self._cond:
            self._held.discard(task_id)
            self._cond.notify_all()

    def notify(self) -> None:
        with self._cond:
            self._cond.notify_all()


@pytest.fixture(params=["native", "python"])
def scheduler_cls(request: pytest.FixtureRequest) -> type:
    return TaskScheduler if request.param == "native" else PyTaskScheduler


def _loaded(scheduler_cls: type) -> object:
    """A scheduler over 16 tasks, each with two buffers holding a few records (never drained)."""
    scheduler = scheduler_cls()
    for task_id in range(N_TASKS):
        bufs = [RecordBuffer(), RecordBuffer()]
        for b in bufs:
            b.push(
                RecordBatch.from_columns([b"k"] * (task_id + 1), [b"v"] * (task_id + 1), [0] * (task_id + 1))
            )
        scheduler.register(task_id, bufs)
    return scheduler


@BENCH
@pytest.mark.benchmark(group="scheduler: 2000 next_task/release cycles, 1 thread, 16 tasks")
def test_cycles_one_thread(benchmark, scheduler_cls: type) -> None:
    scheduler = _loaded(scheduler_cls)
    next_task, release = scheduler.next_task, scheduler.release

    def run() -> None:
        for _ in range(CYCLES):
            release(next_task(1.0))

    benchmark(run)


@BENCH
@pytest.mark.benchmark(group="scheduler: 4 threads x 1000 next_task/release cycles, 16 tasks")
def test_cycles_four_threads(benchmark, scheduler_cls: type) -> None:
    scheduler = _loaded(scheduler_cls)

    def worker() -> None:
        next_task, release = scheduler.next_task, scheduler.release
        for _ in range(CYCLES // 2):
            task_id = next_task(5.0)
            if task_id >= 0:
                release(task_id)

    def run() -> None:
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    benchmark(run)


@BENCH
@pytest.mark.benchmark(group="scheduler: 2000 notify calls")
def test_notify(benchmark, scheduler_cls: type) -> None:
    scheduler = _loaded(scheduler_cls)
    notify = scheduler.notify

    def run() -> None:
        for _ in range(CYCLES):
            notify()

    benchmark(run)
