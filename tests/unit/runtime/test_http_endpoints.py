"""The query and metrics endpoints under a client's mistakes and an idle crowd: a key the store's
serde cannot take is a 400 with a message (not a 500 with an ERROR traceback); idle connections
time out, handler threads are bounded, and nothing is served or printed after ``stop()``."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kstreams.runtime.queries.http_endpoint import HttpEndpoint
from kstreams.runtime.queries.metrics_endpoint import MetricsEndpoint
from kstreams.runtime.queries.query_endpoint import QueryEndpoint
from kstreams.serdes import Serdes
from tests.support.waiting import wait_until

LONG = Serdes.long()


class LongKeyedStore:
    """A store keyed by longs: a key its serde cannot serialize fails as a real store's would."""

    def __init__(self) -> None:
        self.data = {1: 10, 2: 20}

    def get(self, key: Any) -> Any:
        LONG.serialize("counts", key)
        return self.data.get(key)

    def range(self, low: Any, high: Any) -> list[tuple[Any, Any]]:
        for bound in (low, high):
            if bound is not None:
                LONG.serialize("counts", bound)
        return sorted(self.data.items())


class Queries:
    def __init__(self) -> None:
        self.counts = LongKeyedStore()

    def query_metadata_for_key(self, store_name: str, key: Any, key_serializer: Any = None) -> Any:
        raise AssertionError("no application.server: nothing is forwarded")

    def streams_metadata_for_store(self, store_name: str) -> list[Any]:
        return []

    def store(self, name: Any, timestamped: bool = False) -> Any:
        return self.counts

    def store_key_serde(self, store_name: str) -> Any:
        return LONG


@pytest.fixture
def query_endpoint() -> Iterator[QueryEndpoint]:
    endpoint = QueryEndpoint(Queries(), None, "127.0.0.1", 0, "test-query-endpoint")
    endpoint.start()
    yield endpoint
    endpoint.stop()


def get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.parametrize(
    "path",
    ["keys/null", "keys/abc", "keys/1e400", f"keys/{2**70}", "keys/3.5", "range?from=abc", "range?to=1.5"],
)
def test_a_key_the_store_cannot_take_is_a_client_error_logged_at_debug_at_most(
    query_endpoint: QueryEndpoint, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    status, body = get(f"{query_endpoint.url}/stores/counts/{path}")
    assert status == 400, body
    assert "counts" in body["error"] and "key" in body["error"]
    assert [r for r in caplog.records if r.levelno > logging.DEBUG] == []


def test_valid_keys_still_answer(query_endpoint: QueryEndpoint) -> None:
    assert get(f"{query_endpoint.url}/stores/counts/keys/1") == (200, 10)
    assert get(f"{query_endpoint.url}/stores/counts/keys/3")[0] == 404
    assert get(f"{query_endpoint.url}/stores/counts/range?from=1&to=2")[0] == 200


def _endpoints() -> list[Callable[[], HttpEndpoint]]:
    return [
        lambda: QueryEndpoint(Queries(), None, "127.0.0.1", 0, "idle-query", idle_timeout_s=0.5),
        lambda: MetricsEndpoint(lambda: "m 1\n", "127.0.0.1", 0, "idle-metrics", idle_timeout_s=0.5),
    ]


def _handler_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("idle-") and "-handler" in t.name)


@pytest.mark.parametrize("make", _endpoints(), ids=["query", "metrics"])
def test_idle_connections_time_out_and_handler_threads_are_bounded(
    make: Callable[[], HttpEndpoint],
) -> None:
    endpoint = make()
    endpoint.start()
    host, port = endpoint.address
    idle = [socket.create_connection((host, port), timeout=5) for _ in range(150)]
    try:
        wait_until(lambda: _handler_threads() >= 1, 5, "a handler thread")
        assert _handler_threads() <= endpoint.max_connections
        # Idle connections are closed by the endpoint once idle_timeout_s passed.
        idle[0].settimeout(5)
        assert idle[0].recv(1) == b""
        wait_until(lambda: _handler_threads() == 0, 10, "the idle connections to time out")
    finally:
        for sock in idle:
            sock.close()
        endpoint.stop()


@pytest.mark.parametrize("make", _endpoints(), ids=["query", "metrics"])
def test_nothing_is_served_or_printed_after_stop(
    make: Callable[[], HttpEndpoint], capfd: pytest.CaptureFixture[str]
) -> None:
    endpoint = make()
    endpoint.start()
    host, port = endpoint.address
    # Half-open connections: a request line sent, the rest never comes; then the peer goes away.
    half_open = []
    for _ in range(20):
        sock = socket.create_connection((host, port), timeout=5)
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        half_open.append(sock)
    wait_until(lambda: _handler_threads() >= 1, 5, "a handler thread")
    started = time.monotonic()
    endpoint.stop()
    assert time.monotonic() - started < 5
    assert _handler_threads() == 0, "a handler still runs after stop()"
    for sock in half_open:
        try:
            sock.sendall(b"\r\n")
            assert sock.recv(100) == b""
        except OSError:
            pass  # reset: the endpoint closed it
        sock.close()
    out, err = capfd.readouterr()
    assert out == "" and err == ""
