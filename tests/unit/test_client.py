"""KafkaStreams: the state machine, stream threads at runtime (KIP-663), the uncaught exception
handler (KIP-671) and client metrics, through the public API.

Tests that run the client end to end do so on the EmbeddedCluster and on a KafkaCluster against the
session's broker (the ``cluster`` fixture, through ``make_client``); tests of the state machine alone
use the embedded cluster only (``make_local_client``). Topics are named after the test's application
id and timestamps are near now (within every topic's retention)."""

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
from kstreams.cluster.port import ClusterError
from kstreams.errors import IllegalStateException
from kstreams.processor import Processor, Record
from kstreams.runtime.streams_runtime import BACKLOG_PARTITION_FETCH_BYTES, PRODUCER_LINGER_MS
from kstreams.serdes import Serdes
from kstreams.state import Stores
from kstreams.topology.topology import Topology
from tests.support.clients import adapter_settings, wait_timeout
from tests.support.waiting import wait_until

LONG = Serdes.long()
STRING = Serdes.string()
CACHE = 12_000_000


# How long a test waits for what other threads do, unless it gives a timeout of its own.
WAIT_S = 60.0


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
    Kafka refuses a session timeout under group.min.session.timeout.ms (6 s)."""
    embedded = isinstance(cluster, EmbeddedCluster)
    app = App(cluster, app_id, embedded, adapter_settings(cluster), wait_timeout(cluster))
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


@pytest.mark.slow_on_kafka
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
    wait_until(lambda: latest(app) == dict(expected), WAIT_S, "every buffered and paused record processed")


@pytest.mark.slow_on_kafka
def test_adding_and_removing_threads_while_processing_keeps_results_exact(make_client, app) -> None:  # type: ignore[no-untyped-def]
    client = make_client()
    client.start()
    expected: Counter[str] = Counter()
    for round_ in range(4):
        expected += produce(app, 500, start=round_ * 500)
        assert client.add_stream_thread() is not None
        expected += produce(app, 500, start=round_ * 500 + 250_000)
        assert client.remove_stream_thread(timeout=30) is not None
    wait_until(lambda: latest(app) == dict(expected), WAIT_S, "exact counts")
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
    wait_until(lambda: client.metadata_for_local_threads() == [], WAIT_S, "the thread to die")


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


@pytest.mark.slow_on_kafka
def test_replace_thread_loses_no_record(make_client, app) -> None:  # type: ignore[no-untyped-def]
    FailOncePerThread.failed = set()
    client = make_client(count_topology(app, FailOncePerThread), **{"num.stream.threads": 3})
    errors: list[BaseException] = []
    client.set_uncaught_exception_handler(lambda exc: errors.append(exc) or Response.REPLACE_THREAD)
    client.start()
    expected = produce(app, 3000)
    wait_until(
        lambda: all(latest(app).get(k, 0) >= n for k, n in expected.items()),
        WAIT_S,
        "every record counted at least once",
    )
    assert len(errors) >= 3 and all("injected failure" in str(e.__cause__ or e) for e in errors)
    assert metric(client, "failed-stream-threads") == len(errors)
    assert client.state is State.RUNNING
    wait_until(lambda: len(client.metadata_for_local_threads()) == 3, WAIT_S, "three live threads again")


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
    # Rebalances are cooperative: the healthy client processes on while the failing one joins,
    # so records are produced once the failing one has tasks of its own.
    wait_until(
        lambda: any(m.active_tasks for m in failing.metadata_for_local_threads()),
        WAIT_S,
        "tasks on the joiner",
    )
    produce(app, 200)
    assert failing.wait_for_state(State.ERROR, timeout=30)
    assert healthy.wait_for_state(State.ERROR, timeout=30)
    detected = [r for r in caplog.records if "Detected that shutdown was requested" in r.getMessage()]
    assert len(detected) == 2  # once per client


def test_shutdown_application_after_a_polling_thread_failure_stops_every_client(
    make_local_client, local_app
) -> None:  # type: ignore[no-untyped-def]
    first, second = make_local_client(name="a"), make_local_client(name="b")
    for client in (first, second):
        client.set_uncaught_exception_handler(lambda exc: Response.SHUTDOWN_APPLICATION)
        client.start()
    wait_until(
        lambda: all(any(m.active_tasks for m in c.metadata_for_local_threads()) for c in (first, second)),
        WAIT_S,
        "tasks on both clients",
    )
    # A send refused for good ends the polling thread of whichever client sends first: it can
    # still tell the group, but it never polls again, so it must not wait for the group's answer.
    local_app.cluster.fail_next("send", error=ClusterError("Broker: Message size too large", False))
    produce(local_app, 200)
    assert first.wait_for_state(State.ERROR, timeout=30)
    assert second.wait_for_state(State.ERROR, timeout=30)


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
    wait_until(lambda: latest(app) == dict(expected), WAIT_S, "exact counts")
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


def store_metrics(client: KafkaStreams) -> dict[tuple[str, str], float]:
    """(name, task id) -> value of the stream-state-metrics of the counting topology's store."""
    found = {}
    for m, v in client.metrics().items():
        if m.group == "stream-state-metrics":
            assert m.tags["in-memory-state-id"] == "counts" and m.tags["thread-id"] == client.client_id
            found[(m.name, m.tags["task-id"])] = v
    return found


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
def test_store_metrics_exist_only_at_debug_and_show_the_stores_puts_and_gets(  # type: ignore[no-untyped-def]
    make_client, app, level: str
) -> None:
    client = make_client(**{"metrics.recording.level": level})
    client.start()
    expected = produce(app, 300)
    wait_until(lambda: latest(app) == dict(expected), WAIT_S, "exact counts")
    metrics = store_metrics(client)
    if level == "INFO":
        assert metrics == {}
        return
    tasks = {task for _, task in metrics}
    assert tasks and tasks <= {"0_0", "0_1", "0_2", "0_3"}
    for op in ("put", "get"):
        for suffix in ("rate", "latency-avg", "latency-max"):
            assert any(metrics[(f"{op}-{suffix}", task)] > 0 for task in tasks), (op, suffix)
    assert client.close(timeout=30)
    assert store_metrics(client) == {}  # closed tasks take their stores' metrics with them


