"""Per-record store access (``record_access()``): the C accessors over a caching layer, and their
direct form over a store without one, must give what the metered layer's own get/fetch and put
give, and leave the same store, changelog and flushes."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kstreams import Serdes
from kstreams._native.per_record import ContextRouting
from kstreams._native.record_cache import RecordCache
from kstreams._native.record_collector import RecordCollector
from kstreams._native.store_access import CachedKeyValueAccess, CachedWindowAccess
from kstreams._native.store_core import ChangelogSender, LoggedPut, LoggedWindowPoints
from kstreams.errors import SerializationException
from kstreams.metrics import MetricsRegistry
from kstreams.processing.record_context import RecordContext
from kstreams.state.caching import CachingKeyValueStore, CachingWindowStore, no_cache_fill
from kstreams.state.changelogging import ChangeLoggingKeyValueStore, ChangeLoggingWindowStore
from kstreams.state.in_memory import InMemoryKeyValueStore, InMemoryWindowStore
from kstreams.state.metered import MeteredKeyValueStore
from kstreams.state.rocksdb import RocksDBKeyValueStore
from kstreams.state.rocksdb_window import RocksDBWindowStore
from kstreams.state.timestamped import MeteredTimestampedKeyValueStore, MeteredTimestampedWindowStore
from kstreams.state.value_and_timestamp import ValueAndTimestamp
from kstreams.topology.dsl.processors.store_access import record_update
from tests.unit.state.conftest import RecordingContext


class TaskContext(RecordingContext):
    """A store context shaped as a task's: ``cache_holder.record_cache`` is the cache and
    ``record_context.timestamp`` the current record's timestamp."""

    def __init__(self, state_dir: Path, cache: Any, metrics: MetricsRegistry | None = None) -> None:
        super().__init__(state_dir, cache=cache, metrics=metrics)
        self.cache_holder = SimpleNamespace(record_cache=cache)
        self.record_context = SimpleNamespace(timestamp=0)

    def record_cache(self) -> Any:
        return self.cache_holder.record_cache

    def current_timestamp(self) -> int:
        return int(self.record_context.timestamp)


class _TaskCache:
    """A task's ``record_cache`` as ``StreamTask`` keeps it: in its context's ``task_cache``."""

    def __init__(self, context: ContextRouting) -> None:
        self._context = context

    @property
    def record_cache(self) -> Any:
        return self._context.task_cache

    @record_cache.setter
    def record_cache(self, cache: Any) -> None:
        self._context.task_cache = cache


class RoutedTaskContext(ContextRouting, TaskContext):
    """A task-shaped context as a task's is built: its record position is a ``RecordContext`` and
    its task's cache its ``task_cache``, which the accessors read in C."""

    def __init__(self, state_dir: Path, cache: Any, metrics: MetricsRegistry | None = None) -> None:
        super().__init__(state_dir, cache, metrics)
        self.record_context = RecordContext()
        self.task_cache = cache
        self.cache_holder = _TaskCache(self)  # type: ignore[assignment]


class CollectorTaskContext(RoutedTaskContext):
    """A task's context whose stores log through a ``ChangelogSender`` into a record collector, in
    C, as a ``ProcessorContextImpl``'s do. The changelog topics are not registered as changelogs,
    so the collector keeps every change: ``changelog`` lists them all, in order."""

    def __init__(self, state_dir: Path, cache: Any, metrics: MetricsRegistry | None = None) -> None:
        super().__init__(state_dir, cache, metrics)
        self.collector = RecordCollector()
        self._logged: list[tuple[str, bytes, bytes | None, int]] = []

    def change_logger(self, store_name: str) -> ChangelogSender:
        return ChangelogSender(self.collector, f"app-{store_name}-changelog", 0, self)

    @property  # type: ignore[override]
    def changelog(self) -> list[tuple[str, bytes, bytes | None, int]]:
        for topic, _, batch in self.collector.drain():
            store = topic.removeprefix("app-").removesuffix("-changelog")
            self._logged.extend((store, key, value, timestamp) for key, value, timestamp, *_ in batch)
        return self._logged

    @changelog.setter
    def changelog(self, _: Any) -> None:
        pass  # RecordingContext's own list: the collector keeps this context's changes


# Below the change-logging layer: in-memory stores logging through Python calls, or RocksDB stores
# in a task's context, where the writes, reads and changelog sends are C (``store_core``).
STORE_KINDS = ["in_memory", "rocksdb"]


