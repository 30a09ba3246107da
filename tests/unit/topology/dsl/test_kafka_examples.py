"""Kafka Streams' public example applications, ported: each runs on the TopologyTestDriver and in
KafkaStreams on the EmbeddedCluster (multi-partition input topics), and checks the outputs the
example's own test checks.

The examples come from Apache Kafka's streams/examples and from Confluent's kafka-streams-examples
and tutorials; each test names its source. They are written from the examples' described inputs
and expected outputs in kstreams' API. Where a Java example runs on one partition and depends on
it (de-duplication in one store), the port keys its records so that the records that must meet
land in one task, and says so.

On the cluster, records of different partitions reach the output in no fixed order, so a test
compares the latest value per key (what the Java tests read with ``readKeyValuesToMap``), or the
full output of one key, or the full output sorted by timestamp.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kstreams import KafkaStreams
from kstreams.cluster import EmbeddedCluster
from kstreams.errors import InvalidStateStoreException
from kstreams.processor import FixedKeyProcessor, FixedKeyProcessorContext, FixedKeyRecord
from kstreams.serdes import Serdes
from kstreams.state import Stores
from kstreams.state.store import WindowedKey
from kstreams.testing import TopologyTestDriver
from kstreams.topology import (
    BufferConfig,
    Consumed,
    Grouped,
    Joined,
    Materialized,
    Produced,
    SessionWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    WindowedSerdes,
)

S = Serdes.string()
L = Serdes.long()
I = Serdes.integer()  # noqa: E741 - Kafka's Serdes.Integer(), beside S and L
J = Serdes.json()

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
CLUSTER_TIMEOUT = 30.0
MODES = pytest.mark.parametrize("mode", ["driver", "embedded"])

# The grace of Kafka's TimeWindows.of(size), which the examples use: views and clicks reach a
# counting task from several input partitions out of order, and must not be dropped as late.
KAFKA_DEFAULT_GRACE = 24 * HOUR

Row = tuple[Any, Any, int]
SerdePair = tuple[Any, Any]


def hour_aligned_base() -> int:
    """A timestamp two hours before now, on an hour boundary: windows start on it, and records
    stay within any retention a topic or store applies."""
    return (int(time.time() * 1000) // HOUR) * HOUR - 2 * HOUR


def latest(rows: list[Row]) -> dict[Any, Any]:
    """Each key's last value (None where the last record is a tombstone)."""
    return {key: value for key, value, _ in rows}


def latest_with_timestamps(rows: list[Row]) -> dict[Any, tuple[Any, int]]:
    return {key: (value, timestamp) for key, value, timestamp in rows}


def by_timestamp(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda row: (row[2], str(row[0])))


class ExampleRun:
    """One example's topology, run on the test driver or on the embedded cluster.

    ``send`` writes an input record; ``start`` starts processing (a no-op on the driver, which
    processes each record as it is piped); ``output`` is everything written to an output topic so
    far; ``expect`` waits until a view of an output equals the expected value (on the driver it
    holds at once or never)."""

    def send(self, topic: str, key: Any, value: Any, timestamp: int) -> None:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def output(self, topic: str) -> list[Row]:
        raise NotImplementedError

    def store(self, name: str) -> Any:
        raise NotImplementedError

    def wait_for(self, condition: Callable[[], bool], what: str) -> None:
        raise NotImplementedError

    def expect(self, topic: str, view: Callable[[list[Row]], Any], expected: Any) -> None:
        try:
            self.wait_for(lambda: view(self.output(topic)) == expected, f"{topic} to hold {expected!r}")
        finally:
            assert view(self.output(topic)) == expected  # shows the difference when the wait failed


class DriverRun(ExampleRun):
    def __init__(self, driver: TopologyTestDriver, serdes: dict[str, SerdePair]) -> None:
        self._driver = driver
        self._serdes = serdes
        self._inputs: dict[str, Any] = {}
        self._outputs: dict[str, Any] = {}
        self._seen: dict[str, list[Row]] = {}

    def send(self, topic: str, key: Any, value: Any, timestamp: int) -> None:
        if topic not in self._inputs:
            self._inputs[topic] = self._driver.create_input_topic(topic, *self._serdes[topic])
        self._inputs[topic].pipe_input(key, value, timestamp)

    def start(self) -> None:
        pass

    def output(self, topic: str) -> list[Row]:
        if topic not in self._outputs:
            self._outputs[topic] = self._driver.create_output_topic(topic, *self._serdes[topic])
            self._seen[topic] = []
        self._seen[topic] += [
            (r.key, r.value, r.timestamp) for r in self._outputs[topic].read_records_to_list()
        ]
        return list(self._seen[topic])

    def store(self, name: str) -> Any:
        """The store with plain values, as ``KafkaStreams.store`` shows it."""
        driver = self._driver
        for typed in (driver.get_key_value_store, driver.get_window_store, driver.get_session_store):
            store = typed(name)
            if store is not None:
                return store
        raise AssertionError(f"the topology has no key-value, window or session store {name!r}")

    def wait_for(self, condition: Callable[[], bool], what: str) -> None:
        assert condition(), f"the driver processed every record, yet not {what}"


