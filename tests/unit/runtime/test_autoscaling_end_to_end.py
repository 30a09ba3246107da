"""KIP-878 end to end: a running multi-subtopology application (repartition, count, stream-table
join) whose source grows from 2 to 4 partitions expands its internal topics, starts tasks for the
new partitions and gives correct results for keys in them; with autoscaling off, the grown source
reaches the uncaught exception handler as a clear error."""

from __future__ import annotations

import time
from collections import Counter

from kstreams import (
    Consumed,
    Grouped,
    KafkaStreams,
    Materialized,
    Produced,
    Repartitioned,
    Serdes,
    StreamsBuilder,
)
from kstreams.client import StreamsUncaughtExceptionResponse
from kstreams.cluster import EmbeddedCluster
from kstreams.errors import MisconfiguredInternalTopicException
from tests.support.waiting import wait_until

STRING = Serdes.string()
LONG = Serdes.long()


# How long a test waits for what other threads do, unless it gives a timeout of its own.
WAIT_S = 60.0


def page_topology():  # type: ignore[no-untyped-def]
    """events (user -> page) are re-keyed by page (a repartition topic), counted per page, and each
    event is joined with its page's running count (a stream-table join in the second subtopology)."""
    builder = StreamsBuilder()
    by_page = (
        builder.stream("events", Consumed.with_(STRING, STRING))
        .select_key(lambda user, page: page)
        .repartition(Repartitioned.with_(STRING, STRING))
    )
    counts = by_page.group_by_key(Grouped.with_(STRING, STRING)).count(Materialized.as_("page-counts"))
    counts.to_stream().to("page-counts", Produced.with_(STRING, LONG))
    by_page.left_join(counts, lambda page, count: f"{page}:{count}").to(
        "enriched", Produced.with_(STRING, STRING)
    )
    return builder.build()


def start(cluster: EmbeddedCluster, tmp_path, **config: object) -> KafkaStreams:  # type: ignore[no-untyped-def]
    streams = KafkaStreams(
        page_topology(),
        {
            "application.id": "scaling",
            "num.stream.threads": 2,
            "commit.interval.ms": 50,
            "state.dir": str(tmp_path),
            **config,
        },
        cluster=cluster,
    )
    streams.start()
    assert streams.wait_for_state(KafkaStreams.State.RUNNING, timeout=30)
    return streams


def latest(cluster: EmbeddedCluster, topic: str) -> dict[str, int]:
    return {r.key.decode(): LONG.deserialize(topic, r.value) for r in cluster.read(topic)}


def produce(
    cluster: EmbeddedCluster, partition: int, user: str, pages: list[str], expected: Counter[str]
) -> None:
    for page in pages:
        cluster.produce(
            "events", user.encode(), page.encode(), timestamp=int(time.time() * 1000), partition=partition
        )
        expected[page] += 1


def make_cluster() -> EmbeddedCluster:
    cluster = EmbeddedCluster()
    for topic in ("events", "page-counts", "enriched"):
        cluster.create_topic(topic, 2)
    return cluster


def test_source_growth_expands_internal_topics_and_new_partitions_are_processed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cluster = make_cluster()
    streams = start(cluster, tmp_path, **{"partition.autoscaling.enabled": True})
    try:
        expected: Counter[str] = Counter()
        for p in (0, 1):
            produce(cluster, p, f"old-user-{p}", [f"old-page-{i}" for i in range(10)] * 2, expected)
        wait_until(lambda: latest(cluster, "page-counts") == dict(expected), WAIT_S, "counts before growth")

        cluster.create_partitions("events", 4)
        repartition = [name for name in cluster.topics() if name.endswith("-repartition")]
        internal = ["scaling-page-counts-changelog", *repartition]
        wait_until(
            lambda: all(cluster.topics()[name].partitions == 4 for name in internal),
            WAIT_S,
            "internal topics expanded to 4 partitions",
        )
        # Keys that live only in the new source partitions, and pages never seen before.
        new_pages = [f"new-page-{i}" for i in range(12)]
        for p in (2, 3):
            produce(cluster, p, f"new-user-{p}", new_pages, expected)
        wait_until(
            lambda: latest(cluster, "page-counts") == dict(expected), WAIT_S, "exact counts after growth"
        )
        enriched = [(r.key.decode(), r.value.decode()) for r in cluster.read("enriched")]
        # Every event of a new page was joined with the page's count as of that event.
        for page in new_pages:
            assert sorted(v for k, v in enriched if k == page) == [f"{page}:1", f"{page}:2"]
        tasks = {m.tags["task-id"] for m in streams.metrics() if m.group == "stream-task-metrics"}
        assert {"0_2", "0_3"} <= tasks  # the source subtopology runs tasks for the new partitions
        parallelism = {
            m.tags["subtopology-id"]: v
            for m, v in streams.metrics().items()
            if m.name == "current-subtopology-parallelism"
        }
        assert set(parallelism.values()) == {4.0}
    finally:
        streams.close(timeout=30)
        cluster.close()


def test_without_autoscaling_a_grown_source_reaches_the_handler(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cluster = make_cluster()
    errors: list[BaseException] = []
    streams = KafkaStreams(
        page_topology(),
        {"application.id": "scaling", "commit.interval.ms": 50, "state.dir": str(tmp_path)},
        cluster=cluster,
    )
    streams.set_uncaught_exception_handler(
        lambda exc: errors.append(exc) or StreamsUncaughtExceptionResponse.SHUTDOWN_CLIENT
    )
    streams.start()
    try:
        assert streams.wait_for_state(KafkaStreams.State.RUNNING, timeout=30)
        cluster.create_partitions("events", 4)
        assert streams.wait_for_state(KafkaStreams.State.ERROR, timeout=30)
        [error] = errors
        assert isinstance(error, MisconfiguredInternalTopicException)
        assert "requires 4 partitions, but the existing topic on the broker has 2 partitions" in str(error)
        internal = {
            n: d.partitions for n, d in cluster.topics().items() if n.endswith(("-changelog", "-repartition"))
        }
        assert internal and set(internal.values()) == {2}  # nothing was expanded
    finally:
        streams.close(timeout=30)
        cluster.close()


def test_an_admin_timeout_during_expansion_is_a_failed_attempt_not_a_dead_client(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cluster = make_cluster()
    autoscaling = {"partition.autoscaling.enabled": True, "partition.autoscaling.timeout.ms": 60000}
    streams = start(cluster, tmp_path, **autoscaling)
    try:
        # Not a ClusterError: what a client library raises of its own when a request times out.
        cluster.fail_next("create_partitions", times=2, error=TimeoutError("admin request timed out"))
        cluster.create_partitions("events", 4)
        wait_until(
            lambda: cluster.topics()["scaling-page-counts-changelog"].partitions == 4,
            WAIT_S,
            "expansion retried after the admin timeouts",
        )
        expected: Counter[str] = Counter()
        produce(cluster, 3, "new-user", ["p-1", "p-2", "p-1"], expected)
        wait_until(lambda: latest(cluster, "page-counts") == dict(expected), WAIT_S, "counts after growth")
        assert streams.state in (KafkaStreams.State.RUNNING, KafkaStreams.State.REBALANCING)
    finally:
        streams.close(timeout=30)
        cluster.close()
