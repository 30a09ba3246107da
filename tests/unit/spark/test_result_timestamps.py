"""run_topology gives an aggregation's results Kafka's timestamps, as the test driver does: each
key's final count carries the largest timestamp of its records, even when they arrive out of order."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from pyspark import cloudpickle

from kstreams import Consumed, Produced, Serdes, StreamsBuilder, Topology
from kstreams.spark import run_topology
from kstreams.testing import TopologyTestDriver

pytestmark = pytest.mark.spark

cloudpickle.register_pickle_by_value(sys.modules[__name__])

STRING = Serdes.string()
LONG = Serdes.long()
BYTES = Serdes.bytes()


def _count() -> Topology:
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(STRING, STRING)).group_by_key().count().to_stream().to(
        "out", Produced.with_(STRING, LONG)
    )
    return builder.build()


def test_final_counts_carry_the_largest_timestamp_as_on_the_test_driver(spark: Any) -> None:
    # Out of order within each key: the newest record comes first.
    records = [(f"k{i % 5}".encode(), b"v", 10_000 - i * 37) for i in range(60)]
    config = {"application.id": "timestamps"}
    with TopologyTestDriver(_count(), config) as driver:
        topic = driver.create_input_topic("in", BYTES, BYTES)
        for key, value, timestamp in records:
            topic.pipe_input(key, value, timestamp)
        expected = {
            r.key: (r.value, r.timestamp)
            for r in driver.create_output_topic("out", BYTES, BYTES).read_records_to_list()
        }
    df = spark.createDataFrame(records, "key binary, value binary, timestamp long").repartition(2)

    outputs = run_topology(spark, _count(), {"in": df}, config)

    actual = {r.key: (r.value, r.timestamp) for r in outputs["out"].collect()}
    assert actual == expected
    newest = {key: max(ts for k, _v, ts in records if k == key) for key, _v, _ts in records}
    assert {key: ts for key, (_value, ts) in actual.items()} == newest
    assert {key: LONG.deserialize("out", value) for key, (value, _ts) in actual.items()} == {
        key: 12 for key in newest
    }
