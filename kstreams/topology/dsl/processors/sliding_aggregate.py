"""Sliding-window aggregations of a grouped stream: count, reduce and aggregate per key over
``SlidingWindows`` (Kafka's ``KStreamSlidingWindowAggregate``).

A window is ``[start, start + d]`` (both ends inclusive, d the time difference) and exists only at
record boundaries. A record at ``t`` updates every existing window that holds it, creates its left
window ``[t - d, t]`` (from the aggregate of the previous record's window when that record is in
it), its right window ``[t + 1, t + 1 + d]`` when later records fall in it (out-of-order records),
and the right window of the previous record when the record falls in it. Records before ``d``
(whose left windows would start before 0) share the window ``[0, d]``.

Guarantees, as Kafka's: records with a null key or value are skipped; a record is dropped when
stream time has passed ``t + 1 + d`` plus grace (its windows are all closed), and an update of a
window is skipped once stream time has passed the window's end plus grace. Aggregates are stored
as ``ValueAndTimestamp`` in a timestamped window store of window size d and forwarded, keyed by
``WindowedKey(key, start, start + d)``, with the largest timestamp of the records in the window.
The supplier carries ``kind``, ``store_name``, the serdes and ``windows`` like the other
aggregation suppliers, but it is its own class: the batch compiler recognises only TimeWindows
aggregations, so this one always runs record by record.

With ``EmitStrategy.on_window_close()`` no update is forwarded: after each record (not one at
``t < d``, nor one dropped as late: Kafka's processor returns before it), the windows closed since
the last emission that the store still holds go out, as ``Change(aggregate, None)`` at their stored
timestamps (Kafka's ``KStreamSlidingWindowAggregate`` with ON_WINDOW_CLOSE; see
``WindowStoreAggregateProcessor`` for which windows the store still holds); the close time reached
is kept in the ``<store>-emit-position`` store (see ``emit_position``) for restarts.
"""

from __future__ import annotations

import logging
from typing import Any

from kstreams.processor import Processor, Record
from kstreams.state.store import WindowedKey
from kstreams.state.value_and_timestamp import ValueAndTimestamp
from kstreams.topology.dsl.processors.aggregate import (
    WindowStoreAggregateProcessor,
    _WindowedAggregationSpec,
)
from kstreams.topology.dsl.processors.emit_position import EmitPosition
from kstreams.topology.dsl.windows import SlidingWindows

__all__ = ["SlidingWindowAggregateProcessor", "SlidingWindowAggregateSupplier"]

logger = logging.getLogger(__name__)


class SlidingWindowAggregateSupplier(_WindowedAggregationSpec):
    """Aggregates each key's records per sliding window into a timestamped window store and
    forwards every new aggregate as ``Change(new, old)`` keyed by ``WindowedKey``."""

    windows: SlidingWindows

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return SlidingWindowAggregateProcessor(self)


