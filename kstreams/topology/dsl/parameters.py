"""The parameter objects of the DSL: Consumed, Produced, Grouped, Materialized, Repartitioned,
Named, Joined and StreamJoined.

Each is an immutable-looking builder in Kafka's style: a static constructor (``Grouped.as_("x")``,
``Consumed.with_(k, v)``) and ``with_*`` methods that return a new object, so one parameter object
can be shared by several operations without surprises. A serde of None means "not given": the
operation inherits the upstream serde, or the topology falls back to ``default.key.serde`` /
``default.value.serde`` at build.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

__all__ = [
    "Consumed",
    "Grouped",
    "Joined",
    "Materialized",
    "Named",
    "Produced",
    "Repartitioned",
    "StoreType",
    "StreamJoined",
    "aggregation_store_and_name",
    "consumed_and_materialized",
    "leading_options",
    "materialized_and_named",
    "named_as",
    "to_millis",
]

logger = logging.getLogger(__name__)


def to_millis(duration: timedelta | int | float, what: str) -> int:
    """A duration given as a timedelta or as milliseconds, in whole milliseconds (never negative)."""
    if isinstance(duration, timedelta):
        ms = int(duration / timedelta(milliseconds=1))
    elif isinstance(duration, int | float) and not isinstance(duration, bool):
        ms = int(duration)
    else:
        raise TypeError(f"{what} must be a datetime.timedelta or milliseconds as an int, got {duration!r}.")
    if ms < 0:
        raise ValueError(f"{what} must not be negative, got {ms} ms.")
    return ms


def _check_name(name: str | None, what: str) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} must be a non-empty string, got {name!r}.")
    if len(name) > 249 or not all(c.isalnum() or c in "._-" for c in name):
        raise ValueError(
            f"{what} {name!r} is not a legal name: use at most 249 letters, digits, '.', '_' or '-' "
            "(it becomes part of topic and store names)."
        )
    return name


@dataclass(frozen=True)
class Named:
    """A user-chosen name for the processor an operation adds (instead of a generated one)."""

    name: str | None = None

    @staticmethod
    def as_(name: str) -> Named:
        return Named(_check_name(name, "Named"))

    def with_name(self, name: str) -> Named:
        return Named(_check_name(name, "Named"))


@dataclass(frozen=True)
class Consumed:
    """How a source reads its topics: serdes, offset reset policy and the source processor's name
    (for a table, the name of its table processor, read by a source ``<name>-source``, as in Kafka)."""

    key_serde: Any = None
    value_serde: Any = None
    offset_reset: str | None = None
    name: str | None = None
    timestamp_extractor: Any = None

    @staticmethod
    def with_(key_serde: Any = None, value_serde: Any = None) -> Consumed:
        return Consumed(key_serde, value_serde)

    @staticmethod
    def as_(name: str) -> Consumed:
        return Consumed(name=_check_name(name, "Consumed name"))

    def with_key_serde(self, serde: Any) -> Consumed:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Any) -> Consumed:
        return replace(self, value_serde=serde)

    def with_offset_reset_policy(self, policy: str | None) -> Consumed:
        if policy is not None and str(policy).lower() not in ("earliest", "latest", "none"):
            raise ValueError(f"Offset reset policy must be 'earliest', 'latest' or 'none', got {policy!r}.")
        return replace(self, offset_reset=None if policy is None else str(policy).lower())

    def with_timestamp_extractor(self, extractor: Any) -> Consumed:
        return replace(self, timestamp_extractor=extractor)

    def with_name(self, name: str) -> Consumed:
        return replace(self, name=_check_name(name, "Consumed name"))


@dataclass(frozen=True)
class Produced:
    """How a sink writes: serdes, partitioner and the sink processor's name."""

    key_serde: Any = None
    value_serde: Any = None
    partitioner: Any = None
    name: str | None = None

    @staticmethod
    def with_(key_serde: Any = None, value_serde: Any = None, partitioner: Any = None) -> Produced:
        return Produced(key_serde, value_serde, partitioner)

    @staticmethod
    def as_(name: str) -> Produced:
        return Produced(name=_check_name(name, "Produced name"))

    @staticmethod
    def key_serde_(serde: Any) -> Produced:
        return Produced(key_serde=serde)

    @staticmethod
    def value_serde_(serde: Any) -> Produced:
        return Produced(value_serde=serde)

    def with_key_serde(self, serde: Any) -> Produced:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Any) -> Produced:
        return replace(self, value_serde=serde)

    def with_stream_partitioner(self, partitioner: Any) -> Produced:
        return replace(self, partitioner=partitioner)

    def with_name(self, name: str) -> Produced:
        return replace(self, name=_check_name(name, "Produced name"))


