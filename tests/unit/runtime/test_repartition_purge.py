"""Repartition topics are purged up to the committed offsets (``repartition.purge.interval.ms``), as
Kafka Streams' TaskManager does: the records a task has committed past are deleted, none before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kstreams import Grouped, KafkaStreams, Serdes, StreamsBuilder
from kstreams.cluster.port import TopicPartition
from tests.support.waiting import wait_until

STRING = Serdes.string()
LONG = Serdes.long()


def _start(cluster: Any, app_id: str, tmp_path: Path, guarantee: str, purge_ms: int) -> KafkaStreams:
    builder = StreamsBuilder()
    # Re-keyed by the value's first letter: a repartition topic between two sub-topologies.
    builder.stream(f"{app_id}-in").group_by(
        lambda _key, value: value[0], Grouped.as_("by-letter")
    ).count().to_stream().to(f"{app_id}-out")
    streams = KafkaStreams(
        builder.build(),
        {
            "application.id": app_id,
            "state.dir": str(tmp_path),
            "default.key.serde": "string",
            "default.value.serde": "string",
            "commit.interval.ms": 50,
            "processing.guarantee": guarantee,
            "repartition.purge.interval.ms": purge_ms,
        },
        cluster=cluster,
    )
    streams.start()
    return streams


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_committed_repartition_records_are_deleted_and_uncommitted_ones_kept(
    cluster: Any, app_id: str, tmp_path: Path, guarantee: str
) -> None:
    cluster.create_topic(f"{app_id}-in", 1)
    cluster.create_topic(f"{app_id}-out", 1)
    repartition = TopicPartition(f"{app_id}-by-letter-repartition", 0)
    admin = cluster.admin()
    streams = _start(cluster, app_id, tmp_path, guarantee, purge_ms=0)
    try:
        for i in range(40):
            cluster.produce(f"{app_id}-in", f"k{i}".encode(), f"{'ab'[i % 2]}{i}".encode())

        def counted() -> bool:
            latest = {r.key.decode(): LONG.deserialize("out", r.value) for r in cluster.read(f"{app_id}-out")}
            return latest == {"a": 20, "b": 20}

        wait_until(counted, 60, "the counts of all 40 records")

        def purged() -> bool:
            start = admin.list_offsets([repartition], "read_uncommitted")[repartition][0]
            committed = admin.committed_offsets(app_id, [repartition]).get(repartition, 0)
            # Never past what the group committed: those records may still be needed.
            assert start <= committed, f"records from {start} deleted, only {committed} committed"
            return start == committed > 0

        wait_until(purged, 30, "the repartition topic's log start to reach the committed offset")
    finally:
        streams.close(timeout=30)


def test_nothing_is_purged_before_the_interval(embedded_cluster: Any, app_id: str, tmp_path: Path) -> None:
    cluster = embedded_cluster
    cluster.create_topic(f"{app_id}-in", 1)
    cluster.create_topic(f"{app_id}-out", 1)
    repartition = TopicPartition(f"{app_id}-by-letter-repartition", 0)
    streams = _start(cluster, app_id, tmp_path, "at_least_once", purge_ms=3_600_000)
    try:
        for i in range(10):
            cluster.produce(f"{app_id}-in", f"k{i}".encode(), b"a")
        admin = cluster.admin()
        wait_until(
            lambda: admin.committed_offsets(app_id, [repartition]).get(repartition, 0) == 10,
            30,
            "the repartitioned records to be committed",
        )
        assert admin.list_offsets([repartition])[repartition][0] == 0
    finally:
        streams.close(timeout=30)


def test_the_interval_is_a_config_with_kafka_default() -> None:
    from kstreams import StreamsConfig

    assert StreamsConfig({"application.id": "a"})["repartition.purge.interval.ms"] == 30000
