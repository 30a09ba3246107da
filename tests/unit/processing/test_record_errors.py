"""Processing and production exception handlers (KIP-1033) and the dead-letter queue (KIP-1034):
a failed record is skipped or fails the task as the handler decides, and lands in the dead-letter
topic with headers naming the error."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams import KafkaStreams, Serdes, StreamsUncaughtExceptionResponse
from kstreams.errors import (
    DeadLetterRecord,
    ErrorHandlerContext,
    ProcessingExceptionHandler,
    ProductionExceptionHandler,
    ProductionExceptionHandlerResponse,
    Response,
    SerializationExceptionOrigin,
    StreamsException,
)
from kstreams.testing import TopologyTestDriver
from kstreams.topology import Produced, StreamsBuilder
from tests.support.waiting import wait_until

S = Serdes.string()
BASE = {"application.id": "errors", "default.key.serde": "string", "default.value.serde": "string"}


def _parse(value: str) -> str:
    if value == "bad":
        raise ValueError(f"cannot parse {value!r}")
    return value.upper()


def _branching_topology() -> Any:
    """in -> map_values(_parse) -> out, and in -> peek -> seen (a sibling of the failing node)."""
    builder = StreamsBuilder()
    source = builder.stream("in")
    source.map_values(_parse).to("out")
    source.to("seen")
    return builder.build()


def _headers(record: Any) -> dict[str, bytes | None]:
    return dict(record.headers or [])


def test_without_a_handler_a_failing_processor_fails_the_task() -> None:
    with TopologyTestDriver(_branching_topology(), BASE) as driver:
        source = driver.create_input_topic("in", S, S)
        with pytest.raises(StreamsException, match="cannot parse"):
            source.pipe_input("k", "bad")


def test_continue_skips_the_record_from_the_failing_node_on_and_its_siblings_still_get_it() -> None:
    config = {**BASE, "processing.exception.handler": "LogAndContinueProcessingExceptionHandler"}
    with TopologyTestDriver(_branching_topology(), config) as driver:
        source = driver.create_input_topic("in", S, S)
        out = driver.create_output_topic("out", S, S)
        seen = driver.create_output_topic("seen", S, S)
        for value in ("a", "bad", "c"):
            source.pipe_input("k", value)
        assert out.read_values_to_list() == ["A", "C"]
        assert seen.read_values_to_list() == ["a", "bad", "c"]


def test_kafka_s_name_of_the_continue_handler_skips_the_failed_record() -> None:
    # As a properties file ported from a Java application spells it.
    handler = "org.apache.kafka.streams.errors.LogAndContinueProcessingExceptionHandler"
    with TopologyTestDriver(
        _branching_topology(), {**BASE, "processing.exception.handler": handler}
    ) as driver:
        source = driver.create_input_topic("in", S, S)
        for value in ("a", "bad", "c"):
            source.pipe_input("k", value)
        assert driver.create_output_topic("out", S, S).read_values_to_list() == ["A", "C"]


def test_the_dead_letter_record_holds_the_raw_input_and_headers_naming_the_error() -> None:
    config = {
        **BASE,
        "processing.exception.handler": "LogAndContinueProcessingExceptionHandler",
        "errors.deadletterqueue.topic.name": "dlq",
    }
    with TopologyTestDriver(_branching_topology(), config) as driver:
        source = driver.create_input_topic("in", S, S)
        dlq = driver.create_output_topic("dlq", Serdes.bytes(), Serdes.bytes())
        source.pipe_input("k1", "ok", 100)
        source.pipe_input("k2", "bad", 200)
        letters = dlq.read_records_to_list()
        assert len(letters) == 1
        letter = letters[0]
        assert (letter.key, letter.value, letter.timestamp) == (b"k2", b"bad", 200)
        headers = _headers(letter)
        assert headers["__streams.errors.exception"] == b"builtins.ValueError"
        assert headers["__streams.errors.message"] == b"cannot parse 'bad'"
        assert b"_parse" in (headers["__streams.errors.stacktrace"] or b"")
        assert headers["__streams.errors.topic"] == b"in"
        assert headers["__streams.errors.partition"] == b"0"
        assert headers["__streams.errors.offset"] == b"1"


def test_fail_with_a_dead_letter_topic_writes_the_record_then_fails() -> None:
    config = {**BASE, "errors.deadletterqueue.topic.name": "dlq"}
    with TopologyTestDriver(_branching_topology(), config) as driver:
        source = driver.create_input_topic("in", S, S)
        dlq = driver.create_output_topic("dlq", Serdes.bytes(), Serdes.bytes())
        with pytest.raises(StreamsException, match="processing exception handler chose to fail"):
            source.pipe_input("k", "bad")
        assert [r.value for r in dlq.read_records_to_list()] == [b"bad"]


class _Recording(ProcessingExceptionHandler):
    """Continues, remembering what it was told, and writes its own dead letter."""

    seen: list[tuple[str | None, Any, int, Any]] = []

    def handle(self, context: ErrorHandlerContext, record: Any, exception: Exception) -> Any:
        _Recording.seen.append((context.processor_node_id, context.task_id, context.offset, record.value))
        letter = DeadLetterRecord(
            "dlq", context.source_raw_key, b"custom:" + (context.source_raw_value or b"")
        )
        return Response.resume([letter])


def test_a_custom_handler_sees_the_node_task_and_record_and_may_write_its_own_dead_letters() -> None:
    _Recording.seen = []
    builder = StreamsBuilder()
    builder.stream("in").map_values(_parse, named="parse").to("out")
    config = {**BASE, "processing.exception.handler": _Recording}
    with TopologyTestDriver(builder.build(), config) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "bad")
        dlq = driver.create_output_topic("dlq", Serdes.bytes(), Serdes.bytes())
        assert [r.value for r in dlq.read_records_to_list()] == [b"custom:bad"]
    assert _Recording.seen == [("parse", _Recording.seen[0][1], 0, "bad")]
    assert str(_Recording.seen[0][1]) == "0_0"


class _SkipUnserializable(ProductionExceptionHandler):
    origins: list[SerializationExceptionOrigin] = []

    def handle_serialization_exception(
        self,
        context: ErrorHandlerContext,
        record: Any,
        exception: Exception,
        origin: SerializationExceptionOrigin,
    ) -> Any:
        _SkipUnserializable.origins.append(origin)
        return ProductionExceptionHandlerResponse.CONTINUE


def _serializing_topology() -> Any:
    def serialize(value: Any) -> bytes:
        if value == "bad":
            raise ValueError("unserializable")
        return value.encode()

    strict = Serdes.serde_from(serialize, lambda data: data.decode(), "strict")
    builder = StreamsBuilder()
    builder.stream("in").to("out", Produced.with_(S, strict))
    return builder.build()


def test_a_production_handler_may_skip_a_record_its_sink_cannot_serialize() -> None:
    _SkipUnserializable.origins = []
    config = {**BASE, "production.exception.handler": _SkipUnserializable}
    with TopologyTestDriver(_serializing_topology(), config) as driver:
        source = driver.create_input_topic("in", S, S)
        out = driver.create_output_topic("out", S, S)
        for value in ("a", "bad", "c"):
            source.pipe_input("k", value)
        assert out.read_values_to_list() == ["a", "c"]
    assert _SkipUnserializable.origins == [SerializationExceptionOrigin.VALUE]


def test_the_default_production_handler_fails_on_a_serializer_error() -> None:
    config = {**BASE, "production.exception.handler": "DefaultProductionExceptionHandler"}
    with TopologyTestDriver(_serializing_topology(), config) as driver:
        with pytest.raises(StreamsException, match="unserializable"):
            driver.create_input_topic("in", S, S).pipe_input("k", "bad")


def test_the_deserialization_handler_writes_dead_letters_too() -> None:
    builder = StreamsBuilder()
    builder.stream("in", consumed=None).map_values(lambda v: v).to("out")
    config = {
        **BASE,
        "default.value.serde": "long",
        "deserialization.exception.handler": "LogAndContinueExceptionHandler",
        "errors.deadletterqueue.topic.name": "dlq",
    }
    with TopologyTestDriver(builder.build(), config) as driver:
        driver.create_input_topic("in", Serdes.bytes(), Serdes.bytes()).pipe_input(b"k", b"not a long")
        dlq = driver.create_output_topic("dlq", Serdes.bytes(), Serdes.bytes())
        letters = dlq.read_records_to_list()
        assert [(r.key, r.value) for r in letters] == [(b"k", b"not a long")]
        assert _headers(letters[0])["__streams.errors.exception"] == b"kstreams.errors.SerializationException"


def test_an_unknown_handler_response_is_a_clear_error() -> None:
    class Confused(ProcessingExceptionHandler):
        def handle(self, context: ErrorHandlerContext, record: Any, exception: Exception) -> Any:
            return "maybe"

    with TopologyTestDriver(
        _branching_topology(), {**BASE, "processing.exception.handler": Confused}
    ) as driver:
        with pytest.raises(StreamsException, match="return CONTINUE or FAIL"):
            driver.create_input_topic("in", S, S).pipe_input("k", "bad")


def test_skipped_records_reach_the_dead_letter_topic_and_the_metric_on_a_cluster(
    cluster: Any, app_id: str
) -> None:
    source, sink, dlq = f"{app_id}-in", f"{app_id}-out", f"{app_id}-dlq"
    for topic in (source, sink, dlq):
        cluster.create_topic(topic, 2)
    builder = StreamsBuilder()
    builder.stream(source).map_values(_parse).to(sink)
    streams = KafkaStreams(
        builder.build(),
        {
            **BASE,
            "application.id": app_id,
            "commit.interval.ms": 50,
            "processing.exception.handler": "LogAndContinueProcessingExceptionHandler",
            "errors.deadletterqueue.topic.name": dlq,
        },
        cluster=cluster,
    )
    values = ["a", "bad", "b", "bad", "c"]
    for i, value in enumerate(values):
        cluster.produce(source, f"k{i}".encode(), value.encode())
    streams.start()
    try:
        wait_until(
            lambda: len(cluster.read(sink)) >= 3 and len(cluster.read(dlq)) >= 2,
            60,
            "three output records and two dead letters",
        )
        assert sorted(r.value for r in cluster.read(sink)) == [b"A", b"B", b"C"]
        letters = cluster.read(dlq)
        assert sorted(r.key for r in letters) == [b"k1", b"k3"]
        assert all(dict(r.headers or [])["__streams.errors.topic"] == source.encode() for r in letters)
        dropped = sum(
            value
            for metric, value in streams.metrics().items()
            if metric.name == "dropped-records-total" and metric.group == "stream-task-metrics"
        )
        assert dropped == 2
    finally:
        streams.close(timeout=10.0)


class _SkipRejected(ProductionExceptionHandler):
    rejected: list[tuple[str, int]] = []

    def handle(self, context: ErrorHandlerContext, record: Any, exception: Exception) -> Any:
        _SkipRejected.rejected.append((record.topic, len(record.value or b"")))
        return ProductionExceptionHandlerResponse.CONTINUE


def _too_large_app(cluster: Any, app_id: str, handler: Any) -> tuple[KafkaStreams, str, str]:
    source, sink = f"{app_id}-in", f"{app_id}-out"
    cluster.create_topic(source, 1)
    # The broker refuses records over 1000 bytes for this topic (librdkafka, with the same limit
    # on the producer, refuses them before sending).
    cluster.create_topic(sink, 1, config={"max.message.bytes": "1000"})
    builder = StreamsBuilder()
    builder.stream(source).to(sink)
    config: dict[str, Any] = {
        **BASE,
        "application.id": app_id,
        "commit.interval.ms": 50,
        "producer.message.max.bytes": 1000,
    }
    if handler is not None:
        config["production.exception.handler"] = handler
    return KafkaStreams(builder.build(), config, cluster=cluster), source, sink


def test_a_record_the_cluster_rejects_is_skipped_when_the_production_handler_continues(
    cluster: Any, app_id: str
) -> None:
    _SkipRejected.rejected = []
    streams, source, sink = _too_large_app(cluster, app_id, _SkipRejected)
    for value in (b"small", b"x" * 5000, b"after"):
        cluster.produce(source, b"k", value)
    streams.start()
    try:
        wait_until(
            lambda: len(cluster.read(sink)) >= 2,
            60,
            lambda: f"two output records (output: {cluster.read(sink)})",
        )
        assert [r.value for r in cluster.read(sink)] == [b"small", b"after"]
        assert _SkipRejected.rejected == [(sink, 5000)]
        assert streams.state is KafkaStreams.State.RUNNING
        dropped = sum(
            value
            for metric, value in streams.metrics().items()
            if metric.name == "dropped-records-total" and metric.group == "stream-thread-metrics"
        )
        assert dropped == 1
    finally:
        streams.close(timeout=10.0)


def test_a_record_the_cluster_rejects_fails_the_application_by_default(cluster: Any, app_id: str) -> None:
    streams, source, sink = _too_large_app(cluster, app_id, None)
    cluster.produce(source, b"k", b"x" * 5000)
    streams.start()
    try:
        wait_until(
            lambda: streams.state is KafkaStreams.State.ERROR,
            60,
            lambda: f"the ERROR state (state {streams.state})",
        )
        assert cluster.read(sink) == []
    finally:
        streams.close(timeout=10.0)


@pytest.mark.parametrize("compiled", [True, False])
def test_writing_to_a_missing_topic_fails_naming_it_and_loses_no_record(
    embedded_cluster: Any, app_id: str, compiled: bool
) -> None:
    # The sink's topic does not exist: the application fails with an error that names the topic
    # and the fix, and commits nothing, so once the topic exists a restart writes the record.
    cluster = embedded_cluster
    source, sink = f"{app_id}-in", f"{app_id}-missing"
    cluster.create_topic(source, 1)
    builder = StreamsBuilder()
    builder.stream(source).map_values(str.upper).to(sink)
    config = {**BASE, "application.id": app_id, "commit.interval.ms": 50, "processing.compiled": compiled}
    cluster.produce(source, b"k", b"v")
    failures: list[BaseException] = []

    def handler(exc: BaseException) -> StreamsUncaughtExceptionResponse:
        failures.append(exc)
        return StreamsUncaughtExceptionResponse.SHUTDOWN_CLIENT

    streams = KafkaStreams(builder.build(), config, cluster=cluster)
    streams.set_uncaught_exception_handler(handler)
    streams.start()
    try:
        assert streams.wait_for_state(KafkaStreams.State.ERROR, timeout=30)
    finally:
        streams.close(timeout=10.0)
    assert failures and f"Topic {sink} does not exist: create it before" in str(failures[0])
    # Where: the record's offset, or the offsets of the batch the compiled processors ran.
    where = "offsets=0-0 (a batch run by compiled processors)" if compiled else "offset=0:"
    assert f"topic={source}, partition=0, {where}" in str(failures[0])

    cluster.create_topic(sink, 1)
    streams = KafkaStreams(builder.build(), config, cluster=cluster)
    streams.start()
    try:
        wait_until(lambda: cluster.read(sink), 30, lambda: f"an output record (state {streams.state})")
        assert [(r.key, r.value) for r in cluster.read(sink)] == [(b"k", b"V")]
    finally:
        streams.close(timeout=10.0)