@dataclass(frozen=True)
class Grouped:
    """How a stream is grouped: serdes of the (repartitioned) records and the repartition name.

    ``Grouped.as_("x")`` names the repartition topic ``<application.id>-x-repartition`` and, for
    ``group_by``, the key-selecting processor ``x`` (as Kafka names them).
    """

    name: str | None = None
    key_serde: Any = None
    value_serde: Any = None

    @staticmethod
    def as_(name: str) -> Grouped:
        return Grouped(name=_check_name(name, "Grouped name"))

    @staticmethod
    def with_(key_serde: Any = None, value_serde: Any = None, name: str | None = None) -> Grouped:
        return Grouped(_check_name(name, "Grouped name"), key_serde, value_serde)

    def with_name(self, name: str) -> Grouped:
        return replace(self, name=_check_name(name, "Grouped name"))

    def with_key_serde(self, serde: Any) -> Grouped:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Any) -> Grouped:
        return replace(self, value_serde=serde)


@dataclass(frozen=True)
class Repartitioned:
    """An explicit repartition: topic name, partition count, serdes and partitioner."""

    name: str | None = None
    key_serde: Any = None
    value_serde: Any = None
    number_of_partitions: int | None = None
    partitioner: Any = None

    @staticmethod
    def as_(name: str) -> Repartitioned:
        return Repartitioned(name=_check_name(name, "Repartitioned name"))

    @staticmethod
    def with_(key_serde: Any = None, value_serde: Any = None) -> Repartitioned:
        return Repartitioned(key_serde=key_serde, value_serde=value_serde)

    @staticmethod
    def number_of_partitions_(partitions: int) -> Repartitioned:
        return Repartitioned().with_number_of_partitions(partitions)

    @staticmethod
    def stream_partitioner(partitioner: Any) -> Repartitioned:
        """Kafka's ``Repartitioned.streamPartitioner(partitioner)``."""
        return Repartitioned(partitioner=partitioner)

    def with_name(self, name: str) -> Repartitioned:
        return replace(self, name=_check_name(name, "Repartitioned name"))

    def with_number_of_partitions(self, partitions: int) -> Repartitioned:
        if not isinstance(partitions, int) or partitions < 1:
            raise ValueError(f"Number of partitions must be a positive int, got {partitions!r}.")
        return replace(self, number_of_partitions=partitions)

    def with_key_serde(self, serde: Any) -> Repartitioned:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Any) -> Repartitioned:
        return replace(self, value_serde=serde)

    def with_stream_partitioner(self, partitioner: Any) -> Repartitioned:
        return replace(self, partitioner=partitioner)


class StoreType(enum.Enum):
    """Which store implementation a Materialized state uses (Kafka's ``Materialized.StoreType``)."""

    ROCKS_DB = "rocks_db"
    IN_MEMORY = "in_memory"


_StoreTypeEnum = StoreType


