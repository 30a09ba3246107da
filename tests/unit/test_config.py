"""StreamsConfig: validation with clear errors, defaults, precedence and client passthrough."""

from __future__ import annotations

import pytest

from kstreams.config import StreamsConfig
from kstreams.errors import (
    ConfigException,
    DefaultProductionExceptionHandler,
    LogAndContinueExceptionHandler,
    LogAndContinueProcessingExceptionHandler,
    LogAndFailExceptionHandler,
    LogAndFailProcessingExceptionHandler,
)


def config(**values: object) -> StreamsConfig:
    return StreamsConfig({"application.id": "app", **{k.replace("_", "."): v for k, v in values.items()}})


def test_application_id_is_required_and_named_in_the_error() -> None:
    with pytest.raises(ConfigException, match=r"application\.id"):
        StreamsConfig({})
    with pytest.raises(ConfigException, match="may only contain"):
        StreamsConfig({"application.id": "has space"})


@pytest.mark.parametrize(
    ("application_id", "problem"),
    [
        (".", "must not be '.' or '..'"),
        ("..", "must not be '.' or '..'"),
        ("a/b", "holds '/'"),
        ("../escape", "holds '/'"),
        ("a\\b", "holds '\\\\'"),
        ("app:1", "holds ':'"),
        ("caf\u00e9", "holds '\u00e9'"),  # a letter, but not one Kafka allows in a topic name
    ],
)
def test_application_ids_that_are_no_legal_topic_prefix_or_leave_state_dir_are_rejected(
    application_id: str, problem: str
) -> None:
    with pytest.raises(ConfigException) as info:
        StreamsConfig({"application.id": application_id})
    text = str(info.value)
    assert "'application.id'" in text and repr(application_id) in text and problem in text
    assert "ASCII letters, digits, '.', '_' and '-'" in text


def test_application_ids_of_legal_topic_characters_are_accepted() -> None:
    assert StreamsConfig({"application.id": "My-app_2.v3"}).application_id == "My-app_2.v3"
    assert StreamsConfig({"application.id": "..app"}).application_id == "..app"


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("num.stream.threads", -1, "must be at least 0"),
        ("num.stream.threads", "two", "expected an integer"),
        ("processing.guarantee", "exactly_once", "must be one of at_least_once, exactly_once_v2"),
        ("internal.topics.setup", "sometimes", "must be one of automatic, manual"),
        ("partition.autoscaling.enabled", "yes", "expected true or false"),
        ("statestore.cache.max.bytes", -5, "must be at least 0"),
        ("metrics.recording.level", "debug", "must be one of INFO, DEBUG, TRACE"),
    ],
)
def test_bad_values_name_the_key_the_value_and_what_is_allowed(key: str, value: object, message: str) -> None:
    with pytest.raises(ConfigException) as info:
        StreamsConfig({"application.id": "app", key: value})
    text = str(info.value)
    assert key in text and repr(value) in text and message in text


def test_strings_are_coerced_like_kafka_properties() -> None:
    c = StreamsConfig(
        {"application.id": "app", "num.stream.threads": "3", "partition.autoscaling.enabled": "true"}
    )
    assert c["num.stream.threads"] == 3
    assert c["partition.autoscaling.enabled"] is True


def test_defaults_follow_kafka_streams() -> None:
    c = config()
    assert c["num.stream.threads"] == 1
    assert c.commit_interval_ms == 30000
    assert config(processing_guarantee="exactly_once_v2").commit_interval_ms == 100
    assert c.cache_max_bytes == 10 * 1024 * 1024
    assert c["internal.topics.setup"] == "automatic"
    assert c["partition.autoscaling.enabled"] is False
    assert c["partition.autoscaling.timeout.ms"] == 900000


def test_the_new_cache_key_wins_over_the_deprecated_one() -> None:
    both = StreamsConfig(
        {"application.id": "app", "statestore.cache.max.bytes": 100, "cache.max.bytes.buffering": 200}
    )
    assert both.cache_max_bytes == 100
    old = StreamsConfig({"application.id": "app", "cache.max.bytes.buffering": 200})
    assert old.cache_max_bytes == 200


