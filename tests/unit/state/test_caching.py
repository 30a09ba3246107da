"""The caching layers over the compiled RecordCache: fewer writes below, (new, old) on flush."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kstreams._native.record_cache import RecordCache
from kstreams.state.caching import CachingKeyValueStore, CachingWindowStore, no_cache_fill
from kstreams.state.changelogging import ChangeLoggingKeyValueStore, ChangeLoggingWindowStore
from kstreams.state.in_memory import InMemoryKeyValueStore, InMemoryWindowStore
from kstreams.state.store import WindowedKey
from kstreams.state.window_key_schema import changelog_key


def make_kv(context: Any) -> tuple[CachingKeyValueStore, InMemoryKeyValueStore, list[tuple[Any, ...]]]:
    inner = InMemoryKeyValueStore("kv")
    store = CachingKeyValueStore(ChangeLoggingKeyValueStore(inner))
    store.init(context, store)
    forwarded: list[tuple[Any, ...]] = []
    assert store.set_flush_listener(lambda *args: forwarded.append(args))
    return store, inner, forwarded


def test_repeated_updates_reach_the_store_and_changelog_once_per_flush(
    make_context: Callable[..., Any],
) -> None:
    context = make_context(cache=RecordCache(1 << 20))
    store, inner, forwarded = make_kv(context)
    context.timestamp = 10
    store.put(b"a", b"1")
    context.timestamp = 20
    store.put(b"a", b"2")
    store.put(b"b", b"x")
    assert inner.get(b"a") is None and context.changelog == [] and forwarded == []
    assert store.get(b"a") == b"2"  # reads see the newest write
    store.flush()
    assert inner.get(b"a") == b"2"
    assert context.changelog == [("kv", b"a", b"2", 20), ("kv", b"b", b"x", 20)]
    assert forwarded == [(b"a", b"2", None, 20, None), (b"b", b"x", None, 20, None)]


def test_flush_forwards_the_old_value_from_the_store_below(make_context: Callable[..., Any]) -> None:
    context = make_context(cache=RecordCache(1 << 20))
    store, _, forwarded = make_kv(context)
    store.put(b"a", b"1")
    store.flush()
    store.put(b"a", b"2")
    store.delete(b"b")  # never existed: nothing to write or forward
    store.flush()
    assert forwarded[-1] == (b"a", b"2", b"1", 0, None)
    assert len(forwarded) == 2
    store.delete(b"a")
    store.flush()
    assert forwarded[-1] == (b"a", None, b"2", 0, None)
    assert store.get(b"a") is None


def test_size_zero_cache_passes_each_write_through(make_context: Callable[..., Any]) -> None:
    context = make_context(cache=RecordCache(0))
    store, inner, forwarded = make_kv(context)
    store.put(b"a", b"1")
    store.put(b"a", b"2")
    assert inner.get(b"a") == b"2"
    assert forwarded == [(b"a", b"1", None, 0, None), (b"a", b"2", b"1", 0, None)]
    assert len(context.changelog) == 2


def test_eviction_flushes_dirty_entries_downstream(make_context: Callable[..., Any]) -> None:
    cache = RecordCache(200 + 3 * RecordCache.ENTRY_OVERHEAD)
    context = make_context(cache=cache)
    store, inner, forwarded = make_kv(context)
    for i in range(20):
        store.put(b"k%02d" % i, b"v" * 20)
    assert forwarded, "an over-full cache must flush through the listener"
    assert cache.size_bytes <= cache.max_bytes
    store.flush()
    assert len(list(inner.all())) == 20


def test_without_a_cache_each_write_passes_through_and_is_forwarded(make_context: Callable[..., Any]) -> None:
    context = make_context(cache=None)
    store, inner, forwarded = make_kv(context)
    store.put(b"a", b"1")
    store.put(b"a", b"2")
    assert inner.get(b"a") == b"2"
    assert context.changelog == [("kv", b"a", b"1", 0), ("kv", b"a", b"2", 0)]
    assert forwarded == [(b"a", b"1", None, 0, None), (b"a", b"2", b"1", 0, None)]
    assert store.get(b"a") == b"2"


def test_ranges_merge_cache_and_store(make_context: Callable[..., Any]) -> None:
    context = make_context(cache=RecordCache(1 << 20))
    store, _, _ = make_kv(context)
    for key in (b"a", b"c", b"e", b"g"):
        store.put(key, b"old")
    store.flush()
    store.put(b"b", b"new")
    store.put(b"c", b"new")
    store.delete(b"e")
    store.put(b"h", b"new")
    assert list(store.all()) == [
        (b"a", b"old"),
        (b"b", b"new"),
        (b"c", b"new"),
        (b"g", b"old"),
        (b"h", b"new"),
    ]
    assert [k for k, _ in store.range(b"b", b"g")] == [b"b", b"c", b"g"]
    assert [k for k, _ in store.reverse_range(b"b", b"h")] == [b"h", b"g", b"c", b"b"]
    assert [k for k, _ in store.prefix_scan(b"c")] == [b"c"]


def test_a_miss_fills_the_cache_except_for_queries(make_context: Callable[..., Any]) -> None:
    cache = RecordCache(1 << 20)
    context = make_context(cache=cache)
    store, inner, _ = make_kv(context)
    inner.put(b"a", b"1")
    inner.put(b"b", b"2")
    with no_cache_fill():
        assert store.get(b"b") == b"2"
    assert cache.get(store.namespace, b"b") is None
    assert store.get(b"a") == b"1"
    assert cache.get(store.namespace, b"a") == (b"1", 0)
    assert cache.dirty_count(store.namespace) == 0


def test_namespace_is_task_and_store_and_follows_the_current_cache(make_context: Callable[..., Any]) -> None:
    first, second = RecordCache(1 << 20), RecordCache(1 << 20)
    context = make_context(cache=first, task_id="1_2")
    store, inner, _ = make_kv(context)
    store.put(b"a", b"1")
    assert first.namespaces() == ["1_2-kv"]
    first.move_namespace("1_2-kv", second)  # the task moves to another stream thread
    context._cache = second
    assert store.get(b"a") == b"1"
    store.flush()
    assert inner.get(b"a") == b"1"


def test_close_flushes_and_drops_the_namespace(make_context: Callable[..., Any]) -> None:
    cache = RecordCache(1 << 20)
    context = make_context(cache=cache)
    store, _, forwarded = make_kv(context)
    store.put(b"a", b"1")
    store.close()
    assert forwarded == [(b"a", b"1", None, 0, None)]
    assert not cache.has_namespace(store.namespace)


@pytest.fixture
def window_store(make_context: Callable[..., Any]) -> Any:
    context = make_context(cache=RecordCache(1 << 20))
    inner = InMemoryWindowStore("w", 10_000, 100, False)
    store = CachingWindowStore(ChangeLoggingWindowStore(inner))
    store.init(context, store)
    forwarded: list[tuple[Any, ...]] = []
    store.set_flush_listener(lambda *args: forwarded.append(args))
    return store, inner, forwarded, context


def test_window_cache_merges_and_forwards_windowed_keys(window_store: Any) -> None:
    store, inner, forwarded, context = window_store
    store.put(b"k", b"1", 100)
    store.flush()
    context.timestamp = 250
    store.put(b"k", b"2", 100)
    store.put(b"k", b"3", 200)
    store.put(b"k\x00", b"other", 150)
    assert store.fetch(b"k", 100) == b"2"
    assert inner.fetch(b"k", 100) == b"1"
    assert list(store.fetch_range(b"k", 0, 1000)) == [(100, b"2"), (200, b"3")]
    assert list(store.fetch_range(b"k", -500, 150)) == [(100, b"2")]
    assert list(store.fetch_all(0, 1000)) == [
        (WindowedKey(b"k", 100, 200), b"2"),
        (WindowedKey(b"k\x00", 150, 250), b"other"),
        (WindowedKey(b"k", 200, 300), b"3"),
    ]
    store.flush()
    assert (WindowedKey(b"k", 100, 200), b"2", b"1", 250, None) in forwarded
    assert (WindowedKey(b"k", 200, 300), b"3", None, 250, None) in forwarded
    assert ("w", changelog_key(b"k", 200, 0), b"3", 250) in context.changelog
    assert list(inner.fetch_range(b"k", 0, 1000)) == [(100, b"2"), (200, b"3")]
