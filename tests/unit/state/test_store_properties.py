"""Property tests: every store stack behaves like a sorted dict, whatever the cache does.

Random puts, deletes, flushes and range reads run against a plain dict model; reads must agree
at every step, and after a final flush the inner store and a replay of the changelog must both
hold exactly the model's content.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kstreams._native.record_cache import RecordCache
from kstreams.state.caching import CachingKeyValueStore, CachingWindowStore
from kstreams.state.changelogging import ChangeLoggingKeyValueStore, ChangeLoggingWindowStore
from kstreams.state.in_memory import InMemoryKeyValueStore, InMemoryWindowStore
from kstreams.state.rocksdb import RocksDBKeyValueStore
from kstreams.state.rocksdb_window import RocksDBWindowStore

from .conftest import RecordingContext

keys = st.binary(min_size=0, max_size=3)
values = st.binary(min_size=1, max_size=4)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), keys, values),
        st.tuples(st.just("delete"), keys, st.none()),
        st.tuples(st.just("flush"), st.none(), st.none()),
        st.tuples(st.just("range"), keys, keys),
        st.tuples(st.just("reverse"), keys, keys),
        st.tuples(st.just("prefix"), keys, st.none()),
    ),
    max_size=60,
)


def expected_range(model: dict[bytes, bytes], lo: bytes, hi: bytes) -> list[tuple[bytes, bytes]]:
    return sorted((k, v) for k, v in model.items() if lo <= k <= hi)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, cache_bytes=st.sampled_from([None, 0, 150, 1 << 20]))
def test_in_memory_stack_matches_a_dict(ops: list[tuple[str, Any, Any]], cache_bytes: Any) -> None:
    check_stack(ops, False, cache_bytes)


# Opening a RocksDB database per example is slow: fewer examples.
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, cache_bytes=st.sampled_from([None, 150, 1 << 20]))
def test_rocksdb_stack_matches_a_dict(ops: list[tuple[str, Any, Any]], cache_bytes: Any) -> None:
    check_stack(ops, True, cache_bytes)


def check_stack(ops: list[tuple[str, Any, Any]], persistent: bool, cache_bytes: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cache = None if cache_bytes is None else RecordCache(cache_bytes)
        context = RecordingContext(Path(tmp), cache=cache)
        inner = RocksDBKeyValueStore("kv") if persistent else InMemoryKeyValueStore("kv")
        store = CachingKeyValueStore(ChangeLoggingKeyValueStore(inner))
        store.init(context, store)
        model: dict[bytes, bytes] = {}
        for op, a, b in ops:
            if op == "put":
                store.put(a, b)
                model[a] = b
            elif op == "delete":
                assert store.delete(a) == model.pop(a, None)
            elif op == "flush":
                store.flush()
            elif op == "range":
                assert list(store.range(a, b)) == expected_range(model, a, b)
            elif op == "reverse":
                assert list(store.reverse_range(a, b)) == expected_range(model, a, b)[::-1]
            else:
                assert list(store.prefix_scan(a)) == sorted(
                    (k, v) for k, v in model.items() if k.startswith(a)
                )
        assert list(store.all()) == sorted(model.items())
        store.flush()
        assert list(inner.all()) == sorted(model.items())
        replayed: dict[bytes, bytes] = {}
        for _, key, value, _ in context.changelog:
            if value is None:
                replayed.pop(key, None)
            else:
                replayed[key] = value
        assert replayed == model
        store.close()


window_operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), keys, st.sampled_from([0, 100, 200, 300]), st.one_of(st.none(), values)),
        st.tuples(st.just("flush"), st.none(), st.none(), st.none()),
        st.tuples(st.just("fetch_range"), keys, st.sampled_from([0, 50, 100]), st.sampled_from([150, 300])),
    ),
    max_size=50,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=window_operations, persistent=st.booleans(), cache_bytes=st.sampled_from([None, 200, 1 << 20]))
def test_window_stack_matches_a_dict(
    ops: list[tuple[str, Any, Any, Any]], persistent: bool, cache_bytes: Any
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cache = None if cache_bytes is None else RecordCache(cache_bytes)
        context = RecordingContext(Path(tmp), cache=cache)
        inner = (RocksDBWindowStore if persistent else InMemoryWindowStore)("w", 1_000_000, 100, False)
        store = CachingWindowStore(ChangeLoggingWindowStore(inner))
        store.init(context, store)
        model: dict[tuple[bytes, int], bytes] = {}
        for op, key, a, b in ops:
            if op == "put":
                store.put(key, b, a)
                if b is None:
                    model.pop((key, a), None)
                else:
                    model[(key, a)] = b
            elif op == "flush":
                store.flush()
            else:
                expected = sorted((s, v) for (k, s), v in model.items() if k == key and a <= s <= b)
                assert list(store.fetch_range(key, a, b)) == expected
        expected_all = sorted((s, k, v) for (k, s), v in model.items())
        assert sorted((w.start, w.key, v) for w, v in store.fetch_all(0, 1000)) == expected_all
        store.flush()
        assert sorted((w.start, w.key, v) for w, v in inner.all()) == expected_all
        store.close()
