"""KTable.suppress on the test driver: final results per window, time-limit rate limiting, full
buffers (emit early or shut down), naming, describe() and bad input.

The module is marked ``on_cluster``: its tests using ``drive`` run on a KafkaStreams client over an
EmbeddedCluster too (tests/unit/topology/dsl/conftest.py), and the tests at its end check on a
cluster what the driver cannot show."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from kstreams import KafkaStreams
from kstreams.errors import StreamsException, TopologyException
from kstreams.processor import Processor
from kstreams.serdes import Serdes
from kstreams.state.store import WindowedKey
from kstreams.topology import (
    BufferConfig,
    Consumed,
    EmitStrategy,
    Grouped,
    Materialized,
    Produced,
    SessionWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
)
from kstreams.topology.dsl.records import Change
from tests.support.clients import counts_in, wait_timeout

S = Serdes.string()
L = Serdes.long()

pytestmark = pytest.mark.on_cluster(
    representative="test_suppression_buffer_survives_a_restart_without_losing_or_repeating_results"
)
HOUR = 60 * 60 * 1000
MINUTE = 60 * 1000
# The reasons of the tests of this module that do not run, or run differently, on the cluster driver.
RAISES_ON_PIPING = (
    "the driver raises the processing error from pipe_input; on a cluster the client stops in ERROR"
)


def _final_counts_topology(suppressed: Suppressed | None = None) -> StreamsBuilder:
    """Kafka's "final results per window" example: hourly counts with 10 minutes of grace, only
    each window's final count, as "user@window-start"."""
    builder = StreamsBuilder()
    (
        builder.stream("events")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(timedelta(hours=1), timedelta(minutes=10)))
        .count()
        .suppress(suppressed or Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .map(lambda window, count: (f"{window.key}@{window.start}", count))
        .to("alerts", Produced.with_(S, L))
    )
    return builder


def test_until_window_closes_emits_each_windows_final_count_once_and_drops_late_records(drive):
    driver = drive(_final_counts_topology().build())
    events = driver.create_input_topic("events", S, S)
    alerts = driver.create_output_topic("alerts", S, L)
    events.pipe_input("ann", "click", timestamp=5 * MINUTE)
    events.pipe_input("ann", "click", timestamp=30 * MINUTE)
    events.pipe_input("bob", "click", timestamp=40 * MINUTE)
    events.pipe_input("ann", "click", timestamp=HOUR + 5 * MINUTE)  # next window; the first is in grace
    events.pipe_input("ann", "click", timestamp=55 * MINUTE)  # out of order, within grace: counted
    assert alerts.is_empty()
    # Stream time reaches end + grace of the first hour: its final counts, at the time of their
    # last record, and nothing for the still open second hour.
    events.pipe_input("bob", "click", timestamp=HOUR + 10 * MINUTE)
    assert [(r.key, r.value, r.timestamp) for r in alerts.read_records_to_list()] == [
        ("ann@0", 3, 55 * MINUTE),
        ("bob@0", 1, 40 * MINUTE),
    ]
    events.pipe_input("ann", "click", timestamp=59 * MINUTE)  # late: its window closed
    events.pipe_input("ann", "click", timestamp=2 * HOUR + 10 * MINUTE)
    assert [(r.key, r.value, r.timestamp) for r in alerts.read_records_to_list()] == [
        ("ann@3600000", 1, HOUR + 5 * MINUTE),
        ("bob@3600000", 1, HOUR + 10 * MINUTE),
    ]
    assert alerts.is_empty()


class ChangeRecorder(Processor):  # type: ignore[type-arg]
    """Records what the suppress node forwards: keys, Change values, timestamps."""

    seen: list[tuple[object, object, int]] = []

    def process(self, record):  # type: ignore[no-untyped-def]
        ChangeRecorder.seen.append((record.key, record.value, record.timestamp))


def _recording(table, builder: StreamsBuilder):  # type: ignore[no-untyped-def]
    ChangeRecorder.seen = []
    topology = builder.build()
    topology.add_processor("recorder", ChangeRecorder, table.name)
    return topology


