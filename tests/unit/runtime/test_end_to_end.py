"""The threaded runtime end to end: polling thread, stream threads, restore thread, commit,
rebalances between clients, and takeover after a crash.

Every test runs on the EmbeddedCluster and on a KafkaCluster against the session's broker (the
``cluster`` fixture). Topics are named after the test's application id, so tests sharing a broker
never meet, and record timestamps are near now (within every topic's retention).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from kstreams._native.record_batch import RecordBatch
from kstreams.client import KafkaStreams
from kstreams.cluster import EmbeddedCluster
from kstreams.processor import Processor, PunctuationType, Record
from kstreams.serdes import Serdes
from kstreams.state import Stores
from kstreams.topology.topology import Topology
from tests.support.clients import adapter_settings, wait_timeout
from tests.support.waiting import wait_until

LONG = Serdes.long()
STRING = Serdes.string()


@dataclass
class App:
    """One test's application on one adapter: its cluster, topic names and client settings."""

    cluster: Any
    app_id: str
    embedded: bool
    config: dict[str, object]
    timeout: float  # for conditions that need a rebalance or a session timeout

    @property
    def source(self) -> str:
        return f"{self.app_id}-in"

    @property
    def sink(self) -> str:
        return f"{self.app_id}-out"

    def topic(self, name: str) -> str:
        return f"{self.app_id}-{name}"


@pytest.fixture
def app(cluster: Any, app_id: str) -> App:
    """Input and output topics (4 partitions each) and client settings suited to the adapter:
    Kafka refuses a session timeout under group.min.session.timeout.ms (6 s), and a crashed
    librdkafka consumer keeps heartbeating from its own thread until max.poll.interval.ms passes."""
    embedded = isinstance(cluster, EmbeddedCluster)
    app = App(cluster, app_id, embedded, adapter_settings(cluster), wait_timeout(cluster))
    cluster.create_topic(app.source, 4)
    cluster.create_topic(app.sink, 4)
    return app


class Upper(Processor):
    def init(self, context):  # type: ignore[no-untyped-def]
        self.context = context

    def process(self, record: Record) -> None:
        self.context.forward(record.with_value(record.value.upper()))


class CountPerKey(Processor):
    """Counts records per key in a logged store and forwards the running count."""

    def init(self, context):  # type: ignore[no-untyped-def]
        self.context = context
        self.store = context.get_state_store("counts")

    def process(self, record: Record) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(record.with_value(count))


def upper_topology(app: App) -> Topology:
    topology = Topology()
    topology.add_source("src", app.source, key_deserializer=STRING, value_deserializer=STRING)
    topology.add_processor("upper", Upper, "src")
    topology.add_sink("sink", app.sink, "upper", key_serializer=STRING, value_serializer=STRING)
    return topology


def count_topology(app: App) -> Topology:
    topology = Topology()
    topology.add_source("src", app.source, key_deserializer=STRING, value_deserializer=STRING)
    topology.add_processor("count", CountPerKey, "src")
    topology.add_state_store(
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("counts"), STRING, LONG), "count"
    )
    topology.add_sink("sink", app.sink, "count", key_serializer=STRING, value_serializer=LONG)
    return topology


def now_ms() -> int:
    return int(time.time() * 1000)


def latest(app: App) -> dict[str, int]:
    return {r.key.decode(): LONG.deserialize(app.sink, r.value) for r in app.cluster.read(app.sink)}


def produce_words(app: App, count: int, keys: int, start: int = 0) -> Counter[str]:
    expected: Counter[str] = Counter()
    base = now_ms()
    for i in range(start, start + count):
        key = f"key-{i % keys}"
        app.cluster.produce(app.source, key.encode(), f"value-{i}".encode(), timestamp=base + i - start)
        expected[key] += 1
    return expected


