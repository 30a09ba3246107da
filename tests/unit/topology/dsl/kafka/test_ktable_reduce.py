"""Apache Kafka's KTableReduceTest (kstream/internals), ported: ``KTable.group_by`` then
``reduce`` with an adder and a subtractor.

``shouldAddAndSubtract`` drives Kafka's KTableReduce processor with a mock context; here the same
changes come from a table through the DSL (a row, its update, its deletion) and the test reads the
reduce's store. Not ported: the "headers" store format of ``shouldReduceAndEmitLatestValue``
(``dsl.store.format``, newer than Kafka Streams 4.1.1, the reference).
"""

from __future__ import annotations

import pytest

from kstreams import Consumed, Grouped, KeyValue, Materialized, Serdes, StreamsBuilder

pytestmark = pytest.mark.on_cluster(
    representative="test_reduce_adds_new_values_and_subtracts_old_ones_keeping_the_newest_timestamp"
)

S = Serdes.string()
# A set of strings, written comma-separated (the empty set as no bytes).
SET = Serdes.serde_from(
    lambda data: ",".join(sorted(data)).encode(),
    lambda raw: frozenset(part for part in raw.decode().split(",") if part),
    "string-set",
)


def _union(left: frozenset, right: frozenset) -> frozenset:
    assert left is not None and right is not None
    return left | right


def _difference(left: frozenset, right: frozenset) -> frozenset:
    assert left is not None and right is not None
    return left - right


def test_reduce_adds_new_values_and_subtracts_old_ones_keeping_the_newest_timestamp(drive):
    """shouldAddAndSubtract"""
    builder = StreamsBuilder()
    builder.table("in", Consumed.with_(S, S)).group_by(
        lambda key, value: KeyValue(key, frozenset([value])), Grouped.with_(S, SET)
    ).reduce(_union, _difference, Materialized.as_("myStore").with_value_serde(SET))
    driver = drive(builder.build())
    rows = driver.create_input_topic("in", S, S)
    store = driver.get_timestamped_key_value_store("myStore")
    rows.pipe_input("A", "a", 10)
    assert (store.get("A").value, store.get("A").timestamp) == ({"a"}, 10)
    rows.pipe_input("A", "b", 15)
    assert (store.get("A").value, store.get("A").timestamp) == ({"b"}, 15)
    rows.pipe_input("A", None, 12)
    assert (store.get("A").value, store.get("A").timestamp) == (set(), 15)


def test_reduce_with_an_unchanged_key_emits_the_latest_reduced_value(drive, captured):
    """shouldReduceAndEmitLatestValue (the default store format)"""
    builder = StreamsBuilder()
    builder.table("topic1", Consumed.with_(S, S)).group_by(KeyValue, Grouped.with_(S, S)).reduce(
        lambda value1, value2: f"{value1}+{value2}",
        lambda value1, value2: value1.replace(f"+{value2}", ""),
        Materialized.as_("reduce-store"),
    ).to_stream().process(captured.supplier)
    topic = drive(builder.build()).create_input_topic("topic1", S, S)
    for key, value, ts in [("A", "a", 10), ("B", "b", 15), ("A", "c", 20), ("B", "d", 18)]:
        topic.pipe_input(key, value, ts)
    assert captured.processed == [("A", "a", 10), ("B", "b", 15), ("A", "a+c", 20), ("B", "b+d", 18)]