class ClusterRun(ExampleRun):
    def __init__(
        self, cluster: EmbeddedCluster, topology: Any, config: dict[str, object], serdes: dict[str, SerdePair]
    ) -> None:
        self._cluster = cluster
        self._topology = topology
        self._config = config
        self._serdes = serdes
        self.streams: KafkaStreams | None = None

    def send(self, topic: str, key: Any, value: Any, timestamp: int) -> None:
        key_serde, value_serde = self._serdes[topic]
        self._cluster.produce(
            topic, key_serde.serialize(topic, key), value_serde.serialize(topic, value), timestamp=timestamp
        )

    def start(self) -> None:
        self.streams = KafkaStreams(self._topology, self._config, cluster=self._cluster)
        self.streams.start()
        self.wait_for(
            lambda: self.streams is not None and self.streams.state is KafkaStreams.State.RUNNING, "RUNNING"
        )

    def output(self, topic: str) -> list[Row]:
        key_serde, value_serde = self._serdes[topic]
        return [
            (key_serde.deserialize(topic, r.key), value_serde.deserialize(topic, r.value), r.timestamp)
            for r in self._cluster.read(topic)
        ]

    def store(self, name: str) -> Any:
        assert self.streams is not None, "start() the example before querying its stores"
        return self.streams.store(name)

    def wait_for(self, condition: Callable[[], bool], what: str) -> None:
        tick = threading.Event()
        deadline = time.monotonic() + CLUSTER_TIMEOUT
        while not _holds(condition):
            if time.monotonic() > deadline:
                raise AssertionError(f"Timed out after {CLUSTER_TIMEOUT}s waiting for {what}")
            tick.wait(0.02)

    def close(self) -> None:
        if self.streams is not None:
            self.streams.close(timeout=30.0)


def _holds(condition: Callable[[], bool]) -> bool:
    try:
        return condition()
    except InvalidStateStoreException:
        return False  # a store is queried before its task runs (or while it restores)


@pytest.fixture
def example(tmp_path: Path, app_id: str) -> Iterator[Callable[..., ExampleRun]]:
    """``example(mode, topology, topics, config=None)``: the topology on the test driver ("driver")
    or in KafkaStreams on a fresh EmbeddedCluster ("embedded"). ``topics`` maps each input and
    output topic to ``(key serde, value serde, partitions)``; the driver ignores the partitions."""
    drivers: list[TopologyTestDriver] = []
    clusters: list[EmbeddedCluster] = []
    runs: list[ClusterRun] = []

    def make(
        mode: str,
        topology: Any,
        topics: dict[str, tuple[Any, Any, int]],
        config: dict[str, object] | None = None,
    ) -> ExampleRun:
        serdes = {topic: (key_serde, value_serde) for topic, (key_serde, value_serde, _) in topics.items()}
        props: dict[str, object] = {"default.key.serde": "string", "default.value.serde": "string"}
        props.update(config or {})
        if mode == "driver":
            driver = TopologyTestDriver(topology, props)
            drivers.append(driver)
            return DriverRun(driver, serdes)
        cluster = EmbeddedCluster()
        clusters.append(cluster)
        for topic, (_, _, partitions) in topics.items():
            cluster.create_topic(topic, partitions)
        props.update(
            {
                "application.id": app_id,
                "state.dir": str(tmp_path / "state"),
                "commit.interval.ms": 50,
                "session.timeout.ms": 1000,
            }
        )
        run = ClusterRun(cluster, topology, props, serdes)
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.close()
    for cluster in clusters:
        cluster.close()
    for driver in drivers:
        driver.close()


# --------------------------------------------------------------------------------------------------
# WordCountLambdaExample (Confluent kafka-streams-examples, WordCountLambdaIntegrationTest; Apache
# Kafka's streams/examples WordCountDemo): lines split into lower-cased words, counted per word.


def word_count(source: str, sink: str) -> Any:
    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed.with_(S, S))
        .flat_map_values(lambda line: [word for word in re.split(r"\W+", line.lower()) if word])
        .group_by(lambda _key, word: word, Grouped.with_(S, S))
        .count()
        .to_stream()
        .to(sink, Produced.with_(S, L))
    )
    return builder.build()


@MODES
def test_word_count_counts_each_lower_cased_word_across_partitions(mode: str, example) -> None:
    run = example(mode, word_count("text-lines", "word-counts"), {
        "text-lines": (S, S, 3), "word-counts": (S, L, 2),
    })  # fmt: skip
    run.start()
    lines = [
        "Hello Kafka Streams",
        "All streams lead to Kafka",
        "Join Kafka Summit",
        "И теперь пошли русские слова",
    ]
    for i, line in enumerate(lines):
        run.send("text-lines", None, line, 1000 + i)  # null keys: spread round-robin on the cluster
    run.expect("word-counts", latest, {
        "hello": 1, "all": 1, "streams": 2, "lead": 1, "to": 1, "join": 1, "kafka": 3, "summit": 1,
        "и": 1, "теперь": 1, "пошли": 1, "русские": 1, "слова": 1,
    })  # fmt: skip
    # A count's timestamp is that of the record that made it: "kafka" reached 3 with the third line.
    assert latest_with_timestamps(run.output("word-counts"))["kafka"] == (3, 1002)


