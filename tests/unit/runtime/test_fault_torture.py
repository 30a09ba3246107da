"""The fault torture suite: exactly_once_v2 holds whatever fails, as often as it fails.

A word count with a repartition topic (subtopology 0 splits lines and re-keys by word, subtopology 1
counts), 2 stream threads, the record cache off so every update is emitted, and the uncaught
exception handler answering REPLACE_THREAD (and a variant whose counts go straight to the sink,
which the count kernel writes a batch at a time). While input arrives, faults are injected at random
(seeded): processor exceptions in each subtopology (before the repartition write, and after the
count's store update) and failures of every client operation on the way to a commit
(``EmbeddedCluster.fail_next``), sometimes several at once. At the end every word's committed
updates, read as a read_committed consumer reads them, are exactly 1, 2, ..., n: nothing counted
twice, nothing lost, nothing out of order.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from kstreams._native import kernels
from kstreams.client import KafkaStreams, StreamsUncaughtExceptionResponse
from kstreams.cluster import EmbeddedCluster
from kstreams.serdes import Serdes
from kstreams.topology.dsl import Consumed, Grouped, Materialized, Produced, StreamsBuilder
from kstreams.topology.topology import Topology
from tests.support.waiting import holds_within, wait_until

STRING = Serdes.string()
LONG = Serdes.long()
WORDS = [f"w{i}" for i in range(40)]
# Every client operation between a processed record and its commit, as the embedded cluster names them.
COMMIT_PATH_OPERATIONS = [
    "poll",
    "send",
    "flush",
    "send_offsets_to_transaction",
    "commit_transaction",
    "abort_transaction",
    "begin_transaction",
    "committed",
    "end_offsets",
]


class InjectedProcessorError(RuntimeError):
    """Raised by a processor on purpose."""


def fired(plan: FaultPlan, within: float) -> bool:
    """Whether every planned fault fired, waiting up to ``within`` seconds for it."""
    return holds_within(lambda: not plan.remaining, within)


class FaultPlan:
    """Decides, from one seed, which processor calls raise; counts every fault injected."""

    def __init__(self, seed: int, faults_per_place: dict[str, int]) -> None:
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._remaining = dict(faults_per_place)
        self.injected: Counter[str] = Counter()
        self.armed = False

    @property
    def remaining(self) -> int:
        with self._lock:
            return sum(self._remaining.values())

    def maybe_raise(self, where: str) -> None:
        with self._lock:
            if not self.armed or self._remaining[where] <= 0 or self._rng.random() > 0.004:
                return
            self._remaining[where] -= 1
            self.injected[where] += 1
        raise InjectedProcessorError(f"injected processor failure in {where}")

    def choice(self, items: list[str]) -> str:
        with self._lock:
            return self._rng.choice(items)

    def randint(self, low: int, high: int) -> int:
        with self._lock:
            return self._rng.randint(low, high)


def word_count(
    plan: FaultPlan, lines: str = "lines", counts: str = "counts", count_into_sink: bool = False
) -> Topology:
    """The word count; with ``count_into_sink`` the counts go straight to the sink, so the count
    kernel writes each batch's counts, changelog and output without a cache (and subtopology 1 has
    no function to raise in: its faults are the client's)."""

    def split(line: str) -> list[str]:
        plan.maybe_raise("subtopology-0")
        return line.split()

    def after_count(count: int) -> int:
        plan.maybe_raise("subtopology-1")
        return count

    builder = StreamsBuilder()
    updates = (
        builder.stream(lines, Consumed.with_(STRING, STRING))
        .flat_map_values(split)
        .group_by(lambda _key, word: word, Grouped.with_(STRING, STRING).with_name("words"))
        .count(Materialized.as_("word-counts").with_caching_disabled())
        .to_stream()
    )
    if not count_into_sink:
        updates = updates.map_values(after_count)
    updates.to(counts, Produced.with_(STRING, LONG))
    return builder.build()


@pytest.fixture
def words_cluster(embedded_cluster: EmbeddedCluster) -> EmbeddedCluster:
    embedded_cluster.create_topic("lines", 2)
    embedded_cluster.create_topic("counts", 2)
    return embedded_cluster


def committed_updates(cluster: Any, topic: str = "counts") -> dict[str, list[int]]:
    """Every committed update per word, in the order a read_committed consumer reads them."""
    updates: dict[str, list[int]] = defaultdict(list)
    for record in cluster.read(topic):
        updates[record.key.decode()].append(LONG.deserialize(topic, record.value))
    return updates


def exact_counts(cluster: Any, expected: Counter[str], topic: str = "counts") -> bool:
    """Whether every word's newest committed count is its true count; fails at once on a count
    above it (an update counted twice never goes away)."""
    latest = {word: values[-1] for word, values in committed_updates(cluster, topic).items()}
    over = {word: (count, expected[word]) for word, count in latest.items() if count > expected[word]}
    assert not over, f"counted twice (committed, true): {over}"
    return latest == dict(expected)


