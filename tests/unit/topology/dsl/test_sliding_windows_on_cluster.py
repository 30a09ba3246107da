"""Sliding-window aggregations run by KafkaStreams on both cluster adapters: the results, their
timestamps, interactive queries, and a restart on a new state directory that restores the window
store (aggregates and their timestamps) from its changelog."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kstreams import KafkaStreams
from kstreams.cluster import EmbeddedCluster
from kstreams.serdes import Serdes
from kstreams.state.store import WindowedKey
from kstreams.state.value_and_timestamp import ValueAndTimestamp
from kstreams.topology import Materialized, Produced, SlidingWindows, StreamsBuilder, Topology, WindowedSerdes

S = Serdes.string()
L = Serdes.long()
DIFFERENCE = 10_000
WINDOWED = WindowedSerdes.time_windowed_serde_from(S, DIFFERENCE)


def _topology(source: str, sink: str) -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream(source)
        .group_by_key()
        .windowed_by(SlidingWindows.of_time_difference_and_grace(DIFFERENCE, 60_000))
        .count(Materialized.as_("sliding-counts"))
        .to_stream()
        .to(sink, Produced.with_(WINDOWED, L))
    )
    return builder.build()


def _client(cluster: Any, app_id: str, topology: Topology, state_dir: Path) -> KafkaStreams:
    embedded = isinstance(cluster, EmbeddedCluster)
    config: dict[str, object] = {
        "application.id": app_id,
        "default.key.serde": "string",
        "default.value.serde": "string",
        "state.dir": str(state_dir),
        "commit.interval.ms": 50 if embedded else 100,
        "session.timeout.ms": 1000 if embedded else 6000,
    }
    return KafkaStreams(topology, config, cluster=cluster)


def _latest(cluster: Any, sink: str, base: int) -> dict[tuple[str, int, int], tuple[int, int]]:
    """Each window's newest (count, timestamp), windows relative to ``base``."""
    latest: dict[tuple[str, int, int], tuple[int, int]] = {}
    for record in cluster.read(sink):
        window = WINDOWED.deserialize(sink, record.key)
        count = L.deserialize(sink, record.value)
        latest[(window.key, window.start - base, window.end - base)] = (count, record.timestamp - base)
    return latest


def test_sliding_counts_survive_a_restart_that_restores_the_store(
    cluster: Any,
    app_id: str,
    tmp_path: Path,
    clients: list[KafkaStreams],
    wait_until: Callable[..., None],
) -> None:
    source, sink = f"{app_id}-in", f"{app_id}-out"
    cluster.create_topic(source, 2)
    cluster.create_topic(sink, 2)
    timeout = 30.0 if isinstance(cluster, EmbeddedCluster) else 60.0
    # Recent timestamps, so a broker's time-based retention keeps every record.
    base = (int(time.time() * 1000) - 120_000) // 1000 * 1000

    first = _client(cluster, app_id, _topology(source, sink), tmp_path / "first")
    clients.append(first)
    first.start()
    for key, offset in [("k1", 0), ("k2", 1000), ("k1", 3000)]:
        cluster.produce(source, key.encode(), b"v", timestamp=base + offset)
    expected = {
        ("k1", -10_000, 0): (1, 0),
        ("k2", -9_000, 1000): (1, 1000),
        ("k1", 1, 10_001): (1, 3000),  # 0's right window, made when 3000 falls in it
        ("k1", -7_000, 3000): (2, 3000),
    }
    wait_until(lambda: _latest(cluster, sink, base) == expected, timeout, "the first sliding counts")

    wait_until(lambda: first.state is KafkaStreams.State.RUNNING, timeout, "the first client RUNNING")
    store = first.store("sliding-counts")
    assert store.fetch("k1", base - 7_000) == 2  # plain values for interactive queries
    assert list(store.fetch_range("k1", base - 10_000, base + 1)) == [
        (base - 10_000, 1),
        (base - 7_000, 2),
        (base + 1, 1),
    ]
    stamped = first.store("sliding-counts", timestamped=True)
    assert stamped.fetch("k1", base - 7_000) == ValueAndTimestamp(2, base + 3000)
    assert first.close(timeout=30)

    # A new state directory: the successor restores the window store from its changelog.
    second = _client(cluster, app_id, _topology(source, sink), tmp_path / "second")
    clients.append(second)
    second.start()
    # Out of order: the record at 2000 needs the restored aggregates and their timestamps (its right
    # window is made only because the restored window [1, 10001] holds a record after it, at 3000).
    cluster.produce(source, b"k1", b"v", timestamp=base + 2000)
    expected.update(
        {
            ("k1", 1, 10_001): (2, 3000),
            ("k1", -7_000, 3000): (3, 3000),
            ("k1", -8_000, 2000): (2, 2000),
            ("k1", 2001, 12_001): (1, 3000),
        }
    )
    wait_until(lambda: _latest(cluster, sink, base) == expected, timeout, "the counts after restoring")
    wait_until(lambda: second.state is KafkaStreams.State.RUNNING, timeout, "the second client RUNNING")
    assert sorted(second.store("sliding-counts").fetch_all(base - 20_000, base + 20_000)) == sorted(
        [
            (WindowedKey("k1", base + start, base + end), count)
            for (key, start, end), (count, _ts) in expected.items()
            if key == "k1"
        ]
        + [(WindowedKey("k2", base - 9_000, base + 1000), 1)]
    )
