"""Foreign-key table joins (KIP-213): orders joined to products by product id, on the test driver and
in KafkaStreams on both cluster adapters, with tables whose partition counts differ."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from kstreams import KafkaStreams
from kstreams.errors import InvalidStateStoreException
from kstreams.serdes import Serdes
from kstreams.topology import Consumed, Materialized, Named, Produced, StreamsBuilder, TableJoined
from kstreams.topology.dsl.foreign_key_serdes import (
    CombinedKey,
    CombinedKeySerde,
    Instruction,
    ResponseWrapperSerde,
    SubscriptionResponseWrapper,
    SubscriptionWrapper,
    SubscriptionWrapperSerde,
    value_hash,
)
from tests.support.clients import adapter_settings, wait_timeout
from tests.support.waiting import wait_until

S = Serdes.string()
J = Serdes.json()

Row = tuple[str, Any, int]


def inner_joiner(order: dict[str, Any], product: dict[str, Any]) -> str:
    return f"{order['qty']}x{product['name']}"


def left_joiner(order: dict[str, Any], product: dict[str, Any] | None) -> str:
    return f"{order['qty']}x{product['name'] if product is not None else None}"


def orders_products(orders_topic: str = "orders", products_topic: str = "products", out: str = "out") -> Any:
    """orders (key: order id, value: {product, qty}) joined with products (key: product id) into
    ``out`` (inner) and ``out-left`` (left join)."""
    builder = StreamsBuilder()
    orders = builder.table(orders_topic, Consumed.with_(S, J))
    products = builder.table(
        products_topic, Consumed.with_(S, J), Materialized.as_(f"{products_topic}-store")
    )
    orders.join(products, lambda order: order["product"], inner_joiner).to_stream().to(
        out, Produced.with_(S, S)
    )
    orders.left_join(products, lambda order: order["product"], left_joiner).to_stream().to(
        f"{out}-left", Produced.with_(S, S)
    )
    return builder.build()


# The scenario, step by step: (topic, key, value, timestamp) records of each step.
PRODUCTS = [("products", "p1", {"name": "apple"}, 10), ("products", "p2", {"name": "pear"}, 11)]
ORDERS = [
    ("orders", "o1", {"product": "p1", "qty": 2}, 20),
    ("orders", "o2", {"product": "p2", "qty": 1}, 21),
    ("orders", "o3", {"product": "p9", "qty": 1}, 22),  # no such product
]
PRODUCT_UPDATE = [("products", "p1", {"name": "green apple"}, 30)]
FOREIGN_KEY_CHANGE = [("orders", "o1", {"product": "p2", "qty": 3}, 40)]
PRODUCT_DELETE = [("products", "p2", None, 50)]
ORDER_DELETE = [("orders", "o2", None, 60)]
STEPS = [PRODUCTS, ORDERS, PRODUCT_UPDATE, FOREIGN_KEY_CHANGE, PRODUCT_DELETE, ORDER_DELETE]

# What a Kafka Streams user sees on each output, per key: (value, timestamp); None is a tombstone.
INNER = {
    "o1": [("2xapple", 20), ("2xgreen apple", 30), ("3xpear", 40), (None, 50)],
    "o2": [("1xpear", 21), (None, 50), (None, 60)],
}
LEFT = {
    "o1": [("2xapple", 20), ("2xgreen apple", 30), ("3xpear", 40), ("3xNone", 50)],
    "o2": [("1xpear", 21), ("1xNone", 50), (None, 60)],
    "o3": [("1xNone", 22)],
}
# After each step, the number of records each output has (inner, left).
COUNTS_AFTER_STEP = [(0, 0), (2, 3), (3, 4), (4, 5), (6, 7), (7, 8)]


def per_key(records: list[tuple[str, Any, int]]) -> dict[str, list[tuple[Any, int]]]:
    result: dict[str, list[tuple[Any, int]]] = {}
    for key, value, timestamp in records:
        result.setdefault(key, []).append((value, timestamp))
    return result


def shifted(expected: dict[str, list[tuple[Any, int]]], base: int) -> dict[str, list[tuple[Any, int]]]:
    return {key: [(value, base + timestamp) for value, timestamp in rows] for key, rows in expected.items()}


def test_foreign_key_join_on_the_test_driver(drive: Callable[..., Any]) -> None:
    driver = drive(orders_products())
    inputs = {
        "orders": driver.create_input_topic("orders", S, J),
        "products": driver.create_input_topic("products", S, J),
    }
    out = driver.create_output_topic("out", S, S)
    out_left = driver.create_output_topic("out-left", S, S)
    inner: list[Row] = []
    left: list[Row] = []
    for step, expected in zip(STEPS, COUNTS_AFTER_STEP, strict=True):
        for topic, key, value, timestamp in step:
            inputs[topic].pipe_input(key, value, timestamp)
        inner += [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
        left += [(r.key, r.value, r.timestamp) for r in out_left.read_records_to_list()]
        assert (len(inner), len(left)) == expected
    assert per_key(inner) == INNER
    assert per_key(left) == LEFT
    # The subscription store holds what the right side knows: o1 on p2, o3 on p9 (o2 is gone).
    store = driver.get_timestamped_key_value_store("KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000009")
    subscriptions = sorted((key.foreign_key, key.primary_key) for key, _ in store.all())
    assert subscriptions == [("p2", "o1"), ("p9", "o3")]


def test_a_stale_response_is_dropped(drive: Callable[..., Any]) -> None:
    # o1 moves from p1 to p2 and back before any answer: only answers for its current value count.
    driver = drive(orders_products())
    orders = driver.create_input_topic("orders", S, J)
    products = driver.create_input_topic("products", S, J)
    out = driver.create_output_topic("out", S, S)
    products.pipe_input("p1", {"name": "apple"}, 1)
    products.pipe_input("p2", {"name": "pear"}, 2)
    orders.pipe_input("o1", {"product": "p1", "qty": 1}, 3)
    orders.pipe_input("o1", {"product": "p2", "qty": 1}, 4)
    assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [
        ("o1", "1xapple", 3),
        ("o1", "1xpear", 4),
    ]


def test_left_join_of_a_row_without_foreign_key_joins_with_none(drive: Callable[..., Any]) -> None:
    builder = StreamsBuilder()
    orders = builder.table("orders", Consumed.with_(S, J))
    products = builder.table("products", Consumed.with_(S, J))
    orders.left_join(products, lambda order: order.get("product"), left_joiner).to_stream().to(
        "out", Produced.with_(S, S)
    )
    orders.join(products, lambda order: order.get("product"), inner_joiner).to_stream().to(
        "inner", Produced.with_(S, S)
    )
    driver = drive(builder.build())
    driver.create_input_topic("orders", S, J).pipe_input("o1", {"qty": 5}, 7)
    assert [
        (r.key, r.value, r.timestamp) for r in driver.create_output_topic("out", S, S).read_records_to_list()
    ] == [("o1", "5xNone", 7)]
    assert driver.create_output_topic("inner", S, S).is_empty()


def test_named_foreign_key_join_describes_like_kafka() -> None:
    builder = StreamsBuilder()
    orders = builder.table("orders", Consumed.with_(S, J))
    products = builder.table("products", Consumed.with_(S, J))
    joined = orders.join(
        products,
        lambda order: order["product"],
        inner_joiner,
        TableJoined.as_("fk"),
        Materialized.as_("joined"),
    )
    joined.to_stream().to("out")
    description = str(builder.build().describe())
    for expected in (
        "Source: fk-subscription-registration-source (topics: [fk-subscription-registration-topic])",
        "Processor: fk-subscription-receive (stores: [fk-subscription-store])",
        "Processor: fk-foreign-join-subscription (stores: [fk-subscription-store])",
        "Sink: fk-subscription-response-sink (topic: fk-subscription-response-topic)",
        "Processor: fk-subscription-response-resolver (stores: [orders-STATE-STORE-0000000000])",
        "Processor: fk-result (stores: [joined])",
        "      <-- fk-subscription-join-foreign, fk-foreign-join-subscription",
    ):
        assert expected in description, expected
    assert joined.queryable_store_name == "joined"


def test_internal_topics_take_the_partition_counts_of_the_tables() -> None:
    from kstreams.runtime.internal_topics.partition_counts import compute_partition_counts

    plan = orders_products().build("shop")
    counts = compute_partition_counts(plan, {"orders": 3, "products": 2}).topics
    assert counts["shop-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000005-topic"] == 2
    assert counts["shop-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000013-topic"] == 3
    assert counts["shop-KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000009-changelog"] == 2


def test_join_overloads_are_told_apart_and_bad_calls_say_what_to_pass() -> None:
    builder = StreamsBuilder()
    orders = builder.table("orders")
    products = builder.table("products")
    # (other, joiner, materialized) is still the primary-key join.
    orders.join(products, lambda a, b: a, Materialized.as_("pk"))
    orders.left_join(products, lambda o: o, lambda a, b: a, Named.as_("named-fk"))
    with pytest.raises(TypeError, match="TableJoined"):
        orders.join(products, lambda o: o, lambda a, b: a, 42)
    with pytest.raises(TypeError, match="foreign_key_extractor"):
        orders.join(products, foreign_key_extractor=lambda o: o)
    with pytest.raises(TypeError, match="two Materialized"):
        orders.join(products, lambda o: o, lambda a, b: a, Materialized(), Materialized())


def test_wrapper_serdes_round_trip() -> None:
    digest = value_hash(b"v")
    subscription = SubscriptionWrapper(digest, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, "o1", 2)
    serde = SubscriptionWrapperSerde(S, "reg-topic-pk")
    assert serde.deserialize("t", serde.serialize("t", subscription)) == subscription
    response = SubscriptionResponseWrapper(None, None, None)
    response_serde = ResponseWrapperSerde(J)
    assert response_serde.deserialize("t", response_serde.serialize("t", response)) == response
    # The primary partition stays off the wire, as in Kafka: the response sink reads it unserialized.
    full = SubscriptionResponseWrapper(digest, {"name": "x"}, 0)
    assert response_serde.deserialize(
        "t", response_serde.serialize("t", full)
    ) == SubscriptionResponseWrapper(digest, {"name": "x"}, None)
    keys = CombinedKeySerde(S, S, "reg-topic-fk", "reg-topic-pk")
    data = keys.serialize("t", CombinedKey("p1", "o1"))
    assert data is not None and data.startswith(keys.prefix("p1"))
    assert not data.startswith(keys.prefix("p"))
    assert keys.deserialize("t", data) == CombinedKey("p1", "o1")


# Kafka 4.1.1's Murmur3.hash128, the two halves printed as unsigned numbers (a Java program on its jar).
KAFKA_MURMUR3 = [
    (b"", 11324130426821486914, 10105219602051204376),
    (bytes((i * 37 + 200) & 255 for i in range(5)), 8124148783958457726, 431500103146583994),
    (bytes((i * 37 + 200) & 255 for i in range(17)), 1468295286396577991, 2369895096289180639),
    (bytes((i * 37 + 200) & 255 for i in range(32)), 2819191440991962733, 7634896192672878728),
]


@pytest.mark.parametrize(
    ("data", "h1", "h2"), KAFKA_MURMUR3, ids=lambda v: str(len(v)) if isinstance(v, bytes) else ""
)
def test_value_hash_is_kafkas_murmur3(data: bytes, h1: int, h2: int) -> None:
    assert value_hash(data) == h1.to_bytes(8, "big") + h2.to_bytes(8, "big")
    assert value_hash(b"product-1") == bytes.fromhex("b7512c0b085a25255328f078f1644212")


def test_wrapper_serdes_write_kafkas_bytes() -> None:
    """Kafka's SubscriptionWrapperSerde (version 1) and SubscriptionResponseWrapperSerde (version 0)."""
    digest = bytes(range(16))
    serde = SubscriptionWrapperSerde(S, "reg-topic-pk")
    with_hash = SubscriptionWrapper(digest, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, "o1", 2)
    assert serde.serialize("t", with_hash) == b"\x01\x03" + digest + b"o1" + b"\x00\x00\x00\x02"
    deleted = SubscriptionWrapper(None, Instruction.DELETE_KEY_AND_PROPAGATE, "o1", 0)
    assert serde.serialize("t", deleted) == b"\x81\x01o1\x00\x00\x00\x00"
    # Version 0 (before Kafka 3.4's KIP-775) has no partition at the end.
    assert serde.deserialize("t", b"\x00\x02" + digest + b"o1") == SubscriptionWrapper(
        digest, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, "o1", None
    )
    responses = ResponseWrapperSerde(S)
    assert responses.serialize("t", SubscriptionResponseWrapper(digest, "x", 1)) == b"\x00" + digest + b"x"
    assert responses.serialize("t", SubscriptionResponseWrapper(None, None, 1)) == b"\x80"
    assert responses.deserialize("t", b"\x00" + digest) == SubscriptionResponseWrapper(digest, None, None)


