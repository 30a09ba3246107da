"""Which topics a reset deletes: Kafka's StreamsResetter.matchesInternalTopicFormat names."""

from __future__ import annotations

import pytest

from kstreams.tools.application_reset import is_internal_topic


@pytest.mark.parametrize(
    "topic",
    [
        "app-counts-changelog",
        "app-KSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition",
        "app-named-subscription-registration-topic",
        "app-named-subscription-response-topic",
        "app-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000012-topic",
        "app-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000020-topic",
    ],
)
def test_changelogs_repartition_and_foreign_key_join_topics_are_internal(topic: str) -> None:
    assert is_internal_topic(topic, "app")


@pytest.mark.parametrize(
    "topic", ["other-counts-changelog", "app-output", "app-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-x-topic"]
)
def test_other_topics_are_not(topic: str) -> None:
    assert not is_internal_topic(topic, "app")