# -- faults and shutdown (the fault-tolerance guarantees) ---------------------------------------


def client_threads(client: KafkaStreams) -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(client.client_id) and t.is_alive()]


def test_close_with_a_zero_timeout_returns_at_once_and_the_shutdown_still_completes(make_client) -> None:  # type: ignore[no-untyped-def]
    client = make_client()
    client.start()
    assert client.wait_for_state(State.RUNNING, timeout=30)
    started = time.monotonic()
    client.close(timeout=0)
    assert time.monotonic() - started < 1.0
    assert client.wait_for_state(State.NOT_RUNNING, timeout=30)
    wait_until(lambda: client_threads(client) == [], WAIT_S, "every thread of the client to end")


def test_close_from_the_listener_on_rebalancing_starts_no_thread(make_local_client) -> None:  # type: ignore[no-untyped-def]
    client = make_local_client()
    results: list[bool] = []

    def listener(new: State, old: State) -> None:
        if new is State.REBALANCING:
            results.append(client.close())

    client.set_state_listener(listener)
    client.start()
    assert results == [True]
    assert client.state is State.NOT_RUNNING
    assert client_threads(client) == []
    assert client.metadata_for_local_threads() == []


class FailOnceAtAnyRecord(CountPerKey):
    """Fails once, on the first record it sees after ``armed`` is set; ``failing`` is set just
    before it raises."""

    armed = threading.Event()
    failing = threading.Event()

    def process(self, record: Record) -> None:
        if FailOnceAtAnyRecord.armed.is_set() and not FailOnceAtAnyRecord.failing.is_set():
            FailOnceAtAnyRecord.failing.set()
            raise RuntimeError("injected failure")
        super().process(record)


