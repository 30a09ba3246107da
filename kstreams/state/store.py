"""State store interfaces: what every store and store layer implements.

Stores below the metered layer hold bytes; the metered layer (outermost) turns typed keys and
values into bytes with serdes. Layers, outermost first: metered -> caching -> change-logging ->
inner (in-memory or RocksDB).

A store instance belongs to one task and is used only by the thread holding that task (or by the
restore thread while the task restores, or by the polling thread at commit under the barrier), so
stores need no locks of their own. Interactive queries read through ``ReadOnly*`` views that take
the store's ``query_lock``.
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from kstreams._native.record import WindowedKey

if TYPE_CHECKING:
    from kstreams._native.record_batch import RecordBatch
    from kstreams.metrics import MetricsRegistry

__all__ = [
    "FlushListener",
    "KeyValueStore",
    "RestoreCallback",
    "SessionStore",
    "StateStore",
    "StateStoreContext",
    "StoreBuilder",
    "WindowStore",
    "WindowedKey",
    "flush_listener_with_headers",
]

K = TypeVar("K")
V = TypeVar("V")

# Restores a batch of changelog records (key, value-or-None) into a store's inner layer.
RestoreCallback = Callable[[list[tuple[bytes, bytes | None]]], None]
# Receives (key, new value, old value, timestamp, headers) of each entry a caching store flushes:
# the headers (None: none) of the record that last wrote the entry. A store may leave them out.
FlushListener = Callable[..., None]


def flush_listener_with_headers(listener: FlushListener) -> FlushListener:
    """``listener`` as a five-argument flush listener: one written for four arguments (key, new,
    old, timestamp; flushes carried no headers before) is wrapped to be called without them."""
    try:
        signature = inspect.signature(listener)
    except (TypeError, ValueError):  # no signature to read: call it as it is
        return listener
    try:
        signature.bind(None, None, None, 0, None)
    except TypeError:
        try:
            signature.bind(None, None, None, 0)
        except TypeError:
            return listener  # takes neither: its own error, at its first call, says how

        def without_headers(key: Any, new: Any, old: Any, timestamp: int, headers: Any = None) -> None:
            listener(key, new, old, timestamp)

        return without_headers
    return listener


class StateStoreContext(Protocol):
    """What a store learns from its task at init (implemented by the runtime and the test driver)."""

    @property
    def application_id(self) -> str: ...

    @property
    def task_id(self) -> Any: ...

    @property
    def app_configs(self) -> Any: ...

    @property
    def metrics(self) -> MetricsRegistry | None:
        """The registry of the client running the task, where the metered layer registers its
        ``stream-state-metrics`` (at recording level DEBUG); None where no client collects metrics
        (the test driver, Spark partitions)."""

    @property
    def client_id(self) -> str | None:
        """The id of the client running the task (given whenever ``metrics`` is): the ``thread-id``
        tag of store metrics, since tasks here move between the client's stream threads."""

    def state_dir(self) -> str:
        """The task's own state directory (created on first call)."""

    def register(self, store: StateStore, restore_callback: RestoreCallback) -> None:
        """Register a store's inner layer so the state updater can restore it from its changelog."""

    def log_change(
        self,
        store_name: str,
        key: bytes,
        value: bytes | None,
        timestamp: int,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> None:
        """Send a change of a logged store to its changelog partition (through the record
        collector), with ``headers`` where the store's changelog format has them (Kafka's suppress
        buffer marks its version in one)."""

    def log_changes(self, store_name: str, changes: RecordBatch) -> None:
        """Send a batch of changes of a logged store (keys, values or None, timestamps) to its
        changelog partition, in order, as ``log_change`` would one by one."""

    def record_cache(self) -> Any:
        """The RecordCache of the thread processing the task now (None when caching is off)."""

    def current_timestamp(self) -> int:
        """The timestamp of the record being processed (or of the running punctuation), for the
        changelog records a store writes; 0 when the task processes nothing."""


class StateStore(abc.ABC):
    """A named store owned by one task."""

    @property
    @abc.abstractmethod
    def name(self) -> str: ...

    @property
    def persistent(self) -> bool:
        return False

    @abc.abstractmethod
    def init(self, context: StateStoreContext, root: StateStore) -> None:
        """Open the store. ``root`` is the outermost layer (the one to register for restore)."""

    @abc.abstractmethod
    def flush(self) -> None:
        """Make every write durable in this layer and below (caches flush; RocksDB writes its batch)."""

    @abc.abstractmethod
    def close(self) -> None: ...

    @property
    @abc.abstractmethod
    def is_open(self) -> bool: ...

    def set_flush_listener(self, listener: FlushListener | None) -> bool:
        """Caching stores call listener(key, new, old, timestamp, headers) with typed values for
        every entry they flush (headers: those of the record that last wrote it, None for none;
        a store may call it without them), and return True: the processor then leaves forwarding
        to the cache. Stores
        without a cache return False and the processor forwards each update itself. With None
        (a processor with nothing downstream) a cache only writes what it flushes to the layers
        below, and says True all the same."""
        return False


class KeyValueStore(StateStore, Generic[K, V]):
    """A key-value store. Ranges are inclusive of both ends, in key byte order below the metered layer."""

    @abc.abstractmethod
    def get(self, key: K) -> V | None: ...

    def get_many(self, keys: list[K]) -> list[V | None]:
        """The values of many keys at once (None where absent), as ``get`` of each would read them."""
        return list(map(self.get, keys))

    @abc.abstractmethod
    def put(self, key: K, value: V | None) -> None:
        """Store a value; None deletes."""

    @abc.abstractmethod
    def put_if_absent(self, key: K, value: V) -> V | None: ...

    @abc.abstractmethod
    def put_all(self, entries: list[tuple[K, V | None]]) -> None: ...

    @abc.abstractmethod
    def delete(self, key: K) -> V | None: ...

    @abc.abstractmethod
    def range(self, from_key: K | None, to_key: K | None) -> Iterator[tuple[K, V]]: ...

    @abc.abstractmethod
    def reverse_range(self, from_key: K | None, to_key: K | None) -> Iterator[tuple[K, V]]: ...

    @abc.abstractmethod
    def all(self) -> Iterator[tuple[K, V]]: ...

    @abc.abstractmethod
    def prefix_scan(self, prefix: Any) -> Iterator[tuple[K, V]]: ...

    @abc.abstractmethod
    def approximate_num_entries(self) -> int: ...


class WindowStore(StateStore, Generic[K, V]):
    """Values per (key, window start). Segments older than the retention are dropped."""

    @property
    @abc.abstractmethod
    def retention_ms(self) -> int: ...

    @property
    @abc.abstractmethod
    def window_size_ms(self) -> int: ...

    @abc.abstractmethod
    def put(self, key: K, value: V | None, window_start: int) -> None: ...

    @abc.abstractmethod
    def fetch(self, key: K, window_start: int) -> V | None: ...

    @abc.abstractmethod
    def fetch_range(self, key: K, time_from: int, time_to: int) -> Iterator[tuple[int, V]]:
        """(window start, value) for one key with time_from <= start <= time_to, ascending."""

    @abc.abstractmethod
    def fetch_all(self, time_from: int, time_to: int) -> Iterator[tuple[WindowedKey[K], V]]: ...

    @abc.abstractmethod
    def all(self) -> Iterator[tuple[WindowedKey[K], V]]: ...


class SessionStore(StateStore, Generic[K, V]):
    """Aggregates per session: a period of activity of one key, written ``WindowedKey(key, start,
    end)`` with both ends inclusive. Sessions that ended more than the retention before stream time
    are dropped. Below the metered layer, session keys are ``WindowedKey[bytes]``."""

    @property
    @abc.abstractmethod
    def retention_ms(self) -> int: ...

    @abc.abstractmethod
    def put(self, session: WindowedKey[K], aggregate: V | None) -> None:
        """Store a session's aggregate; None removes the session."""

    @abc.abstractmethod
    def remove(self, session: WindowedKey[K]) -> None: ...

    @abc.abstractmethod
    def fetch_session(self, key: K, session_start: int, session_end: int) -> V | None: ...

    @abc.abstractmethod
    def find_sessions(
        self, key: K, earliest_session_end: int, latest_session_start: int
    ) -> Iterator[tuple[WindowedKey[K], V]]:
        """Sessions of ``key`` with end >= earliest_session_end and start <= latest_session_start
        (the sessions a record at a time could merge with), ascending by end, then start."""

    @abc.abstractmethod
    def fetch(self, key: K) -> Iterator[tuple[WindowedKey[K], V]]:
        """Every live session of ``key``, ascending by end, then start."""

    def find_sessions_by_end(
        self, earliest_session_end: int, latest_session_end: int
    ) -> Iterator[tuple[WindowedKey[K], V]]:
        """Every key's live sessions with earliest_session_end <= end <= latest_session_end,
        ascending by end, then key bytes, then start (Kafka's ``findSessions(earliestSessionEndTime,
        latestSessionEndTime)``): how an aggregation that emits on window close finds the sessions
        that closed. kstreams' stores and layers implement it; a store of one's own need not unless
        it backs ``emit_strategy(EmitStrategy.on_window_close())``."""
        # Not abstract, as Kafka's default throws: a user's session store keeps working elsewhere.
        raise NotImplementedError(
            f"Session store {self.name} ({type(self).__name__}) cannot list sessions by end time across "
            "keys, which a session-windowed aggregation that emits on window close needs: implement "
            "find_sessions_by_end or use Stores.persistent_session_store/in_memory_session_store."
        )


class StoreBuilder(abc.ABC):
    """Builds one store instance per task; carries the changelog and caching choices."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.logging_enabled = True
        self.log_config: dict[str, str] = {}
        self.caching_enabled = False

    @property
    @abc.abstractmethod
    def store_type(self) -> str:
        """ "keyvalue", "window" or "session": decides the changelog's cleanup policy."""

    @property
    def retention_ms(self) -> int:
        """Windowed stores: how long windows are kept (sets the changelog's retention)."""
        return -1

    def with_logging_enabled(self, config: dict[str, str] | None = None) -> StoreBuilder:
        self.logging_enabled = True
        self.log_config = dict(config or {})
        return self

    def with_logging_disabled(self) -> StoreBuilder:
        self.logging_enabled = False
        return self

    def with_caching_enabled(self) -> StoreBuilder:
        self.caching_enabled = True
        return self

    def with_caching_disabled(self) -> StoreBuilder:
        self.caching_enabled = False
        return self

    @abc.abstractmethod
    def build(self) -> StateStore:
        """A new, unopened store (outermost layer) for one task."""
