"""The Kafka adapter's admin replaces an AdminClient that may have lost its coordinators."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from kstreams.cluster import kafka_admin
from kstreams.cluster.kafka_admin import KafkaAdmin
from kstreams.cluster.port import TopicPartition


class ListingClient:
    """confluent-kafka's AdminClient as far as ListOffsets goes, failing with ``error`` if set."""

    def __init__(self, error: KafkaError | None) -> None:
        self.error = error
        self.requests = 0

    def list_offsets(self, request: dict[Any, Any], **kwargs: Any) -> dict[Any, Future]:
        self.requests += 1
        futures: dict[Any, Future] = {}
        for ktp in request:
            future: Future = Future()
            if self.error is None:
                future.set_result(type("ListOffsetsResult", (), {"offset": 7})())
            else:
                future.set_exception(KafkaException(self.error))
            futures[ktp] = future
        return futures


@pytest.fixture(autouse=True)
def no_renewal_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_admin, "RENEW_INTERVAL_S", 0.0)


def test_a_request_that_found_the_cluster_unreachable_renews_the_client() -> None:
    # During a broker outage the control topic's end is asked and fails ("No leaders found"): the
    # client that was connected before may keep a coordinator it never reaches again (librdkafka
    # #5511), so the next request goes to a new client, which looks coordinators up afresh.
    old = ListingClient(KafkaError(KafkaError._NOENT, "Failed to query partition leaders: No leaders found"))
    new = ListingClient(None)
    made: list[ListingClient] = []

    def renew() -> Any:
        made.append(new)
        return new

    admin = KafkaAdmin(old, timeout=1.0, renew=renew)  # type: ignore[arg-type]
    probe = admin.end_offset_later(TopicPartition("app-control", 0))
    assert isinstance(probe.exception(), KafkaException)
    assert made == []  # renewed at the next request, on the caller's thread
    assert admin.end_offset_later(TopicPartition("app-control", 0)).result().offset == 7
    assert made == [new] and new.requests == 1


def test_other_failures_keep_the_client() -> None:
    old = ListingClient(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    admin = KafkaAdmin(old, timeout=1.0, renew=lambda: pytest.fail("renewed"))  # type: ignore[arg-type]
    admin.end_offset_later(TopicPartition("t", 0)).exception()
    admin.end_offset_later(TopicPartition("t", 0)).exception()
    assert old.requests == 2
