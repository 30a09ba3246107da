"""Session-windowed aggregations on the test driver: Kafka's KStreamSessionWindowAggregate semantics
(merging, tombstones, timestamps, grace), count/reduce/aggregate, caching, stores, naming.

The module is marked ``on_cluster``: its tests using ``drive`` run on a KafkaStreams client over an
EmbeddedCluster too (tests/unit/topology/dsl/conftest.py), and the tests at its end check on a
cluster what the driver cannot show."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from kstreams import KafkaStreams
from kstreams.errors import InvalidStateStoreException
from kstreams.serdes import Serdes
from kstreams.state.store import WindowedKey
from kstreams.topology import (
    Materialized,
    Named,
    Produced,
    SessionWindowedKStream,
    SessionWindows,
    StreamsBuilder,
    TimeWindows,
    WindowedSerdes,
)
from kstreams.topology.dsl.parameters import StoreType
from kstreams.topology.dsl.processors.session_aggregate import SessionAggregateSupplier, count_merger
from kstreams.topology.dsl.windowed_serdes import SessionWindowedSerde
from tests.support.clients import client_settings, started_clients, wait_timeout
from tests.support.waiting import holds_within

S = Serdes.string()
L = Serdes.long()

pytestmark = pytest.mark.on_cluster(
    representative="test_session_counts_survive_a_restart_through_the_changelog"
)
MIN = 60_000
SESSION_KEYS = WindowedSerdes.session_windowed_serde_from(S)


def _session_counts(windows: SessionWindows, materialized: Materialized | None = None) -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.stream("clicks")
        .group_by_key()
        .windowed_by(windows)
        .count(materialized)
        .to_stream()
        .to("sessions", Produced.with_(SESSION_KEYS, L))
    )
    return builder


def _click(driver: Any, *clicks: tuple[str | None, int]) -> None:
    source = driver.create_input_topic("clicks", S, S)
    for user, timestamp in clicks:
        source.pipe_input(user, "click", timestamp=timestamp)


def _output(driver: Any, value_serde: Any = L) -> list[tuple[Any, Any, int]]:
    records = driver.create_output_topic("sessions", SESSION_KEYS, value_serde).read_records_to_list()
    return [(r.key, r.value, r.timestamp) for r in records]


def _session(user: str, start_min: float, end_min: float) -> WindowedKey[str]:
    return WindowedKey(user, int(start_min * MIN), int(end_min * MIN))


# --- the Kafka docs' example: clicks with a 5-minute inactivity gap ------------------------------


@pytest.mark.parametrize("caching", [False, True])
def test_clicks_form_sessions_and_a_late_click_merges_two_with_tombstones(drive, caching):
    # Grace keeps the first session open (and in the store) until the late click arrives.
    windows = SessionWindows.of_inactivity_gap_and_grace(timedelta(minutes=5), timedelta(minutes=10))
    materialized = Materialized.as_("clicks-per-session")
    materialized = materialized.with_caching_enabled() if caching else materialized.with_caching_disabled()
    driver = drive(_session_counts(windows, materialized).build(), statestore_cache_max_bytes=1 << 20)
    _click(
        driver, ("alice", 0), ("bob", 1 * MIN), ("alice", 2 * MIN), ("alice", 10 * MIN), ("alice", 6 * MIN)
    )
    # Every update carries the session's end as its timestamp; a replaced session gets a tombstone.
    # The driver commits after each record, so the cache forwards the same updates.
    assert _output(driver) == [
        (_session("alice", 0, 0), 1, 0),
        (_session("bob", 1, 1), 1, 1 * MIN),
        (_session("alice", 0, 0), None, 0),
        (_session("alice", 0, 2), 2, 2 * MIN),
        # 10 min is more than the gap after 2 min: a new session.
        (_session("alice", 10, 10), 1, 10 * MIN),
        # 6 min is within the gap of both sessions: it bridges them into one.
        (_session("alice", 0, 2), None, 2 * MIN),
        (_session("alice", 10, 10), None, 10 * MIN),
        (_session("alice", 0, 10), 4, 10 * MIN),
    ]
    store = driver.get_session_store("clicks-per-session")
    assert list(store.fetch("alice")) == [(_session("alice", 0, 10), 4)]
    assert list(store.fetch("bob")) == [(_session("bob", 1, 1), 1)]
    assert store.fetch_session("alice", 0, 2 * MIN) is None


def test_record_inside_a_session_replaces_it_with_a_tombstone_first(drive):
    windows = SessionWindows.of_inactivity_gap_with_no_grace(5 * MIN)
    driver = drive(_session_counts(windows, Materialized().with_caching_disabled()).build())
    _click(driver, ("alice", 0), ("alice", 2 * MIN), ("alice", 1 * MIN))
    # Kafka removes the session the record falls in and writes it anew, even with the same bounds.
    assert _output(driver)[-2:] == [
        (_session("alice", 0, 2), None, 2 * MIN),
        (_session("alice", 0, 2), 3, 2 * MIN),
    ]


def test_record_at_the_time_of_a_one_record_session_updates_it_without_a_tombstone(drive):
    windows = SessionWindows.of_inactivity_gap_with_no_grace(5 * MIN)
    driver = drive(_session_counts(windows, Materialized().with_caching_disabled()).build())
    _click(driver, ("alice", 3 * MIN), ("alice", 3 * MIN))
    # The merged session equals the record's own [3, 3]: Kafka just overwrites it.
    assert _output(driver) == [
        (_session("alice", 3, 3), 1, 3 * MIN),
        (_session("alice", 3, 3), 2, 3 * MIN),
    ]


def test_caching_collapses_the_tombstone_and_update_of_a_session_into_one_update(drive):
    windows = SessionWindows.of_inactivity_gap_with_no_grace(5 * MIN)
    materialized = Materialized.as_("cached").with_caching_enabled()
    driver = drive(_session_counts(windows, materialized).build(), statestore_cache_max_bytes=1 << 20)
    _click(driver, ("alice", 0), ("alice", 2 * MIN), ("alice", 1 * MIN))
    assert _output(driver) == [
        (_session("alice", 0, 0), 1, 0),
        (_session("alice", 0, 0), None, 0),
        (_session("alice", 0, 2), 2, 2 * MIN),
        (_session("alice", 0, 2), 3, 2 * MIN),
    ]


# --- grace and late records --------------------------------------------------------------------


def test_records_of_closed_sessions_are_dropped(drive):
    windows = SessionWindows.of_inactivity_gap_with_no_grace(5 * MIN)
    driver = drive(_session_counts(windows, Materialized().with_caching_disabled()).build())
    # Stream time 20 min: a session closes once its end is before 20 - 5 (gap) - 0 (grace) = 15.
    _click(driver, ("alice", 0), ("alice", 20 * MIN), ("alice", 3 * MIN), ("alice", 14 * MIN))
    assert _output(driver) == [
        (_session("alice", 0, 0), 1, 0),
        (_session("alice", 20, 20), 1, 20 * MIN),
    ]
    # At 15 min the record still reaches the open session [20, 20] (within the gap): merged.
    _click(driver, ("alice", 15 * MIN))
    assert _output(driver) == [
        (_session("alice", 20, 20), None, 20 * MIN),
        (_session("alice", 15, 20), 2, 20 * MIN),
    ]


def test_grace_keeps_sessions_open_for_late_records(drive):
    windows = SessionWindows.of_inactivity_gap_and_grace(5 * MIN, 3 * MIN)
    driver = drive(_session_counts(windows, Materialized().with_caching_disabled()).build())
    # Stream time 20 min: open while the end is at or after 20 - 5 - 3 = 12 min.
    _click(driver, ("alice", 20 * MIN), ("alice", 13 * MIN), ("alice", 11 * MIN))
    assert _output(driver) == [
        (_session("alice", 20, 20), 1, 20 * MIN),
        (_session("alice", 13, 13), 1, 13 * MIN),
        # 11 min joins [13, 13]: the merged session ends at 13, still open.
        (_session("alice", 13, 13), None, 13 * MIN),
        (_session("alice", 11, 13), 2, 13 * MIN),
    ]
    _click(driver, ("alice", 5 * MIN))
    assert _output(driver) == []


def test_session_processor_counts_dropped_records():
    windows = SessionWindows.of_inactivity_gap_with_no_grace(10)
    supplier = SessionAggregateSupplier("count", "s", windows, lambda: 0, lambda k, v, a: a + 1, count_merger)
    processor = supplier()
    processor.store = _ListSessionStore()  # type: ignore[attr-defined]
    processor.forwarder = _NoForwarding()  # type: ignore[attr-defined]
    for timestamp in (100, 50, 85, 95):
        processor.process(_Record("k", "v", timestamp))
    # 50 and 85 ended before 100 - 10; 95 is within the gap of [100, 100].
    assert processor.dropped == 2
    assert processor.store.sessions == {WindowedKey("k", 95, 100): 2}


class _Record:
    def __init__(self, key: Any, value: Any, timestamp: int) -> None:
        self.key, self.value, self.timestamp = key, value, timestamp
        self.headers = None


class _ListSessionStore:
    def __init__(self) -> None:
        self.sessions: dict[WindowedKey[Any], Any] = {}

    def find_sessions(self, key: Any, earliest_end: int, latest_start: int) -> Any:
        found = [
            (s, v) for s, v in self.sessions.items() if s.end >= earliest_end and s.start <= latest_start
        ]
        return sorted(found, key=lambda item: (item[0].end, item[0].start))

    def remove(self, session: WindowedKey[Any]) -> None:
        self.sessions.pop(session, None)

    def put(self, session: WindowedKey[Any], value: Any) -> None:
        self.sessions[session] = value


class _NoForwarding:
    def maybe_forward(self, *args: Any) -> None:
        pass


# --- count, reduce, aggregate --------------------------------------------------------------------


def test_reduce_and_aggregate_merge_sessions_in_kafkas_order(drive):
    builder = StreamsBuilder()
    sessions = (
        builder.stream("clicks")
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5 * MIN, 10 * MIN))
    )
    sessions.reduce(lambda agg, v: agg + v, Materialized().with_caching_disabled()).to_stream().to(
        "reduced", Produced.with_(SESSION_KEYS, S)
    )
    sessions.aggregate(
        lambda: "",
        lambda key, v, agg: agg + v.upper(),
        lambda key, agg1, agg2: f"{agg1}|{agg2}",
        Materialized.as_("aggregated").with_caching_disabled(),
    ).to_stream().to("aggregated", Produced.with_(SESSION_KEYS, S))
    driver = drive(builder.build())
    source = driver.create_input_topic("clicks", S, S)
    for value, minute in [("a", 0), ("b", 1), ("c", 10), ("d", 6)]:
        source.pipe_input("alice", value, timestamp=minute * MIN)
    reduced = driver.create_output_topic("reduced", SESSION_KEYS, S).read_key_values_to_list()
    aggregated = driver.create_output_topic("aggregated", SESSION_KEYS, S).read_key_values_to_list()
    # The merged sessions' aggregates in order of their ends, then the record's value.
    assert reduced[-1] == (_session("alice", 0, 10), "abcd")
    assert aggregated == [
        (_session("alice", 0, 0), "A"),
        (_session("alice", 0, 0), None),
        (_session("alice", 0, 1), "|AB"),
        (_session("alice", 10, 10), "C"),
        (_session("alice", 0, 1), None),
        (_session("alice", 10, 10), None),
        (_session("alice", 0, 10), "||AB|CD"),
    ]
    assert list(driver.get_session_store("aggregated").fetch("alice")) == [
        (_session("alice", 0, 10), "||AB|CD")
    ]


def test_null_keys_are_skipped_and_null_values_counted(drive):
    windows = SessionWindows.of_inactivity_gap_with_no_grace(5 * MIN)
    driver = drive(_session_counts(windows, Materialized().with_caching_disabled()).build())
    source = driver.create_input_topic("clicks", S, S)
    source.pipe_input(None, "click", timestamp=1)
    source.pipe_input("alice", None, timestamp=2)
    assert _output(driver) == [(WindowedKey("alice", 2, 2), 1, 2)]


def test_count_accepts_named_first_and_names_the_processor(drive):
    builder = StreamsBuilder()
    builder.stream("clicks").group_by_key().windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(10)
    ).count(Named.as_("session-count"))
    assert "Processor: session-count (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])" in str(
        builder.build().describe()
    )


# --- stores, naming, describe --------------------------------------------------------------------


def test_describe_shows_kafkas_names_and_the_session_store():
    builder = StreamsBuilder()
    sessions = (
        builder.stream("clicks")
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(5 * MIN))
    )
    sessions.count()
    sessions.reduce(lambda a, b: a + b)
    description = str(builder.build().describe())
    assert "Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])" in (
        description
    )
    assert (
        "Processor: KSTREAM-REDUCE-0000000004 (stores: [KSTREAM-REDUCE-STATE-STORE-0000000003])"
        in description
    )
    assert "--> KSTREAM-AGGREGATE-0000000002, KSTREAM-REDUCE-0000000004" in description


def test_group_by_repartitions_through_a_topic_named_after_the_store():
    builder = StreamsBuilder()
    builder.stream("clicks").group_by(lambda key, value: value).windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(5 * MIN)
    ).count(Materialized.as_("per-page"))
    description = str(builder.build().describe())
    assert "Sink: per-page-repartition-sink (topic: per-page-repartition)" in description
    assert "Source: per-page-repartition-source (topics: [per-page-repartition])" in description
    assert "Processor: KSTREAM-AGGREGATE-0000000002 (stores: [per-page])" in description


def test_session_store_is_logged_to_its_changelog_with_retention_of_gap_plus_grace():
    builder = StreamsBuilder()
    grouped = builder.stream("clicks").group_by_key()
    grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(100, 20)).count(Materialized.as_("a"))
    grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(100, 20)).count(
        Materialized.as_("b").with_retention(5000).with_store_type(Materialized.StoreType.IN_MEMORY)
    )
    topology = builder.build()
    stores = topology.store_builders
    assert (stores["a"].store_type, stores["a"].retention_ms, stores["a"].supplier.persistent) == (
        "session",
        120,
        True,
    )
    assert (stores["b"].retention_ms, stores["b"].supplier.persistent) == (5000, False)
    assert stores["a"].logging_enabled and stores["a"].caching_enabled
    plan = topology.build("app")
    changelogs = {name: topic for sub in plan.subtopologies for name, topic in sub.changelog_topics.items()}
    assert changelogs == {"a": "app-a-changelog", "b": "app-b-changelog"}
    with pytest.raises(ValueError, match="inactivity gap plus grace"):
        grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(100, 20)).count(
            Materialized.as_("c").with_retention(119)
        )


def test_materialized_store_supplier_must_be_a_session_store():
    from kstreams.state.stores import Stores

    grouped = StreamsBuilder().stream("clicks").group_by_key()
    sessions = grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10))
    with pytest.raises(TypeError, match="session store"):
        sessions.count(Materialized.as_(Stores.in_memory_key_value_store("kv")))
    sessions.count(Materialized.as_(Stores.in_memory_session_store("mine", 50)))


def test_windowed_by_returns_a_session_windowed_stream_and_refuses_other_types():
    grouped = StreamsBuilder().stream("clicks").group_by_key()
    assert isinstance(
        grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10)), SessionWindowedKStream
    )
    with pytest.raises(TypeError, match="SessionWindows"):
        grouped.windowed_by("5 minutes")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="Materialized"):
        grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10)).count("store")  # type: ignore[arg-type]


def test_session_windows_spellings_and_validation():
    assert SessionWindows.of_inactivity_gap_with_no_grace(timedelta(minutes=5)) == SessionWindows(5 * MIN, 0)
    windows = SessionWindows.of_inactivity_gap_and_grace(5 * MIN, timedelta(seconds=30))
    assert (windows.inactivity_gap(), windows.grace_period_ms()) == (5 * MIN, 30_000)
    assert SessionWindows.with_(1000).grace_ms == 24 * 60 * MIN - 1000
    assert SessionWindows.with_(1000).grace(5).grace_ms == 5
    with pytest.raises(ValueError, match="inactivity gap must be positive"):
        SessionWindows.of_inactivity_gap_with_no_grace(0)
    with pytest.raises(ValueError, match="grace must not be negative"):
        SessionWindows.of_inactivity_gap_and_grace(10, -1)
    with pytest.raises(TypeError, match="inactivity gap"):
        SessionWindows.of_inactivity_gap_with_no_grace("5m")  # type: ignore[arg-type]
    assert TimeWindows.of_size_with_no_grace(10) != SessionWindows.of_inactivity_gap_with_no_grace(10)


def test_session_windowed_serde_writes_key_end_start():
    serde = SessionWindowedSerde(S)
    data = serde.serialize("t", WindowedKey("k", 1, 2))
    assert data == b"k" + (2).to_bytes(8, "big") + (1).to_bytes(8, "big")
    assert serde.deserialize("t", data) == WindowedKey("k", 1, 2)
    assert serde.serialize("t", None) is None
    with pytest.raises(Exception, match="expects a WindowedKey"):
        serde.serialize("t", "k")
    with pytest.raises(Exception, match="at least 16 bytes"):
        serde.deserialize("t", b"short")
    with pytest.raises(ValueError, match="inner"):
        SessionWindowedSerde(None)


def test_session_table_carries_the_session_windowed_key_serde(drive):
    builder = StreamsBuilder()
    builder.stream("clicks").group_by_key().windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(10)
    ).count(Materialized.with_(S, L).with_caching_disabled()).to_stream().to("sessions")
    driver = drive(builder.build())
    _click(driver, ("alice", 7))
    # No Produced: the table's own key serde (session-windowed strings) and value serde (longs).
    assert _output(driver) == [(WindowedKey("alice", 7, 7), 1, 7)]


def test_windowed_keys_written_to_a_topic_are_partitioned_by_the_inner_key():
    from kstreams._native.record_batch import default_partition
    from kstreams.topology.dsl.windowed_serdes import WindowedStreamPartitioner

    partitioner = WindowedStreamPartitioner(SESSION_KEYS)
    expected = default_partition(b"alice", 7)
    assert {partitioner("t", WindowedKey("alice", start, start + 9), 1, 7) for start in range(50)} == {
        expected
    }
    assert partitioner("t", None, 1, 7) is None
    builder = StreamsBuilder()
    builder.stream("clicks").group_by_key().windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(10)
    ).count().to_stream().to("sessions", Produced.with_(SESSION_KEYS, L))
    sink = next(node for node in builder.build().nodes.values() if getattr(node, "topic", None) == "sessions")
    assert isinstance(sink.partitioner, WindowedStreamPartitioner)


# -- on a cluster ----------------------------------------------------------------------------------
# Session-windowed counts run by KafkaStreams on both cluster adapters: sessions written to a topic
# with the session-windowed serde, queried through ``streams.store``, and restored from the session
# store's changelog after a restart (RocksDB with a fresh state directory, and in-memory), so a late
# record still merges the sessions written before the restart.


STORE = "clicks-per-session"


def _topology(source: str, sink: str, store_type: StoreType) -> Any:
    builder = StreamsBuilder()
    (
        builder.stream(source)
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5 * MIN, 10 * MIN))
        # No cache: every update reaches the topic, so the exact sequence can be asserted.
        .count(Materialized.as_(STORE).with_store_type(store_type).with_caching_disabled())
        .to_stream()
        .to(sink, Produced.with_(SESSION_KEYS, L))
    )
    return builder.build()


@pytest.fixture
def start_streams(cluster: Any, app_id: str) -> Iterator[Callable[..., KafkaStreams]]:
    with started_clients() as clients:
        yield lambda topology, state_dir: clients.start(
            topology, client_settings(cluster, app_id, state_dir), cluster
        )


def _sessions(cluster: Any, topic: str) -> list[tuple[Any, Any, int]]:
    return [
        (SESSION_KEYS.deserialize(topic, r.key), L.deserialize(topic, r.value), r.timestamp)
        for r in cluster.read(topic)
    ]


def _stored(streams: KafkaStreams, key: str) -> list[tuple[Any, Any]] | None:
    try:
        return list(streams.store(STORE).fetch(key))
    except InvalidStateStoreException:
        return None  # not running yet, or still restoring


@pytest.mark.parametrize("store_type", [StoreType.ROCKS_DB, StoreType.IN_MEMORY])
def test_session_counts_survive_a_restart_through_the_changelog(
    cluster: Any,
    app_id: str,
    start_streams: Callable[..., KafkaStreams],
    tmp_path: Path,
    store_type: StoreType,
) -> None:
    source, sink = f"{app_id}-clicks", f"{app_id}-sessions"
    cluster.create_topic(source, 2)
    cluster.create_topic(sink, 2)
    timeout = wait_timeout(cluster)
    # Timestamps near now: within the topics' retention.
    base = (int(time.time() * 1000) // MIN) * MIN - 30 * MIN

    def session(start_min: int, end_min: int) -> WindowedKey[str]:
        return WindowedKey("alice", base + start_min * MIN, base + end_min * MIN)

    streams = start_streams(_topology(source, sink, store_type), tmp_path / "first")
    for minute in (0, 2, 10):
        cluster.produce(source, b"alice", b"click", timestamp=base + minute * MIN)
    before_restart = [
        (session(0, 0), 1, base),
        (session(0, 0), None, base),
        (session(0, 2), 2, base + 2 * MIN),
        (session(10, 10), 1, base + 10 * MIN),
    ]
    assert holds_within(lambda: _sessions(cluster, sink) == before_restart, timeout), _sessions(cluster, sink)
    expected_store = [(session(0, 2), 2), (session(10, 10), 1)]
    assert holds_within(lambda: _stored(streams, "alice") == expected_store, timeout), _stored(
        streams, "alice"
    )
    assert streams.close(timeout=30.0)
    changelog = f"{app_id}-{STORE}-changelog"
    assert changelog in cluster.topics()

    # A fresh state directory: the store can only come back from its changelog.
    streams = start_streams(_topology(source, sink, store_type), tmp_path / "second")
    assert holds_within(lambda: _stored(streams, "alice") == expected_store, timeout), _stored(
        streams, "alice"
    )
    cluster.produce(source, b"alice", b"click", timestamp=base + 6 * MIN)
    after_restart = [
        *before_restart,
        (session(0, 2), None, base + 2 * MIN),
        (session(10, 10), None, base + 10 * MIN),
        (session(0, 10), 4, base + 10 * MIN),
    ]
    assert holds_within(lambda: _sessions(cluster, sink) == after_restart, timeout), _sessions(cluster, sink)
    assert holds_within(lambda: _stored(streams, "alice") == [(session(0, 10), 4)], timeout)
