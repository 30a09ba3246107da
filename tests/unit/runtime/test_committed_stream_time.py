"""Stream time survives a restart through the committed offsets' metadata, as in Kafka Streams.

A task commits each input partition's time with its offset (Kafka's TopicPartitionMetadata) and a
task that takes the partitions over starts its stream time there: its processors see it before
they see a record, and its stream-time punctuations run at it at once. Run on both guarantees
(the consumer's commit, and the offsets a transaction commits) and on both cluster adapters."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kstreams import KafkaStreams, Topology
from kstreams.cluster.port import TopicPartition
from kstreams.processing.offset_metadata import TopicPartitionMetadata
from kstreams.processor import Processor, PunctuationType, Record
from kstreams.serdes import Serdes
from tests.support.waiting import wait_until

STRING = Serdes.string()
# Record timestamps near now: within a broker topic's retention.ms.
BASE = int(time.time() * 1000) - 60_000


# How long a test waits for what other threads do, unless it gives a timeout of its own.
WAIT_S = 60.0


class Events:
    """What the probe saw, in order, from any stream thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[tuple[Any, ...]] = []

    def add(self, *event: Any) -> None:
        with self.lock:
            self.items.append(event)

    def snapshot(self) -> list[tuple[Any, ...]]:
        with self.lock:
            return list(self.items)


def probe_topology(source: str, events: Events) -> Topology:
    class StreamTimeProbe(Processor):
        def init(self, context):  # type: ignore[no-untyped-def]
            self.context = context
            events.add("init", context.current_stream_time_ms())
            context.schedule(60_000, PunctuationType.STREAM_TIME, lambda ts: events.add("punctuate", ts))

        def process(self, record: Record) -> None:
            events.add("process", record.timestamp, self.context.current_stream_time_ms())

    topology = Topology()
    topology.add_source("src", source, key_deserializer=STRING, value_deserializer=STRING)
    topology.add_processor("probe", StreamTimeProbe, "src")
    return topology


@pytest.fixture(params=["embedded", pytest.param("kafka", marks=[pytest.mark.integration, pytest.mark.slow])])
def cluster(request: pytest.FixtureRequest) -> Any:
    """The shared fixture's two adapters; on Apache Kafka the two runs take 5-10 s: slow tier."""
    return request.getfixturevalue(f"{request.param}_cluster")


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_a_restarted_task_resumes_stream_time_from_the_committed_partition_time(
    cluster: Any, app_id: str, tmp_path: Path, guarantee: str
) -> None:
    source = f"{app_id}-in"
    cluster.create_topic(source, 1)
    tp = TopicPartition(source, 0)
    config = {
        "application.id": app_id,
        "state.dir": str(tmp_path),
        "processing.guarantee": guarantee,
        "commit.interval.ms": 100,
    }

    first = Events()
    streams = KafkaStreams(probe_topology(source, first), config, cluster=cluster)
    cluster.produce(source, b"a", b"1", timestamp=BASE + 1_000)
    cluster.produce(source, b"a", b"2", timestamp=BASE + 50_000)
    streams.start()
    try:
        wait_until(lambda: sum(e[0] == "process" for e in first.snapshot()) == 2, WAIT_S, "both records")
    finally:
        assert streams.close(timeout=30)
    reader = cluster.consumer(app_id)
    try:
        committed = reader.committed_with_metadata([tp])
    finally:
        reader.close()
    assert committed[tp].offset == 2
    # The metadata is Kafka Streams' format: a Java application reads this stream time too.
    assert TopicPartitionMetadata.decode(committed[tp].metadata).partition_time == BASE + 50_000

    second = Events()
    streams = KafkaStreams(probe_topology(source, second), config, cluster=cluster)
    cluster.produce(source, b"a", b"3", timestamp=BASE + 20_000)  # older than the stream time
    streams.start()
    try:
        wait_until(lambda: any(e[0] == "process" for e in second.snapshot()), WAIT_S, "the third record")
    finally:
        assert streams.close(timeout=30)
    # The processor starts at the committed stream time, punctuates at it before any record, and
    # a record older than it leaves it where it was (without the metadata: -1, then 20_000).
    assert second.snapshot() == [
        ("init", BASE + 50_000),
        ("punctuate", BASE + 50_000),
        ("process", BASE + 20_000, BASE + 50_000),
    ]