def test_emitted_record_is_the_newest_change_with_its_old_value_and_timestamp(drive):
    builder = StreamsBuilder()
    table = (
        builder.stream("in")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(100))
        .count()
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    )
    driver = drive(_recording(table, builder))
    source = driver.create_input_topic("in", S, S)
    for timestamp in (10, 30, 20, 100):
        source.pipe_input("a", "v", timestamp=timestamp)
    # Kafka forwards the newest update as it came: count 3 replacing 2 (the value from before
    # buffering, None, is only what the suppressed table's view shows).
    assert ChangeRecorder.seen == [(WindowedKey("a", 0, 100), Change(3, 2), 30)]


def test_until_window_closes_drops_final_tombstones(drive):
    builder = StreamsBuilder()
    table = (
        builder.stream("in")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(100))
        .count()
        .filter(lambda window, count: count > 1)
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    )
    driver = drive(_recording(table, builder))
    source = driver.create_input_topic("in", S, S)
    source.pipe_input("a", "v", timestamp=10)  # filtered out: a deletion, buffered
    source.pipe_input("b", "v", timestamp=20)
    source.pipe_input("b", "v", timestamp=30)
    # Stream time is the suppress node's own: the filtered-out first count of c never reaches it.
    source.pipe_input("c", "v", timestamp=150)
    assert ChangeRecorder.seen == []
    source.pipe_input("c", "v", timestamp=151)
    assert ChangeRecorder.seen == [(WindowedKey("b", 0, 100), Change(2, None), 30)]


def test_until_time_limit_emits_at_most_one_update_per_key_per_limit(drive):
    builder = StreamsBuilder()
    table = builder.table("in", materialized=Materialized.as_("latest"))
    limited = table.suppress(
        Suppressed.until_time_limit(timedelta(milliseconds=100), BufferConfig.unbounded())
    )
    limited.to_stream().to("out")
    driver = drive(_recording(limited, builder))
    source = driver.create_input_topic("in", S, S)
    source.pipe_input("a", "1", timestamp=0)
    source.pipe_input("a", "2", timestamp=50)
    source.pipe_input("b", "1", timestamp=60)
    source.pipe_input("a", "3", timestamp=99)  # the key keeps its place: due at 0 + 100
    assert ChangeRecorder.seen == []
    source.pipe_input("c", "1", timestamp=100)
    assert ChangeRecorder.seen == [("a", Change("3", "2"), 99)]
    source.pipe_input("a", None, timestamp=170)  # a tombstone is an update like any other
    source.pipe_input("c", "2", timestamp=270)
    out = driver.create_output_topic("out", S, S)
    assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [
        ("a", "3", 99),
        ("b", "1", 60),
        ("c", "2", 270),
        ("a", None, 170),
    ]


def test_time_limit_of_zero_passes_every_update_through(drive):
    builder = StreamsBuilder()
    builder.table("in").suppress(Suppressed.until_time_limit(0, BufferConfig.unbounded())).to_stream().to(
        "out"
    )
    driver = drive(builder.build())
    source = driver.create_input_topic("in", S, S)
    source.pipe_input("a", "1", timestamp=5)
    source.pipe_input("a", "2", timestamp=3)
    assert driver.create_output_topic("out", S, S).read_key_values_to_list() == [("a", "1"), ("a", "2")]


def test_full_buffer_emits_the_oldest_entries_early(drive):
    builder = StreamsBuilder()
    builder.table("in").suppress(
        Suppressed.until_time_limit(timedelta(hours=1), BufferConfig.max_records(2))
    ).to_stream().to("out")
    driver = drive(builder.build())
    source = driver.create_input_topic("in", S, S)
    out = driver.create_output_topic("out", S, S)
    source.pipe_input("a", "1", timestamp=10)
    source.pipe_input("b", "1", timestamp=20)
    source.pipe_input("a", "2", timestamp=30)  # still two keys
    assert out.is_empty()
    source.pipe_input("c", "1", timestamp=40)  # three keys: the oldest (a) leaves early
    assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [("a", "2", 30)]
    source.pipe_input("d", "1", timestamp=50)
    assert out.read_key_values_to_list() == [("b", "1")]


def test_full_buffer_by_bytes_emits_early(drive):
    builder = StreamsBuilder()
    builder.table("in").suppress(
        Suppressed.until_time_limit(timedelta(hours=1), BufferConfig.max_bytes(100))
    ).to_stream().to("out")
    driver = drive(builder.build())
    source = driver.create_input_topic("in", S, S)
    source.pipe_input("a", "x" * 40, timestamp=1)
    source.pipe_input("b", "y" * 40, timestamp=2)
    assert driver.create_output_topic("out", S, S).read_key_values_to_list() == [("a", "x" * 40)]


