"""Waiting for a condition that other threads (stream threads, worker processes, a broker) make
true: the one wait of the tests, so none of them sleeps for a fixed time.

``wait_until`` checks its condition every ``every`` seconds (20 ms unless a caller whose condition
is expensive, such as reading a topic from a broker, asks for less often) by waiting on an Event,
and fails naming what it waited for; ``holds_within`` is the same wait answering whether the
condition held, for a test that asserts on it with a message of its own. ``assert_holds_for`` is
the other side: a condition that must stay true for a while (nothing more arrives, nothing fails).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["assert_holds_for", "holds_within", "wait_until"]

# How often a condition is checked unless the caller says otherwise.
EVERY_S = 0.02


def holds_within(condition: Callable[[], object], timeout: float, *, every: float = EVERY_S) -> bool:
    """Check ``condition`` every ``every`` seconds until it holds; True if it did within
    ``timeout`` seconds, False otherwise."""
    tick = threading.Event()  # never set: its wait is an interruptible pause
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        tick.wait(every)
    return True


def wait_until(
    condition: Callable[[], object],
    timeout: float,
    what: str | Callable[[], str],
    *,
    every: float = EVERY_S,
) -> None:
    """Check ``condition`` every ``every`` seconds until it holds; after ``timeout`` seconds fail
    with an AssertionError naming ``what`` (or what ``what()`` says then: what was seen)."""
    if not holds_within(condition, timeout, every=every):
        said = what() if callable(what) else what
        raise AssertionError(f"Timed out after {timeout}s waiting for {said}")


def assert_holds_for(
    condition: Callable[[], object],
    duration: float,
    what: str | Callable[[], str],
    *,
    every: float = EVERY_S,
) -> None:
    """Check ``condition`` every ``every`` seconds for ``duration`` seconds; the first time it does
    not hold, fail with an AssertionError naming ``what`` (or what ``what()`` says then)."""
    if holds_within(lambda: not condition(), duration, every=every):
        said = what() if callable(what) else what
        raise AssertionError(f"Within {duration}s, no longer {said}")
