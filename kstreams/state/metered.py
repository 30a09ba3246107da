"""Metered layers: the outermost, typed face of a store. They turn keys and values into bytes with
the store's serdes (below them every layer holds bytes) and back, and hand typed entries to a cache
flush listener.

Serdes see the store's changelog topic name, ``<application.id>-<store>-changelog``, as Kafka's do.
A serde left None is filled in at init with the application's ``default.key.serde`` /
``default.value.serde`` (or earlier with ``with_default_serdes``); with neither, keys and values are
bytes as they are.

Every write (and flush and close) holds ``query_lock``, and interactive-query views hold it while
they read, so a query never sees a store in the middle of a change, whichever thread writes.

Metrics: Kafka's ``stream-state-metrics``, recorded when ``metrics.recording.level`` is DEBUG or
TRACE. Each operation has ``<op>-rate`` (calls per second), ``<op>-latency-avg`` and
``<op>-latency-max`` (in nanoseconds, as in Kafka; a call that raises is timed too):

- key-value: ``put``, ``put-if-absent``, ``put-all``, ``get``, ``delete``, ``range`` (and
  ``reverse_range``), ``all``, ``prefix-scan``;
- window: ``put``, ``fetch`` (every read);
- session: ``put``, ``remove``, ``fetch`` (every read);
- all three: ``flush`` and ``restore``. As in Kafka, ``restore`` times ``init``, where the store
  registers for restoration; the restore thread's progress is in ``stream-state-updater-metrics``.

A read returning an iterator is timed from the call until the iterator is exhausted or closed, as
Kafka's metered iterators are (one never started is not counted). Tags: ``thread-id``,
``task-id`` and ``<scope>-state-id`` = the store's name, where the scope is the supplier's
``metrics_scope`` (``in-memory``, ``rocksdb``, ``in-memory-window``, ``rocksdb-window``,
``in-memory-session``, ``rocksdb-session``). ``thread-id`` holds the client id, not a stream
thread's name as in Kafka: tasks here are not pinned to a stream thread, so a thread-scoped tag
would split one store's figures across threads and change as tasks move.

Whether to record is decided once, at ``init``: at INFO (or with no registry, as in the test
driver) the layer's methods stay the plain class methods and metering costs nothing per call; at
DEBUG timed variants are bound over them as instance attributes. ``close`` removes the store's
metrics and unbinds the timed variants, so a task's store metrics go with the task. Reads by
interactive queries are recorded on the querying thread (see ``metrics.py`` on races).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from kstreams._native.store_access import CachedKeyValueAccess, CachedWindowAccess, StoreLock
from kstreams.errors import SerializationException
from kstreams.serdes import Serdes, serde_from_config
from kstreams.state.caching import CachingKeyValueStore, CachingWindowStore
from kstreams.state.changelogging import ChangeLoggingKeyValueStore, ChangeLoggingWindowStore
from kstreams.state.layer import SessionLayer, StoreLayer, WindowLayer
from kstreams.state.store import (
    FlushListener,
    KeyValueStore,
    SessionStore,
    StateStore,
    StateStoreContext,
    WindowedKey,
    WindowStore,
    flush_listener_with_headers,
)

if TYPE_CHECKING:
    from kstreams.metrics import MetricsRegistry, Sensor

__all__ = ["MeteredKeyValueStore", "MeteredSessionStore", "MeteredWindowStore"]

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

STATE_METRICS_GROUP = "stream-state-metrics"
_clock_ns = time.perf_counter_ns  # monotonic, as Kafka's Time.nanoseconds()


def _timed(operation: Callable[..., T], sensor: Sensor) -> Callable[..., T]:
    """``operation``, recording each call's latency in ns (also of a call that raises)."""
    record = sensor.record

    def timed(*args: Any, **kwargs: Any) -> T:
        start = _clock_ns()
        try:
            return operation(*args, **kwargs)
        finally:
            record(_clock_ns() - start)

    return timed


def _timed_iteration(operation: Callable[..., Iterator[T]], sensor: Sensor) -> Callable[..., Iterator[T]]:
    """``operation`` returning an iterator, recording the latency from the call until the
    iterator is exhausted or closed (Kafka's metered iterators record at close)."""
    record = sensor.record

    def timed(*args: Any, **kwargs: Any) -> Iterator[T]:
        start = _clock_ns()
        return _recorded_at_end(operation(*args, **kwargs), record, start)

    return timed