class Layers:
    """A metered store's own methods, as its class defines them: what the layers do, never the C
    accessor a store without a caching layer binds its get/fetch and put to."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(type(self._store), name).__get__(self._store)


def opened(store: Any, context: TaskContext) -> list[tuple[Any, ...]]:
    """Open ``store``; the list its flush listener records forwarded entries in."""
    store.init(context, store)
    flushed: list[tuple[Any, ...]] = []
    store.set_flush_listener(lambda *entry: flushed.append(entry))
    return flushed


def stack(
    tmp_path: Path,
    name: str,
    cache: Any,
    key_serde: Any,
    value_serde: Any,
    timestamped: bool = True,
    metrics: MetricsRegistry | None = None,
    context_type: type[TaskContext] = TaskContext,
    cached: bool = True,
    kind: str = "in_memory",
) -> tuple[Any, Any, TaskContext, list[tuple[Any, ...]]]:
    """A DSL-shaped store (metered over caching, unless not ``cached``, over change-logging over
    in-memory, or ``kind`` "rocksdb": RocksDB in a collector-logging task context), open, with a
    flush listener recording what it forwards."""
    inner: Any = InMemoryKeyValueStore(name) if kind == "in_memory" else RocksDBKeyValueStore(name)
    if kind == "rocksdb":
        context_type = CollectorTaskContext
    layer = MeteredTimestampedKeyValueStore if timestamped else MeteredKeyValueStore
    logged = ChangeLoggingKeyValueStore(inner)
    store = layer(CachingKeyValueStore(logged) if cached else logged, key_serde, value_serde)
    context = context_type(tmp_path / name, cache, metrics)
    flushed = opened(store, context)
    if kind == "rocksdb":
        assert isinstance(logged.logged_put, LoggedPut)
    return store, inner, context, flushed


def window_stack(
    tmp_path: Path,
    name: str,
    cache: Any,
    value_serde: Any,
    context_type: type[TaskContext] = TaskContext,
    cached: bool = True,
    kind: str = "in_memory",
) -> tuple[Any, Any, TaskContext, list[tuple[Any, ...]]]:
    """A DSL-shaped timestamped window store with string keys (100 ms windows; a caching layer
    unless not ``cached``; in memory, or ``kind`` "rocksdb": RocksDB segments in a
    collector-logging task context), open, with a flush listener recording what it forwards."""
    inner: Any = (
        InMemoryWindowStore(name, 1_000_000, 100, False)
        if kind == "in_memory"
        else RocksDBWindowStore(name, 1_000_000, 100, False)
    )
    if kind == "rocksdb":
        context_type = CollectorTaskContext
    logged = ChangeLoggingWindowStore(inner)
    store = MeteredTimestampedWindowStore(
        CachingWindowStore(logged) if cached else logged, Serdes.string(), value_serde
    )
    context = context_type(tmp_path / name, cache)
    flushed = opened(store, context)
    if kind == "rocksdb":
        assert isinstance(logged.logged_points, LoggedWindowPoints)
    return store, inner, context, flushed


def test_cached_dsl_stores_hand_out_the_c_accessors(tmp_path: Path) -> None:
    store, *_ = stack(tmp_path, "s", RecordCache(1 << 20), Serdes.string(), Serdes.long())
    get, put = store.record_access()
    assert isinstance(get.__self__, CachedKeyValueAccess)
    assert put.__self__ is get.__self__
    windows, *_ = window_stack(tmp_path, "w", RecordCache(1 << 20), Serdes.long())
    fetch, put = windows.record_access()
    assert isinstance(fetch.__self__, CachedWindowAccess)
    assert put.__self__ is fetch.__self__


def test_stores_without_a_caching_layer_hand_out_the_direct_accessors(tmp_path: Path) -> None:
    store, *_ = stack(tmp_path, "s", None, Serdes.string(), Serdes.long(), cached=False)
    get, _ = store.record_access()
    assert isinstance(get.__self__, CachedKeyValueAccess)
    assert isinstance(store.record_update().__self__, CachedKeyValueAccess)
    windows, *_ = window_stack(tmp_path, "w", None, Serdes.long(), cached=False)
    fetch, _ = windows.record_access()
    assert isinstance(fetch.__self__, CachedWindowAccess)
    # a layer the accessor does not know below the metered one: the store's own methods
    plain = MeteredTimestampedKeyValueStore(InMemoryKeyValueStore("plain"), Serdes.string(), Serdes.long())
    plain.init(TaskContext(tmp_path / "plain", None), plain)
    assert plain.record_access() == (plain.get, plain.put)
    with pytest.raises(ValueError, match="caching layer"):
        CachedKeyValueAccess(store, None, None, None, "", True, False, True)


def test_without_a_task_cache_or_with_metrics_the_store_methods_are_used(tmp_path: Path) -> None:
    store = MeteredTimestampedKeyValueStore(
        CachingKeyValueStore(ChangeLoggingKeyValueStore(InMemoryKeyValueStore("plain"))),
        Serdes.string(),
        Serdes.long(),
    )
    store.init(RecordingContext(tmp_path / "plain"), store)  # no cache_holder: not a task's store
    assert store.record_access() == (store.get, store.put)

    metrics = MetricsRegistry(recording_level="DEBUG")
    timed, *_ = stack(
        tmp_path, "timed", RecordCache(1 << 20), Serdes.string(), Serdes.long(), metrics=metrics
    )
    get, put = timed.record_access()
    assert get == timed.get and put == timed.put  # the timed methods: latencies keep being recorded
    put("k", ValueAndTimestamp.make(1, 5))
    assert get("k") == ValueAndTimestamp.make(1, 5)
    snapshot = metrics.snapshot().items()
    recorded = {m.name: v for m, v in snapshot if m.tags.get("in-memory-state-id") == "timed"}
    assert recorded["put-rate"] > 0 and recorded["get-rate"] > 0


@pytest.mark.parametrize(
    ("key_serde", "value_serde", "timestamped", "keys", "values"),
    [
        # the DSL's counts and sums: both fast paths
        (Serdes.string(), Serdes.long(), True, [f"key-{i}" for i in range(40)], None),
        # keys stored as the bytes they are; string values decoded by the layers
        (None, Serdes.string(), True, [f"k{i}".encode() for i in range(40)], ["a", "bb", "", "ccc"]),
        # a plain (not timestamped) store with an integer key serde
        (Serdes.integer(), Serdes.long(), False, list(range(40)), None),
    ],
)
@pytest.mark.parametrize("cached", [True, False], ids=["cached", "direct"])
@pytest.mark.parametrize("kind", STORE_KINDS)
def test_the_accessor_and_the_layers_agree_on_every_read_write_and_flush(
    tmp_path: Path,
    key_serde: Any,
    value_serde: Any,
    timestamped: bool,
    keys: list[Any],
    values: list[Any] | None,
    cached: bool,
    kind: str,
) -> None:
    # Two stores with small caches (entries get evicted, so misses and evictions flush), or none,
    # driven by the same random operations: one through the accessor (over an in-memory store, or
    # over RocksDB with the writes and changelog sends in C), one through the in-memory store's
    # layers.
    rng = random.Random(7)
    fast, fast_inner, fast_context, fast_flushed = stack(
        tmp_path, "fast", RecordCache(1500), key_serde, value_serde, timestamped, cached=cached, kind=kind
    )
    slow, slow_inner, slow_context, slow_flushed = stack(
        tmp_path, "slow", RecordCache(1500), key_serde, value_serde, timestamped, cached=cached
    )
    slow = Layers(slow)  # the layers themselves, not the accessor bound over them
    get, put = fast.record_access()
    assert isinstance(get.__self__, CachedKeyValueAccess)

    def value() -> Any:
        plain = rng.choice(values) if values is not None else rng.randrange(-(2**63), 2**63)
        return ValueAndTimestamp.make(plain, rng.randrange(0, 1 << 40)) if timestamped else plain

    for step in range(3000):
        key = rng.choice(keys)
        fast_context.record_context.timestamp = slow_context.record_context.timestamp = step
        roll = rng.random()
        if roll < 0.45:
            assert get(key) == slow.get(key)
        elif roll < 0.9:
            written = value()
            put(key, written)
            slow.put(key, written)
        else:
            put(key, None)
            slow.put(key, None)
    fast.flush()
    slow.flush()
    assert list(fast_inner.all()) == list(slow_inner.all())
    assert [entry[1:] for entry in fast_context.changelog] == [entry[1:] for entry in slow_context.changelog]
    assert len(fast_context.changelog) > (100 if cached else 1000)  # without a cache every write is logged
    assert fast_flushed == slow_flushed
    assert len(fast_flushed) > 100 or not cached  # evictions and the final flush forwarded updates


def test_writes_the_fast_path_cannot_encode_fail_as_the_store_would(tmp_path: Path) -> None:
    store, *_ = stack(tmp_path, "s", RecordCache(1 << 20), Serdes.string(), Serdes.long())
    _, put = store.record_access()
    with pytest.raises(TypeError, match="ValueAndTimestamp"):
        put("k", 5)  # a plain value in a timestamped store
    with pytest.raises(SerializationException):
        put("k", ValueAndTimestamp.make(2**63, 1))  # does not fit a long
    with pytest.raises(SerializationException):
        put(5, ValueAndTimestamp.make(1, 1))  # an int key for the string serde
    assert store.get("k") is None


def test_the_accessor_follows_the_task_into_another_threads_cache(tmp_path: Path) -> None:
    first, second = RecordCache(1 << 20), RecordCache(1 << 20)
    store, inner, context, _ = stack(tmp_path, "s", first, Serdes.string(), Serdes.long())
    get, put = store.record_access()
    context.record_context.timestamp = 10
    put("a", ValueAndTimestamp.make(1, 10))
    namespace = store.wrapped.namespace
    first.move_namespace(namespace, second)  # the task moves to another stream thread
    context.cache_holder.record_cache = second
    assert get("a") == ValueAndTimestamp.make(1, 10)
    put("b", ValueAndTimestamp.make(2, 11))
    assert second.get(namespace, b"b") is not None and not first.has_namespace(namespace)
    context.cache_holder.record_cache = None  # a thread without a cache: the layers write through
    put("c", ValueAndTimestamp.make(3, 12))
    assert store.get("c") == ValueAndTimestamp.make(3, 12)
    assert inner.get(b"c") is not None


def test_a_miss_reads_the_store_below(tmp_path: Path) -> None:
    store, _, context, _ = stack(tmp_path, "s", RecordCache(1 << 20), Serdes.string(), Serdes.long())
    get, put = store.record_access()
    put("a", ValueAndTimestamp.make(7, 3))
    store.flush()
    context.cache_holder.record_cache = fresh = RecordCache(1 << 20)  # nothing cached there
    assert get("a") == ValueAndTimestamp.make(7, 3)
    assert fresh.get(store.wrapped.namespace, b"a") is not None  # the read filled the cache


@pytest.mark.parametrize(
    ("value_serde", "values"), [(Serdes.long(), None), (Serdes.string(), ["a", "", "bc"])]
)
@pytest.mark.parametrize("cached", [True, False], ids=["cached", "direct"])
@pytest.mark.parametrize("kind", STORE_KINDS)
def test_the_window_accessor_and_the_layers_agree(
    tmp_path: Path, value_serde: Any, values: Any, cached: bool, kind: str
) -> None:
    rng = random.Random(11)
    fast, fast_inner, fast_context, fast_flushed = window_stack(
        tmp_path, "fast", RecordCache(1500), value_serde, cached=cached, kind=kind
    )
    slow, slow_inner, slow_context, slow_flushed = window_stack(
        tmp_path, "slow", RecordCache(1500), value_serde, cached=cached
    )
    slow = Layers(slow)  # the layers themselves, not the accessor bound over them
    fetch, put = fast.record_access()
    assert isinstance(fetch.__self__, CachedWindowAccess)
    keys = [f"user-{i}" for i in range(15)]
    for step in range(3000):
        key, start = rng.choice(keys), rng.randrange(0, 20) * 100
        fast_context.record_context.timestamp = slow_context.record_context.timestamp = step
        roll = rng.random()
        if roll < 0.45:
            assert fetch(key, start) == slow.fetch(key, start)
        elif roll < 0.9:
            plain = rng.choice(values) if values is not None else rng.randrange(-(2**63), 2**63)
            written = ValueAndTimestamp.make(plain, rng.randrange(0, 1 << 40))
            put(key, written, start)
            slow.put(key, written, start)
        else:
            put(key, None, start)
            slow.put(key, None, start)
    fast.flush()
    slow.flush()
    # (window stores list windows in their own order: in memory by key, on disk by segment)
    assert sorted(map(repr, fast_inner.all())) == sorted(map(repr, slow_inner.all()))
    assert [entry[1:] for entry in fast_context.changelog] == [entry[1:] for entry in slow_context.changelog]
    assert len(fast_context.changelog) > (100 if cached else 1000)
    assert fast_flushed == slow_flushed
    assert len(fast_flushed) > 100 or not cached


def _model_step(store: Any, read: Any, write: Any, key: Any, value: Any, timestamp: int, apply: Any) -> Any:
    """One aggregation step through the store's own methods: what ``update`` must equal."""
    stored = read()
    old = None if stored is None else stored.value
    stamp = timestamp if stored is None else max(timestamp, stored.timestamp)
    new = apply(key, value, old)
    write(ValueAndTimestamp.make(new, stamp))
    return new, old, stamp


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "direct"])
@pytest.mark.parametrize(
    ("context_type", "kind"),
    [(TaskContext, "in_memory"), (RoutedTaskContext, "in_memory"), (CollectorTaskContext, "rocksdb")],
)
@pytest.mark.parametrize("windowed", [False, True])
@pytest.mark.parametrize(("value_serde", "numbers"), [(Serdes.long(), True), (Serdes.string(), False)])
def test_one_call_update_equals_get_apply_put_through_the_layers(
    tmp_path: Path,
    windowed: bool,
    value_serde: Any,
    numbers: bool,
    context_type: type[TaskContext],
    kind: str,
    cached: bool,
) -> None:
    # The aggregation step (read, apply, stamp with the larger timestamp, write) in one call must
    # give and leave what the same step through the store's methods does: hits, misses (small
    # caches evict), deletions (apply returns None) and a thread without a cache. A task's context
    # has its record timestamp read in C (RoutedTaskContext): the changelog's timestamps come
    # from it.
    rng = random.Random(5)
    if windowed:
        fast, fast_inner, fast_context, fast_flushed = window_stack(
            tmp_path, "fast", RecordCache(1500), value_serde, context_type, cached, kind
        )
        slow, slow_inner, slow_context, slow_flushed = window_stack(
            tmp_path, "slow", RecordCache(1500), value_serde, RoutedTaskContext, cached
        )
        slow = Layers(slow)  # the layers themselves, not the accessor bound over them
    else:
        fast, fast_inner, fast_context, fast_flushed = stack(
            tmp_path,
            "fast",
            RecordCache(1500),
            Serdes.string(),
            value_serde,
            context_type=context_type,
            cached=cached,
            kind=kind,
        )
        slow, slow_inner, slow_context, slow_flushed = stack(
            tmp_path,
            "slow",
            RecordCache(1500),
            Serdes.string(),
            value_serde,
            context_type=RoutedTaskContext,
            cached=cached,
        )
        slow = Layers(slow)  # the layers themselves, not the accessor bound over them
    update = fast.record_update()
    assert isinstance(update.__self__, CachedWindowAccess if windowed else CachedKeyValueAccess)

    def apply(key: Any, value: Any, old: Any) -> Any:
        if value is None:
            return None
        if numbers:
            return (old or 0) + value
        return (old or "")[-5:] + value

    # keys of every length and script: a window's longest keys are made as bytes, not on the stack
    keys = [f"user-{i}" for i in range(30)] + ["ü" * 200, "k" * 248, "k" * 249]
    for step in range(3000):
        if step == 2000:  # the task runs on a thread without a cache: the layers write through
            fast_context.cache_holder.record_cache = slow_context.cache_holder.record_cache = None
        key, start = rng.choice(keys), rng.randrange(0, 10) * 100
        value = None if rng.random() < 0.1 else (rng.randrange(-100, 100) if numbers else "xy")
        timestamp = rng.randrange(0, 1 << 40)
        fast_context.record_context.timestamp = slow_context.record_context.timestamp = step
        if windowed:
            got = update(key, value, timestamp, start, apply)
            want = _model_step(
                slow,
                lambda: slow.fetch(key, start),  # noqa: B023 - called before the loop moves on
                lambda made: slow.put(key, made, start),  # noqa: B023
                key,
                value,
                timestamp,
                apply,
            )
        else:
            got = update(key, value, timestamp, apply)
            want = _model_step(
                slow,
                lambda: slow.get(key),  # noqa: B023
                lambda made: slow.put(key, made),  # noqa: B023
                key,
                value,
                timestamp,
                apply,
            )
        assert got == want
    fast.flush()
    slow.flush()
    # (window stores list windows in their own order: in memory by key, on disk by segment)
    assert sorted(map(repr, fast_inner.all())) == sorted(map(repr, slow_inner.all()))
    assert [entry[1:] for entry in fast_context.changelog] == [entry[1:] for entry in slow_context.changelog]
    assert len(fast_context.changelog) > (100 if cached else 1000)
    assert fast_flushed == slow_flushed
    assert len(fast_flushed) > 100 or not cached


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "direct"])
def test_a_cached_long_updated_to_what_no_long_holds_goes_through_the_serde(
    tmp_path: Path, cached: bool
) -> None:
    # A cached (or stored, without a cache) count is read and written as 16 bytes without
    # objects; an aggregate that is not an int64 (too large, a bool, None) takes the layers' way:
    # the serde refuses what it cannot write, None deletes.
    store, *_ = stack(tmp_path, "s", RecordCache(1 << 20), Serdes.string(), Serdes.long(), cached=cached)
    update = store.record_update()
    assert update("k", 1, 5, lambda key, value, old: 7) == (7, None, 5)
    with pytest.raises(SerializationException):
        update("k", 1, 6, lambda key, value, old: old << 70)
    assert store.get("k") == ValueAndTimestamp.make(7, 5)
    assert update("k", 1, 4, lambda key, value, old: old + 1) == (8, 7, 5)
    assert update("k", 1, 9, lambda key, value, old: None) == (None, 8, 9)
    assert store.get("k") is None


