"""describe(): Kafka's TopologyDescription text, character for character, and its object API."""

from __future__ import annotations

from typing import Any

from kstreams.processor import Processor, Record
from kstreams.state.store import StateStore, StoreBuilder
from kstreams.topology.description import ProcessorDescription, SourceDescription, java_hash_set_order
from kstreams.topology.topology import Topology


class Noop(Processor):
    def process(self, record: Record[Any, Any]) -> None:
        pass


class Builder(StoreBuilder):
    store_type = "keyvalue"  # type: ignore[assignment]

    def build(self) -> StateStore:
        raise AssertionError("describe() never builds stores")


# Kafka's WordCountDemo description (docs: "Streams DSL" / "Topology description"), rebuilt with
# the Processor API in the order the DSL adds its nodes.
WORD_COUNT = """\
Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [streams-plaintext-input])
      --> KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FLATMAPVALUES-0000000001 (stores: [])
      --> KSTREAM-KEY-SELECT-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-KEY-SELECT-0000000002 (stores: [])
      --> KSTREAM-FILTER-0000000005
      <-- KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FILTER-0000000005 (stores: [])
      --> KSTREAM-SINK-0000000004
      <-- KSTREAM-KEY-SELECT-0000000002
    Sink: KSTREAM-SINK-0000000004 (topic: counts-store-repartition)
      <-- KSTREAM-FILTER-0000000005

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000006 (topics: [counts-store-repartition])
      --> KSTREAM-AGGREGATE-0000000003
    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [counts-store])
      --> KTABLE-TOSTREAM-0000000007
      <-- KSTREAM-SOURCE-0000000006
    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])
      --> KSTREAM-SINK-0000000008
      <-- KSTREAM-AGGREGATE-0000000003
    Sink: KSTREAM-SINK-0000000008 (topic: streams-wordcount-output)
      <-- KTABLE-TOSTREAM-0000000007

"""


def _word_count() -> Topology:
    t = Topology()
    t.add_source("KSTREAM-SOURCE-0000000000", "streams-plaintext-input")
    t.add_processor("KSTREAM-FLATMAPVALUES-0000000001", Noop, "KSTREAM-SOURCE-0000000000")
    t.add_processor("KSTREAM-KEY-SELECT-0000000002", Noop, "KSTREAM-FLATMAPVALUES-0000000001")
    t.add_processor("KSTREAM-FILTER-0000000005", Noop, "KSTREAM-KEY-SELECT-0000000002")
    t.add_internal_topic("counts-store-repartition")
    t.add_sink("KSTREAM-SINK-0000000004", "counts-store-repartition", "KSTREAM-FILTER-0000000005")
    t.add_source("KSTREAM-SOURCE-0000000006", "counts-store-repartition")
    t.add_processor("KSTREAM-AGGREGATE-0000000003", Noop, "KSTREAM-SOURCE-0000000006")
    t.add_state_store(Builder("counts-store"), "KSTREAM-AGGREGATE-0000000003")
    t.add_processor("KTABLE-TOSTREAM-0000000007", Noop, "KSTREAM-AGGREGATE-0000000003")
    t.add_sink("KSTREAM-SINK-0000000008", "streams-wordcount-output", "KTABLE-TOSTREAM-0000000007")
    return t


def test_describe_prints_kafkas_word_count_description_exactly() -> None:
    assert str(_word_count().describe()) == WORD_COUNT


def test_nodes_are_ordered_by_subtree_size_then_name() -> None:
    t = (
        Topology()
        .add_source("src", "in")
        .add_processor("z-long", Noop, "src")
        .add_processor("z-long-2", Noop, "z-long")
        .add_processor("a-short", Noop, "src")
    )
    text = str(t.describe())
    assert text.index("Processor: z-long ") < text.index("Processor: a-short ") < text.index("z-long-2 (")
    assert "      --> z-long, a-short\n" in text
    assert "Processor: a-short (stores: [])\n      --> none\n      <-- src\n" in text


def test_multi_parent_sinks_and_extractor_sinks_print_like_kafka() -> None:
    def route(key: Any, value: Any, metadata: Any) -> str:
        return "somewhere"

    t = (
        Topology()
        .add_source("s1", "t1")
        .add_source("s2", "t2")
        .add_sink("both", "out", "s1", "s2")
        .add_sink("dynamic", route, "s1")
    )
    text = str(t.describe())
    assert "    Sink: both (topic: out)\n      <-- s1, s2\n" in text
    assert "Sink: dynamic (extractor class: " in text
    assert "route)\n      <-- s1\n" in text


def test_object_api_exposes_subtopologies_nodes_and_neighbours() -> None:
    description = _word_count().describe()
    assert [s.id for s in description.subtopologies] == [0, 1]
    nodes = description.subtopologies[1].nodes
    source = nodes[0]
    assert isinstance(source, SourceDescription)
    assert source.topic_set == ["counts-store-repartition"]
    aggregate = nodes[1]
    assert isinstance(aggregate, ProcessorDescription)
    assert aggregate.stores == ["counts-store"]
    assert aggregate.predecessors == [source]
    assert [n.name for n in aggregate.successors] == ["KTABLE-TOSTREAM-0000000007"]
    assert description.global_stores == []
    assert description == _word_count().describe()


def test_sets_print_in_java_hash_set_order() -> None:
    # "a".hashCode() == 97 and "b".hashCode() == 98: Java's HashSet iterates a before b
    assert java_hash_set_order(["b", "a"]) == ["a", "b"]
    t = Topology().add_source("src", "b", "a")
    assert "Source: src (topics: [a, b])" in str(t.describe())
