"""A broker that dies and comes back: the application recovers by itself and stays exact.

Apache Kafka is stopped (SIGTERM: a controlled shutdown) or killed (SIGKILL: a crash, its log
recovered at the next start) while an exactly_once_v2 count runs, so every client connection
drops; it stays down for a few seconds and is started again on the same ports and log directory.
Meanwhile the client retries what fails (polls, sends, commits, restoration reads) and, where
librdkafka declares its producer dead for good, replaces it. Afterwards every key's committed
updates are exactly 1..n.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kstreams.client import KafkaStreams, StreamsUncaughtExceptionResponse
from kstreams.cluster.kafka import KafkaCluster
from kstreams.serdes import Serdes
from tests.support.topologies import count_topology

pytestmark = pytest.mark.integration

LONG = Serdes.long()
STRING = Serdes.string()
# How long the broker stays down: longer than a request timeout, shorter than task.timeout.ms.
OUTAGE_S = 5.0
FAST_REBALANCES = {
    "consumer.heartbeat.interval.ms": 100,
    "consumer.session.timeout.ms": 6000,
    "consumer.topic.metadata.refresh.interval.ms": 1000,
}


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def updates(cluster: KafkaCluster) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for record in cluster.read("out"):
        found.setdefault(record.key.decode(), []).append(LONG.deserialize("out", record.value))
    return found


def produce(cluster: KafkaCluster, start: int, count: int, expected: Counter[str]) -> None:
    now = int(time.time() * 1000)
    for i in range(start, start + count):
        key = f"k{i % 10}"
        cluster.produce("in", key.encode(), b"x", timestamp=now + i - start)
        expected[key] += 1


@pytest.mark.parametrize("outage", ["sigterm", "sigkill"])
def test_an_application_survives_a_broker_restart_and_stays_exact(
    own_kafka_broker: Any, tmp_path: Path, outage: str
) -> None:
    cluster = KafkaCluster(own_kafka_broker.bootstrap, FAST_REBALANCES)
    cluster.create_topic("in", 2)
    cluster.create_topic("out", 2)
    errors: list[BaseException] = []
    streams = KafkaStreams(
        count_topology("in", "out"),
        {
            "application.id": "restart",
            "processing.guarantee": "exactly_once_v2",
            "num.stream.threads": 1,
            "commit.interval.ms": 200,
            "session.timeout.ms": 6000,
            "main.consumer.max.poll.interval.ms": 30000,
            "state.dir": str(tmp_path),
        },
        cluster=cluster,
    )
    streams.set_uncaught_exception_handler(
        lambda exc: errors.append(exc) or StreamsUncaughtExceptionResponse.SHUTDOWN_CLIENT  # type: ignore[func-returns-value]
    )
    expected: Counter[str] = Counter()
    streams.start()
    try:
        produce(cluster, 0, 300, expected)
        wait_until(
            lambda: {k: v[-1] for k, v in updates(cluster).items()} == dict(expected), 60, "first counts"
        )
        if outage == "sigterm":
            own_kafka_broker.stop()
        else:
            own_kafka_broker.kill()
        time.sleep(OUTAGE_S)  # the outage itself, not a wait for a condition
        own_kafka_broker.start()
        own_kafka_broker.wait_ready()
        produce(cluster, 300, 300, expected)
        wait_until(
            lambda: {k: v[-1] for k, v in updates(cluster).items()} == dict(expected) or bool(errors),
            120,
            "exact counts after the restart",
        )
        assert errors == []
        assert streams.state in (KafkaStreams.State.RUNNING, KafkaStreams.State.REBALANCING)
        for key, values in updates(cluster).items():
            assert values == list(range(1, expected[key] + 1)), f"{key}: duplicates or gaps"
    finally:
        streams.close(timeout=60)
        cluster.close()
