"""StoreLock, the metered stores' query lock: threading.RLock's behaviour, taken in C on writes."""

from __future__ import annotations

import threading
import time

import pytest

from kstreams._native.store_access import StoreLock
from kstreams.serdes import Serdes
from kstreams.state.in_memory import InMemoryKeyValueStore
from kstreams.state.metered import MeteredKeyValueStore


def test_the_holder_takes_it_again_and_frees_it_after_as_many_releases() -> None:
    lock = StoreLock()
    assert lock.acquire() and lock.acquire()
    lock.release()
    taken = []
    other = threading.Thread(target=lambda: taken.append(lock.acquire(blocking=False)))
    other.start()
    other.join()
    assert taken == [False]  # still held once
    lock.release()
    other = threading.Thread(target=lambda: taken.append(lock.acquire(blocking=False)))
    other.start()
    other.join()
    assert taken == [False, True]


def test_only_the_holder_releases_it() -> None:
    lock = StoreLock()
    with pytest.raises(RuntimeError, match="un-acquired"):
        lock.release()
    lock.acquire()
    errors: list[BaseException] = []

    def release() -> None:
        try:
            lock.release()
        except RuntimeError as exc:
            errors.append(exc)

    other = threading.Thread(target=release)
    other.start()
    other.join()
    assert len(errors) == 1
    lock.release()


def test_a_waiter_gets_it_when_it_is_freed_and_a_timeout_gives_up() -> None:
    lock = StoreLock()
    got = threading.Event()
    with lock:
        started = time.monotonic()
        assert lock.acquire(timeout=0.05) is True  # the holder never waits
        lock.release()
        results: list[bool] = []
        waiter = threading.Thread(target=lambda: (results.append(lock.acquire(timeout=0.05)), got.set()))
        waiter.start()
        waiter.join(timeout=5)
        assert results == [False] and time.monotonic() - started >= 0.05
        got.clear()

        def take_and_release() -> None:
            with lock:
                got.set()

        waiter = threading.Thread(target=take_and_release)
        waiter.start()
        assert not got.wait(0.05)  # waits while this thread holds it
    assert got.wait(5)
    waiter.join(timeout=5)
    with pytest.raises(ValueError, match="timeout"):
        lock.acquire(blocking=False, timeout=1)


def test_metered_stores_query_lock_is_a_store_lock() -> None:
    store = MeteredKeyValueStore(InMemoryKeyValueStore("s"), Serdes.string(), Serdes.string())
    assert type(store.query_lock) is StoreLock


def test_threads_contending_for_it_never_hold_it_together_and_all_get_it() -> None:
    # Four threads take it 300 times each (some with timeouts that may give up), yielding the GIL
    # while they hold it so the others wait; at most one is ever inside, and every take that
    # succeeded is counted, nested takes included.
    lock = StoreLock()
    inside: list[int] = []
    overlaps: list[tuple[int, ...]] = []
    done = [0]
    start = threading.Barrier(4)

    def work(me: int) -> None:
        start.wait(timeout=5)
        for i in range(300):
            if not lock.acquire(timeout=0.2 if i % 3 == 0 else -1):
                continue
            try:
                inside.append(me)
                time.sleep(0)  # let the others run and find it held
                with lock:
                    if inside != [me]:
                        overlaps.append(tuple(inside))
                done[0] += 1
                inside.remove(me)
            finally:
                lock.release()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert overlaps == []
    assert 4 * 200 <= done[0] <= 4 * 300  # the untimed takes (200 per thread) all got it
    assert lock.acquire(blocking=False)
    lock.release()
