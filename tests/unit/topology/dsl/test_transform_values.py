"""KTable.transform_values with a ValueTransformerWithKey, its stores, materialization and lookups.

The module is marked ``on_cluster``: its tests using ``drive`` run on a KafkaStreams client over an
EmbeddedCluster too (tests/unit/topology/dsl/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams.errors import StreamsException
from kstreams.processor import ProcessorContext, Record
from kstreams.serdes import Serdes
from kstreams.state import Stores
from kstreams.testing import TestRecord
from kstreams.topology import Materialized, StreamsBuilder, ValueTransformerWithKey

S = Serdes.string()
L = Serdes.long()

pytestmark = pytest.mark.on_cluster(representative="test_transform_values_uses_its_store_and_sees_deletions")
# The reasons of the tests of this module that do not run, or run differently, on the cluster driver.
RAISES_ON_PIPING = (
    "the driver raises the processing error from pipe_input; on a cluster the client stops in ERROR"
)


class Versioned(ValueTransformerWithKey[str, str, str]):
    """``value#n``: n counts the updates of the key, kept in the store "updates"; None for None."""

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.store = context.get_state_store("updates")

    def transform(self, key: str, value: str | None) -> str | None:
        count = (self.store.get(key) or 0) + 1
        self.store.put(key, count)
        return None if value is None else f"{value}#{count}"


def updates_store() -> Any:
    return Stores.key_value_store_builder(Stores.in_memory_key_value_store("updates"), S, L)


def test_transform_values_uses_its_store_and_sees_deletions(drive) -> None:
    builder = StreamsBuilder()
    builder.add_state_store(updates_store())
    builder.table("in").transform_values(Versioned, "updates").to_stream().to("out")
    driver = drive(builder.build())
    source = driver.create_input_topic("in", S, S)
    source.pipe_input("a", "x", 1)
    source.pipe_input("a", "y", 2)
    source.pipe_input("b", "z", 3)
    source.pipe_input("a", None, 4)
    out = driver.create_output_topic("out", S, S)
    assert out.read_records_to_list() == [
        TestRecord("a", "x#1", 1),
        TestRecord("a", "y#2", 2),
        TestRecord("b", "z#1", 3),
        TestRecord("a", None, 4),
    ]
    # The transformer ran for the deletion too.
    assert driver.get_key_value_store("updates").get("a") == 3


def test_a_materialized_transform_values_table_is_queryable(drive) -> None:
    builder = StreamsBuilder()
    builder.add_state_store(updates_store())
    builder.table("in").transform_values(
        Versioned, "updates", materialized=Materialized.as_("transformed")
    ).to_stream().to("out")
    driver = drive(builder.build())
    source = driver.create_input_topic("in", S, S)
    source.pipe_input("a", "x", 1)
    source.pipe_input("a", "y", 2)
    assert driver.get_key_value_store("transformed").get("a") == "y#2"
    assert driver.create_output_topic("out", S, S).read_key_values_to_map() == {"a": "y#2"}


class Tagged(ValueTransformerWithKey[str, str, str]):
    def transform(self, key: str, value: str | None) -> str | None:
        return None if value is None else f"{key}:{value}"


def test_a_join_looks_up_an_unmaterialized_transformed_table(drive) -> None:
    builder = StreamsBuilder()
    table = builder.table("table-in").transform_values(Tagged)
    builder.stream("stream-in").join(table, lambda left, right: f"{left}+{right}").to("out")
    driver = drive(builder.build())
    driver.create_input_topic("table-in", S, S).pipe_input("a", "t", 1)
    stream = driver.create_input_topic("stream-in", S, S)
    stream.pipe_input("a", "s", 2)
    stream.pipe_input("b", "s", 3)
    assert driver.create_output_topic("out", S, S).read_records_to_list() == [TestRecord("a", "s+a:t", 2)]


def test_transform_values_names_its_node_like_kafka() -> None:
    builder = StreamsBuilder()
    builder.table("in").transform_values(Tagged).to_stream().to("out")
    text = str(builder.build().describe())
    assert "Processor: KTABLE-TRANSFORMVALUES-0000000003 (stores: [])" in text


@pytest.mark.driver_only(reason=RAISES_ON_PIPING)
def test_a_value_transformer_cannot_forward(drive) -> None:
    class Forwarding(ValueTransformerWithKey[str, str, str]):
        def init(self, context: ProcessorContext[Any, Any]) -> None:
            self.context = context

        def transform(self, key: str, value: str | None) -> str | None:
            self.context.forward(Record(key, value, 0))
            return value

    builder = StreamsBuilder()
    builder.table("in").transform_values(Forwarding).to_stream().to("out")
    driver = drive(builder.build())
    with pytest.raises(StreamsException) as failure:
        driver.create_input_topic("in", S, S).pipe_input("a", "x", 1)
    assert "must not forward" in str(failure.value) + str(failure.value.__cause__)


def test_transform_values_rejects_a_transformer_instance() -> None:
    with pytest.raises(TypeError, match="supplier of ValueTransformerWithKey"):
        StreamsBuilder().table("in").transform_values(Tagged())  # type: ignore[arg-type]
