"""The Kafka adapter's producer turns failed deliveries into the port's errors."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError

from kstreams.cluster.kafka_producer import DeliveryFailures, KafkaProducer
from kstreams.cluster.port import ClusterError, FatalClientError


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
