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
