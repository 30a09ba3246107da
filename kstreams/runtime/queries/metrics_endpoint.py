"""MetricsEndpoint: a client's metrics served over HTTP for Prometheus to scrape.

With ``metrics.http.port`` set, ``KafkaStreams.start()`` starts one and ``close()`` stops it:
``GET /metrics`` answers the client's metrics in Prometheus' text exposition format (version
0.0.4); every other path is 404 and every other method 405. Binding, serving and stopping are
``HttpEndpoint``'s (the standard library's ``ThreadingHTTPServer``), with its guarantees: the port
is bound in ``start()`` (a port in use fails the start with a ConfigException naming it), and is
released when ``stop()`` returns. Port 0 binds a free port; ``url`` says which.

Threads: one daemon thread, ``<client.id>-MetricsEndpoint``, accepts connections; each connection
runs on its own daemon thread (bounded in number, idle ones timed out: ``HttpEndpoint``) and calls
``render`` (which must be thread-safe: ``KafkaStreams.metrics_prometheus`` is). ``start`` and
``stop`` are called by the client's lifecycle methods, never concurrently.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kstreams.runtime.queries.http_endpoint import EndpointHandler, HttpEndpoint

__all__ = ["CONTENT_TYPE", "METRICS_PATH", "MetricsEndpoint"]

logger = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class MetricsEndpoint(HttpEndpoint):
    """Serves ``render()`` at ``http://<host>:<port>/metrics`` while started."""

    _serves = "metrics"
    _entry_path = METRICS_PATH
    _config_what = "metrics"
    _config_prefix = "metrics.http"

    def __init__(self, render: Callable[[], str], host: str, port: int, name: str, **bounds: float) -> None:
        """``bounds``: HttpEndpoint's ``idle_timeout_s`` and ``max_connections``."""
        super().__init__(host, port, name, **bounds)  # type: ignore[arg-type]
        self._render = render

    @property
    def url(self) -> str | None:
        """The URL of the metrics while started (with the bound port), else None."""
        base = self.base_url
        return None if base is None else base + METRICS_PATH

    def _handler(self) -> type[EndpointHandler]:
        render = self._render

        class Handler(EndpointHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] != METRICS_PATH:
                    self.send_error(404, f"Not found: the metrics are at {METRICS_PATH}")
                    return
                try:
                    body = render().encode("utf-8")
                except Exception:
                    # A scrape must never take the client down; the scraper sees the failure.
                    logger.exception("Rendering the metrics for %s failed", METRICS_PATH)
                    self.send_error(500, "Rendering the metrics failed; see the application's log")
                    return
                self.send_answer(200, CONTENT_TYPE, body)

            def do_POST(self) -> None:
                self.send_error(405, "Only GET is supported")

            do_PUT = do_DELETE = do_POST

            def log_message(self, format: str, *args: object) -> None:
                # One line per scrape would flood the application's log: DEBUG only.
                logger.debug("metrics endpoint: " + format, *args)

        return Handler
