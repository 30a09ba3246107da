"""Interactive queries: two instances of one application answer for each other's state over HTTP.

Clicks (key: the user) are counted per user into the store ``counts``. Two KafkaStreams clients
share the work (each holds some of the four tasks, and a standby copy of the other's), each serves
``GET /stores/<store>/keys/<key>`` and ``GET /stores/<store>/range`` on its ``query.http.port``,
and a lookup of a key held by the other instance is forwarded to it. The example also asks the
metadata API which instance owns a key, and reads a standby copy with stale stores enabled.

    python examples/interactive_queries.py                                    # the embedded cluster
    python examples/interactive_queries.py --bootstrap-servers 127.0.0.1:9092 # a Kafka cluster

Both clients run in this process for the demo; in production each runs in its own process or
machine, with its own ``application.server`` (the host:port the others reach it at).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from typing import Any

from kstreams import (
    Consumed,
    KafkaStreams,
    Materialized,
    QueryableStoreTypes,
    Serdes,
    StoreQueryParameters,
    StreamsBuilder,
    Topology,
)
from kstreams.cluster import EmbeddedCluster, KafkaCluster

INPUT_TOPIC = "clicks"
STORE = "counts"
CLICKS = ["ann", "bob", "cy", "ann", "dee", "ann", "bob"]


def build_topology() -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream(INPUT_TOPIC, Consumed.with_(Serdes.string(), Serdes.string()))
        .group_by_key()
        .count(Materialized.as_(STORE))
    )
    return builder.build()


def get(url: str) -> Any:
    """The JSON answer of a query endpoint, or None while it cannot answer yet (HTTP 503 during a
    rebalance, 404 for a key not counted yet)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return json.load(answer)
    except urllib.error.HTTPError:
        return None


def wait_for(condition: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", help="a Kafka cluster (default: the embedded cluster)")
    parser.add_argument("--ports", type=int, nargs=2, default=[0, 0], help="HTTP ports (0: any free one)")
    args = parser.parse_args(argv)

    cluster = KafkaCluster(args.bootstrap_servers) if args.bootstrap_servers else EmbeddedCluster()
    if INPUT_TOPIC not in cluster.topics():
        cluster.create_topic(INPUT_TOPIC, partitions=4)
    for user in CLICKS:
        cluster.produce(INPUT_TOPIC, user.encode(), b"click")
    expected = Counter(r.key.decode() for r in cluster.read(INPUT_TOPIC))

    with tempfile.TemporaryDirectory() as dir_a, tempfile.TemporaryDirectory() as dir_b:
        clients = []
        for state_dir, port in zip((dir_a, dir_b), args.ports, strict=True):
            port = port or free_port()
            config = {
                "application.id": "interactive-queries-example",
                "state.dir": state_dir,
                "application.server": f"127.0.0.1:{port}",
                "query.http.port": port,
                "num.standby.replicas": 1,
                # A standby copies the changelog, which the record cache fills at each commit.
                "commit.interval.ms": 100,
            }
            clients.append(KafkaStreams(build_topology(), config, cluster=cluster))
        for client in clients:
            client.start()
        try:
            return query(clients, expected)
        finally:
            for client in clients:
                client.close()


def query(clients: list[KafkaStreams], expected: Counter[str]) -> int:
    urls = [f"http://{c.config['application.server']}/stores/{STORE}" for c in clients]

    def settled() -> bool:
        # Every client RUNNING, "ann" owned by one client and copied on the other, every count out.
        metadata = clients[0].query_metadata_for_key(STORE, "ann", Serdes.string())
        return (
            all(c.state == KafkaStreams.State.RUNNING for c in clients)
            and bool(metadata.standby_hosts)
            and all(get(f"{url}/keys/{user}") == n for url in urls for user, n in expected.items())
        )

    if not wait_for(settled):
        print("MISMATCH: the two clients did not answer every count within 30 s", file=sys.stderr)
        return 1
    metadata = clients[0].query_metadata_for_key(STORE, "ann", Serdes.string())
    print(
        f"'ann' is in partition {metadata.partition}, active on {metadata.active_host}, "
        f"standby on {sorted(map(str, metadata.standby_hosts))}"
    )
    # Any client answers for any key: the lookup is forwarded to the owner.
    print("ann, asked of each client:", [get(f"{url}/keys/ann") for url in urls])
    everything = {row["key"]: row["value"] for url in urls for row in get(f"{url}/range")}
    print("the range of both clients' stores:", everything)
    # The standby's copy of ann's partition, read on the client that does not own it: as current
    # as the active's last commit.
    standby = next(c for c in clients if str(c.config["application.server"]) != str(metadata.active_host))
    parameters = StoreQueryParameters.from_name_and_type(STORE, QueryableStoreTypes.key_value_store())
    stale_store = standby.store(parameters.enable_stale_stores().with_partition(metadata.partition))
    caught_up = wait_for(lambda: stale_store.get("ann") == expected["ann"])
    print("ann, read from the standby:", stale_store.get("ann"))
    if everything != dict(expected) or not caught_up:
        print(f"MISMATCH: expected {dict(expected)}", file=sys.stderr)
        return 1
    print(f"OK: {len(expected)} users' counts answered by both clients")
    return 0


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if __name__ == "__main__":
    sys.exit(main())
