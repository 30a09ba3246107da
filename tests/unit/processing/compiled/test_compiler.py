"""Compiled batch segments give the per-record path's results, in the test driver and on the
threaded runtime, and are chosen for the DSL operations that have kernels."""

from __future__ import annotations

import json
import operator
import random
import struct
from collections.abc import Callable
from typing import Any

import pytest

from kstreams import Consumed, Materialized, Produced, Serdes, Stores, StreamsBuilder, TimeWindows
from kstreams._native import kernels
from kstreams._native.record_batch import RecordBatch, default_partition
from kstreams.client import KafkaStreams
from kstreams.predicates import json_field, value
from kstreams.processing.compiled.aggregate_steps import AggregateStep, CountColumnsStep, PythonAggregateStep
from kstreams.processing.compiled.sink_steps import ColumnSinkStep, SinkStep
from kstreams.processing.compiled.stateless_steps import FilterStep, ProjectStep, PythonChainStep
from kstreams.testing import TopologyTestDriver
from tests.support.waiting import wait_until

LONG = struct.Struct(">q")
STRING, JSON, LONG_SERDE = Serdes.string(), Serdes.json(), Serdes.long()


# ---------------------------------------------------------------------------- topologies


def stateless() -> Any:
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(STRING, JSON))
    stream.filter(json_field("bot").eq(False)).map_values(json_field("user")).to(
        "out", Produced.with_(STRING, STRING)
    )
    return builder.build()


def counts() -> Any:
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed.with_(STRING, JSON)).group_by_key()
    grouped.count(Materialized.as_("counts")).to_stream().to("out", Produced.with_(STRING, LONG_SERDE))
    windows = TimeWindows.of_size_and_grace(100, 20).advance_by(50)
    grouped.windowed_by(windows).count(Materialized.as_("windowed")).to_stream().map(
        lambda wk, c: (f"{wk.key}@{wk.start}", c)
    ).to("out-windowed", Produced.with_(STRING, LONG_SERDE))
    return builder.build()


def reductions() -> Any:
    builder = StreamsBuilder()
    grouped = builder.stream("longs", Consumed.with_(STRING, LONG_SERDE)).group_by_key()
    grouped.reduce(operator.add, Materialized.as_("sums")).to_stream().to(
        "out", Produced.with_(STRING, LONG_SERDE)
    )
    grouped.reduce(min, Materialized.as_("mins")).to_stream().to(
        "out-min", Produced.with_(STRING, LONG_SERDE)
    )
    grouped.reduce(max, Materialized.as_("maxs"))
    return builder.build()


def mixed() -> Any:
    """A compiled filter, then a line of Python functions into a sink (one batch step)."""
    builder = StreamsBuilder()
    stream = builder.stream("longs", Consumed.with_(STRING, LONG_SERDE))
    stream.filter_not(value().le(0)).map_values(lambda v: v * 2).filter(lambda k, v: v % 3 != 0).to(
        "out", Produced.with_(STRING, LONG_SERDE)
    )
    return builder.build()


def python_mappers() -> Any:
    """Plain Python mappers straight into sinks run in batch form; their results are the same."""
    builder = StreamsBuilder()
    stream = builder.stream("longs", Consumed.with_(STRING, LONG_SERDE))
    stream.filter(value().gt(-5)).map(lambda k, v: (k.upper(), v + 1)).to(
        "out", Produced.with_(STRING, LONG_SERDE)
    )
    stream.select_key(lambda k, v: f"{k}:{v % 3}").to("out-min", Produced.with_(STRING, LONG_SERDE))
    return builder.build()


def python_chain() -> Any:
    """A line of plain Python filters and mappers into a sink: one batch step for the whole line."""
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(STRING, JSON))
    (
        stream.filter(lambda k, doc: not doc["bot"])
        .map_values(lambda doc: doc["user"])
        .select_key(lambda k, user: f"{k}/{user}")
        .filter_not(lambda k, user: user.startswith("u1"))
        .map(lambda k, user: (k.upper(), user + "!"))
        .to("out", Produced.with_(STRING, STRING))
    )
    return builder.build()


