"""Topologies on Spark Structured Streaming (``run_topology_stream``) give the streaming runtime's
results over the same records, micro-batch by micro-batch, and a query restarted from its
checkpoint gives the output of an uninterrupted run.

Input arrives as a directory of Parquet files read one file per micro-batch; the expected output
is the TopologyTestDriver's (the streaming runtime's StreamTask, one record at a time).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kstreams import (
    Consumed,
    Grouped,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    Topology,
    WindowedSerdes,
)
from kstreams.errors import ConfigException, TopologyException
from kstreams.processor import Processor, ProcessorContext, PunctuationType
from kstreams.processor import Record as StreamRecord
from kstreams.spark import explain_topology, run_topology_stream
from kstreams.state.stores import Stores
from kstreams.testing import TopologyTestDriver
from kstreams.topology import TimeWindows

pytestmark = pytest.mark.spark

S = Serdes.string()
L = Serdes.long()
# No record cache: every update goes out at once, on Spark as on the test driver.
CONFIG = {"application.id": "streaming-test", "statestore.cache.max.bytes": 0}
QUERY_TIMEOUT_S = 120

Record = tuple[str, str, int]  # key, value, timestamp


@pytest.fixture(autouse=True)
def one_state_partition(spark: Any) -> Iterator[None]:
    """Queries started here keep their state in one Spark partition (both tasks in it): each
    micro-batch of a stateful query runs a Spark task per state partition, and these inputs are tiny."""
    saved = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    yield
    spark.conf.set("spark.sql.shuffle.partitions", saved)


def _count() -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream("events", Consumed.with_(S, S))
        .group_by_key()
        .count()
        .to_stream()
        .to("counts", Produced.with_(S, L))
    )
    return builder.build()


WINDOWED_S = WindowedSerdes.time_windowed_serde_from(S, 100)


def _windowed_counts(builder: StreamsBuilder) -> Any:
    """The stream of 100 ms window counts (20 ms grace) of "events"."""
    return (
        builder.stream("events", Consumed.with_(S, S))
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(100, 20))
        .count()
        .to_stream()
    )


def _windowed_count() -> Topology:
    builder = StreamsBuilder()
    _windowed_counts(builder).map(lambda w, n: (f"{w.key}@{w.start}", n)).to("counts", Produced.with_(S, L))
    return builder.build()


def _tumbling_count() -> Topology:
    """A windowed count Spark SQL could compute, were it not for its windows' grace period."""
    builder = StreamsBuilder()
    _windowed_counts(builder).to("counts", Produced.with_(WINDOWED_S, L))
    return builder.build()


def _repartitioned_count() -> Topology:
    """Counts per value: the new key sends every record through a repartition topic (Spark's
    shuffle) to a second subtopology, which counts."""
    builder = StreamsBuilder()
    (
        builder.stream("events", Consumed.with_(S, S))
        .group_by(lambda key, value: value, Grouped.with_(S, S))
        .count()
        .to_stream()
        .to("counts", Produced.with_(S, L))
    )
    return builder.build()


def _count_of_counts() -> Topology:
    """Two stateful subtopologies in a row: a count per key, then how many keys have each count
    (the table's re-grouping subtracts a key's old count when it changes)."""
    builder = StreamsBuilder()
    (
        builder.stream("events", Consumed.with_(S, S))
        .group_by_key()
        .count()
        .group_by(lambda key, count: (str(count), key), Grouped.with_(S, S))
        .count()
        .to_stream()
        .to("counts", Produced.with_(S, L))
    )
    return builder.build()


def _stream_table_join() -> Topology:
    builder = StreamsBuilder()
    users = builder.table("users", Consumed.with_(S, S), Materialized.as_("users-store"))
    (
        builder.stream("clicks", Consumed.with_(S, S))
        .join(users, lambda click, user: f"{click}<{user}>")
        .to("enriched", Produced.with_(S, S))
    )
    return builder.build()


class _TickingCounter(Processor):
    """Counts the records it sees in its store and, every 200 ms of wall-clock time, forwards
    ("tick", count so far) stamped with the punctuation time."""

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.store = context.get_state_store("seen")
        context.schedule(200, PunctuationType.WALL_CLOCK_TIME, self.tick)

    def process(self, record: StreamRecord[Any, Any]) -> None:
        self.store.put("total", (self.store.get("total") or 0) + 1)

    def tick(self, now_ms: int) -> None:
        self.context.forward(StreamRecord("tick", self.store.get("total") or 0, now_ms))


