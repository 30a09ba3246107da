"""Sliding-window aggregations on the test driver: the windows, aggregates and timestamps Kafka's
KStreamSlidingWindowAggregate forwards (the expected results of Kafka's own tests and docs).

The module is marked ``on_cluster``: its tests using ``drive`` run on a KafkaStreams client over an
EmbeddedCluster too (tests/unit/topology/dsl/conftest.py), and the tests at its end check on a
cluster what the driver cannot show."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from kstreams import KafkaStreams
from kstreams.serdes import Serdes
from kstreams.state.store import WindowedKey
from kstreams.state.value_and_timestamp import ValueAndTimestamp
from kstreams.topology import (
    Consumed,
    KeyValue,
    Materialized,
    Produced,
    SlidingWindowedKStream,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
    Topology,
    WindowedSerdes,
)
from kstreams.topology.compiled_ops import kernel_for_supplier
from kstreams.topology.dsl.processors.sliding_aggregate import SlidingWindowAggregateSupplier
from tests.support.clients import client_settings, wait_timeout

S = Serdes.string()
L = Serdes.long()

pytestmark = pytest.mark.on_cluster(
    representative="test_sliding_counts_survive_a_restart_that_restores_the_store"
)

# (key, window start, window end, value, timestamp) of one forwarded update
Update = tuple[str, int, int, Any, int]


def _string_adder(windows: SlidingWindows, materialized: Materialized | None = None) -> StreamsBuilder:
    """Kafka's test topology: aggregate "0" + "+v" per sliding window, results to "out"."""
    builder = StreamsBuilder()
    (
        builder.stream("in")
        .group_by_key()
        .windowed_by(windows)
        .aggregate(lambda: "0", lambda key, value, agg: f"{agg}+{value}", materialized)
        .to_stream()
        .map(lambda wk, value: KeyValue(f"{wk.key}|{wk.start}|{wk.end}", value))
        .to("out", Produced.with_(S, S))
    )
    return builder


def _run(
    drive: Any, builder: StreamsBuilder, records: list[tuple[str, str | None, int]], serde: Any = S
) -> list[Update]:
    driver = drive(builder.build())
    source = driver.create_input_topic("in", S, S)
    for key, value, timestamp in records:
        source.pipe_input(key, value, timestamp=timestamp)
    updates = []
    for record in driver.create_output_topic("out", S, serde).read_records_to_list():
        key, start, end = record.key.split("|")
        updates.append((key, int(start), int(end), record.value, record.timestamp))
    return updates


def _by_start(updates: list[Update]) -> dict[int, set[tuple[Any, int]]]:
    """Kafka's tests compare the set of (value, timestamp) forwarded per window start."""
    grouped: dict[int, set[tuple[Any, int]]] = defaultdict(set)
    for _key, start, _end, value, timestamp in updates:
        grouped[start].add((value, timestamp))
    return dict(grouped)


def _no_cache() -> Materialized:
    return Materialized.as_("sliding").with_caching_disabled()


# --- the window definition ----------------------------------------------------------------------


