"""Kafka's result timestamps through KafkaStreams (the compiled batch path, which runs by default),
on the embedded cluster and on a real broker: aggregates keep the largest timestamp of their
records across batches, across the record cache and across a restore from the changelog; and
their updates carry the headers of the record that last wrote each key."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kstreams import KafkaStreams
from kstreams.cluster import EmbeddedCluster
from kstreams.runtime.compiled.steps import AggregateStep, PythonAggregateStep
from kstreams.serdes import Serdes
from kstreams.state.value_and_timestamp import ValueAndTimestamp
from kstreams.topology import Materialized, Produced, StreamsBuilder, TimeWindows
from kstreams.topology.dsl.windowed_serdes import WindowedSerdes

S = Serdes.string()
L = Serdes.long()


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Check ``condition`` every 20 ms until it holds; fail after ``timeout`` seconds."""
    tick = threading.Event()
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout}s waiting for {what}")
        tick.wait(0.02)


class App:
    def __init__(self, cluster: Any, app_id: str, state_dir: Path) -> None:
        self.cluster = cluster
        self.app_id = app_id
        self.state_dir = state_dir
        self.embedded = isinstance(cluster, EmbeddedCluster)
        self.timeout = 30.0 if self.embedded else 60.0
        self.clients: list[KafkaStreams] = []
        self.source = f"{app_id}-in"
        self.sink = f"{app_id}-out"
        cluster.create_topic(self.source, 1)
        cluster.create_topic(self.sink, 1)

    def start(self, topology: Any, name: str = "main", **config: Any) -> KafkaStreams:
        props: dict[str, Any] = {
            "application.id": self.app_id,
            "default.key.serde": "string",
            "default.value.serde": "string",
            "state.dir": str(self.state_dir / name),
            "commit.interval.ms": 50 if self.embedded else 100,
        }
        if not self.embedded:
            props.update({"session.timeout.ms": 6000, "main.consumer.max.poll.interval.ms": 10000})
        props.update(config)
        streams = KafkaStreams(topology, props, cluster=self.cluster)
        self.clients.append(streams)
        streams.start()
        return streams

    def produce(self, records: list[tuple[str, str | None, int]]) -> None:
        for key, value, ts in records:
            self.cluster.produce(
                self.source, key.encode(), None if value is None else value.encode(), timestamp=ts
            )

    def latest(self, key_serde: Any = S, value_serde: Any = L) -> dict[Any, tuple[Any, int]]:
        """Each key's newest output value and timestamp."""
        found: dict[Any, tuple[Any, int]] = {}
        for record in self.cluster.read(self.sink):
            key = key_serde.deserialize(self.sink, record.key)
            found[key] = (value_serde.deserialize(self.sink, record.value), record.timestamp)
        return found

    def wait_for(self, expected: dict[Any, tuple[Any, int]], **serdes: Any) -> None:
        wait_until(lambda: self.latest(**serdes) == expected, self.timeout, f"outputs {expected}")


@pytest.fixture
def app(cluster: Any, app_id: str, tmp_path: Path) -> Iterator[App]:
    made = App(cluster, app_id, tmp_path)
    yield made
    for streams in made.clients:
        streams.close(timeout=30)


def _compiled_steps(streams: KafkaStreams) -> list[Any]:
    tasks = streams._task_manager
    assert tasks is not None
    return [
        step
        for entry in tasks.running()
        for segment in entry.task.compiled_segments.values()
        for step in segment.steps()
    ]


def _count_topology(app: App) -> Any:
    builder = StreamsBuilder()
    builder.stream(app.source).group_by_key().count(Materialized.as_("counts")).to_stream().to(
        app.sink, Produced.with_(S, L)
    )
    return builder.build()


def test_compiled_count_keeps_the_largest_timestamp_across_batches_and_restore(app: App) -> None:
    base = int(time.time() * 1000)  # near now: the broker deletes records older than retention
    app.produce([("a", "v", base + 100), ("a", "v", base + 50), ("b", "v", base + 20)])
    first = app.start(_count_topology(app), "first")
    app.wait_for({"a": (2, base + 100), "b": (1, base + 20)})
    assert any(isinstance(step, AggregateStep) for step in _compiled_steps(first)), "the kernel ran"
    # A later batch of older records: the aggregate read back from the cache keeps its timestamp.
    app.produce([("a", "v", base + 10), ("b", "v", base + 30)])
    app.wait_for({"a": (3, base + 100), "b": (2, base + 30)})
    assert first.store("counts").get("a") == 3
    assert first.store("counts", timestamped=True).get("a") == ValueAndTimestamp(3, base + 100)
    first.close(timeout=30)
    # A new client with an empty state directory restores the store from the changelog.
    second = app.start(_count_topology(app), "second")
    app.produce([("a", "v", base + 1)])
    app.wait_for({"a": (4, base + 100), "b": (2, base + 30)})
    assert second.store("counts", timestamped=True).get("a") == ValueAndTimestamp(4, base + 100)


