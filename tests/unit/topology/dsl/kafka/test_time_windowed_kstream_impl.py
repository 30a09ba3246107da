"""Apache Kafka's TimeWindowedKStreamImplTest (kstream/internals), ported: count, reduce and
aggregate of a tumbling-windowed stream (500 ms, no grace), on update and on window close, with
the store's cache on and off: outputs, timestamps and store contents.

Kafka reads each store with a key-range ``fetch("1", "2", 0, 1000)``; the ports fetch key "1" then
key "2" over the same window starts, which is the same list. Where the cache is on, Kafka's fetch
also returns windows the store underneath has already expired (the cache merges them in); without
it, only the windows the store still retains.

Not ported: the null checks of an optional argument (``Materialized``/``Named`` null): None is
Python's "not given". The null checks of the functions are ported.
"""

from __future__ import annotations

from typing import Any

import pytest

from kstreams import (
    Consumed,
    EmitStrategy,
    Grouped,
    Materialized,
    Serdes,
    StreamsBuilder,
    TimeWindows,
    Windowed,
)

pytestmark = pytest.mark.on_cluster(representative="test_count_of_windows_is_materialized")
# The cached cases read windows only the cache still holds (see the module docstring).
WINDOW_CACHE = pytest.mark.cluster_store_cache(reason="the cached cases read the cache's windows")

S = Serdes.string()
L = Serdes.long()
STRATEGIES = pytest.mark.parametrize(
    ("emit_final", "with_cache"),
    [(False, True), (False, False), (True, True), (True, False)],
    ids=["update-cached", "update-uncached", "close-cached", "close-uncached"],
)
K1_W0, K1_W1 = Windowed("1", 0, 500), Windowed("1", 500, 1000)
K2_W1, K2_W2 = Windowed("2", 500, 1000), Windowed("2", 1000, 1500)


def _windowed(builder: StreamsBuilder) -> Any:
    return (
        builder.stream("input", Consumed.with_(S, S))
        .group_by_key(Grouped.with_(S, S))
        .windowed_by(TimeWindows.of_size_with_no_grace(500))
    )


def _strategy(emit_final: bool) -> Any:
    return EmitStrategy.on_window_close() if emit_final else EmitStrategy.on_window_update()


def _cache(materialized: Any, with_cache: bool) -> Any:
    return materialized.with_caching_enabled() if with_cache else materialized.with_caching_disabled()


def _process_data(driver: Any) -> None:
    topic = driver.create_input_topic("input", S, S)
    for key, value, ts in [
        ("1", "1", 10),
        ("1", "2", 15),
        ("1", "3", 500),
        ("2", "10", 550),
        ("2", "20", 500),
        ("2", "30", 1000),
    ]:
        topic.pipe_input(key, value, ts)


def _outputs(emit_final: bool, values: list[Any]) -> list[tuple[Any, Any, int]]:
    """Kafka's outputs given the six values on update; on close, the three closed windows' last."""
    keyed = [(K1_W0, 10), (K1_W0, 15), (K1_W1, 500), (K2_W1, 550), (K2_W1, 550), (K2_W2, 1000)]
    rows = [(key, value, ts) for (key, ts), value in zip(keyed, values, strict=True)]
    return [rows[1], rows[2], rows[4]] if emit_final else rows


@STRATEGIES
def test_count_of_windows(drive, captured, emit_final, with_cache):
    """shouldCountWindowed"""
    builder = StreamsBuilder()
    _windowed(builder).emit_strategy(_strategy(emit_final)).count().to_stream().process(captured.supplier)
    _process_data(drive(builder.build()))
    assert captured.processed == _outputs(emit_final, [1, 2, 1, 1, 2, 1])


@STRATEGIES
def test_reduce_of_windows(drive, captured, emit_final, with_cache):
    """shouldReduceWindowed"""
    builder = StreamsBuilder()
    _windowed(builder).emit_strategy(_strategy(emit_final)).reduce(
        lambda v1, v2: f"{v1}+{v2}"
    ).to_stream().process(captured.supplier)
    _process_data(drive(builder.build()))
    assert captured.processed == _outputs(emit_final, ["1", "1+2", "3", "10", "10+20", "30"])


@STRATEGIES
def test_aggregate_of_windows(drive, captured, emit_final, with_cache):
    """shouldAggregateWindowed"""
    builder = StreamsBuilder()
    _windowed(builder).emit_strategy(_strategy(emit_final)).aggregate(
        lambda: "0", lambda k, v, agg: f"{agg}+{v}", _cache(Materialized.with_(S, S), with_cache)
    ).to_stream().process(captured.supplier)
    _process_data(drive(builder.build()))
    assert captured.processed == _outputs(emit_final, ["0+1", "0+1+2", "0+3", "0+10", "0+10+20", "0+30"])