def test_sliding_windows_take_a_time_difference_and_a_grace():
    assert SlidingWindows.of_time_difference_with_no_grace(timedelta(seconds=5)) == SlidingWindows(5000, 0)
    windows = SlidingWindows.of_time_difference_and_grace(10, timedelta(milliseconds=3))
    assert (windows.time_difference_ms, windows.grace_period_ms()) == (10, 3)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: SlidingWindows.of_time_difference_with_no_grace(-1), "time difference must not be negative"),
        (lambda: SlidingWindows.of_time_difference_and_grace(10, -1), "grace .* must not be negative"),
        (lambda: SlidingWindows.of_time_difference_with_no_grace("10s"), "timedelta or milliseconds"),
    ],
)
def test_bad_sliding_windows_are_refused_with_the_reason(make, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make()


def test_windowed_by_refuses_what_is_not_a_window_definition():
    grouped = StreamsBuilder().stream("in").group_by_key()
    with pytest.raises(TypeError, match=r"windowed_by\(\) takes TimeWindows, SlidingWindows"):
        grouped.windowed_by(10)  # type: ignore[call-overload]
    assert isinstance(
        grouped.windowed_by(SlidingWindows.of_time_difference_with_no_grace(10)), SlidingWindowedKStream
    )


# --- Kafka's semantics --------------------------------------------------------------------------


def test_documented_example_creates_the_five_windows_of_the_javadoc(drive):
    # SlidingWindows' javadoc: difference 5000 ms, records at 8000, 9200 and 12400.
    builder = _string_adder(SlidingWindows.of_time_difference_with_no_grace(5000), _no_cache())
    updates = _run(drive, builder, [("A", "1", 8000), ("A", "2", 9200), ("A", "3", 12400)])
    assert updates == [
        ("A", 3000, 8000, "0+1", 8000),
        ("A", 8001, 13001, "0+2", 9200),  # 8000's right window, made when 9200 falls in it
        ("A", 4200, 9200, "0+1+2", 9200),
        ("A", 8001, 13001, "0+2+3", 12400),
        ("A", 9201, 14201, "0+3", 12400),  # 9200's right window, made when 12400 falls in it
        ("A", 7400, 12400, "0+1+2+3", 12400),
    ]
    final = {(start, end): value for _k, start, end, value, _ts in updates}
    assert final == {
        (3000, 8000): "0+1",
        (4200, 9200): "0+1+2",
        (7400, 12400): "0+1+2+3",
        (8001, 13001): "0+2+3",
        (9201, 14201): "0+3",
    }


def test_count_at_5_8_15_20_with_difference_10_in_forwarding_order(drive):
    builder = StreamsBuilder()
    (
        builder.stream("in")
        .group_by_key()
        .windowed_by(SlidingWindows.of_time_difference_with_no_grace(10))
        .count(_no_cache())
        .to_stream()
        .map(lambda wk, count: KeyValue(f"{wk.key}|{wk.start}|{wk.end}", count))
        .to("out", Produced.with_(S, L))
    )
    records = [("k", "a", 5), ("k", "b", 8), ("k", "c", 15), ("k", "d", 20)]
    assert _run(drive, builder, records, L) == [
        # 5 and 8 come before the difference: they share the window [0, 10]
        ("k", 0, 10, 1, 5),
        ("k", 6, 16, 1, 8),  # 5's right window, holding 8
        ("k", 0, 10, 2, 8),
        ("k", 6, 16, 2, 15),  # 15 falls in 5's right window
        ("k", 9, 19, 1, 15),  # 8's right window, holding 15
        ("k", 5, 15, 3, 15),  # 15's left window: 5, 8 and 15
        ("k", 16, 26, 1, 20),  # 15's right window, holding 20
        ("k", 10, 20, 2, 20),  # 20's left window: 15 and 20
    ]


def test_aggregate_matches_kafkas_small_input(drive):
    builder = _string_adder(SlidingWindows.of_time_difference_and_grace(10, 5), _no_cache())
    records = [("A", str(i), ts) for i, ts in enumerate([10, 10, 14, 15, 20, 22, 30], start=1)]
    assert _by_start(_run(drive, builder, records)) == {
        0: {("0+1", 10), ("0+1+2", 10)},
        4: {("0+1+2+3", 14)},
        5: {("0+1+2+3+4", 15)},
        10: {("0+1+2+3+4+5", 20)},
        11: {("0+3", 14), ("0+3+4", 15), ("0+3+4+5", 20)},
        12: {("0+3+4+5+6", 22)},
        15: {("0+4", 15), ("0+4+5", 20), ("0+4+5+6", 22)},
        16: {("0+5", 20), ("0+5+6", 22)},
        20: {("0+5+6+7", 30)},
        21: {("0+6", 22), ("0+6+7", 30)},
        23: {("0+7", 30)},
    }


def test_reduce_matches_kafkas_small_input(drive):
    builder = StreamsBuilder()
    (
        builder.stream("in")
        .group_by_key()
        .windowed_by(SlidingWindows.of_time_difference_and_grace(10, 5))
        .reduce(lambda agg, value: f"{agg}+{value}", _no_cache())
        .to_stream()
        .map(lambda wk, value: KeyValue(f"{wk.key}|{wk.start}|{wk.end}", value))
        .to("out", Produced.with_(S, S))
    )
    records = [("A", str(i), ts) for i, ts in enumerate([10, 14, 15, 22, 26, 30], start=1)]
    assert _by_start(_run(drive, builder, records)) == {
        0: {("1", 10)},
        4: {("1+2", 14)},
        5: {("1+2+3", 15)},
        11: {("2", 14), ("2+3", 15)},
        12: {("2+3+4", 22)},
        15: {("3", 15), ("3+4", 22)},
        16: {("4", 22), ("4+5", 26)},
        20: {("4+5+6", 30)},
        23: {("5", 26), ("5+6", 30)},
        27: {("6", 30)},
    }


# Kafka's testAggregateLargeInput (difference 10, grace 50): out-of-order records per key update
# the windows they would have been in and create the windows they would have created.
LARGE_INPUT = [
    ("A", "1", 10), ("A", "2", 20), ("A", "3", 22), ("A", "4", 15),
    ("B", "1", 12), ("B", "2", 13), ("B", "3", 18), ("B", "4", 19), ("B", "5", 25), ("B", "6", 14),
    ("C", "1", 11), ("C", "2", 15), ("C", "3", 16), ("C", "4", 21), ("C", "5", 23),
    ("D", "4", 11), ("D", "2", 12), ("D", "3", 29), ("D", "5", 16),
]  # fmt: skip

# (key, start, value, timestamp), sorted by key and start, each window's updates in order
LARGE_EXPECTED = [
    ("A", 0, "0+1", 10), ("A", 5, "0+1+4", 15), ("A", 10, "0+1+2", 20), ("A", 10, "0+1+2+4", 20),
    ("A", 11, "0+2", 20), ("A", 11, "0+2+4", 20), ("A", 12, "0+2+3", 22), ("A", 12, "0+2+3+4", 22),
    ("A", 16, "0+2+3", 22), ("A", 21, "0+3", 22),
    ("B", 2, "0+1", 12), ("B", 3, "0+1+2", 13), ("B", 4, "0+1+2+6", 14), ("B", 8, "0+1+2+3", 18),
    ("B", 8, "0+1+2+3+6", 18), ("B", 9, "0+1+2+3+4", 19), ("B", 9, "0+1+2+3+4+6", 19),
    ("B", 13, "0+2", 13), ("B", 13, "0+2+3", 18), ("B", 13, "0+2+3+4", 19), ("B", 13, "0+2+3+4+6", 19),
    ("B", 14, "0+3", 18), ("B", 14, "0+3+4", 19), ("B", 14, "0+3+4+6", 19), ("B", 15, "0+3+4+5", 25),
    ("B", 19, "0+4", 19), ("B", 19, "0+4+5", 25), ("B", 20, "0+5", 25),
    ("C", 1, "0+1", 11), ("C", 5, "0+1+2", 15), ("C", 6, "0+1+2+3", 16), ("C", 11, "0+1+2+3+4", 21),
    ("C", 12, "0+2", 15), ("C", 12, "0+2+3", 16), ("C", 12, "0+2+3+4", 21), ("C", 13, "0+2+3+4+5", 23),
    ("C", 16, "0+3", 16), ("C", 16, "0+3+4", 21), ("C", 16, "0+3+4+5", 23), ("C", 17, "0+4", 21),
    ("C", 17, "0+4+5", 23), ("C", 22, "0+5", 23),
    ("D", 1, "0+4", 11), ("D", 2, "0+4+2", 12), ("D", 6, "0+4+2+5", 16), ("D", 12, "0+2", 12),
    ("D", 12, "0+2+5", 16), ("D", 13, "0+5", 16), ("D", 19, "0+3", 29),
]  # fmt: skip


def test_out_of_order_records_match_kafkas_large_input(drive):
    builder = _string_adder(SlidingWindows.of_time_difference_and_grace(10, 50), _no_cache())
    updates = _run(drive, builder, LARGE_INPUT)
    assert all(end == start + 10 for _k, start, end, _v, _ts in updates)
    ordered = sorted(updates, key=lambda update: (update[0], update[1]))  # stable, as Kafka's test
    assert [(key, start, value, ts) for key, start, _end, value, ts in ordered] == LARGE_EXPECTED


def test_early_records_share_the_window_from_zero_as_kafkas_repeated_input(drive):
    builder = _string_adder(SlidingWindows.of_time_difference_and_grace(5, 0), _no_cache())
    records = [("A", str(i), ts) for i, ts in enumerate([0, 2, 4, 0, 2, 2, 0, 7], start=1)]
    assert _by_start(_run(drive, builder, records)) == {
        0: {("0+1", 0), ("0+1+2", 2), ("0+1+2+3", 4), ("0+1+2+3+4", 4), ("0+1+2+3+4+5", 4),
            ("0+1+2+3+4+5+6", 4), ("0+1+2+3+4+5+6+7", 4)},
        1: {("0+2", 2), ("0+2+3", 4), ("0+2+3+5", 4), ("0+2+3+5+6", 4)},
        2: {("0+2+3+5+6+8", 7)},
        3: {("0+3", 4), ("0+3+8", 7)},
        5: {("0+8", 7)},
    }  # fmt: skip


def test_early_out_of_order_records_match_kafkas_early_large_input(drive):
    builder = _string_adder(SlidingWindows.of_time_difference_and_grace(10, 50), _no_cache())
    records = [
        ("E", str(v), ts)
        for v, ts in [(1, 0), (3, 5), (4, 6), (2, 3), (6, 13), (5, 10), (7, 4), (8, 2), (9, 15)]
    ]
    ordered = sorted(_run(drive, builder, records), key=lambda update: update[1])
    assert [(start, value, ts) for _k, start, _end, value, ts in ordered] == [
        (0, "0+1", 0), (0, "0+1+3", 5), (0, "0+1+3+4", 6), (0, "0+1+3+4+2", 6), (0, "0+1+3+4+2+5", 10),
        (0, "0+1+3+4+2+5+7", 10), (0, "0+1+3+4+2+5+7+8", 10),
        (1, "0+3", 5), (1, "0+3+4", 6), (1, "0+3+4+2", 6), (1, "0+3+4+2+5", 10), (1, "0+3+4+2+5+7", 10),
        (1, "0+3+4+2+5+7+8", 10),
        (3, "0+3+4+2+6", 13), (3, "0+3+4+2+6+5", 13), (3, "0+3+4+2+6+5+7", 13),
        (4, "0+3+4", 6), (4, "0+3+4+6", 13), (4, "0+3+4+6+5", 13), (4, "0+3+4+6+5+7", 13),
        (5, "0+3+4+6+5", 13), (5, "0+3+4+6+5+9", 15),
        (6, "0+4", 6), (6, "0+4+6", 13), (6, "0+4+6+5", 13), (6, "0+4+6+5+9", 15),
        (7, "0+6", 13), (7, "0+6+5", 13), (7, "0+6+5+9", 15),
        (11, "0+6", 13), (11, "0+6+9", 15),
        (14, "0+9", 15),
    ]  # fmt: skip


def test_late_records_are_dropped_once_their_windows_closed(drive):
    # difference 10, grace 5: at stream time 40 the close time is 35; a record at t is dropped when
    # t + 1 + 10 <= 35, and a window update is skipped when the window ends before 35.
    builder = _string_adder(SlidingWindows.of_time_difference_and_grace(10, 5), _no_cache())
    records = [("A", "1", 20), ("A", "2", 40), ("A", "late", 24), ("A", "3", 33)]
    assert _run(drive, builder, records) == [
        ("A", 10, 20, "0+1", 20),
        ("A", 30, 40, "0+2", 40),
        # 24 + 11 <= 35: every window of the record at 24 has closed, it is dropped. 33 updates
        # 40's left window [30, 40]; its own left window [23, 33] has closed and is not made; its
        # right window [34, 44] holds 40.
        ("A", 30, 40, "0+2+3", 40),
        ("A", 34, 44, "0+2", 40),
    ]


def test_no_grace_drops_a_record_whose_windows_ended_before_stream_time(drive):
    builder = _string_adder(SlidingWindows.of_time_difference_with_no_grace(10), _no_cache())
    updates = _run(drive, builder, [("A", "1", 100), ("A", "2", 89), ("A", "3", 95)])
    # 89 + 11 <= 100: dropped. 95: its left window [85, 95] has closed; 100's left window [90, 100]
    # still takes it, and its right window [96, 106] is made from it.
    assert updates == [
        ("A", 90, 100, "0+1", 100),
        ("A", 90, 100, "0+1+3", 100),
        ("A", 96, 106, "0+1", 100),
    ]


def test_null_keys_and_values_are_skipped_even_by_count(drive):
    builder = StreamsBuilder()
    (
        builder.stream("in")
        .group_by_key()
        .windowed_by(SlidingWindows.of_time_difference_with_no_grace(10))
        .count(_no_cache())
        .to_stream()
        .map(lambda wk, count: KeyValue(f"{wk.key}|{wk.start}|{wk.end}", count))
        .to("out", Produced.with_(S, L))
    )
    records = [("k", None, 50), (None, "v", 50), ("k", "v", 60)]  # type: ignore[list-item]
    assert _run(drive, builder, records, L) == [("k", 50, 60, 1, 60)]


def test_results_with_windowed_serdes_and_the_store_holds_plain_values(drive):
    builder = StreamsBuilder()
    windowed = WindowedSerdes.time_windowed_serde_from(S, 10)
    builder.stream("in").group_by_key().windowed_by(
        SlidingWindows.of_time_difference_with_no_grace(10)
    ).count(Materialized.as_("sliding-counts")).to_stream().to("out", Produced.with_(windowed, L))
    driver = drive(builder.build())
    source = driver.create_input_topic("in", S, S)
    source.pipe_input("a", "x", timestamp=100)
    source.pipe_input("a", "y", timestamp=105)
    output = driver.create_output_topic("out", windowed, L).read_records_to_list()
    # The driver commits after each record: the cache forwards each window's newest count.
    assert [(r.key, r.value, r.timestamp) for r in output] == [
        (WindowedKey("a", 90, 100), 1, 100),
        (WindowedKey("a", 101, 111), 1, 105),
        (WindowedKey("a", 95, 105), 2, 105),
    ]
    store = driver.get_window_store("sliding-counts")
    assert store.fetch("a", 95) == 2
    assert sorted(store.all()) == [
        (WindowedKey("a", 90, 100), 1),
        (WindowedKey("a", 95, 105), 2),
        (WindowedKey("a", 101, 111), 1),
    ]


def test_caching_forwards_each_windows_newest_aggregate_at_commit(drive):
    builder = _string_adder(
        SlidingWindows.of_time_difference_with_no_grace(10), Materialized.as_("cached").with_caching_enabled()
    )
    updates = _run(drive, builder, [("A", "1", 20), ("A", "2", 25), ("A", "3", 22)])
    final = {(start, end): (value, ts) for _k, start, end, value, ts in updates}
    # No grace: 22's own left window [12, 22] ended before stream time 25 and is never made.
    assert final == {
        (10, 20): ("0+1", 20),
        (15, 25): ("0+1+2+3", 25),
        (21, 31): ("0+2+3", 25),
        (23, 33): ("0+2", 25),
    }


# --- topology: stores, names, describe(), the batch compiler --------------------------------------


def test_store_keeps_twice_the_difference_plus_grace_with_windows_of_the_difference():
    builder = StreamsBuilder()
    grouped = builder.stream("in").group_by_key()
    grouped.windowed_by(SlidingWindows.of_time_difference_and_grace(100, 20)).count(Materialized.as_("a"))
    grouped.windowed_by(SlidingWindows.of_time_difference_and_grace(100, 20)).count(
        Materialized.as_("b").with_retention(5000)
    )
    stores = builder.build().store_builders
    assert (stores["a"].retention_ms, stores["a"].supplier.window_size_ms) == (220, 100)
    assert stores["b"].retention_ms == 5000
    assert stores["a"].timestamped
    with pytest.raises(ValueError, match="2 \\* time difference plus grace"):
        grouped.windowed_by(SlidingWindows.of_time_difference_and_grace(100, 20)).count(
            Materialized.as_("c").with_retention(219)
        )


def test_describe_shows_kafkas_names_for_the_aggregation_and_its_store():
    builder = StreamsBuilder()
    windowed = (
        builder.stream("in").group_by_key().windowed_by(SlidingWindows.of_time_difference_with_no_grace(10))
    )
    windowed.count().to_stream().to("counts")
    windowed.reduce(lambda a, b: a + b).to_stream().to("sums")
    text = str(builder.build().describe())
    assert (
        "Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])" in text
    )
    assert "Processor: KSTREAM-REDUCE-0000000006 (stores: [KSTREAM-REDUCE-STATE-STORE-0000000005])" in text
    assert "[count]" not in text and "windowed-count" not in text  # no batch kernel label


def test_the_batch_compiler_does_not_take_sliding_windows_for_time_windows():
    builder = StreamsBuilder()
    grouped = builder.stream("in").group_by_key()
    grouped.windowed_by(SlidingWindows.of_time_difference_with_no_grace(10)).count(Materialized.as_("s"))
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(10)).count(Materialized.as_("t"))
    suppliers = {
        getattr(node.supplier, "store_name", None): node.supplier
        for node in builder.build().nodes.values()
        if hasattr(node, "supplier")
    }
    assert isinstance(suppliers["s"], SlidingWindowAggregateSupplier)
    assert suppliers["s"].kind == "count" and suppliers["s"].windows == SlidingWindows(10, 0)
    assert kernel_for_supplier(suppliers["s"]) is None  # runs record by record
    assert kernel_for_supplier(suppliers["t"]) is not None


