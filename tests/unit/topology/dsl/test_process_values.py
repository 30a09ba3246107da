"""KStream.process_values with FixedKeyProcessors, forwarding to named children (a name or
``To``), and stores added with StreamsBuilder.add_state_store, on the test driver.

The module is marked ``on_cluster``: its tests using ``drive`` run on a KafkaStreams client over an
EmbeddedCluster too (tests/unit/topology/dsl/conftest.py), and the tests at its end check on a
cluster what the driver cannot show."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kstreams.errors import StreamsException, TopologyException
from kstreams.processor import (
    FixedKeyProcessor,
    FixedKeyProcessorContext,
    FixedKeyRecord,
    Processor,
    ProcessorContext,
    Record,
    To,
)
from kstreams.serdes import Serdes
from kstreams.state import Stores
from kstreams.testing import TestRecord
from kstreams.topology import Produced, StreamsBuilder
from tests.support.clients import Clients, wait_timeout

S = Serdes.string()
L = Serdes.long()
# Record times near now (of the test on a cluster): a broker's retention deletes log segments of
# records from long ago.
T0 = int(time.time()) * 1000

pytestmark = pytest.mark.on_cluster(
    representative="test_a_versioned_store_is_restored_from_its_changelog_after_a_restart"
)
# The reasons of the tests of this module that do not run, or run differently, on the cluster driver.
RAISES_ON_PIPING = (
    "the driver raises the processing error from pipe_input; on a cluster the client stops in ERROR"
)


class Upper(FixedKeyProcessor[str, str, str]):
    """Upper-cases the value, moves the timestamp by 5 and adds a header."""

    def init(self, context: FixedKeyProcessorContext[str, str]) -> None:
        self.context = context

    def process(self, record: FixedKeyRecord[str, str]) -> None:
        out = record.with_value(record.value.upper()).with_timestamp(record.timestamp + 5)
        self.context.forward(out.with_headers([("seen", b"1")]))


class RunningCount(FixedKeyProcessor[str, str, int]):
    """Counts the records of each key in the store "counts" and forwards the count."""

    def init(self, context: FixedKeyProcessorContext[str, int]) -> None:
        self.context = context
        self.store = context.get_state_store("counts")

    def process(self, record: FixedKeyRecord[str, str]) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(record.with_value(count))


def counts_store() -> Any:
    return Stores.key_value_store_builder(Stores.in_memory_key_value_store("counts"), S, L)


def test_fixed_key_record_changes_value_timestamp_and_headers_but_has_no_with_key() -> None:
    record = FixedKeyRecord("k", "v", 10, None)
    changed = record.with_value(3).with_timestamp(20).with_headers([("h", b"x")])
    assert (changed.key, changed.value, changed.timestamp, changed.headers) == ("k", 3, 20, [("h", b"x")])
    assert (record.value, record.timestamp, record.headers) == ("v", 10, None)
    assert not hasattr(record, "with_key")
    with pytest.raises(AttributeError):
        record.key = "other"  # type: ignore[misc]
    with pytest.raises(ValueError, match="non-negative"):
        record.with_timestamp(-1)


def test_process_values_changes_values_timestamps_and_headers_and_keeps_keys(drive) -> None:
    builder = StreamsBuilder()
    builder.stream("in").process_values(Upper).to("out")
    driver = drive(builder.build())
    driver.create_input_topic("in", S, S).pipe_input("a", "hello", 100)
    out = driver.create_output_topic("out", S, S)
    assert out.read_records_to_list() == [TestRecord("a", "HELLO", 105, [("seen", b"1")])]


def test_process_values_uses_a_store_added_to_the_builder(drive) -> None:
    builder = StreamsBuilder()
    builder.add_state_store(counts_store())
    builder.stream("in").process_values(RunningCount, "counts").to("out", Produced.with_(S, L))
    driver = drive(builder.build())
    source = driver.create_input_topic("in", S, S)
    for key, ts in [("a", 1), ("b", 2), ("a", 3)]:
        source.pipe_input(key, "x", ts)
    out = driver.create_output_topic("out", S, L)
    assert out.read_records_to_list() == [TestRecord("a", 1, 1), TestRecord("b", 1, 2), TestRecord("a", 2, 3)]
    assert driver.get_key_value_store("counts").get("a") == 2


def test_process_values_result_needs_no_repartition_but_process_does() -> None:
    def topics(use_process_values: bool) -> set[str]:
        builder = StreamsBuilder()
        stream = builder.stream("in")
        if use_process_values:
            keyed = stream.process_values(Upper)
        else:
            keyed = stream.process(lambda: _PassThrough())
        assert keyed.repartition_required is not use_process_values
        keyed.group_by_key().count().to_stream().to("out", Produced.with_(S, L))
        return set(builder.build().build("app").internal_topics)

    assert not any(t.endswith("-repartition") for t in topics(True))
    assert any(t.endswith("-repartition") for t in topics(False))


class _PassThrough(Processor[Any, Any, Any, Any]):
    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context

    def process(self, record: Record[Any, Any]) -> None:
        self.context.forward(record)


def test_process_values_keeps_a_repartition_the_stream_already_needs() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("in").select_key(lambda k, v: v).process_values(Upper)
    assert stream.repartition_required


@pytest.mark.driver_only(reason=RAISES_ON_PIPING)
def test_a_fixed_key_processor_cannot_forward_a_plain_record(drive) -> None:
    class Rekey(FixedKeyProcessor[str, str, str]):
        def init(self, context: FixedKeyProcessorContext[str, str]) -> None:
            self.context = context

        def process(self, record: FixedKeyRecord[str, str]) -> None:
            self.context.forward(Record("other", record.value, record.timestamp))  # type: ignore[arg-type]

    builder = StreamsBuilder()
    builder.stream("in").process_values(Rekey).to("out")
    driver = drive(builder.build())
    with pytest.raises(StreamsException) as failure:
        driver.create_input_topic("in", S, S).pipe_input("a", "v", 1)
    assert "forwards FixedKeyRecords" in str(failure.value.__cause__ or failure.value)


def test_process_values_rejects_what_is_not_a_supplier() -> None:
    stream = StreamsBuilder().stream("in")
    with pytest.raises(TypeError, match="supplier of FixedKeyProcessors"):
        stream.process_values(Upper())  # type: ignore[arg-type]
    builder = StreamsBuilder()
    builder.stream("in").process_values(lambda: _PassThrough()).to("out")
    with pytest.raises(Exception, match="FixedKeyProcessor"):
        from kstreams.testing import TopologyTestDriver

        with TopologyTestDriver(
            builder.build(), {"default.key.serde": "string", "default.value.serde": "string"}
        ) as driver:
            driver.create_input_topic("in", S, S).pipe_input("a", "v", 1)


def test_add_state_store_takes_only_store_builders() -> None:
    with pytest.raises(TypeError, match="StoreBuilder"):
        StreamsBuilder().add_state_store(Stores.in_memory_key_value_store("x"))  # type: ignore[arg-type]


def test_naming_a_store_never_added_is_a_topology_error() -> None:
    builder = StreamsBuilder()
    with pytest.raises(TopologyException):
        builder.stream("in").process_values(RunningCount, "missing")
        builder.build().build("app")


def test_describe_shows_the_process_values_node_with_its_store() -> None:
    builder = StreamsBuilder()
    builder.add_state_store(counts_store())
    builder.stream("in").process_values(RunningCount, "counts").to("out", Produced.with_(S, L))
    text = str(builder.build().describe())
    assert "Processor: KSTREAM-PROCESSVALUES-0000000001 (stores: [counts])" in text
    assert "--> KSTREAM-SINK-0000000002" in text


class Router(Processor[str, str, str, str]):
    """Sends short values to the child "short" (as a name) and long ones to "long" (as To, with a
    new timestamp)."""

    def __init__(self, spelling: str) -> None:
        self.spelling = spelling

    def init(self, context: ProcessorContext[str, str]) -> None:
        self.context = context

    def process(self, record: Record[str, str]) -> None:
        if len(record.value) <= 3:
            self.context.forward(record, "short" if self.spelling == "name" else To.child("short"))
        else:
            self.context.forward(record, To.child("long").with_timestamp(999))


@pytest.mark.parametrize("spelling", ["name", "To"])
def test_forward_reaches_only_the_named_child(drive, spelling: str) -> None:
    from kstreams.topology import Topology

    topology = Topology()
    topology.add_source("src", "in")
    topology.add_processor("router", lambda: Router(spelling), "src")
    topology.add_sink("short", "short-out", "router")
    topology.add_sink("long", "long-out", "router")
    driver = drive(topology)
    source = driver.create_input_topic("in", S, S)
    source.pipe_input("k", "abc", 10)
    source.pipe_input("k", "abcdef", 11)
    assert driver.create_output_topic("short-out", S, S).read_records_to_list() == [
        TestRecord("k", "abc", 10)
    ]
    assert driver.create_output_topic("long-out", S, S).read_records_to_list() == [
        TestRecord("k", "abcdef", 999)
    ]


def test_forward_to_all_children_with_a_new_timestamp(drive) -> None:
    from kstreams.topology import Topology

    class Stamp(_PassThrough):
        def process(self, record: Record[Any, Any]) -> None:
            self.context.forward(record, To.all().with_timestamp(7))

    topology = Topology()
    topology.add_source("src", "in")
    topology.add_processor("stamp", Stamp, "src")
    topology.add_sink("a", "out-a", "stamp")
    topology.add_sink("b", "out-b", "stamp")
    driver = drive(topology)
    driver.create_input_topic("in", S, S).pipe_input("k", "v", 100)
    for topic in ("out-a", "out-b"):
        assert driver.create_output_topic(topic, S, S).read_records_to_list() == [TestRecord("k", "v", 7)]


@pytest.mark.driver_only(reason=RAISES_ON_PIPING)
def test_forward_to_an_unknown_child_names_the_children(drive) -> None:
    from kstreams.topology import Topology

    class Lost(_PassThrough):
        def process(self, record: Record[Any, Any]) -> None:
            self.context.forward(record, To.child("nowhere"))

    topology = Topology()
    topology.add_source("src", "in")
    topology.add_processor("lost", Lost, "src")
    topology.add_sink("sink", "out", "lost")
    driver = drive(topology)
    with pytest.raises(StreamsException) as failure:
        driver.create_input_topic("in", S, S).pipe_input("k", "v", 1)
    message = str(failure.value) + str(failure.value.__cause__)
    assert "nowhere" in message and "['sink']" in message


def test_to_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="name of a child"):
        To.child("")
    with pytest.raises(ValueError, match="non-negative"):
        To.all().with_timestamp(-5)


# -- on a cluster ----------------------------------------------------------------------------------
# A versioned store used by process_values, restored from its changelog by a client with a fresh
# state directory (on both cluster adapters).


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


def versioned_topology(source: str, sink: str, persistent: bool) -> Any:
    if persistent:
        supplier = Stores.persistent_versioned_key_value_store("versions", 1_000)
    else:
        supplier = Stores.in_memory_versioned_key_value_store("versions", 1_000)
    builder = StreamsBuilder()
    builder.add_state_store(Stores.versioned_key_value_store_builder(supplier, S, S))
    builder.stream(source).process_values(VersionedOps, "versions").to(sink)
    return builder.build()


@pytest.mark.parametrize("persistent", [False, True], ids=["in-memory", "persistent"])
def test_a_versioned_store_is_restored_from_its_changelog_after_a_restart(
    cluster: Any,
    app_id: str,
    tmp_path: Path,
    clients: Clients,
    client_config: Callable[..., dict[str, object]],
    wait_until: Callable[..., None],
    persistent: bool,
) -> None:
    source, sink = f"{app_id}-in", f"{app_id}-out"
    cluster.create_topic(source, 1)
    cluster.create_topic(sink, 1)

    def produce(records: list[tuple[str, str | None, int]]) -> None:
        """Records at T0 + their time."""
        for key, value, ts in records:
            cluster.produce(
                source, key.encode(), None if value is None else value.encode(), timestamp=T0 + ts
            )

    def output() -> list[tuple[str, str, int]]:
        """The sink's records, at their time since T0."""
        return [
            (S.deserialize(sink, r.key), S.deserialize(sink, r.value), r.timestamp - T0)
            for r in cluster.read(sink)
        ]

    def wait_for(expected: list[tuple[str, str, int]]) -> None:
        wait_until(
            lambda: output() == expected,
            wait_timeout(cluster),
            lambda: f"outputs {expected}; the output is {output()}",
        )

    first = clients.start(
        versioned_topology(source, sink, persistent), client_config(tmp_path / "first"), cluster
    )
    # Out of order within one commit interval: every version must reach the changelog.
    produce(
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
    wait_for(puts)
    assert first.close(timeout=30)
    # A fresh state directory: the second client has only the changelog to rebuild the store from.
    clients.start(versioned_topology(source, sink, persistent), client_config(tmp_path / "second"), cluster)
    produce(
        [
            ("k", "get:250", 400),
            ("k", "get:150", 401),
            ("k", "get:50", 402),
            ("j", "get:200", 403),
            ("j", "get:260", 404),
            ("k", "get:500", 405),
        ]
    )
    wait_for(
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