@pytest.mark.parametrize(
    ("state", "returns"),
    [(State.RUNNING, False), (State.PENDING_SHUTDOWN, False), (State.NOT_RUNNING, True)],
    ids=lambda v: v.name if isinstance(v, State) else str(v),
)
def test_close_from_the_listener_never_hangs(make_client, app, state: State, returns: bool) -> None:  # type: ignore[no-untyped-def]
    client = make_client()
    results: list[tuple[bool, float]] = []

    def listener(new: State, old: State) -> None:
        if new is state:
            started = time.monotonic()
            # The listener runs on the polling thread (RUNNING), inside the caller's close()
            # (PENDING_SHUTDOWN) or on the close thread (NOT_RUNNING): none may wait for itself.
            results.append((client.close(timeout=30), time.monotonic() - started))

    client.set_state_listener(listener)
    client.start()
    produce(app, 10)
    assert client.wait_for_state(State.RUNNING, State.NOT_RUNNING, timeout=30)
    if state is not State.RUNNING:
        assert client.close(timeout=30)
    assert client.wait_for_state(State.NOT_RUNNING, timeout=30)
    assert len(results) == 1 and results[0][0] is returns and results[0][1] < 5
    wait_until(lambda: client_threads(client) == [], WAIT_S, "every thread of the client to end")


def test_close_from_the_handler_never_hangs(make_local_client, local_app) -> None:  # type: ignore[no-untyped-def]
    app = local_app
    FailOnceAtAnyRecord.failing.clear()
    FailOnceAtAnyRecord.armed.set()
    client = make_local_client(count_topology(app, FailOnceAtAnyRecord))
    closes: list[bool] = []

    def handler(exc: BaseException) -> Response:
        closes.append(client.close(timeout=30))  # on the polling thread
        return Response.REPLACE_THREAD

    client.set_uncaught_exception_handler(handler)
    client.start()
    produce(app, 10)
    assert client.wait_for_state(State.NOT_RUNNING, timeout=30)
    assert closes == [False]
    wait_until(lambda: client_threads(client) == [], WAIT_S, "every thread of the client to end")


class ClosingProcessor(CountPerKey):
    """Closes its own client from inside process(), once."""

    client: KafkaStreams | None = None
    closes: list[bool] = []
    claimed = threading.Event()
    lock = threading.Lock()

    def process(self, record: Record) -> None:
        with ClosingProcessor.lock:  # two stream threads may get here at once
            first = not ClosingProcessor.claimed.is_set()
            ClosingProcessor.claimed.set()
        if first and ClosingProcessor.client is not None:
            ClosingProcessor.closes.append(ClosingProcessor.client.close(timeout=30))
        super().process(record)


def test_close_from_a_processor_never_hangs(make_local_client, local_app) -> None:  # type: ignore[no-untyped-def]
    app = local_app
    client = make_local_client(count_topology(app, ClosingProcessor))
    ClosingProcessor.client, ClosingProcessor.closes = client, []
    ClosingProcessor.claimed.clear()
    client.start()
    produce(app, 10)
    assert client.wait_for_state(State.NOT_RUNNING, timeout=30)
    assert ClosingProcessor.closes == [False]
    wait_until(lambda: client_threads(client) == [], WAIT_S, "every thread of the client to end")


def test_a_thread_change_while_a_failed_thread_is_replaced_does_not_stall(
    make_local_client, local_app
) -> None:  # type: ignore[no-untyped-def]
    app = local_app
    FailOnceAtAnyRecord.armed.clear()
    FailOnceAtAnyRecord.failing.clear()
    client = make_local_client(count_topology(app, FailOnceAtAnyRecord))
    added: list[str | None] = []

    def handler(exc: BaseException) -> Response:
        # The polling thread applies REPLACE_THREAD while another thread adds stream threads; the
        # second add shrinks the caches, which waits for the polling thread: neither may wait for
        # the other (the replacement needs the thread list the add changes).
        def add_two() -> None:
            added.append(client.add_stream_thread())
            added.append(client.add_stream_thread())

        adder = threading.Thread(target=add_two)
        adder.start()
        wait_until(lambda: client._polling is not None and not client._polling._calls.empty(), 10, "the add")
        return Response.REPLACE_THREAD

    client.set_uncaught_exception_handler(handler)
    client.start()
    assert client.wait_for_state(State.RUNNING, timeout=30)
    expected = produce(app, 100)
    wait_until(lambda: latest(app) == dict(expected), WAIT_S, "the first counts")
    FailOnceAtAnyRecord.armed.set()
    started = time.monotonic()
    more = produce(app, 100, start=100)
    wait_until(lambda: len(added) == 2, 20, "add_stream_thread to return")
    assert time.monotonic() - started < 10
    assert None not in added
    # One thread failed: the survivor, two added and the replacement.
    wait_until(
        lambda: len(client.metadata_for_local_threads()) == 4, WAIT_S, "the replacement and the added threads"
    )
    expected.update(more)
    wait_until(
        lambda: all(latest(app).get(k, 0) >= n for k, n in expected.items()), WAIT_S, "every record counted"
    )
    assert client.state is State.RUNNING


