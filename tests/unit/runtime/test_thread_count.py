"""The number of live stream threads is exact whatever interleaves (KIP-663 with KIP-671): every
thread is configured, added, removed or replaces a failed one, and a thread that was removed is
never replaced as well when it fails on its way out."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kstreams import StreamsUncaughtExceptionResponse as Response
from kstreams.client import KafkaStreams, State
from kstreams.cluster import EmbeddedCluster
from kstreams.processor import Processor, Record
from kstreams.serdes import Serdes
from kstreams.topology.topology import Topology
from tests.support.waiting import wait_until

STRING = Serdes.string()


class FailEvery(Processor):
    """Raises at every ``every``-th record while armed; before raising, calls ``before_failing``
    (a test hook run on the failing stream thread)."""

    every = 50
    armed = threading.Event()
    seen = 0
    lock = threading.Lock()
    before_failing: Callable[[], None] | None = None

    def init(self, context: Any) -> None:
        self.context = context

    def process(self, record: Record) -> None:
        with FailEvery.lock:
            FailEvery.seen += 1
            fail = FailEvery.armed.is_set() and FailEvery.seen % FailEvery.every == 0
        if fail:
            hook = FailEvery.before_failing
            if hook is not None:
                hook()
            raise RuntimeError(f"injected failure at record {FailEvery.seen}")
        self.context.forward(record)


def live(client: KafkaStreams) -> int:
    return len(client.metadata_for_local_threads())


@pytest.fixture
def client(embedded_cluster: EmbeddedCluster, tmp_path: Any) -> Iterator[KafkaStreams]:
    embedded_cluster.create_topic("in", 4)
    embedded_cluster.create_topic("out", 4)
    topology = Topology()
    topology.add_source("src", "in", key_deserializer=STRING, value_deserializer=STRING)
    topology.add_processor("fail", FailEvery, "src")
    topology.add_sink("sink", "out", "fail", key_serializer=STRING, value_serializer=STRING)
    FailEvery.armed.clear()
    FailEvery.seen = 0
    FailEvery.before_failing = None
    streams = KafkaStreams(
        topology,
        {
            "application.id": "thread-count",
            "client.id": "tc",
            "num.stream.threads": 2,
            "processing.guarantee": "exactly_once_v2",
            "commit.interval.ms": 50,
            "processing.batch.size": 10,
            "state.dir": str(tmp_path),
        },
        cluster=embedded_cluster,
    )
    streams.set_uncaught_exception_handler(lambda exc: Response.REPLACE_THREAD)
    yield streams
    FailEvery.armed.clear()
    FailEvery.before_failing = None
    streams.close(timeout=30)


def produce(cluster: EmbeddedCluster, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        cluster.produce("in", f"k{i % 16}".encode(), f"v{i}".encode())


def test_a_thread_removed_as_it_fails_is_not_replaced(
    client: KafkaStreams, embedded_cluster: EmbeddedCluster
) -> None:
    removed: list[str | None] = []

    # The failing thread is the one remove_stream_thread picks (it removes the calling thread):
    # the removal and the failure meet on one thread, the race made certain.
    def remove_and_disarm() -> None:
        FailEvery.armed.clear()  # this failure only
        removed.append(client.remove_stream_thread())

    FailEvery.before_failing = remove_and_disarm
    client.start()
    assert client.wait_for_state(State.RUNNING, timeout=30)
    FailEvery.armed.set()
    produce(embedded_cluster, 50)
    wait_until(lambda: len(removed) == 1, 20, "the failure")
    assert removed[0] is not None
    # 2 configured - 1 removed: the removed thread's failure must not bring it back.
    wait_until(lambda: live(client) == 1 and client._failed_threads == 1, 10, "one live thread")
    produce(embedded_cluster, 20, start=50)
    wait_until(lambda: len(embedded_cluster.read("out")) >= 20, 20, "processing to go on")
    assert live(client) == 1


@pytest.mark.parametrize("seed", [7, 46])
def test_live_threads_are_configured_plus_added_minus_removed_under_failures(
    client: KafkaStreams, embedded_cluster: EmbeddedCluster, seed: int
) -> None:
    """exactly_once_v2, a processor failure every 50 records answered with REPLACE_THREAD, and
    two threads alternating add_stream_thread/remove_stream_thread at seeded random moments."""
    client.start()
    assert client.wait_for_state(State.RUNNING, timeout=30)
    FailEvery.armed.set()
    counts = {"added": 0, "removed": 0}
    counts_lock = threading.Lock()
    stop = threading.Event()

    def alternate(rng: random.Random) -> None:
        while not stop.is_set():
            added = client.add_stream_thread()
            removed = client.remove_stream_thread(timeout=30)
            with counts_lock:
                counts["added"] += added is not None
                counts["removed"] += removed is not None
            stop.wait(rng.random() * 0.005)

    workers = [threading.Thread(target=alternate, args=(random.Random(seed + i),)) for i in range(2)]
    for worker in workers:
        worker.start()
    produced = 0
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and client._failed_threads < 30:
        produce(embedded_cluster, 100, start=produced)
        produced += 100
        wait_until(
            lambda half=produced // 2: FailEvery.seen >= half or client.state is not State.RUNNING,
            10,
            "processing",
        )
    stop.set()
    for worker in workers:
        worker.join(30)
    FailEvery.armed.clear()
    assert client._failed_threads > 0, "no failure met the thread changes"
    expected = 2 + counts["added"] - counts["removed"]
    wait_until(
        lambda: live(client) == expected,
        10,
        f"{expected} live threads (2 + {counts['added']} added - {counts['removed']} removed), "
        f"not {live(client)}",
    )
    assert client.state is State.RUNNING
