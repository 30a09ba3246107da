"""Interactive queries across clients (application.server): two clients of one application count
over a 4-partition topic; each knows where every key lives, lists both for the store, answers an
HTTP lookup on either client (forwarded to the owner when remote), and serves stale reads from its
standby. Runs on the embedded cluster and on a Kafka-protocol broker (the ``cluster`` fixture)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kstreams._native.record_batch import default_partition
from kstreams.client import (
    HostInfo,
    KafkaStreams,
    KeyQueryMetadata,
    QueryableStoreTypes,
    StoreQueryParameters,
)
from kstreams.errors import InvalidStateStoreException
from kstreams.processor import TaskId
from kstreams.serdes import Serdes
from kstreams.topology.dsl import Consumed, Materialized, StreamsBuilder
from tests.conftest import free_port
from tests.support.waiting import wait_until

STRING = Serdes.string()
STORE = "counts"
KEYS = [f"user-{i}" for i in range(12)]


# How long a test waits for what other threads do, unless it gives a timeout of its own.
WAIT_S = 60.0


def count_topology(source: str) -> Any:
    builder = StreamsBuilder()
    builder.stream(source, Consumed.with_(STRING, STRING)).group_by_key().count(Materialized.as_(STORE))
    return builder.build()


class Client:
    def __init__(self, streams: KafkaStreams, port: int) -> None:
        self.streams = streams
        self.host = HostInfo("127.0.0.1", port)

    def active(self) -> set[TaskId]:
        tasks = self.streams._task_manager
        return {e.task_id for e in tasks.running()} if tasks is not None else set()

    def standby(self) -> set[TaskId]:
        updater = self.streams._state_updater
        return set(updater.standby_ids()) if updater is not None else set()

    def http(self, path: str) -> tuple[int, Any]:
        try:
            with urllib.request.urlopen(f"http://{self.host}{path}", timeout=15) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())


@pytest.fixture
def clients(cluster: Any, app_id: str, tmp_path: Path) -> Iterator[tuple[list[Client], str]]:
    source = f"{app_id}-in"
    cluster.create_topic(source, 4)
    made = []
    for name in ("a", "b"):
        port = free_port()
        config = {
            "application.id": app_id,
            "client.id": f"{app_id}-{name}",
            "state.dir": str(tmp_path / name),
            "commit.interval.ms": 100,
            "num.standby.replicas": 1,
            "application.server": f"127.0.0.1:{port}",
            "query.http.port": port,
        }
        made.append(Client(KafkaStreams(count_topology(source), config, cluster=cluster), port))
    for client in made:
        client.streams.start()
    try:
        yield made, source
    finally:
        for client in made:
            client.streams.close(timeout=60)


def converged(clients: list[Client]) -> bool:
    """Every task runs on one client, each client holds a standby of the other's tasks, and both
    clients' metadata says so."""
    a, b = clients
    every = {TaskId(0, p) for p in range(4)}
    if a.active() | b.active() != every or not a.active() or not b.active():
        return False
    if a.standby() != b.active() or b.standby() != a.active():
        return False
    for client in clients:
        listed = {m.host_info: m for m in client.streams.metadata_for_all_streams_clients()}
        for other in clients:
            meta = listed.get(other.host)
            if meta is None or {tp.partition for tp in meta.topic_partitions} != {
                t.partition for t in other.active()
            }:
                return False
            standby = {tp.partition for tp in meta.standby_topic_partitions}
            if standby != {t.partition for t in other.standby()}:
                return False
    return True


def test_clients_find_route_and_serve_every_key_across_instances(
    clients: tuple[list[Client], str], cluster: Any
) -> None:
    both, source = clients
    a, b = both
    expected: Counter[str] = Counter()
    for i in range(120):
        key = KEYS[i % len(KEYS)]
        cluster.produce(source, key.encode(), b"x")
        expected[key] += 1
    wait_until(lambda: converged(both), WAIT_S, "both clients' metadata to match their assignments")

    # query_metadata_for_key names the client whose assignment holds the key's partition.
    for key in KEYS:
        partition = default_partition(key.encode(), 4)
        owner, other = (a, b) if TaskId(0, partition) in a.active() else (b, a)
        for asking in both:
            meta = asking.streams.query_metadata_for_key(STORE, key, STRING)
            assert meta == KeyQueryMetadata(owner.host, frozenset([other.host]), partition)
    # streams_metadata_for_store lists both clients, with the store active and standby on each.
    for asking in both:
        listed = asking.streams.streams_metadata_for_store(STORE)
        assert {m.host_info for m in listed} == {a.host, b.host}
        assert all(m.state_store_names == {STORE} and m.standby_state_store_names == {STORE} for m in listed)
        assert asking.streams.streams_metadata_for_store("no-such-store") == []

    # An HTTP lookup on either client answers every key's count, forwarding to the owner.
    def all_counts_served() -> bool:
        return all(c.http(f"/stores/{STORE}/keys/{k}") == (200, expected[k]) for c in both for k in KEYS)

    wait_until(all_counts_served, WAIT_S, "every key's count over HTTP on both clients")
    status, found = a.http(f"/stores/{STORE}/range")
    assert status == 200 and {e["key"]: e["value"] for e in found} == dict(expected)
    assert b.http(f"/stores/{STORE}/keys/nobody")[0] == 404
    assert a.http("/stores/no-such-store/keys/x")[0] == 404

    # Stale reads: the standby of a key's partition answers once stale stores are enabled.
    key = KEYS[0]
    meta = a.streams.query_metadata_for_key(STORE, key, STRING)
    standby = a if meta.standby_hosts == {a.host} else b
    params = StoreQueryParameters.from_name_and_type(STORE, QueryableStoreTypes.key_value_store())
    with pytest.raises(InvalidStateStoreException):
        standby.streams.store(params.with_partition(meta.partition)).get(key)
    stale = standby.streams.store(params.enable_stale_stores().with_partition(meta.partition))
    wait_until(lambda: stale.get(key) == expected[key], WAIT_S, "the standby's count to catch up")

    # Each client's threads list its tasks, active and standby, each under exactly one thread.
    for client in both:
        threads = client.streams.metadata_for_local_threads()
        assert set().union(*(t.active_tasks for t in threads)) == {str(t) for t in client.active()}
        assert set().union(*(t.standby_tasks for t in threads)) == {str(t) for t in client.standby()}
