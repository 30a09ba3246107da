"""Session stores (in-memory and RocksDB) through one suite, and their layers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kstreams._native.record_cache import RecordCache
from kstreams.serdes import Serdes
from kstreams.state import ReadOnlySessionStore, SessionStore, Stores, WindowedKey
from kstreams.state.caching import CachingSessionStore
from kstreams.state.changelogging import ChangeLoggingSessionStore
from kstreams.state.in_memory_session import InMemorySessionStore
from kstreams.state.metered import MeteredSessionStore
from kstreams.state.rocksdb_session import RocksDBSessionStore
from kstreams.state.window_key_schema import from_session_key, session_key

W = WindowedKey


@pytest.fixture(params=["in_memory", "rocksdb"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(kind: str, open_store: Callable[[Any], Any]) -> Callable[..., SessionStore]:
    def make(retention_ms: int = 1000) -> SessionStore:
        cls = InMemorySessionStore if kind == "in_memory" else RocksDBSessionStore
        store: SessionStore = open_store(cls("s", retention_ms))
        return store

    return make


def test_put_fetch_session_and_remove(make_store: Callable[..., SessionStore]) -> None:
    store = make_store()
    store.put(W(b"k", 10, 20), b"a")
    store.put(W(b"k", 30, 30), b"b")
    assert store.fetch_session(b"k", 10, 20) == b"a"
    assert store.fetch_session(b"k", 10, 30) is None
    store.remove(W(b"k", 10, 20))
    assert store.fetch_session(b"k", 10, 20) is None
    store.put(W(b"k", 30, 30), None)
    assert list(store.fetch(b"k")) == []


def test_find_sessions_returns_sessions_a_record_could_merge_with(
    make_store: Callable[..., SessionStore],
) -> None:
    store = make_store()
    store.put(W(b"k", 0, 10), b"1")
    store.put(W(b"k", 20, 40), b"2")
    store.put(W(b"k", 50, 60), b"3")
    store.put(W(b"j", 20, 40), b"other")
    store.put(W(b"k\x00", 20, 40), b"longer key")
    # end >= 15 and start <= 50
    assert list(store.find_sessions(b"k", 15, 50)) == [(W(b"k", 20, 40), b"2"), (W(b"k", 50, 60), b"3")]
    assert list(store.find_sessions(b"k", 41, 49)) == []
    assert [s for s, _ in store.fetch(b"k")] == [W(b"k", 0, 10), W(b"k", 20, 40), W(b"k", 50, 60)]


def test_sessions_are_ordered_by_end_then_start(make_store: Callable[..., SessionStore]) -> None:
    store = make_store()
    store.put(W(b"k", 5, 30), b"x")
    store.put(W(b"k", 1, 30), b"y")
    store.put(W(b"k", 0, 20), b"z")
    assert [s for s, _ in store.fetch(b"k")] == [W(b"k", 0, 20), W(b"k", 1, 30), W(b"k", 5, 30)]


def test_sessions_that_ended_before_the_retention_are_dropped(
    make_store: Callable[..., SessionStore],
) -> None:
    store = make_store(retention_ms=100)
    store.put(W(b"k", 0, 10), b"old")
    store.put(W(b"k", 100, 110), b"new")  # stream time 110: sessions ending at or before 10 expire
    assert store.fetch_session(b"k", 0, 10) is None
    assert list(store.fetch(b"k")) == [(W(b"k", 100, 110), b"new")]
    store.put(W(b"k", 0, 5), b"late")
    assert store.fetch_session(b"k", 0, 5) is None


def test_restore_reads_session_changelog_keys(make_store: Callable[..., SessionStore]) -> None:
    store = make_store()
    store.restore_batch(  # type: ignore[attr-defined]
        [(session_key(b"k", 1, 2), b"a"), (session_key(b"k", 3, 4), b"b"), (session_key(b"k", 1, 2), None)]
    )
    assert list(store.fetch(b"k")) == [(W(b"k", 3, 4), b"b")]


def test_session_key_puts_end_before_start() -> None:
    assert session_key(b"k", 1, 2) == b"k" + (2).to_bytes(8, "big") + (1).to_bytes(8, "big")
    assert from_session_key(session_key(b"key", 7, 9)) == (b"key", 7, 9)


def test_session_changes_are_logged(make_context: Callable[..., Any]) -> None:
    context = make_context()
    store = ChangeLoggingSessionStore(InMemorySessionStore("s", 1000))
    store.init(context, store)
    context.timestamp = 7
    store.put(W(b"k", 1, 5), b"v")
    store.remove(W(b"k", 1, 5))
    assert context.changelog == [
        ("s", session_key(b"k", 1, 5), b"v", 7),
        ("s", session_key(b"k", 1, 5), None, 7),
    ]


def test_cached_sessions_merge_with_the_store_and_forward_on_flush(make_context: Callable[..., Any]) -> None:
    context = make_context(cache=RecordCache(1 << 20))
    inner = InMemorySessionStore("s", 10_000)
    store = CachingSessionStore(ChangeLoggingSessionStore(inner))
    store.init(context, store)
    forwarded: list[tuple[Any, ...]] = []
    store.set_flush_listener(lambda *args: forwarded.append(args))
    store.put(W(b"k", 0, 10), b"1")
    store.flush()
    # A session merge: the old session is removed, a wider one written.
    store.remove(W(b"k", 0, 10))
    store.put(W(b"k", 0, 30), b"2")
    store.put(W(b"k\x00", 0, 30), b"other key")
    assert list(store.find_sessions(b"k", 0, 100)) == [(W(b"k", 0, 30), b"2")]
    assert store.fetch_session(b"k", 0, 30) == b"2"
    assert list(inner.fetch(b"k")) == [(W(b"k", 0, 10), b"1")]
    store.flush()
    assert (W(b"k", 0, 10), None, b"1", 0, None) in forwarded
    assert (W(b"k", 0, 30), b"2", None, 0, None) in forwarded
    assert list(inner.fetch(b"k")) == [(W(b"k", 0, 30), b"2")]


def test_builder_stacks_typed_session_store_and_query_view(
    kind: str, make_context: Callable[..., Any]
) -> None:
    factory = Stores.persistent_session_store if kind == "rocksdb" else Stores.in_memory_session_store
    builder = Stores.session_store_builder(factory("s", 60_000), Serdes.string(), Serdes.long())
    assert builder.store_type == "session" and builder.retention_ms == 60_000
    store: Any = builder.with_caching_enabled().build()
    assert isinstance(store, MeteredSessionStore) and isinstance(store.wrapped, CachingSessionStore)
    store.init(make_context(cache=RecordCache(1 << 20)), store)
    store.put(W("user", 100, 200), 3)
    assert store.fetch_session("user", 100, 200) == 3
    assert list(store.find_sessions("user", 150, 150)) == [(W("user", 100, 200), 3)]
    view: ReadOnlySessionStore[str, int] = ReadOnlySessionStore("s", [store])
    assert list(view.fetch("user")) == [(W("user", 100, 200), 3)]
    assert view.fetch_session("user", 100, 200) == 3
    store.flush()
    store.close()


def test_find_sessions_by_end_returns_every_keys_sessions_ending_in_range(
    make_store: Callable[..., SessionStore],
) -> None:
    store = make_store()
    store.put(W(b"k", 0, 10), b"1")
    store.put(W(b"j", 5, 20), b"2")
    store.put(W(b"k", 15, 20), b"3")
    store.put(W(b"k\x00", 20, 20), b"longer key")
    store.put(W(b"a", 30, 31), b"after")
    # 10 <= end <= 20, by end, then key bytes, then start; both bounds inclusive.
    assert list(store.find_sessions_by_end(10, 20)) == [
        (W(b"k", 0, 10), b"1"),
        (W(b"j", 5, 20), b"2"),
        (W(b"k", 15, 20), b"3"),
        (W(b"k\x00", 20, 20), b"longer key"),
    ]
    assert next(iter(store.find_sessions_by_end(20, 20))) == (W(b"j", 5, 20), b"2")
    assert list(store.find_sessions_by_end(21, 29)) == []
    store.remove(W(b"j", 5, 20))
    assert [s for s, _ in store.find_sessions_by_end(0, 100)] == [
        W(b"k", 0, 10),
        W(b"k", 15, 20),
        W(b"k\x00", 20, 20),
        W(b"a", 30, 31),
    ]


def test_find_sessions_by_end_skips_sessions_past_the_retention(
    make_store: Callable[..., SessionStore],
) -> None:
    store = make_store(retention_ms=100)
    store.put(W(b"k", 0, 50), b"old")
    store.put(W(b"j", 60, 150), b"live")
    store.put(W(b"k", 200, 250), b"new")
    # Stream time 250, retention 100: ends at or before 150 are gone.
    assert list(store.find_sessions_by_end(0, 300)) == [(W(b"k", 200, 250), b"new")]


def test_find_sessions_by_end_through_every_layer(kind: str, make_context: Callable[..., Any]) -> None:
    factory = Stores.persistent_session_store if kind == "rocksdb" else Stores.in_memory_session_store
    store: Any = (
        Stores.session_store_builder(factory("s", 60_000), Serdes.string(), Serdes.long())
        .with_caching_enabled()
        .build()
    )
    assert isinstance(store.wrapped, CachingSessionStore)
    assert isinstance(store.wrapped.wrapped, ChangeLoggingSessionStore)
    store.init(make_context(cache=RecordCache(1 << 20)), store)
    store.put(W("b", 0, 10), 1)
    store.put(W("a", 5, 10), 2)
    store.flush()  # these two in the inner store, the rest only in the cache
    store.put(W("a", 12, 12), 3)
    store.remove(W("b", 0, 10))  # a cached tombstone hides the stored session
    store.put(W("c", 1, 10), 4)
    assert list(store.find_sessions_by_end(0, 11)) == [(W("a", 5, 10), 2), (W("c", 1, 10), 4)]
    assert list(store.find_sessions_by_end(10, 12)) == [
        (W("a", 5, 10), 2),
        (W("c", 1, 10), 4),
        (W("a", 12, 12), 3),
    ]
    view: ReadOnlySessionStore[str, int] = ReadOnlySessionStore("s", [store])
    assert list(view.find_sessions_by_end(12, 12)) == [(W("a", 12, 12), 3)]
    store.flush()
    assert list(store.find_sessions_by_end(0, 100)) == [
        (W("a", 5, 10), 2),
        (W("c", 1, 10), 4),
        (W("a", 12, 12), 3),
    ]
    store.close()


def test_indexed_session_reads_agree_between_the_stores_through_writes_expiry_and_reopen(
    make_context: Callable[..., Any], tmp_path: Any
) -> None:
    """Each store answers one of the reads from an index in memory that its writes and expiry
    keep: RocksDB the reads by end (every key's sessions ending in a range), the in-memory store a
    key's sessions. Through puts, removes, expiry, reads by end that move forward (emission on
    close), reads below the indexed ends, a restore and a reopen, the two return the same."""
    import random

    rng = random.Random(5)
    model = InMemorySessionStore("s", 400)
    model.init(make_context(state_dir=tmp_path / "model"), model)
    context = make_context(state_dir=tmp_path / "rocks")
    store = RocksDBSessionStore("s", 400, segment_interval_ms=100)
    store.init(context, store)
    close_time = 0
    try:
        for step in range(3_000):
            key = b"k%d" % rng.randrange(12)
            end = step // 3 + rng.randrange(40)
            session = W(key, max(0, end - rng.randrange(20)), end)
            value = None if rng.random() < 0.2 else b"v%d" % step
            for target in (model, store):
                target.put(session, value)
            probe = b"k%d" % rng.randrange(13)
            earliest, latest = step // 3 - rng.randrange(60), step // 3 + rng.randrange(60)
            assert list(model.find_sessions(probe, earliest, latest)) == list(
                store.find_sessions(probe, earliest, latest)
            )
            if step % 7 == 0:
                # emission on close: each read starts where the last one ended
                upper = step // 3 - 30
                assert list(store.find_sessions_by_end(close_time, upper)) == list(
                    model.find_sessions_by_end(close_time, upper)
                )
                close_time = max(close_time, upper + 1)
            if step % 101 == 0:
                low = rng.randrange(step // 3 + 1)
                assert list(store.find_sessions_by_end(low, low + 200)) == list(
                    model.find_sessions_by_end(low, low + 200)
                )
            if step == 1_500:
                # a restore's writes reach the index too
                restored = [(session_key(b"r%d" % i, step // 3, step // 3 + i), b"r") for i in range(5)]
                for target in (model, store):
                    target.restore_batch(restored)
            if step == 2_000:
                store.close()
                store = RocksDBSessionStore("s", 400, segment_interval_ms=100)
                store.init(context, store)
        assert list(store.find_sessions_by_end(0, 10_000)) == list(model.find_sessions_by_end(0, 10_000))
    finally:
        store.close()
        model.close()


def test_in_memory_key_index_holds_only_live_sessions(open_store: Callable[[Any], Any]) -> None:
    """The key -> ends index forgets a key's end when its last session there is removed or expires,
    so keys that went quiet cost no memory once their sessions are gone."""
    store: InMemorySessionStore = open_store(InMemorySessionStore("s", 100))
    for i in range(50):
        store.put(W(b"quiet-%d" % i, i, i + 1), b"v")
    store.put(W(b"removed", 500, 510), b"v")
    store.remove(W(b"removed", 500, 510))
    store.put(W(b"live", 600, 600), b"v")  # stream time 600: every quiet session expires
    assert store._ends_of == {b"live": [600]}
    assert list(store.find_sessions(b"live", 0, 1000)) == [(W(b"live", 600, 600), b"v")]
