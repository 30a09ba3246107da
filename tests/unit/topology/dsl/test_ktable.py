"""KTable: source tables, filter, map_values, to_stream and materialization."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams.errors import StreamsException
from kstreams.serdes import Serdes
from kstreams.topology import (
    Consumed,
    Materialized,
    Named,
    StreamsBuilder,
    TimeWindows,
)

S = Serdes.string()


def _updates(driver: Any, topic: str = "out") -> list[tuple[Any, Any]]:
    return [tuple(kv) for kv in driver.create_output_topic(topic, S, S).read_key_values_to_list()]


def test_table_updates_become_records_and_deletions_become_none(drive):
    builder = StreamsBuilder()
    builder.table("in").to_stream().to("out")
    driver = drive(builder.build())
    rows = driver.create_input_topic("in", S, S)
    rows.pipe_input("a", "1")
    rows.pipe_input("a", "2")
    rows.pipe_input("a", None)
    rows.pipe_input(None, "no key")  # a table row needs a key: dropped
    assert _updates(driver) == [("a", "1"), ("a", "2"), ("a", None)]


def test_materialized_table_is_queryable_and_has_its_own_changelog(drive):
    builder = StreamsBuilder()
    table = builder.table("in", Consumed.with_(S, S), Materialized.as_("rows"))
    assert table.queryable_store_name == "rows"
    topology = builder.build()
    plan = topology.build("app")
    assert plan.internal_topics["app-rows-changelog"].store == "rows"
    driver = drive(topology)
    driver.create_input_topic("in", S, S).pipe_input("a", "1")
    assert driver.get_key_value_store("rows").get("a") == "1"


def test_unmaterialized_table_has_no_store_and_no_queryable_name():
    builder = StreamsBuilder()
    table = builder.table("in")
    assert table.queryable_store_name is None
    assert not builder.build().store_builders


def test_table_filter_turns_failing_rows_into_deletions(drive):
    builder = StreamsBuilder()
    builder.table("in").filter(lambda k, v: int(v) > 10).to_stream().to("out")
    driver = drive(builder.build())
    rows = driver.create_input_topic("in", S, S)
    rows.pipe_input("a", "20")
    rows.pipe_input("a", "5")
    assert _updates(driver) == [("a", "20"), ("a", None)]


def test_materialized_filter_keeps_only_passing_rows(drive):
    builder = StreamsBuilder()
    builder.table("in").filter_not(lambda k, v: v == "hide", Materialized.as_("visible"))
    driver = drive(builder.build())
    rows = driver.create_input_topic("in", S, S)
    rows.pipe_input("a", "show")
    rows.pipe_input("b", "hide")
    store = driver.get_key_value_store("visible")
    assert store.get("a") == "show"
    assert store.get("b") is None


def test_table_map_values(drive):
    builder = StreamsBuilder()
    table = builder.table("in")
    table.map_values(str.upper).to_stream().to("upper")
    table.map_values(lambda k, v: f"{k}={v}", with_key=True).to_stream().to("keyed")
    driver = drive(builder.build())
    driver.create_input_topic("in", S, S).pipe_input("a", "x")
    assert _updates(driver, "upper") == [("a", "X")]
    assert _updates(driver, "keyed") == [("a", "a=x")]


def test_to_stream_with_a_key_mapper_needs_a_repartition():
    builder = StreamsBuilder()
    table = builder.table("in")
    assert not table.to_stream().repartition_required
    assert table.to_stream(key_mapper=lambda k, v: v).repartition_required
    assert table.to_stream(lambda k, v: v).repartition_required


def test_to_stream_takes_kafka_s_four_forms(drive):
    # to_stream(), to_stream(named), to_stream(mapper), to_stream(mapper, named)
    builder = StreamsBuilder()
    table = builder.table("in")
    table.to_stream().to("plain")
    table.to_stream("named-plain").to("named")
    table.to_stream(lambda k, v: f"{k}:{v}").to("rekeyed")
    table.to_stream(lambda k, v: v, Named.as_("by-value")).to("by-value")
    topology = builder.build()
    assert {"named-plain", "by-value"} <= set(topology.nodes)
    driver = drive(topology)
    driver.create_input_topic("in", S, S).pipe_input("a", "x")
    assert _updates(driver, "plain") == _updates(driver, "named") == [("a", "x")]
    assert _updates(driver, "rekeyed") == [("a:x", "x")]
    assert _updates(driver, "by-value") == [("x", "x")]


def test_to_stream_refuses_two_names_or_two_mappers():
    table = StreamsBuilder().table("in")
    with pytest.raises(TypeError, match="two names"):
        table.to_stream("a", "b")
    with pytest.raises(TypeError, match="key mapper twice"):
        table.to_stream(lambda k, v: v, key_mapper=lambda k, v: k)


def test_table_source_names_follow_kafka():
    builder = StreamsBuilder()
    builder.table("in")
    assert list(builder.build().nodes) == ["KSTREAM-SOURCE-0000000001", "KTABLE-SOURCE-0000000002"]
    builder = StreamsBuilder()
    builder.table("in", Consumed.as_("rows"))
    assert list(builder.build().nodes) == ["rows-source", "rows"]


def test_a_windowed_table_is_looked_up_by_windowed_key_only(drive):
    # Kafka joins a windowed table with a stream of windowed keys; a plain key is a mistake that
    # only the first record shows (Java's types catch it at compile time).
    builder = StreamsBuilder()
    windowed = builder.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10)).count()
    builder.stream("other").join(windowed, lambda a, b: a).to("out")
    driver = drive(builder.build())
    with pytest.raises(StreamsException, match="looked up by windowed key"):
        driver.create_input_topic("other", S, S).pipe_input("k", "v", timestamp=1)


def test_aggregation_table_can_be_filtered_and_joined(drive):
    builder = StreamsBuilder()
    counts = builder.stream("clicks").group_by_key().count(Materialized.as_("clicks-per-user"))
    frequent = counts.filter(lambda user, n: n >= 2)
    builder.stream("visits").join(frequent, lambda visit, n: f"{visit}:{n}").to("out")
    driver = drive(builder.build())
    clicks = driver.create_input_topic("clicks", S, S)
    visits = driver.create_input_topic("visits", S, S)
    clicks.pipe_input("u", "c")
    visits.pipe_input("u", "v1")  # one click: not frequent yet
    clicks.pipe_input("u", "c")
    visits.pipe_input("u", "v2")
    assert _updates(driver) == [("u", "v2:2")]


def test_stream_to_table_keeps_the_latest_value_per_key(drive):
    builder = StreamsBuilder()
    table = builder.stream("in").to_table(materialized=Materialized.as_("latest"))
    table.to_stream().to("out")
    driver = drive(builder.build())
    rows = driver.create_input_topic("in", S, S)
    rows.pipe_input("a", "1")
    rows.pipe_input("a", "2")
    assert _updates(driver) == [("a", "1"), ("a", "2")]
    assert driver.get_key_value_store("latest").get("a") == "2"


def test_stream_to_table_after_a_key_change_repartitions():
    builder = StreamsBuilder()
    builder.stream("in").select_key(lambda k, v: v).to_table()
    plan = builder.build().build("app")
    assert "app-KSTREAM-TOTABLE-0000000002-repartition" in plan.internal_topics


def test_table_operations_take_kafka_s_named_then_materialized(drive):
    builder = StreamsBuilder()
    table = builder.table("in")
    table.filter(lambda k, v: v != "drop", Named.as_("keep"), Materialized.as_("kept")).to_stream().to("out")
    table.map_values(str.upper, Named.as_("upper")).to_stream().to("upper")
    topology = builder.build()
    assert {"keep", "upper"} <= set(topology.nodes)
    driver = drive(topology)
    driver.create_input_topic("in", S, S).pipe_input("a", "x")
    assert driver.get_key_value_store("kept").get("a") == "x"
    assert _updates(driver, "upper") == [("a", "X")]


def test_a_table_join_takes_kafka_s_named_then_materialized(drive):
    builder = StreamsBuilder()
    joined = builder.table("left").join(
        builder.table("right"), lambda a, b: a + b, Named.as_("both"), Materialized.as_("joined")
    )
    joined.to_stream().to("out")
    topology = builder.build()
    assert "both" in topology.nodes
    driver = drive(topology)
    driver.create_input_topic("left", S, S).pipe_input("k", "a")
    driver.create_input_topic("right", S, S).pipe_input("k", "b")
    assert driver.get_key_value_store("joined").get("k") == "ab"
    assert _updates(driver) == [("k", "ab")]


def test_filter_of_a_stored_table_forwards_nothing_for_a_row_it_never_held(drive):
    # table-filter-tombstone: as Kafka's KTableFilter, the filter takes the stored parent's old
    # values, so a row dropped now and before is no news downstream; a row it held is deleted.
    builder = StreamsBuilder()
    table = builder.table("in-t", Materialized.as_("source"))
    table.filter(lambda key, value: key == "a").to_stream().to("out")
    driver = drive(builder.build())
    source = driver.create_input_topic("in-t", S, S)
    out = driver.create_output_topic("out", S, S)
    source.pipe_input("d", "xz", timestamp=7)
    assert out.read_key_values_to_list() == []
    source.pipe_input("a", "x", timestamp=8)
    source.pipe_input("a", None, timestamp=9)
    source.pipe_input("a", None, timestamp=10)  # not held any more: nothing
    assert out.read_key_values_to_list() == [("a", "x"), ("a", None)]


@pytest.mark.parametrize("join", ["left_join", "outer_join"])
def test_outer_join_forwards_nothing_for_a_key_neither_side_holds(drive, join):
    # table-join-absent-tombstone: the join asks its outer side for old values (Kafka's doJoin),
    # so deleting a key that side never held, with no row on the other side, is no news.
    builder = StreamsBuilder()
    left, right = builder.table("in-t"), builder.table("in-u")
    getattr(left, join)(right, lambda a, b: f"{a}+{b}").to_stream().to("out")
    driver = drive(builder.build(), statestore_cache_max_bytes=0)
    rows = driver.create_input_topic("in-t", S, S)
    rows.pipe_input("ab", None, timestamp=0)
    assert _updates(driver) == []
    rows.pipe_input("ab", "x", timestamp=1)
    rows.pipe_input("ab", None, timestamp=2)  # it held the row: a tombstone
    assert _updates(driver) == [("ab", "x+None"), ("ab", None)]


def test_a_join_s_outer_side_and_a_foreign_key_join_s_table_ask_a_filter_for_old_values(drive):
    # As in Kafka, a filter forwards a tombstone for every row it drops, unless a downstream makes
    # its parent send old values: the outer side of a table-table join, or the other table of a
    # foreign-key join, does; the filter then forwards nothing for a row it never held.
    def filtered(builder: StreamsBuilder, topic: str) -> Any:
        table = builder.table(topic).filter(lambda key, value: value != "drop")
        table.to_stream().to(f"{topic}-out")
        return table

    rows = [("a", "drop"), ("b", "keep"), ("b", "drop"), ("c", None)]
    for join in (None, "left_join", "foreign_key_join"):
        builder = StreamsBuilder()
        table = filtered(builder, "in-t")
        if join == "left_join":
            table.left_join(builder.table("in-u"), lambda a, b: f"{a}+{b}")
        elif join == "foreign_key_join":
            builder.table("in-u").join(table, lambda value: value, lambda a, b: f"{a}+{b}")
        driver = drive(builder.build(), statestore_cache_max_bytes=0)
        topic = driver.create_input_topic("in-t", S, S)
        for ts, (key, value) in enumerate(rows):
            topic.pipe_input(key, value, timestamp=ts)
        expected = [("b", "keep"), ("b", None)]
        if join is None:
            expected = [("a", None), *expected, ("c", None)]
        assert _updates(driver, "in-t-out") == expected, join