def _ticking_count() -> Topology:
    store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("seen"), S, L)
    return (
        Topology()
        .add_source("events", "events", key_deserializer=S, value_deserializer=S)
        .add_processor("ticker", _TickingCounter, "events")
        .add_state_store(store, "ticker")
        .add_sink("ticks", "ticks", "ticker", key_serializer=S, value_serializer=L)
    )


def _write_micro_batches(directory: Path, batches: Sequence[Sequence[Record]], first: int = 0) -> None:
    """One Parquet file per micro-batch, modification times in batch order (the file source reads
    the oldest first)."""
    directory.mkdir(parents=True, exist_ok=True)
    for n, batch in enumerate(batches, start=first):
        path = directory / f"part-{n:04d}.parquet"
        table = pa.table(
            {
                "key": pa.array([k.encode() for k, _v, _ts in batch], pa.binary()),
                "value": pa.array([v.encode() for _k, v, _ts in batch], pa.binary()),
                "timestamp": pa.array([ts for _k, _v, ts in batch], pa.int64()),
            }
        )
        pq.write_table(table, path)
        os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))


def _stream(spark: Any, directory: Path) -> Any:
    return (
        spark.readStream.schema("key binary, value binary, timestamp long")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(directory))
    )


def _run_query(
    spark: Any, topology: Topology, inputs: dict[str, Path], output: str, checkpoint: Path
) -> list[tuple[bytes, bytes, int]]:
    """Run the topology over every file now in ``inputs`` (availableNow) and return the output
    rows in micro-batch order (a batch Spark replays replaces its first attempt's rows)."""
    batches = _run_micro_batches(spark, topology, inputs, output, checkpoint)
    return [row for batch in batches for row in batch]


