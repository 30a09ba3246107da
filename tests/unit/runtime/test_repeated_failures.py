"""REPLACE_THREAD on a failure that repeats: a task that fails again at the same record restarts
after a growing delay, says so in a WARNING naming the record, counts it in a metric, and never
floods the output with the records it reprocesses on every restart."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kstreams import StreamsUncaughtExceptionResponse as Response
from kstreams.client import KafkaStreams, State
from kstreams.cluster import EmbeddedCluster
from kstreams.serdes import Serdes
from kstreams.topology.topology import Topology
from tests.support.waiting import wait_until

STRING = Serdes.string()


class RefusesBoom:
    """A value serializer that cannot serialize the value "BOOM" (a deterministic failure)."""

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data == "BOOM":
            raise ValueError("cannot serialize BOOM")
        return STRING.serialize(topic, data)


def boom_topology() -> Topology:
    topology = Topology()
    topology.add_source("src", "in", key_deserializer=STRING, value_deserializer=STRING)
    topology.add_sink("sink", "out", "src", key_serializer=STRING, value_serializer=RefusesBoom())
    return topology


@pytest.fixture
def streams(embedded_cluster: EmbeddedCluster, tmp_path: Any) -> Iterator[KafkaStreams]:
    embedded_cluster.create_topic("in", 1)
    embedded_cluster.create_topic("out", 1)
    client = KafkaStreams(
        boom_topology(),
        {
            "application.id": "repeats",
            "client.id": "repeats",
            "processing.guarantee": "at_least_once",
            "commit.interval.ms": 50,
            "retry.backoff.ms": 100,
            "state.dir": str(tmp_path),
        },
        cluster=embedded_cluster,
    )
    yield client
    client.close(timeout=30)


def test_a_failure_at_the_same_record_backs_off_and_never_floods_the_output(
    streams: KafkaStreams, embedded_cluster: EmbeddedCluster, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[float] = []
    states: list[State] = []

    def handler(exc: BaseException) -> Response:
        calls.append(time.monotonic())  # on the polling thread
        return Response.REPLACE_THREAD

    streams.set_uncaught_exception_handler(handler)
    streams.set_state_listener(lambda new, old: states.append(new))
    for value in ("ok1", "BOOM", "ok2"):
        embedded_cluster.produce("in", b"k", value.encode())
    caplog.set_level(logging.WARNING)
    streams.start()
    wait_until(lambda: len(calls) >= 5, 15, "the failure to repeat five times")
    times = list(calls[:5])
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # The first failure restarts at once; each repeat waits retry.backoff.ms (100), doubling.
    for gap, backoff in zip(gaps[1:], (0.1, 0.2, 0.4), strict=True):
        assert gap >= backoff * 0.9, f"restart gaps {gaps}: the replacement does not back off"
    # It spun 1,700 times in 3 s before, writing "ok1" each time: now once per restart.
    ok1 = [r for r in embedded_cluster.read("out") if r.value == b"ok1"]
    assert len(ok1) <= len(calls) + 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    repeats = [m for m in warnings if "again at the same record" in m]
    assert repeats, warnings
    assert "topic in" in repeats[-1] and "partition 0" in repeats[-1] and "offset 1" in repeats[-1]
    metrics = {m.name: v for m, v in streams.metrics().items() if m.group == "stream-thread-metrics"}
    assert metrics["repeated-task-failures-total"] >= 2
    assert metrics["task-restart-backoff-ms"] > 0
    assert State.ERROR not in states and streams.state is State.RUNNING


def test_a_failure_at_a_new_record_restarts_the_task_at_once(
    streams: KafkaStreams, embedded_cluster: EmbeddedCluster
) -> None:
    """Failures that move on (a flaky dependency, not a poison record) restart without delay."""
    failed: list[float] = []

    class FailsEachRecordOnce:
        seen: set[str] = set()

        def serialize(self, topic: str | None, data: Any) -> bytes | None:
            if data not in self.seen:
                self.seen.add(data)
                failed.append(time.monotonic())
                raise ValueError(f"first try of {data}")
            return STRING.serialize(topic, data)

    topology = Topology()
    topology.add_source("src", "in", key_deserializer=STRING, value_deserializer=STRING)
    topology.add_sink("sink", "out", "src", key_serializer=STRING, value_serializer=FailsEachRecordOnce())
    client = KafkaStreams(
        topology,
        {**streams.config.originals(), "application.id": "moves-on", "client.id": "moves-on"},
        cluster=embedded_cluster,
    )
    client.set_uncaught_exception_handler(lambda exc: Response.REPLACE_THREAD)
    try:
        for i in range(5):
            embedded_cluster.produce("in", b"k", f"v{i}".encode())
        client.start()
        # At least once: a record written before a failure may be written again, so wait for
        # every distinct value rather than for a count of records.
        expected = {f"v{i}".encode() for i in range(5)}
        wait_until(
            lambda: {r.value for r in embedded_cluster.read("out")} >= expected, 10, "every record written"
        )
        assert len(failed) == 5
        # Five failures at five records: none counts as repeated, so no restart waited a backoff
        # (read from the metrics, not the clock, which a loaded machine stretches).
        metrics = {m.name: v for m, v in client.metrics().items() if m.group == "stream-thread-metrics"}
        assert metrics["repeated-task-failures-total"] == 0
        assert metrics["task-restart-backoff-ms"] == 0
    finally:
        client.close(timeout=30)