@pytest.mark.parametrize(("value_serde", "one"), [(Serdes.long(), 1), (Serdes.string(), "x")])
def test_an_update_whose_entry_left_the_cache_meanwhile_writes_it_again(
    tmp_path: Path, value_serde: Any, one: Any
) -> None:
    # An update writes back the entry its read found without looking it up again, unless an
    # entry left the cache since: here the aggregation function itself writes enough other keys
    # into a small cache to evict the entry being updated (and flush it to the store below).
    store, _inner, _context, flushed = stack(tmp_path, "s", RecordCache(400), Serdes.string(), value_serde)
    update = store.record_update()
    update("k", one, 5, lambda key, value, old: value)

    def evicting(key: Any, value: Any, old: Any) -> Any:
        for i in range(20):
            store.put(f"other-{i}", ValueAndTimestamp.make(one, 1))
        return old + value

    assert update("k", one, 7, evicting) == (one + one, one, 7)
    assert store.get("k") == ValueAndTimestamp.make(one + one, 7)
    assert any(entry[0] == "k" for entry in flushed)  # it was evicted (and flushed) meanwhile
    store.flush()
    assert store.get("k") == ValueAndTimestamp.make(one + one, 7)


def test_an_update_whose_function_raises_writes_nothing(tmp_path: Path) -> None:
    store, *_ = stack(tmp_path, "s", RecordCache(1 << 20), Serdes.string(), Serdes.long())
    update = store.record_update()
    update("k", 1, 5, lambda key, value, old: (old or 0) + value)

    def failing(key: Any, value: Any, old: Any) -> Any:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        update("k", 1, 9, failing)
    assert store.get("k") == ValueAndTimestamp.make(1, 5)


