"""The task manager on its own: tasks built from the topology plan, the collector and the
scheduler, on the embedded cluster (Kafka's TaskManagerTest)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kstreams._native.record_batch import RecordBatch
from kstreams.cluster import EmbeddedCluster
from kstreams.cluster.port import TopicPartition
from kstreams.processor import TaskId
from kstreams.runtime.tasks.task_manager import TaskManager, TaskState
from kstreams.serdes import Serdes
from tests.unit.runtime.runtime_parts import IN, OUT, Parts

STRING = Serdes.string()


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[Parts]:
    with EmbeddedCluster() as cluster:
        built = Parts(cluster, tmp_path, "task-manager")
        try:
            yield built
        finally:
            built.close()


def _batch(partition: int, *keys: str) -> RecordBatch:
    """Records of ``in``'s partition at offsets 0, 1, ... (as a poll returns them)."""
    n = len(keys)
    return RecordBatch.from_columns(
        [STRING.serialize(IN, k) for k in keys],
        [STRING.serialize(IN, "v")] * n,
        list(range(1, n + 1)),
        partition,
        list(range(n)),
    )


def test_polled_records_go_to_the_buffer_of_the_task_that_reads_their_partition(parts: Parts) -> None:
    tasks = parts.task_manager
    p0, p1 = TopicPartition(IN, 0), TopicPartition(IN, 1)
    assert tasks.tasks_for_partitions([p0, p1, TopicPartition("not-read", 0)]) == {
        TaskId(0, 0): [p0],
        TaskId(0, 1): [p1],
    }
    first = tasks.create(TaskId(0, 0), [p0])
    assert first.state is TaskState.RESTORING  # the restore thread owns it until it is activated
    assert tasks.route(p0, _batch(0, "a", "b")) == 2
    assert first.buffered() == 2
    # A partition no task reads (between a revocation and its poll): the records are dropped.
    assert tasks.route(p1, _batch(1, "c")) == -1


def test_a_running_task_is_handed_to_one_stream_thread_at_a_time(parts: Parts) -> None:
    entry = parts.running_task(0)
    parts.task_manager.route(TopicPartition(IN, 0), _batch(0, "a", "b", "c"))
    scheduler = parts.scheduler
    assert scheduler.next_task(1.0) == entry.handle
    got: list[int] = []
    other = threading.Thread(target=lambda: got.append(scheduler.next_task(0.2)))
    other.start()
    other.join(5.0)
    assert got == [-1], "a second thread got the task while the first held it"
    scheduler.release(entry.handle)
    other = threading.Thread(target=lambda: got.append(scheduler.next_task(5.0)))
    other.start()
    other.join(10.0)
    assert got == [-1, entry.handle], "the released task was not handed to the next thread"
    assert parts.task_manager.entry_for_handle(entry.handle) is entry
    scheduler.release(entry.handle)


def test_a_task_whose_directory_another_client_holds_waits_locked_until_it_is_free(
    parts: Parts, tmp_path: Path
) -> None:
    holder = parts.running_task(0)
    other = TaskManager(
        parts.plan,
        parts.config,
        parts.collector,
        parts.scheduler,
        parts.partition_count,
        str(tmp_path / "state" / parts.app_id),
    )
    try:
        waiting = other.create(TaskId(0, 0), [TopicPartition(IN, 0)])
        assert waiting.state is TaskState.LOCKED
        parts.task_manager.remove(holder, clean=True)
        assert holder.state is TaskState.CLOSED
        opened: list[object] = []
        stop = threading.Event()

        def retry() -> None:
            while not stop.is_set():
                opened.extend(other.retry_locked())
                if opened:
                    return
                stop.wait(0.05)

        thread = threading.Thread(target=retry)
        thread.start()
        thread.join(10.0)
        stop.set()
        assert opened == [waiting] and waiting.state is TaskState.RESTORING
    finally:
        other.close_all(clean=False)


def test_a_processed_task_sends_its_output_into_the_collector_and_offers_its_offsets(parts: Parts) -> None:
    entry = parts.running_task(1)
    entry.task.process(TopicPartition(IN, 1), _batch(1, "k", "k"))
    assert entry.task.committable_offsets() == {TopicPartition(IN, 1): 2}
    parts.task_manager.remove(entry, clean=True)
    outputs = [(t, len(b)) for t, _, b in parts.collector.drain()]
    assert (OUT, 2) in outputs  # the two running counts of "k" (a changelog keeps only the last)
    assert (f"{parts.app_id}-counts-changelog", 1) in outputs
    assert parts.task_manager.entry(TaskId(0, 1)) is None
    assert parts.task_manager.buffer_for(TopicPartition(IN, 1)) is None
