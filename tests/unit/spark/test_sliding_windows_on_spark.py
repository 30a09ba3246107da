"""run_topology runs sliding-window aggregations (they need no wall-clock time): the final
aggregate of every window equals the test driver's over the same records."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kstreams import Consumed, Produced, Serdes, StreamsBuilder, Topology
from kstreams.spark import run_topology
from kstreams.testing import TopologyTestDriver
from kstreams.topology import SlidingWindows, WindowedSerdes

pytestmark = pytest.mark.spark

STRING = Serdes.string()
LONG = Serdes.long()
BYTES = Serdes.bytes()


def _sliding_count() -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream("clicks", Consumed.with_(STRING, STRING))
        .group_by_key()
        .windowed_by(SlidingWindows.of_time_difference_and_grace(5_000, 2_000))
        .count()
        .to_stream()
        .to("clicks-per-window", Produced.with_(WindowedSerdes.time_windowed_serde_from(STRING, 5_000), LONG))
    )
    return builder.build()


def test_sliding_window_counts_on_spark_equal_the_test_drivers(spark: Any) -> None:
    rng = random.Random(11)
    records = sorted(
        (
            (f"user-{rng.randint(0, 4)}".encode(), b"click", 20_000 + i * 900 + rng.randint(0, 600))
            for i in range(120)
        ),
        key=lambda record: record[2],
    )
    config = {"application.id": "sliding"}
    with TopologyTestDriver(_sliding_count(), config) as driver:
        topic = driver.create_input_topic("clicks", BYTES, BYTES)
        for key, value, timestamp in records:
            topic.pipe_input(key, value, timestamp)
        output = driver.create_output_topic("clicks-per-window", BYTES, BYTES).read_records_to_list()
    expected = {r.key: (r.value, r.timestamp) for r in output}
    df = spark.createDataFrame(records, "key binary, value binary, timestamp long").repartition(2)

    outputs = run_topology(spark, _sliding_count(), {"clicks": df}, config)

    actual = {r.key: (r.value, r.timestamp) for r in outputs["clicks-per-window"].collect()}
    assert actual == expected
    assert len(actual) > 50  # left and right windows of several users
