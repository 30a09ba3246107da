"""Apache Kafka's KStreamWindowAggregateTest (kstream/internals), ported: hopping-window
aggregation, emitting on update and on window close, with the store's cache on and off: outputs,
timestamps, and the records dropped as late.

Not ported: ``testJoin`` (a join of two windowed tables, issue 44 item 10, in another helper's
hands); ``shouldNotEmitFinalIfNotProgressEnough``, ``shouldEmitWithInterval0``,
``shouldEmitWithLargeInterval``, ``shouldEmitFromLastEmitTime`` and the other cases that drive
Kafka's processor with a mock context and its internal emit-interval config; the metric and log
lines of the ``shouldLogAndMeter...`` cases (their outputs are ported).
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

pytestmark = pytest.mark.on_cluster(
    representative="test_hopping_window_aggregate_updates_every_window_a_record_falls_in"
)

S = Serdes.string()
STRATEGIES = pytest.mark.parametrize(
    ("emit_final", "with_cache"),
    [(False, True), (False, False), (True, True), (True, False)],
    ids=["update-cached", "update-uncached", "close-cached", "close-uncached"],
)


def _materialized(name: str, with_cache: bool) -> Any:
    materialized = Materialized.as_(name).with_value_serde(S)
    return materialized.with_caching_enabled() if with_cache else materialized.with_caching_disabled()


def _strategy(emit_final: bool) -> Any:
    return EmitStrategy.on_window_close() if emit_final else EmitStrategy.on_window_update()


def _init() -> str:
    return "0"


def _adder(key: Any, value: Any, aggregate: str) -> str:
    return f"{aggregate}+{value}"


def _windowed_rows(driver: Any) -> list[tuple[str, Any, int]]:
    """The output topic's records, their keys written as Kafka's ``Windowed.toString``."""
    out = driver.create_output_topic("output", S, S)
    return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def _to_output_as_strings(table: Any) -> None:
    table.to_stream().map(lambda k, v: (f"[{k.key}@{k.start}/{k.end}]", v)).to("output")


AGG_BASIC_INPUT = [
    ("A", "1", 0), ("B", "2", 1), ("C", "3", 2), ("D", "4", 3), ("A", "1", 4),
    ("A", "1", 5), ("B", "2", 6), ("D", "4", 7), ("B", "2", 8), ("C", "3", 9),
    ("A", "1", 10), ("B", "2", 11), ("D", "4", 12), ("B", "2", 13), ("C", "3", 14),
    ("B", "1", 3), ("B", "2", 2), ("B", "3", 9),
]  # fmt: skip
AGG_BASIC_OUTPUT = [
    ("A", 0, "0+1", 0), ("B", 0, "0+2", 1), ("C", 0, "0+3", 2), ("D", 0, "0+4", 3),
    ("A", 0, "0+1+1", 4), ("A", 0, "0+1+1+1", 5), ("A", 5, "0+1", 5), ("B", 0, "0+2+2", 6),
    ("B", 5, "0+2", 6), ("D", 0, "0+4+4", 7), ("D", 5, "0+4", 7), ("B", 0, "0+2+2+2", 8),
    ("B", 5, "0+2+2", 8), ("C", 0, "0+3+3", 9), ("C", 5, "0+3", 9), ("A", 5, "0+1+1", 10),
    ("A", 10, "0+1", 10), ("B", 5, "0+2+2+2", 11), ("B", 10, "0+2", 11), ("D", 5, "0+4+4", 12),
    ("D", 10, "0+4", 12), ("B", 5, "0+2+2+2+2", 13), ("B", 10, "0+2+2", 13), ("C", 5, "0+3+3", 14),
    ("C", 10, "0+3", 14), ("B", 0, "0+2+2+2+1", 8), ("B", 0, "0+2+2+2+1+2", 8),
    ("B", 0, "0+2+2+2+1+2+3", 9), ("B", 5, "0+2+2+2+2+3", 13),
]  # fmt: skip


@STRATEGIES
def test_hopping_window_aggregate_updates_every_window_a_record_falls_in(
    drive, captured, emit_final, with_cache
):
    """testAggBasic"""
    builder = StreamsBuilder()
    builder.stream("topic1", Consumed.with_(S, S)).group_by_key(Grouped.with_(S, S)).windowed_by(
        TimeWindows.of_size_and_grace(10, 100).advance_by(5)
    ).emit_strategy(_strategy(emit_final)).aggregate(
        _init, _adder, _materialized("topic1-Canonized", with_cache)
    ).to_stream().process(captured.supplier)
    topic = drive(builder.build()).create_input_topic("topic1", S, S)
    for key, value, ts in AGG_BASIC_INPUT:
        topic.pipe_input(key, value, ts)
    if emit_final:  # grace is 100: no window closes
        assert captured.processed == []
    else:
        assert captured.processed == [
            (Windowed(key, start, start + 10), value, ts) for key, start, value, ts in AGG_BASIC_OUTPUT
        ]


@STRATEGIES
def test_window_aggregate_drops_a_record_with_a_null_key(drive, emit_final, with_cache):
    """shouldLogAndMeterWhenSkippingNullKey (its observable part: nothing is stored)"""
    builder = StreamsBuilder()
    builder.stream("topic", Consumed.with_(S, S)).group_by_key(Grouped.with_(S, S)).windowed_by(
        TimeWindows.of_size_with_no_grace(10).advance_by(5)
    ).emit_strategy(_strategy(emit_final)).aggregate(
        _init, _adder, _materialized("topic1-Canonicalized", with_cache)
    )
    driver = drive(builder.build())
    driver.create_input_topic("topic", S, S).pipe_input(None, "1", 0)
    assert list(driver.get_window_store("topic1-Canonicalized").fetch_all(0, 100)) == []


def _late_records_case(
    drive: Any, emit_final: bool, with_cache: bool, advance: int, retention: int | None
) -> Any:
    materialized = _materialized("topic1-Canonicalized", with_cache).with_logging_disabled()
    if retention is not None:
        materialized = materialized.with_retention(retention)
    builder = StreamsBuilder()
    table = (
        builder.stream("topic", Consumed.with_(S, S))
        .group_by_key(Grouped.with_(S, S))
        .windowed_by(TimeWindows.of_size_and_grace(10, 90).advance_by(advance))
        .emit_strategy(_strategy(emit_final))
        .aggregate(lambda: "", lambda key, value, agg: f"{agg}+{value}", materialized)
    )
    _to_output_as_strings(table)
    return drive(builder.build())


@STRATEGIES
def test_window_aggregate_drops_records_of_expired_windows(drive, emit_final, with_cache):
    """shouldLogAndMeterWhenSkippingExpiredWindow (its outputs)"""
    driver = _late_records_case(drive, emit_final, with_cache, advance=5, retention=100)
    topic = driver.create_input_topic("topic", S, S)
    for ts in (100, 0, 1, 2, 3, 4, 5, 6, 105, 106):
        topic.pipe_input("k", str(ts), ts)
    if emit_final:  # window [5,15) closes at 105
        assert _windowed_rows(driver) == [("[k@5/15]", "+5+6", 6)]
    else:
        assert _windowed_rows(driver) == [
            ("[k@95/105]", "+100", 100),
            ("[k@100/110]", "+100", 100),
            ("[k@5/15]", "+5", 5),
            ("[k@5/15]", "+5+6", 6),
            ("[k@100/110]", "+100+105", 105),
            ("[k@105/115]", "+105", 105),
            ("[k@100/110]", "+100+105+106", 106),
            ("[k@105/115]", "+105+106", 106),
        ]


@pytest.mark.parametrize("with_cache", [True, False], ids=["cached", "uncached"])
def test_window_aggregate_drops_records_past_the_grace_period(drive, with_cache):
    """shouldLogAndMeterWhenSkippingExpiredWindowByGrace (its outputs; Kafka checks them on update only)"""
    driver = _late_records_case(drive, False, with_cache, advance=10, retention=None)
    topic = driver.create_input_topic("topic", S, S)
    for value, ts in [
        ("100", 200),
        ("0", 100),
        ("1", 101),
        ("2", 102),
        ("3", 103),
        ("4", 104),
        ("5", 105),
        ("6", 6),
    ]:
        topic.pipe_input("k", value, ts)
    assert _windowed_rows(driver) == [("[k@200/210]", "+100", 200)]
