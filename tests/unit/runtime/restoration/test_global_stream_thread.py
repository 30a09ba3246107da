"""The global stream thread on its own, built from a group-less consumer and the plan's global
subtopologies on the embedded cluster: bootstrap fills the global stores to the topics' ends
before anything else runs, and the running thread applies what the topics receive later."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kstreams.cluster import EmbeddedCluster
from kstreams.config import StreamsConfig
from kstreams.metrics import MetricsRegistry
from kstreams.runtime.restoration.global_state import GlobalStreamThread
from kstreams.serdes import Serdes
from kstreams.topology.dsl import Consumed, Materialized, StreamsBuilder
from tests.unit.runtime.runtime_parts import wait_until

STRING = Serdes.string()
APP = "global-thread"
GLOBALS = "globals"


def _value(found: Any) -> Any:
    """A global table's store keeps ValueAndTimestamp values."""
    return getattr(found, "value", found)


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster() as cluster:
        cluster.create_topic(GLOBALS, 2)
        cluster.create_topic("in", 1)
        yield cluster


def _thread(cluster: EmbeddedCluster, tmp_path: Path, failures: list[BaseException]) -> GlobalStreamThread:
    builder = StreamsBuilder()
    builder.global_table(GLOBALS, Consumed.with_(STRING, STRING), Materialized.as_("global-store"))
    builder.stream("in", Consumed.with_(STRING, STRING)).to("out")
    config = StreamsConfig({"application.id": APP, "state.dir": str(tmp_path), "commit.interval.ms": 100})
    plan = builder.build().build(APP, config)
    return GlobalStreamThread(
        f"{APP}-GlobalStreamThread",
        plan,
        config,
        cluster.consumer(None, {"client.id": f"{APP}-global-consumer"}),
        cluster.admin(),
        os.path.join(tmp_path, APP),
        on_failure=failures.append,
        metrics=MetricsRegistry(),
    )


def _put(cluster: EmbeddedCluster, key: str, value: str, partition: int) -> None:
    cluster.produce(
        GLOBALS, STRING.serialize(GLOBALS, key), STRING.serialize(GLOBALS, value), partition=partition
    )


def test_bootstrap_fills_the_global_store_from_every_partition_before_it_returns(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    _put(cluster, "a", "1", 0)
    _put(cluster, "b", "1", 1)
    _put(cluster, "a", "2", 0)
    failures: list[BaseException] = []
    thread = _thread(cluster, tmp_path, failures)
    try:
        thread.bootstrap()
        store = thread.stores["global-store"]
        assert (_value(store.get("a")), _value(store.get("b"))) == ("2", "1")
    finally:
        thread.close_unstarted()
    assert failures == []


def test_the_running_thread_applies_what_the_global_topic_receives(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    failures: list[BaseException] = []
    thread = _thread(cluster, tmp_path, failures)
    thread.bootstrap()
    thread.start()
    try:
        store = thread.stores["global-store"]
        assert store.get("late") is None
        _put(cluster, "late", "x", 1)
        wait_until(lambda: _value(store.get("late")) == "x", 20, "the record written after the start")
    finally:
        thread.shutdown()
        thread.join(20.0)
    assert not thread.is_alive()
    assert failures == []
