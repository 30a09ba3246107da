"""KafkaStreams.clean_up(): deletes <state.dir>/<application.id>, only before start() or after
close(), and never while another running client holds a task directory."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kstreams import Consumed, Materialized, Produced, Serdes, StreamsBuilder
from kstreams.client import KafkaStreams, State
from kstreams.cluster import EmbeddedCluster
from kstreams.errors import IllegalStateException, LockException
from kstreams.state.directory import StateDirectory


def count_topology():  # type: ignore[no-untyped-def]
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed.with_(Serdes.string(), Serdes.string()))
        .group_by_key()
        .count(Materialized.as_("counts"))
        .to_stream()
        .to("out", Produced.with_(Serdes.string(), Serdes.long()))
    )
    return builder.build()


@pytest.fixture
def cluster(embedded_cluster: EmbeddedCluster) -> EmbeddedCluster:
    embedded_cluster.create_topic("in", 2)
    embedded_cluster.create_topic("out", 2)
    return embedded_cluster


def make_client(cluster: EmbeddedCluster, state_dir: Path, app_id: str = "app") -> KafkaStreams:
    return KafkaStreams(
        count_topology(),
        {"application.id": app_id, "state.dir": str(state_dir), "commit.interval.ms": 50},
        cluster=cluster,
    )


def run_until_counted(streams: KafkaStreams, cluster: EmbeddedCluster, records: int) -> None:
    streams.start()
    assert streams.wait_for_state(State.RUNNING, timeout=30)
    deadline = time.monotonic() + 30
    while len(cluster.read("out")) < records:
        assert time.monotonic() < deadline, "the counts never reached the output topic"
        streams.wait_for_state(State.ERROR, timeout=0.05)


def task_dirs(app_dir: Path) -> list[str]:
    return sorted(p.name for p in app_dir.iterdir() if p.is_dir()) if app_dir.exists() else []


def test_clean_up_after_close_deletes_the_application_directory(cluster, tmp_path):
    for key in ("a", "b", "c"):
        cluster.produce("in", key.encode(), b"v")
    streams = make_client(cluster, tmp_path)
    run_until_counted(streams, cluster, 3)
    assert streams.close(timeout=30)
    app_dir = tmp_path / "app"
    assert task_dirs(app_dir), "the run left no task directories to clean"

    streams.clean_up()

    assert not app_dir.exists()
    assert tmp_path.exists(), "state.dir itself must stay"


def test_clean_up_before_start_keeps_the_process_id(cluster, tmp_path):
    app_dir = tmp_path / "app"
    (app_dir / "0_0" / "rocksdb" / "counts").mkdir(parents=True)
    (app_dir / "0_0" / "rocksdb" / "counts" / "data").write_text("x")
    (app_dir / "0_0" / ".checkpoint").write_text("0\n0\n")
    streams = make_client(cluster, tmp_path)
    process_id = streams.process_id

    streams.clean_up()

    assert sorted(os.listdir(app_dir)) == [".process.lock", "kafka-streams-process-metadata"]
    assert StateDirectory(str(tmp_path), "app").process_id() == process_id
    streams.close()


def test_clean_up_is_refused_while_the_client_runs(cluster, tmp_path):
    cluster.produce("in", b"a", b"v")
    streams = make_client(cluster, tmp_path)
    run_until_counted(streams, cluster, 1)
    try:
        with pytest.raises(IllegalStateException, match=r"RUNNING.*before start\(\) or after close\(\)"):
            streams.clean_up()
        assert task_dirs(tmp_path / "app")
    finally:
        streams.close(timeout=30)


def test_clean_up_never_deletes_a_directory_another_running_client_uses(cluster, tmp_path):
    cluster.produce("in", b"a", b"v")
    cluster.produce("in", b"b", b"v")
    running = make_client(cluster, tmp_path)
    run_until_counted(running, cluster, 2)
    idle = make_client(cluster, tmp_path)  # same state.dir and application.id, never started
    try:
        before = task_dirs(tmp_path / "app")
        # The running client holds the process id lock: the directory is in use.
        with pytest.raises(LockException, match="another running client of application 'app' uses it"):
            idle.clean_up()
        assert task_dirs(tmp_path / "app") == before
    finally:
        running.close(timeout=30)
        idle.close()


def test_clean_up_never_deletes_a_task_directory_another_running_client_holds(cluster, tmp_path):
    cluster.produce("in", b"a", b"v")
    cluster.produce("in", b"b", b"v")
    idle = make_client(cluster, tmp_path)  # takes the process id first, never starts
    running = make_client(cluster, tmp_path)  # runs under a fresh process id
    run_until_counted(running, cluster, 2)
    try:
        before = task_dirs(tmp_path / "app")
        assert before
        with pytest.raises(LockException, match=r"task \d+_\d+ is locked by another running client"):
            idle.clean_up()
        assert task_dirs(tmp_path / "app") == before
    finally:
        running.close(timeout=30)
        idle.close()


def test_clean_up_with_no_state_directory_does_nothing(cluster, tmp_path):
    streams = make_client(cluster, tmp_path / "nowhere", app_id="other")
    streams.close()
    # close() of a client that never started; the directory holds only the process id files.
    streams.clean_up()
    assert not (tmp_path / "nowhere" / "other").exists()
    streams.clean_up()  # a second clean up finds nothing and is fine
