"""The internal topic manager behind KafkaStreams: init() in manual mode, and partition autoscaling
of a running application whose source topic grows.

Every test runs on the EmbeddedCluster and on a KafkaCluster against the session's broker (the
``cluster`` fixture); topics are named after the test's application id."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from kstreams import InitParameters, KafkaStreams, StreamsBuilder
from kstreams.client import StreamsUncaughtExceptionResponse
from kstreams.cluster import EmbeddedCluster
from kstreams.errors import InternalTopicsAlreadySetupException, MissingInternalTopicsException
from tests.support.clients import wait_timeout
from tests.support.waiting import holds_within

SERDES = {"default.key.serde": "bytes", "default.value.serde": "bytes"}


def source(app_id: str) -> str:
    return f"{app_id}-in"


def counting_topology(app_id: str) -> Any:
    builder = StreamsBuilder()
    builder.stream(source(app_id)).group_by(lambda key, value: value).count()
    return builder.build()


@pytest.fixture
def app(cluster: Any, app_id: str) -> tuple[Any, float]:
    """The cluster with the source topic (2 partitions), and how long a rebalance may take on it."""
    cluster.create_topic(source(app_id), partitions=2)
    return cluster, wait_timeout(cluster, embedded=15.0)


def adapter_config(cluster: Any) -> dict[str, object]:
    """Kafka refuses a session timeout under group.min.session.timeout.ms (6 s)."""
    return {} if isinstance(cluster, EmbeddedCluster) else {"session.timeout.ms": 6000}


def running(streams: KafkaStreams) -> threading.Event:
    event = threading.Event()
    streams.set_state_listener(lambda new, old: event.set() if new.name == "RUNNING" else None)
    return event


def internal_partitions(cluster: Any, app_id: str) -> dict[str, int]:
    return {
        name: d.partitions
        for name, d in cluster.topics().items()
        if name.startswith(app_id) and not name.endswith("-control") and name != source(app_id)
    }


def test_manual_setup_runs_after_init_and_init_refuses_a_second_time(
    app: tuple[Any, float], app_id: str, clients: list[KafkaStreams]
) -> None:
    cluster, timeout = app
    config = {
        "application.id": app_id,
        "internal.topics.setup": "manual",
        **SERDES,
        **adapter_config(cluster),
    }
    streams = KafkaStreams(counting_topology(app_id), config, cluster=cluster)
    clients.append(streams)
    streams.init(InitParameters.init_parameters(), timeout=10.0)
    assert set(internal_partitions(cluster, app_id).values()) == {2}

    is_running = running(streams)
    streams.start()
    assert is_running.wait(timeout)

    again = KafkaStreams(counting_topology(app_id), config, cluster=cluster)
    with pytest.raises(InternalTopicsAlreadySetupException):
        again.init()


def test_manual_setup_without_init_does_not_create_internal_topics(
    app: tuple[Any, float], app_id: str, clients: list[KafkaStreams]
) -> None:
    cluster, timeout = app
    config = {
        "application.id": app_id,
        "internal.topics.setup": "manual",
        **SERDES,
        **adapter_config(cluster),
    }
    streams = KafkaStreams(counting_topology(app_id), config, cluster=cluster)
    clients.append(streams)
    errors: list[BaseException] = []
    streams.set_uncaught_exception_handler(
        lambda exc: errors.append(exc) or StreamsUncaughtExceptionResponse.SHUTDOWN_CLIENT
    )
    streams.start()
    assert streams.wait_for_state(KafkaStreams.State.ERROR, timeout=timeout)
    [error] = errors
    assert isinstance(error, MissingInternalTopicsException)
    assert len(error.topics) == 2
    assert internal_partitions(cluster, app_id) == {}


def test_running_application_expands_internal_topics_when_its_source_grows(
    app: tuple[Any, float], app_id: str, clients: list[KafkaStreams]
) -> None:
    cluster, timeout = app
    config = {
        "application.id": app_id,
        "partition.autoscaling.enabled": True,
        "metadata.max.age.ms": 100,
        **SERDES,
        **adapter_config(cluster),
    }
    streams = KafkaStreams(counting_topology(app_id), config, cluster=cluster)
    clients.append(streams)
    is_running = running(streams)
    streams.start()
    assert is_running.wait(timeout)

    cluster.create_partitions(source(app_id), 4)

    assert holds_within(lambda: set(internal_partitions(cluster, app_id).values()) == {4}, timeout)

    def parallelism() -> dict[str, float]:
        return {
            f"{m.name}/{m.tags['subtopology-id']}": v
            for m, v in streams.metrics().items()
            if m.group == "stream-subtopology-metrics"
        }

    assert holds_within(lambda: set(parallelism().values()) == {4.0}, timeout)
    failures = [v for m, v in streams.metrics().items() if m.name == "num-autoscaling-failures"]
    assert failures == [0.0]
