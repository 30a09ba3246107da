"""TimeWindows and JoinWindows: window assignment, durations and validation."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kstreams.topology import JoinWindows, TimeWindows


def test_tumbling_windows_are_aligned_to_the_epoch():
    windows = TimeWindows.of_size_with_no_grace(timedelta(seconds=1))
    assert windows.tumbling
    assert windows.windows_for(0) == [(0, 1000)]
    assert windows.windows_for(1999) == [(1000, 2000)]


def test_hopping_windows_cover_a_record_once_per_advance():
    windows = TimeWindows.of_size_with_no_grace(100).advance_by(25)
    assert not windows.tumbling
    assert windows.windows_for(110) == [(25, 125), (50, 150), (75, 175), (100, 200)]
    # Near the epoch no window starts before 0.
    assert windows.windows_for(10) == [(0, 100)]


def test_grace_and_durations_accept_timedelta_and_milliseconds():
    windows = TimeWindows.of_size_and_grace(timedelta(minutes=1), 5000)
    assert (windows.size(), windows.grace_period_ms()) == (60000, 5000)
    assert TimeWindows.of(1000).grace_ms == 24 * 3600 * 1000 - 1000


def test_invalid_windows_are_rejected_with_a_reason():
    with pytest.raises(ValueError, match="positive"):
        TimeWindows.of_size_with_no_grace(0)
    with pytest.raises(ValueError, match="larger than the window size"):
        TimeWindows.of_size_with_no_grace(10).advance_by(20)
    with pytest.raises(ValueError, match="negative"):
        TimeWindows.of_size_and_grace(10, -1)
    with pytest.raises(TypeError, match="timedelta"):
        TimeWindows.of_size_with_no_grace("10s")  # type: ignore[arg-type]


def test_join_windows_before_after_and_grace():
    windows = JoinWindows.of_time_difference_and_grace(timedelta(seconds=2), timedelta(seconds=1))
    assert (windows.before_ms, windows.after_ms, windows.grace_ms) == (2000, 2000, 1000)
    assert windows.size() == 4000
    asymmetric = JoinWindows.of_time_difference_with_no_grace(100).before(0)
    assert (asymmetric.before_ms, asymmetric.after_ms, asymmetric.size()) == (0, 100, 100)
    assert windows.spurious_result_fix
    assert not JoinWindows.of(100).spurious_result_fix
