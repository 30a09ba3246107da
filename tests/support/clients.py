"""KafkaStreams clients of the tests: their config on either cluster adapter, and the list of a
test's clients that its fixture closes after the test (``clients`` in tests/conftest.py).

``client_settings`` gives a client on an EmbeddedCluster short commit and session timeouts; on a
KafkaCluster, timeouts the broker accepts (it refuses session timeouts under
group.min.session.timeout.ms, 6 s). ``wait_timeout`` is how long a test waits for such a client's
results on each adapter.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kstreams import KafkaStreams, Serdes
from kstreams.cluster import EmbeddedCluster

__all__ = [
    "STRING_DEFAULTS",
    "Clients",
    "adapter_settings",
    "client_settings",
    "counts_in",
    "started_clients",
    "wait_timeout",
]

STRING_DEFAULTS: dict[str, object] = {"default.key.serde": "string", "default.value.serde": "string"}


def adapter_settings(cluster: Any) -> dict[str, object]:
    """The commit interval and group timeouts of a test client on ``cluster``. On a broker, the
    session timeout is the least it accepts, and a crashed librdkafka consumer, which keeps
    heartbeating from its own thread, leaves the group once max.poll.interval.ms passed."""
    if isinstance(cluster, EmbeddedCluster):
        return {"commit.interval.ms": 50, "session.timeout.ms": 1000}
    return {
        "commit.interval.ms": 100,
        "session.timeout.ms": 6000,
        "main.consumer.max.poll.interval.ms": 10000,
    }


def client_settings(cluster: Any, app_id: str, state_dir: Path, **settings: object) -> dict[str, object]:
    """A client's config for ``app_id`` on ``cluster`` with string default serdes, plus
    ``settings`` (dotted keys)."""
    config: dict[str, object] = {
        "application.id": app_id,
        "client.id": f"{app_id}-client",
        **STRING_DEFAULTS,
        "state.dir": str(state_dir),
        **adapter_settings(cluster),
    }
    config.update(settings)
    return config


def wait_timeout(cluster: Any, embedded: float = 30.0, kafka: float = 60.0) -> float:
    """How long to wait for a client's results on ``cluster``: a broker's rebalances and commits
    take longer than the embedded cluster's."""
    return embedded if isinstance(cluster, EmbeddedCluster) else kafka


class Clients(list[KafkaStreams]):
    """A test's KafkaStreams clients; ``close_all`` closes each (those closed already again, which
    does nothing)."""

    def start(self, topology: Any, config: Mapping[str, object], cluster: Any) -> KafkaStreams:
        """A client of ``topology`` on ``cluster``, started and kept to be closed."""
        streams = KafkaStreams(topology, dict(config), cluster=cluster)
        self.append(streams)
        streams.start()
        return streams

    def close_all(self, timeout: float = 30.0) -> None:
        for streams in self:
            streams.close(timeout=timeout)


@contextmanager
def started_clients(timeout: float = 30.0) -> Iterator[Clients]:
    """A ``Clients`` list whose clients are closed when the block ends."""
    clients = Clients()
    try:
        yield clients
    finally:
        clients.close_all(timeout)


def counts_in(cluster: Any, sink: str, isolation: str = "read_committed") -> list[tuple[str, int, int]]:
    """A sink's records as (string key, long count, timestamp), in order: what the windowed count
    tests on a cluster compare."""
    longs = Serdes.long()
    return [
        (r.key.decode(), longs.deserialize(sink, r.value), r.timestamp) for r in cluster.read(sink, isolation)
    ]