class TopicRecordingSerde:
    """A string serde that notes every (what, operation, topic) it is called with, as a Schema
    Registry serde would derive its subject from the topic."""

    def __init__(self, what: str, seen: set[tuple[str, str, str | None]]) -> None:
        self.what, self.seen = what, seen

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        self.seen.add((self.what, "ser", topic))
        return S.serialize(topic, data)

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        self.seen.add((self.what, "de", topic))
        return S.deserialize(topic, data)

    def serializer(self) -> TopicRecordingSerde:
        return self

    def deserializer(self) -> TopicRecordingSerde:
        return self


@pytest.mark.parametrize("left_join", [False, True], ids=["join", "left_join"])
def test_serdes_are_called_with_kafkas_topic_names(drive: Any, left_join: bool) -> None:
    """What Kafka Streams 4.1 calls the tables' serdes with in the same join (recorded with a
    recording serde on its TopologyTestDriver): the subscription registration topic for foreign
    keys and its ``-fk``/``-pk``/``-vh`` pseudo topics, the response topic for primary keys and
    foreign values, all with the application id; never None, never a subscription store changelog."""
    seen: set[tuple[str, str, str | None]] = set()
    builder = StreamsBuilder()
    left = builder.table(
        "left", Consumed.with_(TopicRecordingSerde("left key", seen), TopicRecordingSerde("left value", seen))
    )
    right = builder.table(
        "right",
        Consumed.with_(TopicRecordingSerde("right key", seen), TopicRecordingSerde("right value", seen)),
    )
    join = left.left_join if left_join else left.join
    join(right, lambda v: v.split("-")[0], lambda a, b: f"{a}+{b}").to_stream().to(
        "out", Produced.with_(S, S)
    )
    driver = drive(builder.build(), application_id="app")
    lefts, rights = driver.create_input_topic("left", S, S), driver.create_input_topic("right", S, S)
    rights.pipe_input("f1", "F1")
    lefts.pipe_input("p1", "f1-x")
    lefts.pipe_input("p1", "f2-y")
    rights.pipe_input("f2", "F2")
    lefts.pipe_input("p1", None)
    rights.pipe_input("f1", None)
    assert driver.create_output_topic("out", S, S).read_key_values_to_list() == [
        ("p1", "f1-x+F1"),
        ("p1", "f2-y+None" if left_join else None),
        ("p1", "f2-y+F2"),
        ("p1", None),
    ]
    registration = "app-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic"
    response = "app-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic"
    join_topics = (
        {t for _, _, t in seen} - {"left", "right"} - {t for _, _, t in seen if t and t.endswith("changelog")}
    )
    assert join_topics == {
        registration,
        f"{registration}-pk",
        f"{registration}-fk",
        f"{registration}-vh",
        response,
    }
    assert ("left key", "ser", f"{registration}-pk") in seen
    assert ("left key", "ser", response) in seen
    assert ("left value", "ser", f"{registration}-vh") in seen
    assert ("right key", "ser", registration) in seen and ("right key", "ser", f"{registration}-fk") in seen
    assert ("right value", "ser", response) in seen and ("right value", "de", response) in seen
    # Only the tables' own changelogs: the subscription store's keys go through the pseudo topics.
    assert {t for _, _, t in seen if t and t.endswith("changelog")} == {
        "app-left-STATE-STORE-0000000000-changelog",
        "app-right-STATE-STORE-0000000003-changelog",
    }