def _recorded_at_end(entries: Iterator[T], record: Callable[[float], None], start: int) -> Iterator[T]:
    try:
        yield from entries
    finally:
        record(_clock_ns() - start)


# Keys whose serialized form may be remembered by identity: a key of these types cannot change.
_IMMUTABLE_KEYS = frozenset({str, bytes, int})

# Change-logging layer type -> (the caching layer type of the same store kind, the accessor that
# goes straight through the change-logging layer when a store has no caching layer).
_DIRECT_ACCESS: dict[type, tuple[type, type]] = {
    ChangeLoggingKeyValueStore: (CachingKeyValueStore, CachedKeyValueAccess),
    ChangeLoggingWindowStore: (CachingWindowStore, CachedWindowAccess),
}

# No key serialized yet (an object no key is).
_NO_KEY: tuple[Any, bytes] = (object(), b"")


class _Metered(StoreLayer, Generic[K, V]):
    """Serdes, locking and metrics shared by all metered layers."""

    # (method, Kafka operation, returns an iterator) for each method metered at DEBUG.
    _METERED: ClassVar[tuple[tuple[str, str, bool], ...]] = (("flush", "flush", False),)
    # What follows "in-memory" / "rocksdb" in the default metrics scope.
    _SCOPE_SUFFIX: ClassVar[str] = ""

    def __init__(
        self,
        wrapped: StateStore,
        key_serde: Any = None,
        value_serde: Any = None,
        metrics_scope: str | None = None,
    ) -> None:
        super().__init__(wrapped)
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.query_lock = StoreLock()
        self._topic: str | None = None
        # The supplier's scope (builders pass it); a layer made directly derives it the same way.
        self.metrics_scope = metrics_scope or (
            ("rocksdb" if wrapped.persistent else "in-memory") + self._SCOPE_SUFFIX
        )
        # The registry and tags of the metrics registered at init (None when not recording).
        self._metrics: MetricsRegistry | None = None
        self._metric_tags: dict[str, str] = {}
        # Whether get/fetch and put are bound to the C accessor (``_bind_point_access``).
        self._point_bound = False
        # The key serialized last and its bytes, for keys of immutable types: a processor's get and
        # put of one key serialize it once. One tuple, replaced whole, since a query may serialize
        # from another thread meanwhile.
        self._last_key: tuple[Any, bytes] = _NO_KEY

    @property
    def changelog_topic(self) -> str | None:
        """The topic name the serdes see (known after init)."""
        return self._topic

    def with_default_serdes(self, key_serde: Any, value_serde: Any) -> None:
        """Use these serdes where the store was given none (the application's default serdes)."""
        if self.key_serde is None:
            self.key_serde = key_serde
        if self.value_serde is None:
            self.value_serde = value_serde
        self._last_key = _NO_KEY
        if self._point_bound:
            self._bind_point_access()  # the accessor knows the serdes it was made with

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._topic = f"{context.application_id}-{self.wrapped.name}-changelog"
        self._last_key = _NO_KEY
        if self.key_serde is None or self.value_serde is None:
            # As Kafka does: a store given no serde uses the application's default serde, if set.
            configs = context.app_configs
            if isinstance(configs, Mapping):
                self.with_default_serdes(
                    serde_from_config(configs, "default.key.serde"),
                    serde_from_config(configs, "default.value.serde"),
                )
        self._unmeter()  # a store reopened (a task resetting its stores) starts over
        self._unbind_point_access()
        registry = context.metrics
        if registry is None or not registry.should_record("DEBUG"):
            self.wrapped.init(context, root)
            self._bind_point_access()
            return
        restore = self._meter(registry, context)
        start = _clock_ns()
        try:
            self.wrapped.init(context, root)
        except BaseException:
            self._unmeter()  # the task does not close a store that failed to open
            raise
        restore.record(_clock_ns() - start)

    # (the metered store class, its point read, its caching layer's class): which methods
    # ``_bind_point_access`` binds and how it finds the accessor; None: no point access (sessions).
    _POINT_ACCESS: ClassVar[tuple[type, str, type] | None] = None

    def _bind_point_access(self) -> None:
        """Bind the point read (``get``/``fetch``) and ``put`` to the C accessor's: Processor API
        code calls them itself, per record, and the accessor does the same reads and writes in one
        C call each (see ``record_access``), through the caching layer's cache when the store has
        one. An interactive query's read from another thread takes the same path as the layers'
        own read: the task's cache, and on a miss the caching layer's ``read_through``, which does
        not fill the cache for a query. With store metrics (DEBUG) the timed methods are bound
        instead."""
        self._unbind_point_access()
        spec = self._POINT_ACCESS
        if spec is None:
            return
        access = self._cached_access(*spec)
        if access is None:
            return
        # Instance attributes, as the timed methods are: processor code then calls C directly.
        for method in (spec[1], "put"):
            setattr(self, method, getattr(access, method))
        self._point_bound = True

    def _unbind_point_access(self) -> None:
        if self._point_bound:
            for method in (self._POINT_ACCESS[1], "put"):  # type: ignore[index]
                delattr(self, method)
            self._point_bound = False

    def _meter(self, registry: MetricsRegistry, context: StateStoreContext) -> Sensor:
        """Register this store's metrics and bind the timed variants of its methods; returns the
        restore sensor."""
        group = STATE_METRICS_GROUP
        tags = {
            "thread-id": str(context.client_id),
            "task-id": str(context.task_id),
            f"{self.metrics_scope}-state-id": self.wrapped.name,
        }
        self._metrics, self._metric_tags = registry, tags
        sensors: dict[str, Sensor] = {}

        def sensor(operation: str) -> Sensor:
            found = sensors.get(operation)
            if found is None:
                found = sensors[operation] = registry.sensor(
                    f"{operation}-latency", group, tags, total=False, rate=False, avg=True, max_=True
                )
                registry.gauge(f"{operation}-rate", group, tags, found.rate)
            return found

        for method, operation, iterates in self._METERED:
            plain = getattr(type(self), method).__get__(self)
            timed = (
                _timed_iteration(plain, sensor(operation)) if iterates else _timed(plain, sensor(operation))
            )
            setattr(self, method, timed)
        return sensor("restore")

    def _unmeter(self) -> None:
        """Unbind the timed methods and remove this store's metrics, if it recorded any."""
        registry, tags = self._metrics, self._metric_tags
        if registry is None:
            # Nothing bound. Not even a look at __dict__ here: materializing the instance dict
            # makes every attribute access of the store slower (CPython's inline values).
            return
        for method, _, _ in self._METERED:
            delattr(self, method)
        self._metrics, self._metric_tags = None, {}
        registry.remove(lambda m: m.group == STATE_METRICS_GROUP and m.tags == tags)

    def flush(self) -> None:
        with self.query_lock:
            self.wrapped.flush()

    def close(self) -> None:
        try:
            with self.query_lock:
                self.wrapped.close()
        finally:
            self._unmeter()
            self._unbind_point_access()

    def _cached_access(self, base: type, read: str, caching_type: type) -> Any:
        """The C accessor of this store's ``read`` and ``put`` over the caching layer right below
        (see ``_Caching.record_access``), or, without a caching layer, straight through the
        change-logging layer below (the accessor's direct form); None where the layers must act:
        store metrics are recorded (DEBUG: the timed methods), a subclass reads or writes its own
        way, the next layer is neither, the store is not open in a task."""
        below = self.wrapped
        if (
            self._metrics is not None
            or getattr(type(self), read) is not getattr(base, read)
            or type(self).put is not base.put  # type: ignore[attr-defined]
        ):
            return None
        key_serde = self.key_serde
        kinds = {
            "string_keys": key_serde is Serdes.string(),
            "bytes_keys": key_serde is None or key_serde is Serdes.bytes(),
            "stamped_longs": bool(getattr(self, "timestamped", False)) and self.value_serde is Serdes.long(),
        }
        plain_longs = not getattr(self, "timestamped", False) and self.value_serde is Serdes.long()
        if type(below) is caching_type:
            return below.record_access(self, **kinds)  # type: ignore[attr-defined]
        direct = _DIRECT_ACCESS.get(type(below))
        if direct is None or direct[0] is not caching_type:
            return None
        # The change-logging layer's read only passes the call on: read below it.
        reader = getattr(below.wrapped, read)  # type: ignore[attr-defined]  # a change-logging layer
        return direct[1](
            self, None, None, None, "", direct=below, direct_read=reader, plain_longs=plain_longs, **kinds
        )

    def raw_key(self, key: K) -> bytes:
        """The bytes ``key`` is stored under (its serialized form)."""
        last = self._last_key
        if last[0] is key:
            return last[1]
        serde = self.key_serde
        data = key if serde is None else serde.serialize(self._topic, key)
        if isinstance(data, bytes):
            if type(key) in _IMMUTABLE_KEYS:
                self._last_key = (key, data)
            return data
        if isinstance(data, (bytearray, memoryview)):
            return bytes(data)
        raise SerializationException(
            f"Store {self.wrapped.name}: the key {key!r} became {type(data).__name__}, not bytes. Give the "
            "store a key serde (Materialized / Stores builders) or set default.key.serde."
        )

    def _value_bytes(self, value: V | None) -> bytes | None:
        if value is None:
            return None
        serde = self.value_serde
        data = value if serde is None else serde.serialize(self._topic, value)
        if data is None or isinstance(data, bytes):
            return data
        if isinstance(data, (bytearray, memoryview)):
            return bytes(data)
        raise SerializationException(
            f"Store {self.wrapped.name}: the value {value!r} became {type(data).__name__}, not bytes. Give "
            "the store a value serde (Materialized / Stores builders) or set default.value.serde."
        )

    def _key(self, data: bytes) -> K:
        serde = self.key_serde
        return data if serde is None else serde.deserialize(self._topic, data)  # type: ignore[return-value]

    def _value(self, data: bytes | None) -> V | None:
        if data is None:
            return None
        serde = self.value_serde
        return data if serde is None else serde.deserialize(self._topic, data)  # type: ignore[return-value]

    def _windowed(self, windowed: WindowedKey[bytes]) -> WindowedKey[K]:
        return WindowedKey(self._key(windowed.key), windowed.start, windowed.end)

    def _set_windowed_flush_listener(self, listener: FlushListener | None) -> bool:
        """Hand the listener typed windows (or sessions) and values of every entry the cache below
        flushes; True when there is such a cache."""
        if listener is None:
            return self.wrapped.set_flush_listener(None)
        listener = flush_listener_with_headers(listener)

        def forward(
            windowed: WindowedKey[bytes],
            new: bytes | None,
            old: bytes | None,
            timestamp: int,
            headers: Any = None,
        ) -> None:
            listener(self._windowed(windowed), self._value(new), self._value(old), timestamp, headers)

        return self.wrapped.set_flush_listener(forward)


