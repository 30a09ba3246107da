"""JSON on Spark: kstreams.spark.functions against Spark's built-ins and a plain pandas UDF.

The same cached DataFrame of JSON records (``{"user", "bot", "lang", "delta", "title"}``, 77 to 85
bytes each, as binary ``value`` and string ``text``) goes through two jobs, each written by every
side:

* filter: keep the records whose "bot" is false and "lang" is "en", then count them;
* extract: the "user" field of every record, written to Spark's no-op sink.

Sides: ``F.matches``/``F.json_field`` (the compiled kernels in an Arrow UDF), Spark's
``get_json_object`` and ``from_json`` (JVM, no Python), and a pandas UDF calling ``json.loads``
per record. Each job runs once to warm up and then ``--repeat`` times; prints the best rows/s, and
checks that every side agrees on the count.

    python bench/spark_functions_bench.py                      # 1,000,000 records
    python bench/spark_functions_bench.py --records 200000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from typing import Any

# At module level: pandas_udf reads the type hints, which name pd, from the module's globals.
import pandas as pd

PARTITIONS = 4


def records(n: int, seed: int = 1) -> list[tuple[bytes]]:
    rng = random.Random(seed)
    users = [f"user-{i}" for i in range(5000)] + ['o"brien', "zoë"]
    out = []
    for i in range(n):
        doc = {
            "user": rng.choice(users),
            "bot": rng.random() < 0.3,
            "lang": rng.choice(["en", "en", "de", "fr"]),
            "delta": rng.randint(-500, 500),
            "title": f"Page {i % 997}",
        }
        out.append((json.dumps(doc, ensure_ascii=False).encode(),))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    from pyspark.sql import functions as S

    from kstreams.predicates import json_field
    from kstreams.spark import functions as F
    from kstreams.spark import local_session

    spark = local_session("kstreams-functions-bench", cores=2, shuffle_partitions=PARTITIONS)
    spark.sparkContext.setLogLevel("ERROR")
    # Generated in chunks: one createDataFrame of a million rows serializes them all at once.
    chunk = 200_000
    parts = [
        spark.createDataFrame(records(min(chunk, args.records - start), seed=start), "value binary")
        for start in range(0, args.records, chunk)
    ]
    df = parts[0]
    for part in parts[1:]:
        df = df.unionByName(part)
    df = df.repartition(PARTITIONS).withColumn("text", S.col("value").cast("string")).cache()
    n = df.count()

    @S.pandas_udf("boolean")  # type: ignore[call-overload]
    def human_en(texts: pd.Series) -> pd.Series:
        def keep(text: str) -> bool:
            doc = json.loads(text)
            return doc.get("bot") is False and doc.get("lang") == "en"

        return texts.map(keep)

    @S.pandas_udf("string")  # type: ignore[call-overload]
    def user_of(texts: pd.Series) -> pd.Series:
        return texts.map(lambda text: json.loads(text).get("user"))

    schema = "user string, bot boolean, lang string"
    filters: dict[str, Callable[[], Any]] = {
        "kstreams F.matches": lambda: df.where(
            F.matches(json_field("bot").eq(False) & json_field("lang").eq("en"))
        ),
        "Spark get_json_object": lambda: df.where(
            (S.get_json_object("text", "$.bot") == "false") & (S.get_json_object("text", "$.lang") == "en")
        ),
        "Spark from_json": lambda: df.select(S.from_json("text", schema).alias("j")).where(
            (S.col("j.bot") == S.lit(False)) & (S.col("j.lang") == "en")
        ),
        "pandas_udf json.loads": lambda: df.where(human_en("text")),
    }
    extracts: dict[str, Callable[[], Any]] = {
        "kstreams F.json_field": lambda: df.select(F.json_field("value", "user")),
        "Spark get_json_object": lambda: df.select(S.get_json_object("text", "$.user")),
        "Spark from_json": lambda: df.select(S.from_json("text", schema).getField("user")),
        "pandas_udf json.loads": lambda: df.select(user_of("text")),
    }

    def best(run: Callable[[], Any]) -> tuple[float, Any]:
        result = run()  # warm-up: Python workers start and import kstreams
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            result = run()
            times.append(time.perf_counter() - started)
        return n / min(times), result

    print(f"{n:,} JSON records, local[2], best of {args.repeat}")
    counts = {}
    for name, build in filters.items():
        rate, counted = best(lambda build=build: build().count())
        counts[name] = counted
        print(f"filter  bot=false & lang=en  {name:24s} {rate:>12,.0f} rows/s  ({counted:,} kept)")
    assert len(set(counts.values())) == 1, f"the sides disagree: {counts}"
    for name, build in extracts.items():
        rate, _ = best(lambda build=build: build().write.format("noop").mode("overwrite").save())
        print(f"extract user                 {name:24s} {rate:>12,.0f} rows/s")
    spark.stop()


if __name__ == "__main__":
    main()
