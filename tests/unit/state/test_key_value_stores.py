"""The inner key-value stores (in-memory and RocksDB) through one suite."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kstreams.state.in_memory import InMemoryKeyValueStore
from kstreams.state.rocksdb import RocksDBKeyValueStore
from kstreams.state.store import KeyValueStore


@pytest.fixture(params=["in_memory", "rocksdb"])
def store(request: pytest.FixtureRequest, make_context: Callable[..., Any]) -> Iterator[KeyValueStore]:
    kv: KeyValueStore = (
        InMemoryKeyValueStore("kv") if request.param == "in_memory" else RocksDBKeyValueStore("kv")
    )
    context = make_context()
    kv.init(context, kv)
    yield kv
    kv.close()


def fill(store: KeyValueStore, *keys: bytes) -> None:
    for key in keys:
        store.put(key, b"v" + key)


def test_put_get_delete(store: KeyValueStore) -> None:
    assert store.get(b"a") is None
    store.put(b"a", b"1")
    assert store.get(b"a") == b"1"
    store.put(b"a", b"2")
    assert store.get(b"a") == b"2"
    assert store.delete(b"a") == b"2"
    assert store.get(b"a") is None
    assert store.delete(b"a") is None


def test_put_none_deletes(store: KeyValueStore) -> None:
    store.put(b"a", b"1")
    store.put(b"a", None)
    assert store.get(b"a") is None
    assert list(store.all()) == []


def test_put_if_absent_keeps_existing_value(store: KeyValueStore) -> None:
    assert store.put_if_absent(b"a", b"1") is None
    assert store.put_if_absent(b"a", b"2") == b"1"
    assert store.get(b"a") == b"1"


def test_put_all_writes_every_entry(store: KeyValueStore) -> None:
    store.put(b"c", b"old")
    store.put_all([(b"a", b"1"), (b"b", b"2"), (b"c", None)])
    assert list(store.all()) == [(b"a", b"1"), (b"b", b"2")]


def test_get_many_reads_as_get_does_before_and_after_a_flush(store: KeyValueStore) -> None:
    store.put_all([(b"a", b"1"), (b"b", b"2"), (b"a", b"3")])  # the later write of a key wins
    keys = [b"a", b"missing", b"b", b"a"]
    assert store.get_many(keys) == [b"3", None, b"2", b"3"] == [store.get(k) for k in keys]
    store.flush()  # RocksDB: from its buffered writes, then from the database
    store.put(b"b", None)
    assert store.get_many(keys) == [b"3", None, None, b"3"]
    assert store.get_many([]) == []


def test_range_is_inclusive_and_in_byte_order(store: KeyValueStore) -> None:
    fill(store, b"d", b"a", b"c", b"b", b"b\x00", b"e")
    assert [k for k, _ in store.range(b"b", b"d")] == [b"b", b"b\x00", b"c", b"d"]
    assert [k for k, _ in store.range(None, b"b")] == [b"a", b"b"]
    assert [k for k, _ in store.range(b"d", None)] == [b"d", b"e"]
    assert list(store.range(b"x", b"z")) == []
    assert list(store.range(b"d", b"b")) == []


def test_reverse_range_is_descending(store: KeyValueStore) -> None:
    fill(store, b"d", b"a", b"c", b"b", b"e")
    assert [k for k, _ in store.reverse_range(b"b", b"d")] == [b"d", b"c", b"b"]
    assert [k for k, _ in store.reverse_range(None, None)] == [b"e", b"d", b"c", b"b", b"a"]
    assert [k for k, _ in store.reverse_range(None, b"b")] == [b"b", b"a"]


def test_all_sees_every_live_entry_after_deletes_and_reinserts(store: KeyValueStore) -> None:
    fill(store, b"c", b"a", b"b")
    assert [k for k, _ in store.all()] == [b"a", b"b", b"c"]
    store.delete(b"b")
    store.put(b"0", b"zero")
    store.put(b"b", b"again")
    assert list(store.all()) == [(b"0", b"zero"), (b"a", b"va"), (b"b", b"again"), (b"c", b"vc")]


def test_prefix_scan_returns_keys_with_the_prefix(store: KeyValueStore) -> None:
    fill(store, b"ab", b"a", b"abc", b"b", b"aa", b"ac\xff")
    assert [k for k, _ in store.prefix_scan(b"ab")] == [b"ab", b"abc"]
    assert [k for k, _ in store.prefix_scan(b"a")] == [b"a", b"aa", b"ab", b"abc", b"ac\xff"]
    assert list(store.prefix_scan(b"z")) == []


def test_large_ranges_cross_scan_chunks(store: KeyValueStore) -> None:
    keys = [i.to_bytes(4, "big") for i in range(2000)]
    for key in reversed(keys):
        store.put(key, key)
    assert [k for k, _ in store.all()] == keys
    assert [k for k, _ in store.reverse_range(None, None)] == keys[::-1]
    assert [k for k, _ in store.range(keys[100], keys[1500])] == keys[100:1501]


def test_writes_during_iteration_do_not_break_it(store: KeyValueStore) -> None:
    fill(store, b"a", b"b", b"c")
    seen = []
    for key, _ in store.all():
        seen.append(key)
        store.delete(key)
    assert seen == [b"a", b"b", b"c"]
    assert list(store.all()) == []


def test_approximate_num_entries_counts_entries(store: KeyValueStore) -> None:
    fill(store, *(bytes([i]) for i in range(50)))
    assert 25 <= store.approximate_num_entries() <= 75


@pytest.mark.parametrize("kind", ["in_memory", "rocksdb"])
def test_restore_callback_writes_into_the_store(kind: str, make_context: Callable[..., Any]) -> None:
    context = make_context()
    store: KeyValueStore = InMemoryKeyValueStore("kv") if kind == "in_memory" else RocksDBKeyValueStore("kv")
    store.init(context, store)
    store.put(b"gone", b"x")
    context.registered["kv"]([(b"a", b"1"), (b"b", b"2"), (b"gone", None)])
    assert list(store.all()) == [(b"a", b"1"), (b"b", b"2")]
    store.close()
