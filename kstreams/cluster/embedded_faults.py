"""Fault injection for the embedded broker: make the next calls of a client operation fail.

``EmbeddedCluster.fail_next("send", times=2)`` makes the next two ``Producer.send`` calls (of any
producer of that cluster) raise a retriable ``ClusterError`` before doing anything, so tests of the
runtime can exercise its retry and error paths. A given ``error`` instance is raised instead.

Threads: ``FaultInjector`` guards its table with its own lock, a leaf: it never calls out while
holding it, so it may be taken with or without the cluster lock held.
"""

from __future__ import annotations

import logging
import threading
from collections import deque

from kstreams.cluster.port import ClusterError

__all__ = ["OPERATIONS", "FaultInjector"]

logger = logging.getLogger(__name__)

# Every operation name fail_next accepts: the methods of the Admin, Producer and Consumer clients.
OPERATIONS = frozenset(
    {
        # Admin
        "create_topics",
        "describe_topics",
        "delete_topics",
        "alter_topic_config",
        "create_partitions",
        "list_offsets",
        "delete_records",
        "committed_offsets",
        "alter_committed_offsets",
        "group_members",
        "offsets_for_times",
        # Producer
        "send",
        "flush",
        "partitions_for",
        "init_transactions",
        "begin_transaction",
        "send_offsets_to_transaction",
        "commit_transaction",
        "abort_transaction",
        # Consumer
        "poll",
        "commit",
        "committed",
        "end_offsets",
    }
)


class FaultInjector:
    """A table of armed failures per operation name; each ``check`` consumes one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: dict[str, deque[Exception]] = {}

    def arm(self, operation: str, times: int = 1, error: Exception | None = None) -> None:
        if operation not in OPERATIONS:
            raise ValueError(
                f"fail_next: unknown operation {operation!r}; choose one of {', '.join(sorted(OPERATIONS))}"
            )
        if times < 1:
            raise ValueError(f"fail_next: times must be at least 1, got {times}")
        with self._lock:
            queue = self._armed.setdefault(operation, deque())
            for _ in range(times):
                queue.append(
                    error
                    if error is not None
                    else ClusterError(f"Injected failure of {operation} (EmbeddedCluster.fail_next)", True)
                )

    def check(self, operation: str) -> None:
        """Raise the next armed failure of this operation, if there is one."""
        with self._lock:
            queue = self._armed.get(operation)
            if not queue:
                return
            error = queue.popleft()
        logger.info("Injecting a failure of %s: %r", operation, error)
        raise error

    def clear(self) -> None:
        with self._lock:
            self._armed.clear()
