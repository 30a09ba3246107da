"""What only the RocksDB stores do: persist across reopen, batch writes until flush."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from kstreams.errors import ProcessorStateException
from kstreams.state.rocksdb import RocksDBDatabase, RocksDBKeyValueStore
from kstreams.state.rocksdb_window import RocksDBWindowStore


def test_data_survives_close_and_reopen(make_context: Callable[..., Any]) -> None:
    context = make_context()
    store = RocksDBKeyValueStore("kv")
    store.init(context, store)
    store.put(b"a", b"1")
    store.put(b"b", b"2")
    store.flush()
    store.close()
    assert not store.is_open

    reopened = RocksDBKeyValueStore("kv")
    reopened.init(make_context(), reopened)
    assert list(reopened.all()) == [(b"a", b"1"), (b"b", b"2")]
    reopened.close()


def test_store_lives_under_the_task_rocksdb_directory(make_context: Callable[..., Any]) -> None:
    context = make_context()
    store = RocksDBKeyValueStore("counts")
    store.init(context, store)
    assert store.path == os.path.join(context.state_dir(), "rocksdb", "counts")
    assert os.path.isdir(store.path)
    store.close()


def test_writes_wait_in_a_batch_until_flush_and_reads_see_them(tmp_path: Any) -> None:
    db = RocksDBDatabase("kv", str(tmp_path / "db"))
    db.put(b"a", b"1")
    db.put(b"b", None)
    assert db.buffered_writes == 2
    assert db.get(b"a") == b"1"
    db.write_pending()
    assert db.buffered_writes == 0
    assert db.get(b"a") == b"1"
    db.close()


def test_an_open_database_cannot_be_opened_twice(tmp_path: Any) -> None:
    db = RocksDBDatabase("kv", str(tmp_path / "db"))
    with pytest.raises(ProcessorStateException, match="kv"):
        RocksDBDatabase("kv", str(tmp_path / "db"))
    db.close()


def test_an_abandoned_iterator_does_not_keep_the_store_open(make_context: Callable[..., Any]) -> None:
    store = RocksDBKeyValueStore("kv")
    store.init(make_context(), store)
    for i in range(2000):
        store.put(i.to_bytes(4, "big"), b"v")
    iterator = store.all()
    next(iterator)
    store.close()
    reopened = RocksDBKeyValueStore("kv")
    reopened.init(make_context(), reopened)
    assert reopened.approximate_num_entries() > 0
    reopened.close()
    # The closed store ends the scan (after the entries already read) instead of failing.
    rest = [key for key, _ in iterator]
    assert len(rest) < 1999
    assert rest == sorted(rest)


def test_reading_a_closed_store_raises(make_context: Callable[..., Any]) -> None:
    store = RocksDBKeyValueStore("kv")
    with pytest.raises(ProcessorStateException, match="kv"):
        store.get(b"a")


def test_window_segments_survive_reopen_and_expire_as_directories(make_context: Callable[..., Any]) -> None:
    context = make_context()
    store = RocksDBWindowStore("w", retention_ms=120_000, window_size_ms=10_000, retain_duplicates=False)
    store.init(context, store)
    store.put(b"k", b"old", 0)
    store.put(b"k", b"new", 100_000)
    store.flush()
    store.close()

    reopened = RocksDBWindowStore("w", retention_ms=120_000, window_size_ms=10_000, retain_duplicates=False)
    reopened.init(make_context(), reopened)
    assert list(reopened.fetch_range(b"k", 0, 200_000)) == [(0, b"old"), (100_000, b"new")]
    directory = os.path.join(context.state_dir(), "rocksdb", "w")
    assert sorted(os.listdir(directory)) == ["w.0", "w.60000"]
    reopened.put(b"k", b"late", 300_000)  # stream time 300000: segments before 180000 expire
    assert sorted(os.listdir(directory)) == ["w.300000"]
    assert list(reopened.fetch_range(b"k", 0, 400_000)) == [(300_000, b"late")]
    reopened.close()


def test_window_segments_expire_as_stream_time_passes_them(make_context: Callable[..., Any]) -> None:
    # Expired segments are looked for only when stream time crosses a segment boundary; each
    # must still go exactly when it falls out of the retention, and older writes stay refused.
    context = make_context()
    store = RocksDBWindowStore("w", retention_ms=120_000, window_size_ms=10_000, retain_duplicates=False)
    store.init(context, store)
    directory = os.path.join(context.state_dir(), "rocksdb", "w")
    expected = {
        0: ["w.0"],
        60_000: ["w.0", "w.60000"],
        120_000: ["w.0", "w.120000", "w.60000"],
        170_000: ["w.0", "w.120000", "w.60000"],  # segment 0 holds 0..59999: 170000 - 120000 < 60000
        180_000: ["w.120000", "w.180000", "w.60000"],
        200_000: ["w.120000", "w.180000", "w.60000"],
        90_000: ["w.120000", "w.180000", "w.60000"],  # older but live: written, nothing expires
        240_000: ["w.120000", "w.180000", "w.240000"],
    }
    for timestamp, directories in expected.items():
        store.put(b"k", str(timestamp).encode(), timestamp)
        assert sorted(os.listdir(directory)) == directories, timestamp
    store.put(b"k", b"too late", 100_000)  # before the retention (stream time 240000): refused
    assert store.fetch(b"k", 100_000) is None
    assert store.fetch(b"k", 90_000) is None  # its segment expired
    assert store.fetch(b"k", 200_000) == b"200000"
    store.close()


def test_scans_of_every_length_read_each_entry_once_in_order(make_context: Callable[..., Any]) -> None:
    # A scan reads through short-lived iterators of growing size (16, 64, 256, 512 entries): a
    # range of any length, forward or backward, must come out whole and in order.
    store = RocksDBKeyValueStore("kv")
    store.init(make_context(), store)
    keys = [f"k{i:05d}".encode() for i in range(3000)]
    for key in keys:
        store.put(key, key[::-1])
    store.flush()
    store.put(b"k00100", None)  # a buffered deletion: written before the scan
    model = [key for key in keys if key != b"k00100"]
    for lo, hi in [(0, 1), (0, 16), (5, 21), (17, 90), (90, 1000), (0, 2999), (1500, 2999), (2999, 2999)]:
        want = [key for key in model if keys[lo] <= key <= keys[hi]]
        assert [k for k, _ in store.range(keys[lo], keys[hi])] == want
        assert [k for k, _ in store.reverse_range(keys[lo], keys[hi])] == want[::-1]
    assert [k for k, v in store.all() if v == k[::-1]] == model
    store.close()
