"""Session-windowed counts run by KafkaStreams on both cluster adapters: sessions written to a topic
with the session-windowed serde, queried through ``streams.store``, and restored from the session
store's changelog after a restart (RocksDB with a fresh state directory, and in-memory), so a late
record still merges the sessions written before the restart."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kstreams import KafkaStreams
from kstreams.cluster import EmbeddedCluster
from kstreams.errors import InvalidStateStoreException
from kstreams.serdes import Serdes
from kstreams.state.store import WindowedKey
from kstreams.topology import (
    Materialized,
    Produced,
    SessionWindows,
    StreamsBuilder,
    WindowedSerdes,
)
from kstreams.topology.dsl.parameters import StoreType

S = Serdes.string()
L = Serdes.long()
MIN = 60_000
SESSION_KEYS = WindowedSerdes.session_windowed_serde_from(S)
STORE = "clicks-per-session"


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    """Check ``condition`` every 20 ms until it holds or ``timeout`` passes; True if it held."""
    tick = threading.Event()
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        tick.wait(0.02)
    return True


def _topology(source: str, sink: str, store_type: StoreType) -> Any:
    builder = StreamsBuilder()
    (
        builder.stream(source)
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5 * MIN, 10 * MIN))
        # No cache: every update reaches the topic, so the exact sequence can be asserted.
        .count(Materialized.as_(STORE).with_store_type(store_type).with_caching_disabled())
        .to_stream()
        .to(sink, Produced.with_(SESSION_KEYS, L))
    )
    return builder.build()


@pytest.fixture
def start_streams(cluster: Any, app_id: str) -> Iterator[Callable[..., KafkaStreams]]:
    started: list[KafkaStreams] = []
    embedded = isinstance(cluster, EmbeddedCluster)

    def start(topology: Any, state_dir: Path) -> KafkaStreams:
        config: dict[str, object] = {
            "application.id": app_id,
            "default.key.serde": "string",
            "default.value.serde": "string",
            "state.dir": str(state_dir),
        }
        if embedded:
            config.update({"commit.interval.ms": 50, "session.timeout.ms": 1000})
        else:
            config.update(
                {
                    "commit.interval.ms": 100,
                    "session.timeout.ms": 6000,
                    "main.consumer.max.poll.interval.ms": 10000,
                }
            )
        streams = KafkaStreams(topology, config, cluster=cluster)
        started.append(streams)
        streams.start()
        return streams

    yield start
    for streams in started:
        streams.close(timeout=30.0)


def _sessions(cluster: Any, topic: str) -> list[tuple[Any, Any, int]]:
    return [
        (SESSION_KEYS.deserialize(topic, r.key), L.deserialize(topic, r.value), r.timestamp)
        for r in cluster.read(topic)
    ]


def _stored(streams: KafkaStreams, key: str) -> list[tuple[Any, Any]] | None:
    try:
        return list(streams.store(STORE).fetch(key))
    except InvalidStateStoreException:
        return None  # not running yet, or still restoring


@pytest.mark.parametrize("store_type", [StoreType.ROCKS_DB, StoreType.IN_MEMORY])
def test_session_counts_survive_a_restart_through_the_changelog(
    cluster: Any,
    app_id: str,
    start_streams: Callable[..., KafkaStreams],
    tmp_path: Path,
    store_type: StoreType,
) -> None:
    source, sink = f"{app_id}-clicks", f"{app_id}-sessions"
    cluster.create_topic(source, 2)
    cluster.create_topic(sink, 2)
    timeout = 30.0 if isinstance(cluster, EmbeddedCluster) else 60.0
    # Timestamps near now: within the topics' retention.
    base = (int(time.time() * 1000) // MIN) * MIN - 30 * MIN

    def session(start_min: int, end_min: int) -> WindowedKey[str]:
        return WindowedKey("alice", base + start_min * MIN, base + end_min * MIN)

    streams = start_streams(_topology(source, sink, store_type), tmp_path / "first")
    for minute in (0, 2, 10):
        cluster.produce(source, b"alice", b"click", timestamp=base + minute * MIN)
    before_restart = [
        (session(0, 0), 1, base),
        (session(0, 0), None, base),
        (session(0, 2), 2, base + 2 * MIN),
        (session(10, 10), 1, base + 10 * MIN),
    ]
    assert wait_until(lambda: _sessions(cluster, sink) == before_restart, timeout), _sessions(cluster, sink)
    expected_store = [(session(0, 2), 2), (session(10, 10), 1)]
    assert wait_until(lambda: _stored(streams, "alice") == expected_store, timeout), _stored(streams, "alice")
    assert streams.close(timeout=30.0)
    changelog = f"{app_id}-{STORE}-changelog"
    assert changelog in cluster.topics()

    # A fresh state directory: the store can only come back from its changelog.
    streams = start_streams(_topology(source, sink, store_type), tmp_path / "second")
    assert wait_until(lambda: _stored(streams, "alice") == expected_store, timeout), _stored(streams, "alice")
    cluster.produce(source, b"alice", b"click", timestamp=base + 6 * MIN)
    after_restart = [
        *before_restart,
        (session(0, 2), None, base + 2 * MIN),
        (session(10, 10), None, base + 10 * MIN),
        (session(0, 10), 4, base + 10 * MIN),
    ]
    assert wait_until(lambda: _sessions(cluster, sink) == after_restart, timeout), _sessions(cluster, sink)
    assert wait_until(lambda: _stored(streams, "alice") == [(session(0, 10), 4)], timeout)
