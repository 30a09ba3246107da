"""The inner window stores (in-memory and RocksDB) through one suite."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kstreams.errors import TopologyException
from kstreams.state.in_memory import InMemoryWindowStore
from kstreams.state.rocksdb_window import RocksDBWindowStore
from kstreams.state.store import WindowedKey, WindowStore
from kstreams.state.window_key_schema import changelog_key, key_and_start, window_key

Factory = Callable[..., WindowStore]


@pytest.fixture(params=["in_memory", "rocksdb"])
def make_store(request: pytest.FixtureRequest, open_store: Callable[[Any], Any]) -> Factory:
    def make(
        retention_ms: int = 1000, window_size_ms: int = 100, retain_duplicates: bool = False
    ) -> WindowStore:
        cls = InMemoryWindowStore if request.param == "in_memory" else RocksDBWindowStore
        store: WindowStore = open_store(cls("w", retention_ms, window_size_ms, retain_duplicates))
        return store

    return make


def test_fetch_returns_the_value_of_one_window(make_store: Factory) -> None:
    store = make_store()
    store.put(b"k", b"1", 100)
    store.put(b"k", b"2", 200)
    store.put(b"k", b"3", 200)
    assert store.fetch(b"k", 100) == b"1"
    assert store.fetch(b"k", 200) == b"3"
    assert store.fetch(b"k", 300) is None
    assert store.fetch(b"other", 100) is None


def test_put_none_deletes_a_window(make_store: Factory) -> None:
    store = make_store()
    store.put(b"k", b"1", 100)
    store.put(b"k", None, 100)
    assert store.fetch(b"k", 100) is None
    assert list(store.all()) == []


def test_fetch_range_returns_one_keys_windows_ascending(make_store: Factory) -> None:
    store = make_store()
    for start in (300, 100, 200, 400):
        store.put(b"k", b"v%d" % start, start)
    store.put(b"j", b"x", 200)
    # A longer key starting with the same bytes must not leak into b"k"'s windows.
    store.put(b"k" + (0).to_bytes(8, "big"), b"y", 250)
    assert list(store.fetch_range(b"k", 150, 350)) == [(200, b"v200"), (300, b"v300")]
    assert list(store.fetch_range(b"k", 0, 1000)) == [
        (100, b"v100"),
        (200, b"v200"),
        (300, b"v300"),
        (400, b"v400"),
    ]
    assert list(store.fetch_range(b"k", 500, 600)) == []


def test_fetch_range_from_a_negative_time_finds_early_windows(make_store: Factory) -> None:
    store = make_store()
    store.put(b"k", b"0", 0)
    store.put(b"k", b"50", 50)
    assert list(store.fetch_range(b"k", -100, 60)) == [(0, b"0"), (50, b"50")]
    assert list(store.fetch_range(b"k", -100, -1)) == []


def test_fetch_all_and_all_return_windowed_keys(make_store: Factory) -> None:
    store = make_store(window_size_ms=50)
    store.put(b"a", b"1", 100)
    store.put(b"b", b"2", 100)
    store.put(b"a", b"3", 200)
    assert sorted(store.fetch_all(150, 250)) == [(WindowedKey(b"a", 200, 250), b"3")]
    assert sorted(store.all()) == [
        (WindowedKey(b"a", 100, 150), b"1"),
        (WindowedKey(b"a", 200, 250), b"3"),
        (WindowedKey(b"b", 100, 150), b"2"),
    ]


def test_retention_drops_windows_older_than_stream_time_minus_retention(make_store: Factory) -> None:
    store = make_store(retention_ms=1000, window_size_ms=100)
    store.put(b"k", b"old", 0)
    store.put(b"k", b"mid", 500)
    store.put(b"k", b"new", 1000)  # stream time 1000: window 0 is now expired (0 <= 1000 - 1000)
    assert store.fetch(b"k", 0) is None
    assert list(store.fetch_range(b"k", 0, 2000)) == [(500, b"mid"), (1000, b"new")]
    store.put(b"k", b"late", 0)  # a write to an expired window is dropped
    assert store.fetch(b"k", 0) is None
    store.put(b"k", b"newest", 1600)
    assert [start for start, _ in store.fetch_range(b"k", 0, 2000)] == [1000, 1600]
    assert {w.start for w, _ in store.all()} == {1000, 1600}


def test_retained_duplicates_are_all_returned_in_put_order(make_store: Factory) -> None:
    store = make_store(retain_duplicates=True)
    store.put(b"k", b"1", 100)
    store.put(b"k", b"2", 100)
    store.put(b"k", None, 100)  # ignored: duplicates are never deleted
    store.put(b"k", b"3", 200)
    assert list(store.fetch_range(b"k", 0, 1000)) == [(100, b"1"), (100, b"2"), (200, b"3")]
    assert store.fetch(b"k", 100) == b"1"
    assert sorted(v for _, v in store.all()) == [b"1", b"2", b"3"]


def test_restore_reads_changelog_keys(make_store: Factory, make_context: Callable[..., Any]) -> None:
    store = make_store()
    store.restore_batch(  # type: ignore[attr-defined]
        [
            (changelog_key(b"k", 100, 0), b"1"),
            (changelog_key(b"j", 200, 0), b"2"),
            (changelog_key(b"k", 100, 0), None),
        ]
    )
    assert store.fetch(b"k", 100) is None
    assert store.fetch(b"j", 200) == b"2"


def test_changes_keyed_as_the_changelog_write_as_puts_and_read_back_many_at_once(make_store: Factory) -> None:
    store = make_store(retention_ms=1000, window_size_ms=100)
    store.put(b"k", b"old", 0)
    store.put_changes(  # type: ignore[attr-defined]
        [
            (changelog_key(b"k", 100, 0), b"1"),
            (changelog_key(b"j", 100, 0), b"2"),
            (changelog_key(b"k", 100, 0), b"3"),  # the later change of a window wins
            (changelog_key(b"k", 1000, 0), b"4"),  # stream time 1000: window 0 expires
            (changelog_key(b"j", 100, 0), None),  # a deletion
            (changelog_key(b"k", -1000, 0), b"late"),  # past the retention: dropped
        ]
    )
    names = [window_key(b"k", 100), window_key(b"j", 100), window_key(b"k", 1000), window_key(b"k", 0)]
    assert store.fetch_many(names) == [b"3", None, b"4", None]  # type: ignore[attr-defined]
    assert [store.fetch(*key_and_start(name)) for name in names] == [b"3", None, b"4", None]
    assert sorted(store.all()) == [(WindowedKey(b"k", 100, 200), b"3"), (WindowedKey(b"k", 1000, 1100), b"4")]


def test_retention_smaller_than_window_size_is_rejected() -> None:
    with pytest.raises(TopologyException, match="retention"):
        InMemoryWindowStore("w", 10, 100, False)
    with pytest.raises(TopologyException, match="retention"):
        RocksDBWindowStore("w", 10, 100, False)
