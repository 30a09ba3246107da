"""What a windowed aggregation has forwarded and written when its function raises (differences 12).

Kafka's processors call the functions at fixed points, and what happened before a raise stays
done: a session aggregation merges (the merger; a reduce's reducer between two sessions) before it
writes anything, then removes the merged sessions (forwarding their tombstones), then calls the
aggregator on the record's value, then writes the new session; an aggregation that emits on window
close emits after the record's writes. So a raising merger leaves everything untouched, a raising
aggregator leaves the merged sessions removed and their tombstones sent, and a raising aggregator
emits no final result. Every expected value here was taken from Kafka Streams 4.1.1's
TopologyTestDriver with the same topology; a ``foreach`` at the end sees each record as it is
forwarded (Kafka's driver shows a failing record's outputs in its output topics only later).
"""

from __future__ import annotations

from typing import Any

import pytest

from kstreams import (
    Consumed,
    EmitStrategy,
    Materialized,
    Serdes,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
)

S = Serdes.string()


def _aggregator(key: Any, value: str, aggregate: str) -> str:
    if value == "boom":
        raise RuntimeError("boom")
    return aggregate + value


def _merger(key: Any, one: str, two: str) -> str:
    if "boom" in one + two:
        raise RuntimeError("boom in the merger")
    return one + two


def _reducer(aggregate: str, value: str) -> str:
    if "boom" in aggregate:
        raise RuntimeError("boom in the reducer")
    return f"{aggregate}+{value}"


def _seen_and_driver(drive: Any, table: Any, builder: StreamsBuilder) -> tuple[list[str], Any, Any]:
    seen: list[str] = []
    table.to_stream().foreach(lambda w, v: seen.append(f"{w.key}@{w.start}/{w.end}={v}"))
    driver = drive(builder.build(), statestore_cache_max_bytes=0)
    return seen, driver, driver.create_input_topic("in", S, S)


def _stored_sessions(driver: Any, key: str) -> list[tuple[int, int, Any]]:
    return [(w.start, w.end, v) for w, v in driver.get_session_store("st").fetch(key)]


def _sessions(builder: StreamsBuilder, grace: int) -> Any:
    return (
        builder.stream("in", Consumed.with_(S, S))
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, grace))
    )


@pytest.mark.parametrize("kind", ["aggregate", "reduce"])
def test_a_merge_that_raises_writes_and_forwards_nothing(drive, kind):
    builder = StreamsBuilder()
    windowed = _sessions(builder, 100)
    materialized = Materialized.as_("st").with_value_serde(S).with_caching_disabled()
    if kind == "aggregate":
        table = windowed.aggregate(lambda: "", lambda k, v, agg: agg + v, _merger, materialized)
    else:
        table = windowed.reduce(_reducer, materialized)
    seen, driver, source = _seen_and_driver(drive, table, builder)
    source.pipe_input("a", "boom", 1)
    source.pipe_input("a", "q", 10)
    assert seen == ["a@1/1=boom", "a@10/10=q"]
    # z@5 bridges both sessions: merging them raises before anything is removed or forwarded
    with pytest.raises(Exception, match="boom"):
        source.pipe_input("a", "z", 5)
    assert seen == ["a@1/1=boom", "a@10/10=q"]
    assert _stored_sessions(driver, "a") == [(1, 1, "boom"), (10, 10, "q")]


@pytest.mark.parametrize("kind", ["aggregate", "reduce"])
def test_an_aggregator_that_raises_has_removed_the_merged_session(drive, kind):
    builder = StreamsBuilder()
    windowed = _sessions(builder, 100)
    materialized = Materialized.as_("st").with_value_serde(S).with_caching_disabled()
    if kind == "aggregate":
        table = windowed.aggregate(lambda: "", _aggregator, _merger, materialized)
    else:
        table = windowed.reduce(lambda agg, v: _aggregator(None, v, agg), materialized)
    seen, driver, source = _seen_and_driver(drive, table, builder)
    source.pipe_input("a", "x", 1)
    with pytest.raises(Exception, match="boom"):
        source.pipe_input("a", "boom", 3)
    # as Kafka: the session the record extends is removed and its tombstone forwarded before the
    # aggregator runs; the new session is never written
    assert seen == ["a@1/1=x", "a@1/1=None"]
    assert _stored_sessions(driver, "a") == []


def _emitting_on_close(builder: StreamsBuilder, windows: str) -> Any:
    grouped = builder.stream("in", Consumed.with_(S, S)).group_by_key()
    materialized = Materialized.as_("st").with_value_serde(S).with_caching_disabled()
    if windows == "session":
        windowed = grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 0))
        return windowed.emit_strategy(EmitStrategy.on_window_close()).aggregate(
            lambda: "", _aggregator, _merger, materialized
        )
    if windows == "time":
        windowed = grouped.windowed_by(TimeWindows.of_size_with_no_grace(5))
    else:
        windowed = grouped.windowed_by(SlidingWindows.of_time_difference_with_no_grace(5))
    return windowed.emit_strategy(EmitStrategy.on_window_close()).aggregate(
        lambda: "", _aggregator, materialized
    )


# What the record after the failing one emits: the session was still in the store; the windows
# had left theirs (the store's stream time is 30 then, its retention 5 or 10 ms).
AFTER_THE_FAILURE = {"session": ["a@1/1=x"], "time": [], "sliding": []}


@pytest.mark.parametrize("windows", sorted(AFTER_THE_FAILURE))
def test_an_aggregator_that_raises_emits_no_final_result(drive, windows):
    builder = StreamsBuilder()
    seen, _, source = _seen_and_driver(drive, _emitting_on_close(builder, windows), builder)
    source.pipe_input("a", "x", 1)
    # b@30 closes a's window or session, but its aggregator raises before Kafka emits
    with pytest.raises(Exception, match="boom"):
        source.pipe_input("b", "boom", 30)
    assert seen == []
    source.pipe_input("c", "y", 31)
    assert seen == AFTER_THE_FAILURE[windows]
