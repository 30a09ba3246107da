"""Apache Kafka's SessionWindowedKStreamImplTest (kstream/internals), ported: count, reduce and
aggregate of a session-windowed stream (gap 500 ms, no grace), emitting on update and on window
close, their outputs and their stores.

Kafka reads each store with a key-range ``fetch("1", "2")``; kstreams' session stores fetch one key
at a time, so the ports read "1" then "2", which is the same list.

Not ported: the "headers" store format (``dsl.store.format``, newer than Kafka Streams 4.1.1);
``shouldNotEnableCachingWithEmitFinal`` (it checks the store's wrapper classes); the null checks of
an optional argument (``Materialized``/``Named`` null): None is Python's "not given", so kstreams
takes it as the overload without that argument. The null checks of the functions are ported.
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
    SessionWindows,
    StreamsBuilder,
    Windowed,
)

pytestmark = pytest.mark.on_cluster(
    representative="test_count_of_sessions_merges_and_deletes_the_merged_sessions"
)
# Kafka's expected stores hold what the default record cache holds (the merged session, which the
# store under the cache no longer has).
SESSION_CACHE = pytest.mark.cluster_store_cache(reason="the expected store contents are the cache's")

S = Serdes.string()
STRATEGIES = pytest.mark.parametrize("emit_final", [False, True], ids=["on-update", "on-close"])


def _init() -> str:
    return "0"


def _adder(key: Any, value: Any, aggregate: str) -> str:
    return f"{aggregate}+{value}"


def _merger(key: Any, one: str, two: str) -> str:
    return f"{one}+{two}"


def _reducer(value1: str, value2: str) -> str:
    return f"{value1}+{value2}"


def _windowed(builder: StreamsBuilder, emit_final: bool) -> Any:
    strategy = EmitStrategy.on_window_close() if emit_final else EmitStrategy.on_window_update()
    return (
        builder.stream("input", Consumed.with_(S, S))
        .group_by_key(Grouped.with_(S, S))
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(500))
        .emit_strategy(strategy)
    )


def _process_data(driver: Any) -> None:
    topic = driver.create_input_topic("input", S, S)
    for key, value, ts in [("1", "1", 10), ("1", "2", 15), ("1", "3", 600), ("2", "1", 600), ("2", "2", 599)]:
        topic.pipe_input(key, value, ts)


def _session_store(driver: Any, name: str) -> list[tuple[Any, Any]]:
    store = driver.get_session_store(name)
    return [(windowed, value) for key in ("1", "2") for windowed, value in store.fetch(key)]


def _expected(emit_final: bool, values: list[Any]) -> list[tuple[Any, Any, int]]:
    """Kafka's outputs for the test's five records, given the seven values on update (the final
    one of session 1@[10,15] is the only one on close: the later records close it)."""
    windows = [
        ("1", 10, 10),
        ("1", 10, 10),
        ("1", 10, 15),
        ("1", 600, 600),
        ("2", 600, 600),
        ("2", 600, 600),
        ("2", 599, 600),
    ]
    rows = [(Windowed(*window), value, window[2]) for window, value in zip(windows, values, strict=True)]
    return [rows[2]] if emit_final else rows


@STRATEGIES
@pytest.mark.parametrize("cache", [0, None], ids=["cache-off", "cache-on"])
def test_count_of_sessions_merges_and_deletes_the_merged_sessions(drive, captured, emit_final, cache):
    """shouldCountSessionWindowedWithCachingDisabled, shouldCountSessionWindowedWithCachingEnabled"""
    builder = StreamsBuilder()
    _windowed(builder, emit_final).count().to_stream().process(captured.supplier)
    config = {} if cache is None else {"statestore_cache_max_bytes": cache}
    _process_data(drive(builder.build(), **config))
    assert captured.processed == _expected(emit_final, [1, None, 2, 1, 1, None, 2])


@STRATEGIES
def test_reduce_of_sessions(drive, captured, emit_final):
    """shouldReduceWindowed"""
    builder = StreamsBuilder()
    _windowed(builder, emit_final).reduce(_reducer).to_stream().process(captured.supplier)
    _process_data(drive(builder.build()))
    assert captured.processed == _expected(emit_final, ["1", None, "1+2", "3", "1", None, "1+2"])


@STRATEGIES
def test_aggregate_of_sessions_merges_aggregates(drive, captured, emit_final):
    """shouldAggregateSessionWindowed"""
    builder = StreamsBuilder()
    _windowed(builder, emit_final).aggregate(
        _init, _adder, _merger, Materialized.with_(S, S)
    ).to_stream().process(captured.supplier)
    _process_data(drive(builder.build()))
    values = ["0+1", None, "0+0+1+2", "0+3", "0+1", None, "0+0+1+2"]
    assert captured.processed == _expected(emit_final, values)


def _stored(emit_final: bool, values: list[Any]) -> list[tuple[Any, Any]]:
    windows = [Windowed("1", 10, 15), Windowed("1", 600, 600), Windowed("2", 599, 600)]
    rows = list(zip(windows, values, strict=True))
    # On close, Kafka's store of an emit-final aggregation has dropped the closed session.
    return rows[1:] if emit_final else rows


@SESSION_CACHE
@STRATEGIES
def test_count_of_sessions_is_materialized(drive, emit_final):
    """shouldMaterializeCount"""
    builder = StreamsBuilder()
    _windowed(builder, emit_final).count(Materialized.as_("count-store"))
    driver = drive(builder.build())
    _process_data(driver)
    assert _session_store(driver, "count-store") == _stored(emit_final, [2, 1, 2])


@SESSION_CACHE
@STRATEGIES
def test_reduce_of_sessions_is_materialized(drive, emit_final):
    """shouldMaterializeReduced"""
    builder = StreamsBuilder()
    _windowed(builder, emit_final).reduce(_reducer, Materialized.as_("reduced"))
    driver = drive(builder.build())
    _process_data(driver)
    assert _session_store(driver, "reduced") == _stored(emit_final, ["1+2", "3", "1+2"])


@SESSION_CACHE
@STRATEGIES
def test_aggregate_of_sessions_is_materialized(drive, emit_final):
    """shouldMaterializeAggregated"""
    builder = StreamsBuilder()
    _windowed(builder, emit_final).aggregate(
        _init, _adder, _merger, Materialized.as_("aggregated").with_value_serde(S)
    )
    driver = drive(builder.build())
    _process_data(driver)
    assert _session_store(driver, "aggregated") == _stored(emit_final, ["0+0+1+2", "0+3", "0+0+1+2"])


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda s: s.aggregate(None, _adder, _merger), id="aggregate-initializer"),
        pytest.param(lambda s: s.aggregate(_init, None, _merger), id="aggregate-aggregator"),
        pytest.param(lambda s: s.aggregate(_init, _adder, None), id="aggregate-merger"),
        pytest.param(lambda s: s.reduce(None), id="reduce-reducer"),
        pytest.param(
            lambda s: s.aggregate(None, _adder, _merger, Materialized.as_("store")),
            id="materialized-aggregate-initializer",
        ),
        pytest.param(
            lambda s: s.aggregate(_init, None, _merger, Materialized.as_("store")),
            id="materialized-aggregate-aggregator",
        ),
        pytest.param(
            lambda s: s.aggregate(_init, _adder, None, Materialized.as_("store")),
            id="materialized-aggregate-merger",
        ),
        pytest.param(lambda s: s.reduce(None, Materialized.as_("store")), id="materialized-reduce-reducer"),
    ],
)
def test_a_missing_function_is_refused_when_the_topology_is_written(call):
    """shouldThrowNullPointerOnAggregateIfInitializerIsNull, ...IfAggregatorIsNull,
    ...IfMergerIsNull, shouldThrowNullPointerOnReduceIfReducerIsNull, and their Materialized
    forms (shouldThrowNullPointerOnMaterialized{Aggregate,Reduce}If...IsNull)"""
    with pytest.raises(TypeError):
        call(_windowed(StreamsBuilder(), emit_final=False))
