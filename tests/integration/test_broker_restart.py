"""A broker that dies and comes back: the application recovers by itself and stays exact.

Apache Kafka is stopped (SIGTERM: a controlled shutdown) or killed (SIGKILL: a crash, its log
recovered at the next start) while a count per key runs (2 partitions, 2 stream threads,
commit.interval.ms=200), so every client connection drops; it stays down for 5 s (longer than a
request timeout) or 30 s (longer than the session timeout and librdkafka's metadata and request
timeouts, shorter than task.timeout.ms) and is started again on the same ports and log directory.
Meanwhile the client retries what fails (polls, sends, commits, restoration reads, admin calls),
replaces a producer librdkafka declares dead and an admin client that stops answering, and revives
the tasks of a replaced producer from their committed offsets. It never reaches ERROR and never
calls the uncaught exception handler.

Afterwards, under exactly_once_v2, every key's committed updates are exactly 1..n. Under
at_least_once a key's updates may repeat (records processed again after a revival), but none is
lost or skipped: every value 1..n appears and the last one is n, the number of records produced.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kstreams.client import KafkaStreams, StreamsUncaughtExceptionResponse
from kstreams.cluster.kafka import KafkaCluster
from kstreams.cluster.port import TopicPartition
from kstreams.serdes import Serdes
from tests.support.topologies import count_topology
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

logger = logging.getLogger(__name__)

LONG = Serdes.long()
FAST_REBALANCES = {
    "consumer.heartbeat.interval.ms": 100,
    "consumer.session.timeout.ms": 6000,
    "consumer.topic.metadata.refresh.interval.ms": 1000,
}
GUARANTEES = ["at_least_once", "exactly_once_v2"]
OUTAGES = ["sigterm", "sigkill"]
# How long the broker stays down: longer than a request timeout, and longer than the session
# timeout and librdkafka's metadata timeouts (slow tier); both shorter than task.timeout.ms.
DURATIONS = {"5s": 5.0, "30s": 30.0}
# The default tier takes one 5 s case of each guarantee, one stopped and one killed; the slow tier
# takes the other six (each case starts a broker of its own: 20-60 s).
DEFAULT_CASES = {("at_least_once", "sigkill", "5s"), ("exactly_once_v2", "sigterm", "5s")}
CASES = [
    pytest.param(
        guarantee,
        outage,
        seconds,
        id=f"{guarantee}-{outage}-{name}",
        marks=[] if (guarantee, outage, name) in DEFAULT_CASES else [pytest.mark.slow],
    )
    for guarantee in GUARANTEES
    for outage in OUTAGES
    for name, seconds in DURATIONS.items()
]


def updates(cluster: KafkaCluster) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for record in cluster.read("out"):
        found.setdefault(record.key.decode(), []).append(LONG.deserialize("out", record.value))
    return found


def last_updates(cluster: KafkaCluster) -> dict[str, int]:
    return {key: values[-1] for key, values in sorted(updates(cluster).items())}


def committed_total(cluster: KafkaCluster) -> int:
    """How many input records the application has committed, over both partitions."""
    partitions = [TopicPartition("in", p) for p in range(2)]
    return sum(cluster.admin().committed_offsets("restart", partitions).values())


def produce(cluster: KafkaCluster, start: int, count: int, expected: Counter[str]) -> None:
    now = int(time.time() * 1000)
    for i in range(start, start + count):
        key = f"k{i % 10}"
        cluster.produce("in", key.encode(), b"x", timestamp=now + i - start)
        expected[key] += 1


def assert_committed_updates(found: dict[str, list[int]], expected: Counter[str], guarantee: str) -> None:
    assert sorted(found) == sorted(expected)
    for key, values in found.items():
        n = expected[key]
        if guarantee == "exactly_once_v2":
            assert values == list(range(1, n + 1)), f"{key}: duplicates or gaps"
        else:
            assert values[-1] == n, f"{key}: the last update is {values[-1]}, {n} records were produced"
            missing = sorted(set(range(1, n + 1)) - set(values))
            assert not missing, f"{key}: updates {missing[:10]} were lost"
            beyond = sorted(v for v in set(values) if not 1 <= v <= n)
            assert not beyond, f"{key}: counted past {n}: {beyond[:10]}"


@pytest.mark.parametrize(("guarantee", "outage", "outage_s"), CASES)
def test_an_application_survives_a_broker_restart_and_stays_exact(
    own_kafka_broker: Any, tmp_path: Path, guarantee: str, outage: str, outage_s: float
) -> None:
    cluster = KafkaCluster(own_kafka_broker.bootstrap, FAST_REBALANCES)
    cluster.create_topic("in", 2)
    cluster.create_topic("out", 2)
    errors: list[BaseException] = []
    states: list[KafkaStreams.State] = []
    streams = KafkaStreams(
        count_topology("in", "out"),
        {
            "application.id": "restart",
            "processing.guarantee": guarantee,
            "num.stream.threads": 2,
            "commit.interval.ms": 200,
            "session.timeout.ms": 6000,
            "main.consumer.max.poll.interval.ms": 30000,
            "state.dir": str(tmp_path),
        },
        cluster=cluster,
    )
    streams.set_state_listener(lambda new, old: states.append(new))
    streams.set_uncaught_exception_handler(
        lambda exc: errors.append(exc) or StreamsUncaughtExceptionResponse.SHUTDOWN_CLIENT  # type: ignore[func-returns-value]
    )
    expected: Counter[str] = Counter()
    streams.start()
    try:
        produce(cluster, 0, 300, expected)
        wait_until(lambda: last_updates(cluster) == dict(expected), 60, "first counts")
        # Under at_least_once a crash replays what was processed after the last commit, on top of
        # a store that already counted it (Kafka Streams does the same). The outage starts once
        # the first records are committed: nothing is left to replay, and the counts must be exact.
        wait_until(lambda: committed_total(cluster) == 300, 30, "the first records' offsets committed")
        logger.info("Taking the broker away (%s) for %gs", outage, outage_s)
        if outage == "sigterm":
            own_kafka_broker.stop()
        else:
            own_kafka_broker.kill()
        time.sleep(outage_s)  # the outage itself, not a wait for a condition
        own_kafka_broker.start()
        own_kafka_broker.wait_ready()
        logger.info("The broker is back")
        produce(cluster, 300, 300, expected)
        wait_until(
            lambda: (
                last_updates(cluster) == dict(expected) or bool(errors) or KafkaStreams.State.ERROR in states
            ),
            120,
            lambda: (
                f"exact counts after the restart: last updates {last_updates(cluster)}, "
                f"expected {dict(expected)}"
            ),
        )
        logger.info("Counts after the restart: %s", "exact" if not errors else "errors")
        assert errors == []
        assert KafkaStreams.State.ERROR not in states
        assert streams.state in (KafkaStreams.State.RUNNING, KafkaStreams.State.REBALANCING)
        assert_committed_updates(updates(cluster), expected, guarantee)
    finally:
        streams.close(timeout=60)
        cluster.close()