class MeteredKeyValueStore(_Metered[K, V], KeyValueStore[K, V]):
    """The typed key-value store processors and queries use."""

    wrapped: KeyValueStore[bytes, bytes]
    _METERED = (
        *_Metered._METERED,
        ("put", "put", False),
        ("put_if_absent", "put-if-absent", False),
        ("put_all", "put-all", False),
        ("get", "get", False),
        ("delete", "delete", False),
        ("range", "range", True),
        ("reverse_range", "range", True),
        ("all", "all", True),
        ("prefix_scan", "prefix-scan", True),
    )

    def set_flush_listener(self, listener: FlushListener | None) -> bool:
        if listener is None:
            return self.wrapped.set_flush_listener(None)
        listener = flush_listener_with_headers(listener)

        def forward(
            key: bytes, new: bytes | None, old: bytes | None, timestamp: int, headers: Any = None
        ) -> None:
            listener(self._key(key), self._value(new), self._value(old), timestamp, headers)

        return self.wrapped.set_flush_listener(forward)

    def record_access(self) -> tuple[Callable[[K], V | None], Callable[[K, V | None], None]]:
        """The ``(get, put)`` a processor calls per record: this store's own, or, over a caching
        layer, an accessor's doing the same in one C call each while the key and value are the
        common kinds and the entry is cached. Ask from the processor's ``init`` (the store is open
        then); with store metrics recorded (DEBUG), the timed methods."""
        access = self._cached_access(MeteredKeyValueStore, "get", CachingKeyValueStore)
        if access is not None:
            return access.get, access.put
        return self.get, self.put

    def record_update(
        self,
    ) -> Callable[[K, Any, int, Callable[[K, Any, Any], Any]], tuple[Any, Any, int]] | None:
        """The accessor's ``update(key, value, timestamp, apply)`` (one aggregation step in one C
        call on a cache hit: see ``CachedKeyValueAccess.update``) where ``record_access()`` hands
        out the accessor, else None."""
        access = self._cached_access(MeteredKeyValueStore, "get", CachingKeyValueStore)
        return None if access is None else access.update

    def get(self, key: K) -> V | None:
        return self._value(self.wrapped.get(self.raw_key(key)))

    def put(self, key: K, value: V | None) -> None:
        key_bytes = self.raw_key(key)
        value_bytes = self._value_bytes(value)
        with self.query_lock:
            self.wrapped.put(key_bytes, value_bytes)

    def put_if_absent(self, key: K, value: V) -> V | None:
        key_bytes = self.raw_key(key)
        value_bytes = self._value_bytes(value)
        with self.query_lock:
            previous = self.wrapped.put_if_absent(key_bytes, value_bytes)  # type: ignore[arg-type]
        return self._value(previous)

    def put_all(self, entries: list[tuple[K, V | None]]) -> None:
        serialized = [(self.raw_key(key), self._value_bytes(value)) for key, value in entries]
        with self.query_lock:
            self.wrapped.put_all(serialized)

    def delete(self, key: K) -> V | None:
        key_bytes = self.raw_key(key)
        with self.query_lock:
            old = self.wrapped.delete(key_bytes)
        return self._value(old)

    def range(self, from_key: K | None, to_key: K | None) -> Iterator[tuple[K, V]]:
        return self._typed(self.wrapped.range(self._bound(from_key), self._bound(to_key)))

    def reverse_range(self, from_key: K | None, to_key: K | None) -> Iterator[tuple[K, V]]:
        return self._typed(self.wrapped.reverse_range(self._bound(from_key), self._bound(to_key)))

    def all(self) -> Iterator[tuple[K, V]]:
        return self._typed(self.wrapped.all())

    def prefix_scan(self, prefix: Any, prefix_serializer: Any = None) -> Iterator[tuple[K, V]]:
        """Entries whose serialized key starts with the serialized prefix. The prefix is serialized
        with ``prefix_serializer`` (a Serde, or a callable returning bytes) when given, else with the
        key serde; bytes are used as they are."""
        if isinstance(prefix, bytes):
            prefix_bytes = prefix
        elif prefix_serializer is None:
            prefix_bytes = self.raw_key(prefix)
        elif hasattr(prefix_serializer, "serialize"):
            prefix_bytes = prefix_serializer.serialize(self._topic, prefix)
        else:
            prefix_bytes = prefix_serializer(prefix)
        return self._typed(self.wrapped.prefix_scan(prefix_bytes))

    def approximate_num_entries(self) -> int:
        return self.wrapped.approximate_num_entries()

    def _bound(self, key: K | None) -> bytes | None:
        return None if key is None else self.raw_key(key)

    def _typed(self, entries: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[K, V]]:
        key, value = self._key, self._value
        for key_bytes, value_bytes in entries:
            yield key(key_bytes), value(value_bytes)  # type: ignore[misc]


