"""Session-window counts: the compiled batch step beside the per-record processor.

P4 of the end-to-end pipelines, measured at the task: a session count per key (``SessionWindows``
with a 5-second inactivity gap and 2 seconds of grace; string keys, 100-byte values; timestamps
mostly ascending, one record in 20 up to 3 seconds late so that records merge sessions and some
are dropped) into a logged store, written to a topic. Batches of ``--batch`` records of one
partition go straight to the task's ``process`` (as a stream thread hands them over), with a commit
(flush of the stores and the cache, drain of the record collector) every ``--commit-every``
batches, so what is timed is processing and state, not a broker.

For each store type (in-memory, RocksDB) and cache setting (cached, caching disabled) the script
prints records/s and process CPU microseconds per record, compiled (``processing.compiled=true``,
the default) and per record (``processing.compiled=false``), and checks that both wrote the same
records to the output topic and the changelog.

    python bench/session_count_bench.py --records 200000
    python bench/session_count_bench.py --records 50000 --keys 100 --stores in_memory --caching on
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kstreams import Materialized, Produced, Serdes, StreamsBuilder
from kstreams._native.record_batch import RecordBatch
from kstreams.cluster.port import TopicPartition
from kstreams.testing import TopologyTestDriver
from kstreams.topology import SessionWindows, WindowedSerdes
from kstreams.topology.dsl.parameters import StoreType

GAP_MS = 5_000
GRACE_MS = 2_000
STRING = Serdes.string()


def generate(records: int, keys: int, seed: int = 7) -> tuple[list[bytes], list[bytes], list[int]]:
    """Key bytes, values and timestamps: each key is active about every 2.5 gaps on average, so
    sessions both grow and close; one record in 20 comes up to 3 seconds late."""
    rng = random.Random(seed)
    names = [f"user-{i}".encode() for i in range(keys)]
    value = b"x" * 100
    ks, vs, ts = [], [], []
    step = max(1, (GAP_MS * 5 // 2) // keys)
    now = 1_000_000
    for i in range(records):
        now += rng.randrange(0, 2 * step + 1)
        late = rng.randrange(3_000) if i % 20 == 0 else 0
        ks.append(rng.choice(names))
        vs.append(value)
        ts.append(now - late)
    return ks, vs, ts


def topology(store_type: StoreType, caching: bool) -> Any:
    builder = StreamsBuilder()
    materialized = Materialized.as_("sessions").with_store_type(store_type)
    materialized = materialized.with_caching_enabled() if caching else materialized.with_caching_disabled()
    (
        builder.stream("clicks")
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(GAP_MS, GRACE_MS))
        .count(materialized)
        .to_stream()
        .to("sessions-out", Produced.with_(WindowedSerdes.session_windowed_serde_from(STRING), Serdes.long()))
    )
    return builder.build()


def run(
    data: tuple[list[bytes], list[bytes], list[int]],
    store_type: StoreType,
    caching: bool,
    compiled: bool,
    batch_size: int,
    commit_every: int,
) -> tuple[float, float, str, int]:
    """(records/s, CPU µs per record, digest of everything written, records written)."""
    config = {
        "default.key.serde": "string",
        "default.value.serde": "string",
        "processing.compiled": compiled,
        "statestore.cache.max.bytes": 10 * 1024 * 1024,
    }
    driver = TopologyTestDriver(topology(store_type, caching), config)
    keys, values, timestamps = data
    batches = [
        RecordBatch.from_columns(
            keys[i : i + batch_size],
            values[i : i + batch_size],
            timestamps[i : i + batch_size],
            0,
            list(range(i, min(i + batch_size, len(keys)))),
        )
        for i in range(0, len(keys), batch_size)
    ]
    digest = hashlib.sha256()
    written = 0
    try:
        task = next(iter(driver._tasks.values()))
        if compiled and not task.compiled_segments:
            raise SystemExit("the session count did not compile")
        tp = TopicPartition("clicks", 0)

        def commit() -> None:
            nonlocal written
            task.flush()
            for topic, _partition, batch in driver._collector.drain():
                for key, value, ts, *_ in batch:
                    digest.update(b"%s|%s|%s|%d;" % (topic.encode(), key or b"-", value or b"-", ts))
                    written += 1

        wall, cpu = time.perf_counter(), time.process_time()
        for n, batch in enumerate(batches, 1):
            task.process(tp, batch)
            if n % commit_every == 0:
                commit()
        commit()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        driver.close()
    return len(keys) / wall, cpu * 1e6 / len(keys), digest.hexdigest()[:12], written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--commit-every", type=int, default=20, help="batches between commits")
    parser.add_argument(
        "--stores", nargs="+", default=["in_memory", "rocks_db"], choices=["in_memory", "rocks_db"]
    )
    parser.add_argument("--caching", nargs="+", default=["on", "off"], choices=["on", "off"])
    parser.add_argument(
        "--paths", nargs="+", default=["compiled", "per-record"], choices=["compiled", "per-record"]
    )
    args = parser.parse_args(argv)
    data = generate(args.records, args.keys)
    print(
        f"P4 session count: {args.records:,} records, {args.keys:,} keys, batches of {args.batch}, "
        f"commit every {args.commit_every} batches"
    )
    print(
        f"{'store':<10} {'cache':<6} {'path':<11} {'records/s':>11} {'CPU µs/rec':>11} {'written':>9}  digest"
    )
    failed = False
    for store in args.stores:
        for caching in args.caching:
            digests = set()
            for path in args.paths:
                rate, cpu, digest, written = run(
                    data,
                    StoreType[store.upper()],
                    caching == "on",
                    path == "compiled",
                    args.batch,
                    args.commit_every,
                )
                digests.add(digest)
                print(
                    f"{store:<10} {caching:<6} {path:<11} {rate:>11,.0f} {cpu:>11.1f} {written:>9,}  {digest}"
                )
            if len(digests) > 1:
                print("  !! the paths wrote different records")
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
