"""PythonGate: one holder at a time, handed over in arrival order."""

from __future__ import annotations

import threading
import time

import pytest

from kstreams.runtime.threads.python_gate import IO_BOUND_RECHECK_S, PythonGate


def _until_queued(gate: PythonGate, waiters: int) -> None:
    """Wait until ``waiters`` threads are queued on the gate (nothing signals that it happened)."""
    deadline = time.monotonic() + 10
    while len(gate._waiters) < waiters:
        assert time.monotonic() < deadline, "the waiter never queued"
        time.sleep(0.001)


def test_gate_is_free_after_release() -> None:
    gate = PythonGate()
    with gate:
        assert gate.held
    assert not gate.held


def test_release_without_holding_raises() -> None:
    with pytest.raises(RuntimeError):
        PythonGate().release()


def test_waiters_get_the_gate_in_arrival_order() -> None:
    gate = PythonGate()
    gate.acquire()
    order: list[int] = []

    def wait_turn(n: int) -> None:
        with gate:
            order.append(n)

    threads = [threading.Thread(target=wait_turn, args=(n,)) for n in range(3)]
    for n, thread in enumerate(threads):
        thread.start()
        _until_queued(gate, n + 1)
    gate.release()
    for thread in threads:
        thread.join(10)
    assert order == [0, 1, 2]
    assert not gate.held


def test_a_holder_asking_again_waits_behind_a_waiter() -> None:
    gate = PythonGate()
    gate.acquire()
    got = threading.Event()

    def waiter() -> None:
        with gate:
            got.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    _until_queued(gate, 1)
    gate.release()  # handed to the waiter, not freed
    with gate:  # so this gets it only after the waiter let go
        assert got.is_set()
    thread.join(10)


def test_a_task_that_computes_keeps_the_gate() -> None:
    gate = PythonGate()
    gate.observe("task", cpu_s=0.009, wall_s=0.01)
    assert gate.gates("task")


def test_a_task_that_waits_skips_the_gate_until_it_is_measured_again() -> None:
    now = [100.0]
    gate = PythonGate(clock=lambda: now[0])
    gate.observe("waits", cpu_s=0.001, wall_s=0.05)
    gate.observe("short", cpu_s=0.0, wall_s=0.0005)  # too short to say anything
    assert not gate.gates("waits")
    assert gate.gates("short")
    now[0] += IO_BOUND_RECHECK_S
    assert gate.gates("waits")