@pytest.mark.driver_only(reason=RAISES_ON_PIPING)
def test_full_buffer_shuts_down_with_a_clear_error(drive):
    builder = StreamsBuilder()
    builder.table("in").suppress(
        Suppressed.until_time_limit(timedelta(hours=1), BufferConfig.max_records(1).shutdown_when_full())
    ).to_stream().to("out")
    driver = drive(builder.build())
    source = driver.create_input_topic("in", S, S)
    source.pipe_input("a", "1", timestamp=1)
    with pytest.raises(
        StreamsException,
        match=r"KTABLE-SUPPRESS-0000000003 buffer exceeded its max capacity. "
        r"Currently \[2/1\] records",
    ):
        source.pipe_input("b", "1", timestamp=2)


@pytest.mark.driver_only(reason=RAISES_ON_PIPING)
def test_until_window_closes_with_a_bounded_strict_buffer_shuts_down_when_full(drive):
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(100)).count().suppress(
        Suppressed.until_window_closes(BufferConfig.max_records(1).shutdown_when_full()).with_name("final")
    ).to_stream().to("out", Produced.with_(None, L))
    driver = drive(builder.build())
    source = driver.create_input_topic("in", S, S)
    source.pipe_input("a", "v", timestamp=1)
    with pytest.raises(StreamsException, match="final buffer exceeded its max capacity"):
        source.pipe_input("b", "v", timestamp=2)


def test_suppressed_table_view_shows_the_value_from_before_buffering(drive):
    builder = StreamsBuilder()
    table = builder.table("table-in", materialized=Materialized.as_("table-store"))
    limited = table.suppress(Suppressed.until_time_limit(1000, BufferConfig.unbounded()))
    builder.stream("clicks").join(limited, lambda click, row: f"{click}:{row}").to("joined")
    driver = drive(builder.build())
    rows = driver.create_input_topic("table-in", S, S)
    clicks = driver.create_input_topic("clicks", S, S)
    joined = driver.create_output_topic("joined", S, S)
    rows.pipe_input("a", "v1", timestamp=0)
    rows.pipe_input("x", "-", timestamp=1000)  # stream time 1000: "v1" is emitted
    rows.pipe_input("a", "v2", timestamp=1100)  # buffered until stream time 2100
    clicks.pipe_input("a", "c1", timestamp=1101)
    # Downstream of the suppression the row is still "v1" until "v2" is emitted.
    assert joined.read_values_to_list() == ["c1:v1"]
    rows.pipe_input("y", "-", timestamp=2100)
    clicks.pipe_input("a", "c2", timestamp=2101)
    assert joined.read_values_to_list() == ["c2:v2"]


def test_names_and_describe_follow_kafka():
    builder = _final_counts_topology()
    description = str(builder.build().describe())
    assert (
        "    Processor: KTABLE-SUPPRESS-0000000003 (stores: [KTABLE-SUPPRESS-STATE-STORE-0000000004])\n"
        "      --> KTABLE-TOSTREAM-0000000005\n"
        "      <-- KSTREAM-AGGREGATE-0000000002\n"
    ) in description
    named = _final_counts_topology(
        Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("hourly-final")
    ).build()
    assert "Processor: hourly-final (stores: [hourly-final-store])" in str(named.describe())
    plan = named.build("app")
    changelogs = {topic for sub in plan.subtopologies for topic in sub.changelog_topics.values()}
    assert "app-hourly-final-store-changelog" in changelogs


def test_logging_disabled_buffer_has_no_changelog():
    builder = StreamsBuilder()
    builder.table("in").suppress(
        Suppressed.until_time_limit(10, BufferConfig.unbounded().with_logging_disabled()).with_name("s")
    ).to_stream().to("out")
    plan = builder.build().build("app")
    assert all("s-store" not in sub.changelog_topics for sub in plan.subtopologies)


def test_until_window_closes_needs_a_windowed_table():
    builder = StreamsBuilder()
    table = builder.table("in")
    with pytest.raises(
        TopologyException, match="window close time is only defined for windowed computations"
    ):
        table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))