def test_client_configs_pass_through_with_kafka_streams_prefixes() -> None:
    c = StreamsConfig(
        {
            "application.id": "app",
            "bootstrap.servers": "b:9092",
            "fetch.max.bytes": 1,
            "consumer.fetch.max.bytes": 2,
            "main.consumer.fetch.max.bytes": 3,
            "acks": "all",
            "producer.linger.ms": 5,
            "security.protocol": "SASL_SSL",
            "admin.request.timeout.ms": 7,
        }
    )
    assert c.client_configs("main.consumer")["fetch.max.bytes"] == 3
    assert c.client_configs("restore.consumer")["fetch.max.bytes"] == 2
    producer = c.client_configs("producer")
    assert producer["acks"] == "all" and producer["linger.ms"] == 5 and "fetch.max.bytes" not in producer
    assert producer["security.protocol"] == "SASL_SSL"
    assert c.cluster_configs() == {"security.protocol": "SASL_SSL", "admin.request.timeout.ms": 7}


def test_topic_prefix_configs_go_to_internal_topics() -> None:
    c = StreamsConfig({"application.id": "app", "topic.min.insync.replicas": 2})
    assert c.topic_configs() == {"min.insync.replicas": "2"}


def test_deserialization_handler_from_a_class_or_a_name() -> None:
    assert isinstance(config().deserialization_exception_handler(), LogAndFailExceptionHandler)
    by_name = StreamsConfig(
        {
            "application.id": "app",
            "default.deserialization.exception.handler": "LogAndContinueExceptionHandler",
        }
    )
    assert isinstance(by_name.deserialization_exception_handler(), LogAndContinueExceptionHandler)
    with pytest.raises(ConfigException, match="names no importable class"):
        StreamsConfig({"application.id": "app", "default.deserialization.exception.handler": "nope.Missing"})


HANDLER_KEYS = [
    "deserialization.exception.handler",
    "default.deserialization.exception.handler",
    "processing.exception.handler",
    "production.exception.handler",
    "default.production.exception.handler",
]


@pytest.mark.parametrize("key", HANDLER_KEYS)
def test_a_handler_that_names_no_class_fails_construction(key: str) -> None:
    with pytest.raises(ConfigException, match=f"{key}='nope.Missing' names no importable class"):
        StreamsConfig({"application.id": "app", key: "nope.Missing"})


@pytest.mark.parametrize("key", HANDLER_KEYS)
def test_a_handler_of_the_wrong_kind_fails_construction(key: str) -> None:
    with pytest.raises(ConfigException, match=f"{key}=.* is not a "):
        StreamsConfig({"application.id": "app", key: "kstreams.errors.StreamsException"})


@pytest.mark.parametrize(
    ("key", "kafka_name", "kstreams_class"),
    [
        ("deserialization.exception.handler", "LogAndFailExceptionHandler", LogAndFailExceptionHandler),
        (
            "deserialization.exception.handler",
            "LogAndContinueExceptionHandler",
            LogAndContinueExceptionHandler,
        ),
        (
            "default.deserialization.exception.handler",
            "LogAndContinueExceptionHandler",
            LogAndContinueExceptionHandler,
        ),
        (
            "processing.exception.handler",
            "LogAndFailProcessingExceptionHandler",
            LogAndFailProcessingExceptionHandler,
        ),
        (
            "processing.exception.handler",
            "LogAndContinueProcessingExceptionHandler",
            LogAndContinueProcessingExceptionHandler,
        ),
        (
            "production.exception.handler",
            "DefaultProductionExceptionHandler",
            DefaultProductionExceptionHandler,
        ),
        (
            "default.production.exception.handler",
            "DefaultProductionExceptionHandler",
            DefaultProductionExceptionHandler,
        ),
    ],
)
def test_kafka_s_class_names_of_the_built_in_handlers_are_kstreams_handlers(
    key: str, kafka_name: str, kstreams_class: type
) -> None:
    c = StreamsConfig({"application.id": "app", key: f"org.apache.kafka.streams.errors.{kafka_name}"})
    handler = {
        "deserialization": c.deserialization_exception_handler,
        "processing": c.processing_exception_handler,
        "production": c.production_exception_handler,
    }[key.removeprefix("default.").split(".")[0]]()
    assert type(handler) is kstreams_class