def python_aggregates() -> Any:
    """Aggregations with Python functions, after a Python mapper and straight from the source."""
    builder = StreamsBuilder()
    docs = builder.stream("in", Consumed.with_(STRING, JSON)).map_values(
        lambda doc: None if doc["bot"] else doc["user"]  # a count skips null values, a windowed one not
    )
    grouped = docs.group_by_key()
    grouped.count(Materialized.as_("counts")).to_stream().to("out", Produced.with_(STRING, LONG_SERDE))
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(50)).count(Materialized.as_("windowed"))
    numbers = builder.stream("longs", Consumed.with_(STRING, LONG_SERDE))
    numbers.map_values(lambda v: v * 3 - 1).group_by_key().reduce(
        lambda a, b: max(a, b) - 1 if b % 2 else a + b, Materialized.as_("mins").with_value_serde(LONG_SERDE)
    )
    longs = numbers.group_by_key()
    longs.reduce(
        lambda a, b: a + b if b % 7 else a - b, Materialized.as_("sums").with_value_serde(LONG_SERDE)
    ).to_stream().to("out-min", Produced.with_(STRING, LONG_SERDE))
    # hopping windows with a grace shorter than the input's disorder: some records come too late
    hopping = longs.windowed_by(TimeWindows.of_size_and_grace(100, 20).advance_by(50))
    hopping.reduce(lambda a, b: a * 2 - b, Materialized.as_("windowed-reduce").with_value_serde(LONG_SERDE))
    hopping.aggregate(
        lambda: 0,
        lambda k, v, agg: agg * 3 + v,
        Materialized.as_("windowed-sums").with_value_serde(LONG_SERDE),
    )
    return builder.build()


def rekeyed() -> Any:
    """select_key from a JSON field, a repartition, then a count in the next subtopology."""
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(STRING, JSON))
    stream.select_key(json_field("page")).group_by_key().count(Materialized.as_("pages")).to_stream().to(
        "out", Produced.with_(STRING, LONG_SERDE)
    )
    return builder.build()


def lru_counts() -> Any:
    """A count and a sum over LRU maps of fewer keys than the input has: which key a map forgets
    depends on the order of every read and write."""
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(STRING, JSON)).group_by_key().count(
        Materialized.as_(Stores.lru_map("lru-counts", 5))
    ).to_stream().to("out", Produced.with_(STRING, LONG_SERDE))
    builder.stream("longs", Consumed.with_(STRING, LONG_SERDE)).group_by_key().reduce(
        operator.add, Materialized.as_(Stores.lru_map("lru-sums", 7))
    ).to_stream().to("out-min", Produced.with_(STRING, LONG_SERDE))
    return builder.build()


TOPOLOGIES = {
    "stateless": stateless,
    "counts": counts,
    "reductions": reductions,
    "mixed": mixed,
    "python_mappers": python_mappers,
    "python_chain": python_chain,
    "python_aggregates": python_aggregates,
    "rekeyed": rekeyed,
}

STRING_OUTPUT = (stateless, python_chain)


