"""Retrying the cluster calls that a transient fault may fail (Kafka Streams' ``task.timeout.ms``).

A retriable ``ClusterError`` (a broker that is moving a leader, a request that timed out, a
coordinator that is loading) is what a Kafka client retries by itself: the application never sees
it. ``Retry.call`` does the same for the calls the runtime makes: it retries with an exponential
backoff starting at ``retry.backoff.ms`` until ``task.timeout.ms`` has passed, and only then raises
a ``StreamsException`` that names the operation, what it was for, and the last error. Errors that
retrying cannot fix (not retriable, a fenced producer, a refused commit) are raised at once.

``FailureWindow`` is the same rule for failures that recur across the polling thread's turns (a
poll, a send, a commit), where blocking in ``Retry.call`` would stop everything else the thread does.

Threads: a ``Retry`` holds no state between calls except its settings; any thread may use it. The
``stop`` event (the polling thread's) ends a wait early when the client closes, raising the last
error.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from kstreams.cluster.port import ClusterError, CommitFailedError, ProducerFencedError
from kstreams.config import StreamsConfig
from kstreams.errors import StreamsException

__all__ = ["FailureWindow", "Retry", "is_transient", "time_left"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

MAX_BACKOFF_S = 1.0


def is_transient(exc: BaseException) -> bool:
    """Whether trying the same call again may succeed."""
    return (
        isinstance(exc, ClusterError)
        and exc.retriable
        and not isinstance(exc, (ProducerFencedError, CommitFailedError))
    )


class Retry:
    """Retries transient cluster errors for up to ``task.timeout.ms`` (see the module docstring)."""

    def __init__(self, timeout_ms: int, backoff_ms: int, stop: threading.Event | None = None) -> None:
        self.timeout_s = timeout_ms / 1000.0
        self.backoff_s = backoff_ms / 1000.0
        self.stop = stop if stop is not None else threading.Event()

    @classmethod
    def from_config(cls, config: StreamsConfig, stop: threading.Event | None = None) -> Retry:
        return cls(int(config["task.timeout.ms"]), int(config["retry.backoff.ms"]), stop)

    def call(self, operation: str, fn: Callable[[], T], purpose: str = "") -> T:
        """``fn()``, retried while it raises a transient error and time is left."""
        deadline = time.monotonic() + self.timeout_s
        backoff = self.backoff_s
        attempts = 0
        while True:
            try:
                return fn()
            except ClusterError as exc:
                if not is_transient(exc):
                    raise
                attempts += 1
                if time.monotonic() + backoff > deadline:
                    raise self.timed_out(operation, purpose, exc, attempts) from exc
                logger.warning(
                    "%s%s failed (attempt %d), retrying in %.0f ms: %s",
                    operation,
                    f" ({purpose})" if purpose else "",
                    attempts,
                    backoff * 1000,
                    exc,
                )
                if self.stop.wait(backoff):
                    raise
                backoff = min(backoff * 2, MAX_BACKOFF_S)

    def wait(self, seconds: float) -> bool:
        """Sleep for a backoff; True if the client is stopping meanwhile."""
        return self.stop.wait(seconds)

    def timed_out(self, operation: str, purpose: str, exc: BaseException, attempts: int) -> StreamsException:
        return StreamsException(
            f"{operation}{f' ({purpose})' if purpose else ''} kept failing for task.timeout.ms="
            f"{int(self.timeout_s * 1000)} ({attempts} attempts); the last error: {exc}. Check that the "
            "cluster is reachable, or raise task.timeout.ms to ride out longer outages."
        )


class FailureWindow:
    """Failures of one kind that recur turn after turn until a success ends them (see the module
    docstring); used by one thread only."""

    def __init__(self, retry: Retry, purpose: str) -> None:
        self._retry = retry
        self._purpose = purpose
        self._since: float | None = None
        self.attempts = 0

    def failed(self, operation: str, exc: BaseException) -> None:
        """Count a failure; raise a ``StreamsException`` naming it once failures have lasted
        ``task.timeout.ms`` without a success."""
        now = time.monotonic()
        self.attempts += 1
        if self._since is None:
            self._since = now
        elif now - self._since > self._retry.timeout_s:
            raise self._retry.timed_out(operation, self._purpose, exc, self.attempts) from exc

    def back_off(self) -> None:
        """Wait before the next attempt, doubling from ``retry.backoff.ms`` up to 1 s."""
        self._retry.wait(min(self._retry.backoff_s * 2 ** max(self.attempts - 1, 0), MAX_BACKOFF_S))

    def succeeded(self) -> None:
        self._since = None
        self.attempts = 0


def time_left(deadline: float | None) -> float | None:
    """Seconds until a monotonic deadline (never negative), or None for no deadline."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())
