"""KTable processors and value getters: source, filter, map_values, to_stream, table-table join.

A KTable processor receives ``Change(new, old)`` values and forwards changes. A *value getter*
reads a table's current value for a key, so joins can look a table up: a materialized table reads
its store; a derived, unmaterialized table (a filter or map_values of another table) applies its
function to its parent's value on each lookup, as Kafka's value getters do.

Old values are Kafka's too: a processor forwards a change's old value only once a downstream
asked for it (``send_old_values``, set by ``KTable._enable_sending_old_values`` as Kafka's
``enableSendingOldValues`` sets ``sendOldValues``); otherwise the old value is None.

Timestamps are Kafka's: a table's stores are timestamped, and value getters return
``ValueAndTimestamp`` (None for no row). A source, filter or map_values row keeps the timestamp of
the record that wrote it; a table-table join result carries the larger timestamp of its two sides
(KTableKTableInnerJoin, LeftJoin, OuterJoin), and so does a lookup of a join's value getter.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable
from typing import Any

from kstreams._native.per_record import ToStreamCore
from kstreams.errors import StreamsException
from kstreams.processor import Processor, ProcessorContext, Record
from kstreams.state.store import WindowedKey
from kstreams.state.value_and_timestamp import ValueAndTimestamp
from kstreams.topology.dsl.processors.forwarding import ChangeForwarder
from kstreams.topology.dsl.processors.store_access import get_store, record_access
from kstreams.topology.dsl.records import Change

__all__ = [
    "AsOfGetter",
    "FilterValueGetterSupplier",
    "JoinValueGetterSupplier",
    "MapValuesGetterSupplier",
    "SessionStoreValueGetterSupplier",
    "StoreValueGetterSupplier",
    "TableFilterSupplier",
    "TableJoinSupplier",
    "TableMapValuesSupplier",
    "TableMergeSupplier",
    "TableSourceSupplier",
    "TableToStreamSupplier",
    "ValueGetter",
    "ValueGetterSupplier",
    "WindowStoreValueGetterSupplier",
]

logger = logging.getLogger(__name__)

# key -> the table's ValueAndTimestamp for the key, None when it has no row
ValueGetter = Callable[[Any], "ValueAndTimestamp[Any] | None"]
# key, timestamp -> the table's row as of that time (a versioned table's), None when it had none
AsOfGetter = Callable[[Any, int], "ValueAndTimestamp[Any] | None"]


def _value_of(stored: ValueAndTimestamp[Any] | None) -> Any:
    return None if stored is None else stored.value


def _filtered(predicate: Callable[[Any, Any], bool], negate: bool, key: Any, value: Any) -> Any:
    """A row's value in a filtered table: the value when it passes, else None (no row)."""
    if value is None or bool(predicate(key, value)) == negate:
        return None
    return value


def _mapped(mapper: Callable[..., Any], with_key: bool, key: Any, value: Any) -> Any:
    """A row's value in a mapped table (no row stays no row)."""
    if value is None:
        return None
    return mapper(key, value) if with_key else mapper(value)


def _joined(
    joiner: Callable[[Any, Any], Any], left: Any, right: Any, left_outer: bool, right_outer: bool
) -> Any:
    """A row's value in a table-table join of rows ``left`` and ``right`` (None: no row): a side
    may be missing only when the join is outer on the other side."""
    if left is None and right is None:
        return None
    if left is None and not right_outer:
        return None
    if right is None and not left_outer:
        return None
    return joiner(left, right)


class ValueGetterSupplier(abc.ABC):
    """Makes, for one task, a function key -> current table value and its timestamp (None when
    absent)."""

    @abc.abstractmethod
    def store_names(self) -> tuple[str, ...]:
        """The stores a processor using this getter must be connected to."""

    @abc.abstractmethod
    def get(self, context: ProcessorContext[Any, Any]) -> ValueGetter: ...

    def is_versioned(self) -> bool:
        """Whether this getter reads a versioned table (KIP-914): one kept in a versioned store,
        or computed on lookup from such a table by a filter or map_values (Kafka's
        ``KTableValueGetter.isVersioned``). A stream-table join looks such a table up as of each
        stream record's time (``get_as_of``)."""
        return False

    def get_as_of(self, context: ProcessorContext[Any, Any]) -> AsOfGetter:
        """key, timestamp -> the row valid at that time; only for a getter that ``is_versioned``."""
        raise TypeError(
            f"{type(self).__name__} reads a table that is not versioned: it has no rows as of a time."
        )