def records(n: int, seed: int = 5) -> list[tuple[str, Any, int, int]]:
    """(key, json value, long value, timestamp); some out of order, some keys repeated often."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key = f"k{rng.randrange(12)}"
        doc = {"user": f"u{rng.randrange(5)}", "bot": rng.random() < 0.4, "page": rng.choice("/abc")}
        if i % 11 == 0:
            doc["user"] = 'caf\u00e9 "quoted"'
        ts = 1000 + i * 7 - (60 if i % 9 == 0 else 0)
        out.append((key, doc, rng.randrange(-20, 40), ts))
    return out


# ------------------------------------------------------------------------------ the driver


PER_RECORD = {"processing.compiled": False}


def mode(compiled: str) -> dict[str, Any]:
    return {} if compiled == "1" else dict(PER_RECORD)


def driven(
    make: Callable[[], Any], data: list[tuple[str, Any, int, int]], config: dict[str, Any] | None = None
) -> TopologyTestDriver:
    """A driver of ``make()``'s topology that has read ``data``: documents from "in", numbers
    from "longs" (each where the topology reads that topic). The caller closes it."""
    driver = TopologyTestDriver(
        make(), {"default.key.serde": "string", "default.value.serde": "string", **(config or {})}
    )
    topics = driver._plan.source_topics
    if "in" in topics:
        inp = driver.create_input_topic("in", STRING, JSON)
        for key, doc, _, ts in data:
            inp.pipe_input(key, doc, ts)
    if "longs" in topics:
        inp = driver.create_input_topic("longs", STRING, LONG_SERDE)
        for key, _, number, ts in data:
            inp.pipe_input(key, number, ts)
    return driver


def run_driver(
    make: Callable[[], Any], data: list[tuple[str, Any, int, int]], config: dict[str, Any] | None = None
):  # type: ignore[no-untyped-def]
    driver = driven(make, data, config)
    try:
        out = {}
        for topic, serde in (("out", None), ("out-min", LONG_SERDE), ("out-windowed", LONG_SERDE)):
            if topic in {t for s in driver._plan.subtopologies for t in s.sink_topics}:
                value_serde = serde or (STRING if make in STRING_OUTPUT else LONG_SERDE)
                out[topic] = driver.create_output_topic(topic, STRING, value_serde).read_key_values_to_list()
        segments = [task.compiled_segments for task in driver._tasks.values()]
        return out, segments
    finally:
        driver.close()


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_driver_output_is_the_same_compiled_and_per_record(
    name: str,
) -> None:
    data = records(300)
    compiled, segments = run_driver(TOPOLOGIES[name], data)
    assert any(segments), "expected a compiled segment"
    per_record, none = run_driver(TOPOLOGIES[name], data, PER_RECORD)
    assert not any(none)
    assert compiled == per_record
    assert all(compiled.values())


def _kinds(segments: list[dict[str, Any]]) -> list[type]:
    return [type(step) for seg in segments for s in seg.values() for step in s.steps()]


def test_dsl_operations_with_kernels_become_compiled_steps() -> None:
    _, segments = run_driver(stateless, records(5))
    assert _kinds(segments) == [FilterStep, ProjectStep, SinkStep]
    # The source's validation captures the fields the filter and the projection read.
    assert [s.fields for seg in segments for s in seg.values()] == [[(1, "bot"), (1, "user")]]
    _, segments = run_driver(counts, records(5))
    steps = [step for seg in segments for s in seg.values() for step in s.steps()]
    assert sorted(step.kernel for step in steps if isinstance(step, AggregateStep)) == [
        "count",
        "windowed-count",
    ]
    _, segments = run_driver(mixed, records(5))
    assert _kinds(segments) == [FilterStep, PythonChainStep, ColumnSinkStep]
    _, segments = run_driver(python_mappers, records(5))
    assert sorted(t.__name__ for t in _kinds(segments)) == [
        "ColumnSinkStep",
        "ColumnSinkStep",
        "FilterStep",
        "PythonChainStep",
        "PythonChainStep",
    ]
    _, segments = run_driver(python_chain, records(5))
    assert _kinds(segments) == [PythonChainStep, ColumnSinkStep]
    _, segments = run_driver(python_aggregates, records(5))
    assert sorted(t.__name__ for t in _kinds(segments)) == [
        "AggregateStep",
        "AggregateStep",
        "CountColumnsStep",
        "CountColumnsStep",
        "PythonAggregateStep",
        "PythonChainStep",
        "PythonChainStep",
        "PythonWindowedAggregateStep",
    ]


def test_a_store_without_a_cache_gets_every_update_per_record() -> None:
    data = records(100)
    compiled, _ = run_driver(counts, data, {"statestore.cache.max.bytes": 0})
    per_record, _ = run_driver(counts, data, {"statestore.cache.max.bytes": 0, **PER_RECORD})
    assert compiled == per_record
    assert len(compiled["out"]) == len(data)


def _all_steps(segments: list[dict[str, Any]]) -> list[Any]:
    return [step for seg in segments for s in seg.values() for step in s.steps()]


# -------------------------------------------------------------------- the threaded runtime


# How long a test waits for what other threads do, unless it gives a timeout of its own.
WAIT_S = 120.0


def produce(cluster: Any, data: list[tuple[str, Any, int, int]], bad: bool = False) -> None:
    """Both input topics, in batches of 200 per partition (as a producer would send them)."""
    columns: dict[tuple[str, int], tuple[list, list, list]] = {}
    for i, (key, doc, number, ts) in enumerate(data):
        k = key.encode()
        p = default_partition(k, 2)
        doc_bytes = json.dumps(doc, separators=(",", ":"), ensure_ascii=i % 2 == 0).encode()
        if bad and i == len(data) // 2:
            doc_bytes = b'{"user": broken'
        for topic, v in (("in", doc_bytes), ("longs", LONG.pack(number))):
            ks, vs, ts_ = columns.setdefault((topic, p), ([], [], []))
            ks.append(k)
            vs.append(v)
            ts_.append(ts)
    producer = cluster.producer()
    for (topic, p), (ks, vs, ts_) in columns.items():
        for i in range(0, len(ks), 200):
            producer.send(
                topic, p, RecordBatch.from_columns(ks[i : i + 200], vs[i : i + 200], ts_[i : i + 200], p)
            )
    producer.flush()


def run_runtime(make: Callable[[], Any], cluster: Any, app_id: str, data, threads: int, tmp_path, extra=None):  # type: ignore[no-untyped-def]
    for topic in ("in", "longs", "out", "out-min", "out-windowed"):
        if topic not in cluster.topics():
            cluster.create_topic(topic, 2)
    extra = dict(extra or {})
    bad = bool(extra.pop("bad", False))
    produce(cluster, data, bad=bad)
    streams = KafkaStreams(
        make(),
        {
            "application.id": app_id,
            "num.stream.threads": threads,
            "state.dir": str(tmp_path / app_id),
            "commit.interval.ms": 100,
            "processing.batch.size": 700,
            "default.key.serde": "string",
            "default.value.serde": "string",
            **extra,
        },
        cluster=cluster,
    )
    # records processed: each input record once per subtopology it passes (skipped ones are not counted)
    inputs = (
        2 if make in (rekeyed, python_aggregates, uncached_kernels, lru_counts) else 1
    )  # a repartition, or two sources
    expected = len(data) * inputs - (1 if bad else 0)
    streams.start()
    try:
        wait_until(
            lambda: (
                sum(
                    v
                    for m, v in streams.metrics().items()
                    if m.name == "process-total" and m.group == "stream-thread-metrics"
                )
                >= expected
            ),
            WAIT_S,
            "every record processed",
        )
        stores = {}
        for name in streams.plan.store_builders:
            if name in ("counts", "sums", "mins", "maxs", "pages"):
                wait_until(lambda n=name: _safe_all(streams, n) is not None, WAIT_S, f"store {name}")
                stores[name] = _safe_all(streams, name)
    finally:
        streams.close(timeout=30)
    return stores


def _safe_all(streams: KafkaStreams, name: str) -> dict[Any, Any] | None:
    try:
        return dict(streams.store(name).all())
    except Exception:
        return None


def _final(cluster: Any, topic: str) -> dict[bytes, bytes]:
    """The newest value per key of a topic (what a compacted topic keeps)."""
    return {r.key: r.value for r in cluster.read(topic)}


def on_both_paths(name: str, run: Callable[[Any, str, dict[str, Any]], Any]) -> list[Any]:
    """``run(cluster, app_id, mode)`` on a fresh embedded cluster, compiled and then per record:
    what each run returned."""
    from kstreams.cluster import EmbeddedCluster

    outputs = []
    for compiled in ("1", "0"):
        cluster = EmbeddedCluster()
        try:
            outputs.append(run(cluster, f"app-{name}-{compiled}", mode(compiled)))
        finally:
            cluster.close()
    return outputs


def test_an_aggregation_over_an_lru_map_runs_a_record_at_a_time(tmp_path) -> None:  # type: ignore[no-untyped-def]
    uncached = {"statestore.cache.max.bytes": 0}
    _, segments = run_driver(lru_counts, records(5), uncached)
    assert not any(
        isinstance(step, AggregateStep | PythonAggregateStep | CountColumnsStep)
        for step in _all_steps(segments)
    )
    # On the runtime, batches of hundreds of records: a batch reading and writing each key once
    # would forget other keys than the per-record path does.
    data = records(3000)

    def run(cluster: Any, app: str, extra: dict[str, Any]) -> Any:
        run_runtime(lru_counts, cluster, app, data, 1, tmp_path, {**extra, **uncached})
        # Every update, record for record; the changelogs as compaction keeps them (the record
        # collector sends only the newest change per key between two commits).
        topics = {t: [(r.key, r.value, r.timestamp) for r in cluster.read(t)] for t in ("out", "out-min")}
        return topics, {t: _final(cluster, f"{app}-{t}-changelog") for t in ("lru-counts", "lru-sums")}

    outputs = on_both_paths("lru", run)
    assert outputs[0] == outputs[1]
    assert None in outputs[0][1]["lru-counts"].values()  # keys the map forgot


@pytest.mark.parametrize("name", ["counts", "reductions", "rekeyed", "python_mappers", "python_aggregates"])
def test_runtime_aggregates_match_the_per_record_path(name: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = records(3000)

    def run(cluster: Any, app: str, extra: dict[str, Any]) -> Any:
        stores = run_runtime(TOPOLOGIES[name], cluster, app, data, 2, tmp_path, extra)
        topics = {t: _final(cluster, t) for t in ("out", "out-min", "out-windowed")}
        changelogs = {
            t: _final(cluster, t)
            for t in cluster.topics()
            if t.endswith("-changelog") and "repartition" not in t
        }
        return stores, topics, {t[len(app) :]: v for t, v in changelogs.items()}

    outputs = on_both_paths(name, run)
    assert outputs[0] == outputs[1]
    assert outputs[0][0] or outputs[0][1]["out"]


@pytest.mark.parametrize("make", [stateless, python_chain, mixed])
def test_runtime_stateless_output_is_identical_record_for_record(make: Callable[[], Any], tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = records(3000)

    def run(cluster: Any, app: str, extra: dict[str, Any]) -> Any:
        run_runtime(make, cluster, app, data, 2, tmp_path, extra)
        wait_until(lambda: len(cluster.read("out")) > 0, WAIT_S, "output")
        return [(r.partition, r.key, r.value, r.timestamp) for r in cluster.read("out")]

    outputs = on_both_paths(make.__name__, run)
    if make is python_chain:
        # New keys send both tasks' records to one output partition, interleaved as the tasks ran.
        outputs = [sorted(output) for output in outputs]
    assert outputs[0] == outputs[1]
    if make is mixed:  # longs: kept when > 0 and, doubled, not a multiple of 3
        assert len(outputs[0]) == sum(1 for _, _, n, _ in data if n > 0 and (n * 2) % 3 != 0)
        return
    expected = [doc for _, doc, _, _ in data if not doc["bot"]]
    if make is python_chain:
        expected = [doc for doc in expected if not doc["user"].startswith("u1")]
    assert len(outputs[0]) == len(expected)


def test_a_bad_record_goes_to_the_deserialization_handler_on_both_paths(tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = records(1000)
    handler = {
        "bad": True,
        "default.deserialization.exception.handler": "kstreams.errors.LogAndContinueExceptionHandler",
    }
    outputs = on_both_paths(
        "bad",
        lambda cluster, app, extra: run_runtime(
            counts, cluster, app, data, 1, tmp_path, {**extra, **handler}
        ),
    )
    assert outputs[0] == outputs[1]
    assert sum(outputs[0]["counts"].values()) == len(data) - 1


def test_compiled_counts_restore_from_their_changelog(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kstreams.cluster import EmbeddedCluster

    data = records(2000)
    cluster = EmbeddedCluster()
    try:
        first = run_runtime(counts, cluster, "app-restore", data, 1, tmp_path)
        # A second instance with an empty state directory restores the store from the changelog.
        cluster.create_topic("unused", 1)
        streams = KafkaStreams(
            counts(),
            {
                "application.id": "app-restore",
                "state.dir": str(tmp_path / "fresh"),
                "default.key.serde": "string",
                "default.value.serde": "string",
            },
            cluster=cluster,
        )
        streams.start()
        try:
            wait_until(lambda: _safe_all(streams, "counts") == first["counts"], WAIT_S, "restored counts")
        finally:
            streams.close(timeout=30)
    finally:
        cluster.close()


def test_a_join_beside_an_aggregation_of_the_same_stream_sees_counts_record_by_record() -> None:
    """Kafka runs each record through every branch before the next; a batch through the count
    branch first would let the join see counts of records that come after it."""
    from kstreams import Grouped
    from kstreams.cluster.port import TopicPartition

    builder = StreamsBuilder()
    clicks = builder.stream("in", Consumed.with_(STRING, STRING))
    counts = clicks.group_by_key(Grouped.with_(STRING, STRING)).count(Materialized.as_("clicks"))
    clicks.left_join(counts, lambda click, count: f"{click}:{count}").to(
        "out", Produced.with_(STRING, STRING)
    )
    driver = TopologyTestDriver(
        builder.build(), {"default.key.serde": "string", "default.value.serde": "string"}
    )
    try:
        task = next(iter(driver._tasks.values()))
        # Feed one batch straight to the task, as the runtime does.
        batch = RecordBatch.from_columns([b"p"] * 3, [b"a", b"b", b"c"], [1, 2, 3], 0, [0, 1, 2])
        task.process(TopicPartition("in", 0), batch)
        task.flush()
        assert task.compiled_segments == {}
        out = [
            STRING.deserialize("out", value)
            for topic, _, written in driver._collector.drain()
            if topic == "out"
            for _, value, *_ in written
        ]
    finally:
        driver.close()
    assert out == ["a:1", "b:2", "c:3"]


def uncached_python() -> Any:
    """Python aggregations over stores that do not cache (every update forwarded), one of them
    deleting its aggregate now and then (an aggregator returning None)."""
    builder = StreamsBuilder()
    grouped = builder.stream("longs", Consumed.with_(STRING, LONG_SERDE)).group_by_key()
    grouped.aggregate(
        lambda: 0,
        lambda k, v, agg: None if v % 13 == 0 else agg + v,
        Materialized.as_("sums").with_value_serde(LONG_SERDE).with_caching_disabled(),
    ).to_stream().to("out", Produced.with_(STRING, LONG_SERDE))
    grouped.count(Materialized.as_("counts").with_caching_disabled())
    grouped.windowed_by(TimeWindows.of_size_and_grace(100, 20).advance_by(50)).reduce(
        lambda a, b: a - b,
        Materialized.as_("windowed-reduce").with_value_serde(LONG_SERDE).with_caching_disabled(),
    )
    return builder.build()


TOPOLOGIES["uncached_python"] = uncached_python


def uncached_kernels() -> Any:
    """Aggregations the kernels run without a cache: a count and a sum into sinks, a windowed count
    with nothing below it, and a count below a Python mapper (as users write it)."""
    builder = StreamsBuilder()
    docs = builder.stream("in", Consumed.with_(STRING, JSON))
    grouped = docs.group_by_key()
    grouped.count(Materialized.as_("counts")).to_stream().to("out", Produced.with_(STRING, LONG_SERDE))
    grouped.windowed_by(TimeWindows.of_size_and_grace(100, 20).advance_by(50)).count(
        Materialized.as_("windowed")
    )
    docs.map_values(lambda doc: None if doc["bot"] else doc["user"]).group_by_key().count(
        Materialized.as_("users")
    ).to_stream().to("out-windowed", Produced.with_(STRING, LONG_SERDE))
    builder.stream("longs", Consumed.with_(STRING, LONG_SERDE)).group_by_key().reduce(
        operator.add, Materialized.as_("sums")
    ).to_stream().to("out-min", Produced.with_(STRING, LONG_SERDE))
    return builder.build()


TOPOLOGIES["uncached_kernels"] = uncached_kernels


def unlogged_kernels() -> Any:
    """Counts and a windowed count over stores without a changelog, in memory and in RocksDB."""
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed.with_(STRING, JSON)).group_by_key()
    grouped.count(
        Materialized.as_(Stores.in_memory_key_value_store("mem")).with_logging_disabled()
    ).to_stream().to("out", Produced.with_(STRING, LONG_SERDE))
    grouped.count(Materialized.as_("rocks").with_logging_disabled()).to_stream().to(
        "out-min", Produced.with_(STRING, LONG_SERDE)
    )
    grouped.windowed_by(TimeWindows.of_size_and_grace(100, 20).advance_by(50)).count(
        Materialized.as_("windowed").with_logging_disabled()
    )
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(70)).count(
        Materialized.as_(
            Stores.in_memory_window_store("mem-windows", 1000, 70, False)
        ).with_logging_disabled()
    )
    return builder.build()


@pytest.fixture
def uncached_kernel_runs(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each call of the count kernel without a cache took its batch, from now on."""
    ran: list[bool] = []
    kernel = kernels.aggregate_uncached

    def counted(*args: Any, **kwargs: Any) -> Any:
        result = kernel(*args, **kwargs)
        ran.append(result is not None)
        return result

    monkeypatch.setattr(kernels, "aggregate_uncached", counted)
    return ran


