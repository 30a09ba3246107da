"""Pure-Python equivalents of the compiled buffer and collector, as benchmark baselines.

They do what a plain Python implementation would: records as tuples, a ``collections.deque``
behind a ``threading.Lock`` for the buffer, a dict of lists plus a dict per changelog partition
for collector suppression. The benchmarks compare the compiled structures with these.
"""

from __future__ import annotations

import threading
from collections import deque

import numpy as np
import pytest

from kstreams._native.record_batch import RecordBatch

__all__ = ["PyRecordBuffer", "PyRecordCollector", "make_batch", "make_tuples"]

Rec = tuple[bytes | None, bytes | None, int, int, int, None]


class PyRecordBuffer:
    """A FIFO of record tuples guarded by one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._q: deque[Rec] = deque()

    def push(self, records: list[Rec]) -> None:
        with self._lock:
            self._q.extend(records)

    def pop(self, max_records: int) -> list[Rec]:
        with self._lock:
            q = self._q
            n = min(max_records, len(q))
            return [q.popleft() for _ in range(n)]

    def __len__(self) -> int:
        return len(self._q)


class PyRecordCollector:
    """Output lists per (topic, partition); changelog partitions supersede older writes per key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parts: dict[tuple[str, int], list[Rec | None]] = {}
        self._latest: dict[tuple[str, int], dict[bytes, int]] = {}
        self._changelogs: set[tuple[str, int]] = set()
        self.suppressed_total = 0

    def register_changelog(self, topic: str, partition: int) -> None:
        self._changelogs.add((topic, partition))

    def send(self, topic: str, partition: int, key: bytes | None, value: bytes | None, ts: int) -> None:
        tp = (topic, partition)
        with self._lock:
            records = self._parts.setdefault(tp, [])
            if key is not None and tp in self._changelogs:
                latest = self._latest.setdefault(tp, {})
                old = latest.get(key)
                if old is not None:
                    records[old] = None
                    self.suppressed_total += 1
                latest[key] = len(records)
            records.append((key, value, ts, partition, -1, None))

    def send_records(self, topic: str, partition: int, records: list[Rec]) -> None:
        for key, value, ts, _, _, _ in records:
            self.send(topic, partition, key, value, ts)

    def drain(self) -> list[tuple[str, int, list[Rec]]]:
        with self._lock:
            parts, self._parts, self._latest = self._parts, {}, {}
        return [(t, p, [r for r in recs if r is not None]) for (t, p), recs in parts.items()]


def make_tuples(n: int, distinct_keys: int = 1000, value_size: int = 100) -> list[Rec]:
    value = b"x" * value_size
    return [(b"key-%d" % (i % distinct_keys), value, i, 0, i, None) for i in range(n)]


def make_batch(n: int, distinct_keys: int = 1000, value_size: int = 100) -> RecordBatch:
    value = b"x" * value_size
    keys = [b"key-%d" % (i % distinct_keys) for i in range(n)]
    return RecordBatch.from_columns(keys, [value] * n, np.arange(n), offsets=np.arange(n))


@pytest.fixture
def tuples_1000() -> list[Rec]:
    return make_tuples(1000)


@pytest.fixture
def batch_1000() -> RecordBatch:
    return make_batch(1000)


@pytest.fixture
def py_buffer_cls() -> type[PyRecordBuffer]:
    return PyRecordBuffer


@pytest.fixture
def py_collector_cls() -> type[PyRecordCollector]:
    return PyRecordCollector


@pytest.fixture
def records_factory() -> tuple:
    """(make_tuples, make_batch): build the same records as tuples or as a RecordBatch."""
    return make_tuples, make_batch
