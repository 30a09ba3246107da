"""Keyed aggregations of a grouped stream: count, reduce and aggregate, plain and time-windowed.

The suppliers say what they compute (``kind`` is "count", "reduce" or "aggregate", with the store
name, serdes and window spec as attributes), so a compiler of DSL kernels can recognise, say, a
windowed count with a string key serde and replace the Python processor. As in Kafka Streams,
records with a null key are skipped, and so are null values except in windowed aggregations.

Timestamps are Kafka's: an aggregate is stored (``ValueAndTimestamp``) and forwarded with the
largest timestamp of the records that made it, so an out-of-order record updates the aggregate
without moving its result back in time (KStreamAggregate, KStreamReduce, KStreamWindowAggregate).
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable
from typing import Any, Literal

from kstreams._native.per_record import (
    AggregateStep,
    AggregatorStep,
    CountStep,
    ReduceStep,
    StreamAggregateCore,
    WindowedAggregateCore,
)
from kstreams.processor import Processor, ProcessorContext, Record
from kstreams.state.store import WindowedKey
from kstreams.topology.dsl.emit_strategy import EmitStrategy
from kstreams.topology.dsl.processors.emit_position import EmitPosition
from kstreams.topology.dsl.processors.forwarding import ChangeForwarder
from kstreams.topology.dsl.processors.store_access import (
    get_store,
    record_update,
    window_update,
)
from kstreams.topology.dsl.records import Change
from kstreams.topology.dsl.windows import TimeWindows

__all__ = [
    "AggregateKind",
    "StreamAggregateProcessor",
    "StreamAggregateSupplier",
    "WindowStoreAggregateProcessor",
    "WindowedAggregateProcessor",
    "WindowedAggregateSupplier",
    "combine",
    "count_aggregator",
    "count_initializer",
]

logger = logging.getLogger(__name__)

AggregateKind = Literal["count", "reduce", "aggregate"]


def count_initializer() -> int:
    return 0


def count_aggregator(key: Any, value: Any, aggregate: int) -> int:
    return aggregate + 1


def combine(
    kind: AggregateKind,
    initializer: Callable[[], Any] | None,
    aggregator: Callable[..., Any],
    key: Any,
    value: Any,
    aggregate: Any,
) -> Any:
    """``aggregate`` (None: none yet) updated with one value. reduce: ``aggregator(aggregate,
    value)``, the first value starting the aggregate; count and aggregate: ``aggregator(key, value,
    aggregate)``, starting from ``initializer()``."""
    if kind == "reduce":
        return value if aggregate is None else aggregator(aggregate, value)
    return aggregator(key, value, initializer() if aggregate is None else aggregate)  # type: ignore[misc]


def _step_function(
    kind: AggregateKind, initializer: Callable[[], Any] | None, aggregator: Callable[..., Any]
) -> AggregateStep:
    """``combine(kind, initializer, aggregator, key, value, old)`` as a function of ``(key, value,
    old)`` that the store accessors call from C (it pickles with the functions it holds)."""
    if kind == "reduce":
        return ReduceStep(aggregator)
    if aggregator is count_aggregator and initializer is count_initializer:
        return CountStep()
    return AggregatorStep(initializer, aggregator)


class _AggregationSpec:
    """What every aggregation supplier carries: kind, functions, store name and serdes."""

    def __init__(
        self,
        kind: AggregateKind,
        store_name: str,
        initializer: Callable[[], Any] | None,
        aggregator: Callable[..., Any],
        key_serde: Any = None,
        value_serde: Any = None,
    ) -> None:
        if kind not in ("count", "reduce", "aggregate"):
            raise ValueError(f"Unknown aggregation kind {kind!r}.")
        self.kind: AggregateKind = kind
        self.store_name = store_name
        self.initializer = initializer
        # count/aggregate: aggregator(key, value, aggregate); reduce: reducer(aggregate, value)
        self.aggregator = aggregator
        self.key_serde = key_serde
        self.value_serde = value_serde
        # ``combine`` for this kind and these functions as one call per record (the per-record
        # path calls it for every record and window)
        self._apply: Callable[[Any, Any, Any], Any] = _step_function(kind, initializer, aggregator)

    def own_step(self) -> AggregateStep:
        """A new ``_apply`` for one processor: an aggregate step remembers the initializer's value
        it last started from, which the processor forwards as a first update's old value, as
        Kafka does (so processors of several tasks must not share one)."""
        return _step_function(self.kind, self.initializer, self.aggregator)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, store={self.store_name!r})"


class StreamAggregateSupplier(_AggregationSpec):
    """Aggregates each key's records into a key-value store and forwards every new aggregate as
    ``Change(new, old)`` (through the store's cache when it caches)."""

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return StreamAggregateProcessor(self)


class StreamAggregateProcessor(StreamAggregateCore, Processor[Any, Any, Any, Any]):
    """The processor of a ``StreamAggregateSupplier``: ``store`` and ``forwarder`` are set at init
    (the batch compiler runs the same store and forwarder through its kernel); ``process`` is C
    (``StreamAggregateCore``)."""

    def __init__(self, spec: StreamAggregateSupplier) -> None:
        self.spec = spec

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.store = get_store(context, self.spec.store_name)
        self.forwarder = ChangeForwarder(self.store, context)
        self._cached = self.forwarder.cached
        self.route_changes(context, Change)
        self._step = record_update(self.store)
        self._apply = self.spec.own_step()

    def _skip(self, record: Record[Any, Any]) -> None:
        logger.debug(
            "Skipping a record with a null key or value in the %s into store %s.",
            self.spec.kind,
            self.spec.store_name,
        )


class _WindowedAggregationSpec(_AggregationSpec):
    """An aggregation supplier per window: its windows and when it forwards (on every update
    unless ``emit_strategy`` says on window close)."""

    def __init__(
        self,
        kind: AggregateKind,
        store_name: str,
        windows: Any,
        initializer: Callable[[], Any] | None,
        aggregator: Callable[..., Any],
        key_serde: Any = None,
        value_serde: Any = None,
        emit_strategy: EmitStrategy | None = None,
    ) -> None:
        super().__init__(kind, store_name, initializer, aggregator, key_serde, value_serde)
        self.windows = windows
        self.emit_strategy = emit_strategy or EmitStrategy.on_window_update()


class WindowedAggregateSupplier(_WindowedAggregationSpec):
    """Aggregates each key's records per time window into a window store and forwards every new
    aggregate keyed by ``WindowedKey(key, start, end)``.

    A record updates each of its windows that is still open: a window closes once stream time
    (the largest timestamp this processor has seen) reaches its end plus grace; records of closed
    windows are dropped (Kafka's ``windowEnd > streamTime - grace`` rule).

    With ``EmitStrategy.on_window_close()`` nothing is forwarded per update: each window's final
    aggregate is forwarded at most once, as ``Change(aggregate, None)`` at its stored timestamp,
    after the record whose stream time closes the window (KStreamWindowAggregate's
    ON_WINDOW_CLOSE), if the store still holds it then (see ``WindowStoreAggregateProcessor``).
    How far it got is kept in the ``<store>-emit-position`` store (see ``emit_position``), so a
    restarted task forwards neither a window twice nor a window less.
    """

    windows: TimeWindows

    @property
    def window_close_delay_ms(self) -> int:
        """How long after a window's end its aggregate may still change (what suppress waits)."""
        return self.windows.grace_ms

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return WindowedAggregateProcessor(self)


class WindowStoreAggregateProcessor(Processor[Any, Any, Any, Any]):
    """What the time- and sliding-window aggregations' processors share: their stream time and
    drop count, the window store and its forwarder, and emitting on window close. A subclass sets
    ``window_size_ms`` (the store's window size: a window's end is its start plus that), processes
    records, and says which window starts ``_closed_window_starts`` are due to emit.

    Emitting on window close is Kafka's emit-final: after a record's writes, the store is read
    (``fetch_all``) for the windows that closed since the last emission, and whatever it returns
    goes out. So a window that closed but that the store no longer returns is never emitted: Kafka's
    time-ordered store (the default, see ``RocksDBWindowStore``) returns a window while its start is
    at least the store's stream time (the latest window start written) minus the retention, and a
    jump of stream time can pass that for windows that closed with it. The store's cache, when it
    caches (as by default, as in Kafka), forwards nothing, but reads merge the windows it still
    holds, expired below or not, as Kafka's caching layer does."""

    def __init__(
        self, spec: _AggregationSpec, window_size_ms: int, grace_ms: int, emit_strategy: EmitStrategy
    ) -> None:
        self.spec = spec
        self.window_size_ms = window_size_ms
        self.grace_ms = grace_ms
        self.observed_stream_time = -1
        self.dropped = 0
        self.emit_on_close = emit_strategy.on_close
        # Emitting on close: the close time up to which final results went out, restored at init.
        self.emit_position: EmitPosition | None = None

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.store = get_store(context, self.spec.store_name)
        # Emitting on close, the store's cache (if it caches) forwards nothing: the final results
        # go out from _emit_closed_windows.
        self.forwarder = ChangeForwarder(
            self.store, context, key_mapper=self._window_key, flushes=not self.emit_on_close
        )
        self._step = window_update(self.store)
        if self.emit_on_close:
            self.emit_position = EmitPosition(context, self.spec.store_name)
            if self.emit_position.started:
                # Stream time was at least this when those windows closed: records for them are
                # late after a restart too, not aggregated into results that went out already.
                self.observed_stream_time = self.emit_position.close_time + self.grace_ms

    def _window_key(self, key: Any) -> WindowedKey[Any]:
        # A caching window store reports the window by its start; the end follows from the size
        # (the store's own window size, which is already right for time windows).
        if isinstance(key, WindowedKey):
            end = key.start + self.window_size_ms
            return key if key.end == end else WindowedKey(key.key, key.start, end)
        raise TypeError(f"Window store {self.spec.store_name} flushed a non-windowed key {key!r}.")

    @abc.abstractmethod
    def _closed_window_starts(self, position: EmitPosition, close_time: int) -> tuple[int, int]:
        """(lower, upper): the starts of the windows closed since ``position`` (both bounds
        inclusive); an upper bound below 0 means no window has closed yet."""

    def _some_window_starts_in(self, lower: int, upper: int) -> bool:
        """Whether a window can start in [lower, upper] (else the store need not be read)."""
        return True

    def _emit_closed_windows(self, headers: Any, close_time: int) -> None:
        """Forward the final aggregate of every window closed since the last emission that the
        store returns, as ``Change(aggregate, None)`` at its stored timestamp with the current
        record's ``headers``, and move the emit position on."""
        position = self.emit_position
        assert position is not None  # set at init when emitting on close
        if position.started and close_time <= position.close_time:
            return
        lower, upper = self._closed_window_starts(position, close_time)
        if upper < 0:
            return  # no window has closed yet
        forwarded = False
        if lower <= upper and self._some_window_starts_in(lower, upper):
            for window, stored in list(self.store.fetch_all(lower, upper)):
                forwarded = True
                self.context.forward(
                    Record(
                        WindowedKey(window.key, window.start, window.start + self.window_size_ms),
                        Change(stored.value, None),
                        stored.timestamp,
                        headers,
                    )
                )
        position.advance(close_time, forwarded)


class WindowedAggregateProcessor(WindowedAggregateCore, WindowStoreAggregateProcessor):
    """The processor of a ``WindowedAggregateSupplier``; ``observed_stream_time`` and ``dropped``
    are shared with the batch compiler's kernel, which advances them for the batches it runs.
    ``process`` is C (``WindowedAggregateCore``); Kafka's windowed aggregation skips only null
    keys (a null value still counts)."""

    spec: WindowedAggregateSupplier

    def __init__(self, spec: WindowedAggregateSupplier) -> None:
        super().__init__(spec, spec.windows.size_ms, spec.windows.grace_ms, spec.emit_strategy)
        self.size_ms = spec.windows.size_ms
        self.advance_ms = spec.windows.advance_ms
        self.windows_for = spec.windows.windows_for

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        super().init(context)
        self._cached = self.forwarder.cached
        self._apply = self.spec.own_step()
        if type(self)._forward_window is WindowedAggregateProcessor._forward_window:
            self.route_changes(context, Change)

    def _skip(self, record: Record[Any, Any]) -> None:
        logger.debug(
            "Skipping a record with a null key in the windowed %s into store %s.",
            self.spec.kind,
            self.spec.store_name,
        )

    def _expired(self, start: int, end: int) -> None:
        logger.debug(
            "Skipping a record for the expired window [%d, %d) of store %s: stream time %d, grace %d ms.",
            start,
            end,
            self.spec.store_name,
            self.observed_stream_time,
            self.grace_ms,
        )

    def _forward_window(
        self, key: Any, start: int, end: int, new: Any, old: Any, timestamp: int, headers: Any
    ) -> None:
        self.forwarder.maybe_forward(WindowedKey(key, start, end), new, old, timestamp, headers)

    def _some_window_starts_in(self, lower: int, upper: int) -> bool:
        # Time windows start at multiples of the advance. Kafka skips the read too when no new
        # window closed (shouldRangeFetch); a read of a range where none starts finds nothing.
        advance = self.advance_ms
        return -(-lower // advance) * advance <= upper

    def _closed_window_starts(self, position: EmitPosition, close_time: int) -> tuple[int, int]:
        # Windows starting in (last close time - size, close time - size], both bounds as Kafka's.
        upper = close_time - self.size_ms
        lower = 0 if not position.started else max(0, position.close_time - self.size_ms) + 1
        return lower, upper
