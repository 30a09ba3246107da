"""Topic -> streaming topology on Spark -> topic, in one command.

Counts page views per user continuously: Spark Structured Streaming reads the ``page-views``
topic through the ``kstreams`` data source, runs the kstreams topology with
``run_topology_stream`` (the per-user counts live in Spark's state store and its checkpoint), and
writes every updated count to ``views-per-user`` through the ``kstreams`` sink (transactional,
exactly once per micro-batch for read_committed readers).

    python examples/spark_streaming.py                      # a Kafka broker on localhost:9092
    python examples/spark_streaming.py --bootstrap-servers 127.0.0.1:9092 --follow

It needs a Kafka cluster: yours, or, from a clone of kstreams, the tests' single-node Apache
Kafka (``python tests/support/kafka_broker.py`` starts one and prints its address). It produces
``--records`` made-up
page views, processes them in micro-batches (``--batch-records`` each), restarts the query once
from its checkpoint half-way (as a crash and restart would), and checks that the last count of
every user in the output topic equals the number of views produced for that user.
``--follow`` keeps the query running on new records until Ctrl-C instead.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kstreams import Consumed, Grouped, Produced, Serdes, StreamsBuilder, Topology

logger = logging.getLogger("spark_streaming")

INPUT_TOPIC = "page-views"
OUTPUT_TOPIC = "views-per-user"
PARTITIONS = 2
BROKER_START_TIMEOUT_S = 60.0


def page_views_per_user() -> Topology:
    """Page-view events (JSON) -> the running count of views per user."""
    builder = StreamsBuilder()
    (
        builder.stream(INPUT_TOPIC, Consumed.with_(Serdes.string(), Serdes.json()))
        .filter(lambda _key, view: isinstance(view, dict) and view.get("user") is not None)
        .group_by(lambda _key, view: str(view["user"]), Grouped.with_(Serdes.string(), Serdes.json()))
        .count()
        .to_stream()
        .to(OUTPUT_TOPIC, Produced.with_(Serdes.string(), Serdes.long()))
    )
    return builder.build()


def produce_page_views(cluster: Any, records: int, seed: int) -> Counter[str]:
    """Made-up page views; returns how many each user made."""
    rng = random.Random(seed)
    pages = ["/", "/docs", "/pricing", "/blog", "/signup"]
    views: Counter[str] = Counter()
    start = int(time.time() * 1000) - records
    for i in range(records):
        user = f"user-{rng.randint(1, 12)}"
        views[user] += 1
        value = json.dumps({"user": user, "page": rng.choice(pages)}).encode()
        cluster.produce(INPUT_TOPIC, f"session-{i % 17}".encode(), value, timestamp=start + i)
    return views


def start_query(spark: Any, bootstrap: str, checkpoint: Path, batch_records: int, follow: bool) -> Any:
    """The streaming query: topic -> run_topology_stream -> topic, checkpointed in ``checkpoint``."""
    from kstreams.spark import run_topology_stream

    views = (
        spark.readStream.format("kstreams")
        .option("bootstrap.servers", bootstrap)
        .option("topic", INPUT_TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", batch_records)
        .load()
    )
    outputs = run_topology_stream(
        spark, page_views_per_user(), {INPUT_TOPIC: views}, {"application.id": "views-per-user"}, partitions=4
    )
    writer = (
        outputs[OUTPUT_TOPIC]
        .writeStream.format("kstreams")
        .option("bootstrap.servers", bootstrap)
        .option("topic", OUTPUT_TOPIC)
        .option("checkpointLocation", str(checkpoint))
    )
    writer = writer.trigger(processingTime="2 seconds") if follow else writer.trigger(availableNow=True)
    return writer.start()


def latest_counts(cluster: Any) -> dict[str, int]:
    """The last count written per user (committed records only)."""
    long_serde = Serdes.long()
    counts: dict[str, int] = {}
    for record in cluster.read(OUTPUT_TOPIC):
        counts[record.key.decode()] = long_serde.deserialize(OUTPUT_TOPIC, record.value)
    return counts


def run(bootstrap: str, args: argparse.Namespace) -> int:
    from kstreams.cluster import KafkaCluster
    from kstreams.spark import local_session, register_data_source

    cluster = KafkaCluster(bootstrap)
    spark = local_session("kstreams-spark-streaming", cores=2, shuffle_partitions=2)
    spark.sparkContext.setLogLevel("ERROR")
    checkpoint = Path(tempfile.mkdtemp(prefix="kstreams-example-checkpoint-"))
    try:
        register_data_source(spark)
        for topic in (INPUT_TOPIC, OUTPUT_TOPIC):
            if topic not in cluster.topics():
                cluster.create_topic(topic, PARTITIONS)
        half = args.records // 2
        views = produce_page_views(cluster, half, seed=1)
        if args.follow:
            query = start_query(spark, bootstrap, checkpoint, args.batch_records, follow=True)
            logger.info("Counting page views from %s into %s; Ctrl-C to stop", INPUT_TOPIC, OUTPUT_TOPIC)
            with contextlib.suppress(KeyboardInterrupt):
                query.awaitTermination()
            query.stop()
            return 0
        started = time.monotonic()
        # The first half, then a stop and a restart from the checkpoint with the second half.
        for part in (1, 2):
            query = start_query(spark, bootstrap, checkpoint, args.batch_records, follow=False)
            query.awaitTermination()
            if query.exception() is not None:
                raise RuntimeError(f"the streaming query failed: {query.exception()}")
            logger.info("Run %d of the query processed %d micro-batches", part, len(query.recentProgress))
            if part == 1:
                views += produce_page_views(cluster, args.records - half, seed=2)
        elapsed = time.monotonic() - started
        counts = latest_counts(cluster)
        for user in sorted(counts, key=lambda u: int(u.split("-")[1])):
            print(f"{user:>8}: {counts[user]:>5} views")
        if counts != dict(views):
            print(f"MISMATCH: output counts {counts} != produced views {dict(views)}")
            return 1
        print(f"OK: {args.records} page views counted per user on Spark in {elapsed:.1f} s, across a restart")
        return 0
    finally:
        spark.stop()
        cluster.close()
        shutil.rmtree(checkpoint, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Count page views per user: topic -> Spark streaming -> topic."
    )
    parser.add_argument(
        "--bootstrap-servers", default="localhost:9092", help="the Kafka cluster (default: localhost:9092)"
    )
    parser.add_argument("--records", type=int, default=1_000, help="page views to produce")
    parser.add_argument("--batch-records", type=int, default=250, help="records per micro-batch at most")
    parser.add_argument("--follow", action="store_true", help="keep counting new records until Ctrl-C")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    return run(args.bootstrap_servers, args)


if __name__ == "__main__":
    sys.exit(main())
