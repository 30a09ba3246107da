"""Streaming throughput: a count per key on Spark Structured Streaming and on the streaming runtime.

Spark: ``run_topology_stream`` on a local[2] session over a directory of Parquet files read one
file per micro-batch (``--batches`` micro-batches), task state in Spark's RocksDB state store,
timed from the query's start until ``availableNow`` has processed every file. Streaming:
``KafkaStreams`` with two stream threads on an ``EmbeddedCluster`` (``spark_backfill_bench``'s
``bench_streaming``: same topology, same configuration, same records), timed from ``start()``
until every input record is committed. Both results are checked (the last counts sum to the number
of records). Prints records/s for each, one after the other in one run.

    python bench/spark_streaming_bench.py                      # 200,000 records in 10 micro-batches
    python bench/spark_streaming_bench.py --records 50000 --batches 5 --only spark
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from spark_backfill_bench import (
    BASE_TIMESTAMP,
    CONFIG,
    INPUT,
    OUTPUT,
    PARTITIONS,
    bench_streaming,
    count_per_key,
)

from kstreams import Serdes

logger = logging.getLogger("spark_streaming_bench")

QUERY_TIMEOUT_S = 1800


def write_micro_batches(directory: Path, records: int, keys: int, batches: int) -> None:
    """``records`` records (key ``user-<i % keys>``) in ``batches`` Parquet files, oldest first."""
    directory.mkdir(parents=True)
    per_file = -(-records // batches)
    for n, start in enumerate(range(0, records, per_file)):
        ids = np.arange(start, min(start + per_file, records), dtype=np.int64)
        table = pa.table(
            {
                "key": pa.array([f"user-{i % keys}".encode() for i in ids.tolist()], pa.binary()),
                "value": pa.array([b"view"] * len(ids), pa.binary()),
                "timestamp": pa.array(ids + BASE_TIMESTAMP, pa.int64()),
            }
        )
        pq.write_table(table, directory / f"part-{n:05d}.parquet")


def bench_spark_streaming(records: int, keys: int, batches: int) -> float:
    """Records/s of run_topology_stream over ``records`` records in ``batches`` micro-batches."""
    from kstreams.spark import local_session, run_topology_stream

    spark = local_session("kstreams-streaming-bench", cores=2, shuffle_partitions=PARTITIONS)
    spark.sparkContext.setLogLevel("ERROR")
    workdir = Path(tempfile.mkdtemp(prefix="kstreams-spark-streaming-bench-"))
    long_serde = Serdes.long()

    def run(name: str, n: int, micro_batches: int) -> tuple[float, dict[bytes, int]]:
        write_micro_batches(workdir / name, n, keys, micro_batches)
        events = (
            spark.readStream.schema("key binary, value binary, timestamp long")
            .option("maxFilesPerTrigger", 1)
            .parquet(str(workdir / name))
        )
        config = {"application.id": "bench-spark-streaming", **CONFIG}
        outputs = run_topology_stream(spark, count_per_key(), {INPUT: events}, config, partitions=PARTITIONS)
        last: dict[bytes, int] = {}

        def keep_last(df: object, _batch_id: int) -> None:
            # Rows of a key arrive in the order its task wrote them: the last is the newest count.
            for row in df.collect():  # type: ignore[attr-defined]
                last[row.key] = long_serde.deserialize(OUTPUT, row.value)

        started = time.perf_counter()
        query = (
            outputs[OUTPUT]
            .writeStream.foreachBatch(keep_last)
            .option("checkpointLocation", str(workdir / f"{name}-checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        if not query.awaitTermination(QUERY_TIMEOUT_S):
            query.stop()
            raise TimeoutError(f"the streaming query did not finish within {QUERY_TIMEOUT_S} s")
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")
        elapsed = time.perf_counter() - started
        if name == "measured":
            # Where Spark's time went, per micro-batch on average (ms): planning, running, commits.
            progress = [p["durationMs"] for p in query.recentProgress if p["numInputRows"]]
            phases = sorted({phase for p in progress for phase in p})
            average = {
                phase: sum(p.get(phase, 0) for p in progress) // max(len(progress), 1) for phase in phases
            }
            print(f"spark streaming, per micro-batch (ms): {average}")
        return elapsed, last

    try:
        run("warm-up", 2_000, 2)  # start the Python workers, load kstreams and RocksDB in them
        elapsed, last = run("measured", records, batches)
        total = sum(last.values())
        assert total == records, f"Spark's last counts sum to {total}, expected {records}"
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    rate = records / elapsed
    print(
        f"spark streaming local[2], {PARTITIONS} tasks, {batches} micro-batches: {records:,} records in "
        f"{elapsed:.1f} s = {rate:,.0f} records/s"
    )
    return rate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Streaming count per key: Spark local[2] vs the streaming runtime."
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=10_000, help="distinct keys")
    parser.add_argument("--batches", type=int, default=10, help="Spark micro-batches")
    parser.add_argument("--only", choices=["spark", "streaming"], help="run one side only")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    rates = {}
    if args.only in (None, "spark"):
        rates["spark"] = bench_spark_streaming(args.records, args.keys, args.batches)
    if args.only in (None, "streaming"):
        rates["streaming"] = bench_streaming(args.records, args.keys)
    if len(rates) == 2:
        print(f"spark streaming / streaming runtime: {rates['spark'] / rates['streaming']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
