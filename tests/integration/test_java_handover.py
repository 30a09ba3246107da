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
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    Topology,
)
from kstreams._native.record_batch import default_partition
from tests.support.kafka_broker import REPO, kafka_classpath

pytestmark = pytest.mark.integration

SOURCES = REPO / "jvm" / "src" / "main" / "java" / "io" / "kstreams" / "handover"
CLASSES = REPO / "jvm" / "target" / "handover-classes"
MAIN_CLASS = "io.kstreams.handover.HandoverApp"
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


def wait_until(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)


def settle(cluster: Any, prefix: str, timeout: float = 30.0) -> None:
    """Wait (at most ``timeout``) until the outputs are the expected ones; ``_check`` says what differs."""
    expected = expected_outputs()
    deadline = time.monotonic() + timeout
    while outputs(cluster, prefix) != expected and time.monotonic() < deadline:
        time.sleep(0.2)


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
def java_app(bootstrap: str, app_id: str, state_dir: Path, prefix: str, log: Path) -> Iterator[None]:
    """The Java application, running until the block ends; then closed (leaving the group)."""
    classpath = compile_handover_app()
    with open(log, "w") as stderr:
        process = subprocess.Popen(
            ["java", *JVM_OPTIONS, "-cp", classpath, MAIN_CLASS, bootstrap, app_id, str(state_dir), prefix],
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
def kstreams_app(cluster: Any, app_id: str, state_dir: Path, prefix: str) -> Iterator[None]:
    config = {
        "application.id": app_id,
        "state.dir": str(state_dir),
        "commit.interval.ms": 100,
        "statestore.cache.max.bytes": 0,
        "session.timeout.ms": 6000,
    }
    streams = KafkaStreams(handover_topology(prefix), config, cluster=cluster)
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


def _final_before_handover(cluster: Any, prefix: str) -> dict[str, list[str]]:
    return outputs(cluster, prefix)["final"]


def test_kstreams_takes_over_a_kafka_streams_applications_state(
    kafka_cluster, kafka_broker, app_id, tmp_path
):
    prefix = f"{app_id}-"
    records = _setup(kafka_cluster, prefix)
    with java_app(kafka_broker, app_id, tmp_path / "java", prefix, tmp_path / "java.log"):
        wait_until(processed(kafka_cluster, prefix, HANDOVER_AT), "the Java application's outputs")
    first = _final_before_handover(kafka_cluster, prefix)
    assert first, "the Java application emitted no closed window before the hand-over"
    wait_until(lambda: group_is_empty(kafka_broker, app_id), "the Java application to leave the group")
    produce(kafka_cluster, prefix, records[HANDOVER_AT:])
    with kstreams_app(kafka_cluster, app_id, tmp_path / "kstreams", prefix):
        wait_until(processed(kafka_cluster, prefix, RECORDS), "kstreams' outputs")
        settle(kafka_cluster, prefix)
    _check(kafka_cluster, prefix, app_id)


@pytest.mark.slow  # the reverse of the default tier's hand-over, 20 s
def test_kafka_streams_takes_over_a_kstreams_applications_state(
    kafka_cluster, kafka_broker, app_id, tmp_path
):
    prefix = f"{app_id}-"
    records = _setup(kafka_cluster, prefix)
    with kstreams_app(kafka_cluster, app_id, tmp_path / "kstreams", prefix):
        wait_until(processed(kafka_cluster, prefix, HANDOVER_AT), "kstreams' outputs")
    first = _final_before_handover(kafka_cluster, prefix)
    assert first, "kstreams emitted no closed window before the hand-over"
    wait_until(lambda: group_is_empty(kafka_broker, app_id), "kstreams to leave the group")
    produce(kafka_cluster, prefix, records[HANDOVER_AT:])
    with java_app(kafka_broker, app_id, tmp_path / "java", prefix, tmp_path / "java.log"):
        wait_until(processed(kafka_cluster, prefix, RECORDS), "the Java application's outputs")
        settle(kafka_cluster, prefix)
    _check(kafka_cluster, prefix, app_id)
