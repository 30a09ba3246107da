"""Grouped-stream aggregations: count, reduce, aggregate, windowed, and their naming.

The module is marked ``on_cluster``: its tests using ``drive`` run on a KafkaStreams client over an
EmbeddedCluster too (tests/unit/topology/dsl/conftest.py), and the tests at its end check on a
cluster what the driver cannot show."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kstreams.cluster import EmbeddedCluster
from kstreams.serdes import Serdes
from kstreams.state.store import WindowedKey
from kstreams.topology import (
    Grouped,
    KeyValue,
    Materialized,
    Named,
    Produced,
    StreamsBuilder,
    TimeWindows,
    WindowedSerdes,
)
from kstreams.topology.dsl.processors.aggregate import StreamAggregateSupplier, WindowedAggregateSupplier
from tests.support.clients import Clients, client_settings
from tests.support.waiting import wait_until

S = Serdes.string()
L = Serdes.long()

pytestmark = pytest.mark.on_cluster(representative="test_word_count_across_partitions")


def _word_count(
    builder: StreamsBuilder, materialized: Materialized | None = None, grouped: Grouped | None = None
):
    words = builder.stream("text").flat_map_values(lambda line: line.lower().split())
    counts = words.group_by(lambda key, word: word, grouped).count(materialized)
    counts.to_stream().to("counts", Produced.with_(S, L))
    return counts


def test_word_count(drive):
    builder = StreamsBuilder()
    _word_count(builder)
    driver = drive(builder.build())
    text = driver.create_input_topic("text", S, S)
    text.pipe_input(None, "Hello Kafka Streams")
    text.pipe_input(None, "hello world")
    counts = driver.create_output_topic("counts", S, L)
    assert counts.read_key_values_to_list() == [
        ("hello", 1),
        ("kafka", 1),
        ("streams", 1),
        ("hello", 2),
        ("world", 1),
    ]


def test_word_count_with_caching_forwards_through_the_cache(drive):
    builder = StreamsBuilder()
    _word_count(builder, Materialized.as_("counts").with_caching_enabled())
    driver = drive(builder.build(), statestore_cache_max_bytes=1 << 20)
    driver.create_input_topic("text", S, S).pipe_input(None, "a b a")
    # The driver commits after each input record: the cache forwards the newest count per key.
    assert driver.create_output_topic("counts", S, L).read_key_values_to_map() == {"a": 2, "b": 1}
    assert driver.get_key_value_store("counts").get("a") == 2


def test_repartition_topic_is_named_after_the_generated_store_without_grouped_name():
    builder = StreamsBuilder()
    _word_count(builder)
    plan = builder.build().build("app")
    assert "app-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition" in plan.internal_topics
    assert "app-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog" in plan.internal_topics


def test_repartition_topic_is_named_after_grouped_as():
    builder = StreamsBuilder()
    _word_count(builder, grouped=Grouped.as_("words"))
    topology = builder.build()
    plan = topology.build("app")
    assert plan.internal_topics["app-words-repartition"].kind == "repartition"
    # As Kafka's groupBy, the key selector takes the Grouped name itself.
    assert {
        "words",
        "words-repartition-filter",
        "words-repartition-sink",
        "words-repartition-source",
    } <= set(topology.nodes)


def test_repartition_topic_is_named_after_the_materialized_store():
    builder = StreamsBuilder()
    counts = _word_count(builder, Materialized.as_("counts-store"))
    assert counts.queryable_store_name == "counts-store"
    plan = builder.build().build("app")
    assert "app-counts-store-repartition" in plan.internal_topics
    changelog = plan.internal_topics["app-counts-store-changelog"]
    assert changelog.kind == "changelog"
    assert changelog.store == "counts-store"


def test_group_by_key_needs_no_repartition_unless_the_key_changed():
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().count()
    plan = builder.build().build("app")
    assert len(plan.subtopologies) == 1
    assert not any(t.kind == "repartition" for t in plan.internal_topics.values())

    builder = StreamsBuilder()
    builder.stream("in").select_key(lambda k, v: v).group_by_key().count()
    plan = builder.build().build("app")
    assert len(plan.subtopologies) == 2
    assert "app-KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition" in plan.internal_topics


def test_group_by_always_repartitions():
    builder = StreamsBuilder()
    builder.stream("in").group_by(lambda k, v: k).count()
    assert len(builder.build().build("app").subtopologies) == 2


def test_logging_disabled_store_has_no_changelog():
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().count(Materialized.as_("c").with_logging_disabled())
    plan = builder.build().build("app")
    assert "app-c-changelog" not in plan.internal_topics


def test_reduce_combines_values_per_key(drive):
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().reduce(lambda agg, v: agg + v).to_stream().to("out")
    driver = drive(builder.build())
    source = driver.create_input_topic("in", S, S)
    for key, value in [("a", "x"), ("b", "y"), ("a", "z")]:
        source.pipe_input(key, value)
    assert driver.create_output_topic("out", S, S).read_key_values_to_list() == [
        ("a", "x"),
        ("b", "y"),
        ("a", "xz"),
    ]


def test_aggregate_starts_from_the_initializer(drive):
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().aggregate(
        lambda: 0,
        lambda key, value, total: total + len(value),
        Materialized.as_("lengths").with_value_serde(L),
    ).to_stream().to("out", Produced.with_(S, L))
    driver = drive(builder.build())
    source = driver.create_input_topic("in", S, S)
    source.pipe_input("a", "xyz")
    source.pipe_input("a", "xy")
    assert driver.create_output_topic("out", S, L).read_values_to_list() == [3, 5]
    assert driver.get_key_value_store("lengths").get("a") == 5


def test_null_keys_and_values_are_not_aggregated(drive):
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().count().to_stream().to("out", Produced.with_(S, L))
    driver = drive(builder.build())
    source = driver.create_input_topic("in", S, S)
    source.pipe_input(None, "v")
    source.pipe_input("k", None)
    source.pipe_input("k", "v")
    assert driver.create_output_topic("out", S, L).read_key_values_to_list() == [("k", 1)]


def test_in_memory_store_type(drive):
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().count(
        Materialized.as_("mem").with_store_type(Materialized.StoreType.IN_MEMORY)
    )
    topology = builder.build()
    assert topology.store_builders["mem"].build().persistent is False
    driver = drive(topology)
    driver.create_input_topic("in", S, S).pipe_input("k", "v")
    assert driver.get_key_value_store("mem").get("k") == 1


def test_aggregation_suppliers_are_inspectable():
    builder = StreamsBuilder()
    grouped = builder.stream("in").group_by_key()
    grouped.count(Materialized.as_("plain"))
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(1000)).count(Materialized.as_("windowed"))
    suppliers = [node.supplier for node in builder.build().nodes.values() if hasattr(node, "supplier")]
    plain = next(s for s in suppliers if isinstance(s, StreamAggregateSupplier))
    windowed = next(s for s in suppliers if isinstance(s, WindowedAggregateSupplier))
    assert (plain.kind, plain.store_name, plain.value_serde.name) == ("count", "plain", "long")
    assert (windowed.kind, windowed.windows.size_ms, windowed.windows.tumbling) == ("count", 1000, True)


# --- windowed aggregations -------------------------------------------------------------------


def _windowed_count(windows: TimeWindows, materialized: Materialized | None = None) -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.stream("in")
        .group_by_key()
        .windowed_by(windows)
        .count(materialized)
        .to_stream()
        .map(lambda wk, count: KeyValue(f"{wk.key}@{wk.start}-{wk.end}", count))
        .to("out", Produced.with_(S, L))
    )
    return builder


def _pipe_timed(driver: Any, *records: tuple[str, int]) -> None:
    source = driver.create_input_topic("in", S, S)
    for key, timestamp in records:
        source.pipe_input(key, "v", timestamp=timestamp)


def test_tumbling_window_count(drive):
    driver = drive(_windowed_count(TimeWindows.of_size_with_no_grace(100)).build())
    _pipe_timed(driver, ("a", 0), ("a", 99), ("b", 50), ("a", 100))
    assert driver.create_output_topic("out", S, L).read_key_values_to_list() == [
        ("a@0-100", 1),
        ("a@0-100", 2),
        ("b@0-100", 1),
        ("a@100-200", 1),
    ]


def test_late_record_is_dropped_once_stream_time_passed_window_end_plus_grace(drive):
    driver = drive(_windowed_count(TimeWindows.of_size_with_no_grace(100)).build())
    _pipe_timed(driver, ("a", 10), ("a", 120), ("a", 90))
    assert driver.create_output_topic("out", S, L).read_key_values_to_list() == [
        ("a@0-100", 1),
        ("a@100-200", 1),
    ]


def test_grace_period_accepts_out_of_order_records_until_it_ends(drive):
    driver = drive(_windowed_count(TimeWindows.of_size_and_grace(100, 50)).build())
    # Stream time 120 < 100 + 50: the record at 90 still counts; at stream time 150 the window
    # [0, 100) has closed and the record at 95 is dropped.
    _pipe_timed(driver, ("a", 10), ("a", 120), ("a", 90), ("a", 150), ("a", 95))
    assert driver.create_output_topic("out", S, L).read_key_values_to_list() == [
        ("a@0-100", 1),
        ("a@100-200", 1),
        ("a@0-100", 2),
        ("a@100-200", 2),
    ]


def test_hopping_window_count_updates_every_window_of_the_record(drive):
    windows = TimeWindows.of_size_with_no_grace(100).advance_by(50)
    driver = drive(_windowed_count(windows).build())
    _pipe_timed(driver, ("a", 60), ("a", 120))
    assert driver.create_output_topic("out", S, L).read_key_values_to_list() == [
        ("a@0-100", 1),
        ("a@50-150", 1),
        ("a@50-150", 2),
        ("a@100-200", 1),
    ]


@pytest.mark.parametrize("compiled", ["true", "false"])
@pytest.mark.parametrize("cache", [0, 1 << 20])
def test_windowed_counts_record_by_record_match_kafka_for_every_path(drive, compiled, cache):
    # Tumbling windows with grace (a late record dropped, a null key skipped) and hopping windows,
    # through the kernels and record by record, with and without the cache (which forwards the
    # newest count per window at each flush; the driver flushes after every record).
    tumbling = drive(
        _windowed_count(TimeWindows.of_size_and_grace(100, 50)).build(),
        processing_compiled=compiled,
        statestore_cache_max_bytes=cache,
    )
    _pipe_timed(tumbling, ("a", 10), ("a", 120), ("a", 90), (None, 95), ("a", 150), ("a", 95))
    assert tumbling.create_output_topic("out", S, L).read_key_values_to_list() == [
        ("a@0-100", 1),
        ("a@100-200", 1),
        ("a@0-100", 2),
        ("a@100-200", 2),
    ]
    hopping = drive(
        _windowed_count(TimeWindows.of_size_with_no_grace(100).advance_by(50)).build(),
        processing_compiled=compiled,
        statestore_cache_max_bytes=cache,
    )
    _pipe_timed(hopping, ("a", 60), ("a", 120), ("a", 40))
    assert hopping.create_output_topic("out", S, L).read_key_values_to_list() == [
        ("a@0-100", 1),
        ("a@50-150", 1),
        ("a@50-150", 2),
        ("a@100-200", 1),
    ]


def test_windowed_reduce_and_aggregate(drive):
    builder = StreamsBuilder()
    windowed = builder.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(100))
    windowed.reduce(lambda agg, v: agg + v).to_stream().map(lambda wk, v: (f"{wk.key}@{wk.start}", v)).to(
        "reduced"
    )
    windowed.aggregate(lambda: "", lambda k, v, agg: agg + v.upper()).to_stream().map(
        lambda wk, v: (f"{wk.key}@{wk.start}", v)
    ).to("aggregated")
    driver = drive(builder.build())
    source = driver.create_input_topic("in", S, S)
    source.pipe_input("a", "x", timestamp=1)
    source.pipe_input("a", "y", timestamp=2)
    assert driver.create_output_topic("reduced", S, S).read_values_to_list() == ["x", "xy"]
    assert driver.create_output_topic("aggregated", S, S).read_values_to_list() == ["X", "XY"]


@pytest.mark.parametrize("compiled", [True, False])
def test_every_windowed_update_without_a_cache_is_keyed_by_a_frozen_windowed_key(drive, compiled):
    # Without a cache each update is forwarded as it happens (in C on the per-record path): its
    # key must be the same WindowedKey the DSL documents, equal, hashable and frozen.
    seen: list[tuple[Any, Any]] = []
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().windowed_by(
        TimeWindows.of_size_with_no_grace(100).advance_by(50)
    ).count(Materialized.as_("hopping")).to_stream().foreach(lambda key, count: seen.append((key, count)))
    driver = drive(builder.build(), statestore_cache_max_bytes=0, processing_compiled=compiled)
    _pipe_timed(driver, ("a", 120), ("a", 130), ("b", 140))
    assert seen == [
        (WindowedKey("a", 50, 150), 1),
        (WindowedKey("a", 100, 200), 1),
        (WindowedKey("a", 50, 150), 2),
        (WindowedKey("a", 100, 200), 2),
        (WindowedKey("b", 50, 150), 1),
        (WindowedKey("b", 100, 200), 1),
    ]
    key = seen[0][0]
    assert type(key) is WindowedKey and hash(key) == hash(WindowedKey("a", 50, 150))
    assert str(key) == "[a@50/150]" and key.window().end() == 150
    with pytest.raises(AttributeError):
        key.start = 0


def test_windowed_results_written_with_windowed_serdes(drive):
    builder = StreamsBuilder()
    windowed_serde = WindowedSerdes.time_windowed_serde_from(S, 100)
    builder.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(100)).count(
        Materialized.as_("windowed-counts")
    ).to_stream().to("out", Produced.with_(windowed_serde, L))
    driver = drive(builder.build())
    _pipe_timed(driver, ("a", 130))
    assert driver.create_output_topic("out", windowed_serde, L).read_key_values_to_list() == [
        (WindowedKey("a", 100, 200), 1)
    ]
    store = driver.get_window_store("windowed-counts")
    assert store.fetch("a", 100) == 1


def test_windowed_store_retention_defaults_to_size_plus_grace_and_can_be_raised():
    builder = StreamsBuilder()
    grouped = builder.stream("in").group_by_key()
    grouped.windowed_by(TimeWindows.of_size_and_grace(100, 20)).count(Materialized.as_("a"))
    grouped.windowed_by(TimeWindows.of_size_and_grace(100, 20)).count(
        Materialized.as_("b").with_retention(5000)
    )
    stores = builder.build().store_builders
    assert stores["a"].retention_ms == 120
    assert stores["b"].retention_ms == 5000
    with pytest.raises(ValueError, match="window size plus grace"):
        grouped.windowed_by(TimeWindows.of_size_and_grace(100, 20)).count(
            Materialized.as_("c").with_retention(50)
        )


def test_windowed_count_skips_null_keys_but_counts_null_values(drive):
    driver = drive(_windowed_count(TimeWindows.of_size_with_no_grace(100)).build())
    source = driver.create_input_topic("in", S, S)
    source.pipe_input(None, "v", timestamp=1)
    source.pipe_input("a", None, timestamp=2)
    assert driver.create_output_topic("out", S, L).read_key_values_to_list() == [("a@0-100", 1)]


def test_cached_aggregations_with_nothing_downstream_still_write_store_and_changelog(drive):
    """A cached aggregation that forwards to no processor flushes without a listener: its store
    and changelog still get each key's (and window's) newest aggregate, at its timestamp."""
    builder = StreamsBuilder()
    grouped = builder.stream("in").group_by_key()
    grouped.count(Materialized.as_("counts"))
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(10)).count(Materialized.as_("windowed"))
    driver = drive(builder.build(), application_id="app", statestore_cache_max_bytes=1 << 20)
    source = driver.create_input_topic("in", S, S)
    for key, timestamp in [("a", 1), ("b", 2), ("a", 3), ("a", 12)]:
        source.pipe_input(key, "v", timestamp)
    counts = driver.get_key_value_store("counts")
    assert {key: counts.get(key) for key in "ab"} == {"a": 3, "b": 1}
    windowed = driver.get_window_store("windowed")
    assert [windowed.fetch("a", start) for start in (0, 10)] == [2, 1]
    # The count is the last 8 bytes of a changelog value (after the timestamp, in kstreams' format).
    changelog = driver.create_output_topic("app-counts-changelog", S, Serdes.bytes()).read_records_to_list()
    assert [(r.key, L.deserialize("", r.value[-8:]), r.timestamp) for r in changelog] == [
        ("a", 1, 1),
        ("b", 1, 2),
        ("a", 2, 3),
        ("a", 3, 12),
    ]
    windows = driver.create_output_topic("app-windowed-changelog", Serdes.bytes(), Serdes.bytes())
    assert [(L.deserialize("", r.value[-8:]), r.timestamp) for r in windows.read_records_to_list()] == [
        (1, 1),
        (1, 2),
        (2, 3),
        (1, 12),
    ]


@pytest.mark.parametrize("order", ["kafka", "kstreams"])
def test_an_aggregation_takes_its_name_and_materialized_in_either_order(drive, order):
    # Kafka's count(Named, Materialized); kstreams' own order is (materialized, named).
    name, store = Named.as_("word-count"), Materialized.as_("counts")
    builder = StreamsBuilder()
    grouped = builder.stream("in").group_by_key()
    table = grouped.count(name, store) if order == "kafka" else grouped.count(store, name)
    table.to_stream().to("out", Produced.with_(S, Serdes.long()))
    topology = builder.build()
    assert "word-count" in topology.nodes
    driver = drive(topology)
    driver.create_input_topic("in", S, S).pipe_input("a", "x")
    assert driver.get_key_value_store("counts").get("a") == 1


def test_an_aggregation_refuses_two_names():
    with pytest.raises(TypeError, match="two names"):
        StreamsBuilder().stream("in").group_by_key().count(Named.as_("a"), "b")


# -- on a cluster ----------------------------------------------------------------------------------
# Run by KafkaStreams on the embedded cluster: the repartitioned, multi-partition path that the
# test driver (one partition) does not cover.


def _latest(cluster: EmbeddedCluster, topic: str, value_serde: Any) -> dict[object, object]:
    latest: dict[object, object] = {}
    for record in cluster.read(topic):
        latest[S.deserialize(topic, record.key)] = value_serde.deserialize(topic, record.value)
    return latest


def test_word_count_across_partitions(
    embedded_cluster: EmbeddedCluster, app_id: str, tmp_path: Path, clients: Clients
) -> None:
    embedded_cluster.create_topic("lines", partitions=3)
    embedded_cluster.create_topic("counts", partitions=3)
    builder = StreamsBuilder()
    builder.stream("lines").flat_map_values(str.split).group_by(lambda k, word: word).count().to_stream().to(
        "counts", Produced.with_(S, L)
    )
    clients.start(builder.build(), client_settings(embedded_cluster, app_id, tmp_path), embedded_cluster)
    lines = ["a b c", "a b", "a", "c c"]
    for i, line in enumerate(lines):
        embedded_cluster.produce("lines", f"k{i}".encode(), line.encode())
    expected = {"a": 3, "b": 2, "c": 3}
    wait_until(lambda: _latest(embedded_cluster, "counts", L) == expected, 20.0, f"the counts {expected}")