# --------------------------------------------------------------------------------------------------
# MapFunctionLambdaExample (Confluent, MapFunctionLambdaIntegrationTest): values upper-cased with
# map_values, and a second output keyed by the original value with map.


def map_function(source: str, upper: str, original_and_upper: str) -> Any:
    builder = StreamsBuilder()
    lines = builder.stream(source, Consumed.with_(S, S))
    lines.map_values(str.upper).to(upper)
    lines.map(lambda _key, value: (value, value.upper())).to(original_and_upper)
    return builder.build()


@MODES
def test_map_function_upper_cases_values_and_rekeys_by_the_original(mode: str, example) -> None:
    run = example(mode, map_function("text", "upper", "original-and-upper"), {
        "text": (S, S, 2), "upper": (S, S, 1), "original-and-upper": (S, S, 1),
    })  # fmt: skip
    run.start()
    for i, value in enumerate(["hello", "world"]):
        run.send("text", None, value, 500 + i)
    run.expect("upper", by_timestamp, [(None, "HELLO", 500), (None, "WORLD", 501)])
    run.expect("original-and-upper", by_timestamp, [("hello", "HELLO", 500), ("world", "WORLD", 501)])


# --------------------------------------------------------------------------------------------------
# SumLambdaExample (Confluent, SumLambdaIntegrationTest): the odd numbers among 1..10, re-keyed to
# one key and summed.

ONE_KEY = 1


def sum_of_odd_numbers(source: str, sink: str) -> Any:
    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed.with_(I, I))
        .filter(lambda _key, number: number % 2 != 0)
        .select_key(lambda _key, _number: ONE_KEY)
        .group_by_key(Grouped.with_(I, I))
        .reduce(lambda total, number: total + number)
        .to_stream()
        .to(sink, Produced.with_(I, I))
    )
    return builder.build()


@MODES
def test_sum_of_odd_numbers_meets_in_one_key_after_a_repartition(mode: str, example) -> None:
    run = example(mode, sum_of_odd_numbers("numbers", "sum-of-odd-numbers"), {
        "numbers": (I, I, 3), "sum-of-odd-numbers": (I, I, 1),
    })  # fmt: skip
    run.start()
    for number in range(1, 11):
        run.send("numbers", None, number, 100 * number)
    run.expect("sum-of-odd-numbers", latest, {ONE_KEY: 25})
    # The sum's timestamp is the largest of the numbers that made it (9's).
    assert latest_with_timestamps(run.output("sum-of-odd-numbers")) == {ONE_KEY: (25, 900)}


# --------------------------------------------------------------------------------------------------
# SessionWindowsExample (Confluent, SessionWindowsExampleTest): play events counted per user
# session with a 30-minute inactivity gap; a late event between two sessions merges them, and the
# merged sessions are deleted from the output (tombstones) before the merged count.

INACTIVITY_GAP = 30 * MINUTE
PLAY_EVENTS_PER_SESSION = "play-events-per-session"


def play_events_per_session(source: str, sink: str) -> Any:
    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed.with_(S, J))
        .group_by_key(Grouped.with_(S, J))
        # Kafka's SessionWindows.with(gap) had a grace of 24 hours: the merging event is late.
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(INACTIVITY_GAP, KAFKA_DEFAULT_GRACE))
        .count(Materialized.as_(PLAY_EVENTS_PER_SESSION))
        .to_stream()
        .map(lambda session, count: (f"{session.key}@{session.start}->{session.end}", count))
        .to(sink, Produced.with_(S, L))
    )
    return builder.build()


