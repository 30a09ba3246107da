"""Apache Kafka's KStreamGlobalKTableLeftJoinTest (kstream/internals), ported: the left join of
a stream with a global table through a key mapper: every stream record joins, with the row found
or with None; table updates trigger nothing; a table tombstone removes the row; a mapper returning
None joins None.

Kafka's version pipes records at wall-clock time and compares keys and values only; here each
stream record is piped at its index, and the result's timestamp (the stream record's) is compared
too. Added beside Kafka's cases, checked on the oracle (Kafka Streams 4.1.1, the catalogue's
global-table spec): a stream record with a null key is joined too (KIP-962).
"""

from __future__ import annotations

from typing import Any

from kstreams import Consumed, Serdes, StreamsBuilder

S = Serdes.string()
I = Serdes.integer()  # noqa: E741 - Kafka's Serdes.Integer(), beside S
KEYS = (0, 1, 2, 3)


def _joiner(value1: Any, value2: Any) -> str:
    return f"{value1}+{value2}"


def _key_mapper(key: Any, value: str) -> str | None:
    """Kafka's mapper: the value is comma-delimited; its second token, if any, is the key to the
    global table; without one, None (no match)."""
    tokens = value.split(",")
    return tokens[1] if len(tokens) > 1 else None


class _Join:
    """Kafka's fixture: ``streamTopic`` (Integer keys) left-joined with the global table of
    ``globalTableTopic`` (String keys ``FKey<i>``) through ``_key_mapper``, every result kept by
    ``captured``. Stream record ``i`` is piped at time ``i``."""

    def __init__(self, drive: Any, captured: Any) -> None:
        builder = StreamsBuilder()
        stream = builder.stream("streamTopic", Consumed.with_(I, S))
        table = builder.global_table("globalTableTopic", Consumed.with_(S, S))
        stream.left_join(table, _key_mapper, _joiner).process(captured.supplier)
        self.builder = builder
        self.driver = drive(builder.build())
        self.stream = self.driver.create_input_topic("streamTopic", I, S)
        self.table = self.driver.create_input_topic("globalTableTopic", S, S)
        self.captured = captured

    def push_to_stream(self, count: int, prefix: str, include_foreign_key: bool = True) -> None:
        for i in range(count):
            value = f"{prefix}{KEYS[i]}" + (f",FKey{KEYS[i]}" if include_foreign_key else "")
            self.stream.pipe_input(KEYS[i], value, i)

    def push_to_global_table(self, count: int, prefix: str) -> None:
        for i in range(count):
            self.table.pipe_input(f"FKey{KEYS[i]}", f"{prefix}{KEYS[i]}", 0)

    def push_null_values_to_global_table(self, count: int) -> None:
        for i in range(count):
            self.table.pipe_input(f"FKey{KEYS[i]}", None, 0)

    def take(self) -> list[tuple[Any, Any, int]]:
        return self.captured.take()


def test_stream_global_table_left_join_needs_no_copartitioning(drive, captured):
    """shouldNotRequireCopartitioning"""
    join = _Join(drive, captured)
    assert join.builder.build().build("app").copartition_groups == ()


def test_stream_records_join_an_empty_global_table_with_none(drive, captured):
    """shouldNotJoinWithEmptyGlobalTableOnStreamUpdates"""
    join = _Join(drive, captured)
    join.push_to_stream(2, "X")
    assert join.take() == [(0, "X0,FKey0+None", 0), (1, "X1,FKey1+None", 1)]


def test_global_table_updates_trigger_no_left_join(drive, captured):
    """shouldNotJoinOnGlobalTableUpdates"""
    join = _Join(drive, captured)
    join.push_to_stream(2, "X")
    assert join.take() == [(0, "X0,FKey0+None", 0), (1, "X1,FKey1+None", 1)]
    join.push_to_global_table(2, "Y")
    assert join.take() == []
    join.push_to_stream(4, "X")
    assert join.take() == [
        (0, "X0,FKey0+Y0", 0),
        (1, "X1,FKey1+Y1", 1),
        (2, "X2,FKey2+None", 2),
        (3, "X3,FKey3+None", 3),
    ]
    join.push_to_global_table(4, "YY")
    assert join.take() == []
    join.push_to_stream(4, "X")
    assert join.take() == [
        (0, "X0,FKey0+YY0", 0),
        (1, "X1,FKey1+YY1", 1),
        (2, "X2,FKey2+YY2", 2),
        (3, "X3,FKey3+YY3", 3),
    ]
    join.push_to_global_table(4, "YYY")
    assert join.take() == []


def test_every_stream_record_joins_whether_or_not_the_global_table_has_its_key(drive, captured):
    """shouldJoinRegardlessIfMatchFoundOnStreamUpdates"""
    join = _Join(drive, captured)
    join.push_to_global_table(2, "Y")
    assert join.take() == []
    join.push_to_stream(4, "X")
    assert join.take() == [
        (0, "X0,FKey0+Y0", 0),
        (1, "X1,FKey1+Y1", 1),
        (2, "X2,FKey2+None", 2),
        (3, "X3,FKey3+None", 3),
    ]


def test_global_table_tombstone_leaves_later_stream_records_joined_with_none(drive, captured):
    """shouldClearGlobalTableEntryOnNullValueUpdates"""
    join = _Join(drive, captured)
    join.push_to_global_table(4, "Y")
    assert join.take() == []
    join.push_to_stream(4, "X")
    assert join.take() == [
        (0, "X0,FKey0+Y0", 0),
        (1, "X1,FKey1+Y1", 1),
        (2, "X2,FKey2+Y2", 2),
        (3, "X3,FKey3+Y3", 3),
    ]
    join.push_null_values_to_global_table(2)
    assert join.take() == []
    join.push_to_stream(4, "XX")
    assert join.take() == [
        (0, "XX0,FKey0+None", 0),
        (1, "XX1,FKey1+None", 1),
        (2, "XX2,FKey2+Y2", 2),
        (3, "XX3,FKey3+Y3", 3),
    ]


def test_stream_record_whose_mapper_returns_none_joins_none(drive, captured):
    """shouldJoinOnNullKeyMapperValues"""
    join = _Join(drive, captured)
    join.push_to_global_table(4, "Y")
    assert join.take() == []
    join.push_to_stream(4, "XXX", include_foreign_key=False)
    assert join.take() == [(0, "XXX0+None", 0), (1, "XXX1+None", 1), (2, "XXX2+None", 2), (3, "XXX3+None", 3)]


def test_stream_record_with_a_null_key_is_left_joined(drive, captured):
    """(checked on the oracle, Kafka Streams 4.1.1: KIP-962)"""
    join = _Join(drive, captured)
    join.push_to_global_table(1, "Y")
    join.stream.pipe_input(None, "X,FKey0", 5)
    join.stream.pipe_input(None, "Z,FKey9", 6)
    assert join.take() == [(None, "X,FKey0+Y0", 5), (None, "Z,FKey9+None", 6)]
