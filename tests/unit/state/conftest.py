"""Fixtures for store tests: a recording StateStoreContext.

The context is a small fake of what a task gives its stores; it records registrations and changelog
writes so tests can assert what a store layer does with them. Given a ``MetricsRegistry`` it hands
it to the stores, as a client's task does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kstreams.metrics import MetricsRegistry


class RecordingContext:
    """A StateStoreContext that records registrations and changelog writes."""

    def __init__(
        self, state_dir: Path, cache: Any = None, task_id: str = "0_0", metrics: MetricsRegistry | None = None
    ) -> None:
        self._state_dir = state_dir
        self._cache = cache
        self.application_id = "app"
        self.task_id = task_id
        self.app_configs: dict[str, Any] = {}
        self.metrics = metrics
        self.client_id = "client-1" if metrics is not None else None
        self.timestamp = 0
        self.registered: dict[str, Callable[[list[tuple[bytes, bytes | None]]], None]] = {}
        self.changelog: list[tuple[str, bytes, bytes | None, int]] = []
        self.changelog_headers: list[Any] = []

    def state_dir(self) -> str:
        self._state_dir.mkdir(parents=True, exist_ok=True)
        return str(self._state_dir)

    def register(
        self, store: Any, restore_callback: Callable[[list[tuple[bytes, bytes | None]]], None]
    ) -> None:
        self.registered[store.name] = restore_callback

    def log_change(
        self, store_name: str, key: bytes, value: bytes | None, timestamp: int, headers: Any = None
    ) -> None:
        self.changelog.append((store_name, key, value, timestamp))
        self.changelog_headers.append(headers)

    def log_changes(self, store_name: str, changes: Any) -> None:
        for key, value, timestamp, *_ in changes:
            self.changelog.append((store_name, key, value, timestamp))

    def record_cache(self) -> Any:
        return self._cache

    def current_timestamp(self) -> int:
        return self.timestamp


@pytest.fixture
def make_context(tmp_path: Path) -> Callable[..., RecordingContext]:
    """Factory: make_context(cache=None, task_id="0_0", state_dir=None, metrics=None) -> RecordingContext."""

    def make(
        cache: Any = None,
        task_id: str = "0_0",
        state_dir: Path | None = None,
        metrics: MetricsRegistry | None = None,
    ) -> RecordingContext:
        return RecordingContext(state_dir or tmp_path / "task", cache=cache, task_id=task_id, metrics=metrics)

    return make


@pytest.fixture
def open_store(make_context: Callable[..., RecordingContext]) -> Iterator[Callable[[Any], Any]]:
    """open_store(store) -> store: initialised with a fresh context, closed after the test."""
    opened: list[Any] = []

    def open_(store: Any) -> Any:
        store.init(make_context(), store)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()
