"""Suppressed and BufferConfig: how ``KTable.suppress`` holds back a table's updates, and how it adds
the suppression to the topology (Kafka's ``Suppressed``, ``BufferConfig`` and ``KTableImpl.suppress``).

- ``Suppressed.until_window_closes(BufferConfig.unbounded())``: a windowed table's final results,
  one per window, once stream time passes the window's end plus the aggregation's grace.
- ``Suppressed.until_time_limit(limit, buffer_config)``: a key's latest value once stream time
  passes the time of its first buffered update plus ``limit`` (rate limiting).

``BufferConfig.max_records(n)`` / ``.max_bytes(n)`` bound the buffer and emit the oldest entries
early when it is full (``.emit_early_when_full()``, the default for a bound); ``.shutdown_when_full()``
stops the application instead, and ``BufferConfig.unbounded()`` never fills. ``until_window_closes``
accepts only buffers that never emit early: a final result must be final.

Names are Kafka's: the processor is ``KTABLE-SUPPRESS-<n>`` and its buffer store
``KTABLE-SUPPRESS-STATE-STORE-<n+1>``; ``with_name("x")`` names them ``x`` and ``x-store``. The
buffer is logged to ``<application.id>-<store>-changelog`` unless ``with_logging_disabled()``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from kstreams.errors import TopologyException
from kstreams.state.time_ordered_buffer import WindowedKeyFormat
from kstreams.topology.dsl import naming
from kstreams.topology.dsl.parameters import Named, to_millis
from kstreams.topology.dsl.windows import SessionWindows, SlidingWindows, TimeWindows

if TYPE_CHECKING:
    from kstreams.topology.dsl.ktable import KTable

__all__ = ["BufferConfig", "Suppressed", "suppress_table", "window_close_delay_ms"]

logger = logging.getLogger(__name__)

# No bound: Kafka's Long.MAX_VALUE.
UNBOUNDED = (1 << 63) - 1

BufferFullStrategy = Literal["emit", "shut_down"]


def _limit(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"BufferConfig {what} must be an int, got {value!r}.")
    if value < 0:
        raise ValueError(f"BufferConfig {what} must not be negative, got {value}.")
    return value


@dataclass(frozen=True)
class BufferConfig:
    """How much a suppression buffer may hold and what happens when it is full.

    ``strategy`` is "emit" (emit the oldest entries early: Kafka's ``EagerBufferConfig``) or
    "shut_down" (fail and stop the application: Kafka's ``StrictBufferConfig``).
    """

    max_records_limit: int = UNBOUNDED
    max_bytes_limit: int = UNBOUNDED
    strategy: BufferFullStrategy = "shut_down"
    logging_enabled: bool = True
    log_config: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    @staticmethod
    def max_records(record_limit: int) -> BufferConfig:
        """At most ``record_limit`` keys; emit the oldest early when full (change with
        ``shutdown_when_full()``)."""
        return BufferConfig(max_records_limit=_limit(record_limit, "max_records"), strategy="emit")

    @staticmethod
    def max_bytes(byte_limit: int) -> BufferConfig:
        """At most ``byte_limit`` bytes; emit the oldest early when full (change with
        ``shutdown_when_full()``)."""
        return BufferConfig(max_bytes_limit=_limit(byte_limit, "max_bytes"), strategy="emit")

    @staticmethod
    def unbounded() -> BufferConfig:
        """No bound: the buffer grows as needed (and the application fails if memory runs out)."""
        return BufferConfig()

    def with_max_records(self, record_limit: int) -> BufferConfig:
        return replace(self, max_records_limit=_limit(record_limit, "max_records"))

    def with_max_bytes(self, byte_limit: int) -> BufferConfig:
        return replace(self, max_bytes_limit=_limit(byte_limit, "max_bytes"))

    def with_no_bound(self) -> BufferConfig:
        """No bound and never emit early (Kafka's ``withNoBound``)."""
        return replace(self, max_records_limit=UNBOUNDED, max_bytes_limit=UNBOUNDED, strategy="shut_down")

    def shutdown_when_full(self) -> BufferConfig:
        """When full, stop the application with an error instead of emitting early."""
        return replace(self, strategy="shut_down")

    # Kafka's spelling, ``shutDownWhenFull``, in snake_case.
    shut_down_when_full = shutdown_when_full

    def emit_early_when_full(self) -> BufferConfig:
        """When full, emit the oldest entries early (before their time) to make room."""
        return replace(self, strategy="emit")

    def with_logging_disabled(self) -> BufferConfig:
        """Keep the buffer only in memory: a restart loses what it held."""
        return replace(self, logging_enabled=False, log_config={})

    def with_logging_enabled(self, config: dict[str, str] | None = None) -> BufferConfig:
        """Log the buffer to its changelog (the default), with ``config`` for the changelog topic."""
        return replace(self, logging_enabled=True, log_config=dict(config or {}))

    @property
    def bounded(self) -> bool:
        return self.max_records_limit != UNBOUNDED or self.max_bytes_limit != UNBOUNDED


# The name annotations inside Suppressed use, where BufferConfig is Suppressed's own attribute.
_BufferConfig = BufferConfig


@dataclass(frozen=True)
class Suppressed:
    """What ``KTable.suppress`` holds back, and for how long. Build one with ``until_window_closes``
    or ``until_time_limit``."""

    kind: Literal["window_close", "time_limit"]
    buffer_config: _BufferConfig
    time_limit_ms: int = 0
    name: str | None = None

    # Kafka spells it Suppressed.BufferConfig (Suppressed.BufferConfig.unbounded()).
    BufferConfig = BufferConfig

    @staticmethod
    def until_window_closes(buffer_config: _BufferConfig) -> Suppressed:
        """Only each window's final result, when the window closes (windowed tables only).

        ``buffer_config`` must never emit early (``BufferConfig.unbounded()``, or a bound with
        ``shutdown_when_full()``), else a result could be emitted before it is final."""
        if not isinstance(buffer_config, BufferConfig):
            raise TypeError(f"until_window_closes() takes a BufferConfig, got {buffer_config!r}.")
        if buffer_config.strategy != "shut_down":
            raise ValueError(
                "until_window_closes() needs a buffer that never emits early, or a result could be emitted "
                "before its window closes: use BufferConfig.unbounded(), or add .shutdown_when_full() to "
                "a bounded BufferConfig."
            )
        return Suppressed("window_close", buffer_config)

    @staticmethod
    def until_time_limit(
        time_to_wait_for_more_events: timedelta | int, buffer_config: _BufferConfig
    ) -> Suppressed:
        """A key's latest value once stream time passes its first buffered update's time plus the
        limit (milliseconds or a timedelta): at most one update per key per limit."""
        if not isinstance(buffer_config, BufferConfig):
            raise TypeError(f"until_time_limit() takes a BufferConfig, got {buffer_config!r}.")
        limit = to_millis(time_to_wait_for_more_events, "Suppressed.until_time_limit time limit")
        return Suppressed("time_limit", buffer_config, time_limit_ms=limit)

    def with_name(self, name: str) -> Suppressed:
        """Name the suppress processor ``name`` and its buffer store ``name-store``."""
        return replace(self, name=Named.as_(name).name)


def window_close_delay_ms(table: KTable[Any, Any]) -> int:
    """How long after a window's end (``WindowedKey.end``) a windowed table's rows may still change:
    what ``until_window_closes`` waits. Found, as Kafka's GraphGraceSearchUtil finds it, on the
    windowed aggregations upstream of the table in the processor graph (a supplier's
    ``window_close_delay_ms``: the grace of time and sliding windows, gap plus grace of session
    windows), through any operations in between (a cogroup's merge, table or stream operations);
    with several, the smallest."""
    delay = _find_delay(table._builder.topology.nodes, table.name, set())
    if delay is None:
        raise TopologyException(
            f"suppress(Suppressed.until_window_closes(...)) on table {table.name}: window close time is only "
            "defined for windowed computations, and this table does not come from a windowed "
            "aggregation (windowed_by(...).count/reduce/aggregate). Use Suppressed.until_time_limit(...) "
            "for other tables."
        )
    return delay


def _find_delay(nodes: Mapping[str, Any], name: str, seen: set[str]) -> int | None:
    """The window close delay at node ``name`` (its supplier's), else the smallest upstream; None
    when no path up to a source passes a windowed aggregation."""
    if name in seen:
        return None
    seen.add(name)
    spec = nodes.get(name)
    supplier = getattr(spec, "supplier", None)
    delay = getattr(supplier, "window_close_delay_ms", None)
    if isinstance(delay, int):
        return delay
    # Suppliers that do not say it: the rule of Kafka's GraphGraceSearchUtil by window type.
    windows = getattr(supplier, "windows", None)
    if isinstance(windows, SessionWindows):
        return windows.gap_ms + windows.grace_ms
    if isinstance(windows, SlidingWindows):
        return windows.grace_ms
    upstream = (_find_delay(nodes, parent, seen) for parent in getattr(spec, "predecessors", ()))
    found = [d for d in upstream if d is not None]
    return min(found) if found else None


def _key_serde(table: KTable[Any, Any]) -> Any:
    """The serde of the table's keys, or of the keys inside its windows for a windowed table."""
    from kstreams.topology.dsl.windowed_serdes import SessionWindowedSerde, TimeWindowedSerde

    if isinstance(table._key_serde, SessionWindowedSerde | TimeWindowedSerde):
        # The buffer writes a WindowedKey's window itself: it needs the serde of the key inside.
        return table._key_serde.inner
    serde = _table_key_serde(table)
    if serde is not None:
        return serde
    # A table whose node was not made by a table with a serde (a cogroup's merge): the serde of
    # the aggregation upstream of it.
    return _upstream_key_serde(table._builder.topology.nodes, table.name, set())


def _window_format(table: KTable[Any, Any]) -> WindowedKeyFormat | None:
    """How the buffer of a windowed table writes its keys (as Kafka's windowed serializers do):
    from the table's windowed key serde, else from the windowed aggregation upstream; None for a
    table of plain keys."""
    from kstreams.topology.dsl.windowed_serdes import SessionWindowedSerde, TimeWindowedSerde

    serde = table._key_serde
    if isinstance(serde, SessionWindowedSerde):
        return WindowedKeyFormat(session=True)
    if isinstance(serde, TimeWindowedSerde) and serde.window_size_ms is not None:
        return WindowedKeyFormat(session=False, window_size_ms=serde.window_size_ms)
    return _upstream_window_format(table._builder.topology.nodes, table.name, set())


def _upstream_window_format(nodes: Mapping[str, Any], name: str, seen: set[str]) -> WindowedKeyFormat | None:
    if name in seen:
        return None
    seen.add(name)
    spec = nodes.get(name)
    windows = getattr(getattr(spec, "supplier", None), "windows", None)
    if isinstance(windows, SessionWindows):
        return WindowedKeyFormat(session=True)
    if isinstance(windows, SlidingWindows):
        return WindowedKeyFormat(session=False, window_size_ms=windows.time_difference_ms)
    if isinstance(windows, TimeWindows):
        return WindowedKeyFormat(session=False, window_size_ms=windows.size_ms)
    for parent in getattr(spec, "predecessors", ()):
        found = _upstream_window_format(nodes, parent, seen)
        if found is not None:
            return found
    return None


def _table_key_serde(table: KTable[Any, Any]) -> Any:
    if table._key_serde is not None:
        return table._key_serde
    serde = getattr(table._supplier, "key_serde", None)
    if serde is not None:
        return serde
    for parent in table._parents:
        serde = _table_key_serde(parent)
        if serde is not None:
            return serde
    return None


def _upstream_key_serde(nodes: Mapping[str, Any], name: str, seen: set[str]) -> Any:
    if name in seen:
        return None
    seen.add(name)
    spec = nodes.get(name)
    serde = getattr(getattr(spec, "supplier", None), "key_serde", None)
    if serde is not None:
        return serde
    for parent in getattr(spec, "predecessors", ()):
        serde = _upstream_key_serde(nodes, parent, seen)
        if serde is not None:
            return serde
    return None


def suppress_table(table: KTable[Any, Any], suppressed: Suppressed) -> KTable[Any, Any]:
    """Add the suppress processor and its buffer after ``table``; the suppressed table."""
    from kstreams.state.time_ordered_buffer import TimeOrderedKeyValueBufferBuilder
    from kstreams.topology.dsl.ktable import KTable
    from kstreams.topology.dsl.processors.suppress import (
        KTableSuppressSupplier,
        SuppressedValueGetterSupplier,
    )

    if not isinstance(suppressed, Suppressed):
        raise TypeError(
            "suppress() takes a Suppressed (Suppressed.until_window_closes or until_time_limit), got "
            f"{suppressed!r}."
        )
    if table._versioned:
        raise TopologyException(
            f"suppress() is only supported for non-versioned KTables (note that version semantics "
            f"might be inherited from upstream): table {table.name} is versioned (KIP-914), and its "
            "out-of-order updates would reach the buffer. Suppress a table materialized in a "
            "key-value store instead (for example a filter or map_values of it with a Materialized)."
        )
    builder = table._builder
    name = builder.name_or_new(suppressed.name, naming.KTABLE_SUPPRESS)
    if suppressed.kind == "window_close":
        delay_ms = window_close_delay_ms(table)
        logger.info("Using a grace period of %d ms as the suppress duration of %s.", delay_ms, name)
    else:
        delay_ms = suppressed.time_limit_ms
    store_name = f"{suppressed.name}-store" if suppressed.name is not None else None
    store_name = store_name or builder.new_store_name(naming.KTABLE_SUPPRESS)
    config = suppressed.buffer_config
    store = TimeOrderedKeyValueBufferBuilder(
        store_name, _key_serde(table), table._value_serde, _window_format(table)
    )
    if config.logging_enabled:
        store.with_logging_enabled(config.log_config)
    else:
        store.with_logging_disabled()
    supplier = KTableSuppressSupplier(
        store_name,
        delay_ms,
        window_end_time=suppressed.kind == "window_close",
        max_records=config.max_records_limit,
        max_bytes=config.max_bytes_limit,
        shut_down_when_full=config.strategy == "shut_down",
        # A final result that is a deletion needs no emitting: nothing downstream saw the window.
        safe_to_drop_tombstones=suppressed.kind == "window_close",
    )
    builder.add_processor(name, supplier, table.name)
    builder.add_store(store, name)
    # The buffer keeps each key's value from before it was buffered: the parent must send it.
    table._enable_sending_old_values()

    def getter() -> SuppressedValueGetterSupplier:
        return SuppressedValueGetterSupplier(store_name, table._value_getter_supplier())

    return KTable(
        builder,
        name,
        table._key_serde,
        table._value_serde,
        table._source_nodes,
        supplier,
        getter,
        parents=(table,),
        # Kafka's KTableSuppressProcessorSupplier: the buffer forwards what its parent sends.
        old_values=table._enable_sending_old_values,
    )