@pytest.mark.parametrize(
    ("seed", "count_into_sink"), [(1, False), (2, False), (3, False), (4, True), (5, True)]
)
def test_exactly_once_word_count_survives_thirty_random_faults(
    words_cluster: EmbeddedCluster,
    tmp_path: Path,
    seed: int,
    count_into_sink: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = words_cluster
    places = (
        {"subtopology-0": 12, "subtopology-1": 0}
        if count_into_sink
        else {"subtopology-0": 6, "subtopology-1": 6}
    )
    plan = FaultPlan(seed, places)
    failures: list[BaseException] = []
    kernel_batches = _count_kernel_batches(monkeypatch)

    def replace(exc: BaseException) -> StreamsUncaughtExceptionResponse:
        failures.append(exc)
        return StreamsUncaughtExceptionResponse.REPLACE_THREAD

    streams = KafkaStreams(
        word_count(plan, count_into_sink=count_into_sink),
        {
            "application.id": f"torture-{seed}",
            "processing.guarantee": "exactly_once_v2",
            "num.stream.threads": 2,
            "commit.interval.ms": 50,
            "statestore.cache.max.bytes": 0,
            "state.dir": str(tmp_path),
        },
        cluster=cluster,
    )
    streams.set_uncaught_exception_handler(replace)
    expected: Counter[str] = Counter()
    rng = random.Random(seed * 7919)
    cluster_faults = 0
    streams.start()
    try:
        plan.armed = True
        for round_ in range(40):
            for i in range(25):
                words = [rng.choice(WORDS) for _ in range(rng.randint(1, 4))]
                expected.update(words)
                cluster.produce("lines", f"line-{round_}-{i}".encode(), " ".join(words).encode())
            if round_ % 2 == 0:
                # A burst now and then: several operations fail at once.
                burst = plan.randint(1, 3) if round_ % 6 == 0 else 1
                for _ in range(burst):
                    cluster.fail_next(plan.choice(COMMIT_PATH_OPERATIONS))
                    cluster_faults += 1
            time.sleep(0.03)  # input arrives over time, so faults land between commits too
        wait_until(lambda: plan.remaining == 0, 60, "every processor fault to fire")
        plan.armed = False
        wait_until(lambda: exact_counts(cluster, expected), 90, "exact committed counts")
        assert streams.state in (KafkaStreams.State.RUNNING, KafkaStreams.State.REBALANCING)
    finally:
        cluster._broker.faults.clear()
        assert streams.close(timeout=60)
    assert sum(plan.injected.values()) + cluster_faults >= 30
    for word, values in committed_updates(cluster).items():
        assert values == list(range(1, expected[word] + 1)), f"{word}: {values}"
    assert failures, "no processor failure reached the handler"
    assert bool(kernel_batches) == count_into_sink


def _count_kernel_batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the batches the count kernel wrote without a cache, from now on."""
    batches: list[int] = []
    kernel = kernels.aggregate_uncached

    def counted(batch: Any, *args: Any, **kwargs: Any) -> Any:
        result = kernel(batch, *args, **kwargs)
        if result is not None:
            batches.append(len(batch))
        return result

    monkeypatch.setattr(kernels, "aggregate_uncached", counted)
    return batches


def test_exactly_once_word_count_survives_processor_faults_on_both_adapters(
    cluster: Any, app_id: str
) -> None:
    """Processor exceptions in both subtopologies (faults of client calls need the embedded
    cluster's fail_next, above) on the embedded cluster and on Apache Kafka: every failure aborts
    a transaction, and the counting subtopology's read_committed reads of the repartition topic
    must still see every committed word."""
    from kstreams.cluster import EmbeddedCluster

    lines, counts = f"{app_id}-lines", f"{app_id}-counts"
    cluster.create_topic(lines, 2)
    cluster.create_topic(counts, 2)
    plan = FaultPlan(11, {"subtopology-0": 3, "subtopology-1": 3})
    embedded = isinstance(cluster, EmbeddedCluster)
    config: dict[str, Any] = {
        "application.id": app_id,
        "processing.guarantee": "exactly_once_v2",
        "num.stream.threads": 2,
        "commit.interval.ms": 100,
        "statestore.cache.max.bytes": 0,
        "session.timeout.ms": 1000 if embedded else 6000,
    }
    if not embedded:
        config["main.consumer.max.poll.interval.ms"] = 30000
    streams = KafkaStreams(word_count(plan, lines, counts), config, cluster=cluster)
    streams.set_uncaught_exception_handler(lambda exc: StreamsUncaughtExceptionResponse.REPLACE_THREAD)
    expected: Counter[str] = Counter()
    rng = random.Random(5)
    streams.start()
    try:
        plan.armed = True

        def produce_round(round_: int) -> None:
            for i in range(40):
                words = [rng.choice(WORDS) for _ in range(rng.randint(1, 4))]
                expected.update(words)
                line = (f"line-{round_}-{i}".encode(), " ".join(words).encode())
                cluster.produce(lines, *line, timestamp=int(time.time() * 1000))

        for round_ in range(20):
            produce_round(round_)
        # A fault fires with a small chance per call, so how many calls it takes varies (fewer
        # where fewer aborts make records be processed again): more input comes until every
        # planned fault has fired, within a bound.
        deadline = time.monotonic() + (60 if embedded else 120)
        while not fired(plan, within=1.0):
            assert time.monotonic() < deadline, f"{plan.remaining} planned faults never fired"
            round_ += 1
            produce_round(round_)
        try:
            wait_until(
                lambda: exact_counts(cluster, expected, counts), 60 if embedded else 120, "exact counts"
            )
        except AssertionError:
            latest = {w: v[-1] for w, v in committed_updates(cluster, counts).items()}
            short = {w: (latest.get(w), n) for w, n in expected.items() if latest.get(w) != n}
            raise AssertionError(f"committed counts differ (committed, true): {short}") from None
    finally:
        streams.close(timeout=60)
    for word, values in committed_updates(cluster, counts).items():
        assert values == list(range(1, expected[word] + 1)), f"{word}: {values}"
