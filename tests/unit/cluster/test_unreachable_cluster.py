"""A malformed bootstrap address is a ConfigException at construction; an unreachable cluster
fails start() after default.api.timeout.ms, and says so in a few librdkafka lines, not thousands."""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

import pytest

from kstreams import KafkaStreams, StreamsBuilder, StreamsConfig
from kstreams.errors import ConfigException

MALFORMED = ["localhost", "http://127.0.0.1:9092", "127.0.0.1:", "127.0.0.1:99999", "a:1,,b:2", "host:port"]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("servers", MALFORMED)
def test_a_malformed_address_fails_the_config_and_the_cluster_at_construction(servers: str) -> None:
    from kstreams.cluster.kafka import KafkaCluster

    with pytest.raises(ConfigException, match=r"bootstrap\.servers"):
        StreamsConfig({"application.id": "app", "bootstrap.servers": servers})
    with pytest.raises(ConfigException, match="bootstrap servers"):
        KafkaCluster(servers)


@pytest.mark.parametrize("servers", ["127.0.0.1:9092", "[::1]:9092", "SSL://broker:9093", "a:1, b:2"])
def test_well_formed_addresses_pass(servers: str) -> None:
    assert (
        StreamsConfig({"application.id": "app", "bootstrap.servers": servers})["bootstrap.servers"] == servers
    )


def test_an_unreachable_cluster_fails_start_after_default_api_timeout_in_a_few_log_lines(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kstreams.cluster.librdkafka")
    builder = StreamsBuilder()
    builder.stream("in").to("out")
    streams = KafkaStreams(
        builder.build(),
        {
            "application.id": "unreachable",
            "bootstrap.servers": f"127.0.0.1:{closed_port()}",
            "default.api.timeout.ms": 2000,
            "state.dir": str(tmp_path),
        },
    )
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError, match=r"default\.api\.timeout\.ms"):
            streams.start()
        took = time.monotonic() - started
    finally:
        streams.close(timeout=10)
    assert 1.5 < took < 10, f"start() took {took:.1f}s with default.api.timeout.ms=2000"
    lines = [r for r in caplog.records if r.name == "kstreams.cluster.librdkafka"]
    assert len(lines) <= 20, [r.getMessage() for r in lines]
