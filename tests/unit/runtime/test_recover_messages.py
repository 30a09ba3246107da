"""What a failed send says was committed: under at_least_once there is no transaction, so the error
must not speak of one; under exactly_once_v2 it says the transaction is aborted."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kstreams import KafkaStreams, StreamsUncaughtExceptionResponse
from kstreams.cluster import EmbeddedCluster
from kstreams.topology import StreamsBuilder


def _wait_for_error(streams: KafkaStreams, errors: list[BaseException]) -> None:
    deadline = time.monotonic() + 30
    while not errors:
        assert time.monotonic() < deadline, f"no error reached the handler (state {streams.state})"
        streams.wait_for_state(KafkaStreams.State.ERROR, timeout=0.05)


@pytest.mark.parametrize(
    ("guarantee", "said", "not_said"),
    [
        ("at_least_once", ["no transaction", "offsets", "processed again"], ["transaction are not"]),
        ("exactly_once_v2", ["transaction is aborted", "read_committed", "again"], ["no transaction"]),
    ],
)
def test_a_rejected_record_says_what_is_and_is_not_committed(
    embedded_cluster: EmbeddedCluster, tmp_path: Any, guarantee: str, said: list[str], not_said: list[str]
) -> None:
    embedded_cluster.create_topic("in", 1)
    embedded_cluster.create_topic("out", 1, config={"max.message.bytes": "1000"})
    builder = StreamsBuilder()
    builder.stream("in").to("out")
    streams = KafkaStreams(
        builder.build(),
        {
            "application.id": f"messages-{guarantee}",
            "default.key.serde": "string",
            "default.value.serde": "string",
            "processing.guarantee": guarantee,
            "commit.interval.ms": 50,
            "state.dir": str(tmp_path),
        },
        cluster=embedded_cluster,
    )
    errors: list[BaseException] = []
    streams.set_uncaught_exception_handler(
        lambda exc: errors.append(exc) or StreamsUncaughtExceptionResponse.SHUTDOWN_CLIENT
    )
    embedded_cluster.produce("in", b"k", b"x" * 5000)
    streams.start()
    try:
        _wait_for_error(streams, errors)
        message = str(errors[0])
        for text in said:
            assert text in message, message
        for text in not_said:
            assert text not in message, message
    finally:
        streams.close(timeout=10.0)