@MODES
def test_session_windows_count_play_events_and_merge_sessions(mode: str, example) -> None:
    run = example(
        mode,
        play_events_per_session("play-events", "play-events-per-session-out"),
        {"play-events": (S, J, 2), "play-events-per-session-out": (S, L, 1)},
        # The example turns the record cache off so that every session update reaches the topic.
        {"statestore.cache.max.bytes": 0},
    )
    run.start()
    user, start = "erica", hour_aligned_base()
    second_start = start + INACTIVITY_GAP + 1

    def sessions() -> list[tuple[WindowedKey[str], int]]:
        return list(run.store(PLAY_EVENTS_PER_SESSION).fetch(user))

    run.send("play-events", user, {"song_id": 1, "duration": 10}, start)
    first = [(f"{user}@{start}->{start}", 1, start)]
    run.expect("play-events-per-session-out", list, first)
    run.wait_for(
        lambda: sessions() == [(WindowedKey(user, start, start), 1)], "the first session in the store"
    )

    run.send("play-events", user, {"song_id": 2, "duration": 10}, second_start)
    second = [*first, (f"{user}@{second_start}->{second_start}", 1, second_start)]
    run.expect("play-events-per-session-out", list, second)
    assert sessions() == [
        (WindowedKey(user, start, start), 1),
        (WindowedKey(user, second_start, second_start), 1),
    ]

    run.send("play-events", user, {"song_id": 3, "duration": 10}, start + INACTIVITY_GAP // 2)
    merged = [
        *second,
        (f"{user}@{start}->{start}", None, start),
        (f"{user}@{second_start}->{second_start}", None, second_start),
        (f"{user}@{start}->{second_start}", 3, second_start),
    ]
    run.expect("play-events-per-session-out", list, merged)
    run.wait_for(
        lambda: sessions() == [(WindowedKey(user, start, second_start), 3)], "only the merged session"
    )


# --------------------------------------------------------------------------------------------------
# GlobalKTablesExample (Confluent, GlobalKTablesExampleTest): orders enriched with their customer
# and their product, both global tables (no co-partitioning: the global topics have more
# partitions than the orders).


def enriched_orders(orders: str, customers: str, products: str, sink: str) -> Any:
    builder = StreamsBuilder()
    customer_table = builder.global_table(customers, Consumed.with_(S, J))
    product_table = builder.global_table(products, Consumed.with_(S, J))
    (
        builder.stream(orders, Consumed.with_(S, J))
        .join(
            customer_table,
            lambda _order_id, order: order["customer_id"],
            lambda order, customer: {"order": order, "customer": customer},
        )
        .join(
            product_table,
            lambda _order_id, with_customer: with_customer["order"]["product_id"],
            lambda with_customer, product: {
                "customer": with_customer["customer"]["name"],
                "product": product["name"],
                "quantity": with_customer["order"]["quantity"],
            },
        )
        .to(sink, Produced.with_(S, J))
    )
    return builder.build()


@MODES
def test_global_tables_enrich_orders_with_customer_and_product(mode: str, example) -> None:
    run = example(mode, enriched_orders("orders", "customers", "products", "enriched-orders"), {
        "orders": (S, J, 2), "customers": (S, J, 3), "products": (S, J, 3), "enriched-orders": (S, J, 1),
    })  # fmt: skip
    base = hour_aligned_base()
    for i, (customer_id, name) in enumerate([("c1", "Ann"), ("c2", "Bob"), ("c3", "Cid")]):
        run.send("customers", customer_id, {"name": name, "region": "eu"}, base + i)
    for i, (product_id, name) in enumerate([("p1", "lamp"), ("p2", "desk")]):
        run.send("products", product_id, {"name": name, "supplier": "acme"}, base + i)
    run.start()  # on the cluster, global stores are bootstrapped before the client runs
    orders = [
        ("o1", "c1", "p1", 2),
        ("o2", "c2", "p2", 1),
        ("o3", "c9", "p1", 5),  # no such customer: an inner join drops it
        ("o4", "c3", "p9", 1),  # no such product
        ("o5", "c3", "p1", 4),
    ]
    for i, (order_id, customer_id, product_id, quantity) in enumerate(orders):
        order = {"customer_id": customer_id, "product_id": product_id, "quantity": quantity}
        run.send("orders", order_id, order, base + 100 + i)
    run.expect("enriched-orders", by_timestamp, [
        ("o1", {"customer": "Ann", "product": "lamp", "quantity": 2}, base + 100),
        ("o2", {"customer": "Bob", "product": "desk", "quantity": 1}, base + 101),
        ("o5", {"customer": "Cid", "product": "lamp", "quantity": 4}, base + 104),
    ])  # fmt: skip


# --------------------------------------------------------------------------------------------------
# TopArticlesLambdaExample (Confluent, TopArticlesLambdaExampleTest): article views counted per
# page in one-hour windows, each window's final counts (suppress) grouped by industry and window,
# and the pages of each industry listed by views, most viewed first (top 100).

TOP_N = 100
ARTICLE_VIEWS = "article-views-per-hour"
# Industries per hour, keyed as Kafka's example keys them (Windowed<String>).
HOURLY_KEYS = WindowedSerdes.time_windowed_serde_from(S, HOUR)


def add_page(_key: str, page: dict[str, Any], pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [*pages, page]


def remove_page(_key: str, page: dict[str, Any], pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pages if p != page]


def top_pages(pages: list[dict[str, Any]]) -> str:
    ranked = sorted(pages, key=lambda page: -page["count"])
    return "\n".join(page["page"] for page in ranked[:TOP_N])


def top_articles(page_views: str, sink: str) -> Any:
    builder = StreamsBuilder()
    (
        builder.stream(page_views, Consumed.with_(S, J))
        .filter(lambda _key, view: view["flags"] == "ARTICLE")
        .map(lambda _key, view: (f"{view['industry']}/{view['page']}", view))
        .group_by_key(Grouped.with_(S, J))
        .windowed_by(TimeWindows.of_size_with_no_grace(HOUR))
        .count(Materialized.as_(ARTICLE_VIEWS))
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .group_by(
            lambda window, count: (
                WindowedKey(window.key.split("/")[0], window.start, window.end),
                {"page": window.key.split("/")[1], "count": count},
            ),
            Grouped.with_(HOURLY_KEYS, J),
        )
        .aggregate(list, add_page, remove_page, Materialized.with_(HOURLY_KEYS, J))
        .map_values(top_pages)
        .to_stream()
        .to(sink, Produced.with_(HOURLY_KEYS, S))
    )
    return builder.build()


@MODES
def test_top_articles_per_industry_from_each_windows_final_counts(mode: str, example) -> None:
    run = example(mode, top_articles("page-views", "top-news-per-industry"), {
        "page-views": (S, J, 3), "top-news-per-industry": (HOURLY_KEYS, S, 1),
    })  # fmt: skip
    run.start()
    base = hour_aligned_base()
    users = ["jo", "lauren", "tim", "sam"]
    views = [
        ("eng", "news", 3), ("eng", "random", 2), ("eng", "stuff", 1),
        ("science", "index", 3), ("science", "about", 2), ("science", "help", 1),
    ]  # fmt: skip
    offset = 0
    for industry, page, count in views:
        for _ in range(count):
            view = {"user": users[offset % 4], "page": page, "industry": industry, "flags": "ARTICLE"}
            run.send("page-views", None, view, base + offset * SECOND)
            offset += 1
    run.send("page-views", None, {"user": "jo", "page": "home", "industry": "eng", "flags": "OTHER"}, base)
    # The views reach the counting tasks from three input partitions in no fixed order: a view
    # of the next hour counted before them would close the first hour early (with no grace, the
    # rest would be late). Kafka's test sends no such view; here the counts are in first.
    counts = {f"{industry}/{page}": count for industry, page, count in views}
    run.wait_for(
        lambda: {w.key: n for w, n in run.store(ARTICLE_VIEWS).fetch_all(base, base + HOUR - 1)} == counts,
        "the first hour's view counts",
    )
    assert run.output("top-news-per-industry") == []  # the first hour is still open
    # One view of each article in the next hour: the first hour closes in every task that counts it.
    for industry, page, _ in views:
        run.send(
            "page-views",
            None,
            {"user": "jo", "page": page, "industry": industry, "flags": "ARTICLE"},
            base + HOUR,
        )
    run.expect("top-news-per-industry", latest, {
        WindowedKey("eng", base, base + HOUR): "news\nrandom\nstuff",
        WindowedKey("science", base, base + HOUR): "index\nabout\nhelp",
    })  # fmt: skip


# --------------------------------------------------------------------------------------------------
# EventDeduplicationLambdaIntegrationTest (Confluent): a processor with a window store drops each
# record whose event id (here the value) it saw within the last 10 minutes. Kafka's test uses one
# partition and null keys; here the records are keyed by their event id, so that the duplicates of
# an event meet in one task (one store) on a multi-partition topic.

EVENT_ID_STORE = "eventId-store"
MAINTAIN_DURATION = 10 * MINUTE


class DeduplicationProcessor(FixedKeyProcessor[str, str, str]):
    """Forwards a record unless its event id is in the store within ``maintain_ms`` around its
    timestamp; a duplicate moves the remembered time forward, so it keeps the event from expiring."""

    def __init__(self, maintain_ms: int, event_id: Callable[[str, str], str | None]) -> None:
        self.left_ms = maintain_ms // 2
        self.right_ms = maintain_ms - self.left_ms
        self.event_id = event_id

    def init(self, context: FixedKeyProcessorContext[str, str]) -> None:
        self.context = context
        self.seen = context.get_state_store(EVENT_ID_STORE)

    def process(self, record: FixedKeyRecord[str, str]) -> None:
        event_id = self.event_id(record.key, record.value)
        if event_id is None:
            self.context.forward(record)
            return
        at = record.timestamp
        duplicate = any(True for _ in self.seen.fetch_range(event_id, at - self.left_ms, at + self.right_ms))
        self.seen.put(event_id, at, at)
        if not duplicate:
            self.context.forward(record)


def deduplicated(source: str, sink: str) -> Any:
    builder = StreamsBuilder()
    builder.add_state_store(
        Stores.window_store_builder(
            Stores.persistent_window_store(EVENT_ID_STORE, MAINTAIN_DURATION, MAINTAIN_DURATION), S, L
        )
    )
    builder.stream(source, Consumed.with_(S, S)).process_values(
        lambda: DeduplicationProcessor(MAINTAIN_DURATION, lambda _key, value: value), EVENT_ID_STORE
    ).to(sink, Produced.with_(S, S))
    return builder.build()


@MODES
def test_event_deduplication_drops_repeated_event_ids_with_a_window_store(mode: str, example) -> None:
    run = example(mode, deduplicated("events", "deduplicated-events"), {
        "events": (S, S, 3), "deduplicated-events": (S, S, 1),
    })  # fmt: skip
    run.start()
    base = hour_aligned_base()
    first, second, third = (
        "4ff3cb44-abcb-46e3-8f9a-afb7cc74fbb8",
        "b6c4a29e-2f4d-4a0b-9d1d-4f16d9b1e0c2",
        "0d9c5a9e-7d8e-4f3b-8c43-2f6e4b1a9c77",
    )
    inputs = [first, second, first, first, second, third, third, first, second]
    for i, event_id in enumerate(inputs):
        run.send("events", event_id, event_id, base + i * SECOND)
    run.expect("deduplicated-events", by_timestamp, [
        (first, first, base), (second, second, base + SECOND), (third, third, base + 5 * SECOND),
    ])  # fmt: skip


# --------------------------------------------------------------------------------------------------
# StreamToTableJoinIntegrationTest (Confluent; "user clicks per region"): clicks per user joined
# with the user's current region (a table; UNKNOWN if none), re-keyed by region and summed.


def clicks_per_region(clicks: str, regions: str, sink: str) -> Any:
    builder = StreamsBuilder()
    user_regions = builder.table(regions, Consumed.with_(S, S), Materialized.as_("user-regions-store"))
    (
        builder.stream(clicks, Consumed.with_(S, L))
        .left_join(user_regions, lambda count, region: (region or "UNKNOWN", count))
        .map(lambda _user, region_and_clicks: region_and_clicks)
        .group_by_key(Grouped.with_(S, L))
        .reduce(lambda total, count: total + count)
        .to_stream()
        .to(sink, Produced.with_(S, L))
    )
    return builder.build()


USER_REGIONS = [
    ("alice", "asia"), ("bob", "americas"), ("chao", "asia"), ("dave", "europe"),
    ("alice", "europe"),  # alice moves
    ("eve", "americas"), ("fang", "asia"),
]  # fmt: skip


@MODES
def test_stream_table_join_sums_user_clicks_per_region(mode: str, example) -> None:
    run = example(mode, clicks_per_region("user-clicks", "user-regions", "clicks-per-region"), {
        "user-clicks": (S, L, 2), "user-regions": (S, S, 2), "clicks-per-region": (S, L, 1),
    })  # fmt: skip
    run.start()
    base = hour_aligned_base()
    for i, (user, region) in enumerate(USER_REGIONS):
        run.send("user-regions", user, region, base + i)
    final_regions = dict(USER_REGIONS)
    # The join reads the table as it is: the regions are in before the clicks are sent.
    run.wait_for(
        lambda: {user: run.store("user-regions-store").get(user) for user in final_regions} == final_regions,
        "the user regions in the table",
    )
    clicks = [
        ("alice", 13), ("bob", 4), ("chao", 25), ("bob", 19),
        ("dave", 56), ("eve", 78), ("alice", 40), ("fang", 99),
    ]  # fmt: skip
    for i, (user, count) in enumerate(clicks):
        run.send("user-clicks", user, count, base + 100 + i)
    run.expect("clicks-per-region", latest, {"americas": 101, "europe": 109, "asia": 124})


# --------------------------------------------------------------------------------------------------
# PageViewRegionLambdaExample (Confluent; Apache Kafka's streams/examples pageview): page views
# keyed by user, joined with the user's region from the profiles table, re-keyed by region and
# counted in hopping windows of 5 minutes that advance by 1 minute.


def page_views_per_region(views: str, profiles: str, sink: str) -> Any:
    builder = StreamsBuilder()
    regions = builder.table(profiles, Consumed.with_(S, J), Materialized.as_("user-profiles")).map_values(
        lambda profile: profile["region"]
    )
    (
        builder.stream(views, Consumed.with_(S, J))
        .map(lambda _key, view: (view["user"], view))
        .left_join(
            regions,
            lambda view, region: {**view, "region": region or "UNKNOWN"},
            Joined.with_(S, J, S),  # the serdes of the repartition that the re-keyed views need
        )
        .map(lambda _user, view: (view["region"], view))
        .group_by_key(Grouped.with_(S, J))
        .windowed_by(TimeWindows.of_size_and_grace(5 * MINUTE, KAFKA_DEFAULT_GRACE).advance_by(MINUTE))
        .count()
        .to_stream()
        .map(lambda window, count: (f"{window.key}@{window.start}", count))
        .to(sink, Produced.with_(S, L))
    )
    return builder.build()


@MODES
def test_page_views_counted_per_region_in_hopping_windows(mode: str, example) -> None:
    run = example(mode, page_views_per_region("page-views", "user-profiles", "page-views-by-region"), {
        "page-views": (S, J, 3), "user-profiles": (S, J, 2), "page-views-by-region": (S, L, 1),
    })  # fmt: skip
    run.start()
    base = hour_aligned_base()
    run.send("user-profiles", "alice", {"experience": "some", "region": "asia"}, base - HOUR)
    run.send("user-profiles", "bob", {"experience": "lots", "region": "europe"}, base - HOUR)
    run.wait_for(
        lambda: (
            {user: run.store("user-profiles").get(user) is not None for user in ("alice", "bob")}
            == {"alice": True, "bob": True}
        ),
        "the user profiles in the table",
    )
    for user, page, at in [
        ("alice", "index", base),
        ("bob", "news", base + 30 * SECOND),
        ("alice", "news", base + 2 * MINUTE),
        ("carl", "index", base + 3 * MINUTE),
    ]:
        run.send("page-views", None, {"user": user, "page": page}, at)

    def windows(region: str, first_start: int, last_start: int, count: int) -> dict[str, int]:
        return {f"{region}@{start}": count for start in range(first_start, last_start + 1, MINUTE)}

    # A view belongs to the five windows that started in the five minutes up to it.
    run.expect("page-views-by-region", latest, {
        **windows("asia", base - 4 * MINUTE, base - 3 * MINUTE, 1),
        **windows("asia", base - 2 * MINUTE, base, 2),
        **windows("asia", base + MINUTE, base + 2 * MINUTE, 1),
        **windows("europe", base - 4 * MINUTE, base, 1),
        **windows("UNKNOWN", base - MINUTE, base + 3 * MINUTE, 1),
    })  # fmt: skip


# --------------------------------------------------------------------------------------------------
# UserCountsPerRegionLambdaExample (Confluent, UserCountsPerRegionLambdaIntegrationTest): the
# user-regions table re-grouped by region and counted; a user who moves leaves the old region.


def user_counts_per_region(regions: str, sink: str) -> Any:
    builder = StreamsBuilder()
    (
        builder.table(regions, Consumed.with_(S, S))
        .group_by(lambda _user, region: (region, region), Grouped.with_(S, S))
        .count()
        .to_stream()
        .to(sink, Produced.with_(S, L))
    )
    return builder.build()


@MODES
def test_user_counts_per_region_follow_users_who_move(mode: str, example) -> None:
    run = example(mode, user_counts_per_region("user-regions", "users-per-region"), {
        "user-regions": (S, S, 3), "users-per-region": (S, L, 1),
    })  # fmt: skip
    run.start()
    base = hour_aligned_base()
    for i, (user, region) in enumerate(USER_REGIONS):
        run.send("user-regions", user, region, base + i)
    run.expect("users-per-region", latest, {"americas": 2, "europe": 2, "asia": 2})


# --------------------------------------------------------------------------------------------------
# Cogrouping streams (Confluent's "cogroup" tutorial; Kafka's KIP-150 example): login events of
# three applications, one topic each and keyed by user, cogrouped into one aggregate per user.


def count_login(app: str) -> Callable[[str, str, dict[str, int]], dict[str, int]]:
    def aggregate(_user: str, _login_time: str, logins: dict[str, int]) -> dict[str, int]:
        return {**logins, app: logins.get(app, 0) + 1}

    return aggregate


def login_rollup(apps: list[str], sink: str) -> Any:
    builder = StreamsBuilder()
    grouped = [builder.stream(app, Consumed.with_(S, S)).group_by_key(Grouped.with_(S, S)) for app in apps]
    cogrouped = grouped[0].cogroup(count_login(apps[0]))
    for app, logins in zip(apps[1:], grouped[1:], strict=True):
        cogrouped = cogrouped.cogroup(logins, count_login(app))
    cogrouped.aggregate(dict, Materialized.with_(S, J)).to_stream().to(sink, Produced.with_(S, J))
    return builder.build()


@MODES
def test_cogroup_rolls_up_logins_of_three_applications_per_user(mode: str, example) -> None:
    apps = ["app-one", "app-two", "app-three"]
    topics = {app: (S, S, 2) for app in apps}
    run = example(mode, login_rollup(apps, "login-rollup"), {**topics, "login-rollup": (S, J, 1)})
    run.start()
    base = hour_aligned_base()
    logins = [
        ("app-one", "ted"), ("app-one", "carol"), ("app-two", "ted"), ("app-one", "ted"),
        ("app-three", "carol"), ("app-two", "alice"), ("app-three", "ted"), ("app-three", "ted"),
    ]  # fmt: skip
    for i, (app, user) in enumerate(logins):
        run.send(app, user, f"login-{i}", base + i)
    run.expect("login-rollup", latest_with_timestamps, {
        "ted": ({"app-one": 2, "app-two": 1, "app-three": 2}, base + 7),
        "carol": ({"app-one": 1, "app-three": 1}, base + 4),
        "alice": ({"app-two": 1}, base + 5),
    })  # fmt: skip


# --------------------------------------------------------------------------------------------------
# Foreign-key join (Confluent's "foreign-key joins" tutorial; Kafka's KIP-213): track purchases
# (a table keyed by purchase id) joined with albums (keyed by album id) by the purchase's album id,
# into music interests. An album update re-joins every purchase of the album; a deleted purchase
# deletes its result. The two tables have different partition counts.


def music_interests(albums: str, purchases: str, sink: str) -> Any:
    builder = StreamsBuilder()
    album_table = builder.table(albums, Consumed.with_(S, J), Materialized.as_("albums-store"))
    (
        builder.table(purchases, Consumed.with_(S, J))
        .join(
            album_table,
            lambda purchase: purchase["album_id"],
            lambda purchase, album: {
                "id": f"{purchase['album_id']}-{purchase['song_title']}",
                "genre": album["genre"],
                "artist": album["artist"],
            },
        )
        .to_stream()
        .to(sink, Produced.with_(S, J))
    )
    return builder.build()


@MODES
def test_foreign_key_join_enriches_track_purchases_with_their_album(mode: str, example) -> None:
    run = example(mode, music_interests("albums", "track-purchases", "music-interest"), {
        "albums": (S, J, 3), "track-purchases": (S, J, 2), "music-interest": (S, J, 1),
    })  # fmt: skip
    run.start()
    base = hour_aligned_base()
    albums = {
        "5": {"title": "Physical Graffiti", "artist": "Led Zeppelin", "genre": "Rock"},
        "6": {"title": "Highway to Hell", "artist": "AC/DC", "genre": "Rock"},
        "7": {"title": "Radio", "artist": "LL Cool J", "genre": "Hip hop"},
        "8": {"title": "King of Rock", "artist": "Run-D.M.C", "genre": "Rap rock"},
    }
    for i, (album_id, album) in enumerate(albums.items()):
        run.send("albums", album_id, album, base + i)
    run.wait_for(
        lambda: {album_id: run.store("albums-store").get(album_id) for album_id in albums} == albums,
        "the albums in the table",
    )
    purchases = [
        ("100", "Houses Of The Holy", "5"),
        ("101", "Trampled Under Foot", "5"),
        ("102", "Shot Down In Flames", "6"),
        ("103", "Mama Said Knock You Out", "7"),
        ("104", "Rock Box", "8"),
        ("105", "Unknown Track", "99"),  # no such album: no result
    ]
    for i, (purchase_id, song, album_id) in enumerate(purchases):
        run.send(
            "track-purchases",
            purchase_id,
            {"song_title": song, "album_id": album_id, "price": 0.99},
            base + 10 + i,
        )
    interest = {
        "100": ({"id": "5-Houses Of The Holy", "genre": "Rock", "artist": "Led Zeppelin"}, base + 10),
        "101": ({"id": "5-Trampled Under Foot", "genre": "Rock", "artist": "Led Zeppelin"}, base + 11),
        "102": ({"id": "6-Shot Down In Flames", "genre": "Rock", "artist": "AC/DC"}, base + 12),
        "103": ({"id": "7-Mama Said Knock You Out", "genre": "Hip hop", "artist": "LL Cool J"}, base + 13),
        "104": ({"id": "8-Rock Box", "genre": "Rap rock", "artist": "Run-D.M.C"}, base + 14),
    }
    run.expect("music-interest", latest_with_timestamps, interest)

    # The album's genre changes: both of its purchases are joined again, at the album's time.
    run.send("albums", "5", {**albums["5"], "genre": "Hard rock"}, base + 20)
    run.send("track-purchases", "103", None, base + 21)  # a deleted purchase deletes its interest
    interest["100"] = (
        {"id": "5-Houses Of The Holy", "genre": "Hard rock", "artist": "Led Zeppelin"},
        base + 20,
    )
    interest["101"] = (
        {"id": "5-Trampled Under Foot", "genre": "Hard rock", "artist": "Led Zeppelin"},
        base + 20,
    )
    interest["103"] = (None, base + 21)
    run.expect("music-interest", latest_with_timestamps, interest)


# --------------------------------------------------------------------------------------------------
# AnomalyDetectionLambdaExample (Confluent): users who click three or more times in one minute,
# from a windowed count and a filter; the stream drops the filter's tombstones.


def click_anomalies(clicks: str, sink: str) -> Any:
    builder = StreamsBuilder()
    (
        builder.stream(clicks, Consumed.with_(S, S))
        .map(lambda _key, user: (user, user))
        .group_by_key(Grouped.with_(S, S))
        .windowed_by(TimeWindows.of_size_and_grace(MINUTE, KAFKA_DEFAULT_GRACE))
        .count()
        .filter(lambda _window, count: count >= 3)
        .to_stream()
        .filter(lambda _window, count: count is not None)
        .map(lambda window, count: (f"{window.key}@{window.start}", count))
        .to(sink, Produced.with_(S, L))
    )
    return builder.build()


@MODES
def test_anomaly_detection_reports_users_with_three_clicks_in_a_minute(mode: str, example) -> None:
    run = example(mode, click_anomalies("user-clicks", "anomalous-users"), {
        "user-clicks": (S, S, 3), "anomalous-users": (S, L, 1),
    })  # fmt: skip
    run.start()
    base = hour_aligned_base()
    clicks = [
        ("alice", 0), ("bob", 1), ("alice", 2), ("alice", 3),  # alice: 3 in the first minute
        ("bob", MINUTE - 1), ("bob", MINUTE + 1),  # bob: 2 and then 1
        ("carol", MINUTE + 2), ("carol", MINUTE + 3), ("carol", MINUTE + 4), ("carol", MINUTE + 5),
    ]  # fmt: skip
    for user, offset in clicks:
        run.send("user-clicks", None, user, base + offset)
    # With the record cache, the cluster may fold carol's 3 into her 4: compare each key's last.
    run.expect("anomalous-users", latest_with_timestamps, {
        f"alice@{base}": (3, base + 3),
        f"carol@{base + MINUTE}": (4, base + MINUTE + 5),
    })  # fmt: skip