@pytest.mark.parametrize("make", [uncached_kernels, unlogged_kernels])
def test_aggregations_without_a_cache_run_in_the_kernel_as_per_record(
    make: Callable[[], Any], uncached_kernel_runs: list[bool]
) -> None:
    """Logged stores (and a count below a Python mapper), and stores without a changelog in
    memory and in RocksDB, plain and windowed: four aggregations each."""
    data = records(200)
    config = {"statestore.cache.max.bytes": 0}
    compiled, _ = run_driver(make, data, config)
    assert len(uncached_kernel_runs) == 4 * len(data) and all(uncached_kernel_runs)  # batches of one
    per_record, _ = run_driver(make, data, {**config, **PER_RECORD})
    assert len(uncached_kernel_runs) == 4 * len(data)
    assert compiled == per_record
    assert len(compiled["out"]) == len(compiled["out-min"]) == len(data)
    stores = [_store_contents(make, data, {**config, **mode(c)}) for c in ("1", "0")]
    assert stores[0] == stores[1]
    assert all(stores[0].values())


def _store_contents(make: Callable[[], Any], data: list[Any], config: dict[str, Any]) -> dict[str, Any]:
    """Every store's entries after the driver ran ``data`` through ``make()``'s topology."""
    driver = driven(make, data, config)
    try:
        stores: dict[str, Any] = {name: driver.get_state_store(name) for name in driver._plan.store_builders}
        return {name: sorted(store.all()) for name, store in stores.items()}
    finally:
        driver.close()


@pytest.mark.parametrize(
    "name", ["counts", "reductions", "python_aggregates", "uncached_python", "uncached_kernels"]
)
def test_aggregations_without_a_cache_forward_every_update_as_per_record(name: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kstreams.cluster import EmbeddedCluster

    data = records(3000)
    outputs = []
    for compiled in ("1", "0"):
        cluster = EmbeddedCluster()
        try:
            app = f"app-uncached-{name}-{compiled}"
            config = {**mode(compiled), "statestore.cache.max.bytes": 0}
            stores = run_runtime(TOPOLOGIES[name], cluster, app, data, 2, tmp_path, config)
            topics = {}
            for topic in ("out", "out-min", "out-windowed"):
                # every update, in order per key (one task writes each key)
                per_key: dict[Any, list[Any]] = {}
                for r in cluster.read(topic):
                    per_key.setdefault((r.partition, r.key), []).append((r.value, r.timestamp))
                topics[topic] = per_key
            changelogs = {
                t[len(app) :]: _final(cluster, t) for t in cluster.topics() if t.endswith("-changelog")
            }
            outputs.append((stores, topics, changelogs))
        finally:
            cluster.close()
    assert outputs[0] == outputs[1]
    assert outputs[0][1]["out"] or outputs[0][0]
