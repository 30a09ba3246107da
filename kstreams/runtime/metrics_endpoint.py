"""MetricsEndpoint: a client's metrics served over HTTP for Prometheus to scrape.

With ``metrics.http.port`` set, ``KafkaStreams.start()`` starts one and ``close()`` stops it:
``GET /metrics`` answers the client's metrics in Prometheus' text exposition format (version
0.0.4); every other path is 404 and every other method 405. It is the standard library's
``ThreadingHTTPServer``, so no extra service or package is needed.

Guarantees: the port is bound in ``start()`` (a port in use fails the start with a
ConfigException naming it, not later in the background); after ``stop()`` returns the port is
released and no request is being served. Port 0 binds a free port; ``url`` says which.

Threads: one daemon thread, ``<client.id>-MetricsEndpoint``, accepts connections; each request
runs on its own short-lived daemon thread and calls ``render`` (which must be thread-safe:
``KafkaStreams.metrics_prometheus`` is). ``start`` and ``stop`` are called by the client's
lifecycle methods, never concurrently.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kstreams.errors import ConfigException

__all__ = ["CONTENT_TYPE", "METRICS_PATH", "MetricsEndpoint"]

logger = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class MetricsEndpoint:
    """Serves ``render()`` at ``http://<host>:<port>/metrics`` while started."""

    def __init__(self, render: Callable[[], str], host: str, port: int, name: str) -> None:
        self._render = render
        self._host = host
        self._port = port
        self._name = name
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str | None:
        """The URL of the metrics while started (with the bound port), else None."""
        server = self._server
        if server is None:
            return None
        host, port = str(server.server_address[0]), int(server.server_address[1])
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}{METRICS_PATH}"

    def start(self) -> None:
        """Bind the port and start serving; idempotent. Raises ConfigException when the address
        cannot be bound (in use, or not an address of this host)."""
        if self._server is not None:
            return
        render = self._render

        class Handler(BaseHTTPRequestHandler):
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
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                self.send_error(405, "Only GET is supported")

            do_PUT = do_DELETE = do_POST

            def log_message(self, format: str, *args: object) -> None:
                # One line per scrape would flood the application's log: DEBUG only.
                logger.debug("metrics endpoint: " + format, *args)

        try:
            server = ThreadingHTTPServer((self._host, self._port), Handler)
        except OSError as exc:
            raise ConfigException(
                f"Cannot serve metrics at {self._host}:{self._port} (metrics.http.host, metrics.http.port): "
                f"{exc}. Choose a free port, 0 for any free port, or unset metrics.http.port."
            ) from exc
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.2}, name=self._name, daemon=True
        )
        self._thread.start()
        logger.info("Serving metrics at %s", self.url)

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop serving and release the port; idempotent."""
        server, thread = self._server, self._thread
        if server is None:
            return
        server.shutdown()  # waits for serve_forever to return
        server.server_close()
        if thread is not None:
            thread.join(timeout)
        self._server = None
        self._thread = None
        logger.info("Stopped serving metrics")
