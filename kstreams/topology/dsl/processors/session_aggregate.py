"""Session-windowed aggregations of a grouped stream: count, reduce and aggregate per session.

A session is a period of activity of one key: its records are at most the inactivity gap apart,
and it spans [first record's timestamp, last record's timestamp], both inclusive. As in Kafka's
``KStreamSessionWindowAggregate``, a record at ``ts``:

- finds its key's sessions that end at or after ``ts - gap`` and start at or before ``ts + gap``;
- merges them, with itself, into one session (``merger(key, agg1, agg2)`` folds their aggregates
  in order of their ends, starting from ``initializer()``; then ``aggregator(key, value, agg)``);
- is dropped (and counted in ``dropped``) when that merged session ended before stream time minus
  grace minus gap: the session has closed;
- else removes every session it merged, forwarding a tombstone ``Change(None, old)`` for each,
  and writes the merged session, forwarding ``Change(new, None)``.

Every update is forwarded with the session's end as its timestamp, through the store's cache when
it caches (the cache then forwards at flush, also at the session's end, with the headers of the
record that last wrote the entry). Without a cache, updates and tombstones carry no headers: Kafka's
processor forwards records it makes anew, without the input's headers. Records with a null key are
skipped; a null value is aggregated like any other, as in Kafka.

The functions run where Kafka's do: the merger while the record's sessions are merged, before
anything is written (a merger that raises leaves the store and the output untouched); the
aggregator after the merged sessions are removed (and their tombstones forwarded), before the new
session is written.

The supplier says what it computes (``kind``, ``store_name``, serdes, ``windows``, ``merger``), as
the other aggregation suppliers do, so describe() and a compiler of DSL kernels can see it.

With ``EmitStrategy.on_window_close()`` (Kafka's ON_WINDOW_CLOSE) no update and no tombstone is
forwarded: each session's final aggregate is forwarded once, as ``Change(aggregate, None)`` at the
session's end with the headers of the record that closed it, when stream time closes it (its end <
stream time - gap - grace: the drop rule above). After each record (dropped or not) and its writes,
as Kafka's ``maybeForwardFinalResult``, the sessions of every key that the store lists as ending in
[last close time, close time - 1] go out (``find_sessions_by_end``, Kafka's
``findSessions(earliestEnd, latestEnd)``); a session merged away by the record is gone by then. How
far it got is kept in the ``<store>-emit-position`` store (see ``emit_position``), so a restarted
task forwards neither a session twice nor a session less.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kstreams.processor import Processor, ProcessorContext, Record
from kstreams.state.store import WindowedKey
from kstreams.topology.dsl.emit_strategy import EmitStrategy
from kstreams.topology.dsl.processors.aggregate import AggregateKind, _AggregationSpec
from kstreams.topology.dsl.processors.emit_position import EmitPosition
from kstreams.topology.dsl.processors.forwarding import ChangeForwarder
from kstreams.topology.dsl.processors.store_access import get_store
from kstreams.topology.dsl.records import Change
from kstreams.topology.dsl.windows import SessionWindows

__all__ = [
    "ReduceMerger",
    "SessionAggregateProcessor",
    "SessionAggregateSupplier",
    "SessionChangeForwarder",
    "count_merger",
]

logger = logging.getLogger(__name__)


def count_merger(key: Any, count1: int, count2: int) -> int:
    """Two sessions' counts merged: their sum."""
    return count1 + count2


class ReduceMerger:
    """The merger of a session reduce: ``reducer(agg1, agg2)``, or ``agg2`` while nothing was
    reduced yet (Kafka derives it from the reduce aggregator the same way)."""

    def __init__(self, reducer: Callable[[Any, Any], Any]) -> None:
        self.reducer = reducer

    def __call__(self, key: Any, aggregate1: Any, aggregate2: Any) -> Any:
        return aggregate2 if aggregate1 is None else self.reducer(aggregate1, aggregate2)


class SessionAggregateSupplier(_AggregationSpec):
    """Aggregates each key's records per session into a session store and forwards every change
    keyed by ``WindowedKey(key, session_start, session_end)``."""

    def __init__(
        self,
        kind: AggregateKind,
        store_name: str,
        windows: SessionWindows,
        initializer: Callable[[], Any] | None,
        aggregator: Callable[..., Any],
        merger: Callable[[Any, Any, Any], Any],
        key_serde: Any = None,
        value_serde: Any = None,
        emit_strategy: EmitStrategy | None = None,
    ) -> None:
        super().__init__(kind, store_name, initializer, aggregator, key_serde, value_serde)
        self.windows = windows
        self.merger = merger
        self.emit_strategy = emit_strategy or EmitStrategy.on_window_update()

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return SessionAggregateProcessor(self)


