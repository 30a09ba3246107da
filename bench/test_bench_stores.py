"""State store throughput: in-memory against RocksDB, with the record cache against without, and
at ``metrics.recording.level`` INFO (store metrics off, the default) against DEBUG (every store
operation timed into ``stream-state-metrics``).

Each round puts 2,000 keys (1,000 distinct, so half are updates) and reads them back through the
full layer stack a DSL aggregation uses (metered -> [caching] -> change-logging -> inner), with a
context whose changelog sink only counts. Run with ``pytest bench/test_bench_stores.py``; not part
of the default test run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kstreams._native.record_cache import RecordCache
from kstreams.metrics import MetricsRegistry
from kstreams.state import Stores

BENCH = pytest.mark.benchmark(max_time=0.5, min_rounds=5, warmup=False)
KEYS = [b"key-%06d" % (i % 1000) for i in range(2000)]
VALUE = b"v" * 64


class CountingContext:
    """The smallest StateStoreContext: a state dir, a cache, a changelog that only counts, and a
    metrics registry at the given recording level."""

    def __init__(self, state_dir: Path, cache: Any, recording_level: str) -> None:
        self._state_dir = state_dir
        self._cache = cache
        self.application_id = "bench"
        self.task_id = "0_0"
        self.app_configs: dict[str, Any] = {}
        self.metrics = MetricsRegistry(recording_level=recording_level)
        self.client_id = "bench-client"
        self.logged = 0

    def state_dir(self) -> str:
        self._state_dir.mkdir(parents=True, exist_ok=True)
        return str(self._state_dir)

    def register(self, store: Any, restore_callback: Any) -> None:
        pass

    def log_change(self, store_name: str, key: bytes, value: bytes | None, timestamp: int) -> None:
        self.logged += 1

    def log_changes(self, store_name: str, changes: Any) -> None:
        self.logged += len(changes)

    def record_cache(self) -> Any:
        return self._cache

    def current_timestamp(self) -> int:
        return 0


@pytest.fixture(params=["in_memory", "rocksdb"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["INFO", "DEBUG"])
def level(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=[False, True], ids=["uncached", "cached"])
def store(request: pytest.FixtureRequest, kind: str, level: str, tmp_path: Path) -> Iterator[Any]:
    cached = bool(request.param)
    supplier = (
        Stores.persistent_key_value_store("kv")
        if kind == "rocksdb"
        else Stores.in_memory_key_value_store("kv")
    )
    builder = Stores.key_value_store_builder(supplier)
    if cached:
        builder.with_caching_enabled()
    built = builder.build()
    context = CountingContext(tmp_path / kind, RecordCache(10 * 1024 * 1024) if cached else None, level)
    built.init(context, built)
    yield built
    built.close()


@BENCH
@pytest.mark.benchmark(group="store: 2000 puts + flush")
def test_put_throughput(benchmark: Any, store: Any) -> None:
    def run() -> None:
        for key in KEYS:
            store.put(key, VALUE)
        store.flush()

    benchmark(run)
    assert store.get(KEYS[0]) == VALUE


@BENCH
@pytest.mark.benchmark(group="store: 2000 gets")
def test_get_throughput(benchmark: Any, store: Any) -> None:
    for key in KEYS:
        store.put(key, VALUE)
    store.flush()

    def run() -> None:
        for key in KEYS:
            store.get(key)

    benchmark(run)


@BENCH
@pytest.mark.benchmark(group="store: read-modify-write 2000 + flush (an aggregation)")
def test_aggregate_throughput(benchmark: Any, store: Any) -> None:
    def run() -> None:
        for key in KEYS:
            old = store.get(key)
            store.put(key, VALUE if old is None else old[:64])
        store.flush()

    benchmark(run)
