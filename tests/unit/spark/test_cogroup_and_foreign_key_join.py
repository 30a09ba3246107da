"""Cogroup and foreign-key joins on Spark: a cogroup gives the test driver's final aggregates; a
foreign-key join, whose subtopologies answer each other through two topics, is refused by name."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams import Serdes
from kstreams.errors import TopologyException
from kstreams.spark import run_topology
from kstreams.testing import TopologyTestDriver
from kstreams.topology import Consumed, Materialized, Produced, StreamsBuilder, Topology

pytestmark = pytest.mark.spark

S = Serdes.string()
L = Serdes.long()


def _cogroup() -> Topology:
    builder = StreamsBuilder()
    clicks = builder.stream("clicks", Consumed.with_(S, S)).group_by_key()
    purchases = builder.stream("purchases", Consumed.with_(S, S)).group_by_key()
    (
        clicks.cogroup(lambda customer, page, score: score + 1)
        .cogroup(purchases, lambda customer, amount, score: score + 10 * int(amount))
        .aggregate(lambda: 0, Materialized.with_(S, L))
        .to_stream()
        .to("scores", Produced.with_(S, L))
    )
    return builder.build()


def test_cogroup_on_spark_equals_the_test_driver(spark: Any) -> None:
    clicks = [(f"c{i % 7}".encode(), f"page{i}".encode(), 1_000 + i) for i in range(60)]
    purchases = [(f"c{i % 5}".encode(), str(i % 4).encode(), 2_000 + i) for i in range(40)]
    driver = TopologyTestDriver(_cogroup(), {"application.id": "cogroup-spark"})
    try:
        for topic, records in (("clicks", clicks), ("purchases", purchases)):
            source = driver.create_input_topic(topic, S, S)
            for key, value, timestamp in records:
                source.pipe_input(key.decode(), value.decode(), timestamp)
        expected = driver.create_output_topic("scores", S, L).read_key_values_to_map()
    finally:
        driver.close()

    schema = "key binary, value binary, timestamp long"
    inputs = {
        "clicks": spark.createDataFrame(clicks, schema).repartition(2),
        "purchases": spark.createDataFrame(purchases, schema).repartition(2),
    }
    outputs = run_topology(spark, _cogroup(), inputs, {"application.id": "cogroup-spark"})
    rows = sorted(outputs["scores"].collect(), key=lambda r: r.timestamp)
    on_spark = {S.deserialize("scores", r.key): L.deserialize("scores", r.value) for r in rows}
    assert on_spark == expected


def test_run_topology_refuses_a_foreign_key_join_by_name(spark: Any) -> None:
    builder = StreamsBuilder()
    orders = builder.table("orders", Consumed.with_(S, S))
    products = builder.table("products", Consumed.with_(S, S))
    orders.join(products, lambda order: order, lambda order, product: product).to_stream().to("out")
    empty = spark.createDataFrame([], "key binary, value binary, timestamp long")
    with pytest.raises(TopologyException, match="foreign-key table join"):
        run_topology(spark, builder.build(), {"orders": empty, "products": empty}, {"application.id": "fk"})
