"""The Kafka adapter's producer turns failed deliveries into the port's errors."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from kstreams.cluster.kafka_producer import DeliveryFailures, KafkaProducer
from kstreams.cluster.port import ClusterError, FatalClientError, TopicPartition


class AcknowledgingProducer:
    """confluent-kafka's Producer as far as flush goes: librdkafka reports ``failures`` (to the
    delivery callback) while it flushes."""

    def __init__(self, delivery: DeliveryFailures, failures: list[KafkaError]) -> None:
        self._delivery = delivery
        self._failures = failures

    def flush(self, timeout: float) -> int:
        for error in self._failures:
            self._delivery.failures.append(("out-0", error))
        return 0


def new_producer(failures: list[KafkaError]) -> KafkaProducer:
    delivery = DeliveryFailures()
    client: Any = AcknowledgingProducer(delivery, failures)
    return KafkaProducer(client, None, None, lambda group: None, delivery=delivery, transactional_id=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "code", [KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, KafkaError.UNKNOWN_PRODUCER_ID, KafkaError._FATAL]
)
def test_a_lost_sequence_state_at_flush_asks_for_a_new_producer(code: int) -> None:
    # After a broker restart that lost acknowledged writes, the commit's flush reports
    # OUT_OF_ORDER_SEQUENCE_NUMBER for the records it could not write: the runtime must replace
    # the producer and redo the work since the last commit, not end the client.
    producer = new_producer([KafkaError(KafkaError._MSG_TIMED_OUT), KafkaError(code)])
    with pytest.raises(FatalClientError, match=r"2 record\(s\) failed.*create a new one"):
        producer.flush()


def test_other_delivery_failures_stay_what_they_are() -> None:
    producer = new_producer([KafkaError(KafkaError._MSG_TIMED_OUT)])
    with pytest.raises(ClusterError) as raised:
        producer.flush()
    assert not isinstance(raised.value, FatalClientError)


class CoordinatorLostProducer:
    """A transactional librdkafka producer whose coordinators went away with a broker."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def send_offsets_to_transaction(self, positions: Any, metadata: Any, timeout: float) -> None:
        self.calls.append(f"send_offsets_to_transaction({timeout:g})")
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed to add offsets to transaction"))

    def begin_transaction(self) -> None:
        self.calls.append("begin_transaction")

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append("abort_transaction")

    def flush(self, timeout: float) -> int:
        self.calls.append("flush")
        return 0


class NoMembers:
    def owner_of(self, group_id: str, partitions: Any) -> None:
        return None


def test_timed_out_offsets_give_the_producer_up_without_further_calls() -> None:
    # After a broker outage a producer that timed out sending offsets may keep coordinators it
    # lost, and its next send_offsets_to_transaction can hang (librdkafka #5511): replaced, and
    # never called again, not even to abort or flush on close.
    client = CoordinatorLostProducer()
    delivery = DeliveryFailures()
    producer = KafkaProducer(
        client,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        NoMembers(),  # type: ignore[arg-type]
        lambda group: None,
        delivery=delivery,
        transactional_id="app-1",
        timeout=30.0,
        transaction_timeout=10.0,
    )
    producer.begin_transaction()
    with pytest.raises(FatalClientError, match="create a new one"):
        producer.send_offsets_to_transaction({TopicPartition("in", 0): 5}, "app")
    assert client.calls == ["begin_transaction", "send_offsets_to_transaction(10)"]
    with pytest.raises(FatalClientError):
        producer.abort_transaction()
    producer.close()
    assert client.calls == ["begin_transaction", "send_offsets_to_transaction(10)"]
