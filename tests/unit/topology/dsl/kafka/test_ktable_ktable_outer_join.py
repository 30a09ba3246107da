"""Apache Kafka's KTableKTableOuterJoinTest (kstream/internals), ported: the outer join of two
tables, its outputs and timestamps, and the changes (new and old value) it forwards to a
processor under it with and without old values.

As in the KTableKTableInnerJoinTest port, the processor goes under the join's node through the
public ``Topology.add_processor`` and ``KTable.name``, and old values are turned on as a user turns
them on: by grouping the joined table (Kafka's test calls the internal ``enableSendingOldValues``).
Not ported: ``shouldLogAndMeterSkippedRecordsDueToNullLeftKey`` (it drives Kafka's join processor
with a mock context and checks a log line and a metric; the null-key records the other cases pipe
are dropped here as there).
"""

from __future__ import annotations

from typing import Any

import pytest

from kstreams import Consumed, Grouped, KeyValue, Serdes, StreamsBuilder, Topology

pytestmark = pytest.mark.on_cluster(representative="test_outer_join_of_two_tables")

S = Serdes.string()
I = Serdes.integer()  # noqa: E741 - Kafka's Serdes.Integer(), beside S
CONSUMED = Consumed.with_(I, S)
KEYS = (0, 1, 2, 3)


def _joiner(value1: Any, value2: Any) -> str:
    return f"{value1}+{value2}"


def _steps() -> list[tuple[str, list[tuple[Any, Any, int]]]]:
    """Kafka's input, in the order it pipes it: (topic, records)."""
    return [
        ("topic1", [(0, "X0", 5), (1, "X1", 6), (None, "SomeVal", 42)]),
        ("topic2", [(0, "Y0", 0), (1, "Y1", 10), (None, "AnotherVal", 73)]),
        ("topic1", [(k, f"XX{k}", 7) for k in KEYS]),
        ("topic2", [(k, f"YY{k}", k * 5) for k in KEYS]),
        ("topic1", [(k, f"XXX{k}", 6) for k in KEYS]),
        ("topic2", [(0, None, 5), (1, None, 7)]),
        ("topic1", [(k, f"XXXX{k}", 13) for k in KEYS]),
        ("topic1", [(0, None, 0), (1, None, 42), (2, None, 5), (3, None, 20)]),
    ]


# What the join emits after each step: (key, new value, old value, timestamp).
JOIN_CHANGES = [
    [(0, "X0+None", None, 5), (1, "X1+None", None, 6)],
    [(0, "X0+Y0", "X0+None", 5), (1, "X1+Y1", "X1+None", 10)],
    [(0, "XX0+Y0", "X0+Y0", 7), (1, "XX1+Y1", "X1+Y1", 10), (2, "XX2+None", None, 7),
     (3, "XX3+None", None, 7)],
    [(0, "XX0+YY0", "XX0+Y0", 7), (1, "XX1+YY1", "XX1+Y1", 7), (2, "XX2+YY2", "XX2+None", 10),
     (3, "XX3+YY3", "XX3+None", 15)],
    [(0, "XXX0+YY0", "XX0+YY0", 6), (1, "XXX1+YY1", "XX1+YY1", 6), (2, "XXX2+YY2", "XX2+YY2", 10),
     (3, "XXX3+YY3", "XX3+YY3", 15)],
    [(0, "XXX0+None", "XXX0+YY0", 6), (1, "XXX1+None", "XXX1+YY1", 7)],
    [(0, "XXXX0+None", "XXX0+None", 13), (1, "XXXX1+None", "XXX1+None", 13),
     (2, "XXXX2+YY2", "XXX2+YY2", 13), (3, "XXXX3+YY3", "XXX3+YY3", 15)],
    [(0, None, "XXXX0+None", 0), (1, None, "XXXX1+None", 42), (2, "None+YY2", "XXXX2+YY2", 10),
     (3, "None+YY3", "XXXX3+YY3", 20)],
]  # fmt: skip


def test_outer_join_of_two_tables(drive):
    """testJoin"""
    builder = StreamsBuilder()
    table1, table2 = builder.table("topic1", CONSUMED), builder.table("topic2", CONSUMED)
    table1.outer_join(table2, _joiner).to_stream().to("output")
    topology = builder.build()
    assert topology.build("app").copartition_groups == (frozenset({"topic1", "topic2"}),)
    driver = drive(topology)
    topics = {name: driver.create_input_topic(name, I, S) for name in ("topic1", "topic2")}
    out = driver.create_output_topic("output", I, S)
    for (name, rows), expected in zip(_steps(), JOIN_CHANGES, strict=True):
        for key, value, ts in rows:
            topics[name].pipe_input(key, value, ts)
        assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [
            (key, new, ts) for key, new, _, ts in expected
        ]


def _changes_under_the_join(drive: Any, send_old_values: bool) -> list[list[Any]]:
    seen: list[tuple[Any, Any, Any, int]] = []

    class _Keep:
        def init(self, context: Any) -> None:
            pass

        def process(self, record: Any) -> None:
            seen.append((record.key, record.value.new_value, record.value.old_value, record.timestamp))

        def close(self) -> None:
            pass

    builder = StreamsBuilder()
    table1, table2 = builder.table("topic1", CONSUMED), builder.table("topic2", CONSUMED)
    joined = table1.outer_join(table2, _joiner)
    if send_old_values:
        joined.group_by(KeyValue, Grouped.with_(I, S)).count()
    topology: Topology = builder.build()
    topology.add_processor("proc", _Keep, joined.name)
    driver = drive(topology)
    topics = {name: driver.create_input_topic(name, I, S) for name in ("topic1", "topic2")}
    found = []
    for name, rows in _steps():
        for key, value, ts in rows:
            topics[name].pipe_input(key, value, ts)
        found.append(list(seen))
        seen.clear()
    return found


def test_outer_join_forwards_no_old_values_unless_a_downstream_needs_them(drive):
    """testNotSendingOldValue"""
    assert _changes_under_the_join(drive, False) == [
        [(key, new, None, ts) for key, new, _, ts in step] for step in JOIN_CHANGES
    ]


def test_outer_join_forwards_old_values_when_a_downstream_needs_them(drive):
    """testSendingOldValue"""
    assert _changes_under_the_join(drive, True) == JOIN_CHANGES
