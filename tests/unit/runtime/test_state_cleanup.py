"""The state cleaner (``state.cleanup.delay.ms``): obsolete task directories go, held ones stay."""

from __future__ import annotations

import os
import time
from pathlib import Path

from kstreams.client import KafkaStreams
from kstreams.cluster import EmbeddedCluster
from kstreams.topology import StreamsBuilder
from tests.support.waiting import holds_within, wait_until

# How long a test waits for what other threads do, unless it gives a timeout of its own.
WAIT_S = 20.0


def test_directories_of_tasks_no_client_holds_are_deleted_after_the_cleanup_delay(tmp_path: Path) -> None:
    cluster = EmbeddedCluster()
    cluster.create_topic("in", 1)
    cluster.create_topic("out", 1)
    builder = StreamsBuilder()
    builder.stream("in").to("out")
    app_dir = tmp_path / "cleaner"
    stale = app_dir / "0_7"
    stale.mkdir(parents=True)
    (stale / "data").write_text("left by a task this client no longer runs")
    old = time.time() - 3600
    os.utime(stale / "data", (old, old))
    os.utime(stale, (old, old))
    streams = KafkaStreams(
        builder.build(),
        {
            "application.id": "cleaner",
            "state.dir": str(tmp_path),
            "state.cleanup.delay.ms": 200,
            "default.key.serde": "string",
            "default.value.serde": "string",
            "commit.interval.ms": 50,
        },
        cluster=cluster,
    )
    streams.start()
    try:
        cluster.produce("in", b"k", b"v")
        assert holds_within(lambda: not stale.exists(), WAIT_S), "the obsolete task directory was not deleted"
        wait_until(lambda: len(cluster.read("out")) == 1, WAIT_S, "the output record")
    finally:
        streams.close(timeout=10.0)
