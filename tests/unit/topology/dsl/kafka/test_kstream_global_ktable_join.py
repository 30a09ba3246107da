"""Apache Kafka's KStreamGlobalKTableJoinTest (kstream/internals), ported: the inner join of a
stream with a global table through a key mapper: only stream records trigger it, only a found row
joins, a table tombstone removes the row, a mapper returning None joins nothing.

Kafka's version pipes records at wall-clock time and compares keys and values only; here each
stream record is piped at its index, and the result's timestamp (the stream record's) is compared
too. Added beside Kafka's cases, checked on the oracle (Kafka Streams 4.1.1, the catalogue's
global-table spec): a stream record with a null key whose mapper finds a row is joined (KIP-962).
"""

from __future__ import annotations

from tests.unit.topology.dsl.kafka.global_table_join import GlobalTableJoin


def test_stream_global_table_join_needs_no_copartitioning(drive, captured):
    """shouldNotRequireCopartitioning"""
    join = GlobalTableJoin(drive, captured)
    assert join.builder.build().build("app").copartition_groups == ()


def test_stream_records_meet_no_row_of_an_empty_global_table(drive, captured):
    """shouldNotJoinWithEmptyGlobalTableOnStreamUpdates"""
    join = GlobalTableJoin(drive, captured)
    join.push_to_stream(2, "X")
    assert join.take() == []


def test_global_table_updates_trigger_no_join(drive, captured):
    """shouldNotJoinOnGlobalTableUpdates"""
    join = GlobalTableJoin(drive, captured)
    join.push_to_stream(2, "X")
    assert join.take() == []
    join.push_to_global_table(2, "Y")
    assert join.take() == []
    join.push_to_stream(4, "X")
    assert join.take() == [(0, "X0,FKey0+Y0", 0), (1, "X1,FKey1+Y1", 1)]
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


def test_stream_record_joins_only_when_the_global_table_has_its_mapped_key(drive, captured):
    """shouldJoinOnlyIfMatchFoundOnStreamUpdates"""
    join = GlobalTableJoin(drive, captured)
    join.push_to_global_table(2, "Y")
    assert join.take() == []
    join.push_to_stream(4, "X")
    assert join.take() == [(0, "X0,FKey0+Y0", 0), (1, "X1,FKey1+Y1", 1)]


def test_global_table_tombstone_removes_the_row_a_stream_record_would_meet(drive, captured):
    """shouldClearGlobalTableEntryOnNullValueUpdates"""
    join = GlobalTableJoin(drive, captured)
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
    assert join.take() == [(2, "XX2,FKey2+Y2", 2), (3, "XX3,FKey3+Y3", 3)]


def test_stream_record_whose_mapper_returns_none_is_not_joined(drive, captured):
    """shouldNotJoinOnNullKeyMapperValues"""
    join = GlobalTableJoin(drive, captured)
    join.push_to_global_table(4, "Y")
    assert join.take() == []
    join.push_to_stream(4, "XXX", include_foreign_key=False)
    assert join.take() == []


def test_stream_record_with_a_null_key_joins_the_row_its_mapper_finds(drive, captured):
    """(checked on the oracle, Kafka Streams 4.1.1: KIP-962)"""
    join = GlobalTableJoin(drive, captured)
    join.push_to_global_table(1, "Y")
    join.stream.pipe_input(None, "X,FKey0", 5)
    assert join.take() == [(None, "X,FKey0+Y0", 5)]
