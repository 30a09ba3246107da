"""QueryEndpoint: a client's state stores served over HTTP, with lookups routed to the owning client.

With ``query.http.port`` set, ``KafkaStreams.start()`` starts one and ``close()`` stops it. Binding,
serving and stopping are ``HttpEndpoint``'s, as for the metrics endpoint (the standard library's
``ThreadingHTTPServer`` on one daemon thread, the port bound in ``start()``); it answers:

- ``GET /stores/<store>/keys/<key>``: the key's value as JSON (404 when the key has none). The key
  is looked up where it lives: ``query_metadata_for_key`` names the active client; when that is
  another client (another ``application.server``) the request is forwarded there. A forwarded
  request carries ``?forwarded=true`` and is answered locally, so requests never loop.
- ``GET /stores/<store>/range?from=<k>&to=<k>`` (both optional): ``[{"key": k, "value": v}, ...]``
  over the whole application: this client's instances plus, forwarded with ``?scope=local``, those
  of every other client holding the store actively; each client's part is in key order.

Keys in URLs are text: a key is the JSON value the text parses to when the store's key serde
accepts it (``42`` for a long key), otherwise the text itself; a key the serde takes in neither
form (``abc``, ``3.5`` or ``2**70`` for a long key, ``null``) is the client's mistake: a 400, logged
at DEBUG at most. Values are returned as JSON
(bytes as UTF-8 text, other objects by ``str``). Errors are JSON ``{"error": ...}`` with 404
(unknown store or key), 400 (bad request), 503 (the store or its metadata is not available now:
retry), 502 (the owning client did not answer).

Threads: one daemon thread, ``<client.id>-QueryEndpoint``, accepts connections; each connection
runs on its own daemon thread (bounded in number, idle ones timed out: ``HttpEndpoint``) and calls
the client's query methods, which are thread-safe. ``start`` and ``stop`` are called by the
client's lifecycle methods, never concurrently.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any, Protocol

from kstreams.errors import InvalidStateStoreException, UnknownStateStoreException
from kstreams.queries import HostInfo, KeyQueryMetadata, StreamsMetadata
from kstreams.runtime.queries.http_endpoint import EndpointHandler, HttpEndpoint

__all__ = ["FORWARD_TIMEOUT_S", "QueryEndpoint", "StoreQueries"]

logger = logging.getLogger(__name__)

FORWARD_TIMEOUT_S = 10.0
_JSON = "application/json"


class StoreQueries(Protocol):
    """What the endpoint asks of the client (KafkaStreams implements it)."""

    def query_metadata_for_key(self, store_name: str, key: Any, key_serializer: Any = None) -> Any: ...

    def streams_metadata_for_store(self, store_name: str) -> list[StreamsMetadata]: ...

    def store(self, name: Any, timestamped: bool = False) -> Any: ...

    def store_key_serde(self, store_name: str) -> Any: ...


class _Answer(Exception):
    """An HTTP answer other than 200, raised from deep inside a request."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class QueryEndpoint(HttpEndpoint):
    """Serves the stores of ``queries`` at ``http://<host>:<port>/stores/...`` while started;
    ``this_host`` is the client's application.server (None: it forwards nothing)."""

    _serves = "interactive queries"
    _entry_path = "/stores/"
    _config_what = "queries"
    _config_prefix = "query.http"

    def __init__(
        self,
        queries: StoreQueries,
        this_host: HostInfo | None,
        host: str,
        port: int,
        name: str,
        **bounds: float,
    ) -> None:
        """``bounds``: HttpEndpoint's ``idle_timeout_s`` and ``max_connections``."""
        super().__init__(host, port, name, **bounds)  # type: ignore[arg-type]
        self._queries = queries
        self._this_host = this_host

    @property
    def url(self) -> str | None:
        """The base URL while started (with the bound port), else None."""
        return self.base_url

    def _handler(self) -> type[EndpointHandler]:
        answer = self.answer

        # Only GET: other methods get BaseHTTPRequestHandler's 501.
        class Handler(EndpointHandler):
            def do_GET(self) -> None:
                status, body = answer(self.path)
                self.send_answer(status, _JSON, json.dumps(body, default=_jsonable).encode("utf-8"))

            def log_message(self, format: str, *args: object) -> None:
                logger.debug("query endpoint: " + format, *args)

        return Handler

    # -- requests ---------------------------------------------------------------------------

    def answer(self, raw_path: str) -> tuple[int, Any]:
        """(status, JSON body) for one GET of ``raw_path``."""
        url = urllib.parse.urlsplit(raw_path)
        query = urllib.parse.parse_qs(url.query)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/") if p]
        try:
            if len(parts) == 4 and parts[0] == "stores" and parts[2] == "keys":
                forwarded = query.get("forwarded", ["false"])[0] == "true"
                return 200, self._get(parts[1], parts[3], forwarded)
            if len(parts) == 3 and parts[0] == "stores" and parts[2] == "range":
                local = query.get("scope", ["all"])[0] == "local"
                bounds = (query.get("from", [None])[0], query.get("to", [None])[0])
                return 200, self._range(parts[1], bounds, local, url.query)
            raise _Answer(404, "Not found: use /stores/<store>/keys/<key> or /stores/<store>/range")
        except _Answer as exc:
            return exc.status, {"error": str(exc)}
        except UnknownStateStoreException as exc:
            return 404, {"error": str(exc)}
        except InvalidStateStoreException as exc:
            return 503, {"error": str(exc)}
        except Exception as exc:
            # A query must never take the client down; the caller sees the failure.
            logger.exception("Answering %s failed", raw_path)
            return 500, {"error": f"{type(exc).__name__}: {exc}"}

    def _get(self, store_name: str, key_text: str, forwarded: bool) -> Any:
        serde = self._queries.store_key_serde(store_name)
        key = _parse_key(key_text, serde, store_name)
        if not forwarded and self._this_host is not None:
            metadata = self._queries.query_metadata_for_key(store_name, key, serde)
            if metadata is None:
                raise _Answer(404, f"No state store named {store_name!r} is partitioned by key")
            if metadata == KeyQueryMetadata.NOT_AVAILABLE or metadata.active_host == HostInfo.UNAVAILABLE:
                raise _Answer(503, f"Where key {key_text!r} of {store_name!r} lives is not known yet; retry")
            if metadata.active_host != self._this_host:
                path = f"/stores/{_quote(store_name)}/keys/{_quote(key_text)}?forwarded=true"
                return _forward(metadata.active_host, path)
        value = self._queries.store(store_name).get(key)
        if value is None:
            raise _Answer(404, f"Key {key_text!r} has no value in store {store_name!r}")
        return value

    def _range(
        self, store_name: str, bounds: tuple[str | None, str | None], local: bool, raw_query: str
    ) -> Any:
        serde = self._queries.store_key_serde(store_name)
        low, high = (None if b is None else _parse_key(b, serde, store_name) for b in bounds)
        found = [{"key": k, "value": v} for k, v in self._queries.store(store_name).range(low, high)]
        if local or self._this_host is None:
            return found
        others = {
            m.host_info
            for m in self._queries.streams_metadata_for_store(store_name)
            if store_name in m.state_store_names and m.host_info != self._this_host
        }
        params = urllib.parse.parse_qs(raw_query)
        params["scope"] = ["local"]
        path = f"/stores/{_quote(store_name)}/range?{urllib.parse.urlencode(params, doseq=True)}"
        for host in sorted(others):
            found += _forward(host, path)
        return found


