"""What a foreign-key table join sends between its two sides, and the serdes that write it.

The left table registers each row with the right side (``SubscriptionWrapper``, keyed by the
foreign key, on the subscription registration topic); the right side keeps the registrations
keyed by ``CombinedKey(foreign_key, primary_key)`` and answers with ``SubscriptionResponseWrapper``
(keyed by the primary key, on the response topic). Each message carries a hash of the left value
it was made for, so the left side can drop answers to a value it no longer holds (Kafka's
SubscriptionWrapper, SubscriptionResponseWrapper and CombinedKeySchema).

Wire formats are Kafka Streams' (4.1), so a Java application's subscription topics and store can be
taken over, and the reverse:
- subscription (version 1): a byte with the version in its low 7 bits and 0x80 set when there is
  no hash, the instruction byte, the 16 hash bytes (absent without a hash), the primary key's
  bytes, then the primary partition (4 bytes; -1 when unknown, which Kafka never writes). Version
  0 (no partition) is read too;
- response (version 0): the version byte (0x80 set without a hash), the 16 hash bytes (absent
  without a hash), then the foreign value's bytes (none: a null foreign value). The primary
  partition a response goes back to is not written: the response sink's partitioner reads it
  before the record is serialized;
- combined key: the foreign key's length (4 bytes), its bytes, then the primary key's bytes, so a
  prefix scan by foreign key finds exactly that key's subscribers;
- the hash: Kafka's 128-bit MurmurHash3 (x64, seed 104729) of the left value's bytes, as two
  big-endian 64-bit halves.

Inner serdes may be None (the DSL was given none); the processors bind them to the application's
default serdes at init (``bind_defaults``), before a record flows.

The topics the inner serdes are called with are Kafka's, so a serde that depends on the topic (a
Schema Registry subject) sees what it sees under Kafka Streams: the primary key, inside a
subscription and inside a combined key, with the pseudo topic
``<app>-<subscription registration topic>-pk``; the foreign key inside a combined key (the
subscription store, its prefix scans) with ``<app>-<subscription registration topic>-fk``. The
foreign value inside a response is written with the topic the response itself is written to.
The pseudo topics get the application id when the serdes are bound (``bind_defaults``).
"""

from __future__ import annotations

import abc
import enum
import logging
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kstreams._native.record_batch import murmur3_hash128
from kstreams.errors import SerializationException
from kstreams.serdes import serde_from_config

__all__ = [
    "CombinedKey",
    "CombinedKeySerde",
    "Instruction",
    "ResponseWrapperSerde",
    "SubscriptionResponseWrapper",
    "SubscriptionWrapper",
    "SubscriptionWrapperSerde",
    "pseudo_topic",
    "value_hash",
]

logger = logging.getLogger(__name__)

_SUBSCRIPTION_VERSION = 1  # Kafka's SubscriptionWrapper.CURRENT_VERSION: the primary partition at the end
_RESPONSE_VERSION = 0  # Kafka's SubscriptionResponseWrapper.CURRENT_VERSION
_NO_HASH_FLAG = 0x80  # set in the version byte when no hash follows
_VERSION_MASK = 0x7F
_HASH_BYTES = 16
_LENGTH = struct.Struct(">i")
_PARTITION = struct.Struct(">i")


class Instruction(enum.IntEnum):
    """What the right side does with a subscription (Kafka's SubscriptionWrapper.Instruction)."""

    # Remove the subscription; answer nothing (the row moved to another foreign key).
    DELETE_KEY_NO_PROPAGATE = 0
    # Remove the subscription and answer with a null foreign value (the row was deleted).
    DELETE_KEY_AND_PROPAGATE = 1
    # Keep the subscription; answer even without a foreign row (its foreign key changed, or a left
    # join), so an earlier result is replaced.
    PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE = 2
    # Keep the subscription; answer only when the foreign row exists (a new row of an inner join).
    PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE = 3


def value_hash(serialized: bytes | None) -> bytes | None:
    """The 128-bit hash of a left value's bytes that subscriptions carry (None for no value): Kafka's
    ``Murmur3.hash128``, its two halves big-endian, so hashes a Java application stored in its
    subscription store still match the left values after a hand-over."""
    if serialized is None:
        return None
    return murmur3_hash128(serialized)


@dataclass(frozen=True)
class CombinedKey:
    """A subscription's key in the subscription store: the foreign key, then the primary key."""

    foreign_key: Any
    primary_key: Any


