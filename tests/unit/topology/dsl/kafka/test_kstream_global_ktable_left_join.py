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

from tests.unit.topology.dsl.kafka.global_table_join import GlobalTableJoin


def test_stream_global_table_left_join_needs_no_copartitioning(drive, captured):
    """shouldNotRequireCopartitioning"""
    join = GlobalTableJoin(drive, captured, left=True)
    assert join.builder.build().build("app").copartition_groups == ()


def test_stream_records_join_an_empty_global_table_with_none(drive, captured):
    """shouldNotJoinWithEmptyGlobalTableOnStreamUpdates"""
    join = GlobalTableJoin(drive, captured, left=True)
    join.push_to_stream(2, "X")
    assert join.take() == [(0, "X0,FKey0+None", 0), (1, "X1,FKey1+None", 1)]


def test_global_table_updates_trigger_no_left_join(drive, captured):
    """shouldNotJoinOnGlobalTableUpdates"""
    join = GlobalTableJoin(drive, captured, left=True)
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
    join = GlobalTableJoin(drive, captured, left=True)
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
    join = GlobalTableJoin(drive, captured, left=True)
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
    join = GlobalTableJoin(drive, captured, left=True)
    join.push_to_global_table(4, "Y")
    assert join.take() == []
    join.push_to_stream(4, "XXX", include_foreign_key=False)
    assert join.take() == [(0, "XXX0+None", 0), (1, "XXX1+None", 1), (2, "XXX2+None", 2), (3, "XXX3+None", 3)]


def test_stream_record_with_a_null_key_is_left_joined(drive, captured):
    """(checked on the oracle, Kafka Streams 4.1.1: KIP-962)"""
    join = GlobalTableJoin(drive, captured, left=True)
    join.push_to_global_table(1, "Y")
    join.stream.pipe_input(None, "X,FKey0", 5)
    join.stream.pipe_input(None, "Z,FKey9", 6)
    assert join.take() == [(None, "X,FKey0+Y0", 5), (None, "Z,FKey9+None", 6)]