def _parse_key(text: str, serde: Any, store_name: str) -> Any:
    """The key a URL's text stands for: its JSON value when the store's key serde takes it, else
    the text (see the module docstring). A 400 when the serde takes neither, or the key is null:
    the client asked for a key the store cannot hold."""
    serialize: Callable[[str | None, Any], Any] | None = getattr(serde, "serialize", None)
    if serialize is None:
        return text
    try:
        candidates = [json.loads(text), text]
    except ValueError:
        candidates = [text]
    refusal: Exception | None = None
    for candidate in candidates:
        if candidate is None:
            continue  # no store holds a null key
        try:
            serialize(f"{store_name}-query", candidate)
        except Exception as exc:  # the serde's own error says what it expects
            refusal = exc
            continue
        return candidate
    reason = f": {refusal}" if refusal is not None else ""
    raise _Answer(
        400, f"{text!r} is not a key of store {store_name!r}: its key serde does not take it{reason}"
    )


def _forward(host: HostInfo, path: str) -> Any:
    url = f"http://{host}{path}"
    try:
        with urllib.request.urlopen(url, timeout=FORWARD_TIMEOUT_S) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", str(exc))
        except ValueError:
            message = str(exc)
        raise _Answer(exc.code, f"{host}: {message}") from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise _Answer(502, f"The client at {host} did not answer {path}: {exc}") from exc


def _quote(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)