def test_a_retriable_poll_error_is_retried_and_never_reaches_the_handler(
    make_local_client, local_app
) -> None:  # type: ignore[no-untyped-def]
    app = local_app
    client = make_local_client()
    errors: list[BaseException] = []
    client.set_uncaught_exception_handler(lambda exc: errors.append(exc) or Response.SHUTDOWN_CLIENT)
    client.start()
    assert client.wait_for_state(State.RUNNING, timeout=30)
    app.cluster.fail_next("poll", times=3)
    expected = produce(app, 200)
    wait_until(lambda: latest(app) == dict(expected), WAIT_S, "exact counts after the poll errors")
    assert errors == []
    assert client.state is State.RUNNING


def test_a_retriable_error_that_outlasts_task_timeout_reaches_the_handler_naming_it(
    make_local_client, local_app
) -> None:  # type: ignore[no-untyped-def]
    app = local_app
    client = make_local_client(**{"task.timeout.ms": 300, "retry.backoff.ms": 20})
    errors: list[BaseException] = []
    client.set_uncaught_exception_handler(lambda exc: errors.append(exc) or Response.SHUTDOWN_CLIENT)
    client.start()
    assert client.wait_for_state(State.RUNNING, timeout=30)
    app.cluster.fail_next("poll", times=10_000)
    assert client.wait_for_state(State.ERROR, timeout=30)
    app.cluster._broker.faults.clear()
    assert errors and "poll" in str(errors[0]) and "task.timeout.ms=300" in str(errors[0])


class FailAtRecord(CountPerKey):
    """Raises once, at the ``at``-th record handled by the threads of clients whose id starts
    with ``only`` (every client's when empty)."""

    at = 0
    seen = 0
    only = ""
    lock = threading.Lock()

    def process(self, record: Record) -> None:
        if not threading.current_thread().name.startswith(FailAtRecord.only):
            super().process(record)
            return
        with FailAtRecord.lock:
            FailAtRecord.seen += 1
            fail = FailAtRecord.seen == FailAtRecord.at
        if fail:
            raise RuntimeError(f"injected failure at record {FailAtRecord.at}")
        super().process(record)


def committed_updates(app: App) -> dict[str, list[int]]:
    updates: dict[str, list[int]] = {}
    for r in app.cluster.read(app.sink):
        updates.setdefault(r.key.decode(), []).append(LONG.deserialize(app.sink, r.value))
    return updates


def assert_each_update_exactly_once(app: App, expected: Counter[str]) -> None:
    wait_until(lambda: latest(app) == dict(expected), app.timeout, "exact committed counts")
    for key, values in committed_updates(app).items():
        assert values == list(range(1, expected[key] + 1)), f"{key}: duplicates or gaps"


