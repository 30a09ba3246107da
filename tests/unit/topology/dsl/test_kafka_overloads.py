"""Kafka's DSL overloads that Python can tell apart by the arguments' types are all taken:
``table``/``global_table`` with a Materialized second, ``to_table(Materialized)``, the table joins'
Named and Materialized in either order, and the Named or Materialized leading the store names of
``process``, ``process_values`` and ``transform_values``."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams.processor import Processor, ProcessorContext, Record
from kstreams.processor.fixed_key import FixedKeyProcessor
from kstreams.serdes import Serdes
from kstreams.state import Stores
from kstreams.topology import (
    Consumed,
    Materialized,
    Named,
    StreamsBuilder,
    ValueTransformerWithKey,
)

S = Serdes.string()


def _joiner(left: Any, right: Any) -> str:
    return f"{left}+{right}"


def test_global_table_takes_a_materialized_without_a_consumed(drive: Any) -> None:
    builder = StreamsBuilder()
    builder.global_table("customers", Materialized.as_("customers-store"))
    driver = drive(builder.build())
    driver.create_input_topic("customers", S, S).pipe_input("c1", "Ada")
    assert driver.get_key_value_store("customers-store").get("c1") == "Ada"


def test_table_takes_a_materialized_without_a_consumed(drive: Any) -> None:
    builder = StreamsBuilder()
    builder.table("users", Materialized.as_("users-store"))
    driver = drive(builder.build())
    driver.create_input_topic("users", S, S).pipe_input("u1", "eu")
    assert driver.get_key_value_store("users-store").get("u1") == "eu"


@pytest.mark.parametrize("method", ["table", "global_table"])
def test_a_source_table_still_refuses_what_is_neither_consumed_nor_materialized(method: str) -> None:
    with pytest.raises(TypeError, match=r"\(topic\[, Consumed\]\[, Materialized\]\)"):
        getattr(StreamsBuilder(), method)("t", Named.as_("n"))
    with pytest.raises(TypeError, match="where a Materialized goes"):
        getattr(StreamsBuilder(), method)("t", Consumed.with_(S, S), Consumed.with_(S, S))


def test_to_table_takes_a_materialized_alone(drive: Any) -> None:
    builder = StreamsBuilder()
    builder.stream("in").to_table(Materialized.as_("latest"))
    driver = drive(builder.build())
    driver.create_input_topic("in", S, S).pipe_input("k", "v")
    assert driver.get_key_value_store("latest").get("k") == "v"


def test_table_outer_join_takes_named_then_materialized(drive: Any) -> None:
    builder = StreamsBuilder()
    left, right = builder.table("left"), builder.table("right")
    left.outer_join(right, _joiner, Named.as_("j"), Materialized.as_("joined")).to_stream().to("out")
    topology = builder.build()
    assert {"j", "j-join-this", "j-join-other"} <= set(topology.nodes)
    driver = drive(topology)
    driver.create_input_topic("right", S, S).pipe_input("k", "R")
    assert driver.get_key_value_store("joined").get("k") == "None+R"


class _Tagger(Processor[Any, Any, Any, Any]):
    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.seen = context.get_state_store("seen")

    def process(self, record: Record[Any, Any]) -> None:
        self.seen.put(record.key, record.value)
        self.context.forward(record.with_value(f"tagged-{record.value}"))


class _FixedKeyTagger(FixedKeyProcessor[Any, Any, Any]):
    def init(self, context: Any) -> None:
        self.context = context
        self.seen = context.get_state_store("seen")

    def process(self, record: Any) -> None:
        self.seen.put(record.key, record.value)
        self.context.forward(record.with_value(f"tagged-{record.value}"))


def _with_seen_store() -> StreamsBuilder:
    builder = StreamsBuilder()
    builder.add_state_store(Stores.key_value_store_builder(Stores.in_memory_key_value_store("seen"), S, S))
    return builder


@pytest.mark.parametrize(("method", "supplier"), [("process", _Tagger), ("process_values", _FixedKeyTagger)])
def test_a_named_may_lead_the_store_names_of_a_processor(drive: Any, method: str, supplier: Any) -> None:
    builder = _with_seen_store()
    getattr(builder.stream("in"), method)(supplier, Named.as_("tagger"), "seen").to("out")
    topology = builder.build()
    assert "tagger" in topology.nodes
    driver = drive(topology)
    driver.create_input_topic("in", S, S).pipe_input("k", "v")
    assert driver.create_output_topic("out", S, S).read_values_to_list() == ["tagged-v"]
    assert driver.get_key_value_store("seen").get("k") == "v"


def test_a_named_given_twice_to_process_is_refused() -> None:
    builder = _with_seen_store()
    with pytest.raises(TypeError, match="two names"):
        builder.stream("in").process(_Tagger, Named.as_("a"), "seen", named="b")


class _Upper(ValueTransformerWithKey[Any, Any, Any]):
    def init(self, context: Any) -> None:
        self.seen = context.get_state_store("seen")

    def transform(self, key: Any, value: Any) -> Any:
        if value is not None:
            self.seen.put(key, value)
        return None if value is None else value.upper()

    def close(self) -> None:
        pass


def test_transform_values_takes_materialized_and_named_before_the_store_names(drive: Any) -> None:
    builder = _with_seen_store()
    builder.table("in").transform_values(_Upper, Materialized.as_("upper"), Named.as_("up"), "seen")
    topology = builder.build()
    assert "up" in topology.nodes
    driver = drive(topology)
    driver.create_input_topic("in", S, S).pipe_input("k", "v")
    assert driver.get_key_value_store("upper").get("k") == "V"
    assert driver.get_key_value_store("seen").get("k") == "v"


def test_transform_values_refuses_a_store_name_that_is_not_a_string() -> None:
    builder = _with_seen_store()
    with pytest.raises(TypeError, match=r"\(supplier\[, Materialized\]\[, Named\], store names...\)"):
        builder.table("in").transform_values(_Upper, "seen", Named.as_("late"))