def test_a_kafka_handler_kstreams_has_no_counterpart_for_is_refused_at_construction() -> None:
    with pytest.raises(ConfigException, match="is a Java class, which kstreams cannot run"):
        StreamsConfig(
            {"application.id": "app", "processing.exception.handler": "org.apache.kafka.streams.errors.Other"}
        )


def test_a_typo_is_an_error_naming_the_closest_key() -> None:
    with pytest.raises(ConfigException) as info:
        StreamsConfig({"application.id": "app", "procesing.guarantee": "exactly_once_v2"})
    text = str(info.value)
    assert "Unknown config 'procesing.guarantee'" in text and "Did you mean 'processing.guarantee'?" in text


def test_an_unknown_key_without_a_close_match_is_an_error_saying_where_keys_go() -> None:
    with pytest.raises(ConfigException) as info:
        StreamsConfig({"application.id": "app", "my.processor.threshold": 3})
    assert "client prefix" in str(info.value) and "constructors" in str(info.value)


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("task.assignor.class", "one task assignor"),
        ("group.protocol", "classic consumer group protocol"),
        ("metric.reporters", "metrics"),
        ("client.tag.zone", "rack awareness"),
        ("topology.optimization", "as written"),
    ],
)
def test_kafka_streams_keys_kstreams_does_not_support_are_rejected_with_the_reason(
    key: str, reason: str
) -> None:
    with pytest.raises(ConfigException) as info:
        StreamsConfig({"application.id": "app", key: "x"})
    text = str(info.value)
    assert f"'{key}' is a Kafka Streams setting kstreams does not support" in text and reason in text


def test_assignment_keys_are_validated() -> None:
    config = StreamsConfig(
        {
            "application.id": "app",
            "acceptable.recovery.lag": 5,
            "max.warmup.replicas": 3,
            "probing.rebalance.interval.ms": 1000,
        }
    )
    assert (config["acceptable.recovery.lag"], config["max.warmup.replicas"]) == (5, 3)
    with pytest.raises(ConfigException, match=r"max\.warmup\.replicas"):
        StreamsConfig({"application.id": "app", "max.warmup.replicas": 0})


def test_client_topic_and_serde_keys_are_accepted_and_routed() -> None:
    c = StreamsConfig(
        {
            "application.id": "app",
            "main.consumer.fetch.error.backoff.ms": 1,
            "max.poll.interval.ms": 60000,
            "topic.segment.bytes": 1024,
            "schema.registry.url": "http://registry:8081",
        }
    )
    assert c.client_configs("main.consumer")["fetch.error.backoff.ms"] == 1
    assert c.client_configs("main.consumer")["max.poll.interval.ms"] == 60000
    assert c.topic_configs() == {"segment.bytes": "1024"}
    assert c.originals()["schema.registry.url"] == "http://registry:8081"


def test_the_new_deserialization_handler_name_wins_over_the_deprecated_one() -> None:
    both = StreamsConfig(
        {
            "application.id": "app",
            "deserialization.exception.handler": "LogAndContinueExceptionHandler",
            "default.deserialization.exception.handler": "LogAndFailExceptionHandler",
        }
    )
    assert isinstance(both.deserialization_exception_handler(), LogAndContinueExceptionHandler)


def test_java_socket_buffer_names_reach_the_clients_under_librdkafkas_names() -> None:
    c = StreamsConfig({"application.id": "app", "send.buffer.bytes": 131072, "receive.buffer.bytes": 65536})
    for client in ("main.consumer", "producer"):
        settings = c.client_configs(client)
        assert settings["socket.send.buffer.bytes"] == 131072
        assert settings["socket.receive.buffer.bytes"] == 65536
        assert "send.buffer.bytes" not in settings