class MeteredWindowStore(_Metered[K, V], WindowLayer, WindowStore[K, V]):
    """The typed window store processors and queries use."""

    _SCOPE_SUFFIX = "-window"
    _METERED = (
        *_Metered._METERED,
        ("put", "put", False),
        ("fetch", "fetch", False),
        ("fetch_range", "fetch", True),
        ("fetch_all", "fetch", True),
        ("all", "fetch", True),
    )

    def set_flush_listener(self, listener: FlushListener | None) -> bool:
        return self._set_windowed_flush_listener(listener)

    def record_access(
        self,
    ) -> tuple[Callable[[K, int], V | None], Callable[[K, V | None, int], None]]:
        """The ``(fetch, put)`` a processor calls per record and window: this store's own, or,
        over a caching layer, an accessor's doing the same in one C call each while the key and
        value are the common kinds and the window is cached. Ask from the processor's ``init``;
        with store metrics recorded (DEBUG), the timed methods."""
        access = self._cached_access(MeteredWindowStore, "fetch", CachingWindowStore)
        if access is not None:
            return access.fetch, access.put
        return self.fetch, self.put

    def record_update(
        self,
    ) -> Callable[[K, Any, int, int, Callable[[K, Any, Any], Any]], tuple[Any, Any, int]] | None:
        """The accessor's ``update(key, value, timestamp, window_start, apply)`` (see
        ``CachedWindowAccess.update``) where ``record_access()`` hands out the accessor, else
        None."""
        access = self._cached_access(MeteredWindowStore, "fetch", CachingWindowStore)
        return None if access is None else access.update

    def put(self, key: K, value: V | None, window_start: int) -> None:
        key_bytes = self.raw_key(key)
        value_bytes = self._value_bytes(value)
        with self.query_lock:
            self.wrapped.put(key_bytes, value_bytes, window_start)

    def fetch(self, key: K, window_start: int) -> V | None:
        return self._value(self.wrapped.fetch(self.raw_key(key), window_start))

    def fetch_range(self, key: K, time_from: int, time_to: int) -> Iterator[tuple[int, V]]:
        value = self._value
        for start, value_bytes in self.wrapped.fetch_range(self.raw_key(key), time_from, time_to):
            yield start, value(value_bytes)  # type: ignore[misc]

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[tuple[WindowedKey[K], V]]:
        return self._typed(self.wrapped.fetch_all(time_from, time_to))

    def all(self) -> Iterator[tuple[WindowedKey[K], V]]:
        return self._typed(self.wrapped.all())

    def _typed(
        self, entries: Iterator[tuple[WindowedKey[bytes], bytes]]
    ) -> Iterator[tuple[WindowedKey[K], V]]:
        windowed, value = self._windowed, self._value
        for window, value_bytes in entries:
            yield windowed(window), value(value_bytes)  # type: ignore[misc]


