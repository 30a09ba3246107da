"""emit_strategy of session-windowed streams: on_window_close forwards each session's final aggregate
once, when stream time passes its end plus gap plus grace, never a session a merge removed and no
tombstone; also across a restart (its emit position is kept in the ``<store>-emit-position``
store). suppress(until_window_closes) on session tables is tested in test_suppress.py.

The module is marked ``on_cluster``: its tests using ``drive`` run on a KafkaStreams client over an
EmbeddedCluster too (tests/unit/topology/dsl/conftest.py), and the tests at its end check on a
cluster what the driver cannot show."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kstreams import KafkaStreams
from kstreams.serdes import Serdes
from kstreams.topology import (
    BufferConfig,
    EmitStrategy,
    Materialized,
    Produced,
    SessionWindows,
    StreamsBuilder,
    Suppressed,
)
from kstreams.topology.compiled_ops import kernel_for_supplier
from kstreams.topology.dsl import StoreType
from kstreams.topology.dsl.processors.session_aggregate import SessionAggregateSupplier
from tests.support.clients import counts_in, wait_timeout

S = Serdes.string()
L = Serdes.long()

pytestmark = pytest.mark.on_cluster(
    representative="test_session_emit_on_window_close_forwards_each_final_result_once_across_a_restart"
)
# Sessions close once stream time passes their end + 100 + 50.
WINDOWS = SessionWindows.of_inactivity_gap_and_grace(100, 50)
# The reasons of the tests of this module that do not run, or run differently, on the cluster driver.
RESTARTS_A_DRIVER = (
    "restarts on the first driver's state directory; a second cluster driver starts on a cluster of "
    "its own, without the changelogs (the cluster case is "
    "test_session_emit_on_window_close_forwards_each_final_result_once_across_a_restart)"
)


def _session_count(strategy: EmitStrategy | None, materialized=None, windows=WINDOWS) -> StreamsBuilder:  # type: ignore[no-untyped-def]
    builder = StreamsBuilder()
    windowed = builder.stream("in").group_by_key().windowed_by(windows)
    if strategy is not None:
        windowed = windowed.emit_strategy(strategy)
    table = windowed.count(materialized)
    table.to_stream().map(lambda w, n: (f"{w.key}@{w.start}-{w.end}", n)).to("out", Produced.with_(S, L))
    return builder


def _pipe(driver, *records: tuple[str, int]) -> None:  # type: ignore[no-untyped-def]
    source = driver.create_input_topic("in", S, S)
    for key, timestamp in records:
        source.pipe_input(key, "v", timestamp=timestamp)


def _read(driver) -> list[tuple[str, int | None, int]]:  # type: ignore[no-untyped-def]
    return [
        (r.key, r.value, r.timestamp) for r in driver.create_output_topic("out", S, L).read_records_to_list()
    ]


@pytest.mark.parametrize("store_type", [StoreType.ROCKS_DB, StoreType.IN_MEMORY])
def test_on_window_close_forwards_each_final_session_once_never_a_merged_one(drive, store_type):
    # A retention longer than gap + grace keeps every session readable until it closes (see the
    # test below for the default retention).
    materialized = Materialized.as_("counts").with_store_type(store_type).with_retention(1000)
    driver = drive(_session_count(EmitStrategy.on_window_close(), materialized).build())
    # a@0 and a@150 are two sessions until a@80 bridges them: [0, 150], count 3.
    _pipe(driver, ("a", 0), ("a", 150), ("a", 80), ("b", 10))
    assert _read(driver) == []  # stream time 150: nothing ended before 0
    _pipe(driver, ("c", 400))  # closes every session that ended before 250
    assert _read(driver) == [("b@10-10", 1, 10), ("a@0-150", 3, 150)]
    _pipe(driver, ("a", 90), ("c", 401))  # a@90 would join the closed [0, 150]: late, dropped
    assert _read(driver) == []
    _pipe(driver, ("d", 700))
    assert _read(driver) == [("c@400-401", 2, 401)]
    _pipe(driver, ("d", 701))
    assert _read(driver) == []


def test_on_window_update_is_the_default_and_forwards_updates_and_tombstones(drive):
    for strategy in (None, EmitStrategy.on_window_update()):
        driver = drive(_session_count(strategy).build())
        _pipe(driver, ("a", 0), ("a", 50))
        assert _read(driver) == [("a@0-0", 1, 0), ("a@0-0", None, 0), ("a@0-50", 2, 50)]


def test_with_the_default_retention_the_stores_expire_sessions_before_they_close(drive):
    """Kafka's answers (Kafka Streams 4.1.1): with retention gap + grace, a store expires a session
    for merging once it ended at or before its stream time - retention, which is the close time,
    so a session is unreadable for merging before it closes. The default RocksDB store (Kafka's
    time-ordered one) still lists it for emission, so it goes out, unmerged; the in-memory store
    drops it, so nothing ever goes out."""
    rocks = drive(_session_count(EmitStrategy.on_window_close(), Materialized.as_("counts")).build())
    # a@80 finds [150, 150] but no longer [0, 0] (stream time 150 - retention 150 = 0)
    _pipe(rocks, ("a", 0), ("a", 150), ("a", 80), ("b", 10), ("c", 400))
    assert _read(rocks) == [("a@0-0", 1, 0), ("b@10-10", 1, 10), ("a@80-150", 2, 150)]
    _pipe(rocks, ("a", 90), ("c", 401), ("d", 700))
    assert _read(rocks) == [("c@400-401", 2, 401)]
    in_memory = Materialized.as_("counts").with_store_type(StoreType.IN_MEMORY)
    memory = drive(_session_count(EmitStrategy.on_window_close(), in_memory).build())
    _pipe(memory, ("a", 0), ("a", 150), ("a", 80), ("b", 10), ("c", 400), ("a", 90), ("c", 401), ("d", 700))
    assert _read(memory) == []


@pytest.mark.parametrize(
    ("store_type", "emitted"), [(StoreType.ROCKS_DB, [("a@0-0", 1, 0)]), (StoreType.IN_MEMORY, [])]
)
def test_on_window_close_of_a_session_that_ends_exactly_at_the_close_time(drive, store_type, emitted):
    # Retention gap + grace: at stream time 101 the stores have expired [0, 0] (101 - 100 >= 0);
    # Kafka's time-ordered store still lists it for emission, its in-memory store does not.
    windows = SessionWindows.of_inactivity_gap_with_no_grace(100)
    materialized = Materialized.as_("counts").with_store_type(store_type)
    driver = drive(_session_count(EmitStrategy.on_window_close(), materialized, windows).build())
    _pipe(driver, ("a", 0), ("b", 100))
    assert _read(driver) == []
    _pipe(driver, ("c", 101))
    assert _read(driver) == emitted


def test_on_window_close_matches_suppress_until_window_closes(drive):
    # a@60 merges a@0 and a@120; b@90 would join the closed [20, 20]: late, dropped.
    records = [("a", 0), ("a", 120), ("b", 20), ("a", 60), ("b", 200), ("c", 260), ("b", 90), ("d", 900)]
    driver = drive(_session_count(EmitStrategy.on_window_close()).build())
    _pipe(driver, *records)
    on_close = sorted(_read(driver))

    builder = StreamsBuilder()
    (
        builder.stream("in")
        .group_by_key()
        .windowed_by(WINDOWS)
        .count()
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .map(lambda w, n: (f"{w.key}@{w.start}-{w.end}", n))
        .to("out", Produced.with_(S, L))
    )
    suppressed = drive(builder.build())
    _pipe(suppressed, *records)
    assert on_close == sorted(_read(suppressed))
    assert [key for key, _, _ in on_close] == ["a@0-120", "b@20-20", "b@200-200", "c@260-260"]


def test_on_window_close_is_never_cached_nor_compiled_and_is_described(drive):
    builder = _session_count(
        EmitStrategy.on_window_close(), Materialized.as_("counts").with_caching_enabled()
    )
    topology = builder.build()
    assert not topology.store_builders["counts"].caching_enabled
    position = topology.store_builders["counts-emit-position"]
    assert position.logging_enabled and not position.caching_enabled and position.supplier.persistent
    assert "(stores: [counts-emit-position, counts])" in str(topology.describe())
    supplier = next(
        node.supplier
        for node in topology.nodes.values()
        if isinstance(getattr(node, "supplier", None), SessionAggregateSupplier)
    )
    assert supplier.emit_strategy.on_close
    assert kernel_for_supplier(supplier) is None
    driver = drive(topology, statestore_cache_max_bytes=1 << 20)
    _pipe(driver, ("a", 1), ("a", 2), ("b", 300))
    assert _read(driver) == [("a@1-2", 2, 2)]
    assert driver.get_session_store("counts").fetch_session("b", 300, 300) == 1
    updates = _session_count(EmitStrategy.on_window_update()).build()
    assert not any(name.endswith("-emit-position") for name in updates.store_builders)


def test_on_window_close_keeps_its_emit_position_written_only_when_it_emits(drive):
    windows = SessionWindows.of_inactivity_gap_with_no_grace(100)
    topology = _session_count(EmitStrategy.on_window_close(), Materialized.as_("counts"), windows).build()
    driver = drive(topology)
    store = driver.get_key_value_store("counts-emit-position")
    _pipe(driver, ("a", 1), ("a", 50))
    assert store.get("counts") is None  # nothing closed yet
    _pipe(driver, ("b", 200))
    assert store.get("counts") == 100  # stream time 200 - gap 100: [1, 50] went out
    _pipe(driver, ("b", 210), ("b", 240))  # stream time moves on, but no session closes
    assert store.get("counts") == 100
    _pipe(driver, ("c", 400))
    assert store.get("counts") == 300


def test_emit_position_store_follows_the_session_stores_kind_and_logging():
    materialized = Materialized.as_("counts").with_store_type(StoreType.IN_MEMORY).with_logging_disabled()
    position = (
        _session_count(EmitStrategy.on_window_close(), materialized)
        .build()
        .store_builders["counts-emit-position"]
    )
    assert not position.supplier.persistent
    assert not position.logging_enabled


def test_session_emit_strategy_refuses_anything_else():
    windowed = StreamsBuilder().stream("in").group_by_key().windowed_by(WINDOWS)
    with pytest.raises(TypeError, match=r"EmitStrategy\.on_window_close"):
        windowed.emit_strategy("on_window_close")  # type: ignore[arg-type]


@pytest.mark.driver_only(reason=RESTARTS_A_DRIVER)
def test_on_window_close_resumes_after_a_restart_without_repeating_final_results(drive, tmp_path):
    def run(*records: tuple[str, int]) -> list[tuple[str, int | None, int]]:
        # A new driver on the same state directory: persistent stores survive, as a restart keeps them.
        driver = drive(_session_count(EmitStrategy.on_window_close()).build(), state_dir=str(tmp_path))
        _pipe(driver, *records)
        result = _read(driver)
        driver.close()
        return result

    assert run(("a", 0), ("a", 50), ("b", 300)) == [("a@0-50", 2, 50)]
    # a@60 would join [0, 50], which went out before the restart: late, dropped, not forwarded again.
    assert run(("a", 60), ("c", 310), ("z", 600)) == [("b@300-300", 1, 300), ("c@310-310", 1, 310)]


# -- on a cluster ----------------------------------------------------------------------------------
# Session emit-on-window-close across a restart, run by KafkaStreams on both cluster adapters under
# at_least_once and exactly_once_v2: a new client whose state comes from the changelogs alone (a
# fresh state directory) forwards every session's final result that the first client did not, and
# none that it did; across both runs, each session's final result exactly once.


GAP = 10_000


def _final_session_counts(source: str, sink: str) -> Any:
    builder = StreamsBuilder()
    (
        builder.stream(source)
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(GAP))
        .emit_strategy(EmitStrategy.on_window_close())
        .count(Materialized.as_("sessions"))
        .to_stream()
        .map(lambda session, count: (f"{session.key}@{session.start}-{session.end}", count))
        .to(sink, Produced.with_(S, L))
    )
    return builder.build()


def _base() -> int:
    # Near now (within the topics' retention), at the start of one of the store's segments (one
    # minute each): every record below (within 5 gaps, 50 s) then falls in one segment. Across a
    # segment boundary the store would drop the older segment, sessions not yet emitted with it,
    # as Kafka's time-ordered store does.
    return (int(time.time() * 1000) // 60_000 - 2) * 60_000


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_session_emit_on_window_close_forwards_each_final_result_once_across_a_restart(
    cluster: Any,
    app_id: str,
    tmp_path: Path,
    clients: list[KafkaStreams],
    client_config: Callable[..., dict[str, object]],
    wait_until: Callable[..., None],
    guarantee: str,
) -> None:
    source, sink = f"{app_id}-events", f"{app_id}-final"
    cluster.create_topic(source, 1)
    cluster.create_topic(sink, 1)
    timeout = wait_timeout(cluster)
    b = _base()
    first = KafkaStreams(
        _final_session_counts(source, sink),
        client_config(tmp_path / "a", processing_guarantee=guarantee),
        cluster=cluster,
    )
    clients.append(first)
    first.start()
    for key, timestamp in [("a", b + 1), ("a", b + 2), ("b", b + 3), ("c", b + GAP + 5), ("d", b + GAP + 10)]:
        cluster.produce(source, key.encode(), b"v", timestamp=timestamp)
    # Stream time b + GAP + 5 closes the sessions that ended before b + 5 (b + GAP + 10 closes none).
    expected_first = [(f"a@{b + 1}-{b + 2}", 2, b + 2), (f"b@{b + 3}-{b + 3}", 1, b + 3)]
    wait_until(
        lambda: counts_in(cluster, sink) == expected_first, timeout, "the first sessions' final counts"
    )
    positions = [
        L.deserialize("", r.value)
        for r in cluster.read(f"{app_id}-sessions-emit-position-changelog", "read_committed")
    ]
    assert positions == [b + 5]  # written only when sessions went out
    assert first.close(timeout=30)

    # A new client with empty local state: sessions and emit position come from the changelogs.
    second = KafkaStreams(
        _final_session_counts(source, sink),
        client_config(tmp_path / "b", processing_guarantee=guarantee),
        cluster=cluster,
    )
    clients.append(second)
    second.start()
    # Late: it would join a's session, which went out before the restart (stream time, restored
    # from the emit position, closes it). (A record at b + 5 would not be late: it cannot reach
    # a's session, which the store no longer returns for merging, and opens a session of its own
    # ending at the close time, as in Kafka.)
    cluster.produce(source, b"a", b"v", timestamp=b + 2)
    cluster.produce(source, b"c", b"v", timestamp=b + GAP + 7)  # extends c's session
    cluster.produce(source, b"e", b"v", timestamp=b + 3 * GAP)  # closes c's and d's sessions
    expected = [
        *expected_first,
        (f"c@{b + GAP + 5}-{b + GAP + 7}", 2, b + GAP + 7),
        (f"d@{b + GAP + 10}-{b + GAP + 10}", 1, b + GAP + 10),
    ]
    wait_until(lambda: len(counts_in(cluster, sink)) >= 4, timeout, "the second sessions' final counts")
    assert counts_in(cluster, sink) == expected
    cluster.produce(source, b"f", b"v", timestamp=b + 5 * GAP)  # closes e's session
    expected.append((f"e@{b + 3 * GAP}-{b + 3 * GAP}", 1, b + 3 * GAP))
    wait_until(lambda: len(counts_in(cluster, sink)) >= 5, timeout, "the last session's final count")
    assert second.close(timeout=30)
    assert counts_in(cluster, sink) == expected  # nothing more at close: f's session is still open
