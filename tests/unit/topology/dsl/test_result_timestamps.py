"""Kafka's timestamps for aggregations and tables, on the test driver: an aggregate or a join result
carries the largest timestamp of the records that made it; a table row the timestamp of the record
that wrote it; a stream-table join result the stream record's timestamp. Every emitted record is
checked, with out-of-order input.

The module is marked ``on_cluster``: its tests using ``drive`` run on a KafkaStreams client over an
EmbeddedCluster too (tests/unit/topology/dsl/conftest.py), and the tests at its end check on a
cluster what the driver cannot show."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kstreams import KafkaStreams
from kstreams.cluster import EmbeddedCluster
from kstreams.processing.compiled.aggregate_steps import AggregateStep, PythonAggregateStep
from kstreams.serdes import Serdes
from kstreams.state.value_and_timestamp import ValueAndTimestamp
from kstreams.testing import TopologyTestDriver
from kstreams.topology import KeyValue, Materialized, Produced, StreamsBuilder, TimeWindows
from kstreams.topology.dsl.windowed_serdes import WindowedSerdes
from tests.support.clients import Clients, client_settings, wait_timeout
from tests.support.waiting import wait_until

S = Serdes.string()
L = Serdes.long()

pytestmark = pytest.mark.on_cluster(
    representative="test_compiled_count_keeps_the_largest_timestamp_across_batches_and_restore"
)

# Uncached stores: every update is emitted, so each record's output can be checked.
NO_CACHE = {"statestore_cache_max_bytes": 0}


def _out(driver: TopologyTestDriver, value_serde: Any = S, topic: str = "out") -> list[tuple[Any, Any, int]]:
    records = driver.create_output_topic(topic, S, value_serde).read_records_to_list()
    return [(r.key, r.value, r.timestamp) for r in records]


def test_count_keeps_the_largest_timestamp_of_its_records(drive):
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().count().to_stream().to("out", Produced.with_(S, L))
    driver = drive(builder.build(), **NO_CACHE)
    words = driver.create_input_topic("in", S, S)
    for key, ts in [("a", 100), ("a", 50), ("b", 20), ("a", 120), ("a", 110)]:
        words.pipe_input(key, "v", ts)
    assert _out(driver, L) == [("a", 1, 100), ("a", 2, 100), ("b", 1, 20), ("a", 3, 120), ("a", 4, 120)]
    stored = driver.get_timestamped_key_value_store(_only_store(driver))
    assert stored.get("a") == ValueAndTimestamp(4, 120)
    assert driver.get_key_value_store(_only_store(driver)).get("a") == 4


def test_reduce_and_aggregate_keep_the_largest_timestamp(drive):
    builder = StreamsBuilder()
    grouped = builder.stream("in").group_by_key()
    grouped.reduce(lambda a, b: a + b).to_stream().to("reduced")
    grouped.aggregate(lambda: "", lambda k, v, agg: agg + v.upper()).to_stream().to("aggregated")
    driver = drive(builder.build(), **NO_CACHE)
    source = driver.create_input_topic("in", S, S)
    for value, ts in [("x", 30), ("y", 10), ("z", 40), ("w", 35)]:
        source.pipe_input("k", value, ts)
    assert _out(driver, topic="reduced") == [
        ("k", "x", 30),
        ("k", "xy", 30),
        ("k", "xyz", 40),
        ("k", "xyzw", 40),
    ]
    assert _out(driver, topic="aggregated") == [
        ("k", "X", 30),
        ("k", "XY", 30),
        ("k", "XYZ", 40),
        ("k", "XYZW", 40),
    ]


def test_cached_count_forwards_at_the_stored_timestamp_on_flush(drive):
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().count().to_stream().to("out", Produced.with_(S, L))
    driver = drive(builder.build())  # caching on: the driver commits (flushes) after each record
    words = driver.create_input_topic("in", S, S)
    words.pipe_input("a", "v", 100)
    words.pipe_input("a", "v", 50)
    assert _out(driver, L) == [("a", 1, 100), ("a", 2, 100)]


def test_windowed_count_keeps_the_largest_timestamp_per_window(drive):
    builder = StreamsBuilder()
    (
        builder.stream("in")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(100, 1000))
        .count()
        .to_stream()
        .to("out", Produced.with_(WindowedSerdes.time_windowed_serde_from(S, 100), L))
    )
    driver = drive(builder.build(), **NO_CACHE)
    source = driver.create_input_topic("in", S, S)
    for ts in (60, 20, 150, 90, 110):
        source.pipe_input("a", "v", ts)
    out = driver.create_output_topic("out", WindowedSerdes.time_windowed_serde_from(S, 100), L)
    got = [((r.key.start, r.key.end), r.value, r.timestamp) for r in out.read_records_to_list()]
    assert got == [
        ((0, 100), 1, 60),
        ((0, 100), 2, 60),
        ((100, 200), 1, 150),
        ((0, 100), 3, 90),
        ((100, 200), 2, 150),
    ]
    windows = driver.get_timestamped_window_store(_only_store(driver))
    assert windows.fetch("a", 0) == ValueAndTimestamp(3, 90)
    assert driver.get_window_store(_only_store(driver)).fetch("a", 100) == 2


def test_table_source_map_values_and_filter_keep_each_records_timestamp(drive):
    builder = StreamsBuilder()
    table = builder.table("in", materialized=Materialized.as_("source"))
    table.map_values(str.upper, materialized=Materialized.as_("mapped")).to_stream().to("mapped")
    table.filter(lambda k, v: v != "drop").to_stream().to("filtered")
    driver = drive(builder.build(), **NO_CACHE)
    rows = driver.create_input_topic("in", S, S)
    rows.pipe_input("a", "x", 100)
    rows.pipe_input("a", "y", 40)  # out of order: Kafka's table source keeps the record's timestamp
    rows.pipe_input("a", "drop", 70)
    rows.pipe_input("a", None, 60)
    assert _out(driver, topic="mapped") == [
        ("a", "X", 100),
        ("a", "Y", 40),
        ("a", "DROP", 70),
        ("a", None, 60),
    ]
    assert _out(driver, topic="filtered") == [
        ("a", "x", 100),
        ("a", "y", 40),
        ("a", None, 70),
        # The deletion at 60 is of a row the filter dropped at 70: as in Kafka, nothing goes out.
    ]
    rows.pipe_input("b", "z", 5)
    assert driver.get_timestamped_key_value_store("source").get("b") == ValueAndTimestamp("z", 5)
    assert driver.get_timestamped_key_value_store("mapped").get("b") == ValueAndTimestamp("Z", 5)
    assert driver.get_timestamped_key_value_store("mapped").get("a") is None


def _table_join(drive: Any, method: str) -> tuple[TopologyTestDriver, Any, Any]:
    builder = StreamsBuilder()
    left = builder.table("left")
    right = builder.table("right")
    getattr(left, method)(right, lambda a, b: f"{a}+{b}").to_stream().to("out")
    driver = drive(builder.build(), **NO_CACHE)
    return driver, driver.create_input_topic("left", S, S), driver.create_input_topic("right", S, S)


def test_inner_table_join_result_carries_the_larger_timestamp_of_both_sides(drive):
    driver, left, right = _table_join(drive, "join")
    left.pipe_input("a", "1", 100)
    right.pipe_input("a", "X", 50)  # older than the left row: the result is as new as the left row
    left.pipe_input("a", "2", 60)
    right.pipe_input("a", "Y", 200)
    right.pipe_input("a", None, 30)  # deleting the right row retracts the result
    assert _out(driver) == [("a", "1+X", 100), ("a", "2+X", 60), ("a", "2+Y", 200), ("a", None, 60)]


def test_left_table_join_takes_the_left_timestamp_when_the_right_side_is_missing(drive):
    driver, left, right = _table_join(drive, "left_join")
    left.pipe_input("a", "1", 100)
    right.pipe_input("a", "X", 50)
    right.pipe_input("a", "Y", 150)
    left.pipe_input("b", "2", 10)
    assert _out(driver) == [("a", "1+None", 100), ("a", "1+X", 100), ("a", "1+Y", 150), ("b", "2+None", 10)]


def test_outer_table_join_takes_the_larger_timestamp_of_the_present_sides(drive):
    driver, left, right = _table_join(drive, "outer_join")
    right.pipe_input("a", "X", 70)
    left.pipe_input("a", "1", 20)
    left.pipe_input("a", None, 10)
    assert _out(driver) == [("a", "None+X", 70), ("a", "1+X", 70), ("a", "None+X", 70)]


def test_materialized_table_join_stores_the_result_timestamp(drive):
    builder = StreamsBuilder()
    left = builder.table("left")
    left.join(builder.table("right"), lambda a, b: a + b, materialized=Materialized.as_("joined"))
    driver = drive(builder.build(), **NO_CACHE)
    driver.create_input_topic("left", S, S).pipe_input("a", "1", 300)
    driver.create_input_topic("right", S, S).pipe_input("a", "2", 100)
    assert driver.get_timestamped_key_value_store("joined").get("a") == ValueAndTimestamp("12", 300)


def test_stream_table_join_keeps_the_stream_records_timestamp(drive):
    builder = StreamsBuilder()
    table = builder.table("table")
    builder.stream("stream").join(table, lambda s, t: f"{s}+{t}").to("out")
    driver = drive(builder.build(), **NO_CACHE)
    driver.create_input_topic("table", S, S).pipe_input("a", "A", 500)
    driver.create_input_topic("stream", S, S).pipe_input("a", "x", 5)
    assert _out(driver) == [("a", "x+A", 5)]


def test_table_group_by_aggregate_keeps_the_largest_timestamp(drive):
    builder = StreamsBuilder()
    (
        builder.table("in")
        .group_by(lambda k, v: KeyValue(v, k))
        .count(Materialized.as_("by-value"))
        .to_stream()
        .to("out", Produced.with_(S, L))
    )
    driver = drive(builder.build(), **NO_CACHE)
    rows = driver.create_input_topic("in", S, S)
    rows.pipe_input("u1", "red", 100)
    rows.pipe_input("u2", "red", 40)  # older record, same group: the count stays at 100
    rows.pipe_input("u1", "blue", 70)  # u1 leaves red (subtract at max(70, 100)) and joins blue at 70
    assert _out(driver, L) == [("red", 1, 100), ("red", 2, 100), ("red", 1, 100), ("blue", 1, 70)]
    assert driver.get_timestamped_key_value_store("by-value").get("red") == ValueAndTimestamp(1, 100)


def test_timestamps_survive_reopening_the_persistent_store(tmp_path):
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().count(Materialized.as_("counts")).to_stream().to(
        "out", Produced.with_(S, L)
    )
    topology = builder.build()
    config = {
        "default.key.serde": "string",
        "default.value.serde": "string",
        "state.dir": str(tmp_path),
        "statestore.cache.max.bytes": 0,
    }
    with TopologyTestDriver(topology, config, initial_wall_clock_time_ms=0) as first:
        first.create_input_topic("in", S, S).pipe_input("a", "v", 900)
    with TopologyTestDriver(topology, config, initial_wall_clock_time_ms=0) as second:
        assert second.get_timestamped_key_value_store("counts").get("a") == ValueAndTimestamp(1, 900)
        second.create_input_topic("in", S, S).pipe_input("a", "v", 10)
        assert _out(second, L) == [("a", 2, 900)]


def _only_store(driver: TopologyTestDriver) -> str:
    (name,) = driver.get_all_state_stores()
    return name


# -- on a cluster ----------------------------------------------------------------------------------
# Kafka's result timestamps through KafkaStreams (the compiled batch path, which runs by default),
# on the embedded cluster and on a real broker: aggregates keep the largest timestamp of their
# records across batches, across the record cache and across a restore from the changelog; and
# their updates carry the headers of the record that last wrote each key.


class App:
    """A test's application on ``cluster``: its topics (one partition each), its clients, and
    the sink's records read back."""

    def __init__(self, cluster: Any, app_id: str, state_dir: Path) -> None:
        self.cluster = cluster
        self.app_id = app_id
        self.state_dir = state_dir
        self.embedded = isinstance(cluster, EmbeddedCluster)
        self.timeout = wait_timeout(cluster)
        self.clients = Clients()
        self.source = f"{app_id}-in"
        self.sink = f"{app_id}-out"
        cluster.create_topic(self.source, 1)
        cluster.create_topic(self.sink, 1)

    def start(self, topology: Any, name: str = "main", **config: Any) -> KafkaStreams:
        props = client_settings(self.cluster, self.app_id, self.state_dir / name, **config)
        return self.clients.start(topology, props, self.cluster)

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
    made.clients.close_all()


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