def test_until_window_closes_finds_the_grace_through_table_operations(drive):
    builder = StreamsBuilder()
    (
        builder.stream("in")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(100, 50))
        .count()
        .map_values(lambda count: f"{count} clicks")
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .map(lambda window, value: (f"{window.key}@{window.start}", value))
        .to("out")
    )
    driver = drive(builder.build())
    source = driver.create_input_topic("in", S, S)
    out = driver.create_output_topic("out", S, S)
    source.pipe_input("a", "v", timestamp=10)
    source.pipe_input("a", "v", timestamp=149)
    assert out.is_empty()
    source.pipe_input("a", "v", timestamp=150)
    assert out.read_key_values_to_list() == [("a@0", "1 clicks")]


def test_bad_suppression_arguments_are_refused_with_a_fix():
    with pytest.raises(ValueError, match="never emits early"):
        Suppressed.until_window_closes(BufferConfig.max_records(5))
    with pytest.raises(TypeError, match="BufferConfig"):
        Suppressed.until_time_limit(10, 5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must not be negative"):
        Suppressed.until_time_limit(-1, BufferConfig.unbounded())
    with pytest.raises(ValueError, match="must not be negative"):
        BufferConfig.max_records(-1)
    with pytest.raises(TypeError, match="must be an int"):
        BufferConfig.max_bytes("10")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes a Suppressed"):
        StreamsBuilder().table("in").suppress(BufferConfig.unbounded())  # type: ignore[arg-type]
    assert BufferConfig.max_records(3).shutdown_when_full().strategy == "shut_down"
    assert BufferConfig.max_records(3).with_max_bytes(10).max_bytes_limit == 10


def test_until_window_closes_on_session_windows_waits_for_gap_plus_grace(drive):
    builder = StreamsBuilder()
    (
        builder.stream("in")
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(100, 10))
        .count()
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .map(lambda window, count: (f"{window.key}@{window.start}-{window.end}", count))
        .to("out", Produced.with_(S, L))
    )
    driver = drive(builder.build())
    source = driver.create_input_topic("in", S, S)
    out = driver.create_output_topic("out", S, L)
    source.pipe_input("a", "v", timestamp=0)
    source.pipe_input("a", "v", timestamp=50)
    source.pipe_input("b", "v", timestamp=159)  # the session [0, 50] may still grow until 50 + 100 + 10
    assert out.is_empty()
    source.pipe_input("b", "v", timestamp=160)
    assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [("a@0-50", 2, 50)]


@pytest.mark.parametrize(
    "windows",
    [SessionWindows.of_inactivity_gap_and_grace(100, 10), TimeWindows.of_size_and_grace(100, 10)],
    ids=["session", "time"],
)
def test_until_window_closes_with_explicit_serdes_buffers_the_windowed_keys(drive, windows):
    # The table's key serde is then the windowed one; the buffer writes the window itself and
    # needs the serde of the key inside it.
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed.with_(S, S))
        .group_by_key()
        .windowed_by(windows)
        .count()
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .map(lambda window, count: (f"{window.key}@{window.start}", count))
        .to("out", Produced.with_(S, L))
    )
    driver = drive(builder.build())
    source = driver.create_input_topic("in", S, S)
    source.pipe_input("a", "v", timestamp=0)
    source.pipe_input("a", "v", timestamp=50)
    source.pipe_input("b", "v", timestamp=1000)
    assert driver.create_output_topic("out", S, L).read_key_values_to_list() == [("a@0", 2)]


@pytest.mark.parametrize("session", [False, True], ids=["time", "session"])
def test_until_window_closes_after_a_cogrouped_windowed_aggregate(drive, session):
    # Kafka finds the grace through the cogroup's merge to the windowed aggregations upstream.
    builder = StreamsBuilder()
    clicks = builder.stream("clicks", Consumed.with_(S, S)).group_by_key()
    views = builder.stream("views", Consumed.with_(S, S)).group_by_key()
    cogrouped = clicks.cogroup(lambda k, v, agg: agg + v).cogroup(views, lambda k, v, agg: agg + v.upper())
    if session:
        windowed = cogrouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(100, 10))
        table = windowed.aggregate(lambda: "", lambda k, left, right: left + right, Materialized.with_(S, S))
    else:
        table = cogrouped.windowed_by(TimeWindows.of_size_and_grace(100, 10)).aggregate(
            lambda: "", Materialized.with_(S, S)
        )
    (
        table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .map(lambda window, value: (f"{window.key}@{window.start}", value))
        .to("out", Produced.with_(S, S))
    )
    driver = drive(builder.build())
    driver.create_input_topic("clicks", S, S).pipe_input("k", "c", timestamp=0)
    driver.create_input_topic("views", S, S).pipe_input("k", "v", timestamp=5)
    out = driver.create_output_topic("out", S, S)
    driver.create_input_topic("clicks", S, S).pipe_input("z", "c", timestamp=50)
    assert out.is_empty()  # the window may still change
    driver.create_input_topic("clicks", S, S).pipe_input("z", "c", timestamp=1000)
    z_window = 50 if session else 0
    assert sorted(out.read_key_values_to_list()) == [("k@0", "cV"), (f"z@{z_window}", "c")]