@pytest.mark.driver_only(reason="reads the compiled steps of the driver's task")
def test_a_compiled_segment_hands_records_to_the_sliding_aggregation_one_by_one(drive):
    from kstreams.predicates import json_field
    from kstreams.processing.compiled.stateless_steps import FilterStep
    from kstreams.processing.compiled.steps import BoundaryStep

    def topology() -> Any:
        builder = StreamsBuilder()
        (
            builder.stream("in", Consumed.with_(S, Serdes.json()))
            .filter(json_field("bot").eq(False))  # a kernel: the source's batches are compiled
            .group_by_key()
            .windowed_by(SlidingWindows.of_time_difference_and_grace(10, 100))
            .count(_no_cache())
            .to_stream()
            .map(lambda wk, count: KeyValue(f"{wk.key}|{wk.start}|{wk.end}", count))
            .to("out", Produced.with_(S, L))
        )
        return builder.build()

    def run(**config: Any) -> tuple[list[Update], list[Any]]:
        driver = drive(topology(), **config)
        source = driver.create_input_topic("in", S, Serdes.json())
        for i, timestamp in enumerate([30, 35, 22, 31, 50, 29, 45]):
            source.pipe_input("k" if i % 3 else "j", {"bot": i == 4}, timestamp=timestamp)
        output = driver.create_output_topic("out", S, L).read_records_to_list()
        steps = [
            step
            for task in driver._tasks.values()
            for seg in task.compiled_segments.values()
            for step in seg.steps()
        ]
        updates = [(*r.key.split("|"), r.value, r.timestamp) for r in output]
        return updates, steps

    compiled, steps = run()
    per_record, no_steps = run(processing_compiled=False)
    assert [type(step) for step in steps] == [FilterStep, BoundaryStep]
    assert isinstance(steps[1].node.supplier, SlidingWindowAggregateSupplier)
    assert not no_steps
    assert compiled == per_record
    assert len(compiled) > 7


