"""Re-grouped tables: KTable.group_by and its count, reduce and aggregate."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams.errors import SerializationException
from kstreams.serdes import Serdes
from kstreams.topology import Grouped, KeyValue, Materialized, Named, Produced, StreamsBuilder
from kstreams.topology.dsl.processors.table_aggregate import ChangeSerde
from kstreams.topology.dsl.records import Change

S = Serdes.string()
L = Serdes.long()


def _region_counts(grouped: Grouped | None = None) -> StreamsBuilder:
    builder = StreamsBuilder()
    users = builder.table("user-regions")
    counts = users.group_by(lambda user, region: KeyValue(region, user), grouped).count()
    counts.to_stream().to("region-counts", Produced.with_(S, L))
    return builder


def test_count_moves_a_row_from_its_old_group_to_its_new_one(drive):
    driver = drive(_region_counts().build())
    users = driver.create_input_topic("user-regions", S, S)
    out = driver.create_output_topic("region-counts", S, L)
    users.pipe_input("alice", "eu")
    users.pipe_input("bob", "eu")
    users.pipe_input("alice", "us")  # alice leaves eu, joins us
    users.pipe_input("bob", None)  # bob is deleted
    assert out.read_key_values_to_list() == [
        ("eu", 1),
        ("eu", 2),
        ("eu", 1),
        ("us", 1),
        ("eu", 0),
    ]


def test_a_change_within_the_same_group_is_one_update(drive):
    builder = StreamsBuilder()
    builder.table("in").group_by(lambda k, v: (v[0], v)).aggregate(
        lambda: "",
        lambda key, value, agg: agg + f"+{value}",
        lambda key, value, agg: agg + f"-{value}",
    ).to_stream().to("out")
    driver = drive(builder.build())
    rows = driver.create_input_topic("in", S, S)
    rows.pipe_input("k", "a1")
    rows.pipe_input("k", "a2")
    assert driver.create_output_topic("out", S, S).read_values_to_list() == ["+a1", "+a1-a1+a2"]


def test_reduce_with_adder_and_subtractor(drive):
    builder = StreamsBuilder()
    amounts = builder.table("amounts").map_values(int)
    amounts.group_by(lambda account, amount: ("total", amount), Grouped.with_(S, L)).reduce(
        lambda total, amount: total + amount,
        lambda total, amount: total - amount,
        Materialized.as_("totals").with_value_serde(L),
    )
    driver = drive(builder.build())
    rows = driver.create_input_topic("amounts", S, S)
    rows.pipe_input("a", "10")
    rows.pipe_input("b", "5")
    rows.pipe_input("a", "7")
    assert driver.get_key_value_store("totals").get("total") == 12


def test_repartition_topic_naming():
    plan = _region_counts().build().build("app")
    assert "app-KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition" in plan.internal_topics
    assert len(plan.subtopologies) == 2
    plan = _region_counts(Grouped.as_("by-region")).build().build("app")
    assert "app-by-region-repartition" in plan.internal_topics


def test_grouping_materializes_the_source_table_for_its_old_values():
    builder = _region_counts()
    assert "user-regions-STATE-STORE-0000000000" in builder.build().store_builders


def test_change_serde_round_trips_every_shape():
    serde = ChangeSerde(S)
    for change in (Change("new", "old"), Change("new", None), Change(None, "old"), Change("", "o")):
        assert serde.deserialize("t", serde.serialize("t", change)) == change


def test_change_serde_writes_kafkas_changed_serializer_bytes():
    """Kafka 4.1.1's ChangedSerializer with a StringSerializer wrote these (a Java program on its jar)."""
    serde = ChangeSerde(S)
    assert serde.serialize("t", Change("new", None)).hex() == "6e657701"
    assert serde.serialize("t", Change(None, "old")).hex() == "6f6c6400"
    assert serde.serialize("t", Change("new", "old")).hex() == "066e65776f6c6402"
    assert serde.serialize("t", Change("", "o")).hex() == "006f02"
    # A value of 200 bytes: its length takes two varint bytes; flag 5 has an "is latest" byte.
    long = "x" * 200
    assert serde.deserialize("t", serde.serialize("t", Change(long, "o"))) == Change(long, "o")
    assert serde.deserialize("t", bytes.fromhex("066e65776f6c640105")) == Change("new", "old")
    with pytest.raises(SerializationException, match="without new and old"):
        serde.serialize("t", Change(None, None))


def test_change_serde_takes_the_default_value_serde_when_given_none():
    serde = ChangeSerde(None)
    serde.bind_defaults({"default.value.serde": "long"})
    data: Any = serde.serialize("t", Change(1, 2))
    assert serde.deserialize("t", data) == Change(1, 2)


def test_a_table_aggregation_takes_kafka_s_named_then_materialized(drive: Any) -> None:
    builder = StreamsBuilder()
    regions = builder.table("users").group_by(
        lambda user, region: KeyValue(region, user), Grouped.with_(S, S)
    )
    regions.count(Named.as_("per-region"), Materialized.as_("region-counts")).to_stream().to(
        "out", Produced.with_(S, Serdes.long())
    )
    topology = builder.build()
    assert "per-region" in topology.nodes
    driver = drive(topology)
    driver.create_input_topic("users", S, S).pipe_input("ann", "eu")
    assert driver.get_key_value_store("region-counts").get("eu") == 1


def test_a_selector_that_returns_none_skips_the_row(drive: Any) -> None:
    # Kafka's KTableRepartitionMap skips a null KeyValue as it skips a null key or value.
    builder = StreamsBuilder()
    users = builder.table("user-regions")
    counts = users.group_by(lambda user, region: None if region == "none" else KeyValue(region, user)).count()
    counts.to_stream().to("region-counts", Produced.with_(S, L))
    driver = drive(builder.build())
    regions = driver.create_input_topic("user-regions", S, S)
    out = driver.create_output_topic("region-counts", S, L)
    regions.pipe_input("alice", "none")  # no group: skipped
    regions.pipe_input("alice", "eu")  # the old row had no group: nothing to subtract
    regions.pipe_input("alice", "none")  # leaves eu, joins no group
    assert out.read_key_values_to_list() == [("eu", 1), ("eu", 0)]
