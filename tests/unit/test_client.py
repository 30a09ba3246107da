"""KafkaStreams: the state machine, stream threads at runtime (KIP-663), the uncaught exception
handler (KIP-671) and client metrics, through the public API.

Tests that run the client end to end do so on the EmbeddedCluster and on a KafkaCluster against the
session's broker (the ``cluster`` fixture, through ``make_client``); tests of the state machine alone
use the embedded cluster only (``make_local_client``). Topics are named after the test's application
id and timestamps are near now (noida-db deletes old records within seconds)."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kstreams import StreamsUncaughtExceptionResponse as Response
from kstreams.client import KafkaStreams, State
from kstreams.cluster import EmbeddedCluster
from kstreams.errors import IllegalStateException
from kstreams.processor import Processor, Record
from kstreams.serdes import Serdes
from kstreams.state import Stores
from kstreams.topology.topology import Topology

LONG = Serdes.long()
STRING = Serdes.string()
CACHE = 12_000_000


def wait_until(condition: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


class CountPerKey(Processor):
    def init(self, context):  # type: ignore[no-untyped-def]
        self.context = context
        self.store = context.get_state_store("counts")

    def process(self, record: Record) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(record.with_value(count))


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


def new_app(cluster: Any, app_id: str) -> App:
    """Input and output topics (4 partitions each) and client settings suited to the adapter:
    noida-db refuses a session timeout under 6 s."""
    embedded = isinstance(cluster, EmbeddedCluster)
    if embedded:
        config: dict[str, object] = {"commit.interval.ms": 50, "session.timeout.ms": 1000}
    else:
        config = {
            "commit.interval.ms": 100,
            "session.timeout.ms": 6000,
            "main.consumer.max.poll.interval.ms": 10000,
        }
    app = App(cluster, app_id, embedded, config, 30.0 if embedded else 60.0)
    cluster.create_topic(app.source, 4)
    cluster.create_topic(app.sink, 4)
    return app


def count_topology(app: App, processor: type[Processor] = CountPerKey) -> Topology:
    topology = Topology()
    topology.add_source("src", app.source, key_deserializer=STRING, value_deserializer=STRING)
    topology.add_processor("count", processor, "src")
    topology.add_state_store(
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("counts"), STRING, LONG), "count"
    )
    topology.add_sink("sink", app.sink, "count", key_serializer=STRING, value_serializer=LONG)
    return topology


@pytest.fixture
def app(cluster: Any, app_id: str) -> App:
    return new_app(cluster, app_id)


@pytest.fixture
def local_app(embedded_cluster: EmbeddedCluster, app_id: str) -> App:
    return new_app(embedded_cluster, app_id)


def client_factory(app: App, tmp_path) -> tuple[Callable[..., KafkaStreams], list[KafkaStreams]]:  # type: ignore[no-untyped-def]
    clients: list[KafkaStreams] = []

    def make(topology: Topology | None = None, name: str = "a", **overrides: object) -> KafkaStreams:
        config = {
            "application.id": app.app_id,
            "client.id": f"c-{name}",
            "num.stream.threads": 2,
            "statestore.cache.max.bytes": CACHE,
            "state.dir": str(tmp_path / name),
            **app.config,
        }
        config.update(overrides)
        client = KafkaStreams(topology or count_topology(app), config, cluster=app.cluster)
        clients.append(client)
        return client

    return make, clients


@pytest.fixture
def make_client(app: App, tmp_path) -> Iterator[Callable[..., KafkaStreams]]:  # type: ignore[no-untyped-def]
    """Makes clients of the test's application on both adapters; each is closed at the end."""
    make, clients = client_factory(app, tmp_path)
    yield make
    for client in clients:
        client.close(timeout=30)


@pytest.fixture
def make_local_client(local_app: App, tmp_path) -> Iterator[Callable[..., KafkaStreams]]:  # type: ignore[no-untyped-def]
    """Makes clients on the embedded cluster only, for tests of the state machine alone."""
    make, clients = client_factory(local_app, tmp_path)
    yield make
    for client in clients:
        client.close(timeout=30)


def produce(app: App, count: int, keys: int = 20, start: int = 0) -> Counter[str]:
    expected: Counter[str] = Counter()
    base = int(time.time() * 1000)
    for i in range(start, start + count):
        key = f"key-{i % keys}"
        app.cluster.produce(app.source, key.encode(), b"x", timestamp=base + i - start)
        expected[key] += 1
    return expected


