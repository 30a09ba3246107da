"""The polling thread on its own, built from its parts (``PollingParts``) on the embedded cluster
with no KafkaStreams client (Kafka's StreamThreadTest): it joins the group, creates and restores
the assigned tasks, polls into their buffers, sends their output, commits on the interval, runs
other threads' calls between turns and commits everything when it stops."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kstreams.cluster import EmbeddedCluster
from kstreams.cluster.port import TopicPartition
from kstreams.runtime.internal_topics.manager import InternalTopicManager, SetupResult
from kstreams.runtime.tasks.task_manager import TaskEntry, TaskState
from kstreams.runtime.threads.polling_parts import Failure
from kstreams.runtime.threads.polling_thread import PollingThread
from kstreams.serdes import Serdes
from tests.unit.runtime.runtime_parts import IN, OUT, Parts, wait_until

STRING = Serdes.string()
LONG = Serdes.long()


class _Hooks:
    """What the client would be told, recorded."""

    def __init__(self, internal_topics: InternalTopicManager) -> None:
        self._internal_topics = internal_topics
        self.lock = threading.Lock()
        self.events: list[str] = []
        self.failures: list[Failure] = []

    def on_rebalance_started(self) -> None:
        with self.lock:
            self.events.append("started")

    def on_rebalance_finished(self) -> None:
        with self.lock:
            self.events.append("finished")

    def on_failure(self, failure: Failure) -> None:
        with self.lock:
            self.failures.append(failure)

    def on_application_error(self, code: int) -> None:
        with self.lock:
            self.events.append(f"error {code}")

    def on_assignment(self) -> SetupResult:
        return self._internal_topics.setup_for_rebalance()


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Parts, PollingThread, _Hooks]]:
    with EmbeddedCluster() as cluster:
        parts = Parts(cluster, tmp_path, "polling", **{"commit.interval.ms": 100})
        hooks = _Hooks(InternalTopicManager(parts.admin, parts.config, parts.plan))
        polling = PollingThread("polling-PollingThread", parts.polling_parts(), hooks)
        parts.forward_restored = polling.restored
        parts.state_updater.start()
        polling.start()
        try:
            yield parts, polling, hooks
        finally:
            if polling.is_alive():
                polling.request_stop()
                polling.join(30.0)
            parts.close()


def _produce(parts: Parts, *keys_by_partition: tuple[int, str]) -> None:
    for partition, key in keys_by_partition:
        parts.cluster.produce(IN, STRING.serialize(IN, key), STRING.serialize(IN, "v"), partition=partition)


def _process_one_turn(parts: Parts) -> int:
    """Act as a stream thread once: take a task from the scheduler, process what it buffered."""
    handle = parts.scheduler.next_task(1.0)
    if handle < 0:
        return 0
    try:
        entry = parts.task_manager.entry_for_handle(handle)
        assert entry is not None
        done = 0
        for tp, buffer in entry.ordered:
            batch = buffer.pop(1000)
            if len(batch):
                entry.task.process(tp, batch)
                done += len(batch)
        return done
    finally:
        parts.scheduler.release(handle)


def _running(parts: Parts) -> list[TaskEntry]:
    return [e for e in parts.task_manager.entries() if e.state is TaskState.RUNNING]


def test_assigned_tasks_are_created_restored_and_run_and_the_rebalance_is_reported(
    running: tuple[Parts, PollingThread, _Hooks],
) -> None:
    parts, _, hooks = running
    wait_until(lambda: len(_running(parts)) == 2, 20, "both tasks running")
    wait_until(lambda: "finished" in hooks.events, 10, "the end of the rebalance")
    assert hooks.events[:2] == ["started", "finished"]
    assert sorted(str(e.task_id) for e in parts.task_manager.entries()) == ["0_0", "0_1"]
    assert hooks.failures == []


def test_polled_records_land_in_their_tasks_buffers(running: tuple[Parts, PollingThread, _Hooks]) -> None:
    parts, _, _ = running
    wait_until(lambda: len(_running(parts)) == 2, 20, "both tasks running")
    _produce(parts, (0, "a"), (0, "b"), (1, "c"))
    buffered = {TopicPartition(IN, 0): 2, TopicPartition(IN, 1): 1}

    def routed() -> bool:
        return all(
            (buffer := parts.task_manager.buffer_for(tp)) is not None and len(buffer) == n
            for tp, n in buffered.items()
        )

    wait_until(routed, 10, "the records in their partitions' buffers")


def test_output_is_sent_and_offsets_are_committed_on_the_interval(
    running: tuple[Parts, PollingThread, _Hooks],
) -> None:
    parts, _, _ = running
    wait_until(lambda: len(_running(parts)) == 2, 20, "both tasks running")
    _produce(parts, (0, "a"), (0, "a"), (1, "b"))
    processed = 0

    def all_processed() -> bool:
        nonlocal processed
        processed += _process_one_turn(parts)
        return processed == 3

    wait_until(all_processed, 20, "the three records processed")
    partitions = [TopicPartition(IN, 0), TopicPartition(IN, 1)]
    expected = {partitions[0]: 2, partitions[1]: 1}
    wait_until(
        lambda: parts.admin.committed_offsets(parts.app_id, partitions) == expected,
        10,
        "the interval's commit",
    )
    counts = sorted(
        (STRING.deserialize(OUT, r.key), LONG.deserialize(OUT, r.value)) for r in parts.cluster.read(OUT)
    )
    assert counts == [("a", 1), ("a", 2), ("b", 1)]


def test_a_call_from_another_thread_runs_on_the_polling_thread(
    running: tuple[Parts, PollingThread, _Hooks],
) -> None:
    _, polling, _ = running
    assert polling.call(threading.current_thread, timeout=10.0) is polling
    with pytest.raises(ValueError, match="raised on the polling thread"):
        polling.call(lambda: (_ for _ in ()).throw(ValueError("raised on the polling thread")), timeout=10.0)


def test_stopping_commits_and_closes_every_task(
    running: tuple[Parts, PollingThread, _Hooks],
) -> None:
    parts, polling, _ = running
    wait_until(lambda: len(_running(parts)) == 2, 20, "both tasks running")
    _produce(parts, (1, "z"))
    wait_until(lambda: _process_one_turn(parts) == 1, 20, "the record processed")
    polling.request_stop()
    polling.join(30.0)
    assert not polling.is_alive()
    assert polling.closed_cleanly
    assert parts.task_manager.entries() == []
    assert parts.admin.committed_offsets(parts.app_id, [TopicPartition(IN, 1)]) == {TopicPartition(IN, 1): 1}