def new_client(topology: Topology, app: App, tmp_path, name: str = "a", **overrides: object) -> KafkaStreams:  # type: ignore[no-untyped-def]
    config = {
        "application.id": app.app_id,
        "client.id": f"{app.app_id}-{name}",
        "num.stream.threads": 2,
        "state.dir": str(tmp_path / name),
        **app.config,
    }
    config.update(overrides)
    return KafkaStreams(topology, config, cluster=app.cluster)


def test_stateless_pipeline_processes_every_record_once(app: App, tmp_path) -> None:  # type: ignore[no-untyped-def]
    records = 2000 if app.embedded else 500  # the Kafka helper waits for each record's ack
    base = now_ms()
    for i in range(records):
        app.cluster.produce(app.source, f"k{i}".encode(), f"v{i}".encode(), timestamp=base + i)
    streams = new_client(upper_topology(app), app, tmp_path)
    streams.start()
    try:
        wait_until(lambda: len(app.cluster.read(app.sink)) >= records, app.timeout, f"{records} outputs")
    finally:
        assert streams.close(timeout=30)
    values = sorted(r.value.decode() for r in app.cluster.read(app.sink))
    assert values == sorted(f"V{i}" for i in range(records))
    assert streams.state is KafkaStreams.State.NOT_RUNNING


def test_nothing_waits_out_a_long_poll(app: App, tmp_path, clients) -> None:  # type: ignore[no-untyped-def]
    """The polling thread waits up to ``poll.ms`` for records, but work other threads hand it
    wakes it up: a restored task starts processing, a stream thread's output is sent, and close()
    stops it, each at once rather than when the poll ends (with a 5 s poll.ms here)."""
    streams = new_client(count_topology(app), app, tmp_path, **{"poll.ms": 5_000})
    clients.append(streams)
    expected = produce_words(app, 8, keys=4)
    streams.start()
    wait_until(lambda: latest(app) == dict(expected), app.timeout, "the counts of the first records")
    for round_ in range(1, 3):
        expected.update(produce_words(app, 8, keys=4, start=8 * round_))
        sent = time.monotonic()
        wait_until(lambda: latest(app) == dict(expected), app.timeout, "the counts of later records")
        assert time.monotonic() - sent < 2.5, "output waited for a poll to end"
    closing = time.monotonic()
    assert streams.close(timeout=30)
    assert time.monotonic() - closing < 2.5, "close() waited for a poll to end"


def test_stream_threads_are_named_after_the_client(app: App, tmp_path, clients) -> None:  # type: ignore[no-untyped-def]
    streams = new_client(upper_topology(app), app, tmp_path, **{"num.stream.threads": 3})
    clients.append(streams)
    streams.start()
    names = sorted(t.thread_name for t in streams.metadata_for_local_threads())
    assert names == [f"{app.app_id}-a-StreamThread-{i}" for i in (1, 2, 3)]


def test_counts_are_exact_with_two_clients_and_after_one_leaves(app: App, tmp_path, clients) -> None:  # type: ignore[no-untyped-def]
    # at_least_once: a member that leaves cleanly commits in its revocation callback, so the
    # survivor resumes where it stopped and no record is counted twice.
    first = new_client(count_topology(app), app, tmp_path, "a")
    second = new_client(count_topology(app), app, tmp_path, "b")
    clients.extend([first, second])
    first.start()
    second.start()
    records, more = (3000, 2000) if app.embedded else (600, 400)
    expected = produce_words(app, records, keys=50)
    wait_until(lambda: latest(app) == dict(expected), app.timeout, "exact counts with two clients")
    assert first.close(timeout=30)
    # The survivor takes over every task (restoring the counts from the changelog).
    expected += produce_words(app, more, keys=50, start=records)
    wait_until(lambda: latest(app) == dict(expected), app.timeout, "exact counts after takeover")
    assert app.cluster.topics()[app.topic("counts-changelog")].partitions == 4


