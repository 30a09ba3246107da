"""run_topology with the global-store and pattern-source features: a GlobalKTable cannot run on
Spark (clear TopologyException); a pattern source reads the input DataFrames it matches and
writes what the test driver writes."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest

from kstreams import Consumed, Produced, Serdes, StreamsBuilder
from kstreams.errors import TopologyException
from kstreams.spark import run_topology
from kstreams.testing import TopologyTestDriver

pytestmark = pytest.mark.spark

S = Serdes.string()


def test_global_table_is_refused_by_run_topology(spark: Any) -> None:
    builder = StreamsBuilder()
    table = builder.global_table("customers", Consumed.with_(S, S))
    builder.stream("orders", Consumed.with_(S, S)).join(table, lambda k, v: v, lambda v, c: c).to("out")
    frame = spark.createDataFrame([(b"o", b"c", 1)], "key binary, value binary, timestamp long")
    with pytest.raises(TopologyException, match="global stores or GlobalKTables"):
        run_topology(spark, builder.build(), {"orders": frame, "customers": frame})


def test_pattern_source_gives_the_test_drivers_records(spark: Any) -> None:
    def topology() -> Any:
        builder = StreamsBuilder()
        builder.stream(re.compile("orders-.*"), Consumed.with_(S, S)).map_values(str.upper).to(
            "out", Produced.with_(S, S)
        )
        return builder.build()

    inputs = {
        "orders-eu": [("k1", "croissant", 1), ("k2", "tart", 3)],
        "orders-us": [("k3", "bagel", 2)],
    }
    with TopologyTestDriver(topology()) as driver:
        for topic, records in inputs.items():
            writer = driver.create_input_topic(topic, S, S)
            for key, value, timestamp in records:
                writer.pipe_input(key, value, timestamp)
        expected = [
            (r.key, r.value, r.timestamp)
            for r in driver.create_output_topic("out", S, S).read_records_to_list()
        ]
    frames = {
        topic: spark.createDataFrame(records, "key string, value string, timestamp long")
        for topic, records in inputs.items()
    }
    outputs = run_topology(spark, topology(), frames)
    got = [(r.key.decode(), r.value.decode(), r.timestamp) for r in outputs["out"].collect()]
    assert Counter(got) == Counter(expected)
    assert len(expected) == 3