class StoreValueGetterSupplier(ValueGetterSupplier):
    """Reads a materialized table's key-value store."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def store_names(self) -> tuple[str, ...]:
        return (self.store_name,)

    def get(self, context: ProcessorContext[Any, Any]) -> ValueGetter:
        return get_store(context, self.store_name).get  # type: ignore[no-any-return]


def _check_windowed(key: Any, store_name: str) -> None:
    if not isinstance(key, WindowedKey):
        raise StreamsException(
            f"The windowed table of store {store_name} is looked up by windowed key (WindowedKey), "
            f"got the key {key!r}: join a windowed table with a windowed table, or with a stream "
            "whose keys are windows (such as another windowed table's to_stream())."
        )


class WindowStoreValueGetterSupplier(ValueGetterSupplier):
    """Reads a time- or sliding-windowed table's window store: the row of ``WindowedKey(key,
    start, end)`` is the window of ``key`` starting at ``start`` (Kafka's windowed aggregation
    view), so windowed tables join and are looked up on their windowed keys."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def store_names(self) -> tuple[str, ...]:
        return (self.store_name,)

    def get(self, context: ProcessorContext[Any, Any]) -> ValueGetter:
        store = get_store(context, self.store_name)

        def get(window: WindowedKey[Any]) -> ValueAndTimestamp[Any] | None:
            _check_windowed(window, self.store_name)
            return store.fetch(window.key, window.start)  # type: ignore[no-any-return]

        return get


class SessionStoreValueGetterSupplier(ValueGetterSupplier):
    """Reads a session-windowed table's session store: the row of ``WindowedKey(key, start, end)``
    is that session's aggregate, stamped with the session's end (Kafka's session aggregation
    view, whose store keeps no timestamps)."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def store_names(self) -> tuple[str, ...]:
        return (self.store_name,)

    def get(self, context: ProcessorContext[Any, Any]) -> ValueGetter:
        store = get_store(context, self.store_name)

        def get(session: WindowedKey[Any]) -> ValueAndTimestamp[Any] | None:
            _check_windowed(session, self.store_name)
            aggregate = store.fetch_session(session.key, session.start, session.end)
            return None if aggregate is None else ValueAndTimestamp.make(aggregate, session.end)

        return get


class FilterValueGetterSupplier(ValueGetterSupplier):
    """The parent's value when it passes the predicate, else None."""

    def __init__(
        self, parent: ValueGetterSupplier, predicate: Callable[[Any, Any], bool], negate: bool
    ) -> None:
        self.parent = parent
        self.predicate = predicate
        self.negate = negate

    def store_names(self) -> tuple[str, ...]:
        return self.parent.store_names()

    def get(self, context: ProcessorContext[Any, Any]) -> ValueGetter:
        parent = self.parent.get(context)

        def get(key: Any) -> ValueAndTimestamp[Any] | None:
            return self._filter(key, parent(key))

        return get

    def is_versioned(self) -> bool:
        return self.parent.is_versioned()

    def get_as_of(self, context: ProcessorContext[Any, Any]) -> AsOfGetter:
        parent = self.parent.get_as_of(context)
        return lambda key, timestamp: self._filter(key, parent(key, timestamp))

    def _filter(self, key: Any, stored: ValueAndTimestamp[Any] | None) -> ValueAndTimestamp[Any] | None:
        if stored is None:
            return None
        return ValueAndTimestamp.make(
            _filtered(self.predicate, self.negate, key, stored.value), stored.timestamp
        )


