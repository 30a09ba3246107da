"""Topic -> streaming topology on Spark -> topic, in one command.

Counts page views per user continuously: Spark Structured Streaming reads the ``page-views``
topic through the ``kstreams`` data source, runs the kstreams topology with
``run_topology_stream`` (the per-user counts live in Spark's state store and its checkpoint), and
writes every updated count to ``views-per-user`` through the ``kstreams`` sink (transactional,
exactly once per micro-batch for read_committed readers).

    python examples/spark_streaming.py                      # starts a local noida-db broker itself
    python examples/spark_streaming.py --bootstrap-servers 127.0.0.1:9092 --follow

Without ``--bootstrap-servers`` the example starts the noida-db broker from its Python package on
a free port (pip install noida-db) and stops it at the end. It produces ``--records`` made-up
page views, processes them in micro-batches (``--batch-records`` each), restarts the query once
from its checkpoint half-way (as a crash and restart would), and checks that the last count of
every user in the output topic equals the number of views produced for that user.
``--follow`` keeps the query running on new records until Ctrl-C instead.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.resources
import json
import logging
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
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


@contextlib.contextmanager
def local_noida_broker() -> Iterator[str]:
    """A noida-db broker on a free loopback port, for the example's lifetime: its package's binary
    runs as our child and is stopped by its PID (the console script would leave it running)."""
    try:
        binary = Path(str(importlib.resources.files("noida_db").joinpath("noida-db")))
    except ModuleNotFoundError:
        raise SystemExit(
            "noida-db is not installed: pip install noida-db, or pass --bootstrap-servers"
        ) from None
    if not os.access(binary, os.X_OK):
        binary.chmod(0o755)  # wheels do not always keep the executable bit
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    workdir = Path(tempfile.mkdtemp(prefix="kstreams-example-noida-"))
    (workdir / "data").mkdir()
    log = open(workdir / "noida-db.log", "wb")
    argv = [
        str(binary),
        "start",
        "--data-dir",
        str(workdir / "data"),
        "--only",
        "kafka",
        "--kafka-port",
        str(port),
    ]
    process = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir
    )
    bootstrap = f"127.0.0.1:{port}"
    try:
        _wait_for_broker(bootstrap, process)
        logger.info("noida-db is up at %s (pid %d)", bootstrap, process.pid)
        yield bootstrap
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)


def _wait_for_broker(bootstrap: str, process: subprocess.Popen[bytes]) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + BROKER_START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise SystemExit(f"noida-db exited with code {process.returncode} while starting")
        try:
            admin.list_topics(timeout=1.0)  # lists all topics: never creates one
            return
        except Exception as exc:  # not up yet: retried until the deadline
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"noida-db did not answer at {bootstrap} in {BROKER_START_TIMEOUT_S}s: {exc}"
                ) from exc


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
        "--bootstrap-servers", help="use this Kafka cluster (default: start a local noida-db)"
    )
    parser.add_argument("--records", type=int, default=1_000, help="page views to produce")
    parser.add_argument("--batch-records", type=int, default=250, help="records per micro-batch at most")
    parser.add_argument("--follow", action="store_true", help="keep counting new records until Ctrl-C")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    if args.bootstrap_servers:
        return run(args.bootstrap_servers, args)
    with local_noida_broker() as bootstrap:
        return run(bootstrap, args)


if __name__ == "__main__":
    sys.exit(main())