def test_crashed_client_loses_nothing_at_least_once(app: App, tmp_path, clients) -> None:  # type: ignore[no-untyped-def]
    crashing = new_client(count_topology(app), app, tmp_path, "a", **{"commit.interval.ms": 200})
    crashing.start()
    records, more = (3000, 1000) if app.embedded else (600, 200)
    expected = produce_words(app, records, keys=30)
    wait_until(lambda: sum(latest(app).values()) > 0, app.timeout, "some progress before the crash")
    # On Kafka the abandoned consumer leaves the group once max.poll.interval.ms passes unpolled.
    crashing._abandon()
    expected += produce_words(app, more, keys=30, start=records)
    successor = new_client(count_topology(app), app, tmp_path, "b")
    clients.append(successor)
    successor.start()
    # At least once: every record counted, some possibly twice (processed after the last commit).
    wait_until(
        lambda: all(latest(app).get(k, 0) >= n for k, n in expected.items()),
        60 if app.embedded else 90,
        "every record reflected in the output",
    )
    out = latest(app)
    assert set(out) == set(expected)
    # The state matches the committed offsets: each count is what the successor's store holds.
    wait_until(lambda: successor.state is KafkaStreams.State.RUNNING, app.timeout, "the successor RUNNING")
    store = successor.store("counts")
    assert {k: store.get(k) for k in expected} == out


class WallClockTicker(Processor):
    def init(self, context):  # type: ignore[no-untyped-def]
        self.context = context
        context.schedule(50, PunctuationType.WALL_CLOCK_TIME, self.tick)

    def tick(self, timestamp: int) -> None:
        self.context.forward(Record("tick", str(self.context.task_id), timestamp))

    def process(self, record: Record) -> None:
        pass


def test_wall_clock_punctuation_runs_without_input(app: App, tmp_path, clients) -> None:  # type: ignore[no-untyped-def]
    topology = Topology()
    topology.add_source("src", app.source, key_deserializer=STRING, value_deserializer=STRING)
    topology.add_processor("ticker", WallClockTicker, "src")
    topology.add_sink("sink", app.sink, "ticker", key_serializer=STRING, value_serializer=STRING)
    streams = new_client(topology, app, tmp_path)
    clients.append(streams)
    streams.start()
    wait_until(
        lambda: {r.value.decode() for r in app.cluster.read(app.sink)} >= {"0_0", "0_1", "0_2", "0_3"},
        app.timeout,
        "a tick from every task",
    )


class SlowTicker(WallClockTicker):
    """A WallClockTicker whose records each take a fraction of a millisecond; counts them."""

    def __init__(self, processed: list[int]) -> None:
        self.processed = processed

    def process(self, record: Record) -> None:
        time.sleep(0.0002)  # the work of a slow processor
        self.processed.append(1)


def test_an_idle_tasks_due_punctuation_does_not_wait_for_a_busy_task(app: App, tmp_path, clients) -> None:  # type: ignore[no-untyped-def]
    # One stream thread; task 0_0 has a backlog of slow records (seconds of work), the others none.
    backlog = 10_000
    producer = app.cluster.producer()
    base = now_ms()
    producer.send(
        app.source, 0, RecordBatch.from_records([(b"k", b"v", base + i, 0, i, None) for i in range(backlog)])
    )
    producer.flush()
    producer.close()
    processed: list[int] = []
    topology = Topology()
    topology.add_source("src", app.source, key_deserializer=STRING, value_deserializer=STRING)
    topology.add_processor("ticker", lambda: SlowTicker(processed), "src")
    topology.add_sink("sink", app.sink, "ticker", key_serializer=STRING, value_serializer=STRING)
    streams = new_client(topology, app, tmp_path, **{"num.stream.threads": 1})
    clients.append(streams)
    streams.start()
    wait_until(
        lambda: "0_1" in {r.value.decode() for r in app.cluster.read(app.sink)},
        app.timeout,
        "a tick from the idle task 0_1",
    )
    assert len(processed) < backlog, "the idle task ticked only once the busy task ran out of records"


# -- the DSL on the threaded runtime ----------------------------------------------------------------


