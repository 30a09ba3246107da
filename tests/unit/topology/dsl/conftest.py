"""Fixtures of the DSL tests: a factory that runs a topology in the test driver, and for the
``*_on_cluster`` tests the clients' config on either cluster, the list of clients closed after the
test, and the wait for a condition the clients' threads make true."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kstreams import KafkaStreams
from kstreams.cluster import EmbeddedCluster
from kstreams.testing import TopologyTestDriver

STRING_DEFAULTS = {"default.key.serde": "string", "default.value.serde": "string"}


@pytest.fixture
def drive() -> Iterator[Callable[..., TopologyTestDriver]]:
    """``drive(topology, **config)``: a TopologyTestDriver with string default serdes, closed after
    the test."""
    drivers: list[TopologyTestDriver] = []

    def make(topology: Any, **config: Any) -> TopologyTestDriver:
        props = dict(STRING_DEFAULTS)
        props.update({key.replace("_", "."): value for key, value in config.items()})
        driver = TopologyTestDriver(topology, props)
        drivers.append(driver)
        return driver

    yield make
    for driver in drivers:
        driver.close()


def _wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    tick = threading.Event()
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout}s waiting for {what}")
        tick.wait(0.02)


@pytest.fixture
def wait_until() -> Callable[[Callable[[], bool], float, str], None]:
    """``wait_until(condition, timeout, what)``: check ``condition`` every 20 ms until it holds;
    fail naming ``what`` after ``timeout`` seconds."""
    return _wait_until


@pytest.fixture
def clients() -> Iterator[list[KafkaStreams]]:
    """The test's KafkaStreams clients (append each one made), closed after the test."""
    started: list[KafkaStreams] = []
    yield started
    for streams in started:
        streams.close(timeout=30)


@pytest.fixture
def client_config(cluster: Any, app_id: str) -> Callable[..., dict[str, object]]:
    """``client_config(state_dir, **settings)``: a client's config for ``app_id`` on ``cluster``
    with string default serdes, plus ``settings`` (underscores for dots)."""

    def make(state_dir: Path, **settings: object) -> dict[str, object]:
        config: dict[str, object] = {
            "application.id": app_id,
            "client.id": f"{app_id}-client",
            "default.key.serde": "string",
            "default.value.serde": "string",
            "state.dir": str(state_dir),
        }
        if isinstance(cluster, EmbeddedCluster):
            config.update({"commit.interval.ms": 50, "session.timeout.ms": 1000})
        else:  # Kafka refuses session timeouts under group.min.session.timeout.ms (6 s)
            config.update(
                {
                    "commit.interval.ms": 100,
                    "session.timeout.ms": 6000,
                    "main.consumer.max.poll.interval.ms": 10000,
                }
            )
        config.update({key.replace("_", "."): value for key, value in settings.items()})
        return config

    return make