def test_bytes_limit_counts_what_kafka_counts_and_emits_early(drive):
    """Kafka's SuppressScenarioTest.shouldSuppressIntermediateEventsWithBytesLimit, with Kafka's
    test driver application id: an entry counts its key, values, the repartition topic's name and
    fixed overheads (a little over 100 bytes), so a second key fills a 200-byte buffer."""
    builder = StreamsBuilder()
    counts = (
        builder.table(
            "input",
            Consumed.with_(S, S),
            Materialized.with_(S, S).with_caching_disabled().with_logging_disabled(),
        )
        .group_by(lambda k, v: (v, k), Grouped.with_(S, S))
        .count()
    )
    counts.suppress(
        Suppressed.until_time_limit((1 << 63) - 1, BufferConfig.max_bytes(200).emit_early_when_full())
    ).to_stream().to("output-suppressed", Produced.with_(S, L))
    counts.to_stream().to("output-raw", Produced.with_(S, L))
    driver = drive(builder.build(), application_id="dummy-topology-test-driver-app-id")
    source = driver.create_input_topic("input", S, S)
    raw = driver.create_output_topic("output-raw", S, L)
    suppressed = driver.create_output_topic("output-suppressed", S, L)
    source.pipe_input("k1", "v1", timestamp=0)
    source.pipe_input("k1", "v2", timestamp=1)
    source.pipe_input("k2", "v1", timestamp=2)
    assert [(r.key, r.value, r.timestamp) for r in raw.read_records_to_list()] == [
        ("v1", 1, 0),
        ("v1", 0, 1),
        ("v2", 1, 1),
        ("v1", 1, 2),
    ]
    # Consecutive updates of v1 collapse into the latter; the last update stays buffered.
    assert [(r.key, r.value, r.timestamp) for r in suppressed.read_records_to_list()] == [
        ("v1", 0, 1),
        ("v2", 1, 1),
    ]
    source.pipe_input("x", "x", timestamp=3)
    assert [(r.key, r.value, r.timestamp) for r in raw.read_records_to_list()] == [("x", 1, 3)]
    assert [(r.key, r.value, r.timestamp) for r in suppressed.read_records_to_list()] == [("v1", 1, 2)]


def test_equal_time_sessions_leave_in_kafkas_serialized_key_order(drive):
    """suppress-equal-time-order: Kafka's buffer orders entries of equal time by the session key's
    bytes (inner key, end, start), so "ab" goes before "d"."""
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed.with_(S, S))
        .group_by_key()
        .windowed_by(
            SessionWindows.of_inactivity_gap_and_grace(timedelta(milliseconds=2), timedelta(milliseconds=20))
        )
        .count()
        .suppress(Suppressed.until_time_limit(timedelta(milliseconds=10), BufferConfig.unbounded()))
        .to_stream()
        .map(lambda window, count: (f"{window.key}@{window.start}/{window.end}", count))
        .to("out", Produced.with_(S, L))
    )
    driver = drive(builder.build(), statestore_cache_max_bytes=0)
    source = driver.create_input_topic("in", S, S)
    for key, value, timestamp in [("d", None, 0), ("d", "q", 2), ("ab", "z", 2), ("d", None, 22)]:
        source.pipe_input(key, value, timestamp=timestamp)
    assert driver.create_output_topic("out", S, L).read_key_values_to_list() == [
        ("d@0/0", None),
        ("ab@2/2", 1),
        ("d@0/2", 2),
    ]


# -- on a cluster ----------------------------------------------------------------------------------
# KTable.suppress and emit-on-window-close run by KafkaStreams on both cluster adapters: final
# results reach the output topic, and a restart restores the suppression buffer from its changelog
# so no final result is lost or repeated.


