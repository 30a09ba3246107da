"""The tests' one wait: it fails naming what it waited for, and a condition that must stay true
fails the moment it turns false (both decide whether a threaded test can fail at all)."""

from __future__ import annotations

import threading
import time

import pytest

from tests.support.waiting import assert_holds_for, holds_within, wait_until


def test_wait_until_returns_once_another_thread_makes_the_condition_true() -> None:
    done = threading.Event()
    threading.Timer(0.05, done.set).start()
    wait_until(done.is_set, 5, "the timer")


def test_wait_until_fails_naming_what_was_seen() -> None:
    with pytest.raises(AssertionError, match=r"Timed out after 0.05s waiting for seen 3"):
        wait_until(lambda: False, 0.05, lambda: "seen 3")
    assert not holds_within(lambda: False, 0.05)


def test_assert_holds_for_fails_as_soon_as_the_condition_turns_false() -> None:
    started = time.monotonic()
    with pytest.raises(AssertionError, match="no longer nothing arrived"):
        assert_holds_for(lambda: time.monotonic() - started < 0.05, 10, "nothing arrived")
    assert time.monotonic() - started < 5


def test_assert_holds_for_returns_after_its_duration_when_the_condition_stays_true() -> None:
    checks: list[float] = []

    def still_true() -> bool:
        checks.append(time.monotonic())
        return True

    assert_holds_for(still_true, 0.1, "true", every=0.01)
    assert len(checks) >= 2 and checks[-1] - checks[0] >= 0.1
