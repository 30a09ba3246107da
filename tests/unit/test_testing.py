"""TopologyTestDriver end to end with Processor API topologies."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pytest

from kstreams.config import StreamsConfig
from kstreams.processor import Processor, ProcessorContext, PunctuationType, Record
from kstreams.serdes import Serdes
from kstreams.state.stores import Stores
from kstreams.testing import TestRecord, TopologyTestDriver
from kstreams.topology.topology import Topology

S = Serdes.string()
L = Serdes.long()


class SplitWords(Processor):
    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context

    def process(self, record: Record[Any, Any]) -> None:
        for word in record.value.lower().split():
            self.context.forward(record.with_key(word).with_value(word))


class CountWords(Processor):
    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.store = context.get_state_store("counts")

    def process(self, record: Record[Any, Any]) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(record.with_value(count))


def counts_store(caching: bool = False) -> Any:
    builder = Stores.key_value_store_builder(Stores.in_memory_key_value_store("counts"), S, L)
    return builder.with_caching_enabled() if caching else builder


def word_count(*, repartition: bool = False, caching: bool = False) -> Topology:
    topology = Topology().add_source("lines", "text", key_deserializer=S, value_deserializer=S)
    topology.add_processor("split", SplitWords, "lines")
    parent = "split"
    if repartition:
        topology.add_internal_topic("words-repartition")
        topology.add_sink("to-words", "words-repartition", "split", key_serializer=S, value_serializer=S)
        topology.add_source("words", "words-repartition", key_deserializer=S, value_deserializer=S)
        parent = "words"
    topology.add_processor("count", CountWords, parent)
    topology.add_state_store(counts_store(caching), "count")
    topology.add_sink("out", "counts", "count", key_serializer=S, value_serializer=L)
    return topology


def test_word_count_with_a_store_counts_across_records() -> None:
    with TopologyTestDriver(word_count()) as driver:
        text = driver.create_input_topic("text", S, S)
        counts = driver.create_output_topic("counts", S, L)
        text.pipe_input(None, "the cat")
        text.pipe_input(None, "The dog")
        assert counts.read_key_values_to_list() == [("the", 1), ("cat", 1), ("the", 2), ("dog", 1)]
        assert counts.is_empty()
        store = driver.get_key_value_store("counts")
        assert store.get("the") == 2
        assert driver.get_state_store("counts") is store
        assert driver.get_window_store("counts") is None
        assert driver.get_state_store("nope") is None


def test_records_through_a_repartition_topic_are_processed_before_pipe_input_returns() -> None:
    topology = word_count(repartition=True)
    assert len(topology.build("test-driver").subtopologies) == 2
    with TopologyTestDriver(topology) as driver:
        driver.create_input_topic("text", S, S).pipe_input(None, "a b a")
        counts = driver.create_output_topic("counts", S, L)
        assert counts.read_key_values_to_map() == {"a": 2, "b": 1}
        repartition = "test-driver-words-repartition"
        assert driver.produced_topic_names() == {"counts", repartition, "test-driver-counts-changelog"}
        # internal topics are readable under their prefixed names, as in Kafka's driver
        assert driver.create_output_topic(repartition, S, S).read_values_to_list() == ["a", "b", "a"]


def test_a_user_topic_written_and_read_back_is_processed_again() -> None:
    topology = (
        Topology()
        .add_source("src", "in", key_deserializer=S, value_deserializer=S)
        .add_sink("to-through", "through", "src", key_serializer=S, value_serializer=S)
        .add_source("through-src", "through", key_deserializer=S, value_deserializer=S)
        .add_sink("out", "out", "through-src", key_serializer=S, value_serializer=S)
    )
    with TopologyTestDriver(topology) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v", timestamp=3)
        assert driver.create_output_topic("out", S, S).read_record() == TestRecord("k", "v", 3)
        assert driver.create_output_topic("through", S, S).get_queue_size() == 1


def test_caching_stores_flush_after_every_input_record_like_kafkas_driver() -> None:
    with TopologyTestDriver(word_count(caching=True)) as driver:
        driver.create_input_topic("text", S, S).pipe_input(None, "x")
        assert driver.create_output_topic("counts", S, L).read_key_value() == ("x", 1)


class Emitter(Processor):
    """Buffers values and emits their sum on a wall-clock punctuation, and the stream time on a
    stream-time punctuation."""

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.total = 0
        context.schedule(timedelta(seconds=10), PunctuationType.WALL_CLOCK_TIME, self.emit_total)
        context.schedule(1000, PunctuationType.STREAM_TIME, self.emit_stream_time)

    def process(self, record: Record[Any, Any]) -> None:
        self.total += record.value

    def emit_total(self, timestamp: int) -> None:
        self.context.forward(Record("total", self.total, timestamp), "totals")

    def emit_stream_time(self, timestamp: int) -> None:
        self.context.forward(Record("stream-time", timestamp, timestamp), "ticks")


def emitter_topology() -> Topology:
    return (
        Topology()
        .add_source("src", "numbers", key_deserializer=S, value_deserializer=L)
        .add_processor("emitter", Emitter, "src")
        .add_sink("totals", "totals", "emitter", key_serializer=S, value_serializer=L)
        .add_sink("ticks", "ticks", "emitter", key_serializer=S, value_serializer=L)
    )


def test_wall_clock_punctuations_fire_when_the_driver_clock_advances() -> None:
    with TopologyTestDriver(emitter_topology(), initial_wall_clock_time_ms=5_000) as driver:
        numbers = driver.create_input_topic("numbers", S, L)
        totals = driver.create_output_topic("totals", S, L)
        numbers.pipe_input("k", 3)
        numbers.pipe_input("k", 4)
        driver.advance_wall_clock_time(9_999)
        assert totals.is_empty()
        driver.advance_wall_clock_time(timedelta(milliseconds=1))
        record = totals.read_record()
        assert (record.key, record.value, record.timestamp) == ("total", 7, 15_000)
        driver.advance_wall_clock_time(25_000)  # missed intervals fire once
        assert totals.read_values_to_list() == [7]


def test_stream_time_punctuations_follow_record_timestamps() -> None:
    with TopologyTestDriver(emitter_topology()) as driver:
        numbers = driver.create_input_topic("numbers", S, L, start_timestamp=500, auto_advance=400)
        ticks = driver.create_output_topic("ticks", S, L)
        for _ in range(4):  # timestamps 500, 900, 1300, 1700
            numbers.pipe_input("k", 1)
        assert ticks.read_values_to_list() == [500, 1300]
        numbers.pipe_input("k", 1, timestamp=5_000)
        assert ticks.get_queue_size() == 1
        assert ticks.read_value() == 5_000


def test_input_topic_helpers_and_output_topic_readers() -> None:
    topology = (
        Topology()
        .add_source("src", "in", key_deserializer=S, value_deserializer=S)
        .add_sink("sink", "out", "src", key_serializer=S, value_serializer=S)
    )
    with TopologyTestDriver(topology) as driver:
        inp = driver.create_input_topic(
            "in", S, S, start_timestamp=100, auto_advance=timedelta(milliseconds=5)
        )
        out = driver.create_output_topic("out", S, S)
        inp.pipe_key_value_list([("a", "1"), ("b", "2")])
        inp.advance_time(1000)
        inp.pipe_input(TestRecord("c", "3", headers=[("h", b"x")]))
        inp.pipe_value_list(["4"])
        inp.pipe_record_list([TestRecord("d", "5", 7)])
        inp.pipe_key_value_list([("e", "6"), ("f", "7")], start_timestamp=50, advance=10)
        records = out.read_records_to_list()
        assert [(r.key, r.value, r.timestamp) for r in records] == [
            ("a", "1", 100),
            ("b", "2", 105),
            ("c", "3", 1110),
            (None, "4", 1115),
            ("d", "5", 7),
            ("e", "6", 50),
            ("f", "7", 60),
        ]
        assert records[2].headers == [("h", b"x")]
        with pytest.raises(IndexError, match="Empty topic: out"):
            out.read_value()
        with pytest.raises(ValueError, match="Unknown topic: nope"):
            driver.create_input_topic("nope", S, S).pipe_input("k", "v")


@pytest.mark.parametrize("as_streams_config", [False, True])
def test_default_serdes_come_from_the_config(as_streams_config: bool) -> None:
    topology = Topology().add_source("src", "in").add_sink("sink", "out", "src")
    config: Any = {"default.key.serde": "string", "default.value.serde": "long"}
    if as_streams_config:
        config = StreamsConfig({"application.id": "my-app", **config})
    with TopologyTestDriver(topology, config) as driver:
        driver.create_input_topic("in", S, L).pipe_input("k", 42)
        assert driver.create_output_topic("out", S, L).read_key_value() == ("k", 42)
        assert driver.config.application_id == ("my-app" if as_streams_config else "test-driver")


def test_close_removes_the_temporary_state_directory() -> None:
    driver = TopologyTestDriver(word_count())
    state_dir = driver.config["state.dir"]
    assert os.path.isdir(state_dir)
    driver.close()
    assert not os.path.exists(state_dir)
    with pytest.raises(RuntimeError, match="closed"):
        driver.advance_wall_clock_time(1)
