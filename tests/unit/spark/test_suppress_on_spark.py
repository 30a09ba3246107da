"""run_topology with KTable.suppress: the final results per window are the test driver's (one
task per stage, so stream time advances over the same records in the same order)."""

from __future__ import annotations

import random
import sys
from typing import Any

import pytest
from pyspark import cloudpickle

from kstreams import Consumed, Produced, Serdes, StreamsBuilder, TimeWindows, Topology
from kstreams.spark import run_topology
from kstreams.testing import TopologyTestDriver
from kstreams.topology import BufferConfig, Suppressed

pytestmark = pytest.mark.spark

cloudpickle.register_pickle_by_value(sys.modules[__name__])

STRING = Serdes.string()
LONG = Serdes.long()
BYTES = Serdes.bytes()


def _final_counts() -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream("clicks", Consumed.with_(STRING, STRING))
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(10_000, 2_000))
        .count()
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .map(lambda window, count: (f"{window.key}@{window.start}", count))
        .to("final-counts", Produced.with_(STRING, LONG))
    )
    return builder.build()


def test_suppressed_final_counts_equal_the_test_drivers(spark: Any) -> None:
    rng = random.Random(3)
    records = sorted(
        (
            (f"user-{rng.randint(0, 4)}".encode(), b"click", 1_000 + i * 400 + rng.randint(0, 300))
            for i in range(200)
        ),
        key=lambda r: r[2],
    )
    with TopologyTestDriver(_final_counts(), {"application.id": "final"}) as driver:
        topic = driver.create_input_topic("clicks", BYTES, BYTES)
        for key, value, timestamp in records:
            topic.pipe_input(key, value, timestamp)
        output = driver.create_output_topic("final-counts", BYTES, BYTES)
        expected = [(r.key, r.value, r.timestamp) for r in output.read_records_to_list()]
    df = spark.createDataFrame(records, "key binary, value binary, timestamp long")

    outputs = run_topology(spark, _final_counts(), {"clicks": df}, {"application.id": "final"}, partitions=1)

    actual = [(r.key, r.value, r.timestamp) for r in outputs["final-counts"].collect()]
    assert sorted(actual) == sorted(expected)
    assert len(set(actual)) == len(actual) > 20  # each window's count exactly once