def latest(app: App) -> dict[str, int]:
    return {r.key.decode(): LONG.deserialize(app.sink, r.value) for r in app.cluster.read(app.sink)}


def metric(client: KafkaStreams, name: str) -> float:
    return next(v for m, v in client.metrics().items() if m.name == name and m.group == "stream-metrics")


# -- the state machine ---------------------------------------------------------------------------


def test_lifecycle_states_reach_the_listener_in_order(make_client) -> None:  # type: ignore[no-untyped-def]
    client = make_client()
    seen: list[tuple[State, State]] = []
    client.set_state_listener(lambda new, old: seen.append((new, old)))
    assert client.state is State.CREATED
    client.start()
    assert client.wait_for_state(State.RUNNING, timeout=30)
    assert client.close(timeout=30)
    assert seen[0] == (State.REBALANCING, State.CREATED)
    assert (State.RUNNING, State.REBALANCING) in seen
    assert seen[-2:] == [(State.PENDING_SHUTDOWN, State.RUNNING), (State.NOT_RUNNING, State.PENDING_SHUTDOWN)]


def test_start_twice_is_an_error(make_local_client) -> None:  # type: ignore[no-untyped-def]
    client = make_local_client()
    client.start()
    with pytest.raises(IllegalStateException, match="already started or already stopped"):
        client.start()


def test_close_before_start_ends_not_running_and_close_again_is_true(make_local_client) -> None:  # type: ignore[no-untyped-def]
    client = make_local_client()
    assert client.close(timeout=5)
    assert client.state is State.NOT_RUNNING
    assert client.close(timeout=5)
    with pytest.raises(IllegalStateException):
        client.start()


ALL = list(State)
VALID = {
    State.CREATED: {State.REBALANCING, State.PENDING_SHUTDOWN},
    State.REBALANCING: {State.RUNNING, State.PENDING_SHUTDOWN, State.PENDING_ERROR},
    State.RUNNING: {State.REBALANCING, State.RUNNING, State.PENDING_SHUTDOWN, State.PENDING_ERROR},
    State.PENDING_SHUTDOWN: {State.NOT_RUNNING},
    State.NOT_RUNNING: set(),
    State.PENDING_ERROR: {State.ERROR},
    State.ERROR: set(),
}
SILENT = {
    State.PENDING_SHUTDOWN: set(ALL) - {State.NOT_RUNNING},
    State.NOT_RUNNING: {State.PENDING_SHUTDOWN, State.NOT_RUNNING},
    State.REBALANCING: {State.REBALANCING},
    State.ERROR: {State.PENDING_ERROR, State.ERROR, State.PENDING_SHUTDOWN},
    State.PENDING_ERROR: set(ALL) - {State.ERROR},
}


@pytest.mark.parametrize("old", ALL, ids=lambda s: s.name)
@pytest.mark.parametrize("new", ALL, ids=lambda s: s.name)
def test_every_state_transition_is_allowed_refused_or_an_error(
    make_local_client, old: State, new: State
) -> None:  # type: ignore[no-untyped-def]
    client = make_local_client()
    client._state = old
    if new in VALID[old]:
        assert client._set_state(new) is True
        assert client.state is new
    elif new in SILENT.get(old, set()):
        assert client._set_state(new) is False
        assert client.state is old
    else:
        with pytest.raises(IllegalStateException, match=f"from {old.name} to {new.name}"):
            client._set_state(new)
        assert client.state is old
    client._state = State.NOT_RUNNING  # let the fixture's close() return at once


def test_handlers_and_listeners_are_set_only_in_created(make_local_client) -> None:  # type: ignore[no-untyped-def]
    client = make_local_client()
    with pytest.raises(ValueError):
        client.set_uncaught_exception_handler(None)  # type: ignore[arg-type]
    client.start()
    with pytest.raises(IllegalStateException):
        client.set_uncaught_exception_handler(lambda exc: Response.REPLACE_THREAD)
    with pytest.raises(IllegalStateException):
        client.set_state_listener(lambda new, old: None)


# -- KIP-663 -------------------------------------------------------------------------------------


def test_threads_cannot_be_added_or_removed_unless_running(make_local_client) -> None:  # type: ignore[no-untyped-def]
    client = make_local_client()
    assert client.add_stream_thread() is None
    assert client.remove_stream_thread() is None
    client.start()
    client.close(timeout=30)
    assert client.add_stream_thread() is None
    assert client.remove_stream_thread() is None


