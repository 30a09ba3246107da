"""Enrichment join: orders (a stream) joined with customers (a table) into enriched orders.

``customers`` is a compacted topic read as a table (key: the customer id, value: JSON like
{"name": "Ann", "tier": "gold"}); each order on ``orders`` (key: the customer id, value: JSON like
{"order": "o1", "amount": 30}) is joined with the customer's row as it is at the order's
timestamp, and written to ``enriched-orders``. A left join keeps orders whose customer is not
known (yet): they go out with ``"name": null``. Both topics are keyed by customer id and have the
same number of partitions (co-partitioned), so the join needs no repartition.

    python examples/enrichment_join.py                                    # the embedded cluster
    python examples/enrichment_join.py --bootstrap-servers 127.0.0.1:9092 # a Kafka cluster

A task processes the records of its partitions in timestamp order, so an order sees the table as
it was at the order's time: a customer update written after an order does not change that order.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from kstreams import Consumed, KafkaStreams, Produced, Serdes, StreamsBuilder, Topology
from kstreams.cluster import EmbeddedCluster, KafkaCluster

CUSTOMERS_TOPIC = "customers"
ORDERS_TOPIC = "orders"
OUTPUT_TOPIC = "enriched-orders"
PARTITIONS = 2

# (timestamp, customer id, row); the rows of a table topic.
CUSTOMERS = [
    (1_000, "c1", {"name": "Ann", "tier": "gold"}),
    (1_000, "c2", {"name": "Bob", "tier": "silver"}),
    (5_000, "c2", {"name": "Bob", "tier": "gold"}),  # Bob moves up a tier at t=5s
]
# (timestamp, customer id, order)
ORDERS = [
    (2_000, "c1", {"order": "o1", "amount": 30}),
    (3_000, "c2", {"order": "o2", "amount": 12}),
    (4_000, "c3", {"order": "o3", "amount": 7}),  # no such customer
    (6_000, "c2", {"order": "o4", "amount": 50}),
]


def enrich(order: dict[str, Any], customer: dict[str, Any] | None) -> dict[str, Any]:
    """The value joiner: called with None for the customer when the table has no row (left join)."""
    return {**order, "name": customer and customer["name"], "tier": customer and customer["tier"]}


def build_topology() -> Topology:
    builder = StreamsBuilder()
    customers = builder.table(CUSTOMERS_TOPIC, Consumed.with_(Serdes.string(), Serdes.json()))
    (
        builder.stream(ORDERS_TOPIC, Consumed.with_(Serdes.string(), Serdes.json()))
        .left_join(customers, enrich)
        .to(OUTPUT_TOPIC, Produced.with_(Serdes.string(), Serdes.json()))
    )
    return builder.build()


def enriched(cluster: EmbeddedCluster | KafkaCluster) -> dict[str, dict[str, Any]]:
    """The enriched orders written so far, by order id."""
    values = (json.loads(r.value) for r in cluster.read(OUTPUT_TOPIC))
    return {v["order"]: v for v in values}


def wait_for(condition: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", help="a Kafka cluster (default: the embedded cluster)")
    args = parser.parse_args(argv)

    cluster = KafkaCluster(args.bootstrap_servers) if args.bootstrap_servers else EmbeddedCluster()
    existing = cluster.topics()
    for topic in (CUSTOMERS_TOPIC, ORDERS_TOPIC, OUTPUT_TOPIC):
        if topic not in existing:
            config = {"cleanup.policy": "compact"} if topic == CUSTOMERS_TOPIC else None
            cluster.create_topic(topic, partitions=PARTITIONS, config=config)
    for timestamp, customer, row in CUSTOMERS:
        cluster.produce(CUSTOMERS_TOPIC, customer.encode(), json.dumps(row).encode(), timestamp)
    for timestamp, customer, order in ORDERS:
        cluster.produce(ORDERS_TOPIC, customer.encode(), json.dumps(order).encode(), timestamp)
    expected = {
        "o1": enrich(ORDERS[0][2], CUSTOMERS[0][2]),
        "o2": enrich(ORDERS[1][2], CUSTOMERS[1][2]),  # Bob still silver at t=3s
        "o3": enrich(ORDERS[2][2], None),
        "o4": enrich(ORDERS[3][2], CUSTOMERS[2][2]),  # gold from t=5s
    }

    with tempfile.TemporaryDirectory(prefix="enrichment-") as state_dir:
        config = {
            "application.id": "enrichment-example",
            "state.dir": state_dir,
            # Wait up to 0.5 s for records on an empty input partition before processing the other,
            # so that orders and customer updates are taken in timestamp order across the two topics.
            "max.task.idle.ms": 500,
        }
        streams = KafkaStreams(build_topology(), config, cluster=cluster)
        streams.start()
        try:
            done = wait_for(lambda: enriched(cluster) == expected)
        finally:
            streams.close()

    for order in enriched(cluster).values():
        print(order)
    if not done:
        print(f"MISMATCH: expected {list(expected.values())}", file=sys.stderr)
        return 1
    print(f"OK: {len(expected)} orders enriched")
    return 0


if __name__ == "__main__":
    sys.exit(main())
