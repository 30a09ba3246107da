"""Joins of windowed tables on their windowed keys: Kafka's KStreamWindowAggregateTest.testJoin,
ported from its inputs and expected outputs (the other window types and joins are compared with
Kafka Streams in the oracle catalogue, ``*-windowed-table-*-join``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kstreams.processor import Processor, Record
from kstreams.serdes import Serdes
from kstreams.state.store import WindowedKey
from kstreams.topology import Consumed, Grouped, Materialized, StreamsBuilder, TimeWindows

S = Serdes.string()
MS = timedelta(milliseconds=1)


class Capture(Processor[Any, Any, Any, Any]):
    """Records (key, value, timestamp) of what reaches it (Kafka's MockProcessor)."""

    def __init__(self, seen: list[tuple[Any, Any, int]]) -> None:
        self.seen = seen

    def process(self, record: Record[Any, Any]) -> None:
        self.seen.append((record.key, record.value, record.timestamp))


def _drain(seen: list[tuple[Any, Any, int]]) -> list[tuple[Any, Any, int]]:
    drained = list(seen)
    seen.clear()
    return drained


def _w(key: str, start: int, end: int) -> WindowedKey[str]:
    return WindowedKey(key, start, end)


def test_windowed_tables_join_on_their_windowed_keys(drive: Any) -> None:
    """KStreamWindowAggregateTest.testJoin: two hopping-window aggregations (size 10, advance 5)
    joined with ``p1 + "%" + p2``; a window joins only the same key's window of the same start."""
    builder = StreamsBuilder()
    first: list[tuple[Any, Any, int]] = []
    second: list[tuple[Any, Any, int]] = []
    joined: list[tuple[Any, Any, int]] = []

    def aggregate(topic: str, store: str) -> Any:
        return (
            builder.stream(topic, Consumed.with_(S, S))
            .group_by_key(Grouped.with_(S, S))
            .windowed_by(TimeWindows.of(10 * MS).advance_by(5 * MS))
            .aggregate(
                lambda: "0",
                lambda key, value, agg: f"{agg}+{value}",
                Materialized.as_(store).with_value_serde(S),
            )
        )

    table1, table2 = aggregate("topic1", "topic1-Canonized"), aggregate("topic2", "topic2-Canonized")
    table1.to_stream().process(lambda: Capture(first))
    table2.to_stream().process(lambda: Capture(second))
    table1.join(table2, lambda p1, p2: f"{p1}%{p2}").to_stream().process(lambda: Capture(joined))
    driver = drive(builder.build(), statestore_cache_max_bytes=0)
    topic1 = driver.create_input_topic("topic1", S, S)
    topic2 = driver.create_input_topic("topic2", S, S)

    for key, value, timestamp in [("A", "1", 0), ("B", "2", 1), ("C", "3", 2), ("D", "4", 3), ("A", "1", 9)]:
        topic1.pipe_input(key, value, timestamp=timestamp)
    assert _drain(first) == [
        (_w("A", 0, 10), "0+1", 0),
        (_w("B", 0, 10), "0+2", 1),
        (_w("C", 0, 10), "0+3", 2),
        (_w("D", 0, 10), "0+4", 3),
        (_w("A", 0, 10), "0+1+1", 9),
        (_w("A", 5, 15), "0+1", 9),
    ]
    assert _drain(second) == [] and _drain(joined) == []

    for key, value, timestamp in [("A", "1", 5), ("B", "2", 6), ("D", "4", 7), ("B", "2", 8), ("C", "3", 9)]:
        topic1.pipe_input(key, value, timestamp=timestamp)
    assert _drain(first) == [
        (_w("A", 0, 10), "0+1+1+1", 9),
        (_w("A", 5, 15), "0+1+1", 9),
        (_w("B", 0, 10), "0+2+2", 6),
        (_w("B", 5, 15), "0+2", 6),
        (_w("D", 0, 10), "0+4+4", 7),
        (_w("D", 5, 15), "0+4", 7),
        (_w("B", 0, 10), "0+2+2+2", 8),
        (_w("B", 5, 15), "0+2+2", 8),
        (_w("C", 0, 10), "0+3+3", 9),
        (_w("C", 5, 15), "0+3", 9),
    ]
    assert _drain(second) == [] and _drain(joined) == []

    for key, value, timestamp in [
        ("A", "a", 0),
        ("B", "b", 1),
        ("C", "c", 2),
        ("D", "d", 20),
        ("A", "a", 20),
    ]:
        topic2.pipe_input(key, value, timestamp=timestamp)
    assert _drain(first) == []
    assert _drain(second) == [
        (_w("A", 0, 10), "0+a", 0),
        (_w("B", 0, 10), "0+b", 1),
        (_w("C", 0, 10), "0+c", 2),
        (_w("D", 15, 25), "0+d", 20),
        (_w("D", 20, 30), "0+d", 20),
        (_w("A", 15, 25), "0+a", 20),
        (_w("A", 20, 30), "0+a", 20),
    ]
    assert _drain(joined) == [
        (_w("A", 0, 10), "0+1+1+1%0+a", 9),
        (_w("B", 0, 10), "0+2+2+2%0+b", 8),
        (_w("C", 0, 10), "0+3+3%0+c", 9),
    ]

    for key, value, timestamp in [
        ("A", "a", 5),
        ("B", "b", 6),
        ("D", "d", 7),
        ("D", "d", 18),
        ("A", "a", 21),
    ]:
        topic2.pipe_input(key, value, timestamp=timestamp)
    assert _drain(first) == []
    assert _drain(second) == [
        (_w("A", 0, 10), "0+a+a", 5),
        (_w("A", 5, 15), "0+a", 5),
        (_w("B", 0, 10), "0+b+b", 6),
        (_w("B", 5, 15), "0+b", 6),
        (_w("D", 0, 10), "0+d", 7),
        (_w("D", 5, 15), "0+d", 7),
        (_w("D", 10, 20), "0+d", 18),
        (_w("D", 15, 25), "0+d+d", 20),
        (_w("A", 15, 25), "0+a+a", 21),
        (_w("A", 20, 30), "0+a+a", 21),
    ]
    assert _drain(joined) == [
        (_w("A", 0, 10), "0+1+1+1%0+a+a", 9),
        (_w("A", 5, 15), "0+1+1%0+a", 9),
        (_w("B", 0, 10), "0+2+2+2%0+b+b", 8),
        (_w("B", 5, 15), "0+2+2%0+b", 8),
        (_w("D", 0, 10), "0+4+4%0+d", 7),
        (_w("D", 5, 15), "0+4%0+d", 7),
    ]