class MapValuesGetterSupplier(ValueGetterSupplier):
    """The parent's value mapped (None stays None)."""

    def __init__(self, parent: ValueGetterSupplier, mapper: Callable[..., Any], with_key: bool) -> None:
        self.parent = parent
        self.mapper = mapper
        self.with_key = with_key

    def store_names(self) -> tuple[str, ...]:
        return self.parent.store_names()

    def get(self, context: ProcessorContext[Any, Any]) -> ValueGetter:
        parent = self.parent.get(context)

        def get(key: Any) -> ValueAndTimestamp[Any] | None:
            return self._map(key, parent(key))

        return get

    def is_versioned(self) -> bool:
        return self.parent.is_versioned()

    def get_as_of(self, context: ProcessorContext[Any, Any]) -> AsOfGetter:
        parent = self.parent.get_as_of(context)
        return lambda key, timestamp: self._map(key, parent(key, timestamp))

    def _map(self, key: Any, stored: ValueAndTimestamp[Any] | None) -> ValueAndTimestamp[Any] | None:
        if stored is None:
            return None
        return ValueAndTimestamp.make(
            _mapped(self.mapper, self.with_key, key, stored.value), stored.timestamp
        )


class JoinValueGetterSupplier(ValueGetterSupplier):
    """The join of two tables' values for a key, by the join's rule for missing sides."""

    def __init__(
        self,
        left: ValueGetterSupplier,
        right: ValueGetterSupplier,
        joiner: Callable[[Any, Any], Any],
        left_outer: bool,
        right_outer: bool,
    ) -> None:
        self.left = left
        self.right = right
        self.joiner = joiner
        self.left_outer = left_outer
        self.right_outer = right_outer

    def store_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.left.store_names() + self.right.store_names()))

    def get(self, context: ProcessorContext[Any, Any]) -> ValueGetter:
        left = self.left.get(context)
        right = self.right.get(context)

        def get(key: Any) -> ValueAndTimestamp[Any] | None:
            this, other = left(key), right(key)
            value = _joined(self.joiner, _value_of(this), _value_of(other), self.left_outer, self.right_outer)
            present = [side.timestamp for side in (this, other) if side is not None]
            return ValueAndTimestamp.make(value, max(present)) if present else None

        return get


class _Materializing(Processor[Any, Any, Any, Any]):
    """A table processor that may keep its result in a store (and forward through its cache).

    ``send_old_values`` is its supplier's: whether a downstream asked for old values (Kafka's
    ``enableSendingOldValues``). Without it every change goes out with old value None, from the
    store's cache too.
    """

    store_name: str | None
    send_old_values: bool

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.store = get_store(context, self.store_name) if self.store_name else None
        self.forwarder = (
            ChangeForwarder(self.store, context, send_old_values=self.send_old_values)
            if self.store is not None
            else None
        )
        if self.store is not None:
            self._get, self._put = record_access(self.store)

    def stored_value(self, key: Any) -> Any:
        """The plain value this processor's store holds for ``key`` (None: no row)."""
        assert self.store is not None
        return _value_of(self._get(key))

    def emit(self, record: Record[Any, Any], new: Any, old: Any, is_latest: bool = True) -> None:
        """Store (when materialized) and forward ``Change(new, old)`` at the record's timestamp
        (``old`` None unless old values are sent). Unmaterialized, the change keeps ``is_latest``
        of the update it came from; a store of this processor's own keeps one value per key, so
        what it forwards is the latest."""
        if self.store is not None and self.forwarder is not None:
            self._put(record.key, ValueAndTimestamp.make(new, record.timestamp))
            self.forwarder.maybe_forward(record.key, new, old, record.timestamp, record.headers)
        else:
            old = old if self.send_old_values else None
            self.context.forward(record.with_value(Change(new, old, is_latest)))


class TableSourceSupplier:
    """Turns a topic's records into table updates; ``store_name`` is set when the table is
    materialized (explicitly, or because a join or query needs its values), ``send_old_values``
    when a downstream asks for old values (which the store gives: the table then has one)."""

    kind = "table_source"

    def __init__(self, topic: str, store_name: str | None = None) -> None:
        self.topic = topic
        self.store_name = store_name
        self.send_old_values = False

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _TableSource(self.topic, self.store_name, self.send_old_values)


