"""exactly_once_v2 through the runtime: a client that crashes or freezes at any point of its work,
or whose commit fails, leaves nothing visible to read_committed readers that the true counts would
not show; its successor wipes or rewinds uncommitted local state and restores to the last commit.

Every test counts records per key with the DSL (persistent stores, caching on, as Kafka's defaults)
and checks the newest committed count of every key against the true count.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kstreams.client import KafkaStreams, StateRestoreListener
from kstreams.cluster import EmbeddedCluster
from kstreams.cluster.port import ClusterError
from kstreams.serdes import Serdes
from kstreams.topology.dsl import Consumed, Materialized, Produced, StreamsBuilder
from kstreams.topology.topology import Topology
from tests.support.waiting import wait_until

LONG = Serdes.long()
STRING = Serdes.string()
APP = "eos"
KEYS = 25


# How long a test waits for what other threads do, unless it gives a timeout of its own.
WAIT_S = 60.0


def count_topology(store_type: str = "rocks_db") -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .group_by_key()
        .count(Materialized.as_("counts").with_store_type(store_type))
        .to_stream()
        .to("out", Produced.with_(STRING, LONG))
    )
    return builder.build()


@pytest.fixture
def cluster(embedded_cluster: EmbeddedCluster) -> EmbeddedCluster:
    embedded_cluster.create_topic("in", 2)
    embedded_cluster.create_topic("out", 2)
    return embedded_cluster


def new_client(
    cluster: EmbeddedCluster, state_dir: Path, name: str, store_type: str = "rocks_db", **overrides: Any
) -> KafkaStreams:
    config: dict[str, Any] = {
        "application.id": APP,
        "client.id": f"client-{name}",
        "processing.guarantee": "exactly_once_v2",
        "num.stream.threads": 2,
        "commit.interval.ms": 100,
        "session.timeout.ms": 1000,
        "producer.transaction.timeout.ms": 2000,
        "state.dir": str(state_dir),
    }
    config.update(overrides)
    return KafkaStreams(count_topology(store_type), config, cluster=cluster)


class Input:
    """Produces records with keys key-0 .. key-<KEYS-1> and remembers the true count per key."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.cluster = cluster
        self.expected: Counter[str] = Counter()
        self.produced = 0

    def produce(self, count: int) -> None:
        for i in range(self.produced, self.produced + count):
            key = f"key-{i % KEYS}"
            self.cluster.produce("in", key.encode(), b"v", timestamp=1_000 + i)
            self.expected[key] += 1
        self.produced += count


def committed_counts(cluster: EmbeddedCluster) -> dict[str, int]:
    """The newest count per key that a read_committed reader sees."""
    return {r.key.decode(): LONG.deserialize("out", r.value) for r in cluster.read("out", "read_committed")}


def assert_never_overcounted(cluster: EmbeddedCluster, expected: Counter[str]) -> None:
    # Counts only grow: a committed value above the true count means a record was counted twice.
    for record in cluster.read("out", "read_committed"):
        key = record.key.decode()
        assert LONG.deserialize("out", record.value) <= expected[key], f"{key} counted twice"


def wait_exact(cluster: EmbeddedCluster, source: Input, timeout: float = 20.0) -> None:
    wait_until(lambda: committed_counts(cluster) == dict(source.expected), timeout, "exact committed counts")
    assert_never_overcounted(cluster, source.expected)


