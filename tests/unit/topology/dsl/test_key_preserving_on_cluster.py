"""process_values, transform_values with a store, and a versioned store restored after a restart,
run by KafkaStreams on the embedded cluster and on a real broker (the ``cluster`` fixture)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kstreams import KafkaStreams
from kstreams.cluster import EmbeddedCluster
from kstreams.processor import FixedKeyProcessor, FixedKeyProcessorContext, FixedKeyRecord, ProcessorContext
from kstreams.serdes import Serdes
from kstreams.state import Stores
from kstreams.topology import Produced, StreamsBuilder, ValueTransformerWithKey

S = Serdes.string()
L = Serdes.long()
# Record times near now: a broker's retention deletes log segments of records from long ago.
T0 = int(time.time()) * 1000


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Check ``condition`` every 20 ms until it holds; fail after ``timeout`` seconds."""
    tick = threading.Event()
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout}s waiting for {what}")
        tick.wait(0.02)


class App:
    def __init__(self, cluster: Any, app_id: str, state_dir: Path) -> None:
        self.cluster = cluster
        self.app_id = app_id
        self.state_dir = state_dir
        self.embedded = isinstance(cluster, EmbeddedCluster)
        self.timeout = 30.0 if self.embedded else 60.0
        self.clients: list[KafkaStreams] = []
        self.source = f"{app_id}-in"
        self.sink = f"{app_id}-out"
        cluster.create_topic(self.source, 1)
        cluster.create_topic(self.sink, 1)

    def start(self, topology: Any, name: str = "main") -> KafkaStreams:
        props: dict[str, Any] = {
            "application.id": self.app_id,
            "default.key.serde": "string",
            "default.value.serde": "string",
            "state.dir": str(self.state_dir / name),
            "commit.interval.ms": 50 if self.embedded else 100,
        }
        if not self.embedded:
            props.update({"session.timeout.ms": 6000, "main.consumer.max.poll.interval.ms": 10000})
        streams = KafkaStreams(topology, props, cluster=self.cluster)
        self.clients.append(streams)
        streams.start()
        return streams

    def produce(self, records: list[tuple[str, str | None, int]]) -> None:
        """Records at T0 + their time."""
        for key, value, ts in records:
            data = None if value is None else value.encode()
            self.cluster.produce(self.source, key.encode(), data, timestamp=T0 + ts)

    def output(self, value_serde: Any = S) -> list[tuple[str, Any, int]]:
        """The sink's records, at their time since T0."""
        return [
            (S.deserialize(self.sink, r.key), value_serde.deserialize(self.sink, r.value), r.timestamp - T0)
            for r in self.cluster.read(self.sink)
        ]

    def wait_for(self, expected: list[tuple[str, Any, int]], value_serde: Any = S) -> None:
        try:
            wait_until(lambda: self.output(value_serde) == expected, self.timeout, f"outputs {expected}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the output is {self.output(value_serde)}") from None


@pytest.fixture
def app(cluster: Any, app_id: str, tmp_path: Path) -> Iterator[App]:
    made = App(cluster, app_id, tmp_path)
    yield made
    for streams in made.clients:
        streams.close(timeout=30)


class RunningCount(FixedKeyProcessor[str, str, int]):
    def init(self, context: FixedKeyProcessorContext[str, int]) -> None:
        self.context = context
        self.store = context.get_state_store("counts")

    def process(self, record: FixedKeyRecord[str, str]) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(record.with_value(count).with_timestamp(record.timestamp + 1))


def test_process_values_with_a_store_on_a_cluster(app: App) -> None:
    builder = StreamsBuilder()
    builder.add_state_store(Stores.key_value_store_builder(Stores.persistent_key_value_store("counts"), S, L))
    builder.stream(app.source).process_values(RunningCount, "counts").to(app.sink, Produced.with_(S, L))
    app.start(builder.build())
    app.produce([("a", "x", 10), ("b", "y", 11), ("a", "z", 12)])
    app.wait_for([("a", 1, 11), ("b", 1, 12), ("a", 2, 13)], L)


