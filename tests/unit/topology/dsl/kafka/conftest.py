"""Fixtures of the ported Kafka DSL tests (the folder's ``drive`` comes from the DSL conftest
above): ``captured``, the records a processor at the end of a stream saw, as Kafka's
``MockApiProcessorSupplier`` keeps them."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams.processor import Processor, Record


class Captured:
    """``stream.process(captured.supplier)`` keeps every record reaching the end of ``stream``
    as (key, value, timestamp) in ``processed``, in arrival order, across all its tasks."""

    def __init__(self) -> None:
        self.processed: list[tuple[Any, Any, int]] = []

    def supplier(self) -> Processor[Any, Any, Any, Any]:
        processed = self.processed

        class _Keep(Processor[Any, Any, Any, Any]):
            def process(self, record: Record[Any, Any]) -> None:
                processed.append((record.key, record.value, record.timestamp))

        return _Keep()

    def take(self) -> list[tuple[Any, Any, int]]:
        """The records seen since the last ``take``."""
        taken = list(self.processed)
        self.processed.clear()
        return taken


@pytest.fixture
def captured() -> Captured:
    return Captured()
