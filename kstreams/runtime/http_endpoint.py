"""HttpEndpoint: the skeleton of a client's small HTTP servers (metrics, interactive queries).

A subclass says what it serves (its request handler, its name in messages, its config keys); this
class binds the port and runs the standard library's ``ThreadingHTTPServer``, so no extra service
or package is needed.

Guarantees: the port is bound in ``start()`` (a port in use fails the start with a
ConfigException naming the config keys, not later in the background); after ``stop()`` returns
the port is released and no request is being served. Port 0 binds a free port; ``base_url``
says which.

Threads: one daemon thread, named by the subclass's owner, accepts connections; each request runs
on its own short-lived daemon thread. ``start`` and ``stop`` are called by the client's lifecycle
methods, never concurrently.
"""

from __future__ import annotations

import abc
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kstreams.errors import ConfigException

__all__ = ["HttpEndpoint"]

logger = logging.getLogger(__name__)


class HttpEndpoint(abc.ABC):
    """Serves ``_handler()`` at ``host:port`` while started, on a thread called ``name``."""

    # What the endpoint serves, as its log lines say ("metrics"), and the path they point at.
    _serves: str
    _entry_path: str
    # How ConfigException names it ("queries") and its config keys' prefix ("query.http").
    _config_what: str
    _config_prefix: str

    def __init__(self, host: str, port: int, name: str) -> None:
        self._host = host
        self._port = port
        self._name = name
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str | None:
        """``http://<host>:<bound port>`` while started, else None."""
        server = self._server
        if server is None:
            return None
        host, port = str(server.server_address[0]), int(server.server_address[1])
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}"

    @abc.abstractmethod
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class, made at each start (it may close over the endpoint)."""

    def start(self) -> None:
        """Bind the port and start serving; idempotent. Raises ConfigException when the address
        cannot be bound (in use, or not an address of this host)."""
        if self._server is not None:
            return
        try:
            server = ThreadingHTTPServer((self._host, self._port), self._handler())
        except OSError as exc:
            prefix = self._config_prefix
            raise ConfigException(
                f"Cannot serve {self._config_what} at {self._host}:{self._port} ({prefix}.host, "
                f"{prefix}.port): {exc}. Choose a free port, 0 for any free port, or unset {prefix}.port."
            ) from exc
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.2}, name=self._name, daemon=True
        )
        self._thread.start()
        logger.info("Serving %s at %s%s", self._serves, self.base_url, self._entry_path)

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
        logger.info("Stopped serving %s", self._serves)
