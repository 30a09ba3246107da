"""Cogrouped streams (KIP-150): Kafka's customer aggregation of clicks, views and purchases into one
aggregate, windowed cogroups and repartitioned inputs, on the test driver and on both clusters."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from kstreams import KafkaStreams
from kstreams.serdes import Serdes
from kstreams.topology import (
    CogroupedKStream,
    Consumed,
    Grouped,
    Materialized,
    Named,
    Produced,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
)
from tests.support.clients import STRING_DEFAULTS, adapter_settings, wait_timeout
from tests.support.waiting import wait_until

S = Serdes.string()
J = Serdes.json()


def initial() -> dict[str, int]:
    return {"clicks": 0, "views": 0, "spent": 0}


def count_into(field: str) -> Callable[[str, str, dict[str, int]], dict[str, int]]:
    def aggregate(customer: str, value: str, profile: dict[str, int]) -> dict[str, int]:
        return {**profile, field: profile[field] + 1}

    return aggregate


def spend(customer: str, amount: str, profile: dict[str, int]) -> dict[str, int]:
    return {**profile, "spent": profile["spent"] + int(amount)}


def customer_profiles(topics: dict[str, str], out: str, *, regroup_purchases: bool = False) -> Any:
    """Clicks, views and purchases of each customer (the record key) aggregated into one profile.
    With ``regroup_purchases``, purchases are keyed by order id and re-grouped by the customer in
    their value ("customer:amount"), which needs a repartition."""
    builder = StreamsBuilder()
    clicks = builder.stream(topics["clicks"]).group_by_key()
    views = builder.stream(topics["views"]).group_by_key()
    purchases_stream = builder.stream(topics["purchases"])
    if regroup_purchases:
        purchases = purchases_stream.map_values(lambda v: v.split(":")[1]).group_by(
            lambda order, amount: order.split("/")[0], Grouped.with_(S, S)
        )
    else:
        purchases = purchases_stream.group_by_key()
    profiles = (
        clicks.cogroup(count_into("clicks"))
        .cogroup(views, count_into("views"))
        .cogroup(purchases, spend)
        .aggregate(initial, Materialized.as_("profiles").with_value_serde(J))
    )
    profiles.to_stream().to(out, Produced.with_(S, J))
    return builder.build()


TOPICS = {"clicks": "clicks", "views": "views", "purchases": "purchases"}
INPUT = [
    ("clicks", "ann", "home", 10),
    ("views", "ann", "shoes", 12),
    ("clicks", "bob", "home", 11),
    ("purchases", "ann", "30", 20),
    ("views", "ann", "hats", 15),  # out of order: the aggregate keeps timestamp 20
    ("purchases", "bob", "5", 25),
]
EXPECTED = [
    ("ann", {"clicks": 1, "views": 0, "spent": 0}, 10),
    ("ann", {"clicks": 1, "views": 1, "spent": 0}, 12),
    ("bob", {"clicks": 1, "views": 0, "spent": 0}, 11),
    ("ann", {"clicks": 1, "views": 1, "spent": 30}, 20),
    ("ann", {"clicks": 1, "views": 2, "spent": 30}, 20),
    ("bob", {"clicks": 1, "views": 0, "spent": 5}, 25),
]


def test_cogroup_of_three_streams_on_the_test_driver(drive: Callable[..., Any]) -> None:
    driver = drive(customer_profiles(TOPICS, "out"), statestore_cache_max_bytes=0)
    inputs = {topic: driver.create_input_topic(topic, S, S) for topic in TOPICS}
    for topic, key, value, timestamp in INPUT:
        inputs[topic].pipe_input(key, value, timestamp)
    out = driver.create_output_topic("out", S, J)
    assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == EXPECTED
    assert driver.get_key_value_store("profiles").get("ann") == {"clicks": 1, "views": 2, "spent": 30}


def test_cogroup_describes_like_kafka() -> None:
    # Kafka's CogroupedKStreamImplTest.shouldInsertRepartitionsTopicForUpstreamKeyModification.
    builder = StreamsBuilder()
    stream1 = builder.stream("one", Consumed.with_(S, S))
    test2 = builder.stream("two", Consumed.with_(S, S))
    grouped_one = stream1.map(lambda k, v: (v, k)).group_by_key()
    grouped_two = test2.group_by_key()
    customers = (
        grouped_one.cogroup(lambda k, v, a: a + v)
        .cogroup(grouped_two, lambda k, v, a: a + v)
        .aggregate(lambda: "", Named.as_("test"), Materialized.as_("store"))
    )
    customers.to_stream().to("output")
    assert str(builder.build().describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [one])\n"
        "      --> KSTREAM-MAP-0000000002\n"
        "    Processor: KSTREAM-MAP-0000000002 (stores: [])\n"
        "      --> store-repartition-filter\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: store-repartition-filter (stores: [])\n"
        "      --> store-repartition-sink\n"
        "      <-- KSTREAM-MAP-0000000002\n"
        "    Sink: store-repartition-sink (topic: store-repartition)\n"
        "      <-- store-repartition-filter\n\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [two])\n"
        "      --> test-cogroup-agg-1\n"
        "    Source: store-repartition-source (topics: [store-repartition])\n"
        "      --> test-cogroup-agg-0\n"
        "    Processor: test-cogroup-agg-0 (stores: [store])\n"
        "      --> test-cogroup-merge\n"
        "      <-- store-repartition-source\n"
        "    Processor: test-cogroup-agg-1 (stores: [store])\n"
        "      --> test-cogroup-merge\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "    Processor: test-cogroup-merge (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000009\n"
        "      <-- test-cogroup-agg-0, test-cogroup-agg-1\n"
        "    Processor: KTABLE-TOSTREAM-0000000009 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000010\n"
        "      <-- test-cogroup-merge\n"
        "    Sink: KSTREAM-SINK-0000000010 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000009\n\n"
    )


def test_unnamed_cogroup_repartitions_through_a_topic_named_after_its_store() -> None:
    topology = customer_profiles(TOPICS, "out", regroup_purchases=False)
    assert "COGROUPKSTREAM-AGGREGATE-" in str(topology.describe())
    builder = StreamsBuilder()
    one = builder.stream("one").map(lambda k, v: (v, k)).group_by_key()
    two = builder.stream("two").group_by_key()
    one.cogroup(lambda k, v, a: a + v).cogroup(two, lambda k, v, a: a + v).aggregate(lambda: "")
    description = str(builder.build().describe())
    # As in Kafka, nodes of a repartition named after a store take their names from the topic.
    topic = "COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition"
    assert f"Sink: {topic}-sink (topic: {topic})" in description
    assert (
        "Processor: COGROUPKSTREAM-AGGREGATE-0000000007 "
        "(stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003])" in description
    )
    assert "Processor: COGROUPKSTREAM-MERGE-0000000009 (stores: [])" in description


def test_unnamed_cogroup_aggregated_twice_reads_its_first_repartition_topic() -> None:
    builder = StreamsBuilder()
    cogroup = builder.stream("one").map(lambda k, v: (v, k)).group_by_key().cogroup(lambda k, v, a: a + v)
    cogroup.aggregate(lambda: "")
    cogroup.windowed_by(TimeWindows.of_size_with_no_grace(10)).aggregate(lambda: "")
    description = str(builder.build().describe())
    # As Kafka's cogroup builder: the second aggregate reuses the first one's repartition (named
    # after the first store) and draws the three names of the repartition it does not add.
    topic = "COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition"
    assert description.count("Sink: ") == 1
    assert f"Source: {topic}-source (topics: [{topic}])" in description
    assert "--> COGROUPKSTREAM-AGGREGATE-0000000006, COGROUPKSTREAM-AGGREGATE-0000000012" in description


def test_repartitioned_input_on_the_test_driver(drive: Callable[..., Any]) -> None:
    driver = drive(customer_profiles(TOPICS, "out", regroup_purchases=True), statestore_cache_max_bytes=0)
    inputs = {topic: driver.create_input_topic(topic, S, S) for topic in TOPICS}
    inputs["clicks"].pipe_input("ann", "home", 10)
    inputs["purchases"].pipe_input("ann/o1", "ann:30", 20)
    inputs["purchases"].pipe_input("bob/o2", "bob:7", 21)
    out = driver.create_output_topic("out", S, J)
    assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [
        ("ann", {"clicks": 1, "views": 0, "spent": 0}, 10),
        ("ann", {"clicks": 1, "views": 0, "spent": 30}, 20),
        ("bob", {"clicks": 0, "views": 0, "spent": 7}, 21),
    ]


def test_windowed_cogroup_on_the_test_driver(drive: Callable[..., Any]) -> None:
    builder = StreamsBuilder()
    a = builder.stream("a").group_by_key()
    b = builder.stream("b").group_by_key()
    windowed = (
        a.cogroup(lambda k, v, agg: agg + v)
        .cogroup(b, lambda k, v, agg: agg + v.upper())
        .windowed_by(TimeWindows.of_size_with_no_grace(100))
        .aggregate(lambda: "", Materialized.with_(S, S))
    )
    windowed.to_stream().map(lambda wk, v: (f"{wk.key}@{wk.start}-{wk.end}", v)).to(
        "out", Produced.with_(S, S)
    )
    driver = drive(builder.build(), statestore_cache_max_bytes=0)
    ta = driver.create_input_topic("a", S, S)
    tb = driver.create_input_topic("b", S, S)
    ta.pipe_input("k", "x", 10)
    tb.pipe_input("k", "y", 50)
    ta.pipe_input("k", "z", 120)  # the next window
    ta.pipe_input("k", "late", 90)  # window [0, 100) closed (stream time 120, no grace): dropped
    out = driver.create_output_topic("out", S, S)
    assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [
        ("k@0-100", "x", 10),
        ("k@0-100", "xY", 50),
        ("k@100-200", "z", 120),
    ]


def test_bad_cogroup_calls_say_what_to_pass() -> None:
    builder = StreamsBuilder()
    grouped = builder.stream("a").group_by_key()
    cogrouped = grouped.cogroup(lambda k, v, a: a)
    assert isinstance(cogrouped, CogroupedKStream)
    with pytest.raises(TypeError, match="KGroupedStream"):
        cogrouped.cogroup(builder.stream("b"), lambda k, v, a: a)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="already part of the cogroup"):
        cogrouped.cogroup(grouped, lambda k, v, a: a)
    with pytest.raises(TypeError, match="SessionWindows"):
        cogrouped.windowed_by(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="initializer"):
        cogrouped.aggregate(None)  # type: ignore[arg-type]


# --- KafkaStreams on both cluster adapters --------------------------------------------------


def test_cogroup_with_a_repartitioned_input_on_both_clusters(cluster: Any, app_id: str) -> None:
    topics = {name: f"{app_id}-{name}" for name in TOPICS}
    out = f"{app_id}-out"
    for topic in topics.values():
        cluster.create_topic(topic, 3)
    cluster.create_topic(out, 3)
    config = {"application.id": app_id, **STRING_DEFAULTS, **adapter_settings(cluster)}
    timeout = wait_timeout(cluster, kafka=90.0)
    streams = KafkaStreams(customer_profiles(topics, out, regroup_purchases=True), config, cluster=cluster)
    try:
        streams.start()
        base = int(time.time() * 1000)  # brokers drop records stamped decades ago
        records = [
            ("clicks", "ann", "home", 10),
            ("clicks", "bob", "home", 11),
            ("views", "ann", "shoes", 12),
            ("purchases", "ann/o1", "ann:30", 20),
            ("purchases", "bob/o2", "bob:7", 21),
            ("purchases", "ann/o3", "ann:12", 22),
            ("views", "cy", "hats", 23),
        ]
        for topic, key, value, timestamp in records:
            cluster.produce(topics[topic], key.encode(), value.encode(), timestamp=base + timestamp)

        def latest() -> dict[str, tuple[Any, int]]:
            return {
                S.deserialize(out, r.key): (J.deserialize(out, r.value), r.timestamp - base)
                for r in cluster.read(out)
            }

        expected = {
            "ann": ({"clicks": 1, "views": 1, "spent": 42}, 22),
            "bob": ({"clicks": 1, "views": 0, "spent": 7}, 21),
            "cy": ({"clicks": 0, "views": 1, "spent": 0}, 23),
        }
        wait_until(lambda: latest() == expected, timeout, lambda: f"the profiles, got {latest()}")
        repartition = f"{app_id}-profiles-repartition"
        assert cluster.topics()[repartition].partitions == 3
    finally:
        streams.close(timeout=30)


def windowed_rows(driver: Any) -> list[tuple[str, Any, int]]:
    out = driver.create_output_topic("out", S, S)
    return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def two_inputs() -> tuple[StreamsBuilder, Any]:
    builder = StreamsBuilder()
    a = builder.stream("a").group_by_key()
    b = builder.stream("b").group_by_key()
    return builder, a.cogroup(lambda k, v, agg: agg + v).cogroup(b, lambda k, v, agg: agg + v.upper())


def test_session_windowed_cogroup_on_the_test_driver(drive: Callable[..., Any]) -> None:
    builder, cogrouped = two_inputs()
    sessions = cogrouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10)).aggregate(
        lambda: "", lambda key, agg1, agg2: agg1 + agg2, Materialized.with_(S, S)
    )
    sessions.to_stream().map(lambda wk, v: (f"{wk.key}@{wk.start}-{wk.end}", v)).to(
        "out", Produced.with_(S, S)
    )
    driver = drive(builder.build(), statestore_cache_max_bytes=0)
    driver.create_input_topic("a", S, S).pipe_input("k", "x", 10)
    tb = driver.create_input_topic("b", S, S)
    tb.pipe_input("k", "y", 15)  # joins the session of x: it is replaced by the merged one
    tb.pipe_input("k", "z", 40)  # more than the gap later: a new session
    assert windowed_rows(driver) == [
        ("k@10-10", "x", 10),
        ("k@10-10", None, 10),
        ("k@10-15", "xY", 15),
        ("k@40-40", "Z", 40),
    ]


def test_sliding_windowed_cogroup_on_the_test_driver(drive: Callable[..., Any]) -> None:
    builder, cogrouped = two_inputs()
    windowed = cogrouped.windowed_by(SlidingWindows.of_time_difference_with_no_grace(10)).aggregate(
        lambda: "", Materialized.with_(S, S)
    )
    windowed.to_stream().map(lambda wk, v: (f"{wk.key}@{wk.start}-{wk.end}", v)).to(
        "out", Produced.with_(S, S)
    )
    driver = drive(builder.build(), statestore_cache_max_bytes=0)
    driver.create_input_topic("a", S, S).pipe_input("k", "x", 10)
    driver.create_input_topic("b", S, S).pipe_input("k", "y", 15)
    rows = windowed_rows(driver)
    # Each record ends a window holding the records up to 10 ms before it; the record at 10 also
    # opens the window just after it, which the record at 15 falls in.
    assert {key: (value, ts) for key, value, ts in rows} == {
        "k@0-10": ("x", 10),
        "k@5-15": ("xY", 15),
        "k@11-21": ("Y", 15),
    }


@pytest.mark.parametrize(
    "windows",
    [TimeWindows.of_size_with_no_grace(500), SlidingWindows.of_time_difference_with_no_grace(500)],
    ids=["time", "sliding"],
)
def test_named_windowed_cogroup_describes_like_kafka(windows: Any) -> None:
    # Kafka's TimeWindowedCogroupedKStreamImplTest/SlidingWindowedCogroupedKStreamImplTest.
    builder = StreamsBuilder()
    grouped = builder.stream("topic", Consumed.with_(S, S)).group_by_key(Grouped.with_(S, S))
    grouped.cogroup(lambda k, v, a: a + v).windowed_by(windows).aggregate(lambda: "", Named.as_("foo"))
    assert str(builder.build().describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])\n"
        "      --> foo-cogroup-agg-0\n"
        "    Processor: foo-cogroup-agg-0 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000001])\n"
        "      --> foo-cogroup-merge\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: foo-cogroup-merge (stores: [])\n"
        "      --> none\n"
        "      <-- foo-cogroup-agg-0\n\n"
    )