@dataclass(frozen=True)
class Materialized:
    """How an aggregation or table is kept in a state store.

    ``Materialized.as_("counts")`` names the store "counts" (queryable by that name, changelog
    ``<application.id>-counts-changelog``). Defaults follow Kafka: persistent store, caching and
    change-logging enabled, retention (windowed stores) of window size plus grace.
    """

    store_name: str | None = None
    key_serde: Any = None
    value_serde: Any = None
    caching_enabled: bool = True
    logging_enabled: bool = True
    log_config: dict[str, str] = field(default_factory=dict)
    retention_ms: int | None = None
    # A StoreType, or a DslStoreSuppliers (KIP-954) that makes the store; None: the default.
    store_type: Any = None
    store_supplier: Any = None

    # Kafka spells it Materialized.StoreType.
    StoreType = StoreType

    @staticmethod
    def as_(name_or_supplier: Any) -> Materialized:
        """A store of that name, or built from that store supplier (which carries the name), or
        made by that store type or DslStoreSuppliers."""
        if isinstance(name_or_supplier, str):
            return Materialized(store_name=_check_name(name_or_supplier, "Materialized store name"))
        if isinstance(name_or_supplier, _StoreTypeEnum) or _is_dsl_store_suppliers(name_or_supplier):
            return Materialized(store_type=name_or_supplier)
        name = getattr(name_or_supplier, "name", None)
        if not isinstance(name, str):
            raise TypeError(
                "Materialized.as_ takes a store name or a store supplier with a name, "
                f"got {name_or_supplier!r}."
            )
        return Materialized(store_name=name, store_supplier=name_or_supplier)

    @staticmethod
    def with_(key_serde: Any = None, value_serde: Any = None) -> Materialized:
        return Materialized(key_serde=key_serde, value_serde=value_serde)

    def with_key_serde(self, serde: Any) -> Materialized:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Any) -> Materialized:
        return replace(self, value_serde=serde)

    def with_caching_enabled(self) -> Materialized:
        return replace(self, caching_enabled=True)

    def with_caching_disabled(self) -> Materialized:
        return replace(self, caching_enabled=False)

    def with_logging_enabled(self, config: dict[str, str] | None = None) -> Materialized:
        return replace(self, logging_enabled=True, log_config=dict(config or {}))

    def with_logging_disabled(self) -> Materialized:
        return replace(self, logging_enabled=False, log_config={})

    def with_retention(self, retention: timedelta | int) -> Materialized:
        return replace(self, retention_ms=to_millis(retention, "Materialized retention"))

    def with_store_type(self, store_type: Any) -> Materialized:
        """A ``StoreType`` (or its value), or a DslStoreSuppliers that makes the store."""
        return replace(self, store_type=_store_type(store_type, "Materialized.with_store_type"))


@dataclass(frozen=True)
class Joined:
    """Serdes, name and grace period of a stream-table join (the stream side's serdes feed a
    repartition, and the grace period's buffer).

    ``with_grace_period(g)`` (KIP-923) holds each stream record back until stream time has passed
    its timestamp by ``g``, then joins it with the versioned table as of its timestamp, so a table
    update up to ``g`` late still meets the stream records it should. The table must be versioned
    with a history retention of at least ``g``.
    """

    key_serde: Any = None
    value_serde: Any = None
    other_value_serde: Any = None
    name: str | None = None
    grace_period_ms: int | None = None

    @staticmethod
    def with_(
        key_serde: Any = None,
        value_serde: Any = None,
        other_value_serde: Any = None,
        name: str | None = None,
        grace_period: timedelta | int | None = None,
    ) -> Joined:
        joined = Joined(key_serde, value_serde, other_value_serde, _check_name(name, "Joined name"))
        return joined if grace_period is None else joined.with_grace_period(grace_period)

    def with_grace_period(self, grace_period: timedelta | int) -> Joined:
        return replace(self, grace_period_ms=to_millis(grace_period, "Joined grace period"))

    @staticmethod
    def as_(name: str) -> Joined:
        return Joined(name=_check_name(name, "Joined name"))

    def with_name(self, name: str) -> Joined:
        return replace(self, name=_check_name(name, "Joined name"))

    def with_key_serde(self, serde: Any) -> Joined:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Any) -> Joined:
        return replace(self, value_serde=serde)

    def with_other_value_serde(self, serde: Any) -> Joined:
        return replace(self, other_value_serde=serde)


