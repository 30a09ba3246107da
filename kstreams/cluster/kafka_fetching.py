"""Fetching for a ``KafkaConsumer``: what librdkafka fetched as one RecordBatch per partition run,
whichever client fetched it, and the records of paused partitions held back.

A consumer fetches with one of two clients (``native_fetcher`` chooses): kstreams' compiled
``KafkaFetcher`` (``kstreams._native.kafka_clients``), which builds the batches in C, or
confluent-kafka's ``Consumer``, whose messages ``split_messages`` turns into the same batches with
``RecordBatch.from_columns``. ``fetch`` gives both answers one shape, runs and errors, so the
consumer has one path after the fetch (``fetch_error`` decides what an error means).

A pause holds the partition's fetched records (``HeldRecords``) until the resume: librdkafka would
drop and refetch them; the consumer pauses the partition in librdkafka too once the held records
reach queued.max.messages.kbytes.

Threads: as for the consumer, one thread at a time (the port's rule); nothing here locks.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from itertools import compress
from operator import itemgetter
from typing import Any, cast

import numpy as np
from confluent_kafka import OFFSET_INVALID, KafkaError, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kstreams._native.record_batch import RecordBatch
from kstreams.cluster.kafka_client_config import librdkafka_logger
from kstreams.cluster.kafka_errors import cluster_error
from kstreams.cluster.kafka_native import native_settings
from kstreams.cluster.port import ClusterError, TopicPartition

__all__ = [
    "DEFAULT_HOLD_BYTES",
    "NOT_SEEKABLE_YET",
    "FetchError",
    "FetchedRun",
    "HeldRecords",
    "fetch",
    "fetch_error",
    "ktp",
    "message_partition",
    "native_fetcher",
    "split_messages",
]

logger = logging.getLogger(__name__)

# librdkafka's default queued.max.messages.kbytes, in bytes: how much a consumer holds of paused
# partitions' records unless that setting says otherwise.
DEFAULT_HOLD_BYTES = 65_536 * 1024
# Errors librdkafka reports in poll and keeps retrying, but that no retry can cure: a Kafka
# consumer raises them from poll.
_UNRECOVERABLE = frozenset(
    {
        KafkaError._AUTO_OFFSET_RESET,
        KafkaError.INCONSISTENT_GROUP_PROTOCOL,
        KafkaError.INVALID_GROUP_ID,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError._AUTHENTICATION,
    }
)
# Seek errors that mean "not yet": the partition is (re)assigned at the offset instead.
NOT_SEEKABLE_YET = frozenset({KafkaError._STATE, KafkaError._OUTDATED})
# Message's accessors, unbound: mapped over a consume call's list in C, with no Python frame per
# message.
_error_of: Any = Message.error
_topic_of: Any = Message.topic
_partition_of: Any = Message.partition
_key_of: Any = Message.key
_value_of: Any = Message.value
_timestamp_of: Any = Message.timestamp
_offset_of: Any = Message.offset
_headers_of: Any = Message.headers
_second = itemgetter(1)

# A fetched run of one partition's records: (topic, partition, batch).
FetchedRun = tuple[str, int, RecordBatch]
# An error librdkafka reported while fetching: (topic or None for the client, partition, error).
FetchError = tuple[str | None, int, KafkaError]


def native_fetcher(settings: Mapping[str, object]) -> Any | None:
    """A ``KafkaFetcher`` with these confluent-kafka settings, or None when one cannot be used
    (the caller then builds a confluent-kafka ``Consumer``). librdkafka rejecting a setting raises
    ``KafkaException``, as building a confluent-kafka client does."""
    plain = native_settings(settings, ignored=("logger",))
    if plain is None:
        return None
    from kstreams._native.kafka_clients import KafkaFetcher

    return KafkaFetcher(plain, librdkafka_logger)


def fetch(
    client: Any, native: bool, max_records: int, wait: float
) -> tuple[list[FetchedRun], list[FetchError]]:
    """Fetch up to ``max_records`` records, waiting up to ``wait`` seconds: the runs of each
    partition in order, and the errors librdkafka reported, from either client (``native``: a
    ``KafkaFetcher``; else confluent-kafka's ``Consumer``). Raises ``KafkaException`` as they do."""
    if native:
        return client.consume_batches(max_records, wait)  # type: ignore[no-any-return]
    return split_messages(client.consume(max_records, wait))


def split_messages(messages: list[Message]) -> tuple[list[FetchedRun], list[FetchError]]:
    """A confluent-kafka consume call's messages as runs (one RecordBatch per partition) and
    errors, as ``KafkaFetcher.consume_batches`` gives them."""
    # Every per-message step maps a C method over the list (no Python frame per message): at
    # ~1 us of Python per message this loop used to cost as much as processing the record.
    if not messages:
        return [], []
    errors: list[FetchError] = []
    found = list(map(_error_of, messages))
    # any(), not found.count(None): comparing a KafkaError with None raises inside C.
    if any(found):
        for message, error in zip(messages, found, strict=True):
            if error is not None:
                errors.append((message.topic(), cast(int, message.partition()), error))
        messages = list(compress(messages, [e is None for e in found]))
        if not messages:
            return [], errors
    runs: list[FetchedRun] = []
    for (topic, partition), run in _runs(messages).items():
        headers = list(map(_headers_of, run))
        batch = RecordBatch.from_columns(
            list(map(_key_of, run)),  # bytes: no deserializer is configured
            list(map(_value_of, run)),
            list(map(_second, map(_timestamp_of, run))),
            partition,
            list(map(_offset_of, run)),
            None if headers.count(None) == len(headers) else headers,
        )
        runs.append((topic, partition, batch))
    return runs, errors


def _runs(messages: list[Message]) -> dict[tuple[str, int], list[Message]]:
    """The messages of one poll by (topic, partition), in order. librdkafka hands out a fetch's
    messages partition by partition, so the list is a few long runs: their boundaries are found
    with numpy, not with a Python step per message."""
    count = len(messages)
    topics = list(map(_topic_of, messages))
    partitions = list(map(_partition_of, messages))
    one_topic = topics.count(topics[0]) == count
    if one_topic and partitions.count(partitions[0]) == count:
        return {(topics[0], partitions[0]): messages}
    keys = np.array(partitions, dtype=np.int64)
    if not one_topic:
        ids = {topic: i for i, topic in enumerate(dict.fromkeys(topics))}
        keys += np.array(list(map(ids.__getitem__, topics)), dtype=np.int64) << 32
    starts = [0, *(np.flatnonzero(keys[1:] != keys[:-1]) + 1).tolist()]
    runs: dict[tuple[str, int], list[Message]] = {}
    for start, stop in zip(starts, [*starts[1:], count], strict=True):
        key = (topics[start], partitions[start])
        run = runs.get(key)
        if run is None:
            runs[key] = messages[start:stop]
        else:
            run.extend(messages[start:stop])
    return runs


def fetch_error(where: str, error: KafkaError, consumer: str) -> None:
    """What an error librdkafka reported while ``consumer`` fetched ``where`` (a partition, or the
    consumer) means: nothing (end of a partition), a warning (transient: librdkafka retries by
    itself), or a ``ClusterError`` raised (no retry can cure it)."""
    code = error.code()
    if code == KafkaError._PARTITION_EOF:
        return
    if code == KafkaError.INVALID_SESSION_TIMEOUT:
        raise ClusterError(
            f"{consumer} cannot join its group: the broker refuses its session.timeout.ms "
            "(outside the broker's group.min.session.timeout.ms..group.max.session.timeout.ms, "
            "6000..1800000 by default): set session.timeout.ms within that range"
        )
    if error.fatal() or code in _UNRECOVERABLE:
        raise cluster_error(f"Fetching {where}", error)
    # Transient (broker down, topic not yet known): librdkafka retries by itself.
    logger.warning("Fetching %s: %s", where, error.str())


class HeldRecords:
    """The fetched records of paused partitions, by partition in fetch order, and their size."""

    def __init__(self, limit_bytes: int) -> None:
        self._batches: dict[TopicPartition, list[RecordBatch]] = {}
        self._bytes = 0
        # Once this much is held, the consumer stops librdkafka fetching more of a paused partition.
        self._limit = limit_bytes

    def add(self, tp: TopicPartition, batch: RecordBatch) -> bool:
        """Hold a paused partition's batch; whether the held records reached the limit."""
        self._batches.setdefault(tp, []).append(batch)
        self._bytes += batch.nbytes
        return self._bytes >= self._limit

    def release(self, paused: set[TopicPartition]) -> list[tuple[TopicPartition, RecordBatch]]:
        """The held records of partitions no longer ``paused``, oldest first, held no more."""
        if not self._batches:
            return []
        ready = [tp for tp in self._batches if tp not in paused]
        released = [(tp, batch) for tp in ready for batch in self._batches.pop(tp)]
        self._bytes -= sum(batch.nbytes for _, batch in released)
        return released

    def drop(self, tp: TopicPartition) -> None:
        """Forget a partition's held records (a seek, a revocation)."""
        for batch in self._batches.pop(tp, ()):
            self._bytes -= batch.nbytes

    def first_offset(self, tp: TopicPartition) -> int | None:
        """The offset of the oldest held record of ``tp`` (None: none held)."""
        held = self._batches.get(tp)
        return held[0].first_offset if held else None


def message_partition(message: Message) -> TopicPartition:
    """The partition a fetched (non-error) message comes from."""
    return TopicPartition(cast(str, message.topic()), cast(int, message.partition()))


def ktp(tp: TopicPartition, offset: int = OFFSET_INVALID) -> KafkaTopicPartition:
    """A partition (and offset) as librdkafka takes it."""
    return KafkaTopicPartition(tp.topic, tp.partition, offset)
