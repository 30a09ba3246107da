"""Backfill with Spark: run a kstreams topology over a topic's history, or over a Parquet file.

The same topology that runs as a streaming application runs here over everything at once, and
gives the same final aggregates. Two topologies are built in:

- ``word-count``: values are lines of text; counts every word (key: the word, value: the count).
- ``page-views``: values are JSON like {"user": "u1", "page": "/home"}; counts page views per user.

Input is a topic (read through the ``kstreams`` Spark data source) or a Parquet file with the
columns key, value (binary or string) and timestamp (epoch ms); ``--demo`` makes up input so the
example runs with nothing else. Results go to the console or to a Parquet directory.

    python examples/spark_backfill.py --demo --topology word-count
    python examples/spark_backfill.py --bootstrap-servers 127.0.0.1:9092 --topic page-views \\
        --topology page-views --output page-views-per-user.parquet
    python examples/spark_backfill.py --parquet lines.parquet --topology word-count
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from typing import Any

from kstreams import Consumed, Grouped, Produced, Serdes, StreamsBuilder, Topology

logger = logging.getLogger("spark_backfill")

INPUT_TOPICS = {"word-count": "lines", "page-views": "page-views"}
OUTPUT_TOPICS = {"word-count": "word-counts", "page-views": "views-per-user"}


def word_count() -> Topology:
    """Lines of text -> the running count of every word."""
    builder = StreamsBuilder()
    (
        builder.stream("lines", Consumed.with_(Serdes.string(), Serdes.string()))
        .flat_map_values(lambda line: line.lower().split())
        .group_by(lambda _key, word: word, Grouped.with_(Serdes.string(), Serdes.string()))
        .count()
        .to_stream()
        .to("word-counts", Produced.with_(Serdes.string(), Serdes.long()))
    )
    return builder.build()


def page_views() -> Topology:
    """Page-view events (JSON) -> the running count of views per user."""
    builder = StreamsBuilder()
    (
        builder.stream("page-views", Consumed.with_(Serdes.string(), Serdes.json()))
        .filter(lambda _key, view: isinstance(view, dict) and view.get("user") is not None)
        .group_by(lambda _key, view: str(view["user"]), Grouped.with_(Serdes.string(), Serdes.json()))
        .count()
        .to_stream()
        .to("views-per-user", Produced.with_(Serdes.string(), Serdes.long()))
    )
    return builder.build()


TOPOLOGIES = {"word-count": word_count, "page-views": page_views}


def demo_input(spark: Any, topology: str, records: int) -> Any:
    """Made-up input for ``topology``: a DataFrame of key, value, timestamp."""
    rng = random.Random(42)
    start = int(time.time() * 1000) - records * 1000
    if topology == "word-count":
        words = ["kafka", "streams", "spark", "python", "state", "store", "window", "topic"]
        rows = [
            (None, " ".join(rng.choice(words) for _ in range(rng.randint(3, 9))).encode(), start + i * 1000)
            for i in range(records)
        ]
    else:
        pages = ["/", "/docs", "/pricing", "/blog", "/signup"]
        rows = [
            (
                f"session-{i % 97}".encode(),
                json.dumps({"user": f"user-{rng.randint(1, 25)}", "page": rng.choice(pages)}).encode(),
                start + i * 1000,
            )
            for i in range(records)
        ]
    return spark.createDataFrame(rows, "key binary, value binary, timestamp long")


def read_input(spark: Any, args: argparse.Namespace) -> Any:
    if args.demo:
        return demo_input(spark, args.topology, args.demo_records)
    if args.parquet:
        return spark.read.parquet(args.parquet)
    from kstreams.spark import register_data_source

    register_data_source(spark)
    return (
        spark.read.format("kstreams")
        .option("bootstrap.servers", args.bootstrap_servers)
        .option("topic", args.topic or INPUT_TOPICS[args.topology])
        .option("startingOffsets", "earliest")
        .load()
    )


def final_counts(df: Any) -> Any:
    """The last count written per key, decoded: key as a string, value as a long.

    Counts only grow, so the final count of a key is its largest.
    """
    from pyspark.sql import functions as F

    decoded = df.select(
        F.col("key").cast("string").alias("key"),
        # Serdes.long() writes 8 big-endian bytes.
        F.conv(F.hex("value"), 16, 10).cast("long").alias("count"),
        "timestamp",
    )
    return decoded.groupBy("key").agg(F.max("count").alias("count"), F.max("timestamp").alias("timestamp"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Run a kstreams topology over a topic's history or a Parquet file on Spark (local).",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--bootstrap-servers", help="read the input topic from this Kafka cluster")
    source.add_argument("--parquet", help="read input records (key, value, timestamp) from this Parquet path")
    source.add_argument("--demo", action="store_true", help="make up input records")
    parser.add_argument("--topology", choices=sorted(TOPOLOGIES), default="word-count")
    parser.add_argument("--topic", help="input topic (default: lines or page-views, by topology)")
    parser.add_argument("--output", help="write final counts to this Parquet directory (default: print)")
    parser.add_argument("--demo-records", type=int, default=10_000, help="records --demo makes up")
    parser.add_argument("--cores", type=int, default=2, help="local Spark cores")
    parser.add_argument("--partitions", type=int, default=4, help="Spark partitions of stateful stages")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)

    from kstreams.spark import local_session, run_topology

    spark = local_session("kstreams-backfill", cores=args.cores, shuffle_partitions=args.partitions)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        records = read_input(spark, args)
        started = time.monotonic()
        outputs = run_topology(
            spark,
            TOPOLOGIES[args.topology](),
            {INPUT_TOPICS[args.topology]: records},
            {"application.id": f"backfill-{args.topology}"},
            partitions=args.partitions,
        )
        counts = final_counts(outputs[OUTPUT_TOPICS[args.topology]])
        if args.output:
            counts.write.mode("overwrite").parquet(args.output)
            logger.info("Wrote final counts to %s", args.output)
        else:
            counts.orderBy("count", ascending=False).show(25, truncate=False)
        logger.info("Backfill of %s took %.1f s", args.topology, time.monotonic() - started)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