@dataclass(frozen=True)
class StreamJoined:
    """Serdes, name and stores of a stream-stream join.

    ``with_name("j")`` names the processors ("j-this-join", "j-merge", ...) and repartition
    topics ("j-left-repartition"); ``with_store_name("s")`` names the window stores
    ("s-this-join-store", "s-other-join-store"). ``with_this_store_supplier`` /
    ``with_other_store_supplier`` give a side's window store outright (``Stores.in_memory_window_store``
    or ``Stores.persistent_window_store``, named as the supplier says, its changelog
    ``<application.id>-<name>-changelog``); the join checks, when it is built, that each retains
    duplicates and has the join's window size and a retention of window size plus grace.
    """

    key_serde: Any = None
    value_serde: Any = None
    other_value_serde: Any = None
    name: str | None = None
    store_name: str | None = None
    logging_enabled: bool = True
    log_config: dict[str, str] = field(default_factory=dict)
    store_type: Any = None  # a StoreType or a DslStoreSuppliers; None: the default
    this_store_supplier: Any = None
    other_store_supplier: Any = None

    @staticmethod
    def with_(key_serde: Any = None, value_serde: Any = None, other_value_serde: Any = None) -> StreamJoined:
        """``with_(key_serde, value_serde, other_value_serde)``, or, as Kafka's overload,
        ``with_(this_store_supplier, other_store_supplier)``."""
        if _is_window_store_supplier(key_serde) or _is_window_store_supplier(value_serde):
            if other_value_serde is not None:
                raise TypeError(
                    "StreamJoined.with_ takes (key_serde, value_serde, other_value_serde) or "
                    "(this_store_supplier, other_store_supplier), not both."
                )
            return StreamJoined().with_this_store_supplier(key_serde).with_other_store_supplier(value_serde)
        return StreamJoined(key_serde, value_serde, other_value_serde)

    def with_this_store_supplier(self, supplier: Any) -> StreamJoined:
        """The window store of this (the left) side's records, from ``supplier``."""
        return replace(self, this_store_supplier=_window_store_supplier(supplier, "this"))

    def with_other_store_supplier(self, supplier: Any) -> StreamJoined:
        """The window store of the other (the right) side's records, from ``supplier``."""
        return replace(self, other_store_supplier=_window_store_supplier(supplier, "other"))

    @staticmethod
    def as_(store_name: str) -> StreamJoined:
        return StreamJoined(store_name=_check_name(store_name, "StreamJoined store name"))

    def with_name(self, name: str) -> StreamJoined:
        return replace(self, name=_check_name(name, "StreamJoined name"))

    def with_store_name(self, store_name: str) -> StreamJoined:
        return replace(self, store_name=_check_name(store_name, "StreamJoined store name"))

    def with_key_serde(self, serde: Any) -> StreamJoined:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Any) -> StreamJoined:
        return replace(self, value_serde=serde)

    def with_other_value_serde(self, serde: Any) -> StreamJoined:
        return replace(self, other_value_serde=serde)

    def with_logging_enabled(self, config: dict[str, str] | None = None) -> StreamJoined:
        return replace(self, logging_enabled=True, log_config=dict(config or {}))

    def with_logging_disabled(self) -> StreamJoined:
        return replace(self, logging_enabled=False, log_config={})

    def with_store_type(self, store_type: StoreType | str) -> StreamJoined:
        return replace(self, store_type=_store_type(store_type, "StreamJoined.with_store_type"))

    def with_dsl_store_suppliers(self, suppliers: Any) -> StreamJoined:
        """The join's stores (both sides', the outer join's shared one) made by ``suppliers``, a
        DslStoreSuppliers (KIP-954)."""
        return replace(self, store_type=_store_type(suppliers, "StreamJoined.with_dsl_store_suppliers"))


def _is_dsl_store_suppliers(candidate: Any) -> bool:
    if isinstance(candidate, str | StoreType) or candidate is None:
        return False
    from kstreams.state.dsl_store_suppliers import DslStoreSuppliers

    return isinstance(candidate, DslStoreSuppliers)


def _store_type(store_type: Any, what: str) -> Any:
    """A StoreType (given as one or as its value) or a DslStoreSuppliers; a TypeError otherwise."""
    if isinstance(store_type, str):
        try:
            return StoreType(store_type)
        except ValueError:
            pass
    elif isinstance(store_type, StoreType) or _is_dsl_store_suppliers(store_type):
        return store_type
    raise TypeError(
        f"{what} takes a Materialized.StoreType (ROCKS_DB, IN_MEMORY), its value, or a "
        f"kstreams.DslStoreSuppliers instance, got {store_type!r}."
    )


def _is_window_store_supplier(candidate: Any) -> bool:
    return all(
        hasattr(candidate, a) for a in ("name", "retention_ms", "window_size_ms", "retain_duplicates", "get")
    )


def _window_store_supplier(supplier: Any, side: str) -> Any:
    """``supplier`` when it is a window store supplier (Kafka's WindowBytesStoreSupplier: a name, a
    retention, a window size, whether it retains duplicates, and ``get()``); a TypeError if not."""
    if not _is_window_store_supplier(supplier):
        raise TypeError(
            f"StreamJoined.with_{side}_store_supplier takes a window store supplier such as "
            "Stores.in_memory_window_store(name, retention, window_size, retain_duplicates=True), "
            f"got {supplier!r}."
        )
    return supplier


