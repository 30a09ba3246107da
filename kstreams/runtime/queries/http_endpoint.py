"""HttpEndpoint: the skeleton of a client's small HTTP servers (metrics, interactive queries).

A subclass says what it serves (its request handler, its name in messages, its config keys); this
class binds the port and runs a ``ThreadingHTTPServer`` of the standard library (``EndpointServer``),
so no extra service or package is needed.

Guarantees: the port is bound in ``start()`` (a port in use fails the start with a
ConfigException naming the config keys, not later in the background); after ``stop()`` returns
the port is released, no request is being served and none will be: every open connection is shut
down and its handler thread has ended (within the stop timeout), so no answer and no log line
comes after it. Port 0 binds a free port; ``base_url`` says which.

Bounds: a connection that sends nothing for ``idle_timeout_s`` is closed, and at most
``max_connections`` connections are served at once, each on its own handler thread; one more is
answered 503 at once and closed. A crowd of idle or half-open connections therefore holds a bounded
number of threads for a bounded time. Connection errors (a peer that went away, a broken pipe) are
the peer's: they are logged at DEBUG, never printed.

Threads: one daemon thread, named by the subclass's owner, accepts connections; each connection is
served on a daemon thread ``<name>-handler``. ``start`` and ``stop`` are called by the client's
lifecycle methods, never concurrently. ``EndpointServer._lock`` guards its map of open connections;
it is a leaf, held only to read or change the map.
"""

from __future__ import annotations

import abc
import logging
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kstreams.errors import ConfigException

__all__ = ["IDLE_TIMEOUT_S", "MAX_CONNECTIONS", "EndpointHandler", "EndpointServer", "HttpEndpoint"]

logger = logging.getLogger(__name__)

# A scraper or a query client sends its request right after connecting: 10 s of silence is a
# connection someone forgot (or a half-open one), not a slow client.
IDLE_TIMEOUT_S = 10.0
# Scrapes and queries are short; more connections at once than this are a crowd, not a load.
MAX_CONNECTIONS = 32

_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
)


class EndpointServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer with the bounds and the stop of the module docstring."""

    daemon_threads = True
    # socketserver's 5 makes a burst of connections wait a SYN retransmit (1 s) each beyond it.
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        name: str,
        idle_timeout_s: float,
        max_connections: int,
    ) -> None:
        super().__init__(address, handler)
        self.idle_timeout_s = idle_timeout_s
        self.stopping = False
        self._name = name
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        self._open: dict[socket.socket, threading.Thread] = {}

    def process_request(self, request: Any, client_address: Any) -> None:
        if self.stopping or not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        thread = threading.Thread(
            target=self._serve, args=(request, client_address), name=f"{self._name}-handler", daemon=True
        )
        with self._lock:
            self._open[request] = thread
        thread.start()

    def _serve(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._open.pop(request, None)
            self._slots.release()

    def _refuse(self, request: Any) -> None:
        try:
            request.sendall(_BUSY)
        except OSError:
            pass  # the peer is gone already: nothing to tell it
        self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if self.stopping or isinstance(exc, OSError):
            # The peer went away (reset, broken pipe) or the endpoint is stopping: not a fault here.
            logger.debug("Connection from %s ended: %r", client_address, exc)
        else:
            logger.error("Serving a request from %s failed", client_address, exc_info=exc)

    def close_connections(self, timeout: float | None) -> bool:
        """Shut every open connection down and wait for its handler; True if all ended in time."""
        self.stopping = True
        with self._lock:
            open_connections = dict(self._open)
        for connection in open_connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by its handler or its peer
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in open_connections.values():
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in open_connections.values())


class EndpointHandler(BaseHTTPRequestHandler):
    """The base of the endpoints' request handlers: the idle timeout, and no request after stop."""

    server: EndpointServer

    def setup(self) -> None:
        super().setup()
        # The server's idle timeout, on this connection's socket (StreamRequestHandler's class-wide
        # ``timeout`` cannot differ between endpoints).
        self.connection.settimeout(self.server.idle_timeout_s)

    def handle_one_request(self) -> None:
        if self.server.stopping:
            self.close_connection = True
            return
        super().handle_one_request()

    def send_answer(self, status: int, content_type: str, body: bytes) -> None:
        """Write one answer, unless the endpoint is stopping (then the connection just closes)."""
        if self.server.stopping:
            self.close_connection = True
            return
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class HttpEndpoint(abc.ABC):
    """Serves ``_handler()`` at ``host:port`` while started, on a thread called ``name``."""

    # What the endpoint serves, as its log lines say ("metrics"), and the path they point at.
    _serves: str
    _entry_path: str
    # How ConfigException names it ("queries") and its config keys' prefix ("query.http").
    _config_what: str
    _config_prefix: str

    def __init__(
        self,
        host: str,
        port: int,
        name: str,
        *,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self._host = host
        self._port = port
        self._name = name
        self.idle_timeout_s = idle_timeout_s
        self.max_connections = max_connections
        self._server: EndpointServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int] | None:
        """(host, bound port) while started, else None."""
        server = self._server
        if server is None:
            return None
        return str(server.server_address[0]), int(server.server_address[1])

    @property
    def base_url(self) -> str | None:
        """``http://<host>:<bound port>`` while started, else None."""
        address = self.address
        if address is None:
            return None
        host, port = address
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}"

    @abc.abstractmethod
    def _handler(self) -> type[EndpointHandler]:
        """The request handler class, made at each start (it may close over the endpoint)."""

    def start(self) -> None:
        """Bind the port and start serving; idempotent. Raises ConfigException when the address
        cannot be bound (in use, or not an address of this host)."""
        if self._server is not None:
            return
        try:
            server = EndpointServer(
                (self._host, self._port),
                self._handler(),
                self._name,
                self.idle_timeout_s,
                self.max_connections,
            )
        except OSError as exc:
            prefix = self._config_prefix
            raise ConfigException(
                f"Cannot serve {self._config_what} at {self._host}:{self._port} ({prefix}.host, "
                f"{prefix}.port): {exc}. Choose a free port, 0 for any free port, or unset {prefix}.port."
            ) from exc
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.2}, name=self._name, daemon=True
        )
        self._thread.start()
        logger.info("Serving %s at %s%s", self._serves, self.base_url, self._entry_path)

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop serving, end every connection and release the port; idempotent."""
        server, thread = self._server, self._thread
        if server is None:
            return
        server.stopping = True  # from now on no connection is taken and no answer written
        server.shutdown()  # waits for serve_forever to return
        if not server.close_connections(timeout):
            logger.warning("Some %s connections did not end within %ss of the stop", self._serves, timeout)
        server.server_close()
        if thread is not None:
            thread.join(timeout)
        self._server = None
        self._thread = None
        logger.info("Stopped serving %s", self._serves)
