"""Stores: suppliers, builders, the layer stack they build, and the typed metered face."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kstreams._native.record_cache import RecordCache
from kstreams.errors import SerializationException, TopologyException
from kstreams.serdes import BytesSerde, Serdes
from kstreams.state import Stores, WindowedKey
from kstreams.state.caching import CachingKeyValueStore, CachingWindowStore
from kstreams.state.changelogging import ChangeLoggingKeyValueStore, ChangeLoggingWindowStore
from kstreams.state.in_memory import InMemoryKeyValueStore, InMemoryWindowStore
from kstreams.state.metered import MeteredKeyValueStore, MeteredWindowStore
from kstreams.state.rocksdb import RocksDBKeyValueStore
from kstreams.state.rocksdb_window import RocksDBWindowStore


def layers(store: Any) -> list[type]:
    kinds = []
    while store is not None:
        kinds.append(type(store))
        store = getattr(store, "wrapped", None)
    return kinds


def test_key_value_builder_stacks_metered_caching_logging_inner() -> None:
    builder = Stores.key_value_store_builder(Stores.persistent_key_value_store("kv"), None, None)
    assert builder.store_type == "keyvalue" and builder.name == "kv"
    assert builder.logging_enabled and not builder.caching_enabled
    assert layers(builder.build()) == [MeteredKeyValueStore, ChangeLoggingKeyValueStore, RocksDBKeyValueStore]
    builder.with_caching_enabled()
    assert layers(builder.build()) == [
        MeteredKeyValueStore,
        CachingKeyValueStore,
        ChangeLoggingKeyValueStore,
        RocksDBKeyValueStore,
    ]
    builder.with_logging_disabled().with_caching_disabled()
    assert layers(builder.build()) == [MeteredKeyValueStore, RocksDBKeyValueStore]
    builder.with_logging_enabled({"min.insync.replicas": "2"})
    assert builder.log_config == {"min.insync.replicas": "2"}
    assert layers(Stores.key_value_store_builder(Stores.in_memory_key_value_store("m")).build())[-1] is (
        InMemoryKeyValueStore
    )


def test_window_builder_carries_retention_and_never_caches_duplicates() -> None:
    supplier = Stores.persistent_window_store("w", retention_ms=60_000, window_size_ms=1000)
    builder = Stores.window_store_builder(supplier, None, None).with_caching_enabled()
    assert builder.store_type == "window" and builder.retention_ms == 60_000
    assert layers(builder.build()) == [
        MeteredWindowStore,
        CachingWindowStore,
        ChangeLoggingWindowStore,
        RocksDBWindowStore,
    ]
    dups = Stores.in_memory_window_store("j", 1000, 100, retain_duplicates=True)
    built = Stores.window_store_builder(dups).with_caching_enabled().build()
    assert layers(built) == [MeteredWindowStore, ChangeLoggingWindowStore, InMemoryWindowStore]


def test_each_build_is_a_new_store() -> None:
    builder = Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv"))
    assert builder.build() is not builder.build()


def test_invalid_suppliers_are_rejected() -> None:
    with pytest.raises(TopologyException):
        Stores.in_memory_key_value_store("")
    with pytest.raises(TopologyException, match="retention"):
        Stores.persistent_window_store("w", retention_ms=10, window_size_ms=100)
    with pytest.raises(TopologyException, match="negative"):
        Stores.in_memory_window_store("w", retention_ms=-1, window_size_ms=0)


@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("caching", [False, True])
def test_typed_key_value_store_round_trips_through_serdes(
    persistent: bool, caching: bool, make_context: Callable[..., Any]
) -> None:
    supplier = (
        Stores.persistent_key_value_store("kv") if persistent else Stores.in_memory_key_value_store("kv")
    )
    builder = Stores.key_value_store_builder(supplier, Serdes.string(), Serdes.long())
    if caching:
        builder.with_caching_enabled()
    store = builder.build()
    context = make_context(cache=RecordCache(1 << 20))
    store.init(context, store)
    forwarded: list[tuple[Any, ...]] = []
    assert store.set_flush_listener(lambda *args: forwarded.append(args)) is caching
    store.put("b", 2)
    store.put("a", 1)
    store.put("c", 3)
    assert store.get("a") == 1 and store.get("z") is None
    assert store.put_if_absent("a", 9) == 1
    assert store.delete("c") == 3
    assert list(store.all()) == [("a", 1), ("b", 2)]
    assert list(store.range("a", "a")) == [("a", 1)]
    assert list(store.reverse_range(None, None)) == [("b", 2), ("a", 1)]
    assert list(store.prefix_scan("b")) == [("b", 2)]
    store.flush()
    # The changelog holds serialized bytes; the listener gets typed values.
    assert (b"a", (1).to_bytes(8, "big")) in [(k, v) for _, k, v, _ in context.changelog]
    if caching:
        assert ("a", 1, None, 0, None) in forwarded
    store.close()
    assert not store.is_open


@pytest.mark.parametrize("persistent", [False, True])
def test_typed_window_store_returns_windowed_keys(persistent: bool, make_context: Callable[..., Any]) -> None:
    factory = Stores.persistent_window_store if persistent else Stores.in_memory_window_store
    store: Any = (
        Stores.window_store_builder(factory("w", 10_000, 100), Serdes.string(), Serdes.string())
        .with_caching_enabled()
        .build()
    )
    context = make_context(cache=RecordCache(1 << 20))
    store.init(context, store)
    forwarded: list[tuple[Any, ...]] = []
    store.set_flush_listener(lambda *args: forwarded.append(args))
    store.put("k", "one", 0)
    store.put("k", "two", 100)
    assert store.fetch("k", 100) == "two"
    assert list(store.fetch_range("k", 0, 100)) == [(0, "one"), (100, "two")]
    assert sorted(store.fetch_all(0, 50)) == [(WindowedKey("k", 0, 100), "one")]
    store.flush()
    assert (WindowedKey("k", 100, 200), "two", None, 0, None) in forwarded
    assert sorted(store.all()) == [(WindowedKey("k", 0, 100), "one"), (WindowedKey("k", 100, 200), "two")]
    store.close()


def test_serdes_see_the_changelog_topic(make_context: Callable[..., Any]) -> None:
    topics: list[str | None] = []

    class RecordingSerde(BytesSerde):
        def serialize(self, topic: str | None, data: Any) -> bytes | None:
            topics.append(topic)
            return super().serialize(topic, data)

    store = Stores.key_value_store_builder(
        Stores.in_memory_key_value_store("counts"), RecordingSerde()
    ).build()
    store.init(make_context(), store)
    assert store.changelog_topic == "app-counts-changelog"
    store.put(b"k", b"v")
    assert topics == ["app-counts-changelog"]


def test_a_key_that_is_not_bytes_without_a_serde_is_a_clear_error(make_context: Callable[..., Any]) -> None:
    store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv")).build()
    store.init(make_context(), store)
    with pytest.raises(SerializationException, match=r"kv.*key serde"):
        store.put("text", b"v")


def test_default_serdes_fill_only_missing_serdes(make_context: Callable[..., Any]) -> None:
    store = Stores.key_value_store_builder(
        Stores.in_memory_key_value_store("kv"), Serdes.string(), None
    ).build()
    store.with_default_serdes(Serdes.long(), Serdes.long())
    store.init(make_context(), store)
    store.put("a", 5)
    assert store.get("a") == 5
    assert store.wrapped.get(b"a") == (5).to_bytes(8, "big")


def test_a_store_without_serdes_uses_the_applications_default_serdes(
    make_context: Callable[..., Any],
) -> None:
    store = Stores.key_value_store_builder(
        Stores.in_memory_key_value_store("kv"), None, Serdes.string()
    ).build()
    context = make_context()
    context.app_configs = {"default.key.serde": "long", "default.value.serde": "double"}
    store.init(context, store)
    store.put(7, "seven")
    assert store.get(7) == "seven"
    assert store.wrapped.get((7).to_bytes(8, "big")) == b"seven"
