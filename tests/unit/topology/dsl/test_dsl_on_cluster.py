"""DSL topologies run by KafkaStreams on the embedded cluster: the repartitioned, multi-partition
path that the test driver (one partition) does not cover."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from kstreams import KafkaStreams
from kstreams.cluster import EmbeddedCluster
from kstreams.errors import InvalidStateStoreException
from kstreams.serdes import Serdes
from kstreams.topology import Materialized, Produced, StreamsBuilder

S = Serdes.string()
L = Serdes.long()


def wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Check ``condition`` every 20 ms until it holds or ``timeout`` passes; True if it held."""
    tick = threading.Event()
    expired = threading.Event()
    deadline = threading.Timer(timeout, expired.set)
    deadline.start()
    try:
        while not condition():
            if expired.is_set():
                return False
            tick.wait(0.02)
        return True
    finally:
        deadline.cancel()


@pytest.fixture
def streams_of(embedded_cluster: EmbeddedCluster, app_id: str) -> Iterator[Callable[..., KafkaStreams]]:
    started: list[KafkaStreams] = []

    def start(topology: object) -> KafkaStreams:
        config = {
            "application.id": app_id,
            "default.key.serde": "string",
            "default.value.serde": "string",
            "commit.interval.ms": 50,
        }
        streams = KafkaStreams(topology, config, cluster=embedded_cluster)
        started.append(streams)
        streams.start()
        return streams

    yield start
    for streams in started:
        streams.close(timeout=10.0)


def _latest(cluster: EmbeddedCluster, topic: str, value_serde: object) -> dict[object, object]:
    latest: dict[object, object] = {}
    for record in cluster.read(topic):
        latest[S.deserialize(topic, record.key)] = value_serde.deserialize(topic, record.value)  # type: ignore[attr-defined]
    return latest


def test_word_count_across_partitions(embedded_cluster: EmbeddedCluster, streams_of) -> None:
    embedded_cluster.create_topic("lines", partitions=3)
    embedded_cluster.create_topic("counts", partitions=3)
    builder = StreamsBuilder()
    builder.stream("lines").flat_map_values(str.split).group_by(lambda k, word: word).count().to_stream().to(
        "counts", Produced.with_(S, L)
    )
    streams_of(builder.build())
    lines = ["a b c", "a b", "a", "c c"]
    for i, line in enumerate(lines):
        embedded_cluster.produce("lines", f"k{i}".encode(), line.encode())
    expected = {"a": 3, "b": 2, "c": 3}
    assert wait_until(lambda: _latest(embedded_cluster, "counts", L) == expected)


def test_stream_table_join_across_partitions(embedded_cluster: EmbeddedCluster, streams_of) -> None:
    embedded_cluster.create_topic("users", partitions=2)
    embedded_cluster.create_topic("clicks", partitions=2)
    embedded_cluster.create_topic("enriched", partitions=2)
    builder = StreamsBuilder()
    users = builder.table("users", materialized=Materialized.as_("users-by-id"))
    builder.stream("clicks").join(users, lambda click, name: f"{name} clicked {click}").to("enriched")
    streams = streams_of(builder.build())
    for user, name in [("u1", "Ann"), ("u2", "Bob")]:
        embedded_cluster.produce("users", user.encode(), name.encode(), timestamp=1)

    def table_loaded() -> bool:
        try:
            store = streams.store("users-by-id")
            return store.get("u1") == "Ann" and store.get("u2") == "Bob"
        except InvalidStateStoreException:
            return False

    # The join reads the table's current state: let the rows arrive before the clicks.
    assert wait_until(table_loaded)
    embedded_cluster.produce("clicks", b"u1", b"home", timestamp=5)
    embedded_cluster.produce("clicks", b"u2", b"cart", timestamp=6)
    expected = {"u1": "Ann clicked home", "u2": "Bob clicked cart"}
    assert wait_until(lambda: _latest(embedded_cluster, "enriched", S) == expected)