# -- on a cluster ----------------------------------------------------------------------------------
# Sliding-window aggregations run by KafkaStreams on both cluster adapters: the results, their
# timestamps, interactive queries, and a restart on a new state directory that restores the window
# store (aggregates and their timestamps) from its changelog.


DIFFERENCE = 10_000


WINDOWED = WindowedSerdes.time_windowed_serde_from(S, DIFFERENCE)


def _topology(source: str, sink: str) -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream(source)
        .group_by_key()
        .windowed_by(SlidingWindows.of_time_difference_and_grace(DIFFERENCE, 60_000))
        .count(Materialized.as_("sliding-counts"))
        .to_stream()
        .to(sink, Produced.with_(WINDOWED, L))
    )
    return builder.build()


def _client(cluster: Any, app_id: str, topology: Topology, state_dir: Path) -> KafkaStreams:
    return KafkaStreams(topology, client_settings(cluster, app_id, state_dir), cluster=cluster)


def _latest(cluster: Any, sink: str, base: int) -> dict[tuple[str, int, int], tuple[int, int]]:
    """Each window's newest (count, timestamp), windows relative to ``base``."""
    latest: dict[tuple[str, int, int], tuple[int, int]] = {}
    for record in cluster.read(sink):
        window = WINDOWED.deserialize(sink, record.key)
        count = L.deserialize(sink, record.value)
        latest[(window.key, window.start - base, window.end - base)] = (count, record.timestamp - base)
    return latest


