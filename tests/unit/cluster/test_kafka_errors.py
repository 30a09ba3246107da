"""confluent-kafka errors become the port's errors, so the runtime handles both adapters alike."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from kstreams.cluster.kafka_errors import cluster_error
from kstreams.cluster.kafka_producer import refusal_error
from kstreams.cluster.port import (
    AbortableTransactionError,
    ClusterError,
    ProducerFencedError,
    TopicExistsError,
    TopicNotFoundError,
)


def test_fencing_errors_become_producer_fenced():
    for code in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH):
        error = cluster_error("Committing the transaction", KafkaException(KafkaError(code)))
        assert isinstance(error, ProducerFencedError)
        assert "Committing the transaction" in str(error)


def test_topic_errors_become_topic_exists_and_not_found():
    assert isinstance(
        cluster_error("Creating", KafkaError(KafkaError.TOPIC_ALREADY_EXISTS)), TopicExistsError
    )
    assert isinstance(
        cluster_error("Reading", KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)), TopicNotFoundError
    )


def test_retriable_errors_say_so():
    error = cluster_error("Listing", KafkaError(KafkaError._TIMED_OUT, retriable=True))
    assert type(error) is ClusterError
    assert error.retriable
    assert not cluster_error("Listing", KafkaError(KafkaError.INVALID_CONFIG)).retriable


def test_leader_and_coordinator_changes_are_retriable_whatever_librdkafka_flags():
    # librdkafka's admin ListOffsets reports "No leaders found" during a broker restart without
    # its retriable flag; the runtime must retry it, not end the restore thread.
    for code in (KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR, KafkaError._TRANSPORT):
        assert cluster_error("Listing offsets", KafkaError(code, "No leaders found")).retriable


def test_a_fatal_error_asks_for_a_new_client():
    from kstreams.cluster.port import FatalClientError

    error = cluster_error("Producing", KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True))
    assert isinstance(error, FatalClientError) and "create a new one" in str(error)


def test_other_exceptions_keep_their_message():
    error = cluster_error("Polling", RuntimeError("boom"))
    assert type(error) is ClusterError
    assert "Polling failed: boom" in str(error)


def test_a_send_refused_in_a_failed_transaction_asks_for_an_abort():
    # librdkafka refuses to queue with _STATE once the transaction failed (an
    # OUT_OF_ORDER_SEQUENCE_NUMBER after an abort purged records, seen on Apache Kafka); the
    # runtime must abort and rewind, not end the client as for an error retrying cannot fix.
    refused = KafkaException(
        KafkaError(KafkaError._STATE, "Producing not allowed in transactional state AbortableError")
    )
    error = refusal_error("Producing to t-0", refused, transactional=True)
    assert isinstance(error, AbortableTransactionError)
    assert "Producing to t-0" in str(error) and "abort" in str(error)
    assert not isinstance(
        refusal_error("Producing to t-0", refused, transactional=False), AbortableTransactionError
    )
