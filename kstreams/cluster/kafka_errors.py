"""Translation of confluent-kafka errors into the port's errors.

Every error the Kafka adapter raises is a ``ClusterError`` (or one of its subclasses) whose
message says which request failed on which topic, partition or group, and whether retrying may help.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError, KafkaException

from kstreams.cluster.port import (
    AbortableTransactionError,
    ClusterError,
    CommitFailedError,
    FatalClientError,
    ProducerFencedError,
    TopicExistsError,
    TopicNotFoundError,
)

__all__ = [
    "NOT_A_MEMBER",
    "SEQUENCE_LOST",
    "cluster_error",
    "delivery_error",
    "is_transient",
    "kafka_error_of",
]

logger = logging.getLogger(__name__)

# librdkafka reports fencing as _FENCED; brokers answer PRODUCER_FENCED or, before KIP-588,
# INVALID_PRODUCER_EPOCH.
_FENCED = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})
# Errors that pass once a leader is elected, a coordinator loads or a broker comes back: Kafka's Java
# clients class them as retriable, while librdkafka leaves the flag unset on some paths (an admin
# ListOffsets answers "No leaders found" with LEADER_NOT_AVAILABLE while a broker restarts).
_TRANSIENT = frozenset(
    {
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.CONCURRENT_TRANSACTIONS,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.KAFKA_STORAGE_ERROR,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._TIMED_OUT_QUEUE,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._WAIT_COORD,
    }
)
# Errors that mean the group no longer counts this client's consumer as a member of its
# generation: a commit (plain or transactional) is refused and the member rejoins. Seen on Apache
# Kafka after a broker restart, when the reloaded coordinator has forgotten the member.
NOT_A_MEMBER = frozenset(
    {
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.FENCED_INSTANCE_ID,
    }
)
# Delivery errors that mean the broker no longer has the producer's sequence state for a
# partition (it lost acknowledged writes, e.g. across a restart, or expired the producer id): the
# records were not written and librdkafka cannot send them again with their sequence numbers.
# Delivery reports carry no fatal flag, so the code says it: the producer is replaced and the
# work since the last commit redone, as Kafka Streams treats an OutOfOrderSequenceException
# (TaskMigratedException: a new producer, the tasks revived from their committed offsets).
SEQUENCE_LOST = frozenset(
    {
        KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER,
        KafkaError.UNKNOWN_PRODUCER_ID,
        KafkaError.INVALID_PRODUCER_ID_MAPPING,
        KafkaError._FATAL,
    }
)
_NOT_FOUND = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION}
)


def kafka_error_of(exc: BaseException) -> KafkaError | None:
    """The KafkaError a confluent-kafka exception carries, if any."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    if isinstance(exc, KafkaError):
        return exc
    return None


def is_transient(err: KafkaError) -> bool:
    """Whether the error passes on its own (a leader elected, a coordinator loaded): retry it."""
    return bool(err.retriable()) or err.code() in _TRANSIENT


def cluster_error(what: str, error: KafkaError | BaseException) -> ClusterError:
    """The port error for a failed request; ``what`` says which request on which topic/group."""
    err = error if isinstance(error, KafkaError) else kafka_error_of(error)
    if err is None:
        return ClusterError(f"{what} failed: {error}")
    code = err.code()
    detail = f"{what} failed: {err.str()} ({err.name()})"
    if code in _FENCED:
        return ProducerFencedError(
            f"{detail}. A newer producer with the same transactional.id took over: close this producer "
            "and let its tasks migrate."
        )
    if code == KafkaError.TOPIC_ALREADY_EXISTS:
        return TopicExistsError(detail)
    if code in _NOT_FOUND:
        return TopicNotFoundError(f"{detail}. Create the topic first.")
    if code in NOT_A_MEMBER:
        return CommitFailedError(
            f"{detail}. The group no longer counts this member in its current generation: its tasks "
            "migrate (what was not committed is redone from the last commit) and it rejoins."
        )
    retriable = is_transient(err)
    if err.fatal():
        return FatalClientError(f"{detail}. The client hit a fatal error: close it and create a new one.")
    if getattr(err, "txn_requires_abort", lambda: False)():
        return AbortableTransactionError(
            f"{detail}. The transaction must be aborted before a new one begins."
        )
    return ClusterError(detail + (" (retriable)" if retriable else ""), retriable)


def delivery_error(what: str, error: KafkaError) -> ClusterError:
    """The port error for a record whose delivery failed (a delivery report's error, which has
    no fatal or abortable flag): a lost sequence state is fatal for the producer."""
    if error.code() in SEQUENCE_LOST:
        return FatalClientError(
            f"{what} failed: {error.str()} ({error.name()}). The broker no longer has this producer's "
            "sequence state (it lost acknowledged writes, or expired the producer): close the producer, "
            "create a new one and redo what was not committed."
        )
    return cluster_error(what, error)
