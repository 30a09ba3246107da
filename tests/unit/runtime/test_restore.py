"""Restoration of active tasks through the runtime: restore listener callbacks and metrics,
checkpoints that make a restart restore only the changelog's tail, wiping state no checkpoint
vouches for (or whose checkpoint does not match the changelog), task directory locks, and restore
failures reaching the uncaught exception handler."""

from __future__ import annotations

import functools
import logging
import os
import shutil
import threading
from collections import Counter
from pathlib import Path

import pytest

from kstreams.client import KafkaStreams, StateRestoreListener, StreamsUncaughtExceptionResponse
from kstreams.cluster import EmbeddedCluster
from kstreams.cluster.port import TopicPartition
from kstreams.processor import Processor, Record
from kstreams.queries import QueryableStoreTypes, StoreQueryParameters
from kstreams.serdes import Serdes
from kstreams.state import Stores, ValueAndTimestamp
from kstreams.state.checkpoint import TaskOffsetCheckpoint
from kstreams.state.directory import StateDirectory
from kstreams.state.suppliers import KeyValueBytesStoreSupplier
from kstreams.topology.topology import Topology
from tests.support.waiting import wait_until

LONG = Serdes.long()
STRING = Serdes.string()
APP = "restore"
CHANGELOG = f"{APP}-counts-changelog"


# How long a test waits for what other threads do, unless it gives a timeout of its own.
WAIT_S = 30.0


class CountPerKey(Processor):
    def init(self, context):  # type: ignore[no-untyped-def]
        self.context = context
        self.store = context.get_state_store("counts")

    def process(self, record: Record) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(record.with_value(count))


def key_value_supplier(name: str, persistent: bool) -> KeyValueBytesStoreSupplier:
    return Stores.persistent_key_value_store(name) if persistent else Stores.in_memory_key_value_store(name)


def count_topology(persistent: bool) -> Topology:
    supplier = key_value_supplier("counts", persistent)
    topology = Topology()
    topology.add_source("src", "in", key_deserializer=STRING, value_deserializer=STRING)
    topology.add_processor("count", CountPerKey, "src")
    topology.add_state_store(Stores.key_value_store_builder(supplier, STRING, LONG), "count")
    topology.add_sink("sink", "out", "count", key_serializer=STRING, value_serializer=LONG)
    return topology


class RecordingListener(StateRestoreListener):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.starts: dict[TopicPartition, tuple[str, int, int]] = {}
        self.batches: dict[TopicPartition, list[tuple[int, int]]] = {}
        self.ends: dict[TopicPartition, tuple[str, int]] = {}

    def on_restore_start(self, topic_partition, store_name, starting_offset, ending_offset):  # type: ignore[no-untyped-def]
        with self.lock:
            self.starts[topic_partition] = (store_name, starting_offset, ending_offset)

    def on_batch_restored(self, topic_partition, store_name, batch_end_offset, num_restored):  # type: ignore[no-untyped-def]
        with self.lock:
            self.batches.setdefault(topic_partition, []).append((batch_end_offset, num_restored))

    def on_restore_end(self, topic_partition, store_name, total_restored):  # type: ignore[no-untyped-def]
        with self.lock:
            self.ends[topic_partition] = (store_name, total_restored)


@pytest.fixture
def cluster(embedded_cluster: EmbeddedCluster) -> EmbeddedCluster:
    embedded_cluster.create_topic("in", 2)
    embedded_cluster.create_topic("out", 2)
    return embedded_cluster


def new_client(
    topology: Topology, cluster: EmbeddedCluster, state_dir: Path, name: str, **overrides: object
) -> KafkaStreams:
    config: dict[str, object] = {
        "application.id": APP,
        "client.id": f"client-{name}",
        "num.stream.threads": 1,
        "commit.interval.ms": 50,
        "session.timeout.ms": 1000,
        "state.dir": str(state_dir),
    }
    config.update(overrides)
    return KafkaStreams(topology, config, cluster=cluster)