class _TableSource(_Materializing):
    def __init__(self, topic: str, store_name: str | None, send_old_values: bool) -> None:
        self.topic = topic
        self.store_name = store_name
        self.send_old_values = send_old_values

    def process(self, record: Record[Any, Any]) -> None:
        if record.key is None:
            logger.debug("Skipping a record with a null key of table source topic %s.", self.topic)
            return
        # Kafka's KTableSource reads the row first in any case (it warns of an out-of-order update)
        # and stores the record's own timestamp, even an older one than the row's.
        old = self.stored_value(record.key) if self.store is not None else None
        self.emit(record, record.value, old)


class TableFilterSupplier:
    """Keeps rows whose value passes ``predicate(key, value)`` (fails, when ``negate``); a row
    that does not pass becomes a deletion downstream.

    ``versioned_semantics`` is set when the filtered table is versioned (KIP-914): the filter
    then forwards a deletion for every row it drops, even one it did not hold before, as Kafka's
    KTableFilter does with versioned semantics."""

    kind = "table_filter"

    def __init__(
        self, predicate: Callable[[Any, Any], bool], negate: bool = False, store_name: str | None = None
    ) -> None:
        self.predicate = predicate
        self.negate = negate
        self.store_name = store_name
        self.send_old_values = False
        # The parent is (or passes on) a versioned table (KIP-914): Kafka's filter then never
        # skips a tombstone (KTableFilter's useVersionedSemantics).
        self.versioned_semantics = False

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _TableFilter(self)


class _TableFilter(_Materializing):
    """Kafka's KTableFilterProcessor: a row the predicate drops becomes a tombstone, unless old
    values are sent and show the row was not in the filtered table before either (and the parent
    is not versioned)."""

    def __init__(self, spec: TableFilterSupplier) -> None:
        self.spec = spec
        self.store_name = spec.store_name
        self.send_old_values = spec.send_old_values

    def _keep(self, key: Any, value: Any) -> Any:
        return _filtered(self.spec.predicate, self.spec.negate, key, value)

    def process(self, record: Record[Any, Any]) -> None:
        change: Change[Any] = record.value
        new = self._keep(record.key, change.new_value)
        old = None
        if self.send_old_values:
            # A filter with a store of its own takes the old value from it.
            if self.store is not None:
                old = self.stored_value(record.key)
            else:
                old = self._keep(record.key, change.old_value)
            if new is None and old is None and not self.spec.versioned_semantics:
                return  # the row was not in the filtered table before and is not now
        self.emit(record, new, old, change.is_latest)


class TableMapValuesSupplier:
    """Maps each row's value with ``mapper(value)`` (``mapper(key, value)`` when ``with_key``)."""

    kind = "table_map_values"

    def __init__(
        self, mapper: Callable[..., Any], with_key: bool = False, store_name: str | None = None
    ) -> None:
        self.mapper = mapper
        self.with_key = with_key
        self.store_name = store_name
        self.send_old_values = False

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _TableMapValues(self)


class _TableMapValues(_Materializing):
    """Kafka's KTableMapValuesProcessor: the old value, when sent, is the stored one of a mapped
    table with a store of its own, else the parent's old value mapped."""

    def __init__(self, spec: TableMapValuesSupplier) -> None:
        self.spec = spec
        self.store_name = spec.store_name
        self.send_old_values = spec.send_old_values

    def _map(self, key: Any, value: Any) -> Any:
        return _mapped(self.spec.mapper, self.spec.with_key, key, value)

    def process(self, record: Record[Any, Any]) -> None:
        change: Change[Any] = record.value
        new = self._map(record.key, change.new_value)
        old = None
        if self.send_old_values:
            if self.store is not None:
                old = self.stored_value(record.key)
            else:
                old = self._map(record.key, change.old_value)
        self.emit(record, new, old, change.is_latest)


