"""Apache Kafka's SuppressScenarioTest (kstream/internals), ported: ``suppress`` on a table (a time
limit of zero or more, a record or byte bound that emits early when full) and on time-, sliding-
and session-windowed tables (final results when the window closes), each beside the unsuppressed
output; suppress before a ``group_by`` and on either side of a table-table join; after a cogrouped
windowed aggregate. Caching is off where Kafka turns it off.

Kafka's ``Long.MAX_VALUE`` time limit is given here in milliseconds as ``2**63 - 1``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from kstreams import (
    BufferConfig,
    Consumed,
    Grouped,
    KeyValue,
    Materialized,
    Named,
    Produced,
    Serdes,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
)

pytestmark = pytest.mark.on_cluster(representative="test_time_windows_emit_final_results_when_they_close")

S = Serdes.string()
L = Serdes.long()
MS = timedelta(milliseconds=1)
LONG_MAX = 2**63 - 1


def _drain(driver: Any, topic: str, value_serde: Any = L) -> list[tuple[Any, Any, int]]:
    return [
        (r.key, r.value, r.timestamp)
        for r in driver.create_output_topic(topic, S, value_serde).read_records_to_list()
    ]


def _value_counts(suppressed: Suppressed, count_store: Any = None) -> Any:
    """Kafka's table of how many keys hold each value, written raw to ``output-raw`` and through
    ``suppressed`` to ``output-suppressed``."""
    builder = StreamsBuilder()
    counts = (
        builder.table(
            "input",
            Consumed.with_(S, S),
            Materialized.with_(S, S).with_caching_disabled().with_logging_disabled(),
        )
        .group_by(lambda k, v: KeyValue(v, k), Grouped.with_(S, S))
        .count(*([count_store] if count_store is not None else []))
    )
    counts.suppress(suppressed).to_stream().to("output-suppressed", Produced.with_(S, L))
    counts.to_stream().to("output-raw", Produced.with_(S, L))
    return builder.build()


FIRST_THREE_RAW = [("v1", 1, 0), ("v1", 0, 1), ("v2", 1, 1), ("v1", 1, 2)]


def _pipe_first_three(topic: Any) -> None:
    for key, value, ts in [("k1", "v1", 0), ("k1", "v2", 1), ("k2", "v1", 2)]:
        topic.pipe_input(key, value, ts)


def test_time_limit_zero_emits_every_update_at_once(drive):
    """shouldImmediatelyEmitEventsWithZeroEmitAfter"""
    driver = drive(_value_counts(Suppressed.until_time_limit(0 * MS, BufferConfig.unbounded())))
    topic = driver.create_input_topic("input", S, S)
    _pipe_first_three(topic)
    assert _drain(driver, "output-raw") == FIRST_THREE_RAW
    assert _drain(driver, "output-suppressed") == FIRST_THREE_RAW
    topic.pipe_input("x", "x", 3)
    assert _drain(driver, "output-raw") == [("x", 1, 3)]
    assert _drain(driver, "output-suppressed") == [("x", 1, 3)]
    topic.pipe_input("x", "y", 4)
    assert _drain(driver, "output-raw") == [("x", 0, 4), ("y", 1, 4)]
    assert _drain(driver, "output-suppressed") == [("x", 0, 4), ("y", 1, 4)]


def test_time_limit_holds_each_key_s_latest_update_until_stream_time_passes_it(drive):
    """shouldSuppressIntermediateEventsWithTimeLimit"""
    driver = drive(_value_counts(Suppressed.until_time_limit(2 * MS, BufferConfig.unbounded())))
    topic = driver.create_input_topic("input", S, S)
    _pipe_first_three(topic)
    assert _drain(driver, "output-raw") == FIRST_THREE_RAW
    assert _drain(driver, "output-suppressed") == [("v1", 1, 2)]
    topic.pipe_input("tick", "tick", 3)
    assert _drain(driver, "output-raw") == [("tick", 1, 3)]
    assert _drain(driver, "output-suppressed") == [("v2", 1, 1)]
    topic.pipe_input("tick", "tock", 4)
    assert _drain(driver, "output-raw") == [("tick", 0, 4), ("tock", 1, 4)]
    assert _drain(driver, "output-suppressed") == []


def _bounded_buffer_emits_early(drive: Any, buffer: BufferConfig, count_store: Any = None) -> None:
    driver = drive(_value_counts(Suppressed.until_time_limit(LONG_MAX, buffer), count_store))
    topic = driver.create_input_topic("input", S, S)
    _pipe_first_three(topic)
    assert _drain(driver, "output-raw") == FIRST_THREE_RAW
    assert _drain(driver, "output-suppressed") == [("v1", 0, 1), ("v2", 1, 1)]
    topic.pipe_input("x", "x", 3)
    assert _drain(driver, "output-raw") == [("x", 1, 3)]
    assert _drain(driver, "output-suppressed") == [("v1", 1, 2)]


def test_record_bound_emits_the_oldest_key_early_when_full(drive):
    """shouldSuppressIntermediateEventsWithRecordLimit"""
    buffer = BufferConfig.max_records(1).emit_early_when_full()
    _bounded_buffer_emits_early(drive, buffer, Materialized.with_(S, L))


def test_byte_bound_emits_the_oldest_key_early_when_full(drive):
    """shouldSuppressIntermediateEventsWithBytesLimit"""
    _bounded_buffer_emits_early(drive, BufferConfig.max_bytes(200).emit_early_when_full())


def _windowed_counts(windows: Any) -> Any:
    builder = StreamsBuilder()
    counts = (
        builder.stream("input", Consumed.with_(S, S))
        .group_by(lambda k, v: k, Grouped.with_(S, S))
        .windowed_by(windows)
        .count(Materialized.as_("counts").with_caching_disabled().with_key_serde(S))
    )
    as_text = lambda k, v: KeyValue(str(k), v)  # noqa: E731 - Kafka's Windowed.toString, "[k1@0/2]"
    counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().map(as_text).to(
        "output-suppressed", Produced.with_(S, L)
    )
    counts.to_stream().map(as_text).to("output-raw", Produced.with_(S, L))
    return builder.build()


def _pipe(driver: Any, times: list[int], key: str = "k1") -> None:
    topic = driver.create_input_topic("input", S, S)
    for ts in times:
        topic.pipe_input(key, "v1", ts)


def test_time_windows_emit_final_results_when_they_close(drive):
    """shouldSupportFinalResultsForTimeWindows"""
    driver = drive(_windowed_counts(TimeWindows.of_size_and_grace(2 * MS, 1 * MS)))
    _pipe(driver, [0, 1, 2, 1, 0, 5, 0])
    assert _drain(driver, "output-raw") == [
        ("[k1@0/2]", 1, 0), ("[k1@0/2]", 2, 1), ("[k1@2/4]", 1, 2), ("[k1@0/2]", 3, 1), ("[k1@0/2]", 4, 1),
        ("[k1@4/6]", 1, 5),
    ]  # fmt: skip
    assert _drain(driver, "output-suppressed") == [("[k1@0/2]", 4, 1), ("[k1@2/4]", 1, 2)]


def test_time_windows_emit_final_results_after_a_large_jump(drive):
    """shouldSupportFinalResultsForTimeWindowsWithLargeJump"""
    driver = drive(_windowed_counts(TimeWindows.of_size_and_grace(2 * MS, 2 * MS)))
    _pipe(driver, [0, 1, 2, 0, 3, 0, 4, 0, 30])
    assert _drain(driver, "output-raw") == [
        ("[k1@0/2]", 1, 0), ("[k1@0/2]", 2, 1), ("[k1@2/4]", 1, 2), ("[k1@0/2]", 3, 1), ("[k1@2/4]", 2, 3),
        ("[k1@0/2]", 4, 1), ("[k1@4/6]", 1, 4), ("[k1@30/32]", 1, 30),
    ]  # fmt: skip
    assert _drain(driver, "output-suppressed") == [("[k1@0/2]", 4, 1), ("[k1@2/4]", 2, 3), ("[k1@4/6]", 1, 4)]


def test_sliding_windows_emit_final_results_when_they_close(drive):
    """shouldSupportFinalResultsForSlidingWindows"""
    driver = drive(_windowed_counts(SlidingWindows.of_time_difference_and_grace(5 * MS, 15 * MS)))
    _pipe(driver, [10, 11, 10, 13, 10, 24, 5, 7, 90])
    # Kafka sorts the raw output by key text, then timestamp.
    assert sorted(_drain(driver, "output-raw"), key=lambda r: (r[0], r[2])) == [
        ("[k1@11/16]", 1, 11), ("[k1@11/16]", 2, 13), ("[k1@12/17]", 1, 13), ("[k1@19/24]", 1, 24),
        ("[k1@5/10]", 1, 10), ("[k1@5/10]", 2, 10), ("[k1@5/10]", 3, 10), ("[k1@5/10]", 4, 10),
        ("[k1@5/10]", 5, 10), ("[k1@6/11]", 2, 11), ("[k1@6/11]", 3, 11), ("[k1@6/11]", 4, 11),
        ("[k1@6/11]", 5, 11), ("[k1@8/13]", 4, 13), ("[k1@8/13]", 5, 13), ("[k1@85/90]", 1, 90),
    ]  # fmt: skip
    assert _drain(driver, "output-suppressed") == [
        ("[k1@5/10]", 5, 10), ("[k1@6/11]", 5, 11), ("[k1@8/13]", 5, 13), ("[k1@11/16]", 2, 13),
        ("[k1@12/17]", 1, 13), ("[k1@19/24]", 1, 24),
    ]  # fmt: skip


def test_session_windows_emit_final_results_when_they_close(drive):
    """shouldSupportFinalResultsForSessionWindows"""
    builder = StreamsBuilder()
    counts = (
        builder.stream("input", Consumed.with_(S, S))
        .group_by(lambda k, v: k, Grouped.with_(S, S))
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(5 * MS))
        .count(Materialized.as_("counts").with_caching_disabled())
    )
    as_text = lambda k, v: KeyValue(str(k), v)  # noqa: E731 - Kafka's Windowed.toString
    counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().map(as_text).to(
        "output-suppressed", Produced.with_(S, L)
    )
    counts.to_stream().map(as_text).to("output-raw", Produced.with_(S, L))
    driver = drive(builder.build())
    topic = driver.create_input_topic("input", S, S)
    for key, ts in [("k1", 0), ("k1", 5), ("k1", 1), ("k2", 11), ("k1", 5), ("k1", 30)]:
        topic.pipe_input(key, "v1", ts)
    assert _drain(driver, "output-raw") == [
        ("[k1@0/0]", 1, 0), ("[k1@0/0]", None, 0), ("[k1@0/5]", 2, 5), ("[k1@0/5]", None, 5),
        ("[k1@0/5]", 3, 5), ("[k2@11/11]", 1, 11), ("[k1@30/30]", 1, 30),
    ]  # fmt: skip
    assert _drain(driver, "output-suppressed") == [("[k1@0/5]", 3, 5), ("[k2@11/11]", 1, 11)]


def test_suppress_before_a_group_by_holds_the_table_s_updates(drive):
    """shouldWorkBeforeGroupBy"""
    builder = StreamsBuilder()
    (
        builder.table("topic", Consumed.with_(S, S))
        .suppress(Suppressed.until_time_limit(10 * MS, BufferConfig.unbounded()))
        .group_by(KeyValue, Grouped.with_(S, S))
        .count()
        .to_stream()
        .to("output", Produced.with_(S, L))
    )
    driver = drive(builder.build())
    topic = driver.create_input_topic("topic", S, S)
    topic.pipe_input("A", "a", 0)
    topic.pipe_input("tick", "tick", 10)
    assert _drain(driver, "output") == [("A", 1, 0)]


def _pair(left: Any, right: Any) -> str:
    """Kafka's joiner ``String.format("(%s,%s)", l, r)``: a missing side reads "null"."""
    return "({},{})".format(*("null" if v is None else v for v in (left, right)))