def test_added_threads_take_free_indexes_and_share_the_cache(make_client) -> None:  # type: ignore[no-untyped-def]
    client = make_client()
    client.start()
    assert client.wait_for_state(State.RUNNING, timeout=30)
    assert client.add_stream_thread() == "c-a-StreamThread-3"
    assert {t.cache_max_bytes for t in client.metadata_for_local_threads()} == {CACHE // 3}
    removed = client.remove_stream_thread(timeout=30)
    assert removed in {f"c-a-StreamThread-{i}" for i in (1, 2, 3)}
    names = {t.thread_name for t in client.metadata_for_local_threads()}
    assert removed not in names and len(names) == 2
    assert {t.cache_max_bytes for t in client.metadata_for_local_threads()} == {CACHE // 2}
    assert client.add_stream_thread() == removed  # a dead thread's index is reused
    assert metric(client, "alive-stream-threads") == 3


def test_removing_every_thread_keeps_running_and_adding_one_resumes(make_client, app) -> None:  # type: ignore[no-untyped-def]
    client = make_client(**{"buffered.records.per.partition": 50})
    client.start()
    assert client.wait_for_state(State.RUNNING, timeout=30)
    assert client.remove_stream_thread(timeout=30) is not None
    assert client.remove_stream_thread(timeout=30) is not None
    assert client.remove_stream_thread(timeout=30) is None
    assert client.state is State.RUNNING and client.metadata_for_local_threads() == []
    expected = produce(app, 2000)
    time.sleep(0.3)  # give the polling thread time to fill buffers; nothing may be processed
    assert latest(app) == {}
    assert client.add_stream_thread() == "c-a-StreamThread-1"
    assert client.metadata_for_local_threads()[0].cache_max_bytes == CACHE
    wait_until(lambda: latest(app) == dict(expected), what="every buffered and paused record processed")


def test_adding_and_removing_threads_while_processing_keeps_results_exact(make_client, app) -> None:  # type: ignore[no-untyped-def]
    client = make_client()
    client.start()
    expected: Counter[str] = Counter()
    for round_ in range(4):
        expected += produce(app, 500, start=round_ * 500)
        assert client.add_stream_thread() is not None
        expected += produce(app, 500, start=round_ * 500 + 250_000)
        assert client.remove_stream_thread(timeout=30) is not None
    wait_until(lambda: latest(app) == dict(expected), what="exact counts")
    assert client.state is State.RUNNING


class Blocking(Processor):
    release = threading.Event()
    entered = threading.Event()

    def process(self, record: Record) -> None:
        Blocking.entered.set()
        Blocking.release.wait(30)


def test_remove_times_out_after_shutdown_and_resize(make_client, app) -> None:  # type: ignore[no-untyped-def]
    Blocking.release.clear()
    Blocking.entered.clear()
    topology = Topology()
    topology.add_source("src", app.source, key_deserializer=STRING, value_deserializer=STRING)
    topology.add_processor("block", Blocking, "src")
    client = make_client(topology, **{"num.stream.threads": 1})
    client.start()
    app.cluster.produce(app.source, b"k", b"v", timestamp=int(time.time() * 1000))
    assert Blocking.entered.wait(30)
    with pytest.raises(TimeoutError, match="did not stop in the allotted time"):
        client.remove_stream_thread(timeout=-1)
    # The thread is shutting down (still listed, PENDING_SHUTDOWN) and the caches were resized.
    [meta] = client.metadata_for_local_threads()
    assert meta.thread_state == "PENDING_SHUTDOWN"
    Blocking.release.set()
    wait_until(lambda: client.metadata_for_local_threads() == [], what="the thread to die")


# -- KIP-671 -------------------------------------------------------------------------------------


class FailOncePerThread(CountPerKey):
    """Fails the first record each stream thread processes, once per thread name."""

    failed: set[str] = set()
    lock = threading.Lock()

    def process(self, record: Record) -> None:
        name = threading.current_thread().name
        with FailOncePerThread.lock:
            first = name not in FailOncePerThread.failed
            FailOncePerThread.failed.add(name)
        if first:
            raise RuntimeError(f"injected failure in {name}")
        super().process(record)


def test_replace_thread_loses_no_record(make_client, app) -> None:  # type: ignore[no-untyped-def]
    FailOncePerThread.failed = set()
    client = make_client(count_topology(app, FailOncePerThread), **{"num.stream.threads": 3})
    errors: list[BaseException] = []
    client.set_uncaught_exception_handler(lambda exc: errors.append(exc) or Response.REPLACE_THREAD)
    client.start()
    expected = produce(app, 3000)
    wait_until(
        lambda: all(latest(app).get(k, 0) >= n for k, n in expected.items()),
        what="every record counted at least once",
    )
    assert len(errors) >= 3 and all("injected failure" in str(e.__cause__ or e) for e in errors)
    assert metric(client, "failed-stream-threads") == len(errors)
    assert client.state is State.RUNNING
    wait_until(lambda: len(client.metadata_for_local_threads()) == 3, what="three live threads again")


def test_shutdown_client_ends_in_error(make_client, app) -> None:  # type: ignore[no-untyped-def]
    FailOncePerThread.failed = set()
    client = make_client(count_topology(app, FailOncePerThread))
    client.set_uncaught_exception_handler(lambda exc: Response.SHUTDOWN_CLIENT)
    client.start()
    produce(app, 10)
    assert client.wait_for_state(State.ERROR, timeout=30)
    assert client.metadata_for_local_threads() == []
    assert client.close(timeout=5)
    assert client.state is State.ERROR


def test_default_handler_shuts_the_client_down(make_client, app) -> None:  # type: ignore[no-untyped-def]
    FailOncePerThread.failed = set()
    client = make_client(count_topology(app, FailOncePerThread))
    client.start()
    produce(app, 10)
    assert client.wait_for_state(State.ERROR, timeout=30)


def test_shutdown_application_stops_every_client(make_client, app, caplog) -> None:  # type: ignore[no-untyped-def]
    FailOncePerThread.failed = set()
    failing = make_client(count_topology(app, FailOncePerThread), name="a")
    healthy = make_client(name="b")
    failing.set_uncaught_exception_handler(lambda exc: Response.SHUTDOWN_APPLICATION)
    healthy.start()
    assert healthy.wait_for_state(State.RUNNING, timeout=30)
    caplog.set_level(logging.ERROR, logger="kstreams.client")
    failing.start()
    produce(app, 200)
    assert failing.wait_for_state(State.ERROR, timeout=30)
    assert healthy.wait_for_state(State.ERROR, timeout=30)
    detected = [r for r in caplog.records if "Detected that shutdown was requested" in r.getMessage()]
    assert len(detected) == 2  # once per client


def test_shutdown_application_from_user_code(make_client) -> None:  # type: ignore[no-untyped-def]
    first = make_client(name="a")
    second = make_client(name="b")
    assert first.shutdown_application() is False  # not running yet
    first.start()
    second.start()
    assert first.wait_for_state(State.RUNNING, timeout=30)
    assert first.shutdown_application() is True
    assert first.wait_for_state(State.ERROR, timeout=30)
    assert second.wait_for_state(State.ERROR, timeout=30)


def test_metrics_render_for_prometheus(make_client, app) -> None:  # type: ignore[no-untyped-def]
    client = make_client()
    client.start()
    expected = produce(app, 300)
    wait_until(lambda: latest(app) == dict(expected), what="exact counts")
    names = {(m.group, m.name) for m in client.metrics()}
    for wanted in [
        ("stream-metrics", "alive-stream-threads"),
        ("stream-metrics", "failed-stream-threads"),
        ("stream-thread-metrics", "process-total"),
        ("stream-thread-metrics", "process-rate"),
        ("stream-thread-metrics", "poll-rate"),
        ("stream-thread-metrics", "commit-rate"),
        ("stream-thread-metrics", "commit-latency-avg"),
    ]:
        assert wanted in names
    processed = sum(
        v
        for m, v in client.metrics().items()
        if m.name == "process-total" and m.group == "stream-thread-metrics"
    )
    assert processed >= 300
    per_task = {
        m.tags["task-id"]: v
        for m, v in client.metrics().items()
        if m.group == "stream-task-metrics" and m.name == "process-total"
    }
    assert set(per_task) <= {"0_0", "0_1", "0_2", "0_3"} and sum(per_task.values()) == processed
    cache = [m for m in client.metrics() if m.group == "stream-record-cache-metrics"]
    assert {m.name for m in cache} >= {"hit-ratio", "cache-size-bytes-total"}
    text = client.metrics_prometheus()
    assert 'kstreams_stream_metrics_alive_stream_threads{client_id="c-a"} 2.0' in text