def test_exact_counts_across_three_crash_and_takeover_cycles(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    source = Input(cluster)
    source.produce(400)
    for cycle in range(3):
        # Alternate between restarting on the crashed client's state directory (its uncommitted
        # local state must be wiped) and taking over on a fresh one (restored from the changelog).
        streams = new_client(cluster, tmp_path / f"node-{cycle % 2}", f"crashing-{cycle}")
        streams.start()
        before = sum(committed_counts(cluster).values())
        source.produce(600)
        wait_until(
            lambda before=before: sum(committed_counts(cluster).values()) > before + 100,
            WAIT_S,
            f"progress before crash {cycle}",
        )
        streams._abandon()
        assert_never_overcounted(cluster, source.expected)
    survivor = new_client(cluster, tmp_path / "node-0", "survivor")
    survivor.start()
    try:
        source.produce(300)
        wait_exact(cluster, source)
    finally:
        assert survivor.close(timeout=30)


class Freezer:
    """Makes one producer operation block (before it runs) once armed, as if the process stopped
    right there; ``thaw`` lets it go on, a zombie that must be fenced."""

    def __init__(self, producer: Any, operation: str) -> None:
        self.frozen = threading.Event()
        self._thaw = threading.Event()
        self.armed = False
        original = getattr(producer, operation)

        def frozen_call(*args: Any, **kwargs: Any) -> Any:
            if self.armed and not self.frozen.is_set():
                self.frozen.set()
                self._thaw.wait(60)
            return original(*args, **kwargs)

        setattr(producer, operation, frozen_call)

    def thaw(self) -> None:
        self._thaw.set()


@pytest.mark.parametrize("operation", ["send", "flush", "send_offsets_to_transaction", "commit_transaction"])
def test_a_client_stopped_inside_a_commit_step_leaves_nothing_visible(
    cluster: EmbeddedCluster, tmp_path: Path, operation: str
) -> None:
    source = Input(cluster)
    source.produce(500)
    frozen = new_client(cluster, tmp_path / "a", "frozen")
    frozen.start()
    successor = None
    try:
        wait_until(lambda: sum(committed_counts(cluster).values()) > 0, WAIT_S, "first commits")
        freezer = Freezer(frozen._producer, operation)
        freezer.armed = True
        source.produce(500)
        assert freezer.frozen.wait(30), f"{operation} was never called"
        # Whatever the frozen client did since its last commit stays invisible, however long it lasts.
        assert_never_overcounted(cluster, source.expected)
        successor = new_client(cluster, tmp_path / "b", "successor")
        successor.start()
        source.produce(200)
        wait_exact(cluster, source)
        # The zombie wakes up: its transaction was aborted when it timed out, and it is fenced.
        freezer.thaw()
        source.produce(100)
        wait_exact(cluster, source)
    finally:
        for streams in (frozen, successor):
            if streams is not None:
                streams.close(timeout=30)
    assert_never_overcounted(cluster, source.expected)


@pytest.mark.parametrize("operation", ["send", "flush", "send_offsets_to_transaction", "commit_transaction"])
def test_a_failed_commit_step_on_a_live_client_aborts_rewinds_and_stays_exact(
    cluster: EmbeddedCluster, tmp_path: Path, operation: str
) -> None:
    source = Input(cluster)
    source.produce(500)
    streams = new_client(cluster, tmp_path / "a", "live")
    streams.start()
    try:
        wait_until(lambda: sum(committed_counts(cluster).values()) > 0, WAIT_S, "first commits")
        cluster.fail_next(operation, times=2)
        source.produce(500)
        wait_exact(cluster, source)
        source.produce(200)
        wait_exact(cluster, source)
        assert streams.state is KafkaStreams.State.RUNNING
    finally:
        assert streams.close(timeout=30)


def test_persistent_failures_reach_the_handler_without_breaking_exactness(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    source = Input(cluster)
    source.produce(300)
    # Failures are retried (abort, rewind) for task.timeout.ms, then reach the handler.
    streams = new_client(cluster, tmp_path / "a", "live", **{"task.timeout.ms": 2000})
    errors: list[BaseException] = []

    def handler(exc: BaseException) -> Any:
        from kstreams.client import StreamsUncaughtExceptionResponse

        errors.append(exc)
        return StreamsUncaughtExceptionResponse.SHUTDOWN_CLIENT

    streams.set_uncaught_exception_handler(handler)
    streams.start()
    try:
        wait_until(lambda: sum(committed_counts(cluster).values()) > 0, WAIT_S, "first commits")
        cluster.fail_next(
            "commit_transaction", times=10_000, error=ClusterError("broker gone", retriable=True)
        )
        source.produce(300)
        assert streams.wait_for_state(KafkaStreams.State.ERROR, timeout=30)
    finally:
        streams.close(timeout=30)
    assert errors and "commit" in str(errors[0]).lower()
    assert_never_overcounted(cluster, source.expected)
    cluster._broker.faults.clear()  # the broker is back
    successor = new_client(cluster, tmp_path / "b", "successor")
    successor.start()
    try:
        wait_exact(cluster, source)
    finally:
        assert successor.close(timeout=30)


class StartRecorder(StateRestoreListener):
    def __init__(self) -> None:
        self.starts: dict[Any, int] = {}

    def on_restore_start(self, topic_partition, store_name, starting_offset, ending_offset):  # type: ignore[no-untyped-def]
        self.starts[topic_partition] = starting_offset


def test_checkpoint_exists_only_after_a_clean_close(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    source = Input(cluster)
    source.produce(300)
    streams = new_client(cluster, tmp_path / "a", "a", **{"num.stream.threads": 1})
    checkpoints = [tmp_path / "a" / APP / f"0_{p}" / ".checkpoint" for p in range(2)]
    streams.start()
    try:
        wait_exact(cluster, source)
        # While the tasks process, their stores may hold uncommitted writes: no checkpoint.
        assert not any(os.path.exists(path) for path in checkpoints)
    finally:
        assert streams.close(timeout=30)
    assert all(os.path.exists(path) for path in checkpoints)

    # A crash leaves no checkpoint, so the next client on that directory restores from scratch.
    crashing = new_client(cluster, tmp_path / "a", "b")
    crashing.start()
    source.produce(100)
    wait_exact(cluster, source)
    crashing._abandon()
    assert not any(os.path.exists(path) for path in checkpoints)
    restarted = new_client(cluster, tmp_path / "a", "c")
    recorder = StartRecorder()
    restarted.set_global_state_restore_listener(recorder)
    restarted.start()
    try:
        source.produce(50)
        wait_exact(cluster, source)
    finally:
        assert restarted.close(timeout=30)
    assert recorder.starts and set(recorder.starts.values()) == {0}


@pytest.mark.parametrize("operation", ["send", "flush", "commit_transaction"])
def test_a_fatal_producer_error_replaces_the_producer_and_stays_exact(
    cluster: EmbeddedCluster, tmp_path: Path, operation: str
) -> None:
    from kstreams.cluster.port import FatalClientError

    source = Input(cluster)
    source.produce(300)
    streams = new_client(cluster, tmp_path / "a", "live", store_type="in_memory")
    errors: list[BaseException] = []
    streams.set_uncaught_exception_handler(lambda exc: errors.append(exc))  # type: ignore[arg-type,func-returns-value]
    streams.start()
    try:
        wait_exact(cluster, source)
        first = streams._producer
        # What librdkafka reports after a broker lost its state: the producer is dead for good.
        cluster.fail_next(operation, error=FatalClientError("Broker: out of order sequence number"))
        source.produce(300)
        wait_exact(cluster, source)
        assert streams._producer is not first
        assert streams.state is KafkaStreams.State.RUNNING
        assert errors == []
    finally:
        assert streams.close(timeout=30)


def test_a_fatal_error_while_aborting_replaces_the_producer_and_stays_exact(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    from kstreams.cluster.port import FatalClientError

    source = Input(cluster)
    source.produce(300)
    streams = new_client(cluster, tmp_path / "a", "live", store_type="in_memory")
    errors: list[BaseException] = []
    streams.set_uncaught_exception_handler(lambda exc: errors.append(exc))  # type: ignore[arg-type,func-returns-value]
    streams.start()
    try:
        wait_exact(cluster, source)
        first = streams._producer
        # A failed flush aborts the transaction; librdkafka declares the producer dead during the
        # abort (seen on Apache Kafka: INVALID_TXN_STATE): a new producer, not the end of the client.
        cluster.fail_next("abort_transaction", error=FatalClientError("Broker: invalid transaction state"))
        cluster.fail_next("flush")
        source.produce(300)
        wait_exact(cluster, source)
        assert streams._producer is not first
        assert streams.state is KafkaStreams.State.RUNNING
        assert errors == []
    finally:
        assert streams.close(timeout=30)


class FencedForGood:
    """Makes one producer behave as librdkafka's does once the cluster fenced it: the first call of
    ``operation`` fails as fenced, and so does every call after it, init_transactions included."""

    CALLS = (
        "init_transactions",
        "begin_transaction",
        "send",
        "flush",
        "send_offsets_to_transaction",
        "commit_transaction",
        "abort_transaction",
    )

    def __init__(self, producer: Any, operation: str) -> None:
        self.fenced = threading.Event()
        for name in self.CALLS:
            setattr(producer, name, self._guarded(name, getattr(producer, name), operation))

    def _guarded(self, name: str, original: Any, operation: str) -> Any:
        from kstreams.cluster.port import ProducerFencedError

        def call(*args: Any, **kwargs: Any) -> Any:
            if name == operation:
                self.fenced.set()
            if self.fenced.is_set():
                raise ProducerFencedError(f"{name} failed: Local: This instance has been fenced (_FENCED)")
            return original(*args, **kwargs)

        return call


@pytest.mark.parametrize("operation", ["send", "commit_transaction", "abort_transaction"])
def test_a_fenced_producer_is_replaced_and_the_client_stays_exact(
    cluster: EmbeddedCluster, tmp_path: Path, operation: str
) -> None:
    # The cluster fences a producer whose transaction outlived transaction.timeout.ms. librdkafka's
    # fenced producer refuses every later call, so initialising it again cannot work: the client
    # continues with a new producer (Kafka Streams resets its thread producer), never the handler.
    source = Input(cluster)
    source.produce(300)
    streams = new_client(cluster, tmp_path / "a", "live", store_type="in_memory")
    errors: list[BaseException] = []
    streams.set_uncaught_exception_handler(lambda exc: errors.append(exc))  # type: ignore[arg-type,func-returns-value]
    streams.start()
    try:
        wait_exact(cluster, source)
        first = streams._producer
        fence = FencedForGood(first, operation)
        if operation == "abort_transaction":
            cluster.fail_next("flush")  # a failed flush aborts the transaction, where the fence shows
        source.produce(300)
        assert fence.fenced.wait(WAIT_S), f"{operation} was never called"
        wait_exact(cluster, source)
        assert streams._producer is not first
        assert streams.state is KafkaStreams.State.RUNNING
        assert errors == []
    finally:
        assert streams.close(timeout=30)
