"""Window specifications of the DSL: TimeWindows (tumbling and hopping), SlidingWindows, JoinWindows
and SessionWindows.

Windows are aligned to the epoch: a window of size S advancing by A starts at multiples of A and
covers [start, start + S). Grace is how long after a window's end out-of-order records are still
accepted; a record whose windows all ended more than grace ago (by stream time) is dropped, as in
Kafka Streams.

Session windows have no fixed bounds: a session is a period of activity of one key, and a record
within the inactivity gap of a session extends it (or merges two sessions it bridges). A session
closes once stream time passes its end plus the gap plus the grace period.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from kstreams.topology.dsl.parameters import to_millis

__all__ = ["JoinWindows", "SessionWindows", "SlidingWindows", "TimeWindows"]

logger = logging.getLogger(__name__)

# Kafka's default grace before 3.0 was 24h minus the window size; the no-grace constructors
# replaced it, and the deprecated spelling keeps the old default for users porting code.
_DEPRECATED_DEFAULT_GRACE_MS = 24 * 60 * 60 * 1000


@dataclass(frozen=True)
class TimeWindows:
    """Fixed-size windows: tumbling when ``advance_ms == size_ms``, hopping when smaller."""

    size_ms: int
    advance_ms: int
    grace_ms: int

    @staticmethod
    def of_size_with_no_grace(size: timedelta | int) -> TimeWindows:
        size_ms = _positive(size, "TimeWindows size")
        return TimeWindows(size_ms, size_ms, 0)

    @staticmethod
    def of_size_and_grace(size: timedelta | int, grace: timedelta | int) -> TimeWindows:
        size_ms = _positive(size, "TimeWindows size")
        return TimeWindows(size_ms, size_ms, to_millis(grace, "TimeWindows grace"))

    @staticmethod
    def of(size: timedelta | int) -> TimeWindows:
        """Kafka's deprecated ``TimeWindows.of``: grace of 24h minus the size (at least 0)."""
        size_ms = _positive(size, "TimeWindows size")
        return TimeWindows(size_ms, size_ms, max(_DEPRECATED_DEFAULT_GRACE_MS - size_ms, 0))

    def advance_by(self, advance: timedelta | int) -> TimeWindows:
        """Hopping windows: a new window starts every ``advance`` (0 < advance <= size)."""
        advance_ms = _positive(advance, "TimeWindows advance")
        if advance_ms > self.size_ms:
            raise ValueError(
                f"TimeWindows advance ({advance_ms} ms) must not be larger than the window size "
                f"({self.size_ms} ms): records between windows would belong to none."
            )
        return TimeWindows(self.size_ms, advance_ms, self.grace_ms)

    def grace(self, grace: timedelta | int) -> TimeWindows:
        return TimeWindows(self.size_ms, self.advance_ms, to_millis(grace, "TimeWindows grace"))

    def size(self) -> int:
        return self.size_ms

    def grace_period_ms(self) -> int:
        return self.grace_ms

    @property
    def tumbling(self) -> bool:
        return self.advance_ms == self.size_ms

    def windows_for(self, timestamp: int) -> list[tuple[int, int]]:
        """Every window (start, end) that contains ``timestamp``, oldest first."""
        size, advance = self.size_ms, self.advance_ms
        if advance == size:  # tumbling (see ``tumbling``): one window, found per record
            start = timestamp - timestamp % size
            return [(start, start + size)]
        start = (max(0, timestamp - size + advance) // advance) * advance
        windows = []
        while start <= timestamp:
            windows.append((start, start + size))
            start += advance
        return windows


@dataclass(frozen=True)
class JoinWindows:
    """How far apart in time two records may be to join: ``before_ms`` earlier and ``after_ms``
    later than the record of this (left) stream, with grace for out-of-order records."""

    before_ms: int
    after_ms: int
    grace_ms: int
    # The no-grace/with-grace constructors (Kafka 3.0+) emit left/outer results only once the
    # window closed, so a record that joins later never first appears unjoined.
    spurious_result_fix: bool = True

    @staticmethod
    def of_time_difference_with_no_grace(difference: timedelta | int) -> JoinWindows:
        ms = to_millis(difference, "JoinWindows time difference")
        return JoinWindows(ms, ms, 0)

    @staticmethod
    def of_time_difference_and_grace(difference: timedelta | int, grace: timedelta | int) -> JoinWindows:
        ms = to_millis(difference, "JoinWindows time difference")
        return JoinWindows(ms, ms, to_millis(grace, "JoinWindows grace"))

    @staticmethod
    def of(difference: timedelta | int) -> JoinWindows:
        """Kafka's deprecated ``JoinWindows.of``: 24h grace and eager left/outer results."""
        ms = to_millis(difference, "JoinWindows time difference")
        return JoinWindows(ms, ms, max(_DEPRECATED_DEFAULT_GRACE_MS - 2 * ms, 0), spurious_result_fix=False)

    def before(self, before: timedelta | int) -> JoinWindows:
        ms = to_millis(before, "JoinWindows before") if not isinstance(before, int) else before
        return self._checked(ms, self.after_ms)

    def after(self, after: timedelta | int) -> JoinWindows:
        ms = to_millis(after, "JoinWindows after") if not isinstance(after, int) else after
        return self._checked(self.before_ms, ms)

    def grace(self, grace: timedelta | int) -> JoinWindows:
        return JoinWindows(
            self.before_ms, self.after_ms, to_millis(grace, "JoinWindows grace"), self.spurious_result_fix
        )

    def _checked(self, before_ms: int, after_ms: int) -> JoinWindows:
        if before_ms + after_ms < 0:
            raise ValueError(
                f"JoinWindows before ({before_ms} ms) plus after ({after_ms} ms) must not be negative."
            )
        return JoinWindows(before_ms, after_ms, self.grace_ms, self.spurious_result_fix)

    def size(self) -> int:
        return self.before_ms + self.after_ms

    def grace_period_ms(self) -> int:
        return self.grace_ms


@dataclass(frozen=True)
class SlidingWindows:
    """Windows of fixed size ``time_difference_ms`` that follow the records (Kafka's ``SlidingWindows``):
    two records share a window when their timestamps differ by at most the time difference. Both
    ends are inclusive: a window ``[start, start + time_difference_ms]``. Windows exist only at
    record boundaries: one ending at each record, and one starting just after it while later records
    fall in it; a window closes once stream time passes its end plus grace."""

    time_difference_ms: int
    grace_ms: int

    @staticmethod
    def of_time_difference_with_no_grace(time_difference: timedelta | int) -> SlidingWindows:
        return SlidingWindows(to_millis(time_difference, "SlidingWindows time difference"), 0)

    @staticmethod
    def of_time_difference_and_grace(
        time_difference: timedelta | int, after_window_end: timedelta | int
    ) -> SlidingWindows:
        return SlidingWindows(
            to_millis(time_difference, "SlidingWindows time difference"),
            to_millis(after_window_end, "SlidingWindows grace (after_window_end)"),
        )

    def grace_period_ms(self) -> int:
        return self.grace_ms


@dataclass(frozen=True)
class SessionWindows:
    """Sessions of activity per key, separated by at least ``gap_ms`` of inactivity.

    Records of a key less than (or exactly) ``gap_ms`` apart fall into one session, whose start and
    end are its first and last record's timestamps (both inclusive). Out-of-order records are
    merged into their sessions until stream time passes the session's end plus gap plus grace.
    """

    gap_ms: int
    grace_ms: int

    @staticmethod
    def of_inactivity_gap_with_no_grace(inactivity_gap: timedelta | int) -> SessionWindows:
        return SessionWindows(_positive(inactivity_gap, "SessionWindows inactivity gap"), 0)

    @staticmethod
    def of_inactivity_gap_and_grace(
        inactivity_gap: timedelta | int, after_window_end: timedelta | int
    ) -> SessionWindows:
        return SessionWindows(
            _positive(inactivity_gap, "SessionWindows inactivity gap"),
            to_millis(after_window_end, "SessionWindows grace"),
        )

    @staticmethod
    def with_(inactivity_gap: timedelta | int) -> SessionWindows:
        """Kafka's deprecated ``SessionWindows.with``: grace of 24h minus the gap (at least 0)."""
        gap_ms = _positive(inactivity_gap, "SessionWindows inactivity gap")
        return SessionWindows(gap_ms, max(_DEPRECATED_DEFAULT_GRACE_MS - gap_ms, 0))

    def grace(self, after_window_end: timedelta | int) -> SessionWindows:
        return SessionWindows(self.gap_ms, to_millis(after_window_end, "SessionWindows grace"))

    def inactivity_gap(self) -> int:
        return self.gap_ms

    def grace_period_ms(self) -> int:
        return self.grace_ms


def _positive(duration: timedelta | int, what: str) -> int:
    ms = to_millis(duration, what)
    if ms == 0:
        raise ValueError(f"{what} must be positive, got 0 ms.")
    return ms
