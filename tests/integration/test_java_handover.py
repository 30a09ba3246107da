"""State a Kafka Streams (Java) application hands over to kstreams, and the reverse (issue 43, item 6).

A Java application (jvm/src/main/java/io/kstreams/handover/HandoverApp.java: a count, a windowed
aggregate after a repartition, a suppress until the windows close and a stream-table join) runs on
Apache Kafka over the first part of the input and is closed; a kstreams application with the same
application.id and the same topology (``handover_topology``, the same DSL calls in the same order, so
every generated store, changelog and repartition topic name is Kafka's) starts on a fresh state
directory, finds the Java application's internal topics, restores its stores from their changelogs,
resumes from its committed offsets and processes the rest. Its outputs must continue the Java
application's exactly: every output topic holds, per key, what one application processing the whole
input would have written, each record once. Then the same with kstreams first and Java second.

A second application (HandoverTablesApp, ``tables_topology``) does the same with the formats the
first does not reach: a session-windowed count, a foreign-key table join (its subscription and
response topics and its subscription store) and a table group_by that re-keys rows (its
repartition records carry old and new values). Both check the task checkpoint files the first
application leaves: Kafka's numbers (the offset of each changelog's last record), which the other
library reads.
"""

from __future__ import annotations

import select
import shutil
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from kstreams import (
    BufferConfig,
    Consumed,
    Grouped,
    KafkaStreams,
    KeyValue,
    Materialized,
    Produced,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    Suppressed,
    TableJoined,
    TimeWindows,
    Topology,
)
from kstreams._native.record_batch import default_partition
from kstreams.cluster.port import TopicPartition
from kstreams.processing.offset_metadata import TopicPartitionMetadata
from kstreams.state.checkpoint import OFFSET_UNKNOWN, OffsetCheckpoint, TaskOffsetCheckpoint
from kstreams.state.window_key_schema import from_session_key
from kstreams.topology.dsl.foreign_key_serdes import (
    ResponseWrapperSerde,
    SubscriptionWrapperSerde,
    value_hash,
)
from kstreams.topology.dsl.processors.table_aggregate import ChangeSerde
from tests.support.kafka_broker import REPO, kafka_classpath
from tests.support.waiting import holds_within, wait_until

pytestmark = pytest.mark.integration

