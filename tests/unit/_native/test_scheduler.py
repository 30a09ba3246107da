"""TaskScheduler: per-task locks, most-buffered-first picking, the commit barrier."""

from __future__ import annotations

import threading
import time

import pytest

from kstreams._native.record_batch import RecordBatch
from kstreams._native.record_buffer import RecordBuffer
from kstreams._native.scheduler import TaskScheduler

__all__: list[str] = []

WAIT = 5.0  # generous bound for events that should happen at once


def batch(n: int, start: int = 0) -> RecordBatch:
    """n records whose offsets start at ``start`` (offsets identify records in the stress test)."""
    return RecordBatch.from_columns(
        [b"k"] * n, [b"v"] * n, list(range(start, start + n)), 0, list(range(start, start + n))
    )


def make(*counts: int) -> tuple[TaskScheduler, list[RecordBuffer]]:
    """A scheduler with tasks 0..len(counts)-1, task i holding counts[i] records in one buffer."""
    scheduler = TaskScheduler()
    buffers = []
    for task_id, n in enumerate(counts):
        buf = RecordBuffer()
        if n:
            buf.push(batch(n))
        scheduler.register(task_id, [buf])
        buffers.append(buf)
    return scheduler, buffers


def in_thread(fn, *args) -> tuple[threading.Thread, list]:
    """Run fn in a thread; the returned list receives its result."""
    out: list = []
    thread = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    thread.start()
    return thread, out


def test_next_task_picks_most_buffered_first() -> None:
    scheduler, _ = make(3, 10, 0, 5)
    assert [scheduler.next_task(0) for _ in range(4)] == [1, 3, 0, -1]
    assert scheduler.holder_count() == 3


def test_buffered_sums_every_buffer_of_a_task() -> None:
    scheduler = TaskScheduler()
    a, b = RecordBuffer(), RecordBuffer()
    a.push(batch(2))
    b.push(batch(3))
    scheduler.register(7, [a, b])
    assert scheduler.buffered(7) == 5
    assert scheduler.task_ids() == [7]
    with pytest.raises(ValueError):
        scheduler.register(7, [])


def test_held_task_is_not_handed_out_again_until_released() -> None:
    scheduler, _ = make(5)
    assert scheduler.next_task(0) == 0
    assert scheduler.is_held(0)
    assert scheduler.next_task(0) == -1
    scheduler.release(0)
    assert not scheduler.is_held(0)
    assert scheduler.next_task(0) == 0


def test_release_of_unheld_task_raises() -> None:
    scheduler, _ = make(1)
    with pytest.raises(RuntimeError):
        scheduler.release(0)
    with pytest.raises(KeyError):
        scheduler.release(99)


def test_signal_makes_empty_task_eligible_once() -> None:
    scheduler, _ = make(0)
    assert scheduler.next_task(0) == -1
    scheduler.signal(0)
    assert scheduler.next_task(0) == 0
    scheduler.release(0)
    assert scheduler.next_task(0) == -1


def test_a_signalled_task_goes_before_tasks_with_more_records() -> None:
    # An idle task with a due wall-clock punctuation must not wait until busier tasks run dry.
    scheduler, _ = make(100, 0, 50)
    scheduler.signal(1)
    assert scheduler.next_task(0) == 1
    scheduler.release(1)
    assert scheduler.next_task(0) == 0  # the signal was taken: records rank again
    scheduler.signal(2)
    scheduler.signal(1)
    # Among signalled tasks, the least recently served goes first.
    assert [scheduler.next_task(0), scheduler.next_task(0), scheduler.next_task(0)] == [2, 1, -1]


def test_equal_counts_go_to_least_recently_served() -> None:
    scheduler, _ = make(0, 0)
    scheduler.signal(0)
    scheduler.signal(1)
    first = scheduler.next_task(0)
    scheduler.release(first)
    scheduler.signal(first)
    assert scheduler.next_task(0) == 1 - first


def test_waiter_wakes_on_push_and_notify() -> None:
    scheduler, buffers = make(0)
    thread, out = in_thread(scheduler.next_task, WAIT)
    buffers[0].push(batch(1))
    scheduler.notify()
    thread.join(WAIT)
    assert out == [0]


def test_next_task_times_out_with_minus_one() -> None:
    scheduler, _ = make(0)
    start = time.monotonic()
    assert scheduler.next_task(0.05) == -1
    assert time.monotonic() - start >= 0.04


def test_failed_task_is_skipped_until_reset() -> None:
    scheduler, _ = make(5, 1)
    assert scheduler.next_task(0) == 0
    scheduler.fail(0)
    scheduler.release(0)
    assert scheduler.is_failed(0)
    assert scheduler.next_task(0) == 1
    assert scheduler.next_task(0) == -1
    scheduler.reset(0)
    assert scheduler.next_task(0) == 0


