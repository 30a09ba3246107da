"""``Stores.lru_map``: an in-memory key-value store of bounded size that forgets its least recently
used key, logging a tombstone for each key it forgets (Kafka's ``lruMap``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kstreams import KeyValue, Materialized, Stores, StreamsBuilder, TopologyTestDriver
from kstreams.errors import TopologyException
from kstreams.serdes import Serdes
from kstreams.state.in_memory_lru import MemoryLRUCache
from tests.unit.state.conftest import RecordingContext

LONG = Serdes.long()


def _lru(make_context: Callable[..., RecordingContext], size: int, caching: bool = False) -> tuple[Any, Any]:
    builder = Stores.key_value_store_builder(Stores.lru_map("lru", size), Serdes.string(), LONG)
    if caching:
        from kstreams._native.record_cache import RecordCache

        builder.with_caching_enabled()
        context = make_context(cache=RecordCache(1 << 20))
    else:
        context = make_context()
    store = builder.build()
    store.init(context, store)
    return store, context


def _changelog(context: RecordingContext) -> list[tuple[str, int | None, int]]:
    return [
        (key.decode(), None if value is None else int.from_bytes(value, "big", signed=True), ts)
        for _, key, value, ts in context.changelog
    ]


def test_the_least_recently_used_key_is_forgotten_and_its_tombstone_logged(
    make_context: Callable[..., RecordingContext],
) -> None:
    store, context = _lru(make_context, 2)
    context.timestamp = 1
    store.put("a", 1)
    context.timestamp = 2
    store.put("b", 2)
    assert store.get("a") == 1  # a read makes "a" the most recently used
    context.timestamp = 3
    store.put("c", 3)
    assert store.get("b") is None and store.get("a") == 1 and store.get("c") == 3
    assert list(store.all()) == [("a", 1), ("c", 3)]
    assert store.approximate_num_entries() == 2
    # The tombstone goes before the put that made room, at that put's timestamp.
    assert _changelog(context) == [("a", 1, 1), ("b", 2, 2), ("b", None, 3), ("c", 3, 3)]
    store.close()


def test_a_put_of_a_known_key_makes_it_the_most_recently_used(
    make_context: Callable[..., RecordingContext],
) -> None:
    store, _ = _lru(make_context, 2)
    store.put("a", 1)
    store.put("b", 2)
    store.put("a", 10)
    store.put("c", 3)
    assert list(store.all()) == [("a", 10), ("c", 3)]
    store.delete("a")
    store.put("d", 4)
    assert list(store.all()) == [("c", 3), ("d", 4)]
    store.close()


def test_ranges_are_in_key_order_and_leave_the_usage_order(
    make_context: Callable[..., RecordingContext],
) -> None:
    store, _ = _lru(make_context, 3)
    for key, value in [("c", 3), ("a", 1), ("b", 2)]:
        store.put(key, value)
    assert list(store.range("a", "b")) == [("a", 1), ("b", 2)]
    assert list(store.reverse_range(None, None)) == [("c", 3), ("b", 2), ("a", 1)]
    assert list(store.prefix_scan("b")) == [("b", 2)]
    store.put("d", 4)  # "c" was put first and only ranged over since: it goes
    assert [key for key, _ in store.all()] == ["a", "b", "d"]
    store.close()


def test_restoration_replays_the_changelog_without_logging_what_it_drops(
    make_context: Callable[..., RecordingContext],
) -> None:
    store, context = _lru(make_context, 2)
    for key, value in [("a", 1), ("b", 2), ("c", 3), ("d", 4)]:
        store.put(key, value)
    changelog = [(key, value) for _, key, value, _ in context.changelog]
    store.close()
    restored, restoring = _lru(make_context, 2)
    restoring.registered["lru"](changelog)
    assert list(restored.all()) == [("c", 3), ("d", 4)]
    assert restoring.changelog == []
    restored.close()


def test_a_size_of_zero_keeps_nothing(make_context: Callable[..., RecordingContext]) -> None:
    store, context = _lru(make_context, 0)
    store.put("a", 1)
    assert store.get("a") is None and list(store.all()) == []
    # As Kafka's: the entry written is dropped at once (its tombstone), then the put is logged.
    assert _changelog(context) == [("a", None, 0), ("a", 1, 0)]
    store.close()


def test_a_cached_lru_store_logs_the_forgotten_key_at_the_flushed_entry_timestamp(
    make_context: Callable[..., RecordingContext],
) -> None:
    store, context = _lru(make_context, 1, caching=True)
    context.timestamp = 5
    store.put("a", 1)
    context.timestamp = 7
    store.put("b", 2)
    context.timestamp = 100
    store.flush()
    assert _changelog(context) == [("a", 1, 5), ("a", None, 7), ("b", 2, 7)]
    store.close()


@pytest.mark.parametrize("size", [-1, 2.5, "3", True])
def test_a_bad_size_is_refused_when_the_supplier_is_made(size: Any) -> None:
    with pytest.raises(TopologyException, match="max_cache_size"):
        Stores.lru_map("lru", size)


def test_the_supplier_makes_lru_stores_with_kafkas_metrics_scope() -> None:
    supplier = Stores.lru_map("lru", 5)
    store = supplier.get()
    assert isinstance(store, MemoryLRUCache) and store.max_cache_size == 5 and not store.persistent
    assert supplier.metrics_scope == "in-memory-lru"


def test_a_count_over_an_lru_map_counts_a_forgotten_key_from_one() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("in")
        .group_by_key()
        .count(Materialized.as_(Stores.lru_map("counts", 2)))
        .to_stream()
        .to("out")
    )
    config = {
        "application.id": "lru",
        "default.key.serde": Serdes.string(),
        "default.value.serde": Serdes.string(),
        # A record cache would still hold what the map forgot (as in Kafka Streams).
        "statestore.cache.max.bytes": 0,
    }
    with TopologyTestDriver(builder.build(), config) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        for i, key in enumerate("abacba"):
            source.pipe_input(key, "v", i)
        out = driver.create_output_topic("out", Serdes.string(), LONG)
        assert out.read_key_values_to_list() == [
            KeyValue("a", 1),
            KeyValue("b", 1),
            KeyValue("a", 2),
            KeyValue("c", 1),
            KeyValue("b", 1),
            KeyValue("a", 1),
        ]
        changelog = driver.create_output_topic("lru-counts-changelog", Serdes.string(), LONG)
        assert [(kv.key, kv.value) for kv in changelog.read_key_values_to_list()] == [
            ("a", 1),
            ("b", 1),
            ("a", 2),
            ("b", None),
            ("c", 1),
            ("a", None),
            ("b", 1),
            ("c", None),
            ("a", 1),
        ]
        assert sorted(driver.get_key_value_store("counts").all()) == [("a", 1), ("b", 1)]