class SlidingWindowAggregateProcessor(WindowStoreAggregateProcessor):
    """The processor of a ``SlidingWindowAggregateSupplier``. ``observed_stream_time`` is the
    largest timestamp it has seen; ``dropped`` counts records and window updates it skipped."""

    spec: SlidingWindowAggregateSupplier

    def __init__(self, spec: SlidingWindowAggregateSupplier) -> None:
        windows = spec.windows
        super().__init__(spec, windows.time_difference_ms, windows.grace_ms, spec.emit_strategy)
        self.difference_ms = windows.time_difference_ms

    def process(self, record: Record[Any, Any]) -> None:
        if record.key is None or record.value is None:
            self.dropped += 1
            logger.debug(
                "Skipping a record with a null key or value in the sliding-window %s into store %s.",
                self.spec.kind,
                self.spec.store_name,
            )
            return
        timestamp = record.timestamp
        self.observed_stream_time = max(self.observed_stream_time, timestamp)
        close_time = self.observed_stream_time - self.grace_ms
        # The latest window this record can touch is its right window, ending at t + 1 + d.
        if timestamp + 1 + self.difference_ms <= close_time:
            self.dropped += 1
            logger.debug(
                "Skipping a record at %d for the expired windows of store %s: stream time %d, grace %d ms.",
                timestamp,
                self.spec.store_name,
                self.observed_stream_time,
                self.grace_ms,
            )
            return
        if timestamp < self.difference_ms:
            # Kafka's processEarly returns before maybeForwardFinalResult: an early record never
            # emits final results.
            self._process_early(record, close_time)
            return
        self._process(record, close_time)
        if self.emit_on_close:
            # After this record's writes, as Kafka's: they move the store's retention on.
            self._emit_closed_windows(record.headers, close_time)

    def _closed_window_starts(self, position: EmitPosition, close_time: int) -> tuple[int, int]:
        # A window [start, start + d] is closed once its end is before the close time, so the
        # windows to forward start in [last close time - d, close time - d - 1] (Kafka's bounds).
        upper = close_time - self.difference_ms - 1
        lower = 0 if not position.started else max(0, position.close_time - self.difference_ms)
        return lower, upper

    def _windows_from_latest(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        """The key's (start, ValueAndTimestamp) with time_from <= start <= time_to, latest first.

        Kafka walks them backwards when its store can (its default stores can), and the order
        decides the order of the updates forwarded; the result is the same either way."""
        found = list(self.store.fetch_range(key, max(0, time_from), time_to))
        found.reverse()
        return found

    def _process(self, record: Record[Any, Any], close_time: int) -> None:
        key, timestamp, difference = record.key, record.timestamp, self.difference_ms
        starts: set[int] = set()
        # The aggregate of the latest window before the record's left window (it seeds that window)
        # and of the latest window holding the record but ending after it (it seeds the right one).
        left_aggregate: ValueAndTimestamp[Any] | None = None
        right_aggregate: ValueAndTimestamp[Any] | None = None
        left_exists = right_exists = False
        previous_timestamp: int | None = None
        # Windows older than t - 2d can hold no record of the left window: the retention's reason.
        for start, stored in self._windows_from_latest(key, timestamp - 2 * difference, timestamp + 1):
            starts.add(start)
            end = start + difference
            if start == timestamp + 1:
                right_exists = True
            elif end > timestamp:
                if right_aggregate is None:
                    right_aggregate = stored
                self._update(key, start, stored, record, close_time)
            elif end == timestamp:
                left_exists = True
                self._update(key, start, stored, record, close_time)
                if stored.timestamp >= timestamp:
                    # A record at this very timestamp came before: every window it needs exists.
                    return
                previous_timestamp = stored.timestamp
            else:
                left_aggregate = stored
                previous_timestamp = stored.timestamp
                break
        self._create_windows(
            record,
            close_time,
            starts,
            left_aggregate,
            right_aggregate,
            left_exists,
            right_exists,
            previous_timestamp,
        )

    def _process_early(self, record: Record[Any, Any], close_time: int) -> None:
        """A record at t < d: its left window would start before 0, so the window [0, d] holds
        every such record (Kafka's workaround), and right windows are made as for other records."""
        key, timestamp = record.key, record.timestamp
        starts: set[int] = set()
        combined: ValueAndTimestamp[Any] | None = None
        right_aggregate: ValueAndTimestamp[Any] | None = None
        right_exists = False
        previous_timestamp: int | None = None
        for start, stored in self.store.fetch_range(key, 0, timestamp + 1):
            starts.add(start)
            if start == 0:
                combined = stored
                # A record after this one in [0, d] has already made the previous record's right window.
                if stored.timestamp < timestamp:
                    previous_timestamp = stored.timestamp
            elif start <= timestamp:
                right_aggregate = stored
                self._update(key, start, stored, record, close_time)
            elif start == timestamp + 1:
                right_exists = True
            else:
                raise AssertionError(
                    f"Store {self.spec.store_name}: unexpected window starting at {start} for a record "
                    f"at {timestamp}."
                )
        # Without a window between, [0, d]'s later records are exactly those of the right window.
        if right_aggregate is None and combined is not None and combined.timestamp > timestamp:
            right_aggregate = combined
        if not right_exists and right_aggregate is not None and right_aggregate.timestamp > timestamp:
            self._create_right_window(key, timestamp, right_aggregate, record.headers)
        if previous_timestamp is not None and previous_timestamp + 1 not in starts:
            self._create_previous_right_window(previous_timestamp + 1, record, close_time)
        seed = combined if combined is not None else self._initial(timestamp)
        self._update(key, 0, seed, record, close_time)

    def _create_windows(
        self,
        record: Record[Any, Any],
        close_time: int,
        starts: set[int],
        left_aggregate: ValueAndTimestamp[Any] | None,
        right_aggregate: ValueAndTimestamp[Any] | None,
        left_exists: bool,
        right_exists: bool,
        previous_timestamp: int | None,
    ) -> None:
        key, timestamp, difference = record.key, record.timestamp, self.difference_ms
        if previous_timestamp is not None:
            # The previous record's right window, when the record falls in it.
            previous_right_start = previous_timestamp + 1
            if previous_right_start not in starts and previous_right_start + difference >= timestamp:
                self._create_previous_right_window(previous_right_start, record, close_time)
        if not left_exists:
            seed: ValueAndTimestamp[Any] | None
            if previous_timestamp is not None and timestamp - difference <= previous_timestamp:
                # The previous record is in the left window: start from its window's aggregate.
                assert left_aggregate is not None
                seed = ValueAndTimestamp.make(left_aggregate.value, timestamp)
            else:
                seed = self._initial(timestamp)
            self._update(key, timestamp - difference, seed, record, close_time)
        if not right_exists and right_aggregate is not None and right_aggregate.timestamp > timestamp:
            self._create_right_window(key, timestamp, right_aggregate, record.headers)

    def _initial(self, timestamp: int) -> ValueAndTimestamp[Any] | None:
        """A new window's starting aggregate: the initializer's (none for reduce)."""
        initializer = self.spec.initializer
        return None if initializer is None else ValueAndTimestamp.make(initializer(), timestamp)

    def _create_right_window(
        self, key: Any, timestamp: int, aggregate: ValueAndTimestamp[Any], headers: Any
    ) -> None:
        """The record's right window holds exactly the later records of ``aggregate``'s window."""
        start = timestamp + 1
        self.store.put(key, aggregate, start)
        if not self.emit_on_close:
            self.forwarder.maybe_forward(
                WindowedKey(key, start, start + self.difference_ms),
                aggregate.value,
                None,
                aggregate.timestamp,
                headers,
            )

    def _create_previous_right_window(self, start: int, record: Record[Any, Any], close_time: int) -> None:
        self._update(record.key, start, self._initial(record.timestamp), record, close_time)

    def _update(
        self,
        key: Any,
        start: int,
        stored: ValueAndTimestamp[Any] | None,
        record: Record[Any, Any],
        close_time: int,
    ) -> None:
        """Add the record to the window at ``start`` (``stored``: its aggregate so far), store and
        forward the result, unless the window has closed."""
        end = start + self.difference_ms
        if end < close_time:
            self.dropped += 1
            logger.debug(
                "Skipping an update of the expired window [%d, %d] of store %s: stream time %d, grace %d ms.",
                start,
                end,
                self.spec.store_name,
                self.observed_stream_time,
                self.grace_ms,
            )
            return
        old = None if stored is None else stored.value
        new = self.spec._apply(key, record.value, old)
        new_timestamp = record.timestamp if stored is None else max(record.timestamp, stored.timestamp)
        self.store.put(key, ValueAndTimestamp.make(new, new_timestamp), start)
        if not self.emit_on_close:
            self.forwarder.maybe_forward(
                WindowedKey(key, start, end), new, old, new_timestamp, record.headers
            )