# --- KafkaStreams on both cluster adapters --------------------------------------------------


def client_config(cluster: Any, app_id: str) -> tuple[dict[str, object], float]:
    """Client settings and a wait timeout suited to the adapter (Kafka refuses session timeouts
    under group.min.session.timeout.ms, 6 s)."""
    config = {"application.id": app_id, "num.stream.threads": 2, **adapter_settings(cluster)}
    return config, wait_timeout(cluster, kafka=90.0)


def test_foreign_key_join_on_both_clusters(cluster: Any, app_id: str) -> None:
    topics = {"orders": f"{app_id}-orders", "products": f"{app_id}-products"}
    out = f"{app_id}-out"
    # The tables' partition counts differ: the join needs no co-partitioning.
    cluster.create_topic(topics["orders"], 3)
    cluster.create_topic(topics["products"], 2)
    cluster.create_topic(out, 3)
    cluster.create_topic(f"{out}-left", 3)
    config, timeout = client_config(cluster, app_id)
    streams = KafkaStreams(
        orders_products(topics["orders"], topics["products"], out), config, cluster=cluster
    )
    try:
        streams.start()

        def read(topic: str) -> list[Row]:
            return [
                (S.deserialize(topic, r.key), S.deserialize(topic, r.value), r.timestamp)
                for r in cluster.read(topic)
            ]

        def products_loaded() -> bool:
            try:
                store = streams.store(f"{topics['products']}-store")
                return store.get("p1") is not None and store.get("p2") is not None
            except InvalidStateStoreException:
                return False

        # Brokers drop (or refuse) records stamped decades ago: the scenario runs from now on.
        base = int(time.time() * 1000)
        for index, (step, (inner_count, left_count)) in enumerate(zip(STEPS, COUNTS_AFTER_STEP, strict=True)):
            for topic, key, value, timestamp in step:
                cluster.produce(
                    topics[topic], key.encode(), J.serialize(topic, value), timestamp=base + timestamp
                )
            if index == 0:
                # Orders that arrive before their product join when it comes, at its timestamp:
                # let the products load first so the results are the ones listed.
                wait_until(products_loaded, timeout, "the products table")
            wait_until(
                lambda ic=inner_count, lc=left_count: len(read(out)) >= ic and len(read(f"{out}-left")) >= lc,
                timeout,
                lambda i=index: f"the results of step {i}: {read(out)} {read(f'{out}-left')}",
            )
        assert per_key(read(out)) == shifted(INNER, base)
        assert per_key(read(f"{out}-left")) == shifted(LEFT, base)
        described = cluster.topics()
        assert (
            described[f"{app_id}-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000005-topic"].partitions == 2
        )
        assert described[f"{app_id}-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000013-topic"].partitions == 3
    finally:
        streams.close(timeout=30)
