"""Apache Kafka's KTableAggregateTest (kstream/internals), ported: ``KTable.group_by`` then
``aggregate`` / ``count``, with the records, values and timestamps Kafka's test expects.

Kafka's mocks, as used here: ``MockInitializer.STRING_INIT`` is ``"0"``, ``TOSTRING_ADDER``
appends ``+value``, ``TOSTRING_REMOVER`` appends ``-value``.

Not ported: ``testShouldSendTransientStateWhenUpgrading`` (it sets ``upgrade.from`` to 3.3, a key
kstreams refuses: it has no older formats to be compatible with).
"""

from __future__ import annotations

from typing import Any

import pytest

from kstreams import Consumed, Grouped, KeyValue, Materialized, Serdes, Stores, StreamsBuilder

pytestmark = pytest.mark.on_cluster(
    representative="test_aggregate_with_unchanged_key_subtracts_and_adds_in_one_update"
)

S = Serdes.string()
L = Serdes.long()
CONSUMED = Consumed.with_(S, S)
GROUPED = Grouped.with_(S, S)


def _init() -> str:
    return "0"


def _adder(key: Any, value: Any, aggregate: str) -> str:
    return f"{aggregate}+{value}"


def _remover(key: Any, value: Any, aggregate: str) -> str:
    return f"{aggregate}-{value}"


def _null_or_value_key(key: str, value: str) -> KeyValue | None:
    """testAggRepartition's mapper: key "null" maps to a null key, "NULL" to no pair at all."""
    if key == "null":
        return KeyValue(None, value)
    if key == "NULL":
        return None
    return KeyValue(value, value)


def _aggregate_canonized(builder: StreamsBuilder, table: Any, mapper: Any, captured: Any) -> None:
    table.group_by(mapper, GROUPED).aggregate(
        _init, _adder, _remover, Materialized.as_("topic1-Canonized").with_value_serde(S)
    ).to_stream().process(captured.supplier)


def test_aggregate_with_unchanged_key_subtracts_and_adds_in_one_update(drive, captured):
    """testAggBasic"""
    builder = StreamsBuilder()
    _aggregate_canonized(builder, builder.table("topic1", CONSUMED), lambda k, v: KeyValue(k, v), captured)
    topic = drive(builder.build()).create_input_topic("topic1", S, S)
    for key, value, ts in [
        ("A", "1", 10), ("B", "2", 15), ("A", "3", 20), ("B", "4", 18),
        ("C", "5", 5), ("D", "6", 25), ("B", "7", 15), ("C", "8", 10),
    ]:  # fmt: skip
        topic.pipe_input(key, value, ts)
    assert captured.processed == [
        ("A", "0+1", 10),
        ("B", "0+2", 15),
        ("A", "0+1-1+3", 20),
        ("B", "0+2-2+4", 18),
        ("C", "0+5", 5),
        ("D", "0+6", 25),
        ("B", "0+2-2+4-4+7", 18),
        ("C", "0+5-5+8", 10),
    ]


REPARTITION_INPUT = [
    ("A", "1", 10), ("A", None, 15), ("A", "1", 12), ("B", "2", 20),
    ("null", "3", 25), ("B", "4", 23), ("NULL", "5", 24), ("B", "7", 22),
]  # fmt: skip


def test_aggregate_skips_null_keys_and_absent_pairs_and_moves_rows_between_groups(drive, captured):
    """testAggRepartition"""
    builder = StreamsBuilder()
    _aggregate_canonized(builder, builder.table("topic1", CONSUMED), _null_or_value_key, captured)
    topic = drive(builder.build()).create_input_topic("topic1", S, S)
    for key, value, ts in REPARTITION_INPUT:
        topic.pipe_input(key, value, ts)
    assert captured.processed == [
        ("1", "0+1", 10),
        ("1", "0+1-1", 15),
        ("1", "0+1-1+1", 15),
        ("2", "0+2", 20),
        ("2", "0+2-2", 23),
        ("4", "0+4", 23),
        ("4", "0+4-4", 23),
        ("7", "0+7", 22),
    ]


def test_aggregate_of_a_versioned_table_ignores_out_of_order_rows(drive, captured):
    """testAggOfVersionedStore"""
    builder = StreamsBuilder()
    versioned = Materialized.as_(Stores.persistent_versioned_key_value_store("versioned", 300_000))
    table = builder.table("topic1", CONSUMED, versioned)
    _aggregate_canonized(builder, table, _null_or_value_key, captured)
    topic = drive(builder.build()).create_input_topic("topic1", S, S)
    for key, value, ts in REPARTITION_INPUT:
        topic.pipe_input(key, value, ts)
    assert captured.processed == [
        ("1", "0+1", 10),
        ("1", "0+1-1", 15),
        ("2", "0+2", 20),
        ("2", "0+2-2", 23),
        ("4", "0+4", 23),
    ]


COUNT_INPUT = [
    ("A", "green", 10), ("B", "green", 9), ("A", "blue", 12), ("C", "yellow", 15), ("D", "green", 11),
]  # fmt: skip
COUNT_OUTPUT = [
    ("green", 1, 10),
    ("green", 2, 10),
    ("green", 1, 12),
    ("blue", 1, 12),
    ("yellow", 1, 15),
    ("green", 2, 12),
]


