"""Foreign-key table joins (KIP-213): ``left.join(right, foreign_key_extractor, joiner)`` and
``left_join``, where each left row names the right row it joins by a foreign key taken from its
value, and the two tables need not be co-partitioned.

The join is laid out as Kafka lays it out, with the same node, store and topic names:
1. the left table's changes go to a subscription processor, which writes registrations keyed by
   foreign key to ``<app>-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-<n>-topic`` (co-partitioned with
   the right table's topics, so a registration meets its foreign row's task);
2. there, registrations are kept in ``KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-<n>`` (keyed by
   foreign key, then primary key) and answered with the foreign row; a change of a right row
   answers all its registrations;
3. answers go to ``<app>-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-<n>-topic`` (co-partitioned with the
   left table's topics; each answer goes to the partition its registration came from), where
   the resolver joins them with the current left row and drops stale ones;
4. a table-source processor ``KTABLE-FK-JOIN-OUTPUT-<n>`` makes the results a KTable.

Both internal topics are created by the internal topics manager like repartition topics, with the
partition counts of the right and the left table's topics.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kstreams.topology.dsl import naming
from kstreams.topology.dsl.foreign_key_serdes import (
    CombinedKeySerde,
    ResponseWrapperSerde,
    SubscriptionWrapperSerde,
)
from kstreams.topology.dsl.materialize import key_value_store_builder
from kstreams.topology.dsl.parameters import Materialized, Named, StoreType, materialized_and_named
from kstreams.topology.dsl.processors.foreign_key_join import (
    ForeignTableJoinSupplier,
    ResponseJoinSupplier,
    SubscriptionJoinSupplier,
    SubscriptionReceiveSupplier,
    SubscriptionSendSupplier,
    ValueHasher,
)

if TYPE_CHECKING:
    from kstreams.topology.dsl.internal_builder import InternalStreamsBuilder
    from kstreams.topology.dsl.ktable import KTable

__all__ = ["ForeignKeyJoinCall", "TableJoined", "foreign_key_join", "parse_table_join_call"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableJoined:
    """Options of a foreign-key join (Kafka's ``TableJoined``): a name for its processors, stores
    and topics, and the partitioners of the left (``partitioner``) and right (``other_partitioner``)
    tables' topics when those were not written with the default partitioner."""

    name: str | None = None
    partitioner: Any = None
    other_partitioner: Any = None

    @staticmethod
    def as_(name: str) -> TableJoined:
        return TableJoined(Named.as_(name).name)

    @staticmethod
    def with_(partitioner: Any = None, other_partitioner: Any = None) -> TableJoined:
        return TableJoined(None, partitioner, other_partitioner)

    def with_name(self, name: str) -> TableJoined:
        return TableJoined(Named.as_(name).name, self.partitioner, self.other_partitioner)

    def with_partitioner(self, partitioner: Any) -> TableJoined:
        return TableJoined(self.name, partitioner, self.other_partitioner)

    def with_other_partitioner(self, other_partitioner: Any) -> TableJoined:
        return TableJoined(self.name, self.partitioner, other_partitioner)


@dataclass(frozen=True)
class ForeignKeyJoinCall:
    """The arguments of a foreign-key ``join``/``left_join`` call, normalised."""

    foreign_key_extractor: Callable[[Any], Any]
    joiner: Callable[[Any, Any], Any]
    table_joined: TableJoined
    materialized: Materialized


def _primary_key_form(
    joiner: Any, materialized: Any = None, named: Any = None
) -> None:  # pragma: no cover - only its signature is used
    """join(other, joiner[, materialized][, named])"""


def _foreign_key_form(
    foreign_key_extractor: Any, joiner: Any, table_joined: Any = None, materialized: Any = None
) -> None:  # pragma: no cover - only its signature is used
    """join(other, foreign_key_extractor, joiner[, table_joined][, materialized])"""


_PRIMARY = inspect.signature(_primary_key_form)
_FOREIGN = inspect.signature(_foreign_key_form)


def parse_table_join_call(
    operation: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Callable[..., Any], Materialized | None, Named | str | None] | ForeignKeyJoinCall:
    """Tell Kafka's overloads of ``KTable.join``/``left_join`` apart: a callable second argument
    followed by a callable joiner (or a ``foreign_key_extractor`` keyword) is a foreign-key join;
    anything else is the primary-key join ``(joiner, materialized, named)``."""
    foreign = "foreign_key_extractor" in kwargs or (
        len(args) >= 2 and callable(args[0]) and callable(args[1]) and not isinstance(args[1], Materialized)
    )
    if not foreign:
        try:
            bound = _PRIMARY.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(
                f"KTable.{operation}() takes (other, joiner[, materialized][, named]) or, for a foreign-key "
                f"join, (other, foreign_key_extractor, joiner[, table_joined][, materialized]): {exc}."
            ) from None
        materialized, named = materialized_and_named(
            bound.arguments.get("materialized"), bound.arguments.get("named"), f"KTable.{operation}()"
        )
        return bound.arguments["joiner"], materialized, named
    try:
        bound = _FOREIGN.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(
            f"A foreign-key KTable.{operation}() takes (other, foreign_key_extractor, joiner"
            f"[, table_joined][, materialized]): {exc}."
        ) from None
    extractor = bound.arguments["foreign_key_extractor"]
    joiner = bound.arguments["joiner"]
    if not callable(extractor) or not callable(joiner):
        raise TypeError(
            f"A foreign-key KTable.{operation}() needs a callable foreign_key_extractor(value) and a "
            f"callable joiner(value, other_value); got {extractor!r} and {joiner!r}."
        )
    options = bound.arguments.get("table_joined")
    materialized = bound.arguments.get("materialized")
    # Kafka also overloads (other, extractor, joiner, Materialized) and the older Named forms.
    if isinstance(options, Materialized):
        if materialized is not None:
            raise TypeError(f"KTable.{operation}() was given two Materialized: pass one.")
        options, materialized = None, options
    if isinstance(options, Named):
        options = TableJoined(options.name)
    elif isinstance(options, str):
        options = TableJoined.as_(options)
    elif options is None:
        options = TableJoined()
    elif not isinstance(options, TableJoined):
        raise TypeError(
            f"A foreign-key KTable.{operation}() takes a TableJoined (or a Named) after the joiner, "
            f"got {options!r}."
        )
    if materialized is None:
        materialized = Materialized()
    elif not isinstance(materialized, Materialized):
        raise TypeError(f"KTable.{operation}() takes a Materialized for its result, got {materialized!r}.")
    return ForeignKeyJoinCall(extractor, joiner, options, materialized)


def _named(builder: InternalStreamsBuilder, base: str | None, suffix: str, prefix: str) -> str:
    """``base + suffix`` when the join is named, else a generated name. Like Kafka, a named join
    still draws the index, so the names generated after it do not depend on the naming."""
    generated = builder.new_processor_name(prefix)
    return generated if base is None else base + suffix


def _user_partitioner(partitioner: Any) -> Any:
    """A table's partitioner applied to a foreign-key join message: like Kafka, it is asked for
    the key only (the value it sees is None, as the message is not the table's value)."""
    if partitioner is None:
        return None
    partition = getattr(partitioner, "partition", partitioner)

    def by_key(topic: str, key: Any, value: Any, num_partitions: int) -> int | None:
        return partition(topic, key, None, num_partitions)  # type: ignore[no-any-return]

    return by_key


def _response_partitioner(partitioner: Any) -> Any:
    """The response sink's partitioner: the left table's partitioner when given, else the
    partition the registration came from."""
    if partitioner is not None:
        return _user_partitioner(partitioner)

    def to_origin(topic: str, key: Any, value: Any, num_partitions: int) -> int | None:
        partition = getattr(value, "primary_partition", None)
        return partition if partition is not None and partition < num_partitions else None

    return to_origin


def foreign_key_join(
    left: KTable[Any, Any], right: KTable[Any, Any], call: ForeignKeyJoinCall, *, left_join: bool
) -> KTable[Any, Any]:
    """Lay out the foreign-key join of ``left`` with ``right`` (see the module docstring) and return
    its result table."""
    from kstreams.topology.dsl.ktable import KTable, updates_table

    if not isinstance(right, KTable):
        raise TypeError(f"A foreign-key join joins a KTable, got {right!r}.")
    builder = left._builder
    base = call.table_joined.name
    # Old values tell the subscription processor which foreign key a row leaves.
    left._enable_sending_old_values()
    left_getter = left._value_getter_supplier()
    right_getter = right._value_getter_supplier()
    # Kafka asks the other table for old values too (so a filter there forwards no tombstone for
    # a row it never held); asked after the lookups, so the stores are added in the same order.
    right._enable_sending_old_values()
    subscription_topic = (
        _named(builder, base, "-subscription-registration", naming.FK_SUBSCRIPTION_REGISTRATION)
        + naming.FK_JOIN_TOPIC_SUFFIX
    )
    # Kafka's pseudo topics for the serdes of the keys inside subscriptions and combined keys,
    # and of the value hash (the serdes put the application id in front when bound).
    subscription_serde = SubscriptionWrapperSerde(left._key_serde, subscription_topic + "-pk")
    response_serde = ResponseWrapperSerde(right._value_serde)
    combined_key_serde = CombinedKeySerde(
        right._key_serde, left._key_serde, subscription_topic + "-fk", subscription_topic + "-pk"
    )
    topology = builder.topology
    topology.add_internal_topic(subscription_topic)
    hasher = ValueHasher(left._value_serde, subscription_topic + "-vh")
    send = _named(builder, base, "-subscription-registration-processor", naming.FK_SUBSCRIPTION_REGISTRATION)
    builder.add_processor(
        send,
        SubscriptionSendSupplier(call.foreign_key_extractor, left_join, hasher, subscription_serde),
        left._name,
    )
    subscription_sink = _named(builder, base, "-subscription-registration-sink", naming.KTABLE_SINK)
    builder.add_sink(
        subscription_sink,
        subscription_topic,
        send,
        right._key_serde,
        subscription_serde,
        _user_partitioner(call.table_joined.other_partitioner),
    )
    subscription_source = _named(builder, base, "-subscription-registration-source", naming.KTABLE_SOURCE)
    builder.add_source(subscription_source, (subscription_topic,), right._key_serde, subscription_serde)
    builder.copartition(right._source_nodes | {subscription_source})

    store_name = _named(builder, base, "-subscription-store", naming.FK_JOIN_STATE_STORE)
    receive = _named(builder, base, "-subscription-receive", naming.FK_SUBSCRIPTION_PROCESSOR)
    builder.add_processor(
        receive,
        SubscriptionReceiveSupplier(store_name, subscription_serde, combined_key_serde),
        subscription_source,
    )
    # Kafka's subscription store: persistent, logged, never cached (every registration counts).
    store = Materialized(store_name, store_type=StoreType.ROCKS_DB, caching_enabled=False)
    builder.add_store(
        key_value_store_builder(store, store_name, combined_key_serde, subscription_serde), receive
    )
    subscription_join = _named(builder, base, "-subscription-join-foreign", naming.FK_SUBSCRIPTION_PROCESSOR)
    builder.add_processor(subscription_join, SubscriptionJoinSupplier(right_getter, response_serde), receive)
    builder.connect_stores(subscription_join, right_getter.store_names())
    foreign_join = _named(builder, base, "-foreign-join-subscription", naming.FK_SUBSCRIPTION_PROCESSOR)
    builder.add_processor(
        foreign_join, ForeignTableJoinSupplier(store_name, combined_key_serde, response_serde), right._name
    )
    builder.connect_stores(foreign_join, (store_name,))

    response_topic = (
        _named(builder, base, "-subscription-response", naming.FK_SUBSCRIPTION_RESPONSE)
        + naming.FK_JOIN_TOPIC_SUFFIX
    )
    topology.add_internal_topic(response_topic)
    response_sink = _named(builder, base, "-subscription-response-sink", naming.KTABLE_SINK)
    topology.add_sink(
        response_sink,
        response_topic,
        subscription_join,
        foreign_join,
        key_serializer=left._key_serde,
        value_serializer=response_serde,
        partitioner=_response_partitioner(call.table_joined.partitioner),
    )
    response_source = _named(builder, base, "-subscription-response-source", naming.KTABLE_SOURCE)
    builder.add_source(response_source, (response_topic,), left._key_serde, response_serde)
    result_sources = left._source_nodes | {response_source}
    builder.copartition(result_sources)

    resolver = _named(builder, base, "-subscription-response-resolver", naming.FK_RESPONSE_RESOLVER)
    builder.add_processor(
        resolver,
        ResponseJoinSupplier(left_getter, call.joiner, left_join, hasher, response_serde),
        response_source,
    )
    builder.connect_stores(resolver, left_getter.store_names())

    result = _named(builder, base, "-result", naming.FK_JOIN_OUTPUT)
    materialized = call.materialized
    result_store = materialized.store_name or builder.new_store_name(naming.FK_JOIN_OUTPUT)
    key_serde = materialized.key_serde if materialized.key_serde is not None else left._key_serde
    logger.debug("Foreign-key join %s of %s with %s laid out.", result, left._name, right._name)
    return updates_table(
        builder,
        result,
        resolver,
        f"foreign-key join {result}",
        result_store,
        materialized,
        key_serde,
        materialized.value_serde,
        result_sources,
    )
