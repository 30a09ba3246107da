"""The metrics endpoint (metrics.http.port): scraped over HTTP while the client runs, gone after
close(), and a port in use fails start() with a clear error."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest

from kstreams import Consumed, Serdes, StreamsBuilder
from kstreams.client import KafkaStreams, State
from kstreams.cluster import EmbeddedCluster
from kstreams.errors import ConfigException
from kstreams.runtime.queries.metrics_endpoint import CONTENT_TYPE, MetricsEndpoint


def topology():  # type: ignore[no-untyped-def]
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(Serdes.string(), Serdes.string())).to("out")
    return builder.build()


@pytest.fixture
def cluster(embedded_cluster: EmbeddedCluster) -> EmbeddedCluster:
    embedded_cluster.create_topic("in", 1)
    embedded_cluster.create_topic("out", 1)
    return embedded_cluster


def scrape(url: str) -> tuple[int, str, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.headers["Content-Type"], response.read().decode()


def test_the_client_serves_its_metrics_from_start_to_close(cluster, tmp_path):
    streams = KafkaStreams(
        topology(),
        {"application.id": "app", "state.dir": str(tmp_path), "metrics.http.port": 0},
        cluster=cluster,
    )
    assert streams.metrics_url is None
    streams.start()
    try:
        assert streams.wait_for_state(State.RUNNING, timeout=30)
        url = streams.metrics_url
        assert url is not None and url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
        status, content_type, body = scrape(url)
        assert status == 200
        assert content_type == CONTENT_TYPE
        assert body == streams.metrics_prometheus() or "alive_stream_threads" in body.replace("-", "_")
        assert "# TYPE" in body
    finally:
        streams.close(timeout=30)
    assert streams.metrics_url is None
    with pytest.raises(urllib.error.URLError):
        scrape(url)


def test_a_crashed_client_serves_no_metrics_any_more(cluster, tmp_path):
    """A crash (simulated) takes the endpoint with it, as a dead process frees its port."""
    streams = KafkaStreams(
        topology(),
        {"application.id": "app", "state.dir": str(tmp_path), "metrics.http.port": 0},
        cluster=cluster,
    )
    streams.start()
    assert streams.wait_for_state(State.RUNNING, timeout=30)
    url = streams.metrics_url
    assert url is not None and scrape(url)[0] == 200
    streams._abandon()
    assert streams.metrics_url is None
    with pytest.raises(urllib.error.URLError):
        scrape(url)


def test_without_the_port_no_endpoint_is_served(cluster, tmp_path):
    streams = KafkaStreams(topology(), {"application.id": "app", "state.dir": str(tmp_path)}, cluster=cluster)
    streams.start()
    try:
        assert streams.metrics_url is None
    finally:
        streams.close(timeout=30)


def test_a_port_in_use_fails_start_naming_it(cluster, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        streams = KafkaStreams(
            topology(),
            {"application.id": "app", "state.dir": str(tmp_path), "metrics.http.port": port},
            cluster=cluster,
        )
        with pytest.raises(ConfigException, match=f"127.0.0.1:{port}.*metrics.http.port"):
            streams.start()
        assert streams.state is State.ERROR


def test_an_invalid_port_is_a_config_error(tmp_path):
    with pytest.raises(ConfigException, match=r"metrics.http.port.*0 to 65535"):
        KafkaStreams(
            topology(),
            {"application.id": "app", "state.dir": str(tmp_path), "metrics.http.port": 70000},
            cluster=EmbeddedCluster(),
        )


def test_other_paths_and_methods_are_refused():
    endpoint = MetricsEndpoint(lambda: "m 1\n", "127.0.0.1", 0, "test-endpoint")
    endpoint.start()
    try:
        base = endpoint.url
        assert base is not None
        assert scrape(base) == (200, CONTENT_TYPE, "m 1\n")
        with pytest.raises(urllib.error.HTTPError) as missing:
            scrape(base.replace("/metrics", "/other"))
        assert missing.value.code == 404
        request = urllib.request.Request(base, data=b"x", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 405
    finally:
        endpoint.stop()
    endpoint.stop()  # idempotent


def test_a_failing_render_answers_500_and_the_endpoint_keeps_serving():
    calls = []

    def render() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return "ok 1\n"

    endpoint = MetricsEndpoint(render, "127.0.0.1", 0, "test-endpoint")
    endpoint.start()
    try:
        assert endpoint.url is not None
        with pytest.raises(urllib.error.HTTPError) as failed:
            scrape(endpoint.url)
        assert failed.value.code == 500
        assert scrape(endpoint.url)[2] == "ok 1\n"
    finally:
        endpoint.stop()