def _join_with_suppressed_side(drive: Any, suppressed_side: str) -> tuple[Any, Any, Any]:
    builder = StreamsBuilder()
    tables = {}
    for side in ("left", "right"):
        table = builder.table(side, Consumed.with_(S, S))
        if side == suppressed_side:
            table = table.suppress(Suppressed.until_time_limit(10 * MS, BufferConfig.unbounded()))
        tables[side] = table
    tables["left"].outer_join(tables["right"], _pair).to_stream().to("output", Produced.with_(S, S))
    driver = drive(builder.build())
    right = driver.create_input_topic("right", S, S)
    left = driver.create_input_topic("left", S, S)
    return driver, left, right


def test_suppressed_right_side_of_a_join_shows_the_join_its_emitted_rows(drive):
    """shouldWorkBeforeJoinRight"""
    driver, left, right = _join_with_suppressed_side(drive, "right")
    right.pipe_input("B", "1", 0)
    right.pipe_input("A", "1", 0)
    assert _drain(driver, "output", S) == []
    right.pipe_input("tick", "tick", 10)
    assert _drain(driver, "output", S) == [("A", "(null,1)", 0), ("B", "(null,1)", 0)]
    right.pipe_input("A", "2", 11)
    assert _drain(driver, "output", S) == []
    left.pipe_input("A", "a", 12)
    assert _drain(driver, "output", S) == [("A", "(a,1)", 12)]
    left.pipe_input("B", "b", 12)
    assert _drain(driver, "output", S) == [("B", "(b,1)", 12)]
    left.pipe_input("A", "b", 13)
    assert _drain(driver, "output", S) == [("A", "(b,1)", 13)]
    right.pipe_input("tick", "tick1", 21)
    assert _drain(driver, "output", S) == [("tick", "(null,tick1)", 21), ("A", "(b,2)", 13)]


