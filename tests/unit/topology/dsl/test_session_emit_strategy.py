"""emit_strategy of session-windowed streams: on_window_close forwards each session's final aggregate
once, when stream time passes its end plus gap plus grace, never a session a merge removed and no
tombstone; also across a restart (its emit position is kept in the ``<store>-emit-position``
store). suppress(until_window_closes) on session tables is tested in test_suppress.py."""

from __future__ import annotations

import pytest

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

S = Serdes.string()
L = Serdes.long()
# Sessions close once stream time passes their end + 100 + 50.
WINDOWS = SessionWindows.of_inactivity_gap_and_grace(100, 50)


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
    materialized = Materialized.as_("counts").with_store_type(store_type)
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


@pytest.mark.parametrize("store_type", [StoreType.ROCKS_DB, StoreType.IN_MEMORY])
def test_on_window_close_emits_a_session_that_ends_exactly_at_the_close_time(drive, store_type):
    # With gap + grace as retention, the store would drop [0, 0] at stream time 100, one ms before
    # the aggregation closes it (at 101): the store keeps one millisecond more.
    windows = SessionWindows.of_inactivity_gap_with_no_grace(100)
    materialized = Materialized.as_("counts").with_store_type(store_type)
    driver = drive(_session_count(EmitStrategy.on_window_close(), materialized, windows).build())
    _pipe(driver, ("a", 0), ("b", 100))
    assert _read(driver) == []
    _pipe(driver, ("c", 101))
    assert _read(driver) == [("a@0-0", 1, 0)]


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