def test_the_dsl_update_without_an_accessor_takes_the_store_methods(tmp_path: Path) -> None:
    # A store not open in a task (no cache holder) has no accessor; the DSL's update then reads
    # and writes through get and put, with the same results.
    store = MeteredTimestampedKeyValueStore(
        CachingKeyValueStore(ChangeLoggingKeyValueStore(InMemoryKeyValueStore("plain"))),
        Serdes.string(),
        Serdes.long(),
    )
    store.init(RecordingContext(tmp_path / "plain"), store)
    assert store.record_update() is None
    update = record_update(store)
    count = lambda key, value, old: (old or 0) + 1  # noqa: E731
    assert update("k", "v", 7, count) == (1, None, 7)
    assert update("k", "v", 3, count) == (2, 1, 7)  # the larger timestamp stays
    assert update("k", "v", 9, lambda key, value, old: None) == (None, 2, 9)
    assert store.get("k") is None


def _outcome(call: Any) -> Any:
    try:
        return ("returned", call())
    except Exception as exc:  # both sides must fail alike
        return ("raised", type(exc))


@pytest.mark.parametrize("cached", [False, True], ids=["not-cached", "cached"])
@pytest.mark.parametrize("kind", STORE_KINDS)
def test_processor_code_calls_the_accessor_on_its_stores(tmp_path: Path, kind: str, cached: bool) -> None:
    # Processor API code calls get and put itself: they are the C accessor's (plain longs
    # encoded in C; through the cache when the store has one), and must give, refuse, forward and
    # leave what the layers do. The caches are small, so entries are evicted and flushed.
    rng = random.Random(13)
    fast, fast_inner, fast_context, fast_flushed = stack(
        tmp_path,
        "fast",
        RecordCache(1500) if cached else None,
        Serdes.string(),
        Serdes.long(),
        False,
        cached=cached,
        kind=kind,
    )
    slow_store, slow_inner, slow_context, slow_flushed = stack(
        tmp_path,
        "slow",
        RecordCache(1500) if cached else None,
        Serdes.string(),
        Serdes.long(),
        False,
        cached=cached,
    )
    assert isinstance(fast.get.__self__, CachedKeyValueAccess) and fast.put.__self__ is fast.get.__self__
    slow = Layers(slow_store)
    for step in range(2000):
        key = f"k{rng.randrange(30)}"
        fast_context.record_context.timestamp = slow_context.record_context.timestamp = step
        roll = rng.random()
        if roll < 0.4:
            assert fast.get(key) == slow.get(key)
        elif roll < 0.85:
            value = rng.choice([rng.randrange(-(2**63), 2**63), 0, -1, 2**63 - 1, -(2**63)])
            fast.put(key, value)
            slow.put(key, value)
        else:
            fast.put(key, None)
            slow.put(key, None)
    for bad in (2**63, -(2**63) - 1, True, "7", 1.5):
        assert _outcome(lambda: fast.put("k1", bad)) == _outcome(lambda: slow.put("k1", bad))  # noqa: B023
    assert fast.get("k1") == slow.get("k1")
    fast.flush()
    slow.flush()
    assert list(fast_inner.all()) == list(slow_inner.all())
    assert [entry[1:] for entry in fast_context.changelog] == [entry[1:] for entry in slow_context.changelog]
    assert len(fast_context.changelog) > (200 if cached else 1000)
    assert fast_flushed == slow_flushed
    fast.close()
    assert "get" not in vars(fast) and "put" not in vars(fast)  # a closed store keeps no accessor


