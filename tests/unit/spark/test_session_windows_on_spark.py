"""Session-windowed aggregations on Spark give the sessions the test driver gives for the same
records (in timestamp order, as Spark processes each key's records)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kstreams.serdes import Serdes
from kstreams.testing import TopologyTestDriver
from kstreams.topology import Consumed, Materialized, Produced, SessionWindows, StreamsBuilder, WindowedSerdes

pytestmark = pytest.mark.spark

STRING = Serdes.string()
LONG = Serdes.long()
SESSION_KEYS = WindowedSerdes.session_windowed_serde_from(STRING)


def _clicks_per_session() -> Any:
    builder = StreamsBuilder()
    (
        builder.stream("clicks", Consumed.with_(STRING, STRING))
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(50))
        .count(Materialized.as_("sessions"))
        .to_stream()
        .to("sessions", Produced.with_(SESSION_KEYS, LONG))
    )
    return builder.build()


def _open_sessions(rows: list[tuple[bytes, bytes | None]]) -> dict[Any, int]:
    """The last value of each session key, without the sessions merged away (tombstones)."""
    last: dict[bytes, bytes | None] = {}
    for key, value in rows:
        last[key] = value
    return {
        SESSION_KEYS.deserialize("sessions", key): LONG.deserialize("sessions", value)
        for key, value in last.items()
        if value is not None
    }


def test_session_counts_on_spark_equal_the_test_driver(spark: Any) -> None:
    rng = random.Random(11)
    records = sorted(
        ((f"user-{rng.randrange(4)}".encode(), b"click", rng.randrange(0, 2_000)) for _ in range(200)),
        key=lambda record: record[2],
    )
    with TopologyTestDriver(_clicks_per_session(), {"application.id": "sessions-driver"}) as driver:
        source = driver.create_input_topic("clicks", Serdes.bytes(), Serdes.bytes())
        for key, value, timestamp in records:
            source.pipe_input(key, value, timestamp=timestamp)
        output = driver.create_output_topic("sessions", Serdes.bytes(), Serdes.bytes())
        expected = _open_sessions([(r.key, r.value) for r in output.read_records_to_list()])

    df = spark.createDataFrame(records, "key binary, value binary, timestamp long").repartition(2)
    outputs = run_topology_rows(spark, df)
    assert _open_sessions(outputs) == expected
    assert sum(expected.values()) == len(records)


def run_topology_rows(spark: Any, df: Any) -> list[tuple[bytes, bytes | None]]:
    from kstreams.spark import run_topology

    outputs = run_topology(spark, _clicks_per_session(), {"clicks": df}, {"application.id": "sessions-spark"})
    return [
        (bytes(row.key), None if row.value is None else bytes(row.value))
        for row in outputs["sessions"].collect()
    ]