class SessionChangeForwarder(ChangeForwarder):
    """A ``ChangeForwarder`` whose cache-flushed updates carry the session's end as their timestamp
    (Kafka's ``SessionCacheFlushListener``), whichever record last wrote the cached entry."""

    def _on_flush(self, key: Any, new: Any, old: Any, timestamp: int, headers: Any = None) -> None:
        if isinstance(key, WindowedKey):
            timestamp = key.end
        super()._on_flush(key, new, old, timestamp, headers)


class SessionAggregateProcessor(Processor[Any, Any, Any, Any]):
    """The processor of a ``SessionAggregateSupplier``. ``observed_stream_time`` is the largest
    timestamp it has seen; ``dropped`` counts the records of closed sessions it skipped."""

    def __init__(self, spec: SessionAggregateSupplier) -> None:
        self.spec = spec
        self.gap_ms = spec.windows.gap_ms
        self.grace_ms = spec.windows.grace_ms
        self.observed_stream_time = -1
        self.dropped = 0
        self.emit_on_close = spec.emit_strategy.on_close
        # Emitting on close: the close time up to which final results went out, restored at init.
        self.emit_position: EmitPosition | None = None

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.store = get_store(context, self.spec.store_name)
        self.forwarder = SessionChangeForwarder(self.store, context)
        if self.emit_on_close:
            self.emit_position = EmitPosition(context, self.spec.store_name)
            if self.emit_position.started:
                # Stream time was at least this when those sessions closed: records for them are
                # late after a restart too, not merged into results that went out already.
                self.observed_stream_time = self.emit_position.close_time + self.gap_ms + self.grace_ms

    def process(self, record: Any) -> None:
        key = record.key
        if key is None:
            logger.debug(
                "Skipping a record with a null key in the session %s into store %s.",
                self.spec.kind,
                self.spec.store_name,
            )
            return
        spec = self.spec
        timestamp = record.timestamp
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp
        # Kafka's rule: a session closes once stream time passes its end plus gap plus grace (the
        # gap too: until then a record could still extend the session).
        close_time = self.observed_stream_time - self.grace_ms - self.gap_ms

        start = end = timestamp
        aggregate = spec.initializer() if spec.initializer is not None else None
        # Read in full before writing: the store is changed below.
        merged = list(self.store.find_sessions(key, timestamp - self.gap_ms, timestamp + self.gap_ms))
        for session, value in merged:
            aggregate = spec.merger(key, aggregate, value)
            start = min(start, session.start)
            end = max(end, session.end)

        if end < close_time:
            self.dropped += 1
            logger.debug(
                "Skipping a record at %d for the closed session [%d, %d] of store %s: stream time %d, "
                "gap %d ms, grace %d ms.",
                timestamp,
                start,
                end,
                spec.store_name,
                self.observed_stream_time,
                self.gap_ms,
                self.grace_ms,
            )
        else:
            self._write(record, key, start, end, aggregate, merged)
        if self.emit_on_close:
            self._emit_closed_sessions(record, close_time)

    def _write(
        self, record: Any, key: Any, start: int, end: int, aggregate: Any, merged: list[tuple[Any, Any]]
    ) -> None:
        """Replace the ``merged`` sessions with the record's session [start, end], whose aggregate
        so far (before the record's value) is ``aggregate``."""
        spec = self.spec
        timestamp = record.timestamp
        new_session = WindowedKey(key, start, end)
        if start != timestamp or end != timestamp:
            # The record joined existing sessions: they are replaced by the merged one (even one
            # with the same bounds: Kafka removes it and forwards its tombstone first too).
            for session, value in merged:
                self.store.remove(session)
                if not self.emit_on_close:
                    # no headers: Kafka forwards a record it makes anew
                    self.forwarder.maybe_forward(session, None, value, session.end)
        if spec.kind == "reduce":
            aggregate = record.value if aggregate is None else spec.aggregator(aggregate, record.value)
        else:
            aggregate = spec.aggregator(key, record.value, aggregate)
        self.store.put(new_session, aggregate)
        if not self.emit_on_close:
            self.forwarder.maybe_forward(new_session, aggregate, None, end)

    def _emit_closed_sessions(self, record: Any, close_time: int) -> None:
        """Forward the final aggregate of every session of any key that the store lists as ending
        in [last close time, close time - 1] (both session ends inclusive, hence the - 1: Kafka's
        bounds), with the record's headers."""
        position = self.emit_position
        assert position is not None  # set at init when emitting on close
        last = position.close_time
        if position.started and close_time <= last:
            return
        upper = close_time - 1
        if upper < 0:
            return  # no session has closed yet
        lower = max(0, last)
        forwarded = False
        for session, aggregate in list(self.store.find_sessions_by_end(lower, upper)):
            forwarded = True
            self.context.forward(Record(session, Change(aggregate, None), session.end, record.headers))
        position.advance(close_time, forwarded)