class UpdateCount(ValueTransformerWithKey[str, str, str]):
    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.store = context.get_state_store("updates")

    def transform(self, key: str, value: str | None) -> str | None:
        count = (self.store.get(key) or 0) + 1
        self.store.put(key, count)
        return None if value is None else f"{value}#{count}"


def test_transform_values_with_a_store_on_a_cluster(app: App) -> None:
    builder = StreamsBuilder()
    builder.add_state_store(Stores.key_value_store_builder(Stores.in_memory_key_value_store("updates"), S, L))
    builder.table(app.source).transform_values(UpdateCount, "updates").to_stream().to(app.sink)
    app.start(builder.build())
    app.produce([("a", "x", 10), ("a", None, 11), ("a", "y", 12)])
    app.wait_for([("a", "x#1", 10), ("a", None, 11), ("a", "y#3", 12)])


class VersionedOps(FixedKeyProcessor[str, str, str]):
    """``put:<value>`` puts the value at the record's timestamp, ``del`` deletes at it, and
    ``get:<time>`` answers ``value@from-to`` (or ``none``) for the key as of that time."""

    def init(self, context: FixedKeyProcessorContext[str, str]) -> None:
        self.context = context
        self.store = context.get_state_store("versions")

    def process(self, record: FixedKeyRecord[str, str]) -> None:
        op, _, arg = record.value.partition(":")
        if op == "put":
            valid_to = self.store.put(record.key, arg, record.timestamp)
            self.context.forward(
                record.with_value("latest" if valid_to == -1 else f"valid to {valid_to - T0}")
            )
        elif op == "del":
            self.store.delete(record.key, record.timestamp)
            self.context.forward(record.with_value("deleted"))
        else:
            found = self.store.get(record.key, T0 + int(arg))
            if found is None:
                answer = "none"
            else:
                until = "latest" if found.valid_to is None else found.valid_to - T0
                answer = f"{found.value}@{found.timestamp - T0}-{until}"
            self.context.forward(record.with_value(answer))


def versioned_topology(app: App, persistent: bool) -> Any:
    if persistent:
        supplier = Stores.persistent_versioned_key_value_store("versions", 1_000)
    else:
        supplier = Stores.in_memory_versioned_key_value_store("versions", 1_000)
    builder = StreamsBuilder()
    builder.add_state_store(Stores.versioned_key_value_store_builder(supplier, S, S))
    builder.stream(app.source).process_values(VersionedOps, "versions").to(app.sink)
    return builder.build()


@pytest.mark.parametrize("persistent", [False, True], ids=["in-memory", "persistent"])
def test_a_versioned_store_is_restored_from_its_changelog_after_a_restart(app: App, persistent: bool) -> None:
    first = app.start(versioned_topology(app, persistent), name="first")
    # Out of order within one commit interval: every version must reach the changelog.
    app.produce(
        [
            ("k", "put:a", 100),
            ("k", "put:c", 300),
            ("k", "put:b", 200),
            ("j", "put:x", 150),
            ("j", "del", 250),
        ]
    )
    puts = [
        ("k", "latest", 100),
        ("k", "latest", 300),
        ("k", "valid to 300", 200),
        ("j", "latest", 150),
        ("j", "deleted", 250),
    ]
    app.wait_for(puts)
    assert first.close(timeout=30)
    # A fresh state directory: the second client has only the changelog to rebuild the store from.
    app.start(versioned_topology(app, persistent), name="second")
    app.produce(
        [
            ("k", "get:250", 400),
            ("k", "get:150", 401),
            ("k", "get:50", 402),
            ("j", "get:200", 403),
            ("j", "get:260", 404),
            ("k", "get:500", 405),
        ]
    )
    app.wait_for(
        [
            *puts,
            ("k", "b@200-300", 400),
            ("k", "a@100-200", 401),
            ("k", "none", 402),
            ("j", "x@150-250", 403),
            ("j", "none", 404),
            ("k", "c@300-latest", 405),
        ]
    )
