"""Apache Kafka's KStreamKStreamLeftJoinTest (kstream/internals), ported: the windowed left join of
two streams: pairs as soon as they meet; a left record that met nobody once its window has closed
(window plus grace, by stream time of either side), as ``left+None``, in time order; duplicates
kept; a right record never alone; late records joined with None at once; asymmetric windows; the
stores it keeps.

Not ported: ``testLeftJoinWithSpuriousResultFixDisabledOldApi`` and
``testLeftJoinDuplicatesWithSpuriousResultFixDisabledOldApi`` (the eager left results of the
deprecated ``JoinWindows.of``, which Kafka 4.0 removed).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from kstreams import Consumed, JoinWindows, Serdes, Stores, StreamJoined, StreamsBuilder

pytestmark = pytest.mark.on_cluster(representative="test_left_join_emits_unjoined_and_joined_duplicates")

S = Serdes.string()
I = Serdes.integer()  # noqa: E741 - Kafka's Serdes.Integer(), beside S
CONSUMED = Consumed.with_(I, S)
KEYS = (0, 1, 2, 3)
MS = timedelta(milliseconds=1)


def _joiner(value1: Any, value2: Any) -> str:
    return f"{value1}+{value2}"


def _same_time(topic: str, prefix: str, ts: int, keys: tuple[int, ...] = KEYS) -> tuple[str, list[Any]]:
    """Kafka's loop over the keys, every record at ``ts``."""
    return topic, [(k, f"{prefix}{k}", ts) for k in keys]


def _rising(topic: str, prefix: str, ts: int) -> tuple[str, list[Any]]:
    """Kafka's loop over the keys, key ``i`` at ``ts + i``."""
    return topic, [(k, f"{prefix}{k}", ts + i) for i, k in enumerate(KEYS)]


def _one(topic: str, key: int, value: str, ts: int) -> tuple[str, list[Any]]:
    return topic, [(key, value, ts)]


class _LeftJoin:
    """``topic1`` left-joined with ``topic2`` in ``windows``, every result kept by ``captured``."""

    def __init__(self, drive: Any, captured: Any, windows: JoinWindows, joined: Any = None) -> None:
        builder = StreamsBuilder()
        stream1, stream2 = builder.stream("topic1", CONSUMED), builder.stream("topic2", CONSUMED)
        joined = joined or StreamJoined.with_(I, S, S)
        stream1.left_join(stream2, _joiner, windows, joined).process(captured.supplier)
        topology = builder.build()
        assert topology.build("app").copartition_groups == (frozenset({"topic1", "topic2"}),)
        self.driver = drive(topology)
        self.topics = {name: self.driver.create_input_topic(name, I, S) for name in ("topic1", "topic2")}
        self.captured = captured

    def run(self, steps: list[Any]) -> None:
        for (name, rows), expected in steps:
            for key, value, ts in rows:
                self.topics[name].pipe_input(key, value, ts)
            assert self.captured.take() == expected, (name, rows)


def test_left_join_emits_unjoined_and_joined_duplicates(drive, captured):
    """testLeftJoinDuplicates"""
    join = _LeftJoin(drive, captured, JoinWindows.of_time_difference_and_grace(100 * MS, 10 * MS))
    join.run([
        (_one("topic1", 0, "A0", 0), []),
        (_one("topic1", 0, "A0-0", 0), []),
        (("topic2", [(1, "a0", 111), (2, "dummy", 500)]), [(0, "A0+None", 0), (0, "A0-0+None", 0)]),
        (_one("topic1", 2, "A2", 1000), []),
        (_one("topic1", 2, "A2-0", 1000), []),
        (_one("topic2", 2, "a2", 1001), [(2, "A2+a2", 1001), (2, "A2-0+a2", 1001)]),
        (_one("topic2", 3, "a3", 315), []),
    ])  # fmt: skip


def _expired_left_records(drive: Any, captured: Any, bump: str, flush: str, flush_ts: int) -> None:
    join = _LeftJoin(drive, captured, JoinWindows.of_time_difference_and_grace(100 * MS, 0 * MS))
    join.run([
        (_one("topic1", 0, "A0", 1), []),
        (_one("topic1", 1, "A1", 2), []),
        (_one("topic1", 0, "A0-0", 3), []),
        (_one("topic2", 1, "a1", 3), [(1, "A1+a1", 3)]),
        (_one(bump, 2, "dummy", 401), [(0, "A0+None", 1), (0, "A0-0+None", 3)]),
        (_one(flush, 2, "dummy", flush_ts), [(2, "dummy+dummy", flush_ts)]),
    ])  # fmt: skip


def test_left_records_expiring_on_a_left_record_are_emitted_with_none(drive, captured):
    """testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor"""
    _expired_left_records(drive, captured, "topic1", "topic2", 401)