def produce(cluster: EmbeddedCluster, count: int, keys: int, start: int = 0) -> Counter[str]:
    expected: Counter[str] = Counter()
    for i in range(start, start + count):
        key = f"key-{i % keys}"
        cluster.produce("in", key.encode(), b"v", timestamp=1_000 + i)
        expected[key] += 1
    return expected


def latest(cluster: EmbeddedCluster) -> dict[str, int]:
    return {r.key.decode(): LONG.deserialize("out", r.value) for r in cluster.read("out")}


def changelog_ends(cluster: EmbeddedCluster) -> dict[TopicPartition, int]:
    ends = cluster.admin().list_offsets([TopicPartition(CHANGELOG, p) for p in range(2)])
    return {tp: end for tp, (_, end) in ends.items()}


def run_until_counted(streams: KafkaStreams, cluster: EmbeddedCluster, expected: Counter[str]) -> None:
    streams.start()
    try:
        wait_until(lambda: latest(cluster) == dict(expected), WAIT_S, "exact counts")
    finally:
        assert streams.close(timeout=30)


def test_restore_listener_sees_every_changelog_record_and_metrics_count_them(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    expected = produce(cluster, 600, keys=40)
    run_until_counted(new_client(count_topology(False), cluster, tmp_path / "a", "a"), cluster, expected)
    ends = changelog_ends(cluster)
    changelog_records = {
        tp: len([r for r in cluster.read(CHANGELOG) if r.partition == tp.partition]) for tp in ends
    }

    listener = RecordingListener()
    successor = new_client(count_topology(False), cluster, tmp_path / "b", "b")
    successor.set_global_state_restore_listener(listener)
    expected += produce(cluster, 100, keys=40, start=600)
    successor.start()
    try:
        wait_until(lambda: latest(cluster) == dict(expected), WAIT_S, "counts continued after restoration")
        metrics = {
            m.name: v for m, v in successor.metrics().items() if m.group == "stream-state-updater-metrics"
        }
    finally:
        assert successor.close(timeout=30)

    # In-memory stores restore each changelog partition from its beginning to its end.
    assert listener.starts == {tp: ("counts", 0, end) for tp, end in ends.items()}
    for tp, end in ends.items():
        batches = listener.batches[tp]
        assert batches[-1][0] == end - 1
        assert sum(n for _, n in batches) == changelog_records[tp]
        assert listener.ends[tp] == ("counts", changelog_records[tp])
    assert metrics["restore-records-total"] == sum(changelog_records.values())
    assert metrics["restore-records-rate"] > 0
    assert metrics["records-remaining"] == 0
    assert metrics["restoring-tasks"] == 0


def test_restart_with_a_checkpoint_restores_only_the_changelog_tail(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    expected = produce(cluster, 400, keys=30)
    run_until_counted(new_client(count_topology(True), cluster, tmp_path / "a", "a"), cluster, expected)
    # A clean close checkpoints where the changelogs end.
    checkpointed = {}
    for partition in range(2):
        path = tmp_path / "a" / APP / f"0_{partition}" / ".checkpoint"
        checkpointed.update(TaskOffsetCheckpoint(str(path)).read())
    assert checkpointed == changelog_ends(cluster)

    # Another client moves the changelogs on while the first one is away.
    expected += produce(cluster, 200, keys=30, start=400)
    run_until_counted(new_client(count_topology(True), cluster, tmp_path / "b", "b"), cluster, expected)
    ends = changelog_ends(cluster)

    listener = RecordingListener()
    restarted = new_client(count_topology(True), cluster, tmp_path / "a", "a2")
    restarted.set_global_state_restore_listener(listener)
    expected += produce(cluster, 50, keys=30, start=600)
    run_until_counted(restarted, cluster, expected)
    assert listener.starts == {tp: ("counts", checkpointed[tp], ends[tp]) for tp in ends}
    for tp in ends:
        assert listener.ends[tp][1] == sum(n for _, n in listener.batches[tp])
        assert listener.ends[tp][1] <= ends[tp] - checkpointed[tp]


def test_unchanged_changelog_and_checkpoint_restore_nothing(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    expected = produce(cluster, 300, keys=20)
    run_until_counted(new_client(count_topology(True), cluster, tmp_path / "a", "a"), cluster, expected)
    listener = RecordingListener()
    restarted = new_client(count_topology(True), cluster, tmp_path / "a", "a2")
    restarted.set_global_state_restore_listener(listener)
    expected += produce(cluster, 10, keys=20, start=300)
    run_until_counted(restarted, cluster, expected)
    assert listener.starts == {}
    assert listener.batches == {}


def test_persistent_state_without_a_checkpoint_is_wiped_and_restored_from_scratch(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    expected = produce(cluster, 300, keys=20)
    run_until_counted(new_client(count_topology(True), cluster, tmp_path / "a", "a"), cluster, expected)
    for partition in range(2):
        os.unlink(tmp_path / "a" / APP / f"0_{partition}" / ".checkpoint")
    ends = changelog_ends(cluster)

    listener = RecordingListener()
    restarted = new_client(count_topology(True), cluster, tmp_path / "a", "a2")
    restarted.set_global_state_restore_listener(listener)
    expected += produce(cluster, 30, keys=20, start=300)
    run_until_counted(restarted, cluster, expected)
    assert listener.starts == {tp: ("counts", 0, end) for tp, end in ends.items()}


def test_in_memory_stores_restore_from_the_beginning_after_a_restart(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    expected = produce(cluster, 200, keys=20)
    run_until_counted(new_client(count_topology(False), cluster, tmp_path / "a", "a"), cluster, expected)
    ends = changelog_ends(cluster)
    listener = RecordingListener()
    restarted = new_client(count_topology(False), cluster, tmp_path / "a", "a2")
    restarted.set_global_state_restore_listener(listener)
    expected += produce(cluster, 20, keys=20, start=200)
    run_until_counted(restarted, cluster, expected)
    assert listener.starts == {tp: ("counts", 0, end) for tp, end in ends.items()}


def test_task_waits_while_another_client_holds_its_state_directory(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    other = StateDirectory(str(tmp_path / "shared"), APP)
    other.lock("0_1")
    try:
        streams = new_client(count_topology(True), cluster, tmp_path / "shared", "a")
        expected = produce(cluster, 200, keys=20)
        streams.start()
        try:
            wait_until(
                lambda: any(r.partition == 0 for r in cluster.read("out")),
                WAIT_S,
                "the task with a free directory to process",
            )
            assert all(r.partition == 0 for r in cluster.read("out"))
            assert streams._task_manager.entry(_task("0_1")).state.name == "LOCKED"
            other.unlock("0_1")
            wait_until(lambda: latest(cluster) == dict(expected), WAIT_S, "every task once the lock is free")
        finally:
            assert streams.close(timeout=30)
    finally:
        other.close()


def _task(text: str):  # type: ignore[no-untyped-def]
    from kstreams.processor import TaskId

    subtopology, partition = text.split("_")
    return TaskId(int(subtopology), int(partition))


class FailingListener(StateRestoreListener):
    def on_batch_restored(self, topic_partition, store_name, batch_end_offset, num_restored):  # type: ignore[no-untyped-def]
        raise RuntimeError("listener broke")


def test_a_failed_restoration_reaches_the_uncaught_exception_handler(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    expected = produce(cluster, 200, keys=20)
    run_until_counted(new_client(count_topology(False), cluster, tmp_path / "a", "a"), cluster, expected)
    seen: list[BaseException] = []
    handled = threading.Event()

    def handler(exc: BaseException) -> StreamsUncaughtExceptionResponse:
        seen.append(exc)
        handled.set()
        return StreamsUncaughtExceptionResponse.SHUTDOWN_CLIENT

    streams = new_client(count_topology(False), cluster, tmp_path / "b", "b")
    streams.set_global_state_restore_listener(FailingListener())
    streams.set_uncaught_exception_handler(handler)
    streams.start()
    try:
        assert handled.wait(30)
        assert streams.wait_for_state(KafkaStreams.State.ERROR, timeout=30)
    finally:
        streams.close(timeout=30)
    assert "listener broke" in str(seen[0]) or "listener broke" in repr(seen[0].__cause__)
    assert "0_" in str(seen[0])


def test_restoration_retries_when_the_changelog_end_cannot_be_read(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    expected = produce(cluster, 300, keys=20)
    run_until_counted(new_client(count_topology(False), cluster, tmp_path / "a", "a"), cluster, expected)
    listener = RecordingListener()
    successor = new_client(count_topology(False), cluster, tmp_path / "b", "b")
    successor.set_global_state_restore_listener(listener)
    cluster.fail_next("end_offsets", times=3)
    cluster.fail_next("list_offsets", times=1)
    expected += produce(cluster, 30, keys=20, start=300)
    run_until_counted(successor, cluster, expected)
    assert set(listener.ends) == {TopicPartition(CHANGELOG, p) for p in range(2)}


def test_two_clients_sharing_a_state_directory_hand_tasks_over(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    first = new_client(count_topology(True), cluster, tmp_path / "shared", "a")
    second = new_client(count_topology(True), cluster, tmp_path / "shared", "b")
    first.start()
    second.start()
    try:
        expected = produce(cluster, 400, keys=20)
        wait_until(lambda: latest(cluster) == dict(expected), WAIT_S, "exact counts with two clients")
        owned = [{e.task_id for e in s._task_manager.entries()} for s in (first, second)]
        assert owned[0].isdisjoint(owned[1]) and len(owned[0] | owned[1]) == 2
        assert first.close(timeout=30)
        # The survivor locks the directories the first client released and resumes from their
        # checkpoints.
        expected += produce(cluster, 100, keys=20, start=400)
        wait_until(lambda: latest(cluster) == dict(expected), WAIT_S, "exact counts after the hand-over")
        assert {str(e.task_id) for e in second._task_manager.entries()} == {"0_0", "0_1"}
    finally:
        first.close(timeout=30)
        second.close(timeout=30)


class PausingListener(RecordingListener):
    """Holds the restore thread inside its first batch until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.first_batch = threading.Event()
        self.proceed = threading.Event()

    def on_batch_restored(self, topic_partition, store_name, batch_end_offset, num_restored):  # type: ignore[no-untyped-def]
        super().on_batch_restored(topic_partition, store_name, batch_end_offset, num_restored)
        self.first_batch.set()
        assert self.proceed.wait(30)


def test_closing_during_restoration_checkpoints_how_far_it_got(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    from kstreams._native.record_batch import RecordBatch

    cluster.create_topic(CHANGELOG, 2, {"cleanup.policy": "compact"})
    producer = cluster.producer()
    for partition in range(2):
        for chunk in range(6):
            keys = [f"key-{partition}-{chunk}-{i}".encode() for i in range(10_000)]
            values = [LONG.serialize(CHANGELOG, 1)] * len(keys)
            producer.send(
                CHANGELOG, partition, RecordBatch.from_columns(keys, values, [0] * len(keys), partition)
            )
    ends = changelog_ends(cluster)

    listener = PausingListener()
    streams = new_client(count_topology(True), cluster, tmp_path / "a", "a")
    streams.set_global_state_restore_listener(listener)
    streams.start()
    closing = threading.Thread(target=streams.close, kwargs={"timeout": 60})
    try:
        assert listener.first_batch.wait(30)
        closing.start()
        # The polling thread, closing, asks the restore thread to let go of its tasks.
        wait_until(
            lambda: bool(streams._state_updater._pending_remove), WAIT_S, "the close to reach restoration"
        )
        listener.proceed.set()
        closing.join(60)
    finally:
        listener.proceed.set()
        streams.close(timeout=30)
    checkpointed: dict[TopicPartition, int] = {}
    for partition in range(2):
        checkpointed.update(
            TaskOffsetCheckpoint(str(tmp_path / "a" / APP / f"0_{partition}" / ".checkpoint")).read()
        )
    assert any(0 < offset < ends[tp] for tp, offset in checkpointed.items())

    resumed = RecordingListener()
    restarted = new_client(count_topology(True), cluster, tmp_path / "a", "a2")
    restarted.set_global_state_restore_listener(resumed)
    restarted.start()
    try:
        wait_until(
            lambda: set(resumed.ends) == {tp for tp in ends if checkpointed.get(tp, 0) < ends[tp]},
            WAIT_S,
            "restoration to finish",
        )
    finally:
        assert restarted.close(timeout=30)
    for tp, (_, start, end) in resumed.starts.items():
        assert start == checkpointed.get(tp, 0)
        assert end == ends[tp]


GUARANTEES = pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])


def warnings_naming(caplog: pytest.LogCaptureFixture, *words: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and all(word in r.getMessage() for word in words)
    ]


def restart_and_count_on(
    cluster: EmbeddedCluster, tmp_path: Path, guarantee: str, expected: Counter[str], start: int
) -> RecordingListener:
    """Restart the client of state.dir ``a``, count 20 more records on top of ``expected``, and
    return what its restoration did."""
    listener = RecordingListener()
    restarted = new_client(
        count_topology(True), cluster, tmp_path / "a", "a2", **{"processing.guarantee": guarantee}
    )
    restarted.set_global_state_restore_listener(listener)
    expected += produce(cluster, 20, keys=20, start=start)
    run_until_counted(restarted, cluster, expected)
    return listener


@GUARANTEES
def test_a_checkpointed_store_whose_files_are_gone_is_wiped_and_restored_from_scratch(
    cluster: EmbeddedCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture, guarantee: str
) -> None:
    expected = produce(cluster, 300, keys=20)
    first = new_client(
        count_topology(True), cluster, tmp_path / "a", "a", **{"processing.guarantee": guarantee}
    )
    run_until_counted(first, cluster, expected)
    for partition in range(2):
        task_dir = tmp_path / "a" / APP / f"0_{partition}"
        assert (task_dir / ".checkpoint").exists()
        shutil.rmtree(task_dir / "rocksdb" / "counts")
    ends = changelog_ends(cluster)

    with caplog.at_level(logging.WARNING):
        listener = restart_and_count_on(cluster, tmp_path, guarantee, expected, start=300)
    # Counts continued from the changelog rather than from an empty store.
    assert listener.starts == {tp: ("counts", 0, end) for tp, end in ends.items()}
    for partition in range(2):
        assert warnings_naming(caplog, f"Task 0_{partition}", "counts", "missing")


@GUARANTEES
def test_a_checkpoint_past_a_recreated_changelogs_end_is_wiped_and_restored_from_scratch(
    cluster: EmbeddedCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture, guarantee: str
) -> None:
    config = {"processing.guarantee": guarantee}
    expected = produce(cluster, 300, keys=20)
    run_until_counted(
        new_client(count_topology(True), cluster, tmp_path / "a", "a", **config), cluster, expected
    )
    checkpointed: dict[TopicPartition, int] = {}
    for partition in range(2):
        checkpointed.update(
            TaskOffsetCheckpoint(str(tmp_path / "a" / APP / f"0_{partition}" / ".checkpoint")).read()
        )
    # The changelog is recreated, and a client with fresh state counts on from nothing: for four
    # keys the changelog now says 1, while the first client's local stores say 15 for every key.
    cluster.delete_topic(CHANGELOG)
    recounted = produce(cluster, 4, keys=20, start=300)
    second = new_client(count_topology(True), cluster, tmp_path / "b", "b", **config)
    second.start()
    try:
        wait_until(
            lambda: all(latest(cluster)[key] == 1 for key in recounted), WAIT_S, "the recount of four keys"
        )
    finally:
        assert second.close(timeout=30)
    ends = changelog_ends(cluster)
    assert all(checkpointed[tp] > end for tp, end in ends.items())

    with caplog.at_level(logging.WARNING):
        listener = restart_and_count_on(cluster, tmp_path, guarantee, recounted, start=304)
    assert listener.starts == {tp: ("counts", 0, end) for tp, end in ends.items() if end > 0}
    for tp, end in ends.items():
        assert warnings_naming(
            caplog, f"Task 0_{tp.partition}", "counts", str(tp), str(checkpointed[tp]), f"end {end}"
        )


@GUARANTEES
@pytest.mark.parametrize(
    "garbage",
    [b"\x00\xff\xfe\x89PNG\r\n\x1a\n\x00", b"0\n1\nrestore-counts-changelog 0 12x\n", b"0\n2\n"],
    ids=["binary", "bad-number", "truncated"],
)
def test_an_unreadable_checkpoint_is_wiped_and_restored_from_scratch(
    cluster: EmbeddedCluster,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    guarantee: str,
    garbage: bytes,
) -> None:
    expected = produce(cluster, 300, keys=20)
    first = new_client(
        count_topology(True), cluster, tmp_path / "a", "a", **{"processing.guarantee": guarantee}
    )
    run_until_counted(first, cluster, expected)
    for partition in range(2):
        (tmp_path / "a" / APP / f"0_{partition}" / ".checkpoint").write_bytes(garbage)
    ends = changelog_ends(cluster)

    with caplog.at_level(logging.WARNING):
        listener = restart_and_count_on(cluster, tmp_path, guarantee, expected, start=300)
    assert listener.starts == {tp: ("counts", 0, end) for tp, end in ends.items()}
    for partition in range(2):
        assert warnings_naming(caplog, f"Task 0_{partition}", "checkpoint", "corrupt")


class LatestWithTimestamp(Processor):
    """Keeps each key's latest value with its record's timestamp; a "delete" value deletes the key."""

    def init(self, context):  # type: ignore[no-untyped-def]
        self.store = context.get_state_store("latest")

    def process(self, record: Record) -> None:
        if record.value == "delete":
            self.store.delete(record.key)
        else:
            self.store.put(record.key, ValueAndTimestamp.make(record.value, record.timestamp))


@pytest.mark.parametrize("persistent", [True, False], ids=["rocksdb", "in_memory"])
def test_a_timestamped_store_restores_each_value_with_its_timestamp_and_its_deletions(
    cluster: EmbeddedCluster, tmp_path: Path, persistent: bool
) -> None:
    supplier = key_value_supplier("latest", persistent)
    topology = Topology()
    topology.add_source("src", "in", key_deserializer=STRING, value_deserializer=STRING)
    topology.add_processor("latest", LatestWithTimestamp, "src")
    topology.add_state_store(Stores.timestamped_key_value_store_builder(supplier, STRING, STRING), "latest")
    expected: dict[str, tuple[str, int]] = {}
    for i in range(60):
        key, timestamp = f"key-{i % 20}", 0 if i == 0 else 1_000 + 7 * i
        value = "delete" if i % 20 == 3 and i > 20 else f"v{i}"
        cluster.produce("in", key.encode(), value.encode(), timestamp=timestamp)
        if value == "delete":
            expected.pop(key, None)
        else:
            expected[key] = (value, timestamp)
    params = StoreQueryParameters.from_name_and_type(
        "latest", QueryableStoreTypes.timestamped_key_value_store()
    )

    def serves_expected(streams: KafkaStreams) -> bool:
        if streams.state != KafkaStreams.State.RUNNING:
            return False
        return {k: (v.value, v.timestamp) for k, v in streams.store(params).all()} == expected

    for name in ("first", "restored"):  # the second client has an empty state directory
        streams = new_client(topology, cluster, tmp_path / name, name)
        streams.start()
        try:
            wait_until(
                functools.partial(serves_expected, streams),
                WAIT_S,
                f"the {name} client's store",
            )
        finally:
            assert streams.close(timeout=30)
