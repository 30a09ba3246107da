"""Aggregations that emit on window close run on Spark as on the test driver: the same final
results, with the emit-position store in memory and not change-logged like every Spark store."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams import Produced, Serdes, StreamsBuilder, Topology
from kstreams.spark import run_topology
from kstreams.testing import TopologyTestDriver
from kstreams.topology import EmitStrategy, SlidingWindows, TimeWindows

pytestmark = pytest.mark.spark

S = Serdes.string()
L = Serdes.long()


def _final_counts(windows: Any) -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream("events")
        .group_by_key()
        .windowed_by(windows)
        .emit_strategy(EmitStrategy.on_window_close())
        .count()
        .to_stream()
        .map(lambda w, n: (f"{w.key}@{w.start}-{w.end}", n))
        .to("final", Produced.with_(S, L))
    )
    return builder.build()


@pytest.mark.parametrize(
    "windows",
    [TimeWindows.of_size_and_grace(100, 10), SlidingWindows.of_time_difference_and_grace(50, 10)],
    ids=["time", "sliding"],
)
def test_emit_on_window_close_on_spark_equals_the_test_driver(spark: Any, windows: Any) -> None:
    records = [(f"k{i % 3}", "v", 1_000 + 37 * i) for i in range(30)]
    config = {"application.id": "eowc", "default.key.serde": "string", "default.value.serde": "string"}
    with TopologyTestDriver(_final_counts(windows), config) as driver:
        source = driver.create_input_topic("events", S, S)
        for key, value, ts in records:
            source.pipe_input(key, value, ts)
        expected = [
            (r.key, r.value, r.timestamp)
            for r in driver.create_output_topic("final", S, L).read_records_to_list()
        ]
    assert expected  # windows closed while the records went through
    df = spark.createDataFrame(
        [(k.encode(), v.encode(), ts) for k, v, ts in records], "key binary, value binary, timestamp long"
    )
    # One task: stream time, and so which windows have closed, is per task.
    outputs = run_topology(spark, _final_counts(windows), {"events": df}, config, partitions=1)
    got = sorted(
        (S.deserialize("final", r.key), L.deserialize("final", r.value), r.timestamp)
        for r in outputs["final"].collect()
    )
    assert got == sorted(expected)