def test_left_records_expiring_on_a_right_record_are_emitted_with_none(drive, captured):
    """testLeftExpiredNonJoinedRecordsAreEmittedByTheRightProcessor"""
    _expired_left_records(drive, captured, "topic2", "topic1", 402)


def _right_records_never_alone(
    drive: Any, captured: Any, windows: JoinWindows, bump: str, flush: str
) -> None:
    join = _LeftJoin(drive, captured, windows)
    join.run([
        (_one("topic2", 0, "A0", 1), []),
        (_one("topic2", 1, "A1", 2), []),
        (_one("topic2", 0, "A0-0", 3), []),
        (_one("topic1", 1, "a1", 3), [(1, "a1+A1", 3)]),
        (_one(bump, 2, "dummy", 401), []),
        (_one(flush, 2, "dummy", 402), [(2, "dummy+dummy", 402)]),
    ])  # fmt: skip


def test_unjoined_right_records_are_never_emitted_on_a_left_record(drive, captured):
    """testRightNonJoinedRecordsAreNeverEmittedByTheLeftProcessor"""
    windows = JoinWindows.of_time_difference_and_grace(100 * MS, 0 * MS)
    _right_records_never_alone(drive, captured, windows, "topic1", "topic2")


def test_unjoined_right_records_are_never_emitted_on_a_right_record(drive, captured):
    """testRightNonJoinedRecordsAreNeverEmittedByTheRightProcessor"""
    windows = JoinWindows.of_time_difference_with_no_grace(100 * MS)
    _right_records_never_alone(drive, captured, windows, "topic2", "topic1")


def test_left_join_with_zero_after_emits_left_records_as_their_window_closes(drive, captured):
    """testLeftJoinedRecordsWithZeroAfterAreEmitted"""
    join = _LeftJoin(drive, captured, JoinWindows.of_time_difference_with_no_grace(100 * MS).after(0 * MS))
    join.run([
        (_rising("topic1", "A", 1000), [(0, "A0+None", 1000), (1, "A1+None", 1001), (2, "A2+None", 1002)]),
        (_same_time("topic2", "a", 999), [(0, "A0+a0", 1000), (1, "A1+a1", 1001), (2, "A2+a2", 1002),
                                          (3, "A3+a3", 1003)]),
        (_same_time("topic2", "b", 1000), [(0, "A0+b0", 1000), (1, "A1+b1", 1001), (2, "A2+b2", 1002),
                                           (3, "A3+b3", 1003)]),
        (_same_time("topic2", "c", 1001), [(1, "A1+c1", 1001), (2, "A2+c2", 1002), (3, "A3+c3", 1003)]),
        (_same_time("topic2", "d", 1002), [(2, "A2+d2", 1002), (3, "A3+d3", 1003)]),
        (_same_time("topic2", "e", 1003), [(3, "A3+e3", 1003)]),
        (_same_time("topic2", "f", 1100), []),
    ])  # fmt: skip


def _run_left_join(drive: Any, captured: Any, windows: JoinWindows, joined: Any) -> None:
    join = _LeftJoin(drive, captured, windows, joined)
    # The two window stores and the store of not-yet-joined records.
    assert len(join.driver.get_all_state_stores()) == 3
    join.run([
        (_same_time("topic1", "A", 0, KEYS[:2]), []),
        (_same_time("topic2", "a", 0, KEYS[:2]), [(0, "A0+a0", 0), (1, "A1+a1", 0)]),
        (_same_time("topic1", "B", 0, KEYS[:3]), [(0, "B0+a0", 0), (1, "B1+a1", 0)]),
        (_same_time("topic2", "b", 0), [(0, "A0+b0", 0), (0, "B0+b0", 0), (1, "A1+b1", 0), (1, "B1+b1", 0),
                                        (2, "B2+b2", 0)]),
        (_same_time("topic1", "C", 0), [(0, "C0+a0", 0), (0, "C0+b0", 0), (1, "C1+a1", 0), (1, "C1+b1", 0),
                                        (2, "C2+b2", 0), (3, "C3+b3", 0)]),
        (_one("topic1", 0, "dummy", 1000), []),
    ])  # fmt: skip


def test_left_join_with_in_memory_store_suppliers(drive, captured):
    """testLeftJoinWithInMemoryCustomSuppliers"""
    windows = JoinWindows.of_time_difference_and_grace(100 * MS, 0 * MS)
    joined = (
        StreamJoined.with_(I, S, S)
        .with_this_store_supplier(
            Stores.in_memory_window_store("in-memory-join-store", 200 * MS, 200 * MS, True)
        )
        .with_other_store_supplier(
            Stores.in_memory_window_store("in-memory-join-store-other", 200 * MS, 200 * MS, True)
        )
    )
    _run_left_join(drive, captured, windows, joined)