@pytest.mark.parametrize("response", [None, Response.SHUTDOWN_CLIENT, Response.SHUTDOWN_APPLICATION])
@pytest.mark.slow_on_kafka
def test_exactly_once_shutdown_after_a_task_failure_commits_nothing_of_the_open_transaction(
    make_client, app, response
) -> None:  # type: ignore[no-untyped-def]
    FailAtRecord.at, FailAtRecord.seen, FailAtRecord.only = 600, 0, ""
    eos = {"processing.guarantee": "exactly_once_v2", "num.stream.threads": 1, "commit.interval.ms": 100}
    # No interval commit may come before the failure, however slowly the records arrive, and the
    # transaction open since the first record must not time out meanwhile (Apache Kafka would
    # abort it and fence the producer: test_a_fenced_producer_is_replaced_... covers that).
    slow = {"commit.interval.ms": 600000, "producer.transaction.timeout.ms": 120000}
    failing = make_client(count_topology(app, FailAtRecord), name="a", **{**eos, **slow})
    if response is not None:
        failing.set_uncaught_exception_handler(lambda exc: response)
    failing.start()
    expected = Counter({"k": 1000})
    base = int(time.time() * 1000)
    for i in range(1000):
        app.cluster.produce(app.source, b"k", b"x", timestamp=base + i)
    assert failing.wait_for_state(State.ERROR, timeout=app.timeout)
    assert latest(app) == {}  # the 599 updates before the failure were never committed
    FailAtRecord.at = 0
    successor = make_client(count_topology(app, FailAtRecord), name="b", **eos)
    successor.start()
    assert_each_update_exactly_once(app, expected)


def test_exactly_once_a_client_that_fails_and_is_never_closed_leaves_no_duplicates(make_client, app) -> None:  # type: ignore[no-untyped-def]
    eos = {"processing.guarantee": "exactly_once_v2", "num.stream.threads": 2, "commit.interval.ms": 100}
    FailAtRecord.at, FailAtRecord.seen, FailAtRecord.only = 0, 0, "c-b"
    survivor = make_client(count_topology(app, FailAtRecord), name="a", **eos)
    survivor.start()
    assert survivor.wait_for_state(State.RUNNING, timeout=app.timeout)
    expected = produce(app, 400)
    wait_until(lambda: latest(app) == dict(expected), app.timeout, "the first counts")
    joining = make_client(count_topology(app, FailAtRecord), name="b", **eos)
    joining.set_uncaught_exception_handler(lambda exc: Response.SHUTDOWN_CLIENT)
    joining.start()
    wait_until(
        lambda: joining.state is State.RUNNING and survivor.state is State.RUNNING, app.timeout, "the join"
    )
    FailAtRecord.at, FailAtRecord.seen = 6, 0  # the joining client's sixth record from now
    expected.update(produce(app, 400, start=400))
    assert joining.wait_for_state(State.ERROR, timeout=app.timeout)
    # The failed client is left as it is (a hung process looks like that); the survivor goes on.
    expected.update(produce(app, 200, start=800))
    assert_each_update_exactly_once(app, expected)


class FailEveryHundred(CountPerKey):
    """Raises at every 100th record this process handles, ``budget`` times in all."""

    seen = 0
    budget = 0
    lock = threading.Lock()

    def process(self, record: Record) -> None:
        with FailEveryHundred.lock:
            FailEveryHundred.seen += 1
            fail = FailEveryHundred.seen % 100 == 0 and FailEveryHundred.budget > 0
            if fail:
                FailEveryHundred.budget -= 1
        if fail:
            raise RuntimeError("injected failure at a hundredth record")
        super().process(record)


@pytest.mark.slow_on_kafka
def test_exactly_once_repeated_task_failures_under_replace_thread_stay_exact(make_client, app) -> None:  # type: ignore[no-untyped-def]
    FailEveryHundred.seen, FailEveryHundred.budget = 0, 10
    client = make_client(
        count_topology(app, FailEveryHundred),
        **{"processing.guarantee": "exactly_once_v2", "commit.interval.ms": 100},
    )
    errors: list[BaseException] = []
    client.set_uncaught_exception_handler(lambda exc: errors.append(exc) or Response.REPLACE_THREAD)
    client.start()
    expected: Counter[str] = Counter()
    for batch in range(5):
        expected.update(produce(app, 400, start=batch * 400))
        # Input arrives in steps, so failures land on tasks that have committed work before.
        wait_until(lambda n=(batch + 1) * 400: FailEveryHundred.seen >= n, app.timeout, "progress")  # type: ignore[misc]
    wait_until(lambda: FailEveryHundred.budget == 0, app.timeout, "every failure to fire")
    assert_each_update_exactly_once(app, expected)
    assert len(errors) == 10
    assert client.state is State.RUNNING