@dataclass(frozen=True)
class SubscriptionWrapper:
    """A left row's registration with the right side."""

    hash: bytes | None
    instruction: Instruction
    primary_key: Any
    primary_partition: int | None


@dataclass(frozen=True)
class SubscriptionResponseWrapper:
    """The right side's answer: the foreign value (None: no row) for the left value of ``hash``."""

    original_value_hash: bytes | None
    foreign_value: Any
    primary_partition: int | None


def pseudo_topic(configs: Mapping[str, Any], topic: str, unbound: str) -> str:
    """``topic`` (an internal topic name, or a pseudo topic derived from one) with the application
    id of ``configs`` in front, as Kafka names internal topics; ``unbound`` when ``configs`` have
    no application id (a serde configured from a partial config keeps what it was bound to)."""
    application_id = configs.get("application.id")
    return unbound if application_id is None else f"{application_id}-{topic}"


def _default(serde: Any, configs: Mapping[str, Any], key: str, what: str) -> Any:
    if serde is not None:
        return serde
    resolved = serde_from_config(configs, key)
    if resolved is None:
        raise SerializationException(
            f"A foreign-key join has no serde for {what}: give the tables' serdes (Consumed.with_ or "
            f"Materialized.with_key_serde/with_value_serde) or set {key}."
        )
    return resolved


class _BoundSerde(abc.ABC):
    """A composite serde: its own serializer and deserializer, bound to defaults at init."""

    name = "foreign-key-join"

    def serializer(self) -> Any:
        return self

    def deserializer(self) -> Any:
        return self

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        self.bind_defaults(configs)

    @abc.abstractmethod
    def bind_defaults(self, configs: Mapping[str, Any]) -> None:
        """Fill inner serdes left None with the application's defaults."""

    def _check(self, data: Any, kind: type, topic: str | None) -> None:
        if not isinstance(data, kind):
            raise SerializationException(
                f"The {self.name} serde of topic {topic} expects a {kind.__name__}, "
                f"got {type(data).__name__}."
            )


class SubscriptionWrapperSerde(_BoundSerde):
    """Writes ``SubscriptionWrapper``s; ``primary_key_serde`` is the left table's key serde, called
    with ``primary_key_topic`` (application id in front once bound), whatever topic the
    subscription goes to."""

    name = "subscription-wrapper"

    def __init__(self, primary_key_serde: Any, primary_key_topic: str) -> None:
        self.primary_key_serde = primary_key_serde
        self._primary_key_topic_name = primary_key_topic
        self.primary_key_topic = primary_key_topic

    def bind_defaults(self, configs: Mapping[str, Any]) -> None:
        self.primary_key_serde = _default(
            self.primary_key_serde, configs, "default.key.serde", "the left table's keys"
        )
        self.primary_key_topic = pseudo_topic(configs, self._primary_key_topic_name, self.primary_key_topic)

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        self._check(data, SubscriptionWrapper, topic)
        key = self.primary_key_serde.serialize(self.primary_key_topic, data.primary_key) or b""
        partition = -1 if data.primary_partition is None else data.primary_partition
        if data.hash is None:
            head = bytes((_SUBSCRIPTION_VERSION | _NO_HASH_FLAG, int(data.instruction)))
        else:
            head = bytes((_SUBSCRIPTION_VERSION, int(data.instruction))) + data.hash
        return head + key + _PARTITION.pack(partition)

    def deserialize(self, topic: str | None, data: bytes | None) -> SubscriptionWrapper | None:
        if data is None:
            return None
        if len(data) < 2:
            raise SerializationException(f"A subscription of topic {topic} is truncated ({len(data)} bytes).")
        version = data[0] & _VERSION_MASK
        if version > _SUBSCRIPTION_VERSION:
            raise SerializationException(
                f"A subscription of topic {topic} has version {version}; this kstreams reads versions 0 "
                f"to {_SUBSCRIPTION_VERSION}: upgrade every instance of the application."
            )
        start = 2 if data[0] & _NO_HASH_FLAG else 2 + _HASH_BYTES
        end = len(data) - (_PARTITION.size if version > 0 else 0)
        if end < start:
            raise SerializationException(f"A subscription of topic {topic} is truncated ({len(data)} bytes).")
        partition = _PARTITION.unpack_from(data, end)[0] if version > 0 else -1
        return SubscriptionWrapper(
            None if start == 2 else bytes(data[2:start]),
            Instruction(data[1]),
            self.primary_key_serde.deserialize(self.primary_key_topic, bytes(data[start:end])),
            None if partition < 0 else partition,
        )