class TableToStreamSupplier:
    """Turns table updates into records: the value is the new value (None for a deletion)."""

    kind = "table_to_stream"

    def __init__(self, mapper: Callable[[Any, Any], Any] | None = None) -> None:
        self.mapper = mapper

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _TableToStream(self.mapper)


class _TableToStream(ToStreamCore, Processor[Any, Any, Any, Any]):
    """to_stream's processor (its ``process`` is C: ``ToStreamCore``): each update's new value."""

    def __init__(self, mapper: Callable[[Any, Any], Any] | None) -> None:
        super().__init__(mapper, Change)


class TableJoinSupplier:
    """One side of a table-table join: an update of this side looks the other side up.

    ``this_is_left`` says which argument of ``joiner(left, right)`` this side's value is.
    ``this_outer``: an update of this side joins even when the other side has no row (the other
    value is None); ``other_outer``: a deletion on this side still emits when the other side has a
    row (the join result of the other side alone).
    """

    kind = "table_join"

    def __init__(
        self,
        other: ValueGetterSupplier,
        joiner: Callable[[Any, Any], Any],
        this_is_left: bool,
        this_outer: bool,
        other_outer: bool,
    ) -> None:
        self.other = other
        self.joiner = joiner
        self.this_is_left = this_is_left
        self.this_outer = this_outer
        self.other_outer = other_outer
        self.send_old_values = False

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _TableJoin(self)


class _TableJoin(Processor[Any, Any, Any, Any]):
    def __init__(self, spec: TableJoinSupplier) -> None:
        self.spec = spec

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.other = self.spec.other.get(context)

    def _join(self, this: Any, other: Any) -> Any:
        spec = self.spec
        if spec.this_is_left:
            return _joined(spec.joiner, this, other, spec.this_outer, spec.other_outer)
        return _joined(spec.joiner, other, this, spec.other_outer, spec.this_outer)

    def process(self, record: Record[Any, Any]) -> None:
        if record.key is None:
            return
        change: Change[Any] = record.value
        if not change.is_latest:
            # An out-of-order update of a versioned table changes no current row: Kafka's
            # table-table joins drop it (KIP-914).
            logger.debug("Skipping an out-of-order update of a versioned table in a table-table join.")
            return
        stored = self.other(record.key)
        other = _value_of(stored)
        if other is None:
            if not self.spec.this_outer:
                # Inner side: nothing joined before and nothing joins now (Kafka forwards nothing).
                return
            if change.new_value is None and change.old_value is None:
                # Outer side, a deletion of a row this side did not hold (its table sends old
                # values for that): no row in the join before or now (KTableKTableLeftJoin,
                # KTableKTableOuterJoin).
                return
        new = self._join(change.new_value, other)
        old = self._join(change.old_value, other) if self.spec.send_old_values else None
        # The result is as new as the newer of the two rows that made it.
        timestamp = record.timestamp if stored is None else max(record.timestamp, stored.timestamp)
        self.context.forward(Record(record.key, Change(new, old), timestamp, record.headers))


class TableMergeSupplier:
    """Joins the two sides of a table-table join into one table (optionally materialized);
    ``send_old_values`` is set when a downstream asks for old values (the two sides then compute
    them)."""

    kind = "table_merge"

    def __init__(self, store_name: str | None = None) -> None:
        self.store_name = store_name
        self.send_old_values = False

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _TableMerge(self.store_name, self.send_old_values)


class _TableMerge(_Materializing):
    """Kafka's KTableKTableJoinMergeProcessor: forwards each side's change (and stores its new
    value when materialized), the old value only when old values are sent."""

    def __init__(self, store_name: str | None, send_old_values: bool) -> None:
        self.store_name = store_name
        self.send_old_values = send_old_values

    def process(self, record: Record[Any, Any]) -> None:
        change: Change[Any] = record.value
        if self.store is not None or not self.send_old_values:
            self.emit(record, change.new_value, change.old_value)
        else:
            self.context.forward(record)
