"""Client keys are librdkafka's: a key no librdkafka client takes is a ConfigException when the
configuration is made, on the embedded cluster as on Kafka (which would refuse it at start())."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams import KafkaStreams, StreamsBuilder, StreamsConfig
from kstreams.cluster import EmbeddedCluster
from kstreams.errors import ConfigException


@pytest.mark.parametrize(
    ("key", "prefix", "hint"),
    [
        ("main.consumer.foo.bar", "main.consumer.", None),
        ("producer.foo.bar", "producer.", None),
        ("main.consumer.max.poll.interval.msec", "main.consumer.", "max.poll.interval.ms"),
        ("restore.consumer.fetch.wait.max.msec", "restore.consumer.", "fetch.wait.max.ms"),
        ("admin.request.timeout", "admin.", None),
    ],
)
def test_a_key_librdkafka_does_not_know_fails_the_config_naming_key_and_prefix(
    key: str, prefix: str, hint: str | None
) -> None:
    with pytest.raises(ConfigException) as raised:
        StreamsConfig({"application.id": "app", key: 1})
    message = str(raised.value)
    assert repr(key) in message and repr(prefix) in message
    if hint is not None:
        assert f"Did you mean {hint!r}" in message


def test_keys_librdkafka_knows_pass_with_any_prefix() -> None:
    config = StreamsConfig(
        {
            "application.id": "app",
            "main.consumer.max.poll.interval.ms": 10000,
            "restore.consumer.fetch.wait.max.ms": 10,
            "producer.linger.ms": 5,
            "producer.acks": "all",
            "admin.request.timeout.ms": 1000,
            "consumer.isolation.level": "read_committed",
        }
    )
    assert config.client_configs("producer")["linger.ms"] == 5


def test_the_embedded_cluster_refuses_at_construction_what_kafka_refuses_at_start(
    embedded_cluster: EmbeddedCluster, tmp_path: Any
) -> None:
    builder = StreamsBuilder()
    builder.stream("in").to("out")
    with pytest.raises(ConfigException, match=r"main\.consumer\.foo\.bar"):
        KafkaStreams(
            builder.build(),
            {"application.id": "app", "state.dir": str(tmp_path), "main.consumer.foo.bar": 1},
            cluster=embedded_cluster,
        )


@pytest.mark.parametrize("key", ["consumer.foo.bar", "producer.foo.bar", "foo.bar"])
def test_a_kafka_cluster_refuses_an_unknown_key_of_any_client_at_construction(key: str) -> None:
    from kstreams.cluster.kafka import KafkaCluster

    with pytest.raises(ConfigException, match=key.replace(".", r"\.")):
        KafkaCluster("127.0.0.1:9", {key: 1})
