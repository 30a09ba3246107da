"""Read-only views over the local instances of one store, for interactive queries."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from kstreams._native.record_cache import RecordCache
from kstreams.errors import InvalidStateStoreException
from kstreams.serdes import Serdes
from kstreams.state import ReadOnlyKeyValueStore, ReadOnlyWindowStore, Stores, WindowedKey


def open_kv(make_context: Callable[..., Any], task: str, cache: Any = None) -> Any:
    store = (
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv"), Serdes.string(), Serdes.long())
        .with_caching_enabled()
        .build()
    )
    store.init(make_context(task_id=task, cache=cache), store)
    return store


def test_key_value_view_reads_across_task_instances(make_context: Callable[..., Any]) -> None:
    first, second = open_kv(make_context, "0_0"), open_kv(make_context, "0_1")
    first.put("a", 1)
    second.put("b", 2)
    view: ReadOnlyKeyValueStore[str, int] = ReadOnlyKeyValueStore("kv", lambda: [first, second])
    assert view.get("a") == 1 and view.get("b") == 2 and view.get("c") is None
    assert sorted(view.all()) == [("a", 1), ("b", 2)]
    assert list(view.range("b", "z")) == [("b", 2)]
    assert list(view.reverse_range(None, None)) == [("a", 1), ("b", 2)]  # instance by instance
    assert list(view.prefix_scan("a")) == [("a", 1)]
    assert view.approximate_num_entries() == 2


def test_view_reads_do_not_fill_the_cache(make_context: Callable[..., Any]) -> None:
    cache = RecordCache(1 << 20)
    store = open_kv(make_context, "0_0", cache)
    inner = store.wrapped.wrapped.wrapped  # below the caching and change-logging layers
    inner.put(b"a", (1).to_bytes(8, "big"))
    assert ReadOnlyKeyValueStore("kv", [store]).get("a") == 1
    assert len(cache) == 0
    assert store.get("a") == 1  # the stream thread's read does fill it
    assert len(cache) == 1


def test_a_closed_instance_makes_the_view_raise(make_context: Callable[..., Any]) -> None:
    store = open_kv(make_context, "0_0")
    view: ReadOnlyKeyValueStore[str, int] = ReadOnlyKeyValueStore("kv", [store])
    store.close()
    with pytest.raises(InvalidStateStoreException, match=r"kv.*migrated"):
        view.get("a")


def test_window_view_fetches_across_instances(make_context: Callable[..., Any]) -> None:
    stores = []
    for task in ("0_0", "0_1"):
        store = Stores.window_store_builder(
            Stores.in_memory_window_store("w", 1000, 100), Serdes.string()
        ).build()
        store.init(make_context(task_id=task), store)
        stores.append(store)
    stores[0].put("a", b"1", 0)
    stores[1].put("b", b"2", 100)
    view: ReadOnlyWindowStore[str, bytes] = ReadOnlyWindowStore("w", stores)
    assert view.fetch("b", 100) == b"2"
    assert list(view.fetch_range("a", 0, 500)) == [(0, b"1")]
    assert list(view.fetch_range("z", 0, 500)) == []
    assert sorted(view.fetch_all(50, 500)) == [(WindowedKey("b", 100, 200), b"2")]
    assert sorted(view.all()) == [(WindowedKey("a", 0, 100), b"1"), (WindowedKey("b", 100, 200), b"2")]


def test_a_query_never_sees_a_half_written_store(make_context: Callable[..., Any]) -> None:
    store = open_kv(make_context, "0_0")
    view: ReadOnlyKeyValueStore[str, int] = ReadOnlyKeyValueStore("kv", [store])
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        i = 0
        while not stop.is_set():
            store.put(f"k{i % 500}", i)
            store.delete(f"k{(i + 250) % 500}")
            i += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        for _ in range(200):
            try:
                entries = list(view.all())
            except BaseException as exc:
                errors.append(exc)
                break
            assert all(isinstance(v, int) for _, v in entries)
    finally:
        stop.set()
        writer.join(timeout=10)
    assert errors == []
