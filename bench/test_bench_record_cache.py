"""RecordCache against a plain-Python LRU (OrderedDict per namespace with dirty tracking).

Run with ``pytest bench/test_bench_record_cache.py``; not part of the default test run.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

import pytest

from kstreams._native.record_cache import RecordCache

__all__ = ["PyRecordCache"]

BENCH = pytest.mark.benchmark(max_time=0.5, min_rounds=10, warmup=False)
N = 10_000
KEYS = [f"key-{i:08d}".encode() for i in range(N)]
VALUE = b"v" * 32
OVERHEAD = RecordCache.ENTRY_OVERHEAD
Listener = Callable[[list[tuple[bytes, bytes | None, int]]], None]


class PyRecordCache:
    """The same semantics in plain Python: one lock, an OrderedDict (LRU order) and an
    insertion-ordered dirty dict per namespace."""

    def __init__(self, max_bytes: int) -> None:
        self._lock = threading.Lock()
        self._max = max_bytes
        self._size = 0
        self._caches: dict[str, OrderedDict[bytes, tuple[bytes | None, int, bool]]] = {}
        self._dirty: dict[str, dict[bytes, None]] = {}
        self._listeners: dict[str, Listener] = {}

    def add_namespace(self, ns: str, listener: Listener) -> None:
        self._caches[ns] = OrderedDict()
        self._dirty[ns] = {}
        self._listeners[ns] = listener

    @staticmethod
    def _bytes(key: bytes, value: bytes | None) -> int:
        return len(key) + (len(value) if value is not None else 0) + OVERHEAD

    def get(self, ns: str, key: bytes) -> tuple[bytes | None, int] | None:
        with self._lock:
            cache = self._caches[ns]
            entry = cache.get(key)
            if entry is None:
                return None
            cache.move_to_end(key)
            return entry[0], entry[1]

    def put(self, ns: str, key: bytes, value: bytes | None, ts: int) -> None:
        flushes = []
        with self._lock:
            cache, dirty = self._caches[ns], self._dirty[ns]
            old = cache.pop(key, None)
            if old is not None:
                self._size -= self._bytes(key, old[0])
            cache[key] = (value, ts, True)
            self._size += self._bytes(key, value)
            dirty.pop(key, None)
            dirty[key] = None
            while self._size > self._max and cache:
                k, (v, t, was_dirty) = cache.popitem(last=False)
                self._size -= self._bytes(k, v)
                if was_dirty:
                    del dirty[k]
                    flushes.append(self._collect(ns, (k, v, t)))
        for entries in flushes:
            self._listeners[ns](entries)

    def _collect(self, ns: str, evicted: tuple[bytes, bytes | None, int] | None) -> list:
        cache, dirty = self._caches[ns], self._dirty[ns]
        entries = [evicted] if evicted else []
        for k in dirty:
            v, t, _ = cache[k]
            cache[k] = (v, t, False)
            entries.append((k, v, t))
        dirty.clear()
        return entries

    def flush(self, ns: str) -> None:
        with self._lock:
            entries = self._collect(ns, None)
        if entries:
            self._listeners[ns](entries)


def _sink(entries: list) -> None:
    pass


@pytest.fixture(params=["native", "python"])
def cache_cls(request: pytest.FixtureRequest) -> type:
    return RecordCache if request.param == "native" else PyRecordCache


@BENCH
@pytest.mark.benchmark(group="cache: put 10k distinct keys (no eviction)")
def test_put_10k(benchmark, cache_cls: type) -> None:
    def run() -> None:
        cache = cache_cls(1 << 30)
        cache.add_namespace("0_0-store", _sink)
        put = cache.put
        for i, key in enumerate(KEYS):
            put("0_0-store", key, VALUE, i)

    benchmark(run)


@BENCH
@pytest.mark.benchmark(group="cache: re-put 10k cached keys (an aggregation's write)")
def test_reput_10k(benchmark, cache_cls: type) -> None:
    cache = cache_cls(1 << 30)
    cache.add_namespace("0_0-store", _sink)
    for i, key in enumerate(KEYS):
        cache.put("0_0-store", key, VALUE, i)
    put = cache.put

    def run() -> None:
        for i, key in enumerate(KEYS):
            put("0_0-store", key, VALUE, i)

    benchmark(run)


@BENCH
@pytest.mark.benchmark(group="cache: get 10k hits")
def test_get_10k(benchmark, cache_cls: type) -> None:
    cache = cache_cls(1 << 30)
    cache.add_namespace("0_0-store", _sink)
    for i, key in enumerate(KEYS):
        cache.put("0_0-store", key, VALUE, i)
    get = cache.get

    def run() -> None:
        for key in KEYS:
            get("0_0-store", key)

    benchmark(run)


@BENCH
@pytest.mark.benchmark(group="cache: put 10k into a 1k-entry cache (evict + flush)")
def test_put_10k_evicting(benchmark, cache_cls: type) -> None:
    limit = 1000 * (len(KEYS[0]) + len(VALUE) + OVERHEAD)

    def run() -> None:
        cache = cache_cls(limit)
        cache.add_namespace("0_0-store", _sink)
        put = cache.put
        for i, key in enumerate(KEYS):
            put("0_0-store", key, VALUE, i)

    benchmark(run)


@BENCH
@pytest.mark.benchmark(group="cache: flush 10k dirty entries")
def test_flush_10k(benchmark, cache_cls: type) -> None:
    def setup() -> tuple[tuple[object], dict]:
        cache = cache_cls(1 << 30)
        cache.add_namespace("0_0-store", _sink)
        for i, key in enumerate(KEYS):
            cache.put("0_0-store", key, VALUE, i)
        return (cache,), {}

    benchmark.pedantic(lambda cache: cache.flush("0_0-store"), setup=setup, rounds=10)
