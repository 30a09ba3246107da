"""RecordCache: the byte-bounded LRU record cache (Kafka's ThreadCache/NamedCache semantics)."""

from __future__ import annotations

import threading

import pytest

from kstreams._native.record_cache import RecordCache

__all__: list[str] = []

OVERHEAD = RecordCache.ENTRY_OVERHEAD


def entry_bytes(key: bytes, value: bytes | None) -> int:
    return len(key) + (len(value) if value is not None else 0) + OVERHEAD


class Recorder:
    """A flush listener that records every batch it is handed."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[bytes, bytes | None, int]]] = []

    def __call__(self, entries: list[tuple[bytes, bytes | None, int]]) -> None:
        self.batches.append(list(entries))

    @property
    def keys(self) -> list[list[bytes]]:
        return [[k for k, _, _ in batch] for batch in self.batches]


def make(max_bytes: int, *namespaces: str) -> tuple[RecordCache, dict[str, Recorder]]:
    cache = RecordCache(max_bytes)
    listeners = {ns: Recorder() for ns in namespaces}
    for ns, listener in listeners.items():
        cache.add_namespace(ns, listener)
    return cache, listeners


def test_get_returns_value_and_timestamp_and_counts_hits_and_misses() -> None:
    cache, _ = make(10_000, "t")
    cache.put("t", b"k", b"v", 7)
    assert cache.get("t", b"k") == (b"v", 7)
    assert cache.get("t", b"absent") is None
    assert (cache.hits, cache.misses) == (1, 1)


def test_cached_tombstone_is_a_hit_with_value_none() -> None:
    cache, _ = make(10_000, "t")
    cache.put("t", b"k", None, 3)
    assert cache.get("t", b"k") == (None, 3)
    assert cache.hits == 1


def test_rewriting_a_cached_key_keeps_only_the_newest_value_whatever_its_size() -> None:
    # A re-put copies into the entry's buffer: shrinking, growing, a tombstone and back must each
    # read back exactly and be accounted at their own size.
    cache, flushed = make(1 << 20, "a")
    key = b"a-key-longer-than-fifteen-bytes"
    for value in [b"x" * 100_000, b"small", None, b"", b"y" * 40, b"z" * 16]:
        cache.put("a", key, value, 7)
        assert cache.get("a", key) == (value, 7)
        assert cache.size_bytes == entry_bytes(key, value)
    cache.flush("a")
    assert flushed["a"].batches == [[(key, b"z" * 16, 7)]]


def test_byte_accounting_counts_key_value_and_fixed_overhead() -> None:
    cache, _ = make(10_000, "a", "b")
    cache.put("a", b"key", b"value", 1)
    cache.put("b", b"k", None, 1)
    assert cache.size_bytes == entry_bytes(b"key", b"value") + entry_bytes(b"k", None)
    assert cache.namespace_bytes("a") == entry_bytes(b"key", b"value")
    cache.put("a", b"key", b"v", 2)  # overwrite shrinks the entry
    assert cache.size_bytes == entry_bytes(b"key", b"v") + entry_bytes(b"k", None)
    cache.delete("a", b"key")
    assert cache.size_bytes == entry_bytes(b"k", None)
    assert len(cache) == 1
    assert cache.namespace_size("b") == 1


def test_lru_order_follows_puts_and_get_hits() -> None:
    cache, _ = make(10_000, "t")
    for k in (b"a", b"b", b"c"):
        cache.put("t", k, b"v", 0)
    cache.get("t", b"a")
    assert cache.lru_keys("t") == [b"b", b"c", b"a"]


def test_over_limit_evicts_least_recently_used_clean_entries_silently() -> None:
    size = entry_bytes(b"k0", b"v")
    cache, listeners = make(3 * size, "t")
    for i in range(3):
        cache.put_clean("t", f"k{i}".encode(), b"v", 0)
    cache.get("t", b"k0")  # k1 is now least recently used
    cache.put_clean("t", b"k3", b"v", 0)
    assert sorted(cache.keys("t")) == [b"k0", b"k2", b"k3"]
    assert cache.evictions == 1
    assert listeners["t"].batches == []


def test_evicting_dirty_entry_flushes_namespace_evicted_first_then_arrival_order() -> None:
    size = entry_bytes(b"k0", b"v")
    cache, listeners = make(3 * size, "t")
    cache.put("t", b"k0", b"v", 0)
    cache.put("t", b"k1", b"v", 1)
    cache.put("t", b"k2", b"v", 2)
    cache.get("t", b"k0")  # LRU tail is now k1; arrival order stays k0, k1, k2
    cache.put("t", b"k3", b"v", 3)
    assert listeners["t"].keys == [[b"k1", b"k0", b"k2", b"k3"]]
    assert cache.dirty_count("t") == 0
    assert b"k1" not in cache.keys("t")
    assert cache.flushes == 1


def test_re_put_dirty_key_moves_it_to_end_of_dirty_order() -> None:
    cache, listeners = make(10_000, "t")
    cache.put("t", b"a", b"1", 1)
    cache.put("t", b"b", b"1", 2)
    cache.put("t", b"a", b"2", 3)
    cache.flush("t")
    assert listeners["t"].batches == [[(b"b", b"1", 2), (b"a", b"2", 3)]]


def test_flush_marks_clean_and_second_flush_hands_nothing() -> None:
    cache, listeners = make(10_000, "t")
    cache.put("t", b"a", b"1", 1)
    cache.flush("t")
    cache.flush("t")
    assert len(listeners["t"].batches) == 1
    assert cache.get("t", b"a") == (b"1", 1)  # still cached, clean


def test_tombstones_are_removed_after_flush() -> None:
    cache, listeners = make(10_000, "t")
    cache.put("t", b"gone", None, 1)
    cache.put("t", b"kept", b"v", 2)
    cache.flush("t")
    assert listeners["t"].batches == [[(b"gone", None, 1), (b"kept", b"v", 2)]]
    assert cache.get("t", b"gone") is None
    assert cache.keys("t") == [b"kept"]


def test_delete_removes_without_flushing() -> None:
    cache, listeners = make(10_000, "t")
    cache.put("t", b"a", b"1", 5)
    assert cache.delete("t", b"a") == (b"1", 5)
    assert cache.delete("t", b"a") is None
    cache.flush("t")
    assert listeners["t"].batches == []
    assert cache.dirty_count() == 0


def test_put_clean_is_never_flushed_and_does_not_hide_a_pending_write() -> None:
    cache, listeners = make(10_000, "t")
    cache.put_clean("t", b"read", b"from-store", 1)
    cache.put("t", b"w", b"new", 2)
    cache.put_clean("t", b"w", b"stale", 1)
    assert cache.get("t", b"w") == (b"new", 2)
    cache.flush("t")
    assert listeners["t"].batches == [[(b"w", b"new", 2)]]


def test_put_if_absent_only_writes_missing_keys() -> None:
    cache, _ = make(10_000, "t")
    assert cache.put_if_absent("t", b"a", b"1", 1) is True
    assert cache.put_if_absent("t", b"a", b"2", 2) is False
    assert cache.get("t", b"a") == (b"1", 1)


def test_size_zero_forwards_every_put_at_once() -> None:
    cache, listeners = make(0, "t")
    cache.put("t", b"a", b"1", 1)
    cache.put("t", b"b", None, 2)
    assert listeners["t"].batches == [[(b"a", b"1", 1)], [(b"b", None, 2)]]
    assert len(cache) == 0
    assert cache.size_bytes == 0


def test_flush_all_goes_through_namespaces_in_name_order() -> None:
    order: list[str] = []
    cache = RecordCache(10_000)
    for ns in ("b", "a", "c"):
        cache.add_namespace(ns, lambda entries, ns=ns: order.append(ns))
        cache.put(ns, b"k", b"v", 0)
    cache.flush()
    assert order == ["a", "b", "c"]
    assert cache.namespaces() == ["a", "b", "c"]


def test_flush_all_includes_writes_a_listener_makes_into_a_later_namespace() -> None:
    cache = RecordCache(10_000)
    downstream = Recorder()
    # Flushing store "a" forwards downstream into cached store "b" of the same task.
    cache.add_namespace("a", lambda entries: [cache.put("b", k, v, ts) for k, v, ts in entries])
    cache.add_namespace("b", downstream)
    cache.put("a", b"k", b"v", 1)
    cache.flush()
    assert downstream.batches == [[(b"k", b"v", 1)]]


def test_resize_shrink_evicts_round_robin_across_namespaces() -> None:
    size = entry_bytes(b"k0", b"v")
    cache, _ = make(100 * size, "a", "b")
    for i in range(4):
        cache.put_clean("a", f"k{i}".encode(), b"v", 0)
        cache.put_clean("b", f"k{i}".encode(), b"v", 0)
    cache.resize(4 * size)
    assert cache.max_bytes == 4 * size
    assert cache.size_bytes == 4 * size
    assert cache.keys("a") == [b"k2", b"k3"]
    assert cache.keys("b") == [b"k2", b"k3"]
    cache.resize(10 * size)  # growing evicts nothing
    assert len(cache) == 4


def test_resize_shrink_flushes_dirty_entries() -> None:
    size = entry_bytes(b"k0", b"v")
    cache, listeners = make(100 * size, "a")
    cache.put("a", b"k0", b"v", 0)
    cache.put("a", b"k1", b"v", 1)
    cache.resize(size)
    assert listeners["a"].keys == [[b"k0", b"k1"]]
    assert cache.keys("a") == [b"k1"]


def test_move_namespace_keeps_dirty_entries_and_listener() -> None:
    src, listeners = make(10_000, "t")
    dst = RecordCache(10_000)
    src.put("t", b"a", b"1", 1)
    src.move_namespace("t", dst)
    assert not src.has_namespace("t")
    assert src.size_bytes == 0
    assert dst.get("t", b"a") == (b"1", 1)
    assert dst.dirty_count("t") == 1
    assert dst.size_bytes == entry_bytes(b"a", b"1")
    dst.flush("t")
    assert listeners["t"].batches == [[(b"a", b"1", 1)]]


def test_move_namespace_into_smaller_cache_evicts_from_it() -> None:
    size = entry_bytes(b"k0", b"v")
    src, listeners = make(10 * size, "t")
    dst = RecordCache(2 * size)
    for i in range(4):
        src.put("t", f"k{i}".encode(), b"v", i)
    src.move_namespace("t", dst)
    assert dst.size_bytes <= 2 * size
    assert listeners["t"].keys == [[b"k0", b"k1", b"k2", b"k3"]]


def test_move_namespace_refuses_a_target_that_has_it() -> None:
    a, _ = make(1000, "t")
    b, _ = make(1000, "t")
    with pytest.raises(ValueError):
        a.move_namespace("t", b)
    assert a.has_namespace("t")


def test_opposite_concurrent_moves_do_not_deadlock() -> None:
    a, _ = make(10_000, *[f"a{i}" for i in range(50)])
    b, _ = make(10_000, *[f"b{i}" for i in range(50)])
    errors: list[BaseException] = []

    def move_all(src: RecordCache, dst: RecordCache, prefix: str) -> None:
        try:
            for i in range(50):
                src.move_namespace(f"{prefix}{i}", dst)
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=move_all, args=(a, b, "a")),
        threading.Thread(target=move_all, args=(b, a, "b")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
        assert not t.is_alive()
    assert not errors
    assert len(a.namespaces()) == 50 and all(ns.startswith("b") for ns in a.namespaces())


def test_listener_may_read_the_cache_and_sees_tombstone_until_flush_ends() -> None:
    cache = RecordCache(10_000)
    seen: list[object] = []
    cache.add_namespace("t", lambda entries: seen.extend(cache.get("t", k) for k, _, _ in entries))
    cache.put("t", b"a", b"1", 1)
    cache.put("t", b"d", None, 2)
    cache.flush("t")
    assert seen == [(b"1", 1), (None, 2)]
    assert cache.get("t", b"d") is None


def test_listener_error_propagates_after_entries_are_marked_clean() -> None:
    cache = RecordCache(10_000)

    def fail(entries: object) -> None:
        raise RuntimeError("downstream failed")

    cache.add_namespace("t", fail)
    cache.put("t", b"a", b"1", 1)
    with pytest.raises(RuntimeError, match="downstream failed"):
        cache.flush("t")
    assert cache.dirty_count("t") == 0


def test_remove_namespace_drops_entries_without_flushing() -> None:
    cache, listeners = make(10_000, "t")
    cache.put("t", b"a", b"1", 1)
    cache.remove_namespace("t")
    assert not cache.has_namespace("t")
    assert (len(cache), cache.size_bytes) == (0, 0)
    assert listeners["t"].batches == []


def test_unknown_namespace_raises_key_error() -> None:
    cache = RecordCache(100)
    with pytest.raises(KeyError, match="add_namespace"):
        cache.put("nope", b"k", b"v", 0)
    with pytest.raises(KeyError):
        cache.get("nope", b"k")


def test_keys_are_in_ascending_unsigned_byte_order() -> None:
    cache, _ = make(10_000, "t")
    for k in (b"\xff", b"b", b"\x00", b"a", b"ab"):
        cache.put("t", k, b"v", 0)
    assert cache.keys("t") == [b"\x00", b"a", b"ab", b"b", b"\xff"]


def test_values_must_be_bytes_or_none() -> None:
    cache, _ = make(100, "t")
    with pytest.raises(TypeError):
        cache.put("t", b"k", "text", 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        RecordCache(-1)


def test_concurrent_writers_keep_byte_accounting_exact() -> None:
    cache, _ = make(50 * entry_bytes(b"k-0-000", b"v"), *[f"t{i}" for i in range(4)])

    def write(ns: str) -> None:
        for j in range(2000):
            cache.put(ns, f"k-{j % 300:05d}".encode(), b"v", j)
            cache.get(ns, f"k-{(j * 7) % 300:05d}".encode())

    threads = [threading.Thread(target=write, args=(f"t{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    total = sum(cache.namespace_bytes(ns) for ns in cache.namespaces())
    assert cache.size_bytes == total
    assert cache.size_bytes <= cache.max_bytes
    assert len(cache) == sum(cache.namespace_size(ns) for ns in cache.namespaces())


def test_range_items_reads_a_key_range_in_byte_order_as_gets_would() -> None:
    cache = RecordCache(1 << 20)
    cache.add_namespace("ns", lambda entries: None)
    for key in (b"b", b"a", b"c\xff", b"c", b"d"):
        cache.put("ns", key, key.upper(), 1)
    cache.put("ns", b"c\xff", None, 2)
    hits = cache.hits
    assert cache.range_items("ns", b"b", b"c\xff") == [(b"b", b"B"), (b"c", b"C"), (b"c\xff", None)]
    assert cache.hits == hits + 3
    # Read in ascending order, so the last key read is the most recently used.
    assert cache.lru_keys("ns") == [b"a", b"d", b"b", b"c", b"c\xff"]
    assert [k for k, _ in cache.range_items("ns", None, b"b")] == [b"a", b"b"]
    assert [k for k, _ in cache.range_items("ns", b"c", None)] == [b"c", b"c\xff", b"d"]
    assert cache.range_items("ns", b"x", b"z") == []


def test_random_puts_deletes_and_evictions_agree_with_a_model() -> None:
    """Thousands of keys written, rewritten, deleted and evicted (the index grows, and deletions
    move colliding keys back): every read agrees with a dict of what was written, and every key
    an eviction dropped reached the listener first."""
    import random

    rng = random.Random(7)
    cache, listeners = make(60_000, "t")
    written: dict[bytes, bytes] = {}  # the newest value of every key written and not deleted
    flushed: dict[bytes, bytes | None] = {}
    for step in range(30_000):
        key = b"key-%d" % rng.randrange(3_000)
        roll = rng.random()
        if roll < 0.6:
            value = b"v%d" % step
            cache.put("t", key, value, step)
            written[key] = value
        elif roll < 0.8:
            cache.delete("t", key)
            written.pop(key, None)
        else:
            hit = cache.get("t", key)
            if hit is not None:
                assert hit[0] == written[key]
        if step % 5_000 == 0:
            cache.flush("t")
        for batch in listeners["t"].batches:
            flushed.update((k, v) for k, v, _ in batch)
        listeners["t"].batches.clear()
    cached = set(cache.keys("t"))
    assert len(cached) == len(cache) == cache.namespace_size("t")
    assert 0 < len(cached) < 3_000 and cache.evictions > 0
    for key, value in written.items():
        hit = cache.get("t", key)
        if key in cached:
            assert hit is not None and hit[0] == value
        else:
            # Evicted: its newest value reached the listener (at eviction, or at a flush before).
            assert hit is None and flushed[key] == value
    assert cached <= set(written)


def _suffixed(key: bytes, *times: int) -> bytes:
    """A window-store style cache key: the record key, then fixed-size big-endian times."""
    return key + b"".join(t.to_bytes(8, "big") for t in times)


def test_a_sized_range_reads_and_touches_only_keys_of_that_size() -> None:
    """One record key's entries of a window or session store: the entries of a longer key that
    begins with the same bytes sort among them but are another key's, neither returned nor made
    recent, nor counted as hits."""
    cache = RecordCache(1 << 20)
    cache.add_namespace("ns", lambda entries: None)
    for key in (b"user-1", b"user-10", b"user-2"):
        for end in (100, 200, 300):
            cache.put("ns", _suffixed(key, end, end - 50), key + b"@%d" % end, end)
    lru_before = cache.lru_keys("ns")
    hits = cache.hits
    lo, hi = _suffixed(b"user-1", 150, 0), _suffixed(b"user-1", 2**63 - 1, 2**63 - 1)
    read = cache.range_items("ns", lo, hi, len(lo))
    assert read == [(_suffixed(b"user-1", e, e - 50), b"user-1@%d" % e) for e in (200, 300)]
    assert cache.hits == hits + 2
    mine = [_suffixed(b"user-1", e, e - 50) for e in (200, 300)]
    assert cache.lru_keys("ns") == [k for k in lru_before if k not in mine] + mine
    # Without a size, the byte range holds the longer key's entries too.
    every = [k for k, _ in cache.range_items("ns", lo, hi, -1, False)]
    assert every == mine + [_suffixed(b"user-10", e, e - 50) for e in (100, 200, 300)]
    # A read without touching leaves recency and hits alone.
    lru, hits = cache.lru_keys("ns"), cache.hits
    assert cache.range_items("ns", lo, hi, len(lo), False) == read
    assert (cache.lru_keys("ns"), cache.hits) == (lru, hits)


def test_touch_range_does_to_the_cache_what_a_range_read_does() -> None:
    caches = []
    for _ in range(2):
        cache = RecordCache(1 << 20)
        cache.add_namespace("ns", lambda entries: None)
        for i in range(40):
            cache.put("ns", _suffixed(b"k%d" % (i % 7), i), b"v", i)
        caches.append(cache)
    lo, hi = _suffixed(b"k1", 5), _suffixed(b"k1", 30)
    caches[0].range_items("ns", lo, hi, len(lo))
    assert caches[1].touch_range("ns", lo, hi, len(lo)) is None
    assert caches[0].lru_keys("ns") == caches[1].lru_keys("ns")
    assert caches[0].hits == caches[1].hits > 0


def test_key_order_stays_exact_through_writes_deletes_evictions_and_moves() -> None:
    """The key-order trees, once built by a range read, follow every later insert and removal
    (puts, deletes, evictions, tombstones dropped by a flush, a move to another cache): range,
    sized-range, prefix and key reads always agree with the entries the cache holds."""
    import random

    rng = random.Random(11)
    cache, _ = make(40_000, "t")
    other = RecordCache(40_000)
    cache.range_items("t", None, None)  # builds the byte-order tree
    cache.range_items("t", _suffixed(b"a", 0), _suffixed(b"a", 1), 9)  # and the sized one
    for step in range(12_000):
        time = rng.randrange(50)
        # mostly one time suffix; some keys two, so sizes differ within a record key's byte range
        key = _suffixed(b"%x" % rng.randrange(40), *((time,) if rng.random() < 0.8 else (time, time)))
        roll = rng.random()
        if roll < 0.6:
            cache.put("t", key, None if roll < 0.1 else b"v", step)
        elif roll < 0.8:
            cache.delete("t", key)
        elif step % 997 == 0:
            cache.flush("t")
        if step == 6_000:
            cache.move_namespace("t", other)
            cache, other = other, cache
        if step % 500 == 0:
            held = sorted(cache.lru_keys("t"))
            assert cache.keys("t") == held
            assert [k for k, _ in cache.range_items("t", None, None, -1, False)] == held
            record_key = b"%x" % rng.randrange(40)
            lo, hi = _suffixed(record_key, 10), _suffixed(record_key, 40)
            sized = [k for k in held if len(k) == len(lo) and lo <= k <= hi]
            assert [k for k, _ in cache.range_items("t", lo, hi, len(lo), False)] == sized
            # an open bound: the byte-order tree, filtered by size
            below = [k for k in held if len(k) == len(lo) and k <= hi]
            assert [k for k, _ in cache.range_items("t", None, hi, len(lo), False)] == below
            between = [k for k in held if lo <= k <= hi]
            assert [k for k, _ in cache.range_items("t", lo, hi, -1, False)] == between
            assert [k for k, _ in cache.prefix_items("t", record_key)] == [
                k for k in held if k.startswith(record_key)
            ]
    assert cache.evictions > 0 or other.evictions > 0
