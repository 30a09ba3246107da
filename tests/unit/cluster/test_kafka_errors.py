"""confluent-kafka errors become the port's errors, so the runtime handles both adapters alike."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from kstreams.cluster.kafka_errors import cluster_error
from kstreams.cluster.port import ClusterError, ProducerFencedError, TopicExistsError, TopicNotFoundError


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


def test_other_exceptions_keep_their_message():
    error = cluster_error("Polling", RuntimeError("boom"))
    assert type(error) is ClusterError
    assert "Polling failed: boom" in str(error)