MeteredKeyValueStore._POINT_ACCESS = (MeteredKeyValueStore, "get", CachingKeyValueStore)
MeteredWindowStore._POINT_ACCESS = (MeteredWindowStore, "fetch", CachingWindowStore)


class MeteredSessionStore(_Metered[K, V], SessionLayer, SessionStore[K, V]):
    """The typed session store processors and queries use; sessions are ``WindowedKey[K]``."""

    _SCOPE_SUFFIX = "-session"
    _METERED = (
        *_Metered._METERED,
        ("put", "put", False),
        ("remove", "remove", False),
        ("fetch_session", "fetch", False),
        ("find_sessions", "fetch", True),
        ("fetch", "fetch", True),
        ("find_sessions_by_end", "fetch", True),
    )

    def set_flush_listener(self, listener: FlushListener | None) -> bool:
        return self._set_windowed_flush_listener(listener)

    def _session_bytes(self, session: WindowedKey[K]) -> WindowedKey[bytes]:
        return WindowedKey(self.raw_key(session.key), session.start, session.end)

    def put(self, session: WindowedKey[K], aggregate: V | None) -> None:
        session_bytes = self._session_bytes(session)
        value_bytes = self._value_bytes(aggregate)
        with self.query_lock:
            self.wrapped.put(session_bytes, value_bytes)

    def remove(self, session: WindowedKey[K]) -> None:
        session_bytes = self._session_bytes(session)
        with self.query_lock:
            self.wrapped.remove(session_bytes)

    def fetch_session(self, key: K, session_start: int, session_end: int) -> V | None:
        return self._value(self.wrapped.fetch_session(self.raw_key(key), session_start, session_end))

    def find_sessions(
        self, key: K, earliest_session_end: int, latest_session_start: int
    ) -> Iterator[tuple[WindowedKey[K], V]]:
        found = self.wrapped.find_sessions(self.raw_key(key), earliest_session_end, latest_session_start)
        return self._typed_sessions(key, found)

    def fetch(self, key: K) -> Iterator[tuple[WindowedKey[K], V]]:
        return self._typed_sessions(key, self.wrapped.fetch(self.raw_key(key)))

    def find_sessions_by_end(
        self, earliest_session_end: int, latest_session_end: int
    ) -> Iterator[tuple[WindowedKey[K], V]]:
        # Keys differ per session here: each is deserialized, as the window store's fetch_all does.
        windowed, value = self._windowed, self._value
        found = self.wrapped.find_sessions_by_end(earliest_session_end, latest_session_end)
        for session, value_bytes in found:
            yield windowed(session), value(value_bytes)  # type: ignore[misc]

    def _typed_sessions(
        self, key: K, entries: Iterator[tuple[WindowedKey[bytes], bytes]]
    ) -> Iterator[tuple[WindowedKey[K], V]]:
        value = self._value
        for session, value_bytes in entries:
            yield WindowedKey(key, session.start, session.end), value(value_bytes)  # type: ignore[misc]