WINDOW = 10_000


def _final_counts(source: str, sink: str, emit_on_close: bool = False) -> Any:
    builder = StreamsBuilder()
    windowed = builder.stream(source).group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(WINDOW))
    if emit_on_close:
        table = windowed.emit_strategy(EmitStrategy.on_window_close()).count()
    else:
        table = windowed.count().suppress(
            Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("final")
        )
    table.to_stream().map(lambda window, count: (f"{window.key}@{window.start}", count)).to(
        sink, Produced.with_(S, L)
    )
    return builder.build()


def _base() -> int:
    # Near now (within the topics' retention), aligned to a window.
    return (int(time.time() * 1000) // WINDOW) * WINDOW - 6 * WINDOW


def test_suppression_buffer_survives_a_restart_without_losing_or_repeating_results(
    cluster: Any,
    app_id: str,
    tmp_path: Path,
    clients: list[KafkaStreams],
    client_config: Callable[..., dict[str, object]],
    wait_until: Callable[..., None],
) -> None:
    source, sink = f"{app_id}-events", f"{app_id}-final"
    cluster.create_topic(source, 1)
    cluster.create_topic(sink, 1)
    timeout = wait_timeout(cluster)
    base = _base()
    w0, w1, w2 = base, base + WINDOW, base + 2 * WINDOW
    first = KafkaStreams(_final_counts(source, sink), client_config(tmp_path / "a"), cluster=cluster)
    clients.append(first)
    first.start()
    for key, timestamp in [("a", w0 + 1), ("a", w0 + 2), ("b", w0 + 3), ("c", w1 + 1), ("d", w1 + 2)]:
        cluster.produce(source, key.encode(), b"v", timestamp=timestamp)
    expected_first = [(f"a@{w0}", 2, w0 + 2), (f"b@{w0}", 1, w0 + 3)]
    wait_until(lambda: counts_in(cluster, sink) == expected_first, timeout, "the first window's final counts")
    changelog = f"{app_id}-final-store-changelog"
    # c and d are buffered (their window is open) and logged; a and b were emitted and deleted.
    # A key is Kafka's time-windowed key: the inner key, then the window start (8 bytes).
    wait_until(
        lambda: {r.key[:-8] for r in cluster.read(changelog) if r.value is not None} >= {b"c", b"d"},
        timeout,
        "the buffered entries in the changelog",
    )
    assert first.close(timeout=30)

    # A new client with empty local state: the buffer comes back from the changelog alone.
    second = KafkaStreams(_final_counts(source, sink), client_config(tmp_path / "b"), cluster=cluster)
    clients.append(second)
    second.start()
    cluster.produce(source, b"c", b"v", timestamp=w1 + 3)
    cluster.produce(source, b"e", b"v", timestamp=w2 + 1)  # closes the second window
    expected = [*expected_first, (f"c@{w1}", 2, w1 + 3), (f"d@{w1}", 1, w1 + 2)]
    wait_until(lambda: len(counts_in(cluster, sink)) >= 4, timeout, "the second window's final counts")
    assert counts_in(cluster, sink) == expected
    assert second.close(timeout=30)
    assert counts_in(cluster, sink) == expected  # nothing more at close: e's window is still open


def test_emit_on_window_close_forwards_final_counts_on_the_cluster(
    cluster: Any,
    app_id: str,
    tmp_path: Path,
    clients: list[KafkaStreams],
    client_config: Callable[..., dict[str, object]],
    wait_until: Callable[..., None],
) -> None:
    source, sink = f"{app_id}-events", f"{app_id}-final"
    cluster.create_topic(source, 1)
    cluster.create_topic(sink, 1)
    timeout = wait_timeout(cluster)
    base = _base()
    streams = KafkaStreams(
        _final_counts(source, sink, emit_on_close=True), client_config(tmp_path), cluster=cluster
    )
    clients.append(streams)
    streams.start()
    for key, timestamp in [("a", base + 1), ("b", base + 2), ("a", base + 3), ("a", base + WINDOW)]:
        cluster.produce(source, key.encode(), b"v", timestamp=timestamp)
    expected = [(f"a@{base}", 2, base + 3), (f"b@{base}", 1, base + 2)]
    wait_until(lambda: len(counts_in(cluster, sink)) >= 2, timeout, "the final counts")
    assert counts_in(cluster, sink) == expected
