"""Stages lowered to Spark SQL give what the task path gives: each key's final aggregate, with the
same bytes and Kafka's timestamps; Python functions keep their stage on the task path."""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable
from typing import Any

import pytest
from pyspark import cloudpickle

from kstreams import Consumed, Grouped, Produced, Serdes, StreamsBuilder, Topology, WindowedSerdes
from kstreams.predicates import json_field
from kstreams.spark import explain_topology, run_topology
from kstreams.topology.dsl.windows import TimeWindows

pytestmark = pytest.mark.spark

cloudpickle.register_pickle_by_value(sys.modules[__name__])

STRING = Serdes.string()
LONG = Serdes.long()
INT = Serdes.int()
JSON = Serdes.json()
SCHEMA = "key binary, value binary, timestamp long"


def _records(value: Callable[[int], bytes | None]) -> list[tuple[bytes | None, bytes | None, int]]:
    """Six keys, out of order, with timestamp ties inside and across keys, a null key every 11th
    record and a null value every 7th (Kafka skips both in count and reduce)."""
    rows: list[tuple[bytes | None, bytes | None, int]] = []
    for i in range(120):
        key = None if i % 11 == 0 else f"k{i % 6}".encode()
        rows.append((key, None if i % 7 == 0 else value(i), 1_000 + (i * 37) % 50 * 10))
    return rows


def _final(df: Any) -> dict[bytes, tuple[bytes, int]]:
    """Each key's last row in the DataFrame's order: its final aggregate."""
    return {r.key: (r.value, r.timestamp) for r in df.collect()}


@pytest.fixture
def both(spark: Any) -> Callable[..., dict[bytes, tuple[bytes, int]]]:
    """Runs a topology lowered and on the task path over the same rows; asserts the explain says
    whether it is lowered and the finals are equal, and returns them."""

    def run(
        make: Callable[[], Topology], rows: list[Any], *, lowered: bool
    ) -> dict[bytes, tuple[bytes, int]]:
        df = spark.createDataFrame(rows, SCHEMA).repartition(3)
        config = {"application.id": "sql-lowering", "statestore.cache.max.bytes": 0}
        explained = explain_topology(make(), {"in": df}, config)
        assert (": Spark SQL:" in explained) == lowered, explained
        sql = run_topology(spark, make(), {"in": df}, config)["out"]
        tasks = run_topology(spark, make(), {"in": df}, config, lower_to_sql=False)["out"]
        expected = _final(tasks)
        if lowered:
            assert sql.count() == len(expected)  # one row per key: its final aggregate
        assert _final(sql) == expected
        return expected

    return run


def test_count_per_key_equals_task_path_skipping_null_keys_and_values(both: Any) -> None:
    def count() -> Topology:
        b = StreamsBuilder()
        b.stream("in", Consumed.with_(STRING, STRING)).group_by_key().count().to_stream().to(
            "out", Produced.with_(STRING, LONG)
        )
        return b.build()

    final = both(count, _records(lambda i: b"v"), lowered=True)
    assert sum(LONG.deserialize("out", v) for v, _ts in final.values()) == sum(
        1 for i in range(120) if i % 11 and i % 7
    )


@pytest.mark.parametrize("reducer", [operator.add, min, max])
@pytest.mark.parametrize("serde", [LONG, INT])
def test_reduce_with_builtin_reducer_equals_task_path(both: Any, reducer: Any, serde: Any) -> None:
    def reduce() -> Topology:
        b = StreamsBuilder()
        b.stream("in", Consumed.with_(STRING, serde)).group_by_key().reduce(reducer).to_stream().to(
            "out", Produced.with_(STRING, serde)
        )
        return b.build()

    # Negative values check the signed decoding and encoding.
    both(reduce, _records(lambda i: serde.serialize("in", (i * 7919) % 2001 - 1000)), lowered=True)


def test_compiled_filter_then_count_equals_task_path(both: Any) -> None:
    def filtered() -> Topology:
        b = StreamsBuilder()
        (
            b.stream("in", Consumed.with_(STRING, JSON))
            .filter(json_field("lang").eq("en") & json_field("bot").eq(False))
            .group_by_key()
            .count()
            .to_stream()
            .to("out", Produced.with_(STRING, LONG))
        )
        return b.build()

    def value(i: int) -> bytes:
        return JSON.serialize("in", {"lang": "en" if i % 3 else "de", "bot": i % 4 == 0})

    both(filtered, _records(value), lowered=True)


@pytest.mark.parametrize("advance", [100, 40], ids=["tumbling", "hopping"])
def test_windowed_count_equals_task_path_with_the_windowed_key_bytes(both: Any, advance: int) -> None:
    def windowed() -> Topology:
        b = StreamsBuilder()
        (
            b.stream("in", Consumed.with_(STRING, STRING))
            .group_by_key()
            .windowed_by(TimeWindows.of_size_with_no_grace(100).advance_by(advance))
            .count()
            .to_stream()
            .to("out", Produced.with_(WindowedSerdes.time_windowed_serde_from(STRING, 100), LONG))
        )
        return b.build()

    final = both(windowed, _records(lambda i: b"v"), lowered=True)
    # A row per window: hopping windows overlap, so each record counts in size/advance windows.
    assert len(final) > 6


def test_python_lambda_keeps_the_stage_on_the_task_path(both: Any) -> None:
    def with_lambda() -> Topology:
        b = StreamsBuilder()
        (
            b.stream("in", Consumed.with_(STRING, STRING))
            .filter(lambda k, v: k is not None and k.endswith(("1", "2")))
            .group_by_key()
            .count()
            .to_stream()
            .to("out", Produced.with_(STRING, LONG))
        )
        return b.build()

    final = both(with_lambda, _records(lambda i: b"v"), lowered=False)
    assert set(final) == {b"k1", b"k2"}


def test_explain_shows_a_python_re_key_as_tasks_and_its_count_as_spark_sql() -> None:
    b = StreamsBuilder()
    (
        b.stream("in", Consumed.with_(STRING, STRING))
        .group_by(lambda k, v: v, Grouped.with_(STRING, STRING))
        .count()
        .to_stream()
        .to("out", Produced.with_(STRING, LONG))
    )
    lines = explain_topology(b.build(), ["in"]).splitlines()
    assert len(lines) == 2
    assert "StreamTasks" in lines[0]
    assert ": Spark SQL:" in lines[1] and "groupBy(key).agg(count" in lines[1]