def materialized_and_named(
    first: Any, second: Any, operation: str
) -> tuple[Materialized | None, Named | str | None]:
    """An operation's optional ``Materialized`` and name, given in either order: Kafka overloads
    ``count(Named)``, ``count(Materialized)`` and ``count(Named, Materialized)`` (and ``filter``,
    ``map_values``, ... alike), where kstreams' own order is ``(materialized, named)``. Each may be
    given once, and a plain string only second (first, it could be meant as a store's name:
    ``Materialized.as_(name)`` says that); anything else is a TypeError naming ``operation``."""
    materialized: Materialized | None = None
    named: Named | str | None = None
    if isinstance(first, str):
        raise TypeError(
            f"{operation} takes a Materialized or a Named first, got the string {first!r}: "
            f"Materialized.as_({first!r}) names the store, Named.as_({first!r}) the processor."
        )
    for arg in (first, second):
        if arg is None:
            continue
        if isinstance(arg, (Named, str)):
            if named is not None:
                raise TypeError(f"{operation} got two names, {named!r} and {arg!r}; pass one.")
            named = arg
        elif isinstance(arg, Materialized):
            if materialized is not None:
                raise TypeError(f"{operation} got two Materialized; pass one.")
            materialized = arg
        else:
            raise TypeError(f"{operation} takes a Materialized and a Named (in either order), got {arg!r}.")
    return materialized, named


def consumed_and_materialized(
    consumed: Any, materialized: Any, operation: str
) -> tuple[Consumed, Materialized]:
    """A source table's ``Consumed`` and ``Materialized`` (defaults for those not given). Kafka
    overloads ``table``/``globalTable`` as ``(topic)``, ``(topic, Consumed)``, ``(topic,
    Materialized)`` and ``(topic, Consumed, Materialized)``, so a Materialized may come second;
    anything else is a TypeError naming ``operation``."""
    if isinstance(consumed, Materialized) and materialized is None:
        consumed, materialized = None, consumed
    if consumed is not None and not isinstance(consumed, Consumed):
        raise TypeError(
            f"{operation} takes (topic[, Consumed][, Materialized]); got {consumed!r} where a Consumed "
            "or a Materialized goes."
        )
    if materialized is not None and not isinstance(materialized, Materialized):
        raise TypeError(
            f"{operation} takes (topic[, Consumed][, Materialized]); got {materialized!r} where a "
            "Materialized goes."
        )
    return consumed or Consumed(), materialized or Materialized()


def leading_options(
    store_names: tuple[Any, ...], operation: str, *, allow_materialized: bool
) -> tuple[Materialized | None, Named | None, tuple[str, ...]]:
    """Split the Materialized and Named that lead a Processor API operation's store names, as in
    Kafka's ``process(supplier, Named, String...)`` and ``transformValues(supplier, Materialized,
    Named, String...)``: each at most once, in that order, before the names (strings)."""
    materialized: Materialized | None = None
    named: Named | None = None
    rest = list(store_names)
    if allow_materialized and rest and isinstance(rest[0], Materialized):
        materialized = rest.pop(0)
    if rest and isinstance(rest[0], Named):
        named = rest.pop(0)
    if not all(isinstance(name, str) for name in rest):
        options = "[, Materialized][, Named]" if allow_materialized else "[, Named]"
        raise TypeError(
            f"{operation} takes (supplier{options}, store names...), the store names as strings; "
            f"got {store_names!r} after the supplier."
        )
    return materialized, named, tuple(rest)


def aggregation_store_and_name(first: Any, second: Any, operation: str) -> tuple[Materialized, str | None]:
    """An aggregation's ``Materialized`` (a default one when none is given) and processor name,
    from its two optional arguments in either order (``materialized_and_named``)."""
    materialized, named = materialized_and_named(first, second, operation)
    return materialized or Materialized(), named_as(named)


def named_as(named: Named | str | None) -> str | None:
    """The processor name a ``Named`` (or a plain string) gives, or None."""
    if named is None:
        return None
    if isinstance(named, Named):
        return named.name
    if isinstance(named, str):
        return Named.as_(named).name
    raise TypeError(f"Expected a Named or a str for the processor name, got {named!r}.")
