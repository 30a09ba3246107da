"""process_values with a store runs on Spark as on the test driver: the same counts per key."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams import Produced, Serdes, StreamsBuilder, Topology
from kstreams.processor import FixedKeyProcessor, FixedKeyProcessorContext, FixedKeyRecord
from kstreams.spark import run_topology
from kstreams.state import Stores
from kstreams.testing import TopologyTestDriver

pytestmark = pytest.mark.spark

S = Serdes.string()
L = Serdes.long()


class RunningCount(FixedKeyProcessor[str, str, int]):
    def init(self, context: FixedKeyProcessorContext[str, int]) -> None:
        self.context = context
        self.store = context.get_state_store("counts")

    def process(self, record: FixedKeyRecord[str, str]) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(record.with_value(count))


def topology() -> Topology:
    builder = StreamsBuilder()
    builder.add_state_store(Stores.key_value_store_builder(Stores.in_memory_key_value_store("counts"), S, L))
    builder.stream("events").process_values(RunningCount, "counts").to("counts-out", Produced.with_(S, L))
    return builder.build()


def test_process_values_on_spark_equals_the_test_driver(spark: Any) -> None:
    records = [(f"k{i % 3}", f"v{i}", 1_000 + i) for i in range(30)]
    config = {"application.id": "pv", "default.key.serde": "string", "default.value.serde": "string"}
    with TopologyTestDriver(topology(), config) as driver:
        source = driver.create_input_topic("events", S, S)
        for key, value, ts in records:
            source.pipe_input(key, value, ts)
        expected = sorted(
            (r.key, r.value, r.timestamp)
            for r in driver.create_output_topic("counts-out", S, L).read_records_to_list()
        )
    df = spark.createDataFrame(
        [(k.encode(), v.encode(), ts) for k, v, ts in records], "key binary, value binary, timestamp long"
    ).repartition(2)
    outputs = run_topology(spark, topology(), {"events": df}, config)
    got = sorted(
        (S.deserialize("counts-out", r.key), L.deserialize("counts-out", r.value), r.timestamp)
        for r in outputs["counts-out"].collect()
    )
    assert got == expected
