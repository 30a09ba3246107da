"""KIP-613: record-e2e-latency-avg/min/max of source and terminal nodes, on the embedded cluster.

Records stamped 5 s in the past go through a filter to a sink: each node's latency is wall-clock
time minus the record's timestamp, so every figure lies between 5 s and 5 s plus the test's run,
min <= avg <= max, on the batch (compiled) path and on the per-record path alike."""

from __future__ import annotations

import time

import pytest

from kstreams import Consumed, KafkaStreams, Produced, Serdes, StreamsBuilder
from kstreams.cluster import EmbeddedCluster
from kstreams.processing.e2e_latency import E2E_LATENCY_GROUP
from tests.support.waiting import wait_until

AGE_MS = 5_000
RECORDS = 200


# How long a test waits for what other threads do, unless it gives a timeout of its own.
WAIT_S = 30.0


@pytest.mark.parametrize("compiled", [True, False], ids=["batch-path", "per-record-path"])
def test_source_and_sink_nodes_report_wall_clock_minus_record_timestamp(tmp_path, compiled: bool) -> None:
    cluster = EmbeddedCluster()
    cluster.create_topic("in", 2)
    cluster.create_topic("out", 2)
    builder = StreamsBuilder()
    s = Serdes.string()
    builder.stream("in", Consumed.with_(s, s)).filter(lambda k, v: v != "drop").to(
        "out", Produced.with_(s, s)
    )
    streams = KafkaStreams(
        builder.build(),
        {"application.id": "e2e", "state.dir": str(tmp_path), "processing.compiled": compiled},
        cluster=cluster,
    )
    started_ms = time.time() * 1000
    stamp = int(started_ms) - AGE_MS
    for i in range(RECORDS):
        cluster.produce("in", f"k{i}".encode(), b"drop" if i % 4 == 0 else b"keep", timestamp=stamp + i % 7)
    streams.start()
    try:
        wait_until(lambda: len(cluster.read("out")) == RECORDS * 3 // 4, WAIT_S, "the kept records in out")
        ended_ms = time.time() * 1000
        metrics = {
            (m.tags["task-id"], m.tags["processor-node-id"], m.name): v
            for m, v in streams.metrics().items()
            if m.group == E2E_LATENCY_GROUP
        }
    finally:
        streams.close(timeout=30)
        cluster.close()
    nodes = {node for _, node, _ in metrics}
    assert nodes == {"KSTREAM-SOURCE-0000000000", "KSTREAM-SINK-0000000002"}
    assert {task for task, _, _ in metrics} == {"0_0", "0_1"}
    assert {name for _, _, name in metrics} == {f"record-e2e-latency-{s}" for s in ("avg", "min", "max")}
    for task in ("0_0", "0_1"):
        for node in nodes:
            low, avg, high = (metrics[(task, node, f"record-e2e-latency-{s}")] for s in ("min", "avg", "max"))
            # Each record is at least AGE_MS - 6 ms old when processed, and at most as old as the run.
            assert AGE_MS - 7 <= low <= avg <= high <= ended_ms - stamp, (task, node, low, avg, high)


@pytest.mark.parametrize("compiled", [True, False], ids=["batch-path", "per-record-path"])
def test_processors_without_children_report_it_and_processors_with_children_do_not(
    tmp_path, compiled: bool
) -> None:
    """Kafka records the latency at every terminal node: the end of a foreach and an aggregation
    whose table nothing reads further are terminal nodes, as the sink is; the filter before the
    sink is not."""
    cluster = EmbeddedCluster()
    cluster.create_topic("in", 2)
    cluster.create_topic("out", 2)
    builder = StreamsBuilder()
    s = Serdes.string()
    seen: list[str] = []
    stream = builder.stream("in", Consumed.with_(s, s))
    stream.filter(lambda k, v: v != "drop").to("out", Produced.with_(s, s))
    stream.foreach(lambda k, v: seen.append(k))
    stream.group_by_key().count()
    topology = builder.build()
    streams = KafkaStreams(
        topology,
        {"application.id": "e2e-terminal", "state.dir": str(tmp_path), "processing.compiled": compiled},
        cluster=cluster,
    )
    stamp = int(time.time() * 1000) - AGE_MS
    for i in range(RECORDS):
        cluster.produce("in", f"k{i}".encode(), b"drop" if i % 4 == 0 else b"keep", timestamp=stamp + i % 7)
    streams.start()
    try:
        wait_until(lambda: len(seen) == RECORDS, WAIT_S, "every record at the foreach")
        wait_until(lambda: len(cluster.read("out")) == RECORDS * 3 // 4, WAIT_S, "the kept records in out")

        def latencies() -> dict[tuple[str, str, str], float]:
            return {
                (m.tags["task-id"], m.tags["processor-node-id"], m.name): v
                for m, v in streams.metrics().items()
                if m.group == E2E_LATENCY_GROUP
            }

        # The aggregation is recorded once its batch is counted, which the foreach may precede.
        wait_until(
            lambda: all(
                latency == latency  # not NaN: some record reached the node in the window
                for (_, node, _), latency in latencies().items()
                if node.startswith("KSTREAM-AGGREGATE-")
            ),
            WAIT_S,
            "the aggregation's latency",
        )
        ended_ms = time.time() * 1000
        metrics = latencies()
    finally:
        streams.close(timeout=30)
        cluster.close()
    nodes = {node for _, node, _ in metrics}
    prefixes = sorted(node.rsplit("-", 1)[0] for node in nodes)
    assert prefixes == ["KSTREAM-AGGREGATE", "KSTREAM-FOREACH", "KSTREAM-SINK", "KSTREAM-SOURCE"]
    for task in ("0_0", "0_1"):
        for node in nodes:
            low, avg, high = (metrics[(task, node, f"record-e2e-latency-{s}")] for s in ("min", "avg", "max"))
            assert AGE_MS - 7 <= low <= avg <= high <= ended_ms - stamp, (task, node, low, avg, high)