def test_a_record_the_broker_rejects_reaches_the_handler_once_instead_of_looping(
    make_local_client, local_app
) -> None:  # type: ignore[no-untyped-def]
    app = local_app
    client = make_local_client()
    errors: list[BaseException] = []
    client.set_uncaught_exception_handler(lambda exc: errors.append(exc) or Response.SHUTDOWN_CLIENT)
    client.start()
    assert client.wait_for_state(State.RUNNING, timeout=30)
    rejected = ClusterError(f"Producing to {app.sink}-0 failed: Message size too large (MSG_SIZE_TOO_LARGE)")
    app.cluster.fail_next("send", error=rejected)
    produce(app, 50)
    assert client.wait_for_state(State.ERROR, timeout=30)
    assert len(errors) == 1
    assert "retrying cannot fix" in str(errors[0]) and "MSG_SIZE_TOO_LARGE" in str(errors[0])


class _SettingsSeen(EmbeddedCluster):
    """An embedded cluster that keeps the settings each producer was created with, and each
    consumer's by client.id."""

    def __init__(self) -> None:
        super().__init__()
        self.producer_settings: list[dict[str, object]] = []
        self.consumer_settings: dict[str, dict[str, object]] = {}

    def producer(self, config=None):  # type: ignore[no-untyped-def]
        self.producer_settings.append(dict(config or {}))
        return super().producer(config)

    def consumer(self, group_id, config=None):  # type: ignore[no-untyped-def]
        settings = dict(config or {})
        self.consumer_settings[str(settings.get("client.id"))] = settings
        return super().consumer(group_id, config)


def _settings_of_a_running_client(tmp_path, app_id, overrides) -> _SettingsSeen:  # type: ignore[no-untyped-def]
    """The client settings a client made with ``overrides`` used, once it ran and closed."""
    cluster = _SettingsSeen()
    make, _clients = client_factory(new_app(cluster, app_id), tmp_path)
    client = make(**overrides)
    try:
        client.start()
        assert client.wait_for_state(State.RUNNING, timeout=30)
    finally:
        client.close(timeout=30)
    return cluster


@pytest.mark.parametrize(
    ("overrides", "seen"),
    [
        ({}, {"linger.ms": PRODUCER_LINGER_MS}),
        ({"producer.linger.ms": 100}, {"linger.ms": 100}),
        ({"producer.queue.buffering.max.ms": 100}, {"queue.buffering.max.ms": 100}),
    ],
)
def test_the_producer_lingers_5_ms_unless_a_linger_is_set(tmp_path, app_id, overrides, seen) -> None:  # type: ignore[no-untyped-def]
    cluster = _settings_of_a_running_client(tmp_path, app_id, overrides)
    names = ("linger.ms", "queue.buffering.max.ms")
    lingers = [{k: s[k] for k in names if k in s} for s in cluster.producer_settings]
    assert lingers and all(linger == seen for linger in lingers)


@pytest.mark.parametrize(
    ("overrides", "seen"),
    [
        ({}, {"max.partition.fetch.bytes": BACKLOG_PARTITION_FETCH_BYTES}),
        ({"restore.consumer.max.partition.fetch.bytes": 1 << 20}, {"max.partition.fetch.bytes": 1 << 20}),
        ({"restore.consumer.fetch.message.max.bytes": 1 << 20}, {"fetch.message.max.bytes": 1 << 20}),
    ],
)
def test_the_restore_consumer_fetches_large_batches_unless_a_size_is_set(
    tmp_path, app_id, overrides, seen
) -> None:  # type: ignore[no-untyped-def]
    cluster = _settings_of_a_running_client(tmp_path, app_id, overrides)
    (restore,) = [
        s for client_id, s in cluster.consumer_settings.items() if client_id.endswith("-restore-consumer")
    ]
    fetch_keys = {"max.partition.fetch.bytes", "fetch.message.max.bytes"}
    assert {k: v for k, v in restore.items() if k in fetch_keys} == seen
    (main,) = [
        s
        for client_id, s in cluster.consumer_settings.items()
        if client_id.endswith("-consumer") and s is not restore
    ]
    assert not fetch_keys & main.keys()  # the main consumer keeps librdkafka's default
