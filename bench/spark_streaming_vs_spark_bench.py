"""Streaming on Spark: ``run_topology_stream`` beside Spark's own streaming queries, same micro-batches.

Two pipelines, each written by every side, over the same directory of Parquet files (key, value,
timestamp; ``--batches`` files, read one file per micro-batch) in one local[2] session with the
RocksDB state store provider and ``spark.sql.shuffle.partitions`` = 4:

* count: a count per key (``--keys`` keys, value ``view``);
* json: keep the JSON records (user, bot, lang, delta, title; key = user) whose "bot" is false and
  "lang" is "en", then count them per key.

Sides:

* kstreams: ``run_topology_stream`` of the DSL topology (``group_by_key().count()``, with
  ``filter(json_field("bot").eq(False) & json_field("lang").eq("en"))`` before it for json), 4 tasks;
  and the same with ``lower_to_sql=True``, which runs it as Spark's streaming aggregation (count
  and max(timestamp) per key, the count encoded as LongSerde bytes; the filter in kstreams'
  ``F.matches`` Arrow UDF) in outputMode update;
* Spark: ``groupBy("key").count()`` in outputMode update (json: filtered first with
  ``get_json_object``, ``from_json``, or kstreams' ``F.matches`` in an Arrow UDF).

Every query writes to the same ``foreachBatch`` sink (collect the micro-batch's rows, keep each
key's newest count) and runs with ``trigger(availableNow=True)`` from a fresh checkpoint; it is
timed from ``start()`` until it has processed every file. Each side's last counts are checked
(they sum to the records kept). One warm-up run of every side first (Python workers, kstreams and
RocksDB loaded), then ``--repeat`` rounds with the sides in turn; prints the median records/s,
each side's ratio to Spark's own (groupBy; json: the faster of get_json_object and from_json), and
Spark's per-micro-batch phases (``durationMs`` of the query progress, medians).

    python bench/spark_streaming_vs_spark_bench.py                        # 200,000 records, 4 batches
    python bench/spark_streaming_vs_spark_bench.py --pipelines count --repeat 1
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kstreams import Consumed, Produced, Serdes, StreamsBuilder, Topology

INPUT = "events"
OUTPUT = "counts"
PARTITIONS = 4
BASE_TIMESTAMP = 1_700_000_000_000
CONFIG = {"statestore.cache.max.bytes": 10 * 1024 * 1024, "commit.interval.ms": 200}
QUERY_TIMEOUT_S = 1800
JSON_SCHEMA = "user string, bot boolean, lang string"


def count_topology() -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream(INPUT, Consumed.with_(Serdes.string(), Serdes.string()))
        .group_by_key()
        .count()
        .to_stream()
        .to(OUTPUT, Produced.with_(Serdes.string(), Serdes.long()))
    )
    return builder.build()


def json_topology() -> Topology:
    from kstreams.predicates import json_field

    builder = StreamsBuilder()
    (
        builder.stream(INPUT, Consumed.with_(Serdes.string(), Serdes.json()))
        .filter(json_field("bot").eq(False) & json_field("lang").eq("en"))
        .group_by_key()
        .count()
        .to_stream()
        .to(OUTPUT, Produced.with_(Serdes.string(), Serdes.long()))
    )
    return builder.build()


def write_count_batches(directory: Path, records: int, keys: int, batches: int) -> int:
    """``records`` records (key ``user-<i % keys>``, value ``view``) in ``batches`` files; returns
    how many records every side's counts must sum to."""
    directory.mkdir(parents=True)
    per_file = -(-records // batches)
    for n, start in enumerate(range(0, records, per_file)):
        ids = range(start, min(start + per_file, records))
        table = pa.table(
            {
                "key": pa.array([f"user-{i % keys}".encode() for i in ids], pa.binary()),
                "value": pa.array([b"view"] * len(ids), pa.binary()),
                "timestamp": pa.array([BASE_TIMESTAMP + i for i in ids], pa.int64()),
            }
        )
        pq.write_table(table, directory / f"part-{n:05d}.parquet")
    return records


def write_json_batches(directory: Path, records: int, keys: int, batches: int) -> int:
    """``records`` JSON records (key = their user) in ``batches`` files; returns how many have
    bot false and lang en."""
    directory.mkdir(parents=True)
    rng = random.Random(1)
    users = [f"user-{i}" for i in range(keys)]
    per_file = -(-records // batches)
    kept = 0
    for n, start in enumerate(range(0, records, per_file)):
        ks, vs, ts = [], [], []
        for i in range(start, min(start + per_file, records)):
            doc = {
                "user": rng.choice(users),
                "bot": rng.random() < 0.3,
                "lang": rng.choice(["en", "en", "de", "fr"]),
                "delta": rng.randint(-500, 500),
                "title": f"Page {i % 997}",
            }
            kept += doc["bot"] is False and doc["lang"] == "en"
            ks.append(doc["user"].encode())
            vs.append(json.dumps(doc).encode())
            ts.append(BASE_TIMESTAMP + i)
        table = pa.table(
            {"key": pa.array(ks, pa.binary()), "value": pa.array(vs, pa.binary()), "timestamp": pa.array(ts)}
        )
        pq.write_table(table, directory / f"part-{n:05d}.parquet")
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run_topology_stream beside Spark's own streaming queries.")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=10_000, help="distinct keys")
    parser.add_argument("--batches", type=int, default=4, help="micro-batches (Parquet files)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pipelines", nargs="+", choices=["count", "json"], default=["count", "json"])
    parser.add_argument("--only", nargs="+", help="run only the sides whose name starts with one of these")
    args = parser.parse_args(argv)

    from pyspark.sql import DataFrame
    from pyspark.sql import functions as S

    from kstreams.predicates import json_field
    from kstreams.spark import functions as F
    from kstreams.spark import local_session, run_topology_stream
    from kstreams.spark.streaming import ROCKSDB_PROVIDER

    spark = local_session(
        "kstreams-streaming-vs-spark",
        cores=2,
        shuffle_partitions=PARTITIONS,
        conf={"spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER},
    )
    spark.sparkContext.setLogLevel("ERROR")
    workdir = Path(tempfile.mkdtemp(prefix="kstreams-streaming-vs-spark-"))
    long_serde = Serdes.long()
    human_en = json_field("bot").eq(False) & json_field("lang").eq("en")

    Side = Callable[[DataFrame], tuple[DataFrame, str]]  # events -> (output, output mode)

    def kstreams_side(topology: Callable[[], Topology], lowered: bool = False) -> Side:
        def build(events: DataFrame) -> tuple[DataFrame, str]:
            config = {"application.id": "bench-streaming-vs-spark", **CONFIG}
            outputs = run_topology_stream(
                spark, topology(), {INPUT: events}, config, partitions=PARTITIONS, lower_to_sql=lowered
            )
            return outputs[OUTPUT], "update" if lowered else "append"

        return build

    def spark_count(filtered: Callable[[DataFrame], DataFrame]) -> Side:
        def build(events: DataFrame) -> tuple[DataFrame, str]:
            return filtered(events).groupBy("key").count(), "update"

        return build

    def by_get_json_object(df: DataFrame) -> DataFrame:
        text = df.withColumn("text", S.col("value").cast("string"))
        return text.where(
            (S.get_json_object("text", "$.bot") == "false") & (S.get_json_object("text", "$.lang") == "en")
        )

    def by_from_json(df: DataFrame) -> DataFrame:
        parsed = df.withColumn("j", S.from_json(S.col("value").cast("string"), JSON_SCHEMA))
        return parsed.where((S.col("j.bot") == S.lit(False)) & (S.col("j.lang") == "en"))

    pipelines: dict[str, tuple[Callable[..., int], dict[str, Side]]] = {
        "count": (
            write_count_batches,
            {
                "kstreams run_topology_stream": kstreams_side(count_topology),
                "kstreams lowered to Spark SQL": kstreams_side(count_topology, lowered=True),
                "Spark groupBy(key).count()": spark_count(lambda df: df),
            },
        ),
        "json": (
            write_json_batches,
            {
                "kstreams run_topology_stream": kstreams_side(json_topology),
                "kstreams lowered to Spark SQL": kstreams_side(json_topology, lowered=True),
                "Spark get_json_object": spark_count(by_get_json_object),
                "Spark from_json": spark_count(by_from_json),
                "Spark F.matches (kstreams UDF)": spark_count(lambda df: df.where(F.matches(human_en))),
            },
        ),
    }
    runs = 0

    def run(directory: Path, build: Side) -> tuple[float, int, dict]:
        nonlocal runs
        runs += 1
        events = (
            spark.readStream.schema("key binary, value binary, timestamp long")
            .option("maxFilesPerTrigger", 1)
            .parquet(str(directory))
        )
        output, mode = build(events)
        last: dict[bytes, int] = {}

        def keep_last(df: Any, _batch_id: int) -> None:
            for row in df.collect():
                # kstreams: rows of a key come in the order its task wrote them, newest last; the
                # value is LongSerde's bytes (Spark's own queries give a count column).
                fields = row.asDict()
                last[row.key] = (
                    fields["count"] if "count" in fields else long_serde.deserialize(OUTPUT, row.value)
                )

        started = time.perf_counter()
        query = (
            output.writeStream.foreachBatch(keep_last)
            .outputMode(mode)
            .option("checkpointLocation", str(workdir / f"checkpoint-{runs}"))
            .trigger(availableNow=True)
            .start()
        )
        if not query.awaitTermination(QUERY_TIMEOUT_S):
            query.stop()
            raise TimeoutError(f"the streaming query did not finish within {QUERY_TIMEOUT_S} s")
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")
        elapsed = time.perf_counter() - started
        progress = [p["durationMs"] for p in query.recentProgress if p["numInputRows"]]
        phases = {
            phase: statistics.median(p.get(phase, 0) for p in progress)
            for phase in sorted({phase for p in progress for phase in p})
        }
        return elapsed, sum(last.values()), phases

    try:
        print(
            f"{args.records:,} records, {args.keys:,} keys, {args.batches} micro-batches, local[2], "
            f"{PARTITIONS} shuffle partitions / tasks, RocksDB state store, median of {args.repeat}"
        )
        for pipeline in args.pipelines:
            write, sides = pipelines[pipeline]
            if args.only:
                sides = {n: s for n, s in sides.items() if n.startswith(("kstreams", *args.only))}
            directory = workdir / pipeline
            expected = write(directory, args.records, args.keys, args.batches)
            warm = workdir / f"{pipeline}-warm-up"
            write(warm, 2_000, min(args.keys, 100), 2)
            for build in sides.values():
                run(warm, build)
            times: dict[str, list[float]] = {name: [] for name in sides}
            phases: dict[str, list[dict]] = {name: [] for name in sides}
            for _ in range(args.repeat):
                for name, build in sides.items():
                    elapsed, total, phase = run(directory, build)
                    assert total == expected, f"{name}: last counts sum to {total}, expected {expected}"
                    times[name].append(elapsed)
                    phases[name].append(phase)
                    print(f"  {pipeline} {name}: {elapsed:.1f} s", flush=True)
            rates = {name: args.records / statistics.median(t) for name, t in times.items()}
            # Spark's own: its built-ins only (the F.matches side runs kstreams' kernels in Spark).
            own = [rate for name, rate in rates.items() if name.startswith("Spark") and "F." not in name]
            spark_own = max(own)
            print(f"{pipeline}: {expected:,} records counted")
            for name, rate in rates.items():
                keys = sorted({k for p in phases[name] for k in p})
                median_phases = {k: statistics.median(p.get(k, 0) for p in phases[name]) for k in keys}
                shown = {k: int(v) for k, v in median_phases.items() if v >= 10}
                print(
                    f"  {name:32s} {rate:>9,.0f} rec/s  {rate / spark_own:5.2f}x Spark's own  "
                    f"per micro-batch (ms): {shown}"
                )
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
