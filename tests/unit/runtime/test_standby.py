"""Standby replicas (num.standby.replicas): placement on the members that do not own a task,
standbys kept current from the changelog, failover that turns the standby into the active task and
restores only the lag, and placement that follows the group as it changes."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kstreams.client import KafkaStreams, StateRestoreListener
from kstreams.cluster import EmbeddedCluster
from kstreams.cluster.port import TopicPartition
from kstreams.processor import TaskId
from kstreams.serdes import Serdes
from kstreams.state.directory import CHECKPOINT_FILE_NAME
from kstreams.topology.dsl import Consumed, Materialized, Produced, StreamsBuilder
from kstreams.topology.topology import Topology
from tests.support.waiting import wait_until

LONG = Serdes.long()
STRING = Serdes.string()
APP = "standby"
CHANGELOG = f"{APP}-counts-changelog"
KEYS = 30


# How long a test waits for what other threads do, unless it gives a timeout of its own.
WAIT_S = 30.0


# -- through the runtime --------------------------------------------------------------------------


def count_topology(store_type: str) -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .group_by_key()
        .count(Materialized.as_("counts").with_store_type(store_type))
        .to_stream()
        .to("out", Produced.with_(STRING, LONG))
    )
    return builder.build()


@pytest.fixture
def cluster(embedded_cluster: EmbeddedCluster) -> EmbeddedCluster:
    embedded_cluster.create_topic("in", 4)
    embedded_cluster.create_topic("out", 4)
    return embedded_cluster


def new_client(
    cluster: EmbeddedCluster, tmp_path: Path, name: str, store_type: str = "in_memory", **overrides: Any
) -> KafkaStreams:
    config: dict[str, Any] = {
        "application.id": APP,
        "client.id": f"client-{name}",
        "num.stream.threads": 1,
        "num.standby.replicas": 1,
        "processing.guarantee": "exactly_once_v2",
        "commit.interval.ms": 100,
        "session.timeout.ms": 1000,
        "producer.transaction.timeout.ms": 2000,
        "state.dir": str(tmp_path / name),
    }
    config.update(overrides)
    return KafkaStreams(count_topology(store_type), config, cluster=cluster)


class Input:
    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.cluster = cluster
        self.expected: Counter[str] = Counter()
        self.produced = 0

    def produce(self, count: int) -> None:
        for i in range(self.produced, self.produced + count):
            key = f"key-{i % KEYS}"
            self.cluster.produce("in", key.encode(), b"v", timestamp=1_000 + i)
            self.expected[key] += 1
        self.produced += count


def committed_counts(cluster: EmbeddedCluster) -> dict[str, int]:
    return {r.key.decode(): LONG.deserialize("out", r.value) for r in cluster.read("out")}


def active_tasks(streams: KafkaStreams) -> set[TaskId]:
    return {e.task_id for e in streams._task_manager.running()}


def tasks_with_local_state(state_dir: Path) -> set[TaskId]:
    """The tasks a closed client left a checkpoint for under ``state_dir``."""
    found: set[TaskId] = set()
    for checkpoint in (state_dir / APP).glob(f"*_*/{CHECKPOINT_FILE_NAME}"):
        subtopology, partition = checkpoint.parent.name.split("_")
        found.add(TaskId(int(subtopology), int(partition)))
    return found


def standby_tasks(streams: KafkaStreams) -> set[TaskId]:
    return streams._state_updater.standby_ids()


def changelog_end(cluster: EmbeddedCluster, partition: int) -> int:
    tp = TopicPartition(CHANGELOG, partition)
    return cluster.admin().list_offsets([tp])[tp][1]


class RestoreRecorder(StateRestoreListener):
    def __init__(self) -> None:
        self.starts: dict[TopicPartition, tuple[int, int]] = {}
        self.totals: dict[TopicPartition, int] = {}

    def on_restore_start(self, topic_partition, store_name, starting_offset, ending_offset):  # type: ignore[no-untyped-def]
        self.starts[topic_partition] = (starting_offset, ending_offset)

    def on_restore_end(self, topic_partition, store_name, total_restored):  # type: ignore[no-untyped-def]
        self.totals[topic_partition] = total_restored


def updated_records(streams: KafkaStreams) -> float:
    return sum(v for m, v in streams.metrics().items() if m.name == "update-records-total")


@pytest.mark.parametrize("store_type", ["in_memory", "rocks_db"])
def test_standby_takes_over_after_a_crash_restoring_only_the_lag(
    cluster: EmbeddedCluster, tmp_path: Path, store_type: str
) -> None:
    source = Input(cluster)
    first = new_client(cluster, tmp_path, "a", store_type)
    second = new_client(cluster, tmp_path, "b", store_type)
    recorder = RestoreRecorder()
    second.set_global_state_restore_listener(recorder)
    first.start()
    second.start()
    try:
        every = {TaskId(0, p) for p in range(4)}
        wait_until(
            lambda: (
                active_tasks(first) | active_tasks(second) == every
                and standby_tasks(first) == active_tasks(second)
                and standby_tasks(second) == active_tasks(first)
                and active_tasks(first).isdisjoint(active_tasks(second))
            ),
            WAIT_S,
            "each client holding standbys of the other's tasks",
        )
        source.produce(2000)
        wait_until(lambda: committed_counts(cluster) == dict(source.expected), WAIT_S, "exact counts")
        moved = active_tasks(first)
        ends = {t: changelog_end(cluster, t.partition) for t in moved}
        # The standbys follow the changelog of the tasks they replicate.
        wait_until(lambda: updated_records(second) > 0, WAIT_S, "standby updates")
        assert updated_records(second) <= sum(ends.values())
        recorder.starts.clear()

        first._abandon()
        source.produce(500)
        wait_until(lambda: active_tasks(second) == every, WAIT_S, "the survivor running every task")
        wait_until(
            lambda: committed_counts(cluster) == dict(source.expected), WAIT_S, "exact counts after failover"
        )
        assert standby_tasks(second) == set()
    finally:
        first.close(timeout=30)
        second.close(timeout=30)
    # Every moved task resumed from where its standby was, not from the changelog's beginning.
    for task in moved:
        tp = TopicPartition(CHANGELOG, task.partition)
        if tp in recorder.starts:
            start, _ = recorder.starts[tp]
            assert start > 0
            assert recorder.totals.get(tp, 0) < ends[task]


def test_standbys_follow_the_group_as_clients_join_and_leave(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    source = Input(cluster)
    clients = [
        new_client(cluster, tmp_path, name, **{"processing.guarantee": "at_least_once"}) for name in "abc"
    ]
    started: list[KafkaStreams] = []
    every = {TaskId(0, p) for p in range(4)}

    def consistent(group: list[KafkaStreams]) -> bool:
        actives = [active_tasks(s) for s in group]
        standbys = [standby_tasks(s) for s in group]
        if set().union(*actives) != every or sum(len(a) for a in actives) != 4:
            return False
        for active, standby in zip(actives, standbys, strict=True):
            if active & standby:
                return False
        # A replica of every task when there is someone to hold it (more while a joining
        # client warms up the tasks it will take over: warm-ups are standby tasks too).
        held = Counter(t for standby in standbys for t in standby)
        if len(group) == 1:
            return not held
        return all(held[t] >= 1 for t in every)

    try:
        for streams in clients:
            streams.start()
            started.append(streams)
            source.produce(200)
            wait_until(lambda: consistent(started), WAIT_S, f"placement with {len(started)} clients")
        for _ in range(2):
            leaving = started.pop(0)
            assert leaving.close(timeout=30)
            wait_until(lambda: consistent(started), WAIT_S, f"placement with {len(started)} clients")
        source.produce(100)
        wait_until(lambda: committed_counts(cluster) == dict(source.expected), WAIT_S, "exact counts")
    finally:
        for streams in clients:
            streams.close(timeout=30)


def test_standby_checkpoints_let_a_restarted_standby_resume_from_them(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    from kstreams.state.checkpoint import TaskOffsetCheckpoint

    source = Input(cluster)
    first = new_client(cluster, tmp_path, "a", "rocks_db")
    second = new_client(cluster, tmp_path, "b", "rocks_db")
    first.start()
    second.start()
    try:
        wait_until(
            lambda: len(standby_tasks(second)) == 2 and standby_tasks(second) == active_tasks(first),
            WAIT_S,
            "standbys on the second client",
        )
        source.produce(1000)
        wait_until(lambda: committed_counts(cluster) == dict(source.expected), WAIT_S, "exact counts")
        replicated = standby_tasks(second)
        ends = {t: changelog_end(cluster, t.partition) for t in replicated}
        wait_until(lambda: updated_records(second) > 0, WAIT_S, "standby updates")
        gauges = {m.name: v for m, v in second.metrics().items() if m.group == "stream-state-updater-metrics"}
        assert gauges["standby-updating-tasks"] == 2
        # Once the standbys caught up, closing writes their positions to their checkpoints.
        wait_until(
            lambda: all(
                second._state_updater._standbys[t].positions[TopicPartition(CHANGELOG, t.partition)]
                >= ends[t]
                for t in replicated
            ),
            WAIT_S,
            "standbys caught up",
        )
        assert second.close(timeout=30)
        for task in replicated:
            path = tmp_path / "b" / APP / str(task) / ".checkpoint"
            tp = TopicPartition(CHANGELOG, task.partition)
            assert TaskOffsetCheckpoint(str(path)).read() == {tp: ends[task]}

        restarted = new_client(cluster, tmp_path, "b", "rocks_db")
        restarted.start()
        try:
            wait_until(lambda: standby_tasks(restarted) == replicated, WAIT_S, "standbys again")
            source.produce(100)
            wait_until(
                lambda: committed_counts(cluster) == dict(source.expected), WAIT_S, "exact counts again"
            )
            grown = {t: changelog_end(cluster, t.partition) for t in replicated}
            wait_until(
                lambda: all(
                    restarted._state_updater._standbys[t].positions[TopicPartition(CHANGELOG, t.partition)]
                    >= grown[t]
                    for t in replicated
                ),
                WAIT_S,
                "the standbys following the changelog",
            )
            assert updated_records(restarted) > 0
            # Only what the changelogs gained since the checkpoints was read again.
            assert updated_records(restarted) <= sum(grown[t] - ends[t] for t in replicated)
        finally:
            assert restarted.close(timeout=30)
    finally:
        first.close(timeout=30)
        second.close(timeout=30)


# -- state-aware assignment: warm-ups and probing rebalances (KIP-441) ------------------------------


def metric(streams: KafkaStreams, name: str) -> float:
    return sum(v for m, v in streams.metrics().items() if m.name == name)


def test_a_joining_client_takes_tasks_only_once_its_warm_ups_caught_up(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    """Scale-out: the new client first warms up the tasks it is to take (they keep running where
    they are, never revoked), and a probing rebalance hands them over once caught up; counts stay
    exact under exactly_once_v2."""
    source = Input(cluster)
    # A lag of 2 records is caught up (the changelogs hold far more): the new client is not.
    settings = {"num.standby.replicas": 0, "probing.rebalance.interval.ms": 300, "acceptable.recovery.lag": 2}
    first, second = (new_client(cluster, tmp_path, name, **settings) for name in "ab")
    third = new_client(cluster, tmp_path, "c", **settings)
    recorder = RestoreRecorder()
    third.set_global_state_restore_listener(recorder)
    every = {TaskId(0, p) for p in range(4)}
    try:
        first.start()
        second.start()
        source.produce(400)
        wait_until(lambda: committed_counts(cluster) == dict(source.expected), WAIT_S, "exact counts")
        wait_until(lambda: active_tasks(first) | active_tasks(second) == every, WAIT_S, "two clients")
        before = {e.task_id: e for s in (first, second) for e in s._task_manager.running()}

        warmed: set[TaskId] = set()
        third.start()
        # Until its warm-ups caught up, the new client runs nothing; each task it runs later was
        # warmed up here first.
        deadline = time.monotonic() + 30
        while len(active_tasks(third)) < 1:
            assert time.monotonic() < deadline, "the new client never got a task"
            warmed |= standby_tasks(third)
            assert active_tasks(third) <= warmed
            time.sleep(0.01)
        taken = active_tasks(third)
        assert taken <= warmed
        assert metric(third, "warmups-started-total") >= len(taken)
        wait_until(lambda: metric(third, "warmups-promoted-total") >= len(taken), WAIT_S, "promotion metric")
        # Warmed up, the tasks restored only what the changelog gained since (not from scratch).
        changelog = sum(changelog_end(cluster, t.partition) for t in taken)
        assert sum(recorder.totals.get(TopicPartition(CHANGELOG, t.partition), 0) for t in taken) < changelog

        # The tasks that stayed were never revoked: the same task objects run them still. A later
        # probing rebalance may hand the new client a further warmed-up task meanwhile, so the
        # tasks are counted once the two sides add up again.
        wait_until(
            lambda: active_tasks(first) | active_tasks(second) | active_tasks(third) == every,
            WAIT_S,
            "every task running once more",
        )
        for streams in (first, second):
            for entry in streams._task_manager.running():
                assert entry is before[entry.task_id]

        source.produce(300)
        wait_until(lambda: committed_counts(cluster) == dict(source.expected), WAIT_S, "exact counts after")
    finally:
        for streams in (first, second, third):
            streams.close(timeout=30)


def test_a_restarted_client_gets_its_own_tasks_back_restoring_only_the_tail(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    """A client that restarts with its state on disk is caught up on its old tasks: the assignor
    gives those back to it (not tasks it has no state for), and only the changelog's tail is read."""
    source = Input(cluster)
    settings = {"num.standby.replicas": 0, "processing.guarantee": "at_least_once"}
    first = new_client(cluster, tmp_path, "a", "rocks_db", **settings)
    second = new_client(cluster, tmp_path, "b", "rocks_db", **settings)
    try:
        first.start()
        second.start()
        source.produce(400)
        wait_until(lambda: committed_counts(cluster) == dict(source.expected), WAIT_S, "exact counts")
        wait_until(lambda: len(active_tasks(first)) == 2, WAIT_S, "a balanced group")
        assert first.close(timeout=30)
        # Not the two tasks ``first`` held at one moment: a probing rebalance may have moved one
        # meanwhile, and ``first`` then left (checkpointed) state of three tasks.
        owned = tasks_with_local_state(tmp_path / "a")
        assert len(owned) >= 2
        wait_until(lambda: len(active_tasks(second)) == 4, WAIT_S, "the survivor taking every task")
        source.produce(100)
        wait_until(lambda: committed_counts(cluster) == dict(source.expected), WAIT_S, "exact counts alone")

        restarted = new_client(cluster, tmp_path, "a", "rocks_db", **settings)
        recorder = RestoreRecorder()
        restarted.set_global_state_restore_listener(recorder)
        restarted.start()
        try:
            wait_until(
                lambda: len(active_tasks(restarted)) == 2, WAIT_S, "tasks back on the restarted client"
            )
            assert active_tasks(restarted) <= owned, "tasks given to a client without their state"
            for task in active_tasks(restarted):
                start, _end = recorder.starts[TopicPartition(CHANGELOG, task.partition)]
                assert start > 0, f"task {task} restored from scratch"
            source.produce(100)
            wait_until(
                lambda: committed_counts(cluster) == dict(source.expected), WAIT_S, "exact counts again"
            )
        finally:
            assert restarted.close(timeout=30)
    finally:
        first.close(timeout=30)
        second.close(timeout=30)