def windowed_count_topology(app: App):  # type: ignore[no-untyped-def]
    from kstreams import Consumed, Grouped, Materialized, Produced, StreamsBuilder, TimeWindows

    builder = StreamsBuilder()
    (
        builder.stream(app.source, Consumed.with_(STRING, STRING))
        .group_by(lambda key, value: value.split("-")[0], Grouped.with_(STRING, STRING))  # repartitions
        .windowed_by(TimeWindows.of_size_and_grace(100, 10_000))
        .count(Materialized.as_("per-minute"))
        .to_stream()
        .map(lambda wk, n: (f"{wk.key}@{wk.start}", n))
        .to(app.sink, Produced.with_(STRING, LONG))
    )
    return builder.build()


def test_windowed_count_is_exact_across_two_clients_and_a_takeover(app: App, tmp_path, clients) -> None:  # type: ignore[no-untyped-def]
    first = new_client(windowed_count_topology(app), app, tmp_path, "a")
    second = new_client(windowed_count_topology(app), app, tmp_path, "b")
    clients.extend([first, second])
    first.start()
    second.start()
    expected: Counter[str] = Counter()
    base = now_ms() // 100 * 100

    def produce(start: int, count: int) -> None:
        for i in range(start, start + count):
            prefix = f"p{i % 7}"
            ts = base + i  # 100 ms windows: ten records per window and prefix on average
            app.cluster.produce(app.source, f"k{i}".encode(), f"{prefix}-{i}".encode(), timestamp=ts)
            expected[f"{prefix}@{ts - ts % 100}"] += 1

    records, more = (1500, 1000) if app.embedded else (500, 300)
    produce(0, records)
    wait_until(lambda: latest(app) == dict(expected), app.timeout, "exact windowed counts")
    assert first.close(timeout=30)
    produce(records, more)
    wait_until(lambda: latest(app) == dict(expected), app.timeout, "exact counts after takeover")
    topics = app.cluster.topics()
    assert app.topic("per-minute-changelog") in topics
    assert any(name.startswith(app.app_id) and name.endswith("-repartition") for name in topics)


def test_stream_table_join_is_exact(app: App, tmp_path, clients) -> None:  # type: ignore[no-untyped-def]
    from kstreams import Consumed, Produced, StreamsBuilder

    users_topic = app.topic("users")
    app.cluster.create_topic(users_topic, 4)
    builder = StreamsBuilder()
    users = builder.table(users_topic, Consumed.with_(STRING, STRING))
    (
        builder.stream(app.source, Consumed.with_(STRING, STRING))
        .left_join(users, lambda click, region: f"{click}:{region}")
        .to(app.sink, Produced.with_(STRING, STRING))
    )
    base = now_ms()
    for u in range(20):
        app.cluster.produce(users_topic, f"u{u}".encode(), f"region-{u % 3}".encode(), timestamp=base)
    streams = new_client(builder.build(), app, tmp_path)
    clients.append(streams)
    streams.start()
    assert streams.wait_for_state(KafkaStreams.State.RUNNING, timeout=app.timeout)
    wait_until(lambda: _table_loaded(streams), app.timeout, "the table to load")
    clicks = 400 if app.embedded else 200
    for i in range(clicks):
        app.cluster.produce(app.source, f"u{i % 25}".encode(), f"click{i}".encode(), timestamp=base + 10 + i)
    wait_until(lambda: len(app.cluster.read(app.sink)) >= clicks, app.timeout, f"{clicks} joined records")
    assert streams.close(timeout=30)
    joined = sorted((r.key.decode(), r.value.decode()) for r in app.cluster.read(app.sink))
    expected = sorted(
        (f"u{i % 25}", f"click{i}:" + (f"region-{(i % 25) % 3}" if i % 25 < 20 else "None"))
        for i in range(clicks)
    )
    assert joined == expected


def _table_loaded(streams: KafkaStreams) -> bool:
    processed = sum(v for m, v in streams.metrics().items() if m.name == "process-total")
    return processed >= 20
