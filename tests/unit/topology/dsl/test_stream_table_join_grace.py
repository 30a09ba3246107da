"""Stream-table joins with a grace period on a versioned table (KIP-923), answered as Kafka's
KStreamKTableJoinTest (its grace-period cases) expects: stream records wait for the grace period,
then join with the table as of their own timestamp."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams.errors import StreamsException, TopologyException
from kstreams.serdes import Serdes
from kstreams.state import Stores
from kstreams.topology import Joined, Materialized, StreamsBuilder

INT, S = Serdes.integer(), Serdes.string()


def _joiner(stream_value: Any, table_value: Any) -> str:
    return f"{stream_value}+{table_value}"


def _grace_join(drive: Any, grace_ms: int, history_ms: int = 300_000) -> tuple[Any, Any, Any, Any]:
    """Kafka's makeJoin: integer keys, a versioned table ``V-grace``, the join named ``Grace``."""
    builder = StreamsBuilder()
    table = builder.table(
        "tableTopic2",
        materialized=Materialized.as_(Stores.persistent_versioned_key_value_store("V-grace", history_ms)),
    )
    builder.stream("streamTopic").join(
        table, _joiner, Joined.with_(INT, S, S, "Grace", grace_period=grace_ms)
    ).to("out")
    driver = drive(builder.build(), default_key_serde="integer")
    stream = driver.create_input_topic("streamTopic", INT, S)
    table_topic = driver.create_input_topic("tableTopic2", INT, S)
    out = driver.create_output_topic("out", INT, S)
    return driver, stream, table_topic, out


def _push_stream(stream: Any, prefix: str, count: int = 4) -> None:
    for key in range(count):
        stream.pipe_input(key, f"{prefix}{key}", timestamp=key)


def _push_table(table: Any, prefix: str) -> None:
    for key in range(4):
        table.pipe_input(key, f"{prefix}{key}", timestamp=0)


def _results(out: Any) -> list[tuple[Any, Any, int]]:
    return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def test_stream_records_wait_for_the_grace_period_then_join_as_of_their_time(drive):
    _, stream, table, out = _grace_join(drive, grace_ms=2)
    _push_table(table, "Y")
    assert _results(out) == []
    _push_stream(stream, "X")  # stream time 3: records up to 1 leave the buffer
    assert _results(out) == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]
    _push_table(table, "YY")
    assert _results(out) == []  # table updates neither join nor evict
    _push_stream(stream, "X")  # 0 is past the grace period (joined at once); 1 is due at once
    assert _results(out) == [(0, "X0+YY0", 0), (1, "X1+YY1", 1)]
    stream.pipe_input(5, "test", timestamp=7)  # both waiting records of 2 and of 3 leave, in order
    assert _results(out) == [(2, "X2+YY2", 2), (2, "X2+YY2", 2), (3, "X3+YY3", 3), (3, "X3+YY3", 3)]
    _push_table(table, "YYY")
    assert _results(out) == []


def test_a_record_later_than_the_grace_period_joins_at_once_and_evicts_nothing(drive):
    _, stream, table, out = _grace_join(drive, grace_ms=2)
    _push_table(table, "Y")
    _push_stream(stream, "X")
    assert _results(out) == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]
    _push_stream(stream, "X", count=1)
    assert _results(out) == [(0, "X0+Y0", 0)]


def test_a_buffered_record_leaves_with_its_own_headers(drive):
    _, stream, table, out = _grace_join(drive, grace_ms=2)
    table.pipe_input(0, "Y0", timestamp=0)
    stream.pipe_input(0, "X0", timestamp=0, headers=[("v", b"first")])
    assert _results(out) == []
    stream.pipe_input(1, "X1", timestamp=10, headers=[("v", b"second")])
    (record,) = out.read_records_to_list()
    assert (record.key, record.value, record.timestamp) == (0, "X0+Y0", 0)
    assert list(record.headers) == [("v", b"first")]


def test_the_buffer_is_a_store_named_after_the_join_with_a_changelog():
    builder = StreamsBuilder()
    table = builder.table(
        "t", materialized=Materialized.as_(Stores.persistent_versioned_key_value_store("v", 100))
    )
    builder.stream("s").left_join(table, _joiner, Joined.as_("enrich").with_grace_period(10)).to("out")
    topology = builder.build()
    assert "enrich-Buffer" in topology.store_builders
    assert "app-enrich-Buffer-changelog" in topology.build("app").internal_topics


def test_a_grace_period_needs_a_versioned_table():
    builder = StreamsBuilder()
    table = builder.table("t")
    with pytest.raises(TopologyException, match="KTable must be versioned to use a grace period"):
        builder.stream("s").join(table, _joiner, Joined.with_(S, S, S, "first-join", grace_period=6))


def test_a_grace_period_must_not_exceed_the_tables_history_retention():
    builder = StreamsBuilder()
    table = builder.table(
        "t", materialized=Materialized.as_(Stores.persistent_versioned_key_value_store("tableB", 300_000))
    )
    with pytest.raises(TopologyException, match="History retention must be at least grace period"):
        builder.stream("s").join(table, _joiner, Joined.with_(S, S, S, "first-join", grace_period=360_000))


def test_a_left_join_with_a_grace_period_fails_on_a_stream_record_with_a_null_key(drive):
    """As Kafka's: its buffer requires a key (RocksDBTimeOrderedKeyValueBuffer.put), so the task
    fails where a left join without a grace period would join the record with None."""
    builder = StreamsBuilder()
    table = builder.table(
        "rows", materialized=Materialized.as_(Stores.persistent_versioned_key_value_store("V-grace", 100))
    )
    builder.stream("events").left_join(table, _joiner, Joined.with_(S, S, S, "Grace", grace_period=0)).to(
        "out"
    )
    driver = drive(builder.build())
    events = driver.create_input_topic("events", S, S)
    events.pipe_input("a", "X", 1)
    with pytest.raises(StreamsException, match="null key"):
        events.pipe_input(None, "Y", 2)
    assert _results(driver.create_output_topic("out", S, S)) == [("a", "X+None", 1)]