def test_suppressed_left_side_of_a_join_shows_the_join_its_emitted_rows(drive):
    """shouldWorkBeforeJoinLeft"""
    driver, left, right = _join_with_suppressed_side(drive, "left")
    left.pipe_input("B", "1", 0)
    left.pipe_input("A", "1", 0)
    assert _drain(driver, "output", S) == []
    left.pipe_input("tick", "tick", 10)
    assert _drain(driver, "output", S) == [("A", "(1,null)", 0), ("B", "(1,null)", 0)]
    left.pipe_input("A", "2", 11)
    assert _drain(driver, "output", S) == []
    right.pipe_input("A", "a", 12)
    assert _drain(driver, "output", S) == [("A", "(1,a)", 12)]
    right.pipe_input("B", "b", 12)
    assert _drain(driver, "output", S) == [("B", "(1,b)", 12)]
    right.pipe_input("A", "b", 13)
    assert _drain(driver, "output", S) == [("A", "(1,b)", 13)]
    left.pipe_input("tick", "tick1", 21)
    assert _drain(driver, "output", S) == [("tick", "(tick1,null)", 21), ("A", "(2,b)", 13)]


def test_suppress_after_a_cogrouped_windowed_aggregate_builds():
    """shouldWorkWithCogrouped"""
    builder = StreamsBuilder()
    stream1 = builder.stream("one", Consumed.with_(S, S)).group_by_key(Grouped.with_(S, S))
    stream2 = builder.stream("two", Consumed.with_(S, S)).group_by_key(Grouped.with_(S, S))
    (
        stream1.cogroup(lambda k, v, agg: agg + v)
        .cogroup(stream2, lambda k, v, agg: agg + v)
        .windowed_by(TimeWindows.of_size_with_no_grace(timedelta(minutes=15)))
        .aggregate(lambda: "", Named.as_("test"), Materialized.as_("store"))
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
    )
    builder.build()
