"""The Processor API Topology: validation, naming, subtopology grouping and numbering."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams.errors import TopologyException
from kstreams.processor import Processor, Record
from kstreams.serdes import Serdes
from kstreams.state.store import StateStore, StoreBuilder
from kstreams.topology.topology import Topology


class Noop(Processor):
    def process(self, record: Record[Any, Any]) -> None:
        pass


class TinyStore(StateStore):
    def __init__(self, name: str) -> None:
        self._name = name
        self._open = False

    @property
    def name(self) -> str:
        return self._name

    def init(self, context: Any, root: StateStore) -> None:
        self._open = True

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._open = False

    @property
    def is_open(self) -> bool:
        return self._open


class TinyBuilder(StoreBuilder):
    def __init__(self, name: str, store_type: str = "keyvalue", retention_ms: int = -1) -> None:
        super().__init__(name)
        self._type = store_type
        self._retention = retention_ms

    @property
    def store_type(self) -> str:
        return self._type

    @property
    def retention_ms(self) -> int:
        return self._retention

    def build(self) -> StateStore:
        return TinyStore(self.name)


def test_duplicate_node_names_are_rejected_naming_the_node() -> None:
    topology = Topology().add_source("src", "in")
    with pytest.raises(TopologyException, match="Processor src is already added"):
        topology.add_processor("src", Noop, "src")
    with pytest.raises(TopologyException, match="src is already added"):
        topology.add_sink("src", "out", "src")


def test_unknown_parent_is_rejected_with_the_fix() -> None:
    topology = Topology().add_source("src", "in")
    with pytest.raises(TopologyException, match="Predecessor processor nope is not added yet for p"):
        topology.add_processor("p", Noop, "nope")
    with pytest.raises(TopologyException, match="Predecessor processor nope is not added yet for sink"):
        topology.add_sink("sink", "out", "nope")


def test_processor_and_sink_need_a_parent() -> None:
    topology = Topology().add_source("src", "in")
    with pytest.raises(TopologyException, match="Processor p must have at least one parent"):
        topology.add_processor("p", Noop)
    with pytest.raises(TopologyException, match="Sink s must have at least one parent"):
        topology.add_sink("s", "out")


def test_a_sink_cannot_be_a_parent_and_a_node_not_its_own_parent() -> None:
    topology = Topology().add_source("src", "in").add_sink("sink", "out", "src")
    with pytest.raises(TopologyException, match="Sink sink cannot be used a parent"):
        topology.add_processor("p", Noop, "sink")
    with pytest.raises(TopologyException, match="cannot be a predecessor of itself"):
        topology.add_processor("p", Noop, "p")


def test_a_topic_is_read_by_one_source_only() -> None:
    topology = Topology().add_source("a", "in")
    with pytest.raises(TopologyException, match="Topic in has already been registered by another source"):
        topology.add_source("b", "other", "in")
    with pytest.raises(TopologyException, match="at least one topic"):
        topology.add_source("c")


def test_a_processor_instance_is_not_a_supplier() -> None:
    with pytest.raises(TopologyException, match="supplier"):
        Topology().add_source("src", "in").add_processor("p", Noop(), "src")  # type: ignore[arg-type]


def test_bad_serdes_and_offset_reset_are_rejected() -> None:
    with pytest.raises(TopologyException, match="key_deserializer"):
        Topology().add_source("src", "in", key_deserializer=object())
    with pytest.raises(TopologyException, match="offset_reset"):
        Topology().add_source("src", "in", offset_reset="middle")
    with pytest.raises(TopologyException, match="value_serializer"):
        Topology().add_source("src", "in").add_sink("s", "out", "src", value_serializer=object())


def test_store_connection_mistakes_name_the_store_and_node() -> None:
    topology = Topology().add_source("src", "in").add_processor("p", Noop, "src").add_sink("s", "o", "p")
    with pytest.raises(TopologyException, match="StateStore missing is not added yet"):
        topology.connect_processor_and_state_stores("p", "missing")
    topology.add_state_store(TinyBuilder("store"))
    with pytest.raises(TopologyException, match="Processor ghost is not added yet"):
        topology.connect_processor_and_state_stores("ghost", "store")
    with pytest.raises(TopologyException, match="to a source node or a sink node"):
        topology.connect_processor_and_state_stores("src", "store")
    with pytest.raises(
        TopologyException, match="A different StateStore has already been added with the name"
    ):
        topology.add_state_store(TinyBuilder("store"))


def test_generated_names_share_one_counter_like_kafka() -> None:
    topology = Topology()
    assert topology.new_name("KSTREAM-SOURCE-") == "KSTREAM-SOURCE-0000000000"
    assert topology.new_store_name("KSTREAM-AGGREGATE-") == "KSTREAM-AGGREGATE-STATE-STORE-0000000001"
    assert topology.new_name("KSTREAM-SINK-") == "KSTREAM-SINK-0000000002"


def test_supplier_with_stores_adds_and_connects_them() -> None:
    class Supplier:
        def __call__(self) -> Processor[Any, Any, Any, Any]:
            return Noop()

        def stores(self) -> list[StoreBuilder]:
            return [TinyBuilder("s1")]

    topology = Topology().add_source("src", "in").add_processor("p", Supplier(), "src")
    assert topology.store_users == {"s1": ("p",)}


def _two_pipelines() -> Topology:
    return (
        Topology()
        .add_source("src-a", "a")
        .add_processor("pa", Noop, "src-a")
        .add_source("src-b", "b")
        .add_processor("pb", Noop, "src-b")
        .add_sink("sink-a", "out-a", "pa")
    )


def test_unconnected_pipelines_are_separate_subtopologies_numbered_by_first_node() -> None:
    plan = _two_pipelines().build("app")
    assert [s.source_topics for s in plan.subtopologies] == [("a",), ("b",)]
    assert [s.id for s in plan.subtopologies] == [0, 1]
    assert plan.subtopologies[0].sink_topics == ("out-a",)


def test_processors_sharing_a_store_join_one_subtopology() -> None:
    topology = _two_pipelines().add_state_store(TinyBuilder("shared"), "pa", "pb")
    plan = topology.build("app")
    assert len(plan.subtopologies) == 1
    assert plan.subtopologies[0].source_topics == ("a", "b")
    assert plan.subtopologies[0].stores == ("shared",)


def test_a_processor_with_two_parents_joins_their_subtopologies() -> None:
    topology = _two_pipelines().add_processor("join", Noop, "pa", "pb")
    assert len(topology.build("app").subtopologies) == 1


def test_repartition_topics_split_subtopologies_and_get_the_application_prefix() -> None:
    topology = (
        Topology()
        .add_source("src", "in")
        .add_processor("key-by", Noop, "src")
        .add_internal_topic("by-key-repartition", partitions=4, config={"retention.ms": "1000"})
        .add_sink("rep-sink", "by-key-repartition", "key-by")
        .add_source("rep-src", "by-key-repartition")
        .add_processor("count", Noop, "rep-src")
        .add_state_store(TinyBuilder("counts"), "count")
    )
    plan = topology.build("myapp")
    first, second = plan.subtopologies
    assert first.sink_topics == ("myapp-by-key-repartition",)
    assert first.repartition_sink_topics == ("myapp-by-key-repartition",)
    assert second.source_topics == ("myapp-by-key-repartition",)
    assert second.repartition_source_topics == ("myapp-by-key-repartition",)
    assert second.external_source_topics == ()
    spec = plan.internal_topics["myapp-by-key-repartition"]
    assert (spec.kind, spec.subtopology, spec.partitions) == ("repartition", 1, 4)
    assert spec.config == {"retention.ms": "1000"}
    assert plan.source_topics == ("in",)
    assert plan.subtopology_for_topic("myapp-by-key-repartition").id == 1


def test_logged_stores_get_changelog_specs_and_unlogged_ones_none() -> None:
    window = TinyBuilder("win", store_type="window", retention_ms=60_000)
    window.with_logging_enabled({"segment.ms": "10"})
    plain = TinyBuilder("plain").with_logging_disabled()
    topology = (
        Topology()
        .add_source("src", "in")
        .add_processor("p", Noop, "src")
        .add_state_store(TinyBuilder("kv"), "p")
        .add_state_store(window, "p")
        .add_state_store(plain, "p")
    )
    plan = topology.build("app")
    sub = plan.subtopologies[0]
    assert sub.stores == ("kv", "win", "plain")
    assert sub.changelog_topics == {"kv": "app-kv-changelog", "win": "app-win-changelog"}
    kv = plan.internal_topics["app-kv-changelog"]
    assert (kv.kind, kv.store, kv.windowed, kv.retention_ms) == ("changelog", "kv", False, -1)
    win = plan.internal_topics["app-win-changelog"]
    assert (win.windowed, win.retention_ms, win.config) == (True, 60_000, {"segment.ms": "10"})
    assert "app-plain-changelog" not in plan.internal_topics


def test_copartition_groups_resolve_topics_and_merge_transitively() -> None:
    topology = (
        Topology()
        .add_source("a", "ta")
        .add_source("b", "tb")
        .add_source("c", "tc")
        .add_internal_topic("rep")
        .add_source("r", "rep")
        .copartition_sources("a", "b")
        .copartition_sources("b", "r")
        .copartition_sources("c")
    )
    plan = topology.build("app")
    assert set(plan.copartition_groups) == {frozenset({"ta", "tb", "app-rep"}), frozenset({"tc"})}
    with pytest.raises(TopologyException, match="not a source"):
        topology.copartition_sources("nope")


def test_fixed_repartition_counts_in_one_copartition_group_must_agree() -> None:
    topology = (
        Topology()
        .add_internal_topic("x", partitions=2)
        .add_internal_topic("y", partitions=3)
        .add_source("sx", "x")
        .add_source("sy", "y")
        .copartition_sources("sx", "sy")
    )
    with pytest.raises(TopologyException, match="do not have the same number of partitions"):
        topology.build("app")


def test_offset_reset_overrides_are_in_the_plan() -> None:
    plan = Topology().add_source("src", "in", offset_reset="latest").build("app")
    assert plan.offset_resets == {"in": "latest"}


def test_each_graph_has_its_own_processors_and_stores() -> None:
    topology = (
        Topology()
        .add_source("src", "in", key_deserializer=Serdes.string(), value_deserializer=Serdes.string())
        .add_processor("p", Noop, "src")
        .add_state_store(TinyBuilder("s"), "p")
        .add_sink("out", "out", "p", key_serializer=Serdes.string(), value_serializer=Serdes.string())
    )
    sub = topology.build("app").subtopologies[0]
    one, two = sub.create_graph(), sub.create_graph()
    assert one.nodes["p"].processor is not two.nodes["p"].processor
    assert one.stores["s"] is not two.stores["s"]
    assert [c.name for c in one.nodes["src"].children] == ["p"]
    assert one.source_for("in").name == "src"


def test_missing_serdes_without_defaults_fail_when_the_graph_is_built_naming_the_node() -> None:
    sub = Topology().add_source("src", "in").build("app").subtopologies[0]
    with pytest.raises(
        Exception, match=r"Source src has no key deserializer and default\.key\.serde is not set"
    ):
        sub.create_graph()
    configured = (
        Topology()
        .add_source("src", "in")
        .build("app", {"default.key.serde": "string", "default.value.serde": "long"})
    )
    graph = configured.subtopologies[0].create_graph()
    assert graph.sources_by_topic["in"].value_deserializer is Serdes.long()


def test_zero_cache_bytes_turn_store_caching_off() -> None:
    builder = TinyBuilder("s").with_caching_enabled()
    Topology().add_source("src", "in").add_processor("p", Noop, "src").add_state_store(builder, "p").build(
        "app", {"statestore.cache.max.bytes": 0}
    )
    assert builder.caching_enabled is False