SOURCES = REPO / "jvm" / "src" / "main" / "java" / "io" / "kstreams" / "handover"
CLASSES = REPO / "jvm" / "target" / "handover-classes"
MAIN_CLASS = "io.kstreams.handover.HandoverApp"
TABLES_MAIN_CLASS = "io.kstreams.handover.HandoverTablesApp"
JVM_OPTIONS = ["-Xms128m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]

# One partition for the inputs (so for the repartition topic too): records from two input
# partitions would reach the windowed aggregation in an order that depends on which task ran
# first, so which records are late and in what order a window's users are listed would not be
# fixed. The outputs have two.
PARTITIONS = 1
OUTPUT_PARTITIONS = 2
# An hour ago, on a window boundary: window store changelogs are also deleted by time (their
# retention is the store's plus a day), so records from long ago would vanish from them as soon as
# the broker's retention check runs.
T0 = (int(time.time() * 1000) // 60_000) * 60_000 - 3_600_000
STEP_MS = 500
RECORDS = 60
HANDOVER_AT = 36  # the first application processes records [0, 36), the second the rest
WINDOW_MS, GRACE_MS = 10_000, 5_000
# Users and pages on both partitions of two (Kafka's default partitioner): alice and cart on 1.
# Each key's values are compared in offset order, so the output partitions keep order per key.
USERS = ("alice", "bob", "carol")
PAGES = ("home", "cart", "search")
TIMEOUT_S = 90.0


def _users(users: str, user: str) -> str:
    return user if not users else f"{users},{user}"


def handover_topology(prefix: str) -> Topology:
    """HandoverApp.topology(prefix) in kstreams' DSL."""
    s = Serdes.string()
    builder = StreamsBuilder()
    stream = builder.stream(f"{prefix}in", Consumed.with_(s, s))
    profiles = builder.table(f"{prefix}profiles", Consumed.with_(s, s))
    stream.group_by_key(Grouped.with_(s, s)).count().to_stream().to(
        f"{prefix}counts", Produced.with_(s, Serdes.long())
    )
    windowed = (
        stream.map(lambda user, page: KeyValue(page, user))
        .group_by_key(Grouped.with_(s, s))
        .windowed_by(
            TimeWindows.of_size_and_grace(timedelta(milliseconds=WINDOW_MS), timedelta(milliseconds=GRACE_MS))
        )
        .aggregate(lambda: "", lambda page, user, users: _users(users, user), Materialized.with_(s, s))
    )
    windowed.to_stream().map(lambda w, users: KeyValue(f"{w.key}@{w.start}", users)).to(
        f"{prefix}windowed", Produced.with_(s, s)
    )
    windowed.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().map(
        lambda w, users: KeyValue(f"{w.key}@{w.start}", users)
    ).to(f"{prefix}final", Produced.with_(s, s))
    stream.join(profiles, lambda page, profile: f"{page}/{profile}").to(
        f"{prefix}joined", Produced.with_(s, s)
    )
    return builder.build()


# ---------------------------------------------------------------------------- the input and its outputs


def _input() -> list[tuple[str, str, int]]:
    """(user, page, timestamp) in time order: 30 s of views, three 10 s windows."""
    return [(USERS[i % 3], PAGES[(i // 2) % 3], T0 + i * STEP_MS) for i in range(RECORDS)]


def expected_outputs() -> dict[str, dict[str, list[Any]]]:
    """Output topic -> key -> the values one application would write for the whole input, in order."""
    out: dict[str, dict[str, list[Any]]] = {
        t: defaultdict(list) for t in ("counts", "windowed", "final", "joined")
    }
    counts: dict[str, int] = defaultdict(int)
    windows: dict[str, str] = {}
    stream_time = [-1] * PARTITIONS  # of each task of the windowed sub-topology
    for user, page, ts in _input():
        counts[user] += 1
        out["counts"][user].append(counts[user])
        window = f"{page}@{ts - ts % WINDOW_MS}"
        windows[window] = _users(windows.get(window, ""), user)
        out["windowed"][window].append(windows[window])
        out["joined"][user].append(f"{page}/profile-{user}")
        partition = default_partition(page.encode(), PARTITIONS)
        stream_time[partition] = max(stream_time[partition], ts)
    for window, users in windows.items():
        page, start = window.split("@")
        if int(start) + WINDOW_MS + GRACE_MS <= stream_time[default_partition(page.encode(), PARTITIONS)]:
            out["final"][window].append(users)
    return {topic: dict(values) for topic, values in out.items()}


def outputs(cluster: Any, prefix: str) -> dict[str, dict[str, list[Any]]]:
    """Output topic -> key -> its values in offset order (a key lives in one partition)."""
    result: dict[str, dict[str, list[Any]]] = {}
    for topic in ("counts", "windowed", "final", "joined"):
        by_key: dict[str, list[Any]] = defaultdict(list)
        for record in cluster.read(f"{prefix}{topic}"):
            value = record.value
            assert value is not None, f"a null value in {topic}"
            decoded = int.from_bytes(value, "big", signed=True) if topic == "counts" else value.decode()
            by_key[record.key.decode()].append(decoded)
        result[topic] = dict(by_key)
    return result


def produce(cluster: Any, prefix: str, records: list[tuple[str, str, int]]) -> None:
    for user, page, ts in records:
        cluster.produce(f"{prefix}in", user.encode(), page.encode(), ts)


def processed(cluster: Any, prefix: str, count: int) -> Callable[[], bool]:
    """Whether ``count`` input records went through the count and the join."""

    def done() -> bool:
        got = outputs(cluster, prefix)
        return all(sum(map(len, got[t].values())) >= count for t in ("counts", "windowed", "joined"))

    return done


# The conditions read topics from the broker: checked every 200 ms, not every 20.
POLL_S = 0.2


def settle(cluster: Any, prefix: str, timeout: float = 30.0) -> None:
    """Wait (at most ``timeout``) until the outputs are the expected ones; ``_check`` says what differs."""
    expected = expected_outputs()
    holds_within(lambda: outputs(cluster, prefix) == expected, timeout, every=POLL_S)


def group_is_empty(bootstrap: str, group: str) -> bool:
    from confluent_kafka import ConsumerGroupState
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(timeout=10)
    return bool(description.state == ConsumerGroupState.EMPTY and not description.members)


# ---------------------------------------------------------------------------- the two applications


def compile_handover_app() -> str:
    """Compile HandoverApp when its source is newer than the last compile; the classpath to run it."""
    classpath = kafka_classpath()
    sources = sorted(SOURCES.glob("*.java"))
    stamp = CLASSES / ".compiled"
    if not stamp.is_file() or stamp.stat().st_mtime < max(p.stat().st_mtime for p in sources):
        if shutil.which("javac") is None:
            pytest.fail(
                "The hand-over test compiles a Kafka Streams application: `javac` (JDK 17+) is not on PATH"
            )
        CLASSES.mkdir(parents=True, exist_ok=True)
        command = ["javac", "-nowarn", "-encoding", "UTF-8", "--release", "17", "-cp", classpath,
                   "-d", str(CLASSES), *map(str, sources)]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"javac could not compile HandoverApp: {done.stderr[-2000:]}"
        stamp.touch()
    return f"{CLASSES}:{classpath}"


def _read_line(process: subprocess.Popen[str], timeout: float) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    return process.stdout.readline().strip() if ready else ""


@contextmanager
def java_app(
    bootstrap: str, app_id: str, state_dir: Path, prefix: str, log: Path, main_class: str = MAIN_CLASS
) -> Iterator[None]:
    """The Java application, running until the block ends; then closed (leaving the group)."""
    classpath = compile_handover_app()
    with open(log, "w") as stderr:
        process = subprocess.Popen(
            ["java", *JVM_OPTIONS, "-cp", classpath, main_class, bootstrap, app_id, str(state_dir), prefix],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        started = _read_line(process, 120)
        assert started == "RUNNING", f"the Java application did not start ({started!r}); see {log}"
        yield
        assert process.stdin is not None
        process.stdin.write("close\n")
        process.stdin.flush()
        closed = _read_line(process, 90)
        assert closed == "CLOSED", f"the Java application did not close cleanly ({closed!r}); see {log}"
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@contextmanager
def kstreams_app(
    cluster: Any,
    app_id: str,
    state_dir: Path,
    prefix: str,
    topology: Callable[[str], Topology] = handover_topology,
) -> Iterator[None]:
    config = {
        "application.id": app_id,
        "state.dir": str(state_dir),
        "commit.interval.ms": 100,
        "statestore.cache.max.bytes": 0,
        "session.timeout.ms": 6000,
    }
    streams = KafkaStreams(topology(prefix), config, cluster=cluster)
    streams.start()
    try:
        yield
    finally:
        assert streams.close(timeout=60)


# ---------------------------------------------------------------------------- the tests


def _setup(cluster: Any, prefix: str) -> list[tuple[str, str, int]]:
    for topic in ("in", "profiles"):
        cluster.create_topic(f"{prefix}{topic}", partitions=PARTITIONS)
    for topic in ("counts", "windowed", "final", "joined"):
        cluster.create_topic(f"{prefix}{topic}", partitions=OUTPUT_PARTITIONS)
    for user in USERS:
        cluster.produce(f"{prefix}profiles", user.encode(), f"profile-{user}".encode(), T0 - 1)
    records = _input()
    produce(cluster, prefix, records[:HANDOVER_AT])
    return records


def _check(cluster: Any, prefix: str, app_id: str) -> None:
    expected = expected_outputs()
    got = outputs(cluster, prefix)
    assert got["counts"] == expected["counts"], "the counts do not continue the first application's"
    assert got["windowed"] == expected["windowed"], "the windowed aggregates do not continue"
    assert got["joined"] == expected["joined"], "the join does not see the table the first application built"
    assert got["final"] == expected["final"], "suppress did not emit each closed window exactly once"
    # Both applications left their marks: some windows were emitted by the first, some windows the
    # first buffered by the second, and the stores' changelogs are Kafka's names.
    topics = set(cluster.topics())
    for internal in (
        "KSTREAM-AGGREGATE-STATE-STORE-0000000004-changelog",
        "KSTREAM-AGGREGATE-STATE-STORE-0000000009-changelog",
        "KSTREAM-AGGREGATE-STATE-STORE-0000000009-repartition",
        "KTABLE-SUPPRESS-STATE-STORE-0000000018-changelog",
        f"{prefix}profiles-STATE-STORE-0000000001-changelog",  # the table's store is named after its topic
    ):
        assert f"{app_id}-{internal}" in topics


def committed_partition_time(cluster: Any, group: str, topic: str) -> int:
    """The partition time committed with the group's offset of the topic's partition 0."""
    tp = TopicPartition(topic, 0)
    reader = cluster.consumer(group)
    try:
        committed = reader.committed_with_metadata([tp])
    finally:
        reader.close()
    return TopicPartitionMetadata.decode(committed[tp].metadata).partition_time


def _final_before_handover(cluster: Any, prefix: str) -> dict[str, list[str]]:
    return outputs(cluster, prefix)["final"]


def test_kstreams_takes_over_a_kafka_streams_applications_state(
    kafka_cluster, kafka_broker, app_id, tmp_path
):
    prefix = f"{app_id}-"
    records = _setup(kafka_cluster, prefix)
    with java_app(kafka_broker, app_id, tmp_path / "java", prefix, tmp_path / "java.log"):
        wait_until(
            processed(kafka_cluster, prefix, HANDOVER_AT),
            TIMEOUT_S,
            "the Java application's outputs",
            every=POLL_S,
        )
    first = _final_before_handover(kafka_cluster, prefix)
    assert first, "the Java application emitted no closed window before the hand-over"
    _check_checkpoints(kafka_cluster, tmp_path / "java", app_id)
    wait_until(
        lambda: group_is_empty(kafka_broker, app_id),
        TIMEOUT_S,
        "the Java application to leave the group",
        every=POLL_S,
    )
    # kstreams reads the partition time Kafka Streams committed with the offset, and starts the
    # task's stream time there (tests/unit/runtime/test_committed_stream_time.py).
    assert committed_partition_time(kafka_cluster, app_id, f"{prefix}in") == records[HANDOVER_AT - 1][2]
    produce(kafka_cluster, prefix, records[HANDOVER_AT:])
    with kstreams_app(kafka_cluster, app_id, tmp_path / "kstreams", prefix):
        wait_until(processed(kafka_cluster, prefix, RECORDS), TIMEOUT_S, "kstreams' outputs", every=POLL_S)
        settle(kafka_cluster, prefix)
    _check(kafka_cluster, prefix, app_id)


@pytest.mark.slow  # the reverse of the default tier's hand-over, 20 s
def test_kafka_streams_takes_over_a_kstreams_applications_state(
    kafka_cluster, kafka_broker, app_id, tmp_path
):
    prefix = f"{app_id}-"
    records = _setup(kafka_cluster, prefix)
    with kstreams_app(kafka_cluster, app_id, tmp_path / "kstreams", prefix):
        wait_until(
            processed(kafka_cluster, prefix, HANDOVER_AT), TIMEOUT_S, "kstreams' outputs", every=POLL_S
        )
    first = _final_before_handover(kafka_cluster, prefix)
    assert first, "kstreams emitted no closed window before the hand-over"
    wait_until(
        lambda: group_is_empty(kafka_broker, app_id), TIMEOUT_S, "kstreams to leave the group", every=POLL_S
    )
    produce(kafka_cluster, prefix, records[HANDOVER_AT:])
    with java_app(kafka_broker, app_id, tmp_path / "java", prefix, tmp_path / "java.log"):
        wait_until(
            processed(kafka_cluster, prefix, RECORDS),
            TIMEOUT_S,
            "the Java application's outputs",
            every=POLL_S,
        )
        settle(kafka_cluster, prefix)
    _check(kafka_cluster, prefix, app_id)


# ---------------------------------------------------------------------------- the second application
#
# HandoverTablesApp (jvm/src/main/java/io/kstreams/handover/HandoverTablesApp.java) reaches the wire
# formats the first one does not: session keys (a session-windowed count's changelog), a foreign-key
# join's subscription and response records and its subscription store, and a table group_by's
# repartition records (old and new values of a re-keyed row). Its stores and repartition topics are
# named, so no name depends on generated numbering. Each order and product changes at most once per
# application, and no product changes while one of its orders does: then every output is the same
# whichever of a task's input topics is read first, and no join answer can be dropped as stale.

GAP_MS, SESSION_GRACE_MS = 2_000, 1_000
CLICKS, CLICKS_HANDOVER_AT = 24, 15  # a session of each user is open at the hand-over
CLICK_BLOCK, CLICK_PAUSE_MS = 9, 4_000  # 9 clicks 500 ms apart (a user every 1.5 s), then a pause
PRODUCTS = (("p1", "apple"), ("p2", "pear"), ("p3", "plum"))
ORDERS_BEFORE = (("o1", "p1#0"), ("o2", "p1#0"), ("o3", "p2#0"), ("o4", "p3#0"))
# After the hand-over: o1 and o3 move to another product (each two repartition records, an
# unsubscription and a subscription), o2 changes but keeps its product (one repartition record
# with the old and the new value); p3 changes, and only the subscription store the first
# application wrote knows that o4 is subscribed to it.
ORDERS_AFTER = (("o1", "p2#1"), ("o2", "p1#1"), ("o3", "p1#1"))
PRODUCTS_AFTER = (("p3", "plum-2"),)
TABLES_OUTPUTS = ("sessions", "enriched", "per-product")
LONG_OUTPUTS = ("sessions", "per-product")


def _product(order: str) -> str:
    return order.split("#")[0]


def tables_topology(prefix: str) -> Topology:
    """HandoverTablesApp.topology(prefix) in kstreams' DSL."""
    s, n = Serdes.string(), Serdes.long()
    builder = StreamsBuilder()
    sessions = SessionWindows.of_inactivity_gap_and_grace(
        timedelta(milliseconds=GAP_MS), timedelta(milliseconds=SESSION_GRACE_MS)
    )
    clicks = (
        builder.stream(f"{prefix}clicks", Consumed.with_(s, s))
        .group_by_key(Grouped.with_(s, s, "clicks-by-user"))
        .windowed_by(sessions)
        .count(Materialized.as_("click-sessions").with_key_serde(s).with_value_serde(n))
    )
    clicks.to_stream().map(lambda w, count: KeyValue(f"{w.key}@{w.start}-{w.end}", count)).to(
        f"{prefix}sessions", Produced.with_(s, n)
    )
    orders = builder.table(
        f"{prefix}orders",
        Consumed.with_(s, s),
        Materialized.as_("orders").with_key_serde(s).with_value_serde(s),
    )
    products = builder.table(
        f"{prefix}products",
        Consumed.with_(s, s),
        Materialized.as_("products").with_key_serde(s).with_value_serde(s),
    )
    enriched = orders.join(
        products,
        _product,
        lambda order, product: f"{order}+{product}",
        TableJoined.as_("orders-products"),
        Materialized.as_("orders-with-products").with_key_serde(s).with_value_serde(s),
    )
    enriched.to_stream().to(f"{prefix}enriched", Produced.with_(s, s))
    per_product = orders.group_by(
        lambda order_id, order: KeyValue(_product(order), order), Grouped.with_(s, s, "orders-by-product")
    ).count(Materialized.as_("orders-per-product").with_key_serde(s).with_value_serde(n))
    per_product.to_stream().to(f"{prefix}per-product", Produced.with_(s, n))
    return builder.build()


def _clicks() -> list[tuple[str, int]]:
    """(user, timestamp) in time order: blocks of clicks, each user's clicks of a block one session."""
    return [(USERS[i % 3], T0 + i * STEP_MS + (i // CLICK_BLOCK) * CLICK_PAUSE_MS) for i in range(CLICKS)]


def tables_expected(
    clicks: list[tuple[str, int]],
    orders: tuple[tuple[str, str], ...],
    product_changes: tuple[tuple[str, str], ...],
) -> dict[str, dict[str, list[Any]]]:
    """Output topic -> key -> the values one application would write for this input, in order."""
    out: dict[str, dict[str, list[Any]]] = {t: defaultdict(list) for t in TABLES_OUTPUTS}
    sessions: dict[str, tuple[int, int, int]] = {}  # user -> (start, end, clicks) of the last session
    for user, ts in clicks:
        last = sessions.get(user)
        if last is not None and ts - last[1] <= GAP_MS:  # the click extends the session: it merges
            out["sessions"][f"{user}@{last[0]}-{last[1]}"].append(None)
            sessions[user] = (last[0], ts, last[2] + 1)
        else:
            sessions[user] = (ts, ts, 1)
        start, end, count = sessions[user]
        out["sessions"][f"{user}@{start}-{end}"].append(count)
    names = dict(PRODUCTS)
    rows: dict[str, str] = {}
    per_product: dict[str, int] = defaultdict(int)
    for order_id, order in orders:
        out["enriched"][order_id].append(f"{order}+{names[_product(order)]}")
        old = rows.get(order_id)
        rows[order_id] = order
        if old is not None and _product(old) != _product(order):
            per_product[_product(old)] -= 1
            out["per-product"][_product(old)].append(per_product[_product(old)])
        if old is None or _product(old) != _product(order):
            per_product[_product(order)] += 1
        out["per-product"][_product(order)].append(per_product[_product(order)])
    for product, name in product_changes:
        names[product] = name
        for order_id, order in sorted(rows.items()):
            if _product(order) == product:
                out["enriched"][order_id].append(f"{order}+{name}")
    return {topic: dict(values) for topic, values in out.items()}


def tables_outputs(cluster: Any, prefix: str) -> dict[str, dict[str, list[Any]]]:
    """Output topic -> key -> its values in offset order (None for a null value)."""
    result: dict[str, dict[str, list[Any]]] = {}
    for topic in TABLES_OUTPUTS:
        by_key: dict[str, list[Any]] = defaultdict(list)
        for record in cluster.read(f"{prefix}{topic}"):
            value = record.value
            if value is not None:
                value = int.from_bytes(value, "big", signed=True) if topic in LONG_OUTPUTS else value.decode()
            by_key[record.key.decode()].append(value)
        result[topic] = dict(by_key)
    return result


def _tables_setup(cluster: Any, prefix: str) -> None:
    for topic in ("clicks", "orders", "products"):
        cluster.create_topic(f"{prefix}{topic}", partitions=PARTITIONS)
    for topic in TABLES_OUTPUTS:
        cluster.create_topic(f"{prefix}{topic}", partitions=OUTPUT_PARTITIONS)
    _tables_produce(cluster, prefix, _clicks()[:CLICKS_HANDOVER_AT], ORDERS_BEFORE, PRODUCTS, T0 - 10)


def _tables_produce(
    cluster: Any,
    prefix: str,
    clicks: list[tuple[str, int]],
    orders: tuple[tuple[str, str], ...],
    products: tuple[tuple[str, str], ...],
    ts: int,
) -> None:
    for product, name in products:
        cluster.produce(f"{prefix}products", product.encode(), name.encode(), ts)
    for order_id, order in orders:
        cluster.produce(f"{prefix}orders", order_id.encode(), order.encode(), ts + 1)
    for user, click_ts in clicks:
        cluster.produce(f"{prefix}clicks", user.encode(), b"home", click_ts)


def _tables_wait(cluster: Any, prefix: str, expected: dict[str, dict[str, list[Any]]], what: str) -> None:
    """Wait until every output topic holds as many records as ``expected``, then (at most 10 s) until
    they are ``expected``; the caller's assertions say what differs."""

    def count(outputs: dict[str, dict[str, list[Any]]], topic: str) -> int:
        return sum(map(len, outputs[topic].values()))

    wait_until(
        lambda: all(count(tables_outputs(cluster, prefix), t) >= count(expected, t) for t in TABLES_OUTPUTS),
        TIMEOUT_S,
        what,
        every=POLL_S,
    )
    deadline = time.monotonic() + 10
    while tables_outputs(cluster, prefix) != expected and time.monotonic() < deadline:
        time.sleep(0.2)


def _tables_check(cluster: Any, prefix: str, app_id: str, expected: dict[str, dict[str, list[Any]]]) -> None:
    got = tables_outputs(cluster, prefix)
    assert got["sessions"] == expected["sessions"], "the sessions do not continue the first application's"
    assert got["enriched"] == expected["enriched"], "the foreign-key join does not continue"
    assert got["per-product"] == expected["per-product"], "the re-keyed aggregation does not continue"


def _check_tables_internal_topics(cluster: Any, app_id: str) -> None:
    """Kafka's names for every internal topic, and every record both applications wrote to the
    repartition and subscription topics reads with kstreams' serdes (the two applications' records
    are alike): a subscription carries the Murmur3 hash of one of the orders' values."""
    topics = set(cluster.topics())
    fk = "orders-products-subscription"
    for internal in (
        "click-sessions-changelog",
        "orders-changelog",
        "products-changelog",
        "orders-with-products-changelog",
        "orders-per-product-changelog",
        "orders-by-product-repartition",
        f"{fk}-registration-topic",
        f"{fk}-response-topic",
        f"{fk}-store-changelog",
    ):
        assert f"{app_id}-{internal}" in topics, f"no internal topic {app_id}-{internal}"
    s = Serdes.string()
    changes = ChangeSerde(s)
    for record in cluster.read(f"{app_id}-orders-by-product-repartition"):
        change = changes.deserialize("t", record.value)
        assert change is not None and (change.new_value or change.old_value) is not None
    hashes = {value_hash(order.encode()) for _, order in ORDERS_BEFORE + ORDERS_AFTER}
    subscriptions = SubscriptionWrapperSerde(s, "pk")
    registrations = cluster.read(f"{app_id}-{fk}-registration-topic")
    assert registrations
    for record in registrations:
        wrapper = subscriptions.deserialize("t", record.value)
        assert wrapper is not None and wrapper.primary_partition == 0
        assert wrapper.hash in hashes | {None}, f"a subscription of {wrapper.primary_key} has an unknown hash"
    responses = ResponseWrapperSerde(s)
    for record in cluster.read(f"{app_id}-{fk}-response-topic"):
        response = responses.deserialize("t", record.value)
        assert response is not None and response.original_value_hash in hashes
    for record in cluster.read(f"{app_id}-click-sessions-changelog"):
        user, start, end = from_session_key(record.key)
        assert user.decode() in USERS and T0 <= start <= end


def _check_checkpoints(cluster: Any, state_dir: Path, app_id: str) -> None:
    """After a clean close each task's checkpoint file holds, per changelog of a persistent store,
    the offset of its last record (Kafka's OffsetCheckpoint: restoration starts after it), and
    kstreams reads it as the changelog's end."""
    files = sorted((state_dir / app_id).glob("*/.checkpoint"))
    assert files, f"no checkpoint file under {state_dir / app_id}"
    admin = cluster.admin()
    for path in files:
        last = OffsetCheckpoint(str(path)).read()
        ends = {tp: end for tp, (_, end) in admin.list_offsets(list(last)).items()}
        assert {tp: o for tp, o in last.items() if o != OFFSET_UNKNOWN} == {
            tp: ends[tp] - 1 for tp, o in last.items() if o != OFFSET_UNKNOWN
        }, f"{path} does not hold the changelogs' last offsets"
        assert TaskOffsetCheckpoint(str(path)).read() == {
            tp: ends[tp] if o != OFFSET_UNKNOWN else 0 for tp, o in last.items()
        }


def _tables_handover(cluster: Any, broker: str, app_id: str, tmp_path: Path, java_first: bool) -> None:
    prefix = f"{app_id}-"
    _tables_setup(cluster, prefix)
    java = java_app(
        broker, app_id, tmp_path / "java", prefix, tmp_path / "java.log", main_class=TABLES_MAIN_CLASS
    )
    kstreams = kstreams_app(cluster, app_id, tmp_path / "kstreams", prefix, tables_topology)
    first, second = (java, kstreams) if java_first else (kstreams, java)
    before = tables_expected(_clicks()[:CLICKS_HANDOVER_AT], ORDERS_BEFORE, ())
    with first:
        _tables_wait(cluster, prefix, before, "the first application's outputs")
    first_state = tmp_path / ("java" if java_first else "kstreams")
    _tables_check(cluster, prefix, app_id, before)
    _check_checkpoints(cluster, first_state, app_id)
    wait_until(
        lambda: group_is_empty(broker, app_id),
        TIMEOUT_S,
        "the first application to leave the group",
        every=POLL_S,
    )
    _tables_produce(
        cluster, prefix, _clicks()[CLICKS_HANDOVER_AT:], ORDERS_AFTER, PRODUCTS_AFTER, T0 + 40_000
    )
    expected = tables_expected(_clicks(), ORDERS_BEFORE + ORDERS_AFTER, PRODUCTS_AFTER)
    with second:
        _tables_wait(cluster, prefix, expected, "the second application's outputs")
    _tables_check(cluster, prefix, app_id, expected)
    _check_tables_internal_topics(cluster, app_id)


@pytest.mark.slow  # 35 s; the default tier hands over HandoverApp, and tests/unit pins these formats' bytes
def test_kstreams_takes_over_sessions_and_foreign_key_joins_of_a_kafka_streams_application(
    kafka_cluster, kafka_broker, app_id, tmp_path
):
    _tables_handover(kafka_cluster, kafka_broker, app_id, tmp_path, java_first=True)


@pytest.mark.slow  # the reverse, 35 s
def test_kafka_streams_takes_over_sessions_and_foreign_key_joins_of_a_kstreams_application(
    kafka_cluster, kafka_broker, app_id, tmp_path
):
    _tables_handover(kafka_cluster, kafka_broker, app_id, tmp_path, java_first=False)
