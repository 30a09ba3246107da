"""The committer on its own: the commit of every task at once, built from the scheduler, the task
manager, the record collector, the main consumer and the producer on the embedded cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kstreams.cluster import EmbeddedCluster
from kstreams.cluster.port import TopicPartition
from kstreams.serdes import Serdes
from tests.unit.runtime.runtime_parts import IN, OUT, Parts, wait_until

STRING = Serdes.string()
LONG = Serdes.long()
GUARANTEES = ["at_least_once", "exactly_once_v2"]


class _NoCallbacks:
    """A group listener for a consumer whose test creates the tasks itself."""

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None: ...

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None: ...

    def on_assignment_error(self, code: int) -> None: ...


def _parts(tmp_path: Path, guarantee: str) -> Iterator[Parts]:
    with EmbeddedCluster() as cluster:
        built = Parts(cluster, tmp_path, "committer", **{"processing.guarantee": guarantee})
        try:
            yield built
        finally:
            built.close()


@pytest.fixture(params=GUARANTEES)
def parts(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Parts]:
    yield from _parts(tmp_path, request.param)


@pytest.fixture
def eos_parts(tmp_path: Path) -> Iterator[Parts]:
    yield from _parts(tmp_path, "exactly_once_v2")


@pytest.fixture
def alo_parts(tmp_path: Path) -> Iterator[Parts]:
    yield from _parts(tmp_path, "at_least_once")


def _process_two_tasks(parts: Parts) -> list[TopicPartition]:
    """Both partitions of ``in`` assigned to the group member, a task each, every record of them
    processed: their output waits in the collector, their offsets are committable."""
    for partition, key in ((0, "a"), (0, "a"), (1, "b")):
        parts.cluster.produce(IN, STRING.serialize(IN, key), STRING.serialize(IN, "v"), partition=partition)
    consumer = parts.consumer
    consumer.subscribe([IN], _NoCallbacks())
    wait_until(lambda: (consumer.poll(0.05), len(consumer.assignment()) == 2)[1], 10, "the assignment")
    partitions = sorted(consumer.assignment())
    for tp in partitions:
        consumer.seek_to_beginning([tp])
    entries = {tp: parts.running_task(tp.partition) for tp in partitions}
    polled = 0
    while polled < 3:
        for tp, batch in consumer.poll(1.0):
            entries[tp].task.process(tp, batch)
            polled += len(batch)
    return partitions


def test_a_commit_sends_the_collected_output_and_commits_every_tasks_offsets(parts: Parts) -> None:
    committer = parts.committer
    committer.begin()
    partitions = _process_two_tasks(parts)
    assert len(parts.collector) > 0
    if parts.config.exactly_once:
        # Everything since the last commit is inside the open transaction: nothing is visible yet.
        committer.send_collected()
        assert parts.cluster.read(OUT) == []
        assert len(parts.cluster.read(OUT, "read_uncommitted")) == 3
    assert committer.commit_all("test") is True
    assert len(parts.collector) == 0
    counts = sorted(
        (STRING.deserialize(OUT, r.key), LONG.deserialize(OUT, r.value)) for r in parts.cluster.read(OUT)
    )
    assert counts == [("a", 1), ("a", 2), ("b", 1)]
    committed = parts.admin.committed_offsets(parts.app_id, partitions)
    assert committed == {TopicPartition(IN, 0): 2, TopicPartition(IN, 1): 1}
    assert dict(committer.committed) == committed


def test_under_exactly_once_a_failed_task_commits_nothing_of_any_task(eos_parts: Parts) -> None:
    parts = eos_parts
    committer = parts.committer
    committer.begin()
    partitions = _process_two_tasks(parts)
    committer.send_collected()
    failed = parts.task_manager.mark_failed(parts.task_manager.running()[0].handle)
    assert failed is not None
    assert committer.commit_all("test") is False
    parts.collector.drain()
    committer.abort()
    assert parts.cluster.read(OUT) == []  # the shared transaction held both tasks' output
    assert parts.admin.committed_offsets(parts.app_id, partitions) == {}


def test_an_at_least_once_commit_records_where_each_tasks_changelog_ends(alo_parts: Parts) -> None:
    parts = alo_parts
    committer = parts.committer
    _process_two_tasks(parts)
    assert committer.commit_all("test") is True
    changelog = f"{parts.app_id}-counts-changelog"
    for entry in parts.task_manager.running():
        # One record per key reached the changelog (the collector keeps each key's newest).
        tp = TopicPartition(changelog, entry.task_id.partition)
        assert entry.checkpoint.offsets == {tp: 1}