def _count_by_value(drive: Any, captured: Any, *count_args: Any, materialized: Any = None) -> Any:
    builder = StreamsBuilder()
    table = builder.table("count-test-input", CONSUMED, *([materialized] if materialized else []))
    table.group_by(lambda k, v: KeyValue(v, v), GROUPED).count(*count_args).to_stream().process(
        captured.supplier
    )
    return drive(builder.build()).create_input_topic("count-test-input", S, S)


def test_count_by_value_with_a_named_store(drive, captured):
    """testCount"""
    topic = _count_by_value(drive, captured, Materialized.as_("count"))
    for key, value, ts in COUNT_INPUT:
        topic.pipe_input(key, value, ts)
    assert captured.processed == COUNT_OUTPUT


def test_count_by_value_with_an_internal_store(drive, captured):
    """testCountWithInternalStore"""
    topic = _count_by_value(drive, captured)
    for key, value, ts in COUNT_INPUT:
        topic.pipe_input(key, value, ts)
    assert captured.processed == COUNT_OUTPUT


def test_count_of_a_versioned_table_ignores_out_of_order_rows(drive, captured):
    """testCountOfVersionedStore"""
    versioned = Materialized.as_(Stores.persistent_versioned_key_value_store("versioned", 300_000))
    topic = _count_by_value(drive, captured, materialized=versioned)
    for key, value, ts in [*COUNT_INPUT[:3], ("A", "blue", 11), *COUNT_INPUT[3:]]:
        topic.pipe_input(key, value, ts)
    assert captured.processed == COUNT_OUTPUT


def test_aggregate_removes_the_old_value_before_adding_the_new(drive, captured):
    """testRemoveOldBeforeAddNew"""
    builder = StreamsBuilder()
    builder.table("count-test-input", CONSUMED).group_by(
        lambda k, v: KeyValue(k[0], k[1]), GROUPED
    ).aggregate(
        lambda: "",
        lambda key, value, agg: agg + value,
        lambda key, value, agg: agg.replace(value, ""),
        Materialized.as_("someStore").with_value_serde(S),
    ).to_stream().process(captured.supplier)
    topic = drive(builder.build()).create_input_topic("count-test-input", S, S)
    for key, value, ts in [("11", "A", 10), ("12", "B", 8), ("11", None, 12), ("12", "C", 6)]:
        topic.pipe_input(key, value, ts)
    assert captured.processed == [("1", "1", 10), ("1", "12", 10), ("1", "2", 12), ("1", "2", 12)]


def test_count_with_an_unchanged_key_sends_no_transient_state(drive):
    """testShouldNotSendTransientStateIfNotUpgrading"""
    builder = StreamsBuilder()
    builder.table("input-topic", CONSUMED).group_by(KeyValue, GROUPED).count().to_stream().to("output-topic")
    driver = drive(builder.build())
    topic = driver.create_input_topic("input-topic", S, S)
    topic.pipe_input("1", "", 8)
    topic.pipe_input("1", "", 9)
    out = driver.create_output_topic("output-topic", S, L)
    assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [
        ("1", 1, 8),
        ("1", 1, 9),
    ]


class _NoEquals:
    """A key type compared by identity only (Kafka's NoEqualsImpl): two equal-looking keys differ."""

    def __init__(self, x: str) -> None:
        self.x = x


class _NoEqualsSerde:
    def serializer(self) -> Any:
        return lambda topic, data: None if data is None else data.x.encode()

    def deserializer(self) -> Any:
        return lambda topic, data: None if data is None else _NoEquals(data.decode())

    def serialize(self, topic: str, data: Any) -> bytes | None:
        return self.serializer()(topic, data)

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        return self.deserializer()(topic, data)


def _count_no_equals_keys(drive: Any, mapper: Any) -> list[tuple[str, int, int]]:
    serde = _NoEqualsSerde()
    builder = StreamsBuilder()
    builder.table("input-topic", Consumed.with_(serde, serde)).group_by(
        mapper, Grouped.with_(serde, serde)
    ).count().to_stream().to("output-topic")
    driver = drive(builder.build())
    topic = driver.create_input_topic("input-topic", serde, serde)
    a, b = _NoEquals("1"), _NoEquals("1")
    assert a != b
    topic.pipe_input(a, a, 8)
    topic.pipe_input(b, b, 9)
    out = driver.create_output_topic("output-topic", serde, L)
    return [(r.key.x, r.value, r.timestamp) for r in out.read_records_to_list()]


def test_a_new_key_object_without_equality_is_a_key_change(drive):
    """testNoEqualsAndNotSameObject"""
    rows = _count_no_equals_keys(drive, lambda k, v: KeyValue(v, v))
    assert rows == [("1", 1, 8), ("1", 0, 9), ("1", 1, 9)]


def test_the_same_key_object_without_equality_is_no_key_change(drive):
    """testNoEqualsAndSameObject"""
    rows = _count_no_equals_keys(drive, KeyValue)
    assert rows == [("1", 1, 8), ("1", 1, 9)]