def test_pause_all_waits_for_held_tasks_and_blocks_new_ones_until_resume() -> None:
    scheduler, _ = make(5, 5)
    assert scheduler.next_task(0) in (0, 1)
    held = 0 if scheduler.is_held(0) else 1
    pauser, paused = in_thread(scheduler.pause_all, WAIT)
    deadline = time.monotonic() + WAIT
    while not scheduler.pause_requested and time.monotonic() < deadline:
        pauser.join(0.001)  # the pauser sets the flag as it enters pause_all
    assert scheduler.pause_requested
    assert scheduler.next_task(0) == -1  # the free task is not handed out while pausing
    assert paused == []
    scheduler.release(held)
    pauser.join(WAIT)
    assert paused == [True]
    assert scheduler.next_task(0.01) == -1
    scheduler.resume_all()
    assert not scheduler.pause_requested
    assert scheduler.next_task(0) in (0, 1)


def test_pause_all_times_out_while_a_task_stays_held() -> None:
    scheduler, _ = make(1)
    assert scheduler.next_task(0) == 0
    assert scheduler.pause_all(0.02) is False
    assert scheduler.pause_requested
    scheduler.resume_all()


def test_resume_all_wakes_waiters() -> None:
    scheduler, _ = make(1)
    assert scheduler.pause_all(WAIT)
    thread, out = in_thread(scheduler.next_task, WAIT)
    scheduler.resume_all()
    thread.join(WAIT)
    assert out == [0]


def test_wake_all_returns_minus_one_to_every_current_waiter() -> None:
    scheduler, _ = make(0)
    waiters = [in_thread(scheduler.next_task, 30.0) for _ in range(3)]
    # A wake_all reaches only threads already waiting, so repeat it until every waiter is out.
    deadline = time.monotonic() + WAIT
    while any(t.is_alive() for t, _ in waiters) and time.monotonic() < deadline:
        scheduler.wake_all()
        for thread, _ in waiters:
            thread.join(0.005)
    for thread, out in waiters:
        thread.join(WAIT)
        assert out == [-1]
    scheduler.signal(0)
    assert scheduler.next_task(0) == 0  # later callers are unaffected


def test_shutdown_wakes_waiters_and_ends_scheduling() -> None:
    scheduler, _ = make(0)
    thread, out = in_thread(scheduler.next_task, 30.0)
    scheduler.shutdown()
    thread.join(WAIT)
    assert out == [-1]
    scheduler.signal(0)
    assert scheduler.next_task(0) == -1


def test_unregister_waits_until_task_is_released() -> None:
    scheduler, _ = make(3)
    assert scheduler.next_task(0) == 0
    thread, out = in_thread(scheduler.unregister, 0, WAIT)
    thread.join(0.02)
    assert out == []  # still held
    scheduler.release(0)
    thread.join(WAIT)
    assert out == [True]
    assert scheduler.task_ids() == []
    assert scheduler.unregister(0) is True  # unknown ids are fine


def test_unregister_timeout_keeps_task_registered_and_schedulable() -> None:
    scheduler, _ = make(3)
    assert scheduler.next_task(0) == 0
    assert scheduler.unregister(0, 0.02) is False
    scheduler.release(0)
    assert scheduler.task_ids() == [0]
    assert scheduler.next_task(0) == 0


def test_stress_never_two_holders_and_every_record_popped_exactly_once() -> None:
    n_tasks, n_threads, n_batches, batch_size = 16, 8, 400, 25
    scheduler = TaskScheduler()
    buffers = {t: [RecordBuffer(), RecordBuffer()] for t in range(n_tasks)}
    for task_id, bufs in buffers.items():
        scheduler.register(task_id, bufs)
    in_use = [False] * n_tasks
    popped: list[list[int]] = [[] for _ in range(n_threads)]
    violations: list[str] = []
    pushed_all = threading.Event()
    total = n_batches * batch_size

    def push() -> None:
        for i in range(n_batches):
            task_id = (i * 7) % n_tasks
            buffers[task_id][i % 2].push(batch(batch_size, i * batch_size))
            scheduler.notify()
        pushed_all.set()

    def work(worker: int) -> None:
        while True:
            task_id = scheduler.next_task(0.05)
            if task_id < 0:
                if pushed_all.is_set() and all(scheduler.buffered(t) == 0 for t in range(n_tasks)):
                    return
                continue
            if in_use[task_id]:
                violations.append(f"task {task_id} handed to two threads")
            in_use[task_id] = True
            for buf in buffers[task_id]:
                popped[worker].extend(buf.pop(10).offsets_array().tolist())
            in_use[task_id] = False
            scheduler.release(task_id)

    threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(n_threads)]
    threads.append(threading.Thread(target=push, daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive()
    assert violations == []
    everything = sorted(o for per_worker in popped for o in per_worker)
    assert everything == list(range(total))
    assert scheduler.holder_count() == 0
