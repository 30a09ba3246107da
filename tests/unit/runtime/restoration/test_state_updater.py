"""The state updater (the restore thread) on its own, built from a restore consumer and the task
manager's tasks on the embedded cluster (Kafka's DefaultStateUpdaterTest)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kstreams.cluster import EmbeddedCluster
from kstreams.cluster.port import TopicPartition
from kstreams.processor import TaskId
from kstreams.runtime.tasks.task_manager import TaskState
from kstreams.serdes import Serdes
from kstreams.state.restore_listener import StateRestoreListener
from tests.unit.runtime.runtime_parts import IN, Parts, wait_until

STRING = Serdes.string()
LONG = Serdes.long()
APP = "state-updater"
CHANGELOG = f"{APP}-counts-changelog"


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[Parts]:
    with EmbeddedCluster() as cluster:
        built = Parts(cluster, tmp_path, APP)
        try:
            yield built
        finally:
            built.close()


def _log(parts: Parts, partition: int, key: str, count: int) -> None:
    parts.cluster.produce(
        CHANGELOG, STRING.serialize(CHANGELOG, key), LONG.serialize(CHANGELOG, count), partition=partition
    )


class _Ends(StateRestoreListener):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.starts: dict[TopicPartition, tuple[int, int]] = {}
        self.ends: dict[TopicPartition, int] = {}

    def on_restore_start(self, topic_partition, store_name, starting_offset, ending_offset):  # type: ignore[no-untyped-def]
        with self.lock:
            self.starts[topic_partition] = (starting_offset, ending_offset)

    def on_restore_end(self, topic_partition, store_name, total_restored):  # type: ignore[no-untyped-def]
        with self.lock:
            self.ends[topic_partition] = total_restored


def test_a_task_is_restored_to_its_changelogs_end_and_handed_back(parts: Parts) -> None:
    for key, count in (("a", 1), ("b", 1), ("a", 2), ("a", 3)):
        _log(parts, 0, key, count)
    listener = _Ends()
    updater = parts.state_updater
    updater.listener = listener
    updater.start()
    entry = parts.task_manager.create(TaskId(0, 0), [TopicPartition(IN, 0)])
    assert entry.state is TaskState.RESTORING
    updater.add(entry)
    wait_until(lambda: parts.restored == [entry], 20, "the restored task")
    assert updater.restoring_count() == 0
    assert parts.restore_failures == []
    changelog = TopicPartition(CHANGELOG, 0)
    assert listener.starts == {changelog: (0, 4)}
    assert listener.ends == {changelog: 4}
    store = entry.task.get_store("counts")
    assert (store.get("a"), store.get("b")) == (3, 1)
    # Handed back, the task runs with the restored state.
    parts.task_manager.activate(entry)
    assert entry.state is TaskState.RUNNING


def test_a_task_with_an_empty_changelog_is_handed_back_at_once(parts: Parts) -> None:
    updater = parts.state_updater
    updater.start()
    entry = parts.task_manager.create(TaskId(0, 1), [TopicPartition(IN, 1)])
    updater.add(entry)
    wait_until(lambda: parts.restored == [entry], 20, "the restored task")
    assert entry.task.get_store("counts").get("a") is None


def test_a_standby_keeps_applying_what_its_changelog_receives(parts: Parts) -> None:
    _log(parts, 1, "k", 1)
    updater = parts.state_updater
    updater.start()
    standby = parts.task_manager.create_standby(TaskId(0, 1), [TopicPartition(IN, 1)])
    assert standby is not None
    updater.add_standby(standby)
    store = standby.task.get_store("counts")
    wait_until(lambda: store.get("k") == 1, 20, "the standby's first record")
    _log(parts, 1, "k", 2)
    wait_until(lambda: store.get("k") == 2, 20, "the standby's record written later")
    assert updater.standby_ids() == {TaskId(0, 1)}
    # Taken back (to recycle it into the active task), it leaves the restore thread.
    assert updater.remove_standby(TaskId(0, 1)) is standby
    assert updater.standby_ids() == set()
    standby.close()