class ResponseWrapperSerde(_BoundSerde):
    """Writes ``SubscriptionResponseWrapper``s; ``foreign_value_serde`` is the right table's value serde."""

    name = "subscription-response-wrapper"

    def __init__(self, foreign_value_serde: Any) -> None:
        self.foreign_value_serde = foreign_value_serde

    def bind_defaults(self, configs: Mapping[str, Any]) -> None:
        self.foreign_value_serde = _default(
            self.foreign_value_serde, configs, "default.value.serde", "the right table's values"
        )

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        self._check(data, SubscriptionResponseWrapper, topic)
        value = (
            None
            if data.foreign_value is None
            else self.foreign_value_serde.serialize(topic, data.foreign_value)
        )
        digest = data.original_value_hash
        head = (
            bytes((_RESPONSE_VERSION | _NO_HASH_FLAG,))
            if digest is None
            else bytes((_RESPONSE_VERSION,)) + digest
        )
        return head + (value or b"")

    def deserialize(self, topic: str | None, data: bytes | None) -> SubscriptionResponseWrapper | None:
        if data is None:
            return None
        start = 1 if data and data[0] & _NO_HASH_FLAG else 1 + _HASH_BYTES
        if len(data) < start:
            raise SerializationException(
                f"A subscription response of topic {topic} is truncated ({len(data)} bytes)."
            )
        version = data[0] & _VERSION_MASK
        if version > _RESPONSE_VERSION:
            raise SerializationException(
                f"A subscription response of topic {topic} has version {version}; this kstreams reads "
                f"version {_RESPONSE_VERSION}: upgrade every instance of the application."
            )
        # Kafka writes no value for a null foreign value, so no bytes after the hash mean null.
        value = (
            self.foreign_value_serde.deserialize(topic, bytes(data[start:])) if len(data) > start else None
        )
        return SubscriptionResponseWrapper(None if start == 1 else bytes(data[1:start]), value, None)


class CombinedKeySerde(_BoundSerde):
    """Writes ``CombinedKey``s so that keys of one foreign key share a prefix (``prefix``). The
    foreign key's serde is called with ``foreign_key_topic``, the primary key's with
    ``primary_key_topic`` (application id in front once bound), whatever store or topic the key
    is for (Kafka's CombinedKeySchema)."""

    name = "combined-key"

    def __init__(
        self, foreign_key_serde: Any, primary_key_serde: Any, foreign_key_topic: str, primary_key_topic: str
    ) -> None:
        self.foreign_key_serde = foreign_key_serde
        self.primary_key_serde = primary_key_serde
        self._topic_names = (foreign_key_topic, primary_key_topic)
        self.foreign_key_topic, self.primary_key_topic = foreign_key_topic, primary_key_topic

    def bind_defaults(self, configs: Mapping[str, Any]) -> None:
        self.foreign_key_serde = _default(
            self.foreign_key_serde, configs, "default.key.serde", "the right table's keys"
        )
        self.primary_key_serde = _default(
            self.primary_key_serde, configs, "default.key.serde", "the left table's keys"
        )
        foreign, primary = self._topic_names
        self.foreign_key_topic = pseudo_topic(configs, foreign, self.foreign_key_topic)
        self.primary_key_topic = pseudo_topic(configs, primary, self.primary_key_topic)

    def prefix(self, foreign_key: Any) -> bytes:
        """The bytes every combined key of ``foreign_key`` starts with."""
        fk = self.foreign_key_serde.serialize(self.foreign_key_topic, foreign_key) or b""
        return _LENGTH.pack(len(fk)) + fk

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        self._check(data, CombinedKey, topic)
        return self.prefix(data.foreign_key) + (
            self.primary_key_serde.serialize(self.primary_key_topic, data.primary_key) or b""
        )

    def deserialize(self, topic: str | None, data: bytes | None) -> CombinedKey | None:
        if data is None:
            return None
        (length,) = _LENGTH.unpack_from(data)
        start = _LENGTH.size
        return CombinedKey(
            self.foreign_key_serde.deserialize(self.foreign_key_topic, data[start : start + length]),
            self.primary_key_serde.deserialize(self.primary_key_topic, data[start + length :]),
        )
