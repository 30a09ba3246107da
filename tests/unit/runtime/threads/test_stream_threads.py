"""The stream threads on their own (``StreamThreads``), built from the scheduler, the task manager
and what they need of the polling thread, on the embedded cluster: they process the running tasks'
buffered records, and the record cache budget is redivided as threads come and go (KIP-663)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kstreams._native.record_batch import RecordBatch
from kstreams.cluster import EmbeddedCluster
from kstreams.cluster.port import TopicPartition
from kstreams.runtime.threads.stream_thread import StreamThread
from kstreams.runtime.threads.stream_threads import StreamThreads
from kstreams.serdes import Serdes
from tests.unit.runtime.runtime_parts import IN, OUT, Parts, wait_until

STRING = Serdes.string()
BUDGET = 3 * 1024 * 1024


class _InlinePolling:
    """The polling thread's side of the contract, run on the caller (no polling thread here).
    ``still_buffered``, when set, is asked at each ``output_ready`` how many records are left."""

    def __init__(self, still_buffered: Callable[[], int] | None = None) -> None:
        self.outputs_ready = 0
        self.buffered_at_output: list[int] = []
        self._still_buffered = still_buffered

    def is_alive(self) -> bool:
        return True

    def call(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        return fn()

    def output_ready(self) -> None:
        self.outputs_ready += 1
        if self._still_buffered is not None:
            self.buffered_at_output.append(self._still_buffered())


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[Parts]:
    with EmbeddedCluster() as cluster:
        built = Parts(cluster, tmp_path, "stream-threads", **{"statestore.cache.max.bytes": BUDGET})
        try:
            yield built
        finally:
            built.scheduler.shutdown()
            built.close()


def _threads(parts: Parts, polling: _InlinePolling, failures: list[Any]) -> StreamThreads:
    return StreamThreads(
        "client",
        parts.config,
        parts.scheduler,
        parts.task_manager,
        parts.metrics,
        polling,
        lambda thread, handle, exc, replace: failures.append((thread, exc, replace)),
        lambda task_id: parts.metrics.sensor("process", "stream-task-metrics", {"task-id": str(task_id)}),
    )


def _batch(partition: int, *keys: str) -> RecordBatch:
    n = len(keys)
    return RecordBatch.from_columns(
        [STRING.serialize(IN, k) for k in keys],
        [STRING.serialize(IN, "v")] * n,
        [1] * n,
        partition,
        list(range(n)),
    )


def test_the_threads_process_every_running_tasks_buffered_records(parts: Parts) -> None:
    polling, failures = _InlinePolling(), []
    threads = _threads(parts, polling, failures)
    entries = [parts.running_task(0), parts.running_task(1)]
    threads.start(2)
    try:
        parts.task_manager.route(TopicPartition(IN, 0), _batch(0, "a", "a"))
        parts.task_manager.route(TopicPartition(IN, 1), _batch(1, "b"))
        parts.scheduler.notify()
        wait_until(lambda: all(e.buffered() == 0 for e in entries), 20, "the buffers drained")
        wait_until(lambda: polling.outputs_ready > 0, 10, "the polling thread told of output")
        outputs = sum(len(b) for t, _, b in parts.collector.drain() if t == OUT)
        assert outputs == 3
        assert failures == []
    finally:
        assert threads.stop(None)


def test_each_batchs_output_is_announced_before_the_tasks_buffer_is_drained(tmp_path: Path) -> None:
    # While records keep arriving a task is processed batch after batch for up to its time slice;
    # its output must reach the polling thread after each batch, not once the slice ends.
    with EmbeddedCluster() as cluster:
        parts = Parts(cluster, tmp_path, "stream-threads-batches", **{"processing.batch.size": 10})
        try:
            entry = parts.running_task(0)
            polling = _InlinePolling(entry.buffered)
            parts.task_manager.route(TopicPartition(IN, 0), _batch(0, *(f"k{i}" for i in range(300))))
            threads = _threads(parts, polling, [])
            threads.start(1)
            try:
                parts.scheduler.notify()
                wait_until(lambda: entry.buffered() == 0, 20, "the buffer drained")
                wait_until(lambda: polling.outputs_ready >= 30, 10, "every batch's output announced")
            finally:
                assert threads.stop(None)
            assert any(left > 0 for left in polling.buffered_at_output), polling.buffered_at_output
            assert sum(len(b) for t, _, b in parts.collector.drain() if t == OUT) == 300
        finally:
            parts.scheduler.shutdown()
            parts.close()


def test_threads_added_and_removed_share_the_cache_budget_equally(parts: Parts) -> None:
    threads = _threads(parts, _InlinePolling(), [])
    threads.start(2)
    try:
        assert sorted(t.name for t in threads.live()) == ["client-StreamThread-1", "client-StreamThread-2"]
        assert {t.cache.max_bytes for t in threads.live()} == {BUDGET // 2}
        added = threads.add(lambda: True)
        assert isinstance(added, StreamThread) and added.name == "client-StreamThread-3"
        assert {t.cache.max_bytes for t in threads.live()} == {BUDGET // 3}
        victim = threads.request_removal()
        assert victim is not None and victim.wait_dead(10.0)
        threads.resize_caches(exclude=victim)
        assert len(threads.live()) == 2
        assert {t.cache.max_bytes for t in threads.live()} == {BUDGET // 2}
        assert threads.add(lambda: False) is None  # the client said no (not running)
    finally:
        assert threads.stop(None)
