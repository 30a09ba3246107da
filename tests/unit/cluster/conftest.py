"""Fixtures of the cluster tests: a group listener that records its callbacks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from kstreams.cluster import TopicPartition


class RecordingListener:
    """A GroupListener that records every callback as (kind, payload) and tracks what it owns.

    ``on_revoked`` (optional) runs inside on_partitions_revoked, as a runtime commits there."""

    def __init__(self, on_revoked: Callable[[list[TopicPartition]], None] | None = None) -> None:
        self.events: list[tuple[str, Any]] = []
        self.owned: set[TopicPartition] = set()
        self.errors: list[int] = []
        self._on_revoked = on_revoked
        self.changed = threading.Event()

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        if self._on_revoked is not None:
            self._on_revoked(partitions)
        self.events.append(("revoked", partitions))
        self.owned.difference_update(partitions)
        self.changed.set()

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.events.append(("assigned", partitions))
        self.owned.update(partitions)
        self.changed.set()

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self.events.append(("lost", partitions))
        self.owned.difference_update(partitions)
        self.changed.set()

    def on_assignment_error(self, code: int) -> None:
        self.events.append(("error", code))
        self.errors.append(code)
        self.changed.set()

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]


@pytest.fixture
def listener() -> Callable[..., RecordingListener]:
    """A factory of recording listeners."""
    return RecordingListener