def test_a_query_reading_a_cached_store_through_the_accessor_leaves_the_cache_unfilled(
    tmp_path: Path,
) -> None:
    """An interactive query reads with the store's get from another thread: through the C accessor
    it sees the cached writes, and a miss read below the cache does not fill it."""
    cache = RecordCache(1 << 20)
    store, inner, _, _ = stack(tmp_path, "cached", cache, Serdes.string(), Serdes.long(), False)
    assert isinstance(store.get.__self__, CachedKeyValueAccess)
    store.put("dirty", 1)
    inner.put(b"stored", (2).to_bytes(8, "big"))  # in the store only, as after a flush and eviction
    namespace = store.wrapped.namespace
    answers: list[Any] = []

    def query() -> None:
        with no_cache_fill():
            answers.extend([store.get("dirty"), store.get("stored"), store.get("absent")])

    reader = threading.Thread(target=query)
    reader.start()
    reader.join(timeout=10)
    assert answers == [1, 2, None]
    assert cache.keys(namespace) == [b"dirty"]
    assert store.get("stored") == 2  # the task's own read fills the cache
    assert cache.keys(namespace) == [b"dirty", b"stored"]


def test_the_point_accessor_follows_the_serdes(tmp_path: Path) -> None:
    windows, *_ = window_stack(tmp_path, "w", None, Serdes.long(), cached=False, kind="rocksdb")
    assert isinstance(windows.fetch.__self__, CachedWindowAccess)
    windows.put("a", ValueAndTimestamp.make(3, 9), 100)
    assert Layers(windows).fetch("a", 100) == windows.fetch("a", 100) == ValueAndTimestamp.make(3, 9)
    # Serdes bound after init (the DSL's defaults): the accessor is made again with them.
    bare, inner, _, _ = stack(tmp_path, "bare", None, None, None, False, cached=False)
    bare.put(b"raw", b"bytes")
    bare.with_default_serdes(Serdes.string(), Serdes.long())
    assert isinstance(bare.put.__self__, CachedKeyValueAccess)
    bare.put("k", 5)
    assert inner.get(b"k") == (5).to_bytes(8, "big")
    assert bare.get("k") == 5
    # a bytes key now goes through the string serde, as the layers send it
    assert _outcome(lambda: bare.put(b"k", 6)) == _outcome(lambda: Layers(bare).put(b"k", 6))
    assert bare.get("k") == Layers(bare).get("k")
