"""Kafka's headers for aggregations and tables: an update carries the headers of the record that
made it; an update a record cache collapses carries those of the record that last wrote the entry.
Checked on the test driver (every update of every kind, with the cache on and off) and on a task
with a cache that holds several updates, where compiled batches and records with headers mix."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pytest

from kstreams._native.record_batch import RecordBatch
from kstreams._native.record_cache import RecordCache
from kstreams._native.record_collector import RecordCollector
from kstreams.cluster.port import TopicPartition
from kstreams.config import StreamsConfig
from kstreams.processing.task import StreamTask
from kstreams.processor import TaskId
from kstreams.serdes import Serdes
from kstreams.testing import TestRecord
from kstreams.topology import (
    Consumed,
    Grouped,
    KeyValue,
    Materialized,
    Produced,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
)

S = Serdes.string()
L = Serdes.long()
H1 = [("trace", b"1")]
H2 = [("trace", b"2"), ("user", b"ann")]
MINUTE = timedelta(minutes=1)


def _windowed(kind: str):  # type: ignore[no-untyped-def]
    return {
        "time-windowed": TimeWindows.of_size_with_no_grace(MINUTE),
        "session": SessionWindows.of_inactivity_gap_with_no_grace(MINUTE),
        "sliding": SlidingWindows.of_time_difference_with_no_grace(MINUTE),
    }[kind]


def _topology(kind: str) -> tuple[Any, Any]:
    """A topology writing ``kind``'s updates of key "a" to "out" (windows as their key), and the
    serde of its output values."""
    builder = StreamsBuilder()
    if kind == "table":
        table = builder.table("in", Consumed.with_(S, S), Materialized.as_("rows"))
        table.to_stream().to("out", Produced.with_(S, S))
        return builder.build(), S
    if kind == "table-aggregation":
        table = builder.table("in", Consumed.with_(S, S))
        regrouped = table.group_by(lambda k, v: KeyValue("all", v), Grouped.with_(S, S))
        regrouped.aggregate(
            lambda: "", lambda k, v, agg: agg + v, lambda k, v, agg: agg.replace(v, "")
        ).to_stream().to("out", Produced.with_(S, S))
        return builder.build(), S
    grouped = builder.stream("in", Consumed.with_(S, S)).group_by_key()
    if kind == "count":
        grouped.count().to_stream().to("out", Produced.with_(S, L))
        return builder.build(), L
    if kind == "reduce":
        grouped.reduce(lambda a, b: a + b).to_stream().to("out", Produced.with_(S, S))
        return builder.build(), S
    counts = grouped.windowed_by(_windowed(kind)).count().to_stream()
    # A merged session's tombstone has no value to write.
    counts = counts.filter(lambda k, v: v is not None).map(lambda k, v: KeyValue(k.key, v))
    counts.to("out", Produced.with_(S, L))
    return builder.build(), L


# Headers of each update, in order, for the input below: each record's updates carry its headers.
EXPECTED = {
    "count": [H1, H2, None],
    "reduce": [H1, H2, None],
    "time-windowed": [H1, H2, None],
    "session": [H1, H2, None],
    # The second record updates its left window and the first record's right window; the third
    # updates three windows.
    "sliding": [H1, H2, H2, None, None, None],
    "table": [H1, H2, None],
    # A changed row that stays in its group subtracts its old value and adds its new one in one
    # update.
    "table-aggregation": [H1, H2, None],
}


@pytest.mark.parametrize("cache_bytes", [0, 10 << 20], ids=["cache-off", "cache-on"])
@pytest.mark.parametrize("kind", list(EXPECTED))
def test_every_update_carries_the_headers_of_the_record_that_made_it(
    drive: Any, kind: str, cache_bytes: int
) -> None:
    topology, value_serde = _topology(kind)
    driver = drive(topology, statestore_cache_max_bytes=cache_bytes)
    source = driver.create_input_topic("in", S, S)
    source.pipe_input(TestRecord("a", "x", headers=H1, timestamp=1_000))
    source.pipe_input(TestRecord("a", "y", headers=H2, timestamp=2_000))
    source.pipe_input(TestRecord("a", "z", timestamp=3_000))

    outputs = driver.create_output_topic("out", S, value_serde).read_records_to_list()

    if kind == "session" and not cache_bytes:
        # Kafka's session aggregation forwards records it makes anew: without a cache, none of its
        # updates carries the input's headers (through the cache, each entry's last writer's do).
        assert [r.headers for r in outputs] == [None, None, None]
        return
    assert [r.headers for r in outputs] == EXPECTED[kind]


IN = TopicPartition("in", 0)


def _task(tmp_path: Any) -> tuple[StreamTask, RecordCollector]:
    """A task of ``count`` over "in" with a 1 MB cache that only a flush empties."""
    topology, _ = _topology("count")
    config = StreamsConfig({"application.id": "app", "state.dir": str(tmp_path)})
    plan = topology.build("app", config)
    collector = RecordCollector()
    sub = plan.subtopology_for_topic("in")
    task = StreamTask(
        TaskId(sub.id, 0), sub, [IN], config, collector, lambda topic: 1, os.path.join(str(tmp_path), "app")
    )
    task.record_cache = RecordCache(1 << 20)
    task.initialize()
    task.initialize_processors()
    return task, collector


def _batch(*records: tuple[str, int, Any], first_offset: int) -> RecordBatch:
    return RecordBatch.from_columns(
        [key.encode() for key, _, _ in records],
        [b"v"] * len(records),
        [ts for _, ts, _ in records],
        0,
        list(range(first_offset, first_offset + len(records))),
        [headers for _, _, headers in records] if any(h for _, _, h in records) else None,
    )


def _flushed(task: StreamTask, collector: RecordCollector) -> list[tuple[str, int, Any]]:
    task.flush()
    return [
        (key.decode(), L.deserializer().deserialize("out", value), headers)
        for topic, _, records in collector.drain()
        if topic == "out"
        for key, value, _, _, _, headers in records
    ]


def test_a_cached_update_carries_the_headers_of_the_entry_s_last_write(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    task, collector = _task(tmp_path)
    compiled: list[int] = []
    run_compiled = task._process_compiled
    monkeypatch.setattr(
        task, "_process_compiled", lambda *args: compiled.append(len(args[2])) or run_compiled(*args)
    )

    # Two updates of "a" collapse into one: the second record wrote it last.
    task.process(IN, _batch(("a", 1, H1), ("a", 2, H2), first_offset=0))
    assert _flushed(task, collector) == [("a", 2, H2)]
    assert compiled == [2]  # the count kernel took the batch, headers and all

    # "b" written by a record with headers, then, before the flush, by one without: the update the
    # flush forwards carries none, as its last write had none.
    task.process(IN, _batch(("b", 3, H1), first_offset=2))
    task.process(IN, _batch(("b", 4, None), ("c", 5, None), first_offset=3))
    assert sorted(_flushed(task, collector)) == [("b", 2, None), ("c", 1, None)]
    assert compiled == [2, 1, 2]

    task.process(IN, _batch(("c", 6, None), first_offset=5))
    assert compiled == [2, 1, 2, 1]
    assert _flushed(task, collector) == [("c", 2, None)]
    task.close(clean=True)