def test_compiled_python_reduce_and_windowed_count_keep_the_largest_timestamp(app: App) -> None:
    base = (int(time.time() * 1000) // 1000) * 1000
    builder = StreamsBuilder()
    grouped = builder.stream(app.source).group_by_key()
    grouped.windowed_by(TimeWindows.of_size_and_grace(1000, 60_000)).count().to_stream().to(
        app.sink, Produced.with_(WindowedSerdes.time_windowed_serde_from(S, 1000), L)
    )
    grouped.reduce(lambda a, b: a + b, Materialized.as_("joined")).to_stream().to(f"{app.app_id}-reduced")
    app.cluster.create_topic(f"{app.app_id}-reduced", 1)
    app.produce([("a", "x", base + 600), ("a", "y", base + 200), ("a", "z", base + 1500)])
    streams = app.start(builder.build())
    windowed = WindowedSerdes.time_windowed_serde_from(S, 1000)

    def windows() -> dict[Any, tuple[Any, int]]:
        return {(k.key, k.start - base): v for k, v in app.latest(windowed, L).items()}

    wait_until(
        lambda: windows() == {("a", 0): (2, base + 600), ("a", 1000): (1, base + 1500)},
        app.timeout,
        "windowed counts",
    )
    reduced = f"{app.app_id}-reduced"
    wait_until(
        lambda: [(r.value, r.timestamp) for r in app.cluster.read(reduced)][-1:] == [(b"xyz", base + 1500)],
        app.timeout,
        "the reduced value",
    )
    steps = _compiled_steps(streams)
    assert any(isinstance(step, PythonAggregateStep) for step in steps), steps
    app.produce([("a", "w", base + 100)])
    wait_until(lambda: windows()[("a", 0)] == (3, base + 600), app.timeout, "the older record counted")
    wait_until(
        lambda: [(r.value, r.timestamp) for r in app.cluster.read(reduced)][-1:] == [(b"xyzw", base + 1500)],
        app.timeout,
        "the older record reduced",
    )


def test_table_join_result_timestamps_on_a_cluster(app: App) -> None:
    base = int(time.time() * 1000)
    right = f"{app.app_id}-right"
    app.cluster.create_topic(right, 1)
    builder = StreamsBuilder()
    builder.table(app.source).join(builder.table(right), lambda a, b: f"{a}+{b}").to_stream().to(app.sink)
    app.start(builder.build(), "join", **{"statestore.cache.max.bytes": 0})  # every update emitted
    app.produce([("a", "1", base + 100)])
    app.cluster.produce(right, b"a", b"X", timestamp=base + 50)
    wait_until(
        lambda: [(r.value, r.timestamp) for r in app.cluster.read(app.sink)] == [(b"1+X", base + 100)],
        app.timeout,
        "the join result",
    )
    app.cluster.produce(right, b"a", b"Y", timestamp=base + 300)
    wait_until(
        lambda: (
            [(r.value, r.timestamp) for r in app.cluster.read(app.sink)]
            == [(b"1+X", base + 100), (b"1+Y", base + 300)]
        ),
        app.timeout,
        "the updated join result",
    )


def test_cached_count_updates_carry_the_headers_of_each_key_s_last_write(app: App) -> None:
    base = int(time.time() * 1000)
    trace = [("trace", b"t-1")]
    other = [("trace", b"t-2"), ("user", b"ann")]
    streams = app.start(_count_topology(app))

    def last_headers() -> dict[str, tuple[int, Any]]:
        return {
            r.key.decode(): (L.deserialize(app.sink, r.value), r.headers or None)
            for r in app.cluster.read(app.sink)
        }

    # Records with headers run record by record; "b" has none.
    app.cluster.produce(app.source, b"a", b"v", timestamp=base + 1, headers=trace)
    app.cluster.produce(app.source, b"a", b"v", timestamp=base + 2, headers=other)
    app.cluster.produce(app.source, b"b", b"v", timestamp=base + 3)
    wait_until(
        lambda: last_headers() == {"a": (2, other), "b": (1, None)}, app.timeout, "a and b with headers"
    )
    # A later write without headers leaves none on "a"'s update; one with headers sets them on b's.
    app.cluster.produce(app.source, b"a", b"v", timestamp=base + 4)
    app.cluster.produce(app.source, b"b", b"v", timestamp=base + 5, headers=trace)
    wait_until(
        lambda: last_headers() == {"a": (3, None), "b": (2, trace)}, app.timeout, "the later writers' headers"
    )
    # Once flushed, batches without headers run compiled again and their updates carry none.
    app.produce([("b", "v", base + 6)])
    wait_until(lambda: last_headers()["b"] == (3, None), app.timeout, "b counted by a batch without headers")
    assert streams.store("counts").get("b") == 3
