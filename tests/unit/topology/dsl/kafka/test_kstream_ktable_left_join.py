"""Apache Kafka's KStreamKTableLeftJoinTest (kstream/internals), ported: the left join of a stream
with a table: every stream record joins, with the table's row or with None; table updates trigger
nothing; a table tombstone removes the row a later stream record would meet.

The stored version of Kafka's class holds these five cases; Kafka pipes the table with random
timestamps (they do not change the output of a join on an unversioned table), here from a seeded
generator. One case is added beside them, checked on the oracle (Kafka Streams 4.1.1): a stream
record with a null key is joined with None (KIP-962), one with a null value is dropped.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from kstreams import Consumed, Serdes, StreamsBuilder

pytestmark = pytest.mark.on_cluster(
    representative="test_every_stream_record_joins_whether_or_not_the_table_has_its_key"
)

S = Serdes.string()
I = Serdes.integer()  # noqa: E741 - Kafka's Serdes.Integer(), beside S
CONSUMED = Consumed.with_(I, S)
KEYS = (0, 1, 2, 3)


def _joiner(value1: Any, value2: Any) -> str:
    return f"{value1}+{value2}"


class _LeftJoin:
    """Kafka's fixture: ``streamTopic`` left-joined with the table of ``tableTopic``, every result
    kept by ``captured``."""

    def __init__(self, drive: Any, captured: Any) -> None:
        builder = StreamsBuilder()
        stream = builder.stream("streamTopic", CONSUMED)
        stream.left_join(builder.table("tableTopic", CONSUMED), _joiner).process(captured.supplier)
        self.builder = builder
        self.driver = drive(builder.build())
        self.stream = self.driver.create_input_topic("streamTopic", I, S)
        self.table = self.driver.create_input_topic("tableTopic", I, S)
        self.captured = captured
        self._random = random.Random(962)

    def push_to_stream(self, count: int, prefix: str) -> None:
        for i in range(count):
            self.stream.pipe_input(KEYS[i], f"{prefix}{KEYS[i]}", i)

    def push_to_table(self, count: int, prefix: str) -> None:
        for i in range(count):
            self.table.pipe_input(KEYS[i], f"{prefix}{KEYS[i]}", self._random.randrange(2**31 - 1))

    def push_null_values_to_table(self, count: int) -> None:
        for i in range(count):
            self.table.pipe_input(KEYS[i], None)

    def take(self) -> list[tuple[Any, Any, int]]:
        return self.captured.take()


def test_stream_table_left_join_is_copartitioned(drive, captured):
    """shouldRequireCopartitionedStreams"""
    join = _LeftJoin(drive, captured)
    assert join.builder.build().build("app").copartition_groups == (frozenset({"streamTopic", "tableTopic"}),)


def test_stream_records_join_an_empty_table_with_none(drive, captured):
    """shouldJoinWithEmptyTableOnStreamUpdates"""
    join = _LeftJoin(drive, captured)
    join.push_to_stream(2, "X")
    assert join.take() == [(0, "X0+None", 0), (1, "X1+None", 1)]


def test_table_updates_trigger_no_left_join(drive, captured):
    """shouldNotJoinOnTableUpdates"""
    join = _LeftJoin(drive, captured)
    join.push_to_stream(2, "X")
    assert join.take() == [(0, "X0+None", 0), (1, "X1+None", 1)]
    join.push_to_table(2, "Y")
    assert join.take() == []
    join.push_to_stream(4, "X")
    assert join.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1), (2, "X2+None", 2), (3, "X3+None", 3)]
    join.push_to_table(4, "YY")
    assert join.take() == []
    join.push_to_stream(4, "X")
    assert join.take() == [(0, "X0+YY0", 0), (1, "X1+YY1", 1), (2, "X2+YY2", 2), (3, "X3+YY3", 3)]
    join.push_to_table(4, "YYY")
    assert join.take() == []


def test_every_stream_record_joins_whether_or_not_the_table_has_its_key(drive, captured):
    """shouldJoinRegardlessIfMatchFoundOnStreamUpdates"""
    join = _LeftJoin(drive, captured)
    join.push_to_table(2, "Y")
    assert join.take() == []
    join.push_to_stream(4, "X")
    assert join.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1), (2, "X2+None", 2), (3, "X3+None", 3)]


def test_table_tombstone_leaves_later_stream_records_joined_with_none(drive, captured):
    """shouldClearTableEntryOnNullValueUpdates"""
    join = _LeftJoin(drive, captured)
    join.push_to_table(4, "Y")
    assert join.take() == []
    join.push_to_stream(4, "X")
    assert join.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1), (2, "X2+Y2", 2), (3, "X3+Y3", 3)]
    join.push_null_values_to_table(2)
    assert join.take() == []
    join.push_to_stream(4, "XX")
    assert join.take() == [(0, "XX0+None", 0), (1, "XX1+None", 1), (2, "XX2+Y2", 2), (3, "XX3+Y3", 3)]


def test_stream_record_with_a_null_key_joins_none_and_one_with_a_null_value_is_dropped(drive, captured):
    """(checked on the oracle: Kafka Streams 4.1.1, KIP-962)"""
    join = _LeftJoin(drive, captured)
    join.push_to_table(1, "Y")
    join.stream.pipe_input(0, "X0", 1)
    join.stream.pipe_input(None, "X1", 2)
    join.stream.pipe_input(1, None, 3)
    assert join.take() == [(0, "X0+Y0", 1), (None, "X1+None", 2)]
