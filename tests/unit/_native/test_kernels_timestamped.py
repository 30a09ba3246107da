"""The ``aggregate`` kernel on timestamped stores: it reads and writes Kafka's ValueAndTimestamp
bytes (8-byte big-endian timestamp, then the aggregate) and keeps, per key and window, the largest
timestamp of the records that made the aggregate, as the DSL's processors do record by record."""

from __future__ import annotations

import operator
import struct

from kstreams._native import kernels
from kstreams._native.record_batch import RecordBatch
from kstreams._native.record_cache import RecordCache

LONG = struct.Struct(">q")
STAMPED = struct.Struct(">qq")  # timestamp, then a LONG aggregate


def _batch(keys: list[bytes], values: list[bytes | None], timestamps: list[int]) -> RecordBatch:
    return RecordBatch.from_columns(keys, values, timestamps, 0, list(range(len(keys))))


def _flush(cache: RecordCache, flushed: list) -> dict[bytes, tuple[int, int, int]]:  # type: ignore[type-arg]
    """Each flushed key's (stored timestamp, aggregate, cache entry timestamp)."""
    flushed.clear()
    cache.flush("0_0-s")
    result = {}
    for key, value, ts in flushed:
        stamp, aggregate = STAMPED.unpack(value)
        result[key] = (stamp, aggregate, ts)
    return result


def test_timestamped_count_keeps_the_largest_timestamp_within_and_across_batches() -> None:
    cache = RecordCache(1 << 20)
    flushed: list = []  # type: ignore[type-arg]
    cache.add_namespace("0_0-s", flushed.extend)
    batch = _batch([b"a", b"a", b"b"], [b"x", b"y", b"z"], [100, 50, 20])
    assert kernels.aggregate(
        cache, "0_0-s", batch, kernels.COUNT, kernels.BYTES, kernels.LONG, {}.get, timestamped=True
    ) == (-1, 0)
    assert _flush(cache, flushed) == {b"a": (100, 2, 100), b"b": (20, 1, 20)}
    later = _batch([b"a", b"b"], [b"x", b"y"], [10, 30])
    kernels.aggregate(
        cache, "0_0-s", later, kernels.COUNT, kernels.BYTES, kernels.LONG, {}.get, timestamped=True
    )
    assert _flush(cache, flushed) == {b"a": (100, 3, 100), b"b": (30, 2, 30)}


def test_timestamped_aggregate_reads_the_stored_timestamp_below_the_cache() -> None:
    cache = RecordCache(1 << 20)
    flushed: list = []  # type: ignore[type-arg]
    cache.add_namespace("0_0-s", flushed.extend)
    store = {b"a": STAMPED.pack(900, 5)}
    batch = _batch([b"a", b"c"], [LONG.pack(2), LONG.pack(7)], [10, 40])
    kernels.aggregate(
        cache,
        "0_0-s",
        batch,
        kernels.REDUCE,
        kernels.LONG,
        kernels.LONG,
        store.get,
        reducer=operator.add,
        timestamped=True,
    )
    assert _flush(cache, flushed) == {b"a": (900, 7, 900), b"c": (40, 7, 40)}


def test_timestamped_windowed_count_stamps_each_window_with_its_largest_timestamp() -> None:
    cache = RecordCache(1 << 20)
    flushed: list = []  # type: ignore[type-arg]
    cache.add_namespace("0_0-s", flushed.extend)
    batch = _batch([b"a"] * 4, [b"v"] * 4, [60, 20, 150, 90])
    kernels.aggregate(
        cache,
        "0_0-s",
        batch,
        kernels.COUNT,
        kernels.BYTES,
        kernels.LONG,
        {}.get,
        True,
        100,
        100,
        1000,
        -1,
        None,
        True,
    )
    windows = {struct.unpack(">q", k[-8:])[0]: v for k, v in _flush(cache, flushed).items()}
    assert windows == {0: (90, 3, 90), 100: (150, 1, 150)}


def test_timestamped_bytes_too_short_leave_the_batch_to_python() -> None:
    cache = RecordCache(1 << 20)
    cache.add_namespace("0_0-s", lambda entries: None)
    store = {b"a": LONG.pack(5)[:4]}
    batch = _batch([b"a"], [b"v"], [1])
    assert (
        kernels.aggregate(
            cache, "0_0-s", batch, kernels.COUNT, kernels.BYTES, kernels.LONG, store.get, timestamped=True
        )
        is None
    )
    assert cache.namespace_size("0_0-s") == 0
