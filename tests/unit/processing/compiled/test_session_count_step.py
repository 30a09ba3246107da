"""The session-count batch step gives the per-record processor's results: the same records
downstream and in the changelog (in the same order, with the same timestamps), the same store, the
same cache (LRU order included), the same dropped count, on random batches with late records,
merges, grace drops, keys that begin with other keys, and every cache setting; on the test driver
and through KafkaStreams on the embedded cluster."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from kstreams import KafkaStreams, Materialized, Produced, Serdes, StreamsBuilder
from kstreams._native.record_batch import RecordBatch, default_partition
from kstreams.cluster import EmbeddedCluster
from kstreams.cluster.port import TopicPartition
from kstreams.processing.compiled.session_steps import SessionCountStep
from kstreams.testing import TopologyTestDriver
from kstreams.topology import SessionWindows, WindowedSerdes
from kstreams.topology.dsl.parameters import StoreType

S = Serdes.string()
L = Serdes.long()
SESSION_KEYS = WindowedSerdes.session_windowed_serde_from(S)
GAP, GRACE = 200, 60
# Keys that begin with other keys: a find_sessions of "a" reads the cache entries of "a1" and "a10"
# too, and "a\x00" continues the session suffix of "a" (its end's first byte is 0).
KEYS = ["a", "a1", "a10", "a\x00", "b", "bb", "c", "user-7"]


def topology(store_type: StoreType, caching: bool, retention: int | None = None) -> Any:
    builder = StreamsBuilder()
    materialized = Materialized.as_("sessions").with_store_type(store_type)
    materialized = materialized.with_caching_enabled() if caching else materialized.with_caching_disabled()
    if retention is not None:
        materialized = materialized.with_retention(retention)
    (
        builder.stream("clicks")
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(GAP, GRACE))
        .count(materialized)
        .to_stream()
        .to("out", Produced.with_(SESSION_KEYS, L))
    )
    return builder.build()


def random_batches(seed: int, records: int = 600) -> list[list[tuple[bytes | None, int]]]:
    """Batches of (key bytes, timestamp) of random sizes: mostly ascending time with bursts of one
    key, late records (some past grace), equal timestamps and a few null keys."""
    rng = random.Random(seed)
    now = 1_000
    data: list[tuple[bytes | None, int]] = []
    for _ in range(records):
        now += rng.choice([0, 1, 5, 10, 20, 40, 60, 120])
        roll = rng.random()
        ts = now - rng.randrange(GAP + GRACE + 40) if roll < 0.15 else now
        key = None if roll > 0.98 else rng.choice(KEYS).encode()
        data.append((key, max(ts, 0)))
    batches = []
    i = 0
    while i < len(data):
        size = rng.choice([1, 2, 7, 30, 100])
        batches.append(data[i : i + size])
        i += size
    return batches


def run_driver(
    batches: list[list[tuple[bytes | None, int]]],
    compiled: bool,
    store_type: StoreType,
    caching: bool,
    cache_bytes: int,
    retention: int | None = None,
    commit_every: int = 4,
) -> dict[str, Any]:
    """Feed each batch to the task as a stream thread does; commit every few batches. Returns
    what was written (outputs and changelog, in order), the cache's LRU order after every batch,
    the store's sessions and the processor's counters."""
    config = {
        "default.key.serde": "string",
        "default.value.serde": "string",
        "processing.compiled": compiled,
        "statestore.cache.max.bytes": cache_bytes,
    }
    driver = TopologyTestDriver(topology(store_type, caching, retention), config)
    written: list[tuple[Any, ...]] = []
    lru: list[list[bytes]] = []
    try:
        task = next(iter(driver._tasks.values()))
        steps = [step for segment in task.compiled_segments.values() for step in segment.steps()]
        assert any(isinstance(step, SessionCountStep) for step in steps) == compiled
        node = next(n for n in task.graph.processor_nodes if "AGGREGATE" in n.name)
        cache = task.record_cache
        namespace = f"{task.task_id}-sessions"

        def commit() -> None:
            task.flush()
            for topic, _partition, batch in driver._collector.drain():
                written.extend((topic, k, v, ts) for k, v, ts, *_ in batch)

        offset = 0
        for n, records in enumerate(batches, 1):
            keys = [k for k, _ in records]
            batch = RecordBatch.from_columns(
                keys,
                [b"v"] * len(keys),
                [ts for _, ts in records],
                0,
                list(range(offset, offset + len(keys))),
            )
            offset += len(keys)
            task.process(TopicPartition("clicks", 0), batch)
            if cache is not None and cache.has_namespace(namespace):
                lru.append(cache.lru_keys(namespace))
            if n % commit_every == 0:
                commit()
        commit()
        store = node.processor.store
        sessions = {key: list(store.fetch(key)) for key in KEYS}
        return {
            "written": written,
            "lru": lru,
            "sessions": sessions,
            "dropped": node.processor.dropped,
            "observed": node.processor.observed_stream_time,
        }
    finally:
        driver.close()


CASES = [
    # (store type, caching, cache bytes)
    (StoreType.IN_MEMORY, True, 10 << 20),
    (StoreType.ROCKS_DB, True, 10 << 20),
    (StoreType.IN_MEMORY, True, 1_500),  # small: batches that could evict run record by record
    (StoreType.ROCKS_DB, True, 600),
    (StoreType.IN_MEMORY, True, 0),  # a cache of 0 bytes writes through
    (StoreType.IN_MEMORY, False, 10 << 20),
    (StoreType.ROCKS_DB, False, 10 << 20),
]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(("store_type", "caching", "cache_bytes"), CASES)
def test_compiled_session_count_matches_the_per_record_processor(
    seed: int, store_type: StoreType, caching: bool, cache_bytes: int
) -> None:
    batches = random_batches(seed)
    compiled = run_driver(batches, True, store_type, caching, cache_bytes)
    per_record = run_driver(batches, False, store_type, caching, cache_bytes)
    assert compiled == per_record
    assert compiled["dropped"] > 0  # the data exercises grace
    tombstones = [w for w in compiled["written"] if w[0] == "out" and w[2] is None]
    assert tombstones  # and merges


@pytest.mark.parametrize("caching", [True, False])
def test_sessions_that_expire_mid_batch_are_not_merged(caching: bool) -> None:
    """With the shortest retention (gap + grace), a write can expire a session that a later record
    of the same batch would otherwise merge with; and a session ending exactly at the close time
    is written but the store ignores it."""
    rng = random.Random(9)
    data = []
    now = 1_000
    for _ in range(400):
        # Sparse keys, records up to gap + grace late: a late record may fall within the gap of a
        # session that other keys' writes already expired.
        now += rng.choice([0, 40, 100, 150, 300])
        ts = now - rng.choice([0, 0, 100, 150, GAP, GAP + 40, GAP + GRACE - 1, GAP + GRACE])
        data.append((rng.choice(KEYS[:4]).encode(), max(ts, 0)))
    batches = [data[i : i + 50] for i in range(0, len(data), 50)]
    # "b" at 1300 expires "a"'s session [1000, 1000] (retention 260 ms): "a" at 1100 starts a new
    # session without a cache, and merges with the cached one with a cache, on both paths.
    batches.append([(b"a", 100_000), (b"b", 100_300), (b"a", 100_100)])
    for store_type in (StoreType.IN_MEMORY, StoreType.ROCKS_DB):
        compiled = run_driver(batches, True, store_type, caching, 10 << 20, retention=GAP + GRACE)
        per_record = run_driver(batches, False, store_type, caching, 10 << 20, retention=GAP + GRACE)
        assert compiled == per_record


def test_the_cached_step_runs_batches_and_falls_back_when_the_cache_could_evict(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    results: list[bool] = []
    run_cached = SessionCountStep._run_cached

    def spy(self: SessionCountStep, cache: Any, batch: Any) -> bool:
        ran = run_cached(self, cache, batch)
        results.append(ran)
        return ran

    monkeypatch.setattr(SessionCountStep, "_run_cached", spy)
    batches = random_batches(4)
    run_driver(batches, True, StoreType.IN_MEMORY, True, 10 << 20)
    assert results and all(results)
    results.clear()
    run_driver(batches, True, StoreType.IN_MEMORY, True, 1_500)
    assert True in results and False in results


# ------------------------------------------------------------------ KafkaStreams, embedded cluster


def _run_streams(
    batches: list[list[tuple[bytes | None, int]]], compiled: bool, caching: bool, app: str, tmp_path: Any
) -> tuple[list[tuple[Any, ...]], dict[str, list[tuple[Any, ...]]], dict[Any, int]]:
    cluster = EmbeddedCluster()
    try:
        cluster.create_topic("clicks", 2)
        cluster.create_topic("out", 2)
        producer = cluster.producer()
        total = 0
        for records in batches:
            by_partition: dict[int, list[tuple[bytes | None, int]]] = {}
            for key, ts in records:
                if key is None:
                    continue  # a null key has no partition of its own here; the driver test covers it
                by_partition.setdefault(default_partition(key, 2), []).append((key, ts))
            for p, rows in by_partition.items():
                keys = [k for k, _ in rows]
                producer.send(
                    "clicks", p, RecordBatch.from_columns(keys, [b"v"] * len(keys), [t for _, t in rows], p)
                )
                total += len(rows)
        producer.flush()
        streams = KafkaStreams(
            topology(StoreType.ROCKS_DB, caching),
            {
                "application.id": app,
                "state.dir": str(tmp_path / app),
                "commit.interval.ms": 100,
                "processing.batch.size": 300,
                "processing.compiled": compiled,
                "default.key.serde": "string",
                "default.value.serde": "string",
            },
            cluster=cluster,
        )
        streams.start()
        try:
            deadline = time.monotonic() + 120
            while (
                sum(
                    v
                    for m, v in streams.metrics().items()
                    if m.name == "process-total" and m.group == "stream-thread-metrics"
                )
                < total
            ):
                assert time.monotonic() < deadline, "records not processed in time"
                time.sleep(0.02)
            store = None
            while store is None:
                try:
                    store = {
                        (wk.key, wk.start, wk.end): count
                        for key in KEYS
                        for wk, count in streams.store("sessions").fetch(key)
                    }
                except Exception:
                    assert time.monotonic() < deadline, "store not queryable in time"
                    time.sleep(0.02)
        finally:
            streams.close(timeout=30)
        # Per partition, in order: what each task wrote (partitions interleave by scheduling).
        out = [(r.partition, r.key, r.value, r.timestamp) for r in cluster.read("out")]
        changelogs = {
            t[len(app) :]: [(r.partition, r.key, r.value) for r in cluster.read(t)]
            for t in cluster.topics()
            if t.endswith("-changelog")
        }
        return sorted(out, key=lambda r: r[0]), changelogs, store
    finally:
        cluster.close()


@pytest.mark.parametrize("caching", [False, True])
def test_kafka_streams_session_counts_are_the_same_compiled_and_per_record(
    caching: bool, tmp_path: Any
) -> None:
    batches = random_batches(5, records=3000)
    compiled = _run_streams(batches, True, caching, f"sessions-1-{caching}", tmp_path)
    per_record = _run_streams(batches, False, caching, f"sessions-0-{caching}", tmp_path)
    out, changelogs, store = compiled
    assert store and out
    if caching:
        # What a cache flushes depends on when commits fall, which differs run to run: compare what
        # a compacted topic keeps.
        assert _newest(out) == _newest(per_record[0])
    else:
        assert out == per_record[0]  # every update and tombstone, in order
    # The record collector keeps only the newest change per key between commits (changelog
    # suppression), and commits fall differently run to run: compare what compaction keeps.
    assert {t: _newest(c) for t, c in changelogs.items()} == {t: _newest(c) for t, c in per_record[1].items()}
    assert store == per_record[2]


def _newest(records: list[tuple[Any, ...]]) -> dict[Any, Any]:
    """What compaction keeps: the newest value per key, a tombstone the same as no record (a session
    merged before the cache flushed it leaves none; whether it was flushed depends on commit times)."""
    newest = {(r[0], r[1]): r[2] for r in records}
    return {key: value for key, value in newest.items() if value is not None}


def test_only_a_session_count_over_plain_key_bytes_becomes_the_step() -> None:
    from kstreams.topology.compiled_ops import PYTHON_SESSION_COUNT, kernel_for_supplier
    from kstreams.topology.dsl.processors.session_aggregate import SessionAggregateSupplier

    builder = StreamsBuilder()
    sessions = (
        builder.stream("clicks").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 1))
    )
    sessions.count(Materialized.as_("counted"))
    sessions.reduce(lambda a, b: a + b, Materialized.as_("reduced"))
    built = builder.build()
    suppliers = {
        s.store_name: kernel_for_supplier(s)
        for s in (node.supplier for node in built._nodes.values() if hasattr(node, "supplier"))
        if isinstance(s, SessionAggregateSupplier)
    }
    assert suppliers["counted"] is not None and suppliers["counted"].name == PYTHON_SESSION_COUNT
    assert not suppliers["counted"].native  # no kernel label in describe(): a Python step
    assert suppliers["reduced"] is None
    # JSON keys may re-encode to other bytes than the source's: the count stays per record.
    json_builder = StreamsBuilder()
    json_builder.stream("clicks").group_by_key().windowed_by(
        SessionWindows.of_inactivity_gap_and_grace(5, 1)
    ).count()
    driver = TopologyTestDriver(
        json_builder.build(), {"default.key.serde": "json", "default.value.serde": "string"}
    )
    try:
        assert not any(task.compiled_segments for task in driver._tasks.values())
    finally:
        driver.close()