def _run_micro_batches(
    spark: Any,
    topology: Topology,
    inputs: dict[str, Path],
    output: str,
    checkpoint: Path,
    *,
    lower_to_sql: bool = False,
    output_mode: str = "append",
) -> list[list[tuple[bytes, bytes, int]]]:
    """The output rows of each micro-batch of ``_run_query``'s run (a lowered aggregation is
    written in ``output_mode`` "update")."""
    streams = {topic: _stream(spark, directory) for topic, directory in inputs.items()}
    outputs = run_topology_stream(spark, topology, streams, CONFIG, partitions=2, lower_to_sql=lower_to_sql)
    batches: dict[int, list[tuple[bytes, bytes, int]]] = {}

    def collect(df: Any, batch_id: int) -> None:
        batches[batch_id] = [(r.key, r.value, r.timestamp) for r in df.collect()]

    query = (
        outputs[output]
        .writeStream.foreachBatch(collect)
        .outputMode(output_mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), f"the query did not finish in {QUERY_TIMEOUT_S}s"
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    return [batches[batch_id] for batch_id in sorted(batches)]


def _driver_output(
    topology: Topology, inputs: Sequence[tuple[str, Record]], output: str, value_serde: Any
) -> list[tuple[str, Any, int]]:
    with TopologyTestDriver(topology, CONFIG) as driver:
        topics = {topic: driver.create_input_topic(topic, S, S) for topic in {t for t, _ in inputs}}
        for topic, (key, value, ts) in inputs:
            topics[topic].pipe_input(key, value, ts)
        out = driver.create_output_topic(output, S, value_serde)
        return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def _by_key(rows: Sequence[tuple[str, Any, int]]) -> dict[str, list[tuple[Any, int]]]:
    """Each key's updates in order: the order that holds across tasks (keys of different tasks
    interleave arbitrarily)."""
    grouped: dict[str, list[tuple[Any, int]]] = {}
    for key, value, ts in rows:
        grouped.setdefault(key, []).append((value, ts))
    return grouped


def _decode(rows: Sequence[tuple[bytes, bytes, int]], value_serde: Any) -> list[tuple[str, Any, int]]:
    return [(S.deserialize("t", k), value_serde.deserialize("t", v), ts) for k, v, ts in rows]


# Four micro-batches of records. The windowed count (100 ms windows, 20 ms grace) drops a record
# that arrives 130 ms behind its task's stream time in the last one, and takes one 5 ms late.
EVENTS: list[list[Record]] = [
    [("a", "x", 10), ("b", "x", 20), ("a", "x", 40), ("c", "x", 90)],
    [("b", "x", 110), ("a", "x", 150), ("c", "x", 160), ("a", "x", 95)],
    [("a", "x", 230), ("b", "x", 240), ("b", "x", 205)],
    [("c", "x", 250), ("a", "x", 120), ("b", "x", 330), ("a", "x", 300)],
]
# The same records in two micro-batches (each micro-batch costs Spark a few seconds).
TWO_BATCHES = [EVENTS[0] + EVENTS[1], EVENTS[2] + EVENTS[3]]


@pytest.mark.parametrize("topology", [_count, _windowed_count], ids=["count", "windowed-count-with-grace"])
def test_streaming_aggregation_equals_the_streaming_runtime(
    spark: Any, tmp_path: Path, topology: Any
) -> None:
    _write_micro_batches(tmp_path / "events", TWO_BATCHES)
    rows = _run_query(spark, topology(), {"events": tmp_path / "events"}, "counts", tmp_path / "checkpoint")
    expected = _driver_output(topology(), [("events", r) for batch in EVENTS for r in batch], "counts", L)
    assert _by_key(_decode(rows, L)) == _by_key(expected)


@pytest.mark.parametrize(
    "topology", [_repartitioned_count, _count_of_counts], ids=["repartitioned-count", "count-of-counts"]
)
def test_subtopologies_joined_by_a_repartition_equal_the_streaming_runtime(
    spark: Any, tmp_path: Path, topology: Any
) -> None:
    events = [
        [("a", "red", 10), ("b", "blue", 20), ("c", "red", 30), ("a", "green", 40)],
        [("b", "red", 50), ("d", "blue", 60), ("a", "red", 70), ("c", "red", 80)],
    ]
    _write_micro_batches(tmp_path / "events", events)
    rows = _run_query(spark, topology(), {"events": tmp_path / "events"}, "counts", tmp_path / "checkpoint")
    expected = _driver_output(topology(), [("events", r) for batch in events for r in batch], "counts", L)
    # Each key's updates in order; the last update of each key is its final count.
    assert _by_key(_decode(rows, L)) == _by_key(expected)


def test_streaming_stream_table_join_equals_the_streaming_runtime(spark: Any, tmp_path: Path) -> None:
    # Each micro-batch has a users file and a clicks file; the task takes the input whose next
    # record is oldest first, as the streaming runtime does, and the driver gets them in that order.
    users = [[("u1", "ann", 5), ("u2", "bob", 6)], [("u1", "anne", 50), ("u3", "cy", 70)]]
    clicks = [
        [("u1", "home", 10), ("u3", "faq", 11)],
        [("u1", "docs", 60), ("u2", "blog", 40), ("u3", "top", 80)],
    ]
    _write_micro_batches(tmp_path / "users", users)
    _write_micro_batches(tmp_path / "clicks", clicks)
    rows = _run_query(
        spark,
        _stream_table_join(),
        {"users": tmp_path / "users", "clicks": tmp_path / "clicks"},
        "enriched",
        tmp_path / "checkpoint",
    )
    piped = sorted(
        [("users", r) for batch in users for r in batch] + [("clicks", r) for batch in clicks for r in batch],
        key=lambda item: item[1][2],
    )
    expected = _driver_output(_stream_table_join(), piped, "enriched", S)
    assert len(expected) == 4  # u3's first click finds no user yet
    assert sorted(_decode(rows, S)) == sorted(expected)


def test_restart_from_checkpoint_gives_the_output_of_an_uninterrupted_run(spark: Any, tmp_path: Path) -> None:
    # Stop after two micro-batches, then restart from the checkpoint with the other two: the
    # restarted tasks rebuild their stores, stream time and processors' stream time from Spark's
    # state (a new run never reuses a worker's cached task), so the late records of the last
    # micro-batch are dropped or counted as in an uninterrupted run. That run's output is the
    # streaming runtime's (test_streaming_aggregation_equals_the_streaming_runtime).
    _write_micro_batches(tmp_path / "events", EVENTS[:2])
    first = _run_query(
        spark, _windowed_count(), {"events": tmp_path / "events"}, "counts", tmp_path / "checkpoint"
    )
    _write_micro_batches(tmp_path / "events", EVENTS[2:], first=2)
    rest = _run_query(
        spark, _windowed_count(), {"events": tmp_path / "events"}, "counts", tmp_path / "checkpoint"
    )
    uninterrupted = _driver_output(
        _windowed_count(), [("events", r) for batch in EVENTS for r in batch], "counts", L
    )
    assert first and rest
    assert _by_key(_decode(first + rest, L)) == _by_key(uninterrupted)


def test_run_topology_stream_refuses_static_inputs(spark: Any) -> None:
    df = spark.createDataFrame([(b"k", b"v", 1)], "key binary, value binary, timestamp long")
    with pytest.raises(ConfigException, match="static DataFrames"):
        run_topology_stream(spark, _count(), {"events": df})


def test_run_topology_stream_refuses_global_tables(spark: Any, tmp_path: Path) -> None:
    builder = StreamsBuilder()
    table = builder.global_table("users", Consumed.with_(S, S))
    builder.stream("events", Consumed.with_(S, S)).join(table, lambda k, _v: k, lambda v, u: v + u).to("out")
    _write_micro_batches(tmp_path / "events", EVENTS[:1])
    stream = _stream(spark, tmp_path / "events")
    with pytest.raises(TopologyException, match="global stores"):
        run_topology_stream(spark, builder.build(), {"events": stream, "users": stream})


def test_wall_clock_punctuation_fires_on_spark_timers_for_an_idle_task(spark: Any, tmp_path: Path) -> None:
    # One micro-batch of records (all keys in one task: partitions=1), then no input: only the
    # Spark processing-time timer the task registers for its next punctuation can run it again.
    _write_micro_batches(tmp_path / "events", [[("a", "x", 10), ("b", "x", 20), ("a", "x", 30)]])
    outputs = run_topology_stream(
        spark,
        _ticking_count(),
        {"events": _stream(spark, tmp_path / "events")},
        CONFIG,
        partitions=1,
        wall_clock_punctuation=True,
    )
    batches: dict[int, list[tuple[str, int, int]]] = {}
    input_done_ms: list[int] = []

    def collect(df: Any, batch_id: int) -> None:
        batches[batch_id] = [
            (S.deserialize("t", r.key), L.deserialize("t", r.value), r.timestamp) for r in df.collect()
        ]
        if batch_id == 0:
            input_done_ms.append(int(time.time() * 1000))

    query = (
        outputs["ticks"]
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        # A bound, not a wait: the first micro-batch (query planning, state store set-up) costs
        # Spark most of the run; later ones take a second or two.
        deadline = time.monotonic() + QUERY_TIMEOUT_S
        idle_ticks: list[tuple[str, int, int]] = []
        while time.monotonic() < deadline and query.exception() is None:
            idle_ticks = [row for batch_id in sorted(batches) if batch_id > 0 for row in batches[batch_id]]
            if len({ts for _k, _v, ts in idle_ticks}) >= 2:
                break
            query.awaitTermination(0.2)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    # Batch 0 read the only input file; later micro-batches had no records, so their output came
    # from timers: at least two punctuations, after the input, each with the count of all records.
    assert len({ts for _k, _v, ts in idle_ticks}) >= 2, f"punctuation output per micro-batch: {batches}"
    assert all(key == "tick" and count == 3 for key, count, _ts in idle_ticks), idle_ticks
    assert min(ts for _k, _v, ts in idle_ticks) >= input_done_ms[0]


def test_positioned_rows_get_their_keys_partition_and_their_position_in_the_micro_batch(spark: Any) -> None:
    # The one Arrow pass before a stateful stage: task = the key's Kafka partition (0 for a null
    # key), and offsets numbering each Spark partition's rows in order, its id in the high bits.
    from kstreams._native.record_batch import default_partition
    from kstreams.spark.partition_task import OFFSET_SEQUENCE_BITS
    from kstreams.spark.streaming import _positioned

    keys = [b"a", None, "zoë".encode(), b"", b"a", b"key-5"]
    rows = [("events", k, b"v", 10 + i, 0, 0) for i, k in enumerate(keys)]
    df = spark.createDataFrame(
        rows, "topic string, key binary, value binary, timestamp long, partition int, offset long"
    ).coalesce(1)
    positioned = _positioned(df, True, 3).collect()
    assert [r.key for r in positioned] == keys
    assert [r.task for r in positioned] == [0 if k is None else default_partition(k, 3) for k in keys]
    base = positioned[0].offset
    assert base % (1 << OFFSET_SEQUENCE_BITS) == 0
    assert [r.offset - base for r in positioned] == list(range(len(keys)))
    assert _positioned(df, False, None) is df
    unnumbered = _positioned(df, False, 3).collect()
    assert [(r.task, r.offset) for r in unnumbered] == [(r.task, 0) for r in positioned]


def _last_update_per_key_of_each_micro_batch(
    topology: Topology, batches: Sequence[Sequence[Record]]
) -> list[set[tuple[str, Any, int]]]:
    """The streaming runtime's output, micro-batch by micro-batch, as the record cache leaves it
    when it holds a micro-batch's keys: the last update of each key the micro-batch changed."""
    lasts: list[set[tuple[str, Any, int]]] = []
    with TopologyTestDriver(topology, CONFIG) as driver:
        events = driver.create_input_topic("events", S, S)
        counts = driver.create_output_topic("counts", S, L)
        for batch in batches:
            for key, value, ts in batch:
                events.pipe_input(key, value, ts)
            last = {r.key: (r.key, r.value, r.timestamp) for r in counts.read_records_to_list()}
            lasts.append(set(last.values()))
    return lasts


def test_a_lowered_count_gives_each_keys_count_once_per_micro_batch_and_resumes_from_its_checkpoint(
    spark: Any, tmp_path: Path
) -> None:
    # Records out of timestamp order (a count keeps Kafka's largest-timestamp rule regardless);
    # the query stops after two micro-batches and resumes from its checkpoint, where Spark's own
    # state store keeps the counts.
    assert "Spark SQL: groupBy(key).agg(count, max(timestamp))" in explain_topology(
        _count(), ["events"], CONFIG, streaming=True
    )
    _write_micro_batches(tmp_path / "events", EVENTS[:2])
    run = {"lower_to_sql": True, "output_mode": "update"}
    first = _run_micro_batches(
        spark, _count(), {"events": tmp_path / "events"}, "counts", tmp_path / "cp", **run
    )
    _write_micro_batches(tmp_path / "events", EVENTS[2:], first=2)
    rest = _run_micro_batches(
        spark, _count(), {"events": tmp_path / "events"}, "counts", tmp_path / "cp", **run
    )
    got = [set(_decode(rows, L)) for rows in first + rest]
    assert got == _last_update_per_key_of_each_micro_batch(_count(), EVENTS)
    assert got[3] == {("a", 7, 300), ("b", 5, 330), ("c", 3, 250)}


def test_a_windowed_count_stays_on_tasks_in_a_streaming_query(spark: Any, tmp_path: Path) -> None:
    # Its windows close on the tasks' stream time, which drops the late record of EVENTS' last
    # micro-batch; a Spark streaming aggregation would count it.
    explained = explain_topology(_tumbling_count(), ["events"], CONFIG, streaming=True)
    assert "StreamTasks" in explained and "windows close on the tasks' stream time" in explained, explained
    assert "Spark SQL" in explain_topology(_tumbling_count(), ["events"], CONFIG)  # a batch run lowers it
    _write_micro_batches(tmp_path / "events", TWO_BATCHES)
    batches = _run_micro_batches(
        spark,
        _tumbling_count(),
        {"events": tmp_path / "events"},
        "counts",
        tmp_path / "cp",
        lower_to_sql=True,
    )
    with TopologyTestDriver(_tumbling_count(), CONFIG) as driver:
        events = driver.create_input_topic("events", S, S)
        for key, value, ts in (record for batch in EVENTS for record in batch):
            events.pipe_input(key, value, ts)
        out = driver.create_output_topic("counts", WINDOWED_S, L)
        expected = [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
    rows = [row for batch in batches for row in batch]
    decoded = [(WINDOWED_S.deserialize("counts", k), L.deserialize("counts", v), ts) for k, v, ts in rows]
    assert _by_key(decoded) == _by_key(expected)
