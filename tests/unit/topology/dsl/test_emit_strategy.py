"""emit_strategy of time- and sliding-windowed streams: on_window_close forwards each window's final
aggregate once, when stream time passes its end plus grace, also across a restart (its emit position
is kept in the ``<store>-emit-position`` store); on_window_update (the default) forwards every update.

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
from kstreams.processor import Processor
from kstreams.serdes import Serdes
from kstreams.state.store import WindowedKey
from kstreams.topology import (
    EmitStrategy,
    Materialized,
    Produced,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
)
from kstreams.topology.compiled_ops import kernel_for_supplier
from kstreams.topology.dsl import StoreType
from kstreams.topology.dsl.processors.aggregate import WindowedAggregateSupplier
from kstreams.topology.dsl.records import Change
from tests.support.clients import counts_in, wait_timeout

S = Serdes.string()
L = Serdes.long()

pytestmark = pytest.mark.on_cluster(
    representative="test_emit_on_window_close_forwards_each_final_result_once_across_a_restart"
)
# The reasons of the tests of this module that do not run, or run differently, on the cluster driver.
EXPIRED_WINDOWS_IN_THE_CACHE = (
    "a window closes after the store's retention passed its start: only the store's cache still "
    "returns it (as Kafka's caching layer does), so the cluster run keeps the cache"
)
RESTARTS_A_DRIVER = (
    "restarts on the first driver's state directory; a second cluster driver starts on a cluster of "
    "its own, without the changelogs (the cluster case is "
    "test_emit_on_window_close_forwards_each_final_result_once_across_a_restart)"
)


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


@pytest.mark.cluster_store_cache(reason=EXPIRED_WINDOWS_IN_THE_CACHE)
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


@pytest.mark.parametrize("sliding", [False, True])
def test_on_window_close_results_carry_the_headers_of_the_record_that_closed_them(drive, sliding):
    builder = (
        _sliding_count(EmitStrategy.on_window_close())
        if sliding
        else _windowed_count(TimeWindows.of_size_and_grace(100, 0), EmitStrategy.on_window_close())
    )
    driver = drive(builder.build())
    out = driver.create_output_topic("out", S, L)
    source = driver.create_input_topic("in", S, S)
    source.pipe_input("a", "v", timestamp=10, headers=[("n", b"first")])
    # Close enough that the store still holds a's windows when they close (a jump far beyond
    # would expire them first: Kafka emits nothing then).
    source.pipe_input("b", "v", timestamp=30 if sliding else 100, headers=[("n", b"closing")])
    records = out.read_records_to_list()
    assert records and all(r.key.startswith("a@") for r in records)
    assert [r.headers for r in records] == [[("n", b"closing")]] * len(records)


@pytest.mark.cluster_store_cache(reason=EXPIRED_WINDOWS_IN_THE_CACHE)
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


def test_on_window_close_caches_as_asked_forwards_nothing_from_its_cache_and_is_never_compiled(drive):
    builder = _windowed_count(
        TimeWindows.of_size_with_no_grace(100),
        EmitStrategy.on_window_close(),
        Materialized.as_("counts").with_caching_enabled(),
    )
    topology = builder.build()
    # Kafka's WindowStoreMaterializer caches an emit-final store too; only its flushes forward nothing.
    assert topology.store_builders["counts"].caching_enabled
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


def _restartable(tmp_path, drive):  # type: ignore[no-untyped-def]
    """``run(builder, *records)``: a new driver on the same state directory (persistent stores
    survive, as a restart keeps them), fed the records, closed; returns its output."""

    def run(builder: StreamsBuilder, *records: tuple[str, int]) -> list[tuple[str, int]]:
        driver = drive(builder.build(), state_dir=str(tmp_path))
        out = driver.create_output_topic("out", S, L)
        _pipe(driver, *records)
        result = [(kv.key, kv.value) for kv in out.read_key_values_to_list()]
        driver.close()
        return result

    return run


@pytest.mark.driver_only(reason=RESTARTS_A_DRIVER)
def test_on_window_close_resumes_after_a_restart_without_repeating_final_results(drive, tmp_path):
    windows = TimeWindows.of_size_with_no_grace(100)
    strategy = EmitStrategy.on_window_close()
    run = _restartable(tmp_path, drive)
    assert run(_windowed_count(windows, strategy), ("a", 1), ("a", 2), ("b", 150)) == [("a@0", 2)]
    # Window [0, 100) is still in the store: the restart must not forward it again, nor count
    # the late record at 5 into it.
    assert run(_windowed_count(windows, strategy), ("a", 5), ("c", 160), ("a", 250)) == [
        ("b@100", 1),
        ("c@100", 1),
    ]


def test_on_window_close_keeps_its_emit_position_in_a_store_written_only_when_it_emits(drive):
    builder = _windowed_count(
        TimeWindows.of_size_with_no_grace(100), EmitStrategy.on_window_close(), Materialized.as_("counts")
    )
    topology = builder.build()
    position = topology.store_builders["counts-emit-position"]
    assert position.logging_enabled and not position.caching_enabled
    assert "(stores: [counts-emit-position, counts])" in str(topology.describe())
    driver = drive(topology)
    store = driver.get_key_value_store("counts-emit-position")
    _pipe(driver, ("a", 1), ("a", 50))
    assert store.get("counts") is None  # nothing closed yet
    _pipe(driver, ("a", 120))
    assert store.get("counts") == 120
    _pipe(driver, ("a", 130), ("a", 199))  # stream time moves on, but no window closes
    assert store.get("counts") == 120
    _pipe(driver, ("a", 200))
    assert store.get("counts") == 200


def test_emit_position_store_follows_the_window_stores_kind_and_logging():
    builder = _windowed_count(
        TimeWindows.of_size_with_no_grace(100),
        EmitStrategy.on_window_close(),
        Materialized.as_("counts").with_store_type(StoreType.IN_MEMORY).with_logging_disabled(),
    )
    position = builder.build().store_builders["counts-emit-position"]
    assert not position.supplier.persistent
    assert not position.logging_enabled
    updates = _windowed_count(TimeWindows.of_size_with_no_grace(100), EmitStrategy.on_window_update())
    assert not any(name.endswith("-emit-position") for name in updates.build().store_builders)


def _sliding_count(strategy: EmitStrategy | None) -> StreamsBuilder:
    builder = StreamsBuilder()
    windowed = (
        builder.stream("in").group_by_key().windowed_by(SlidingWindows.of_time_difference_and_grace(10, 5))
    )
    if strategy is not None:
        windowed = windowed.emit_strategy(strategy)
    windowed.count(Materialized.as_("counts")).to_stream().map(
        lambda w, n: (f"{w.key}@{w.start}-{w.end}", n)
    ).to("out", Produced.with_(S, L))
    return builder


def test_sliding_on_window_close_forwards_each_final_count_once(drive):
    driver = drive(_sliding_count(EmitStrategy.on_window_close()).build())
    out = driver.create_output_topic("out", S, L)
    _pipe(driver, ("a", 20), ("a", 25), ("a", 31))
    # Close time 26: the windows ending before it are final; [21, 31] and [26, 36] are open.
    assert out.read_key_values_to_list() == [("a@10-20", 1), ("a@15-25", 2)]
    _pipe(driver, ("b", 40))
    assert out.read_key_values_to_list() == [("a@21-31", 2)]
    _pipe(driver, ("b", 60))
    # The last update of each window under on_window_update, once.
    assert out.read_key_values_to_list() == [("a@26-36", 1), ("b@30-40", 1)]


def test_sliding_on_window_close_never_emits_windows_the_store_expired_first(drive):
    """A jump of stream time closes windows that the store (Kafka's time-ordered one) has already
    expired: Kafka emits none of them (checked on Kafka Streams 4.1.1)."""
    driver = drive(_sliding_count(EmitStrategy.on_window_close()).build())
    out = driver.create_output_topic("out", S, L)
    _pipe(driver, ("a", 20), ("a", 25), ("a", 31), ("b", 40))
    assert out.read_key_values_to_list() == [("a@10-20", 1), ("a@15-25", 2), ("a@21-31", 2)]
    # Close time 95; the store's stream time is 90 (b's window start), retention 25: [26, 36] and
    # [30, 40] have left it.
    _pipe(driver, ("b", 100))
    assert out.is_empty()
    assert [(w.key, w.start) for w, _ in driver.get_timestamped_window_store("counts").all()] == [("b", 90)]


def test_sliding_emit_strategy_is_never_cached_and_keeps_its_position():
    topology = _sliding_count(EmitStrategy.on_window_close()).build()
    assert not topology.store_builders["counts"].caching_enabled
    assert "counts-emit-position" in topology.store_builders
    assert "counts-emit-position" not in _sliding_count(None).build().store_builders


@pytest.mark.driver_only(reason=RESTARTS_A_DRIVER)
def test_sliding_on_window_close_resumes_after_a_restart_without_repeating_final_results(drive, tmp_path):
    run = _restartable(tmp_path, drive)
    strategy = EmitStrategy.on_window_close()
    assert run(_sliding_count(strategy), ("a", 20), ("a", 25), ("b", 40)) == [
        ("a@10-20", 1),
        ("a@15-25", 2),
        ("a@21-31", 1),
    ]
    # a at 22 is late after the restart too (its windows closed before it); [21, 31] went out.
    assert run(_sliding_count(strategy), ("a", 22), ("b", 60)) == [("b@30-40", 1)]


def test_sliding_emit_strategy_refuses_anything_else():
    windowed = (
        StreamsBuilder()
        .stream("in")
        .group_by_key()
        .windowed_by(SlidingWindows.of_time_difference_with_no_grace(10))
    )
    with pytest.raises(TypeError, match=r"EmitStrategy\.on_window_close"):
        windowed.emit_strategy("on_window_close")  # type: ignore[arg-type]


# -- on a cluster ----------------------------------------------------------------------------------
# Emit-on-window-close across a restart, run by KafkaStreams on both cluster adapters under
# at_least_once and exactly_once_v2: a new client whose state comes from the changelogs alone
# forwards every window's final result that the first client did not, and none that it did.


WINDOW = 10_000


def _final_counts(source: str, sink: str) -> Any:
    builder = StreamsBuilder()
    (
        builder.stream(source)
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(WINDOW))
        .emit_strategy(EmitStrategy.on_window_close())
        # Closed windows stay in the store after they are emitted: a restart must not repeat them.
        .count(Materialized.as_("counts").with_retention(6 * WINDOW))
        .to_stream()
        .map(lambda window, count: (f"{window.key}@{window.start}", count))
        .to(sink, Produced.with_(S, L))
    )
    return builder.build()


def _base() -> int:
    # Near now (within the topics' retention), aligned to a window.
    return (int(time.time() * 1000) // WINDOW) * WINDOW - 6 * WINDOW


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_emit_on_window_close_forwards_each_final_result_once_across_a_restart(
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
    base = _base()
    w0, w1, w2, w3 = base, base + WINDOW, base + 2 * WINDOW, base + 3 * WINDOW
    first = KafkaStreams(
        _final_counts(source, sink),
        client_config(tmp_path / "a", processing_guarantee=guarantee),
        cluster=cluster,
    )
    clients.append(first)
    first.start()
    for key, timestamp in [("a", w0 + 1), ("a", w0 + 2), ("b", w0 + 3), ("c", w1 + 1), ("d", w1 + 2)]:
        cluster.produce(source, key.encode(), b"v", timestamp=timestamp)
    expected_first = [(f"a@{w0}", 2, w0 + 2), (f"b@{w0}", 1, w0 + 3)]
    wait_until(lambda: counts_in(cluster, sink) == expected_first, timeout, "the first window's final counts")
    # The emit position went to its changelog with the results (only when windows were emitted).
    positions = [
        L.deserialize("", r.value)
        for r in cluster.read(f"{app_id}-counts-emit-position-changelog", "read_committed")
    ]
    assert positions == [w1 + 1]
    assert first.close(timeout=30)

    # A new client with empty local state: windows and emit position come from the changelogs.
    second = KafkaStreams(
        _final_counts(source, sink),
        client_config(tmp_path / "b", processing_guarantee=guarantee),
        cluster=cluster,
    )
    clients.append(second)
    second.start()
    cluster.produce(source, b"a", b"v", timestamp=w0 + 5)  # late: its window went out before the restart
    cluster.produce(source, b"c", b"v", timestamp=w1 + 3)
    cluster.produce(source, b"e", b"v", timestamp=w2 + 1)  # closes the second window
    expected = [*expected_first, (f"c@{w1}", 2, w1 + 3), (f"d@{w1}", 1, w1 + 2)]
    wait_until(lambda: len(counts_in(cluster, sink)) >= 4, timeout, "the second window's final counts")
    assert counts_in(cluster, sink) == expected
    cluster.produce(source, b"f", b"v", timestamp=w3 + 1)  # closes the third window
    expected.append((f"e@{w2}", 1, w2 + 1))
    wait_until(lambda: len(counts_in(cluster, sink)) >= 5, timeout, "the third window's final count")
    assert second.close(timeout=30)
    assert counts_in(cluster, sink) == expected  # nothing more at close: f's window is still open
