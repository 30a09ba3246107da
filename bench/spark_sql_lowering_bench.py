"""Count per key over 1,000,000 records on Spark: run_topology lowered to Spark SQL, Spark's own
``groupBy("key").count()``, and run_topology on the task path (``lower_to_sql=False``).

All three read the same rows from Parquet files (generated with ``spark.range`` on local[2] and
written once, in 4 files, before the runs) and write their result to Spark's no-op sink, so the
whole plan runs. Stored input, as a backfill reads it: over generated rows, Spark computes a
generated column once for every operator that reads it (the lowered stage's null check of the
key computed each key twice), a cost that stored columns do not have.

- lowered: ``run_topology`` normalizes the input, drops null keys and values, groups by the key
  bytes with count and max(timestamp), and encodes each count as LongSerde's 8 bytes;
- Spark: ``groupBy("key").count()`` over the same key column, nothing else;
- Spark, the topology's outputs: Spark's own functions computing what the topology writes (null
  keys and values dropped, count and max(timestamp) per key, the count as LongSerde bytes), which
  reads the value and timestamp columns too;
- tasks: ``run_topology(..., lower_to_sql=False)``: the key shuffle, a sort by timestamp, and one
  StreamTask per partition in Python workers (compiled count kernel, record cache on).

Each side runs once to warm up, then ``--repeat`` times interleaved; the best time counts. The
lowered and task results are checked (final counts sum to the number of records).

    python bench/spark_sql_lowering_bench.py                 # 1,000,000 records
    python bench/spark_sql_lowering_bench.py --records 200000 --repeat 1
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from kstreams import Consumed, Produced, Serdes, StreamsBuilder, Topology

INPUT = "events"
OUTPUT = "counts-per-key"
PARTITIONS = 4
BASE_TIMESTAMP = 1_700_000_000_000
CONFIG = {"application.id": "bench-sql-lowering", "statestore.cache.max.bytes": 10 * 1024 * 1024}


def count_per_key() -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream(INPUT, Consumed.with_(Serdes.string(), Serdes.string()))
        .group_by_key()
        .count()
        .to_stream()
        .to(OUTPUT, Produced.with_(Serdes.string(), Serdes.long()))
    )
    return builder.build()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Count per key: lowered vs Spark groupBy vs task path.")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000, help="distinct keys")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    from kstreams.spark import explain_topology, local_session, run_topology

    spark = local_session("kstreams-bench-sql", cores=2, shuffle_partitions=PARTITIONS)
    spark.sparkContext.setLogLevel("ERROR")

    workdir = tempfile.mkdtemp(prefix="kstreams-bench-sql-")
    stored: dict[int, str] = {}

    def events(n: int) -> Any:
        if n not in stored:
            ids = spark.range(n, numPartitions=PARTITIONS)
            generated = ids.select(
                F.encode(F.concat(F.lit("user-"), (F.col("id") % args.keys).cast("string")), "UTF-8").alias(
                    "key"
                ),
                F.encode(F.lit("view"), "UTF-8").alias("value"),
                (F.lit(BASE_TIMESTAMP) + F.col("id")).alias("timestamp"),
            )
            stored[n] = os.path.join(workdir, f"events-{n}")
            generated.write.parquet(stored[n])
        return spark.read.parquet(stored[n])

    def lowered(n: int) -> Any:
        return run_topology(spark, count_per_key(), {INPUT: events(n)}, CONFIG, partitions=PARTITIONS)[OUTPUT]

    def tasks(n: int) -> Any:
        return run_topology(
            spark, count_per_key(), {INPUT: events(n)}, CONFIG, partitions=PARTITIONS, lower_to_sql=False
        )[OUTPUT]

    def spark_count(n: int) -> Any:
        return events(n).groupBy("key").count()

    def spark_same_outputs(n: int) -> Any:
        # What the topology writes, in Spark's own functions: null keys and values skipped, the
        # largest timestamp per key, the count as LongSerde's 8 big-endian bytes.
        kept = events(n).where(F.col("key").isNotNull() & F.col("value").isNotNull())
        counted = kept.groupBy("key").agg(F.count(F.lit(1)).alias("n"), F.max("timestamp").alias("timestamp"))
        return counted.select("key", F.unhex(F.lpad(F.hex("n"), 16, "0")).alias("value"), "timestamp")

    sides: dict[str, Callable[[int], Any]] = {
        "run_topology lowered to Spark SQL": lowered,
        "Spark groupBy(key).count()": spark_count,
        "Spark, the topology's outputs": spark_same_outputs,
        "run_topology task path": tasks,
    }
    best: dict[str, float] = {}
    try:
        print(explain_topology(count_per_key(), [INPUT], CONFIG))
        for side in sides.values():  # warm-up: JIT, Python workers, kstreams loaded in them
            side(10_000).write.format("noop").mode("overwrite").save()
        events(args.records)  # the input written before any run is timed
        for _ in range(args.repeat):
            for name, side in sides.items():
                started = time.perf_counter()
                side(args.records).write.format("noop").mode("overwrite").save()
                elapsed = time.perf_counter() - started
                best[name] = min(best.get(name, elapsed), elapsed)
        for check in (lowered, tasks):
            final = (
                check(args.records)
                .select("key", F.conv(F.hex("value"), 16, 10).cast("long").alias("count"))
                .groupBy("key")
                .agg(F.max("count").alias("count"))
            )
            total = final.agg(F.sum("count")).collect()[0][0]
            assert total == args.records, f"final counts sum to {total}, expected {args.records}"
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    for name, elapsed in best.items():
        rate = args.records / elapsed
        print(f"{name:36s} {args.records:,} records in {elapsed:5.2f} s = {rate:>12,.0f} rec/s")
    lowered_s, spark_s, same_s, tasks_s = best.values()
    print(f"lowered / Spark's groupBy time: {lowered_s / spark_s:.2f}x")
    print(f"lowered / Spark with the topology's outputs: {lowered_s / same_s:.2f}x")
    print(f"task path / lowered time: {tasks_s / lowered_s:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