def test_left_join_with_default_stores(drive, captured):
    """testLeftJoinWithDefaultSuppliers"""
    windows = JoinWindows.of_time_difference_with_no_grace(100 * MS)
    _run_left_join(drive, captured, windows, StreamJoined.with_(I, S, S))


def test_expired_left_record_is_emitted_before_the_join_its_closer_triggers(drive, captured):
    """testOrdering"""
    join = _LeftJoin(drive, captured, JoinWindows.of_time_difference_with_no_grace(100 * MS))
    join.run([
        (_one("topic1", 0, "A0", 0), []),
        (_one("topic1", 1, "A1", 100), []),
        (_one("topic2", 1, "a1", 110), [(0, "A0+None", 0), (1, "A1+a1", 110)]),
    ])  # fmt: skip


def test_left_records_wait_for_the_grace_period_before_joining_none(drive, captured):
    """testGracePeriod"""
    join = _LeftJoin(drive, captured, JoinWindows.of_time_difference_and_grace(100 * MS, 10 * MS))
    join.run([
        (_same_time("topic1", "A", 0, KEYS[:2]), []),
        (_same_time("topic2", "a", 101), []),
        (_one("topic2", 0, "dummy", 1201), [(0, "A0+None", 0), (1, "A1+None", 0)]),
    ])  # fmt: skip


def test_left_join_window_bounds(drive, captured):
    """testWindowing (with Kafka's testUpperWindowBound and testLowerWindowBound)"""
    join = _LeftJoin(drive, captured, JoinWindows.of_time_difference_with_no_grace(100 * MS))
    join.run([
        (_same_time("topic1", "A", 0, KEYS[:2]), []),
        (_same_time("topic2", "a", 0), [(0, "A0+a0", 0), (1, "A1+a1", 0)]),
        # upper bound
        (_rising("topic2", "b", 1000), []),
        (_same_time("topic1", "B", 1100), [(0, "B0+b0", 1100), (1, "B1+b1", 1100), (2, "B2+b2", 1100),
                                           (3, "B3+b3", 1100)]),
        (_same_time("topic1", "C", 1101), [(1, "C1+b1", 1101), (2, "C2+b2", 1101), (3, "C3+b3", 1101)]),
        (_same_time("topic1", "D", 1102), [(2, "D2+b2", 1102), (3, "D3+b3", 1102)]),
        (_same_time("topic1", "E", 1103), [(3, "E3+b3", 1103)]),
        (_same_time("topic1", "F", 1104), []),
        (_one("topic1", 0, "dummy", 1405), [(0, "C0+None", 1101), (0, "D0+None", 1102), (1, "D1+None", 1102),
                                            (0, "E0+None", 1103), (1, "E1+None", 1103), (2, "E2+None", 1103),
                                            (0, "F0+None", 1104), (1, "F1+None", 1104), (2, "F2+None", 1104),
                                            (3, "F3+None", 1104)]),
        # lower bound
        (_same_time("topic1", "G", 899), [(0, "G0+None", 899), (1, "G1+None", 899), (2, "G2+None", 899),
                                          (3, "G3+None", 899)]),
        (_same_time("topic1", "H", 900), [(0, "H0+b0", 1000), (1, "H1+None", 900), (2, "H2+None", 900),
                                          (3, "H3+None", 900)]),
        (_same_time("topic1", "I", 901), [(0, "I0+b0", 1000), (1, "I1+b1", 1001), (2, "I2+None", 901),
                                          (3, "I3+None", 901)]),
        (_same_time("topic1", "J", 902), [(0, "J0+b0", 1000), (1, "J1+b1", 1001), (2, "J2+b2", 1002),
                                          (3, "J3+None", 902)]),
        (_same_time("topic1", "K", 903), [(0, "K0+b0", 1000), (1, "K1+b1", 1001), (2, "K2+b2", 1002),
                                          (3, "K3+b3", 1003)]),
        (_one("topic1", 0, "dummy", 1203), [(0, "dummy+None", 1203)]),
    ])  # fmt: skip


def test_left_join_with_zero_before_emits_a_left_record_the_later_window_no_longer_reaches(drive, captured):
    """shouldNotEmitLeftJoinResultForAsymmetricWindow"""
    join = _LeftJoin(drive, captured, JoinWindows.of_time_difference_with_no_grace(100 * MS).before(0 * MS))
    join.run([
        (("topic1", [(0, "A0", 0), (1, "A1", 1)]), []),
        (_one("topic2", 0, "a0", 100), [(0, "A0+a0", 100)]),
        (_one("topic2", 1, "a1", 102), [(1, "A1+None", 1)]),
    ])  # fmt: skip