def test_sliding_counts_survive_a_restart_that_restores_the_store(
    cluster: Any,
    app_id: str,
    tmp_path: Path,
    clients: list[KafkaStreams],
    wait_until: Callable[..., None],
) -> None:
    source, sink = f"{app_id}-in", f"{app_id}-out"
    cluster.create_topic(source, 2)
    cluster.create_topic(sink, 2)
    timeout = wait_timeout(cluster)
    # Recent timestamps, so a broker's time-based retention keeps every record.
    base = (int(time.time() * 1000) - 120_000) // 1000 * 1000

    first = _client(cluster, app_id, _topology(source, sink), tmp_path / "first")
    clients.append(first)
    first.start()
    for key, offset in [("k1", 0), ("k2", 1000), ("k1", 3000)]:
        cluster.produce(source, key.encode(), b"v", timestamp=base + offset)
    expected = {
        ("k1", -10_000, 0): (1, 0),
        ("k2", -9_000, 1000): (1, 1000),
        ("k1", 1, 10_001): (1, 3000),  # 0's right window, made when 3000 falls in it
        ("k1", -7_000, 3000): (2, 3000),
    }
    wait_until(lambda: _latest(cluster, sink, base) == expected, timeout, "the first sliding counts")

    wait_until(lambda: first.state is KafkaStreams.State.RUNNING, timeout, "the first client RUNNING")
    store = first.store("sliding-counts")
    assert store.fetch("k1", base - 7_000) == 2  # plain values for interactive queries
    assert list(store.fetch_range("k1", base - 10_000, base + 1)) == [
        (base - 10_000, 1),
        (base - 7_000, 2),
        (base + 1, 1),
    ]
    stamped = first.store("sliding-counts", timestamped=True)
    assert stamped.fetch("k1", base - 7_000) == ValueAndTimestamp(2, base + 3000)
    assert first.close(timeout=30)

    # A new state directory: the successor restores the window store from its changelog.
    second = _client(cluster, app_id, _topology(source, sink), tmp_path / "second")
    clients.append(second)
    second.start()
    # Out of order: the record at 2000 needs the restored aggregates and their timestamps (its right
    # window is made only because the restored window [1, 10001] holds a record after it, at 3000).
    cluster.produce(source, b"k1", b"v", timestamp=base + 2000)
    expected.update(
        {
            ("k1", 1, 10_001): (2, 3000),
            ("k1", -7_000, 3000): (3, 3000),
            ("k1", -8_000, 2000): (2, 2000),
            ("k1", 2001, 12_001): (1, 3000),
        }
    )
    wait_until(lambda: _latest(cluster, sink, base) == expected, timeout, "the counts after restoring")
    wait_until(lambda: second.state is KafkaStreams.State.RUNNING, timeout, "the second client RUNNING")
    assert sorted(second.store("sliding-counts").fetch_all(base - 20_000, base + 20_000)) == sorted(
        [
            (WindowedKey("k1", base + start, base + end), count)
            for (key, start, end), (count, _ts) in expected.items()
            if key == "k1"
        ]
        + [(WindowedKey("k2", base - 9_000, base + 1000), 1)]
    )
