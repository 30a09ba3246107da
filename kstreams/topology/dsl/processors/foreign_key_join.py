"""The processors of a foreign-key table join (KIP-213), in the order a record passes them.

Left side (the table whose rows hold the foreign key):
- ``SubscriptionSendSupplier``: on each row change, registers the row with the foreign key it now
  holds, and unregisters it from the one it held before (Kafka's SubscriptionSendProcessorSupplier);
- ``ResponseJoinSupplier``: resolves the right side's answers against the left row as it is now,
  dropping answers made for a value the row no longer has (ResponseJoinProcessorSupplier).

Right side (the table keyed by the foreign key):
- ``SubscriptionReceiveSupplier``: keeps registrations in the subscription store, keyed by
  (foreign key, primary key) (SubscriptionReceiveProcessorSupplier);
- ``SubscriptionJoinSupplier``: answers a registration with the foreign row
  (SubscriptionJoinProcessorSupplier);
- ``ForeignTableJoinSupplier``: answers every registration of a foreign key when its row changes
  (ForeignTableJoinProcessorSupplier).

Results and timestamps are Kafka's: an answer to a registration carries the larger of the
registration's and the foreign row's timestamps; an answer to a foreign row change carries that
change's timestamp; the resolved result keeps the answer's timestamp. A null result is a tombstone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kstreams.processor import Processor, ProcessorContext, Record
from kstreams.serdes import serde_from_config
from kstreams.state.value_and_timestamp import ValueAndTimestamp
from kstreams.topology.dsl.foreign_key_serdes import (
    CombinedKey,
    CombinedKeySerde,
    Instruction,
    ResponseWrapperSerde,
    SubscriptionResponseWrapper,
    SubscriptionWrapper,
    SubscriptionWrapperSerde,
    pseudo_topic,
    value_hash,
)
from kstreams.topology.dsl.processors.store_access import get_store
from kstreams.topology.dsl.processors.table import ValueGetterSupplier
from kstreams.topology.dsl.records import Change

__all__ = [
    "ForeignTableJoinSupplier",
    "ResponseJoinSupplier",
    "SubscriptionJoinSupplier",
    "SubscriptionReceiveSupplier",
    "SubscriptionSendSupplier",
    "ValueHasher",
]

logger = logging.getLogger(__name__)


class ValueHasher:
    """Hashes left values through the left table's value serde (the default when it has none), so
    both ends of the join compute the same hash for the same value. The serde is called with
    Kafka's pseudo topic ``<app>-<subscription registration topic>-vh`` (``topic`` is given
    without the application id, which ``bind`` puts in front)."""

    def __init__(self, value_serde: Any, topic: str) -> None:
        self.value_serde = value_serde
        self._topic_name = topic
        self.topic = topic

    def bind(self, context: ProcessorContext[Any, Any]) -> None:
        if self.value_serde is None:
            self.value_serde = serde_from_config(context.app_configs, "default.value.serde")
        self.topic = pseudo_topic(context.app_configs, self._topic_name, self.topic)

    def __call__(self, value: Any) -> bytes | None:
        if value is None:
            return None
        return value_hash(self.value_serde.serialize(self.topic, value))


class _Init(Processor[Any, Any, Any, Any]):
    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context


# --- left side: registration -------------------------------------------------------------


class SubscriptionSendSupplier:
    """Registers each left row with its foreign key ``extractor(value)``; ``left_join`` keeps rows
    whose foreign key is None or has no foreign row (they join with None)."""

    kind = "fk_subscription_send"

    def __init__(
        self,
        extractor: Callable[[Any], Any],
        left_join: bool,
        hasher: ValueHasher,
        subscription_serde: SubscriptionWrapperSerde,
    ) -> None:
        self.extractor = extractor
        self.left_join = left_join
        self.hasher = hasher
        self.subscription_serde = subscription_serde

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _SubscriptionSend(self)


class _SubscriptionSend(_Init):
    def __init__(self, spec: SubscriptionSendSupplier) -> None:
        self.spec = spec

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        super().init(context)
        self.spec.hasher.bind(context)
        self.spec.subscription_serde.bind_defaults(context.app_configs)
        # Answers come back to this task's partition: the response topic is co-partitioned with
        # the left table's topics, whatever partitioner wrote those.
        self.partition = context.task_id.partition

    def _foreign_key(self, value: Any) -> Any:
        return None if value is None else self.spec.extractor(value)

    def _send(
        self, record: Record[Any, Any], foreign_key: Any, instruction: Instruction, digest: Any
    ) -> None:
        wrapper = SubscriptionWrapper(digest, instruction, record.key, self.partition)
        self.context.forward(Record(foreign_key, wrapper, record.timestamp, record.headers))

    def process(self, record: Record[Any, Any]) -> None:
        if record.key is None:
            return
        change: Change[Any] = record.value
        if not change.is_latest:
            # Out of order in a versioned table: no current row changed (KIP-914).
            logger.debug("Skipping an out-of-order update of a versioned table in a foreign-key join.")
            return
        new, old = change.new_value, change.old_value
        digest = self.spec.hasher(new)
        new_fk = self._foreign_key(new)
        old_fk = self._foreign_key(old)
        if self.spec.left_join:
            if old is not None:
                if old_fk is not None and old_fk != new_fk:
                    self._send(record, old_fk, Instruction.DELETE_KEY_NO_PROPAGATE, digest)
                self._send(record, new_fk, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, digest)
            elif new is not None:
                self._send(record, new_fk, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, digest)
            return
        # Inner join, as Kafka Streams 4.1's SubscriptionSendProcessorSupplier: a row whose old
        # foreign key was None never subscribed, so it counts as an insert.
        if new is not None:
            if new_fk is None:
                logger.debug("Skipping a left row of key %r: its foreign key is None.", record.key)
                if old_fk is not None:
                    # The row no longer joins: unsubscribe, and delete the result it may have had.
                    self._send(record, old_fk, Instruction.DELETE_KEY_AND_PROPAGATE, digest)
                return
            if old_fk is not None and old_fk != new_fk:
                # The row moved: leave the old foreign key's subscribers without emitting there,
                # and emit even without a foreign row, since the result joined before must go.
                self._send(record, old_fk, Instruction.DELETE_KEY_NO_PROPAGATE, digest)
                self._send(record, new_fk, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, digest)
            else:
                # An insert, or an update on the same foreign key: without a foreign row the row
                # did not join before either, so there is no result to delete.
                self._send(record, new_fk, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, digest)
        elif old_fk is not None:
            self._send(record, old_fk, Instruction.DELETE_KEY_AND_PROPAGATE, digest)


# --- right side: the subscription store and the answers ----------------------------------


class SubscriptionReceiveSupplier:
    """Keeps (or drops) each registration in the subscription store, then passes it on keyed by
    ``CombinedKey(foreign_key, primary_key)``."""

    kind = "fk_subscription_receive"

    def __init__(
        self, store_name: str, subscription_serde: SubscriptionWrapperSerde, key_serde: CombinedKeySerde
    ) -> None:
        self.store_name = store_name
        self.subscription_serde = subscription_serde
        self.key_serde = key_serde

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _SubscriptionReceive(self)


class _SubscriptionReceive(_Init):
    def __init__(self, spec: SubscriptionReceiveSupplier) -> None:
        self.spec = spec

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        super().init(context)
        self.spec.subscription_serde.bind_defaults(context.app_configs)
        self.spec.key_serde.bind_defaults(context.app_configs)
        self.store = get_store(context, self.spec.store_name)

    def process(self, record: Record[Any, Any]) -> None:
        wrapper: SubscriptionWrapper = record.value
        if wrapper is None:
            return
        if record.key is None:
            # Only a left join's row without a foreign key is answered (with None) and not stored.
            if wrapper.instruction is not Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
                logger.debug(
                    "Skipping a subscription with a null foreign key (left key %r).", wrapper.primary_key
                )
                return
        else:
            key = CombinedKey(record.key, wrapper.primary_key)
            if wrapper.instruction in (
                Instruction.DELETE_KEY_AND_PROPAGATE,
                Instruction.DELETE_KEY_NO_PROPAGATE,
            ):
                self.store.delete(key)
            else:
                self.store.put(key, ValueAndTimestamp.make(wrapper, record.timestamp))
        self.context.forward(record.with_key(CombinedKey(record.key, wrapper.primary_key)))


class SubscriptionJoinSupplier:
    """Answers a registration with the foreign row the right table holds for its foreign key."""

    kind = "fk_subscription_join"

    def __init__(self, foreign_getter: ValueGetterSupplier, response_serde: ResponseWrapperSerde) -> None:
        self.foreign_getter = foreign_getter
        self.response_serde = response_serde

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _SubscriptionJoin(self)


class _SubscriptionJoin(_Init):
    def __init__(self, spec: SubscriptionJoinSupplier) -> None:
        self.spec = spec

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        super().init(context)
        self.spec.response_serde.bind_defaults(context.app_configs)
        self.foreign = self.spec.foreign_getter.get(context)

    def process(self, record: Record[Any, Any]) -> None:
        key: CombinedKey = record.key
        wrapper: SubscriptionWrapper = record.value
        stored = None if key.foreign_key is None else self.foreign(key.foreign_key)
        foreign_value = None if stored is None else stored.value
        timestamp = record.timestamp if stored is None else max(record.timestamp, stored.timestamp)
        instruction = wrapper.instruction
        if instruction is Instruction.DELETE_KEY_NO_PROPAGATE:
            return
        if instruction is Instruction.DELETE_KEY_AND_PROPAGATE:
            foreign_value = None
        elif instruction is Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE and foreign_value is None:
            return
        response = SubscriptionResponseWrapper(wrapper.hash, foreign_value, wrapper.primary_partition)
        self.context.forward(Record(wrapper.primary_key, response, timestamp, record.headers))


class ForeignTableJoinSupplier:
    """On each change of a right row, answers every left row registered with its key."""

    kind = "fk_foreign_table_join"

    def __init__(
        self, store_name: str, key_serde: CombinedKeySerde, response_serde: ResponseWrapperSerde
    ) -> None:
        self.store_name = store_name
        self.key_serde = key_serde
        self.response_serde = response_serde

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _ForeignTableJoin(self)


class _ForeignTableJoin(_Init):
    def __init__(self, spec: ForeignTableJoinSupplier) -> None:
        self.spec = spec

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        super().init(context)
        self.spec.key_serde.bind_defaults(context.app_configs)
        self.spec.response_serde.bind_defaults(context.app_configs)
        self.store = get_store(context, self.spec.store_name)

    def process(self, record: Record[Any, Any]) -> None:
        if record.key is None:
            return
        change: Change[Any] = record.value
        if not change.is_latest:
            # Out of order in a versioned table: no current row changed (KIP-914).
            logger.debug("Skipping an out-of-order update of a versioned table in a foreign-key join.")
            return
        prefix = self.spec.key_serde.prefix(record.key)
        # Collected first: forwarding must not run while the store's iterator is open.
        subscribers = list(self.store.prefix_scan(prefix))
        for key, stored in subscribers:
            wrapper: SubscriptionWrapper = stored.value
            response = SubscriptionResponseWrapper(wrapper.hash, change.new_value, wrapper.primary_partition)
            self.context.forward(Record(key.primary_key, response, record.timestamp, record.headers))


# --- left side: resolution ---------------------------------------------------------------


class ResponseJoinSupplier:
    """Joins each answer with the left row as it is now: ``joiner(left_value, foreign_value)``, or a
    tombstone when the inner join has no foreign row (or the left row is gone). Answers whose hash
    is not the current left value's are stale and dropped."""

    kind = "fk_response_join"

    def __init__(
        self,
        left_getter: ValueGetterSupplier,
        joiner: Callable[[Any, Any], Any],
        left_join: bool,
        hasher: ValueHasher,
        response_serde: ResponseWrapperSerde,
    ) -> None:
        self.left_getter = left_getter
        self.joiner = joiner
        self.left_join = left_join
        self.hasher = hasher
        self.response_serde = response_serde

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _ResponseJoin(self)


class _ResponseJoin(_Init):
    def __init__(self, spec: ResponseJoinSupplier) -> None:
        self.spec = spec

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        super().init(context)
        self.spec.hasher.bind(context)
        self.spec.response_serde.bind_defaults(context.app_configs)
        self.left = self.spec.left_getter.get(context)

    def process(self, record: Record[Any, Any]) -> None:
        response: SubscriptionResponseWrapper = record.value
        stored = self.left(record.key)
        left_value = None if stored is None else stored.value
        if self.spec.hasher(left_value) != response.original_value_hash:
            logger.debug("Dropping a stale foreign-key join response for key %r.", record.key)
            return
        if response.foreign_value is None and (not self.spec.left_join or left_value is None):
            result = None
        else:
            result = self.spec.joiner(left_value, response.foreign_value)
        self.context.forward(record.with_value(result))
