"""KStream's stateless operators, run through the test driver."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams.processor import Processor, Record
from kstreams.serdes import Serdes
from kstreams.state.stores import Stores
from kstreams.topology import (
    Branched,
    Consumed,
    KeyValue,
    Named,
    Produced,
    Repartitioned,
    StreamsBuilder,
)

S = Serdes.string()


def _pipe(driver: Any, topic: str, *records: tuple[Any, Any]) -> None:
    source = driver.create_input_topic(topic, S, S)
    for key, value in records:
        source.pipe_input(key, value)


def _out(driver: Any, topic: str = "out", value_serde: Any = S) -> list[KeyValue]:
    return driver.create_output_topic(topic, S, value_serde).read_key_values_to_list()


def test_filter_keeps_matching_records_and_filter_not_the_others(drive):
    builder = StreamsBuilder()
    stream = builder.stream("in")
    stream.filter(lambda k, v: v.startswith("a")).to("kept")
    stream.filter_not(lambda k, v: v.startswith("a")).to("dropped")
    driver = drive(builder.build())
    _pipe(driver, "in", ("1", "apple"), ("2", "banana"), ("3", "avocado"))
    assert _out(driver, "kept") == [("1", "apple"), ("3", "avocado")]
    assert _out(driver, "dropped") == [("2", "banana")]


def test_map_replaces_key_and_value(drive):
    builder = StreamsBuilder()
    builder.stream("in").map(lambda k, v: KeyValue(v, k)).to("out")
    driver = drive(builder.build())
    _pipe(driver, "in", ("k", "v"))
    assert _out(driver) == [("v", "k")]


def test_map_accepts_a_plain_tuple(drive):
    builder = StreamsBuilder()
    builder.stream("in").map(lambda k, v: (k.upper(), v.upper())).to("out")
    driver = drive(builder.build())
    _pipe(driver, "in", ("k", "v"))
    assert _out(driver) == [("K", "V")]


def test_map_values_with_and_without_key(drive):
    builder = StreamsBuilder()
    stream = builder.stream("in")
    stream.map_values(str.upper).to("plain")
    stream.map_values(lambda k, v: f"{k}:{v}", with_key=True).to("keyed")
    driver = drive(builder.build())
    _pipe(driver, "in", ("k", "v"))
    assert _out(driver, "plain") == [("k", "V")]
    assert _out(driver, "keyed") == [("k", "k:v")]


def test_flat_map_emits_zero_or_more_records(drive):
    builder = StreamsBuilder()
    builder.stream("in").flat_map(lambda k, v: [KeyValue(c, k) for c in v]).to("out")
    driver = drive(builder.build())
    _pipe(driver, "in", ("k", "ab"), ("j", ""))
    assert _out(driver) == [("a", "k"), ("b", "k")]


def test_flat_map_values_keeps_the_key(drive):
    builder = StreamsBuilder()
    builder.stream("in").flat_map_values(str.split).to("out")
    driver = drive(builder.build())
    _pipe(driver, "in", ("k", "x y"))
    assert _out(driver) == [("k", "x"), ("k", "y")]


def test_select_key_changes_only_the_key(drive):
    builder = StreamsBuilder()
    builder.stream("in").select_key(lambda k, v: v[0]).to("out")
    driver = drive(builder.build())
    _pipe(driver, "in", ("k", "value"))
    assert _out(driver) == [("v", "value")]


def test_peek_sees_records_and_passes_them_on_and_foreach_ends_the_stream(drive):
    seen: list[tuple[str, str]] = []
    consumed: list[tuple[str, str]] = []
    builder = StreamsBuilder()
    stream = builder.stream("in")
    stream.peek(lambda k, v: seen.append((k, v))).to("out")
    stream.foreach(lambda k, v: consumed.append((k, v)))
    driver = drive(builder.build())
    _pipe(driver, "in", ("k", "v"))
    assert seen == [("k", "v")]
    assert consumed == [("k", "v")]
    assert _out(driver) == [("k", "v")]


def test_records_keep_their_timestamp_through_stateless_operators(drive):
    builder = StreamsBuilder()
    builder.stream("in").map_values(str.upper).flat_map_values(lambda v: [v, v]).to("out")
    driver = drive(builder.build())
    driver.create_input_topic("in", S, S).pipe_input("k", "v", timestamp=1234)
    records = driver.create_output_topic("out", S, S).read_records_to_list()
    assert [r.timestamp for r in records] == [1234, 1234]


def test_split_sends_each_record_to_the_first_matching_branch(drive):
    builder = StreamsBuilder()
    branches = (
        builder.stream("in")
        .split(Named.as_("s-"))
        .branch(lambda k, v: v.startswith("a"), Branched.as_("a"))
        .branch(lambda k, v: v.startswith("b"))
        .default_branch()
    )
    assert set(branches) == {"s-a", "s-2", "s-0"}
    branches["s-a"].to("a")
    branches["s-2"].to("b")
    branches["s-0"].to("rest")
    driver = drive(builder.build())
    _pipe(driver, "in", ("1", "apple"), ("2", "banana"), ("3", "cherry"), ("4", "ab"))
    assert _out(driver, "a") == [("1", "apple"), ("4", "ab")]
    assert _out(driver, "b") == [("2", "banana")]
    assert _out(driver, "rest") == [("3", "cherry")]


def test_split_names_follow_kafka_generated_names():
    builder = StreamsBuilder()
    branches = builder.stream("in").split().branch(lambda k, v: True).default_branch()
    assert set(branches) == {"KSTREAM-BRANCH-00000000011", "KSTREAM-BRANCH-00000000010"}


def test_branch_functions_and_consumers(drive):
    builder = StreamsBuilder()
    branches = (
        builder.stream("in")
        .split(Named.as_("s-"))
        .branch(lambda k, v: v == "x", Branched.with_function(lambda s: s.map_values(str.upper)))
        .branch(lambda k, v: v == "y", Branched.with_consumer(lambda s: s.to("y"), "y"))
        .no_default_branch()
    )
    assert set(branches) == {"s-1"}
    branches["s-1"].to("x")
    driver = drive(builder.build())
    _pipe(driver, "in", ("1", "x"), ("2", "y"), ("3", "z"))
    assert _out(driver, "x") == [("1", "X")]
    assert _out(driver, "y") == [("2", "y")]


def test_split_rejects_branches_after_the_default_branch():
    builder = StreamsBuilder()
    split = builder.stream("in").split()
    split.default_branch()
    with pytest.raises(ValueError, match="closed"):
        split.branch(lambda k, v: True)


def test_merge_interleaves_both_streams(drive):
    builder = StreamsBuilder()
    builder.stream("a").merge(builder.stream("b")).to("out")
    driver = drive(builder.build())
    _pipe(driver, "a", ("1", "from-a"))
    _pipe(driver, "b", ("2", "from-b"))
    assert _out(driver) == [("1", "from-a"), ("2", "from-b")]


def test_stream_of_several_topics_reads_them_all(drive):
    builder = StreamsBuilder()
    builder.stream(["a", "b"]).to("out")
    driver = drive(builder.build())
    _pipe(driver, "a", ("1", "x"))
    _pipe(driver, "b", ("2", "y"))
    assert _out(driver) == [("1", "x"), ("2", "y")]


def test_consumed_and_produced_serdes_are_used(drive):
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(Serdes.long(), Serdes.long()))
    stream.map_values(lambda v: v * 2).to("out", Produced.with_(Serdes.long(), Serdes.long()))
    driver = drive(builder.build())
    driver.create_input_topic("in", Serdes.long(), Serdes.long()).pipe_input(7, 21)
    out = driver.create_output_topic("out", Serdes.long(), Serdes.long())
    assert out.read_key_values_to_list() == [(7, 42)]


def test_stream_serdes_carry_to_the_sink_when_produced_gives_none(drive):
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(Serdes.long(), Serdes.long())).filter(lambda k, v: True).to("out")
    driver = drive(builder.build())
    driver.create_input_topic("in", Serdes.long(), Serdes.long()).pipe_input(1, 2)
    out = driver.create_output_topic("out", Serdes.long(), Serdes.long())
    assert out.read_key_values_to_list() == [(1, 2)]


def test_to_with_a_topic_extractor_routes_each_record(drive):
    builder = StreamsBuilder()
    builder.stream("in").to(lambda key, value, context: f"out-{value}")
    driver = drive(builder.build())
    _pipe(driver, "in", ("1", "x"), ("2", "y"))
    assert _out(driver, "out-x") == [("1", "x")]
    assert _out(driver, "out-y") == [("2", "y")]


class _Doubler(Processor):
    def init(self, context):
        self.context = context
        self.store = context.get_state_store("seen")

    def process(self, record: Record) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(Record(record.value, str(count), record.timestamp))


def test_process_runs_a_papi_processor_with_its_store(drive):
    builder = StreamsBuilder()
    topology = builder.build()
    topology.add_state_store(
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("seen"), S, Serdes.long())
    )
    result = builder.stream("in").process(_Doubler, "seen")
    assert result.repartition_required
    result.to("out")
    driver = drive(topology)
    _pipe(driver, "in", ("k", "a"), ("k", "b"))
    assert _out(driver) == [("a", "1"), ("b", "2")]


def test_repartition_writes_through_a_named_topic(drive):
    builder = StreamsBuilder()
    builder.stream("in").select_key(lambda k, v: v).repartition(
        Repartitioned.as_("by-value").with_number_of_partitions(3)
    ).to("out")
    topology = builder.build()
    plan = topology.build("app")
    spec = plan.internal_topics["app-by-value-repartition"]
    assert spec.kind == "repartition"
    assert spec.partitions == 3
    assert len(plan.subtopologies) == 2
    driver = drive(topology)
    _pipe(driver, "in", ("k", "v"))
    assert _out(driver) == [("v", "v")]


def test_repartition_drops_records_with_a_null_key(drive):
    builder = StreamsBuilder()
    builder.stream("in").repartition().to("out")
    driver = drive(builder.build())
    _pipe(driver, "in", (None, "lost"), ("k", "kept"))
    assert _out(driver) == [("k", "kept")]


def test_key_changing_operations_mark_the_stream_for_repartitioning():
    stream = StreamsBuilder().stream("in")
    assert not stream.repartition_required
    assert not stream.filter(lambda k, v: True).map_values(str).repartition_required
    assert stream.map(lambda k, v: (k, v)).repartition_required
    assert stream.select_key(lambda k, v: k).repartition_required
    assert stream.flat_map(lambda k, v: []).repartition_required
    # The mark survives stateless operations and merges.
    keyed = stream.select_key(lambda k, v: v)
    assert keyed.filter(lambda k, v: True).peek(print).repartition_required
    assert stream.merge(keyed).repartition_required
    assert not keyed.repartition().repartition_required


def test_named_operations_use_the_given_processor_names():
    builder = StreamsBuilder()
    builder.stream("in", Consumed.as_("source")).filter(lambda k, v: True, Named.as_("keep")).map_values(
        str, "upper"
    ).to("out", Produced.as_("sink"))
    assert set(builder.build().nodes) == {"source", "keep", "upper", "sink"}