def _stored(driver: Any, name: str) -> tuple[list[Any], list[Any]]:
    """The store's windows of keys "1" and "2" starting in [0, 1000]: (window, value) from the
    plain view and (window, value, timestamp) from the timestamped one."""
    plain = driver.get_window_store(name)
    stamped = driver.get_timestamped_window_store(name)
    values = [
        (Windowed(k, start, start + 500), v) for k in "12" for start, v in plain.fetch_range(k, 0, 1000)
    ]
    stamps = [
        (Windowed(k, start, start + 500), vt.value, vt.timestamp)
        for k in "12"
        for start, vt in stamped.fetch_range(k, 0, 1000)
    ]
    return values, stamps


def _expected_store(
    with_cache: bool, emit_final: bool, values: list[Any], retained: int
) -> tuple[list, list]:
    rows = list(zip([K1_W0, K1_W1, K2_W1, K2_W2], values, [15, 500, 550, 1000], strict=True))
    if not with_cache:
        rows = rows[-retained:]
    return [(w, v) for w, v, _ in rows], rows


@WINDOW_CACHE
@STRATEGIES
def test_count_of_windows_is_materialized(drive, emit_final, with_cache):
    """shouldMaterializeCount"""
    builder = StreamsBuilder()
    _windowed(builder).emit_strategy(_strategy(emit_final)).count(
        _cache(Materialized.as_("count-store").with_key_serde(S).with_value_serde(L), with_cache)
    )
    driver = drive(builder.build())
    _process_data(driver)
    # Without the cache, an emit-final store still holds the windows ending after stream time
    # minus retention (three); an emit-on-update one only the newest.
    values, stamps = _stored(driver, "count-store")
    expected = _expected_store(with_cache, emit_final, [2, 1, 2, 1], 3 if emit_final else 1)
    assert (values, [tuple(r) for r in stamps]) == (expected[0], [tuple(r) for r in expected[1]])


@WINDOW_CACHE
@STRATEGIES
def test_reduce_of_windows_is_materialized(drive, emit_final, with_cache):
    """shouldMaterializeReduced (Kafka runs it without an emit strategy)"""
    builder = StreamsBuilder()
    _windowed(builder).reduce(
        lambda v1, v2: f"{v1}+{v2}",
        _cache(Materialized.as_("reduced").with_key_serde(S).with_value_serde(S), with_cache),
    )
    driver = drive(builder.build())
    _process_data(driver)
    values, stamps = _stored(driver, "reduced")
    assert (values, stamps) == _expected_store(with_cache, False, ["1+2", "3", "10+20", "30"], 1)


@WINDOW_CACHE
@STRATEGIES
def test_aggregate_of_windows_is_materialized(drive, emit_final, with_cache):
    """shouldMaterializeAggregated (Kafka runs it without an emit strategy)"""
    builder = StreamsBuilder()
    _windowed(builder).aggregate(
        lambda: "0",
        lambda k, v, agg: f"{agg}+{v}",
        _cache(Materialized.as_("aggregated").with_key_serde(S).with_value_serde(S), with_cache),
    )
    driver = drive(builder.build())
    _process_data(driver)
    values, stamps = _stored(driver, "aggregated")
    assert (values, stamps) == _expected_store(with_cache, False, ["0+1+2", "0+3", "0+10+20", "0+30"], 1)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda w: w.aggregate(None, lambda k, v, a: a), id="aggregate-initializer"),
        pytest.param(lambda w: w.aggregate(lambda: "0", None), id="aggregate-aggregator"),
        pytest.param(lambda w: w.reduce(None), id="reduce-reducer"),
        pytest.param(
            lambda w: w.aggregate(None, lambda k, v, a: a, Materialized.as_("store")),
            id="materialized-aggregate-initializer",
        ),
        pytest.param(
            lambda w: w.aggregate(lambda: "0", None, Materialized.as_("store")),
            id="materialized-aggregate-aggregator",
        ),
        pytest.param(lambda w: w.reduce(None, Materialized.as_("store")), id="materialized-reduce-reducer"),
    ],
)
def test_a_missing_function_is_refused_when_the_topology_is_written(call):
    """shouldThrowNullPointerOnAggregateIfInitializerIsNull, ...IfAggregatorIsNull,
    shouldThrowNullPointerOnReduceIfReducerIsNull, and their Materialized forms"""
    with pytest.raises(TypeError):
        call(_windowed(StreamsBuilder()))
