"""TimeWindowedKStream.emit_strategy: on_window_close forwards each window's final aggregate once,
when stream time passes its end plus grace; on_window_update (the default) forwards every update."""

from __future__ import annotations

import pytest

from kstreams.processor import Processor
from kstreams.serdes import Serdes
from kstreams.state.store import WindowedKey
from kstreams.topology import EmitStrategy, Materialized, Produced, StreamsBuilder, TimeWindows
from kstreams.topology.compiled_ops import kernel_for_supplier
from kstreams.topology.dsl.processors.aggregate import WindowedAggregateSupplier
from kstreams.topology.dsl.records import Change

S = Serdes.string()
L = Serdes.long()


def _windowed_count(windows: TimeWindows, strategy: EmitStrategy | None, materialized=None) -> StreamsBuilder:  # type: ignore[no-untyped-def]
    builder = StreamsBuilder()
    windowed = builder.stream("in").group_by_key().windowed_by(windows)
    if strategy is not None:
        windowed = windowed.emit_strategy(strategy)
    windowed.count(materialized).to_stream().map(lambda w, n: (f"{w.key}@{w.start}", n)).to(
        "out", Produced.with_(S, L)
    )
    return builder


def _pipe(driver, *records: tuple[str, int]) -> None:  # type: ignore[no-untyped-def]
    source = driver.create_input_topic("in", S, S)
    for key, timestamp in records:
        source.pipe_input(key, "v", timestamp=timestamp)


def test_on_window_close_forwards_each_final_count_once(drive):
    driver = drive(
        _windowed_count(TimeWindows.of_size_and_grace(100, 20), EmitStrategy.on_window_close()).build()
    )
    out = driver.create_output_topic("out", S, L)
    _pipe(driver, ("a", 10), ("b", 50), ("a", 99), ("a", 110), ("a", 80))
    assert out.is_empty()  # stream time 110 < 100 + 20: the first window is still open
    _pipe(driver, ("b", 120), ("a", 70))  # window [0, 100) closed; the record at 70 is late
    assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [
        ("a@0", 3, 99),
        ("b@0", 1, 50),
    ]
    _pipe(driver, ("c", 500))
    assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [
        ("a@100", 1, 110),
        ("b@100", 1, 120),
    ]
    _pipe(driver, ("c", 501))
    assert out.is_empty()


def test_on_window_close_of_hopping_windows_emits_every_window_once(drive):
    windows = TimeWindows.of_size_with_no_grace(100).advance_by(50)
    driver = drive(_windowed_count(windows, EmitStrategy.on_window_close()).build())
    out = driver.create_output_topic("out", S, L)
    _pipe(driver, ("a", 60), ("a", 120), ("a", 150), ("a", 260))
    assert out.read_key_values_to_list() == [("a@0", 1), ("a@50", 2), ("a@100", 2), ("a@150", 1)]


def test_on_window_close_forwards_change_without_old_value(drive):
    seen: list[tuple[object, object, int]] = []

    class Recorder(Processor):  # type: ignore[type-arg]
        def process(self, record):  # type: ignore[no-untyped-def]
            seen.append((record.key, record.value, record.timestamp))

    builder = StreamsBuilder()
    table = (
        builder.stream("in")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(100))
        .emit_strategy(EmitStrategy.on_window_close())
        .count()
    )
    topology = builder.build()
    topology.add_processor("recorder", Recorder, table.name)
    driver = drive(topology)
    _pipe(driver, ("a", 1), ("a", 2), ("a", 100))
    assert seen == [(WindowedKey("a", 0, 100), Change(2, None), 2)]


def test_on_window_update_is_the_default_and_forwards_every_update(drive):
    windows = TimeWindows.of_size_with_no_grace(100)
    for strategy in (None, EmitStrategy.on_window_update()):
        driver = drive(_windowed_count(windows, strategy).build())
        _pipe(driver, ("a", 1), ("a", 2))
        assert driver.create_output_topic("out", S, L).read_key_values_to_list() == [("a@0", 1), ("a@0", 2)]


def test_on_window_close_is_never_cached_nor_compiled(drive):
    builder = _windowed_count(
        TimeWindows.of_size_with_no_grace(100),
        EmitStrategy.on_window_close(),
        Materialized.as_("counts").with_caching_enabled(),
    )
    topology = builder.build()
    assert not topology.store_builders["counts"].caching_enabled
    supplier = next(
        node.supplier
        for node in topology.nodes.values()
        if isinstance(getattr(node, "supplier", None), WindowedAggregateSupplier)
    )
    assert supplier.emit_strategy.on_close
    assert kernel_for_supplier(supplier) is None
    driver = drive(topology, statestore_cache_max_bytes=1 << 20)
    _pipe(driver, ("a", 1), ("a", 2), ("a", 100))
    assert driver.create_output_topic("out", S, L).read_key_values_to_list() == [("a@0", 2)]
    assert driver.get_timestamped_window_store("counts").fetch("a", 100).value == 1


def test_emit_strategy_refuses_anything_else():
    windowed = StreamsBuilder().stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
    with pytest.raises(TypeError, match=r"EmitStrategy\.on_window_close"):
        windowed.emit_strategy("on_window_close")  # type: ignore[arg-type]
