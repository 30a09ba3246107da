"""How a KafkaCluster's settings reach each kind of librdkafka client."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer

from kstreams.cluster.kafka_client_config import build_client, client_settings, librdkafka_logger
from kstreams.errors import ConfigException

CLUSTER = {
    "client.id": "app",
    "consumer.heartbeat.interval.ms": 100,
    "producer.linger.ms": 5,
    "admin.request.timeout.ms": 1000,
}


def test_unprefixed_settings_reach_every_client_and_prefixed_ones_only_their_kind():
    consumer = client_settings("consumer", "host:1", CLUSTER)
    producer = client_settings("producer", "host:1", CLUSTER)
    admin = client_settings("admin", "host:1", CLUSTER)
    assert consumer["bootstrap.servers"] == producer["bootstrap.servers"] == "host:1"
    assert consumer["client.id"] == producer["client.id"] == admin["client.id"] == "app"
    assert consumer["heartbeat.interval.ms"] == 100 and "heartbeat.interval.ms" not in producer
    assert producer["linger.ms"] == 5 and "linger.ms" not in consumer
    assert admin["request.timeout.ms"] == 1000 and "request.timeout.ms" not in producer


def test_a_clients_own_settings_win_over_the_clusters():
    settings = client_settings("producer", "host:1", CLUSTER, {"linger.ms": 50, "client.id": "mine"})
    assert settings["linger.ms"] == 50
    assert settings["client.id"] == "mine"


def test_consumers_never_auto_commit_and_group_members_use_the_range_assignor():
    settings = client_settings(
        "consumer",
        "host:1",
        {},
        {"enable.auto.commit": True, "partition.assignment.strategy": "cooperative-sticky"},
        group_member=True,
    )
    assert settings["enable.auto.commit"] is False
    assert settings["partition.assignment.strategy"] == "range"
    assert "partition.assignment.strategy" not in client_settings("consumer", "host:1", {})


def test_librdkafka_logs_go_through_python_logging():
    assert client_settings("admin", "host:1", {})["logger"] is librdkafka_logger


def test_a_setting_librdkafka_rejects_is_a_config_exception_naming_the_client():
    settings = client_settings("consumer", "127.0.0.1:1", {}, {"group.id": "g", "no.such.setting": 1})
    with pytest.raises(ConfigException, match=r"restore consumer.*no\.such\.setting"):
        build_client(Consumer, settings, "restore consumer")


def test_an_unknown_client_kind_is_refused():
    with pytest.raises(ValueError, match="streams"):
        client_settings("streams", "host:1", {})
