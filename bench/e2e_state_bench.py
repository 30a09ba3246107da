"""End-to-end throughput of stateful processing and of restoration, on the embedded cluster.

P2: count per key (a logged store, its changelog written on every commit or cache eviction) over
N input records (default 200,000; 10,000 keys; 2 partitions), written to an output topic. It runs
with RocksDB and in-memory stores, with the record cache on (statestore.cache.max.bytes 10 MiB)
and off (0), and with 1 and 2 stream threads, and prints input records per second (over the time
from start() until the last input record was processed).

Restore: a changelog of N records (default as above, over N / 10 keys) is restored into RocksDB and
in-memory stores by a client that has no local state; the restore listener times it, and the
script prints records restored per second.

    python bench/e2e_state_bench.py                       # 200,000 records
    python bench/e2e_state_bench.py --records 1000000
    python bench/e2e_state_bench.py --only restore --stores in_memory
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import threading
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kstreams._native.record_batch import RecordBatch, default_partition

PARTITIONS = 2
KEYS = 10_000
CHUNK = 20_000
CACHE_ON = 10 * 1024 * 1024


def input_batches(records: int, keys: int, seed: int = 7) -> dict[int, list[RecordBatch]]:
    """Input records as per-partition batches: random keys of ``keys``, a short value each."""
    rng = random.Random(seed)
    names = [f"user-{i:05d}".encode() for i in range(keys)]
    parts = [default_partition(k, PARTITIONS) for k in names]
    now = int(time.time() * 1000)
    cols: dict[int, tuple[list[bytes], list[bytes], list[int]]] = {p: ([], [], []) for p in range(PARTITIONS)}
    for i in range(records):
        k = rng.randrange(keys)
        ks, vs, ts = cols[parts[k]]
        ks.append(names[k])
        vs.append(b"page-view")
        ts.append(now + i // 100)
    return {
        p: [
            RecordBatch.from_columns(ks[i : i + CHUNK], vs[i : i + CHUNK], ts[i : i + CHUNK], p)
            for i in range(0, len(ks), CHUNK)
        ]
        for p, (ks, vs, ts) in cols.items()
    }


def count_topology(inp: str, out: str, store_type: str) -> Any:
    from kstreams import Consumed, Materialized, Produced, Serdes, StreamsBuilder

    builder = StreamsBuilder()
    (
        builder.stream(inp, Consumed.with_(Serdes.string(), Serdes.string()))
        .group_by_key()
        .count(Materialized.as_("counts").with_store_type(store_type))
        .to_stream()
        .to(out, Produced.with_(Serdes.string(), Serdes.long()))
    )
    return builder.build()


def _processed(streams: Any) -> int:
    return int(
        sum(
            v
            for m, v in streams.metrics().items()
            if m.name == "process-total" and m.group == "stream-thread-metrics"
        )
    )


def run_count(
    batches: dict[int, list[RecordBatch]],
    records: int,
    store_type: str,
    cache: int,
    threads: int,
    extra: dict[str, Any] | None = None,
) -> float:
    """Records per second of P2 with one configuration."""
    from kstreams import KafkaStreams
    from kstreams.cluster import EmbeddedCluster

    cluster = EmbeddedCluster()
    suffix = uuid.uuid4().hex[:6]
    cluster.create_topic("in", PARTITIONS)
    cluster.create_topic("out", PARTITIONS)
    producer = cluster.producer()
    for partition, chunks in batches.items():
        for chunk in chunks:
            producer.send("in", partition, chunk)
    try:
        with tempfile.TemporaryDirectory(prefix="kstreams-state-bench-") as state_dir:
            streams = KafkaStreams(
                count_topology("in", "out", store_type),
                {
                    "application.id": f"p2-{suffix}",
                    "num.stream.threads": threads,
                    "statestore.cache.max.bytes": cache,
                    "commit.interval.ms": 1000,
                    "state.dir": state_dir,
                    **(extra or {}),
                },
                cluster=cluster,
            )
            started = time.perf_counter()
            streams.start()
            deadline = started + max(120.0, records / 2_000)
            try:
                while _processed(streams) < records:
                    if time.perf_counter() > deadline:
                        raise RuntimeError(f"P2 did not finish: {_processed(streams)} of {records} records")
                    if streams.wait_for_state(streams.State.ERROR, timeout=0.01):
                        raise RuntimeError("The client failed; see the log")
                elapsed = time.perf_counter() - started
            finally:
                streams.close(timeout=60)
        # The newest count of every key, summed, is the input size: nothing lost or counted twice.
        from kstreams import Serdes

        long = Serdes.long()
        latest = {r.key: long.deserialize("out", r.value) for r in cluster.read("out")}
        if sum(latest.values()) != records:
            raise RuntimeError(f"P2 counted {sum(latest.values())} records, expected {records}")
    finally:
        cluster.close()
    return records / elapsed


def run_restore(records: int, store_type: str) -> float:
    """Records per second restored from a changelog of ``records`` records."""
    from kstreams import KafkaStreams, Serdes
    from kstreams.cluster import EmbeddedCluster
    from kstreams.state.restore_listener import StateRestoreListener

    app = f"restore-{uuid.uuid4().hex[:6]}"
    changelog = f"{app}-counts-changelog"
    cluster = EmbeddedCluster()
    cluster.create_topic("in", PARTITIONS)
    cluster.create_topic("out", PARTITIONS)
    cluster.create_topic(changelog, PARTITIONS, {"cleanup.policy": "compact"})
    long = Serdes.long()
    keys = max(1, records // 10)
    names = [f"user-{i:07d}".encode() for i in range(keys)]
    producer = cluster.producer()
    cols: dict[int, tuple[list[bytes], list[bytes | None], list[int]]] = {
        p: ([], [], []) for p in range(PARTITIONS)
    }
    for i in range(records):
        key = names[i % keys]
        ks, vs, ts = cols[default_partition(key, PARTITIONS)]
        ks.append(key)
        vs.append(long.serialize(changelog, i // keys + 1))
        ts.append(i)
    for p, (ks, vs, ts) in cols.items():
        for i in range(0, len(ks), CHUNK):
            producer.send(
                changelog,
                p,
                RecordBatch.from_columns(ks[i : i + CHUNK], vs[i : i + CHUNK], ts[i : i + CHUNK], p),
            )

    class Timer(StateRestoreListener):
        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.first = 0.0
            self.last = 0.0
            self.restored = 0
            self.done = threading.Event()
            self.open = 0

        def on_restore_start(
            self, topic_partition: Any, store_name: str, starting_offset: int, ending_offset: int
        ) -> None:
            with self.lock:
                self.first = self.first or time.perf_counter()
                self.open += 1

        def on_restore_end(self, topic_partition: Any, store_name: str, total_restored: int) -> None:
            with self.lock:
                self.restored += total_restored
                self.open -= 1
                if self.open == 0:
                    self.last = time.perf_counter()
                    self.done.set()

    timer = Timer()
    try:
        with tempfile.TemporaryDirectory(prefix="kstreams-restore-bench-") as state_dir:
            streams = KafkaStreams(
                count_topology("in", "out", store_type),
                {"application.id": app, "state.dir": state_dir, "num.stream.threads": 1},
                cluster=cluster,
            )
            streams.set_global_state_restore_listener(timer)
            streams.start()
            try:
                if not timer.done.wait(max(120.0, records / 2_000)):
                    raise RuntimeError(f"Restoration did not finish: {timer.restored} of {records} records")
            finally:
                streams.close(timeout=60)
    finally:
        cluster.close()
    if timer.restored != records:
        raise RuntimeError(f"Restored {timer.restored} records, expected {records}")
    return records / (timer.last - timer.first)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=KEYS)
    parser.add_argument(
        "--stores", nargs="+", default=["rocks_db", "in_memory"], choices=["rocks_db", "in_memory"]
    )
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--only", choices=["p2", "restore"], default=None)
    parser.add_argument(
        "--config",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="extra streams configs for P2, e.g. poll.ms=5",
    )
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.config)

    if args.only in (None, "p2"):
        batches = input_batches(args.records, args.keys)
        print(
            f"P2 count per key: {args.records:,} records, {args.keys:,} keys, {PARTITIONS} partitions"
            + (f", {extra}" if extra else "")
        )
        print(f"{'store':<10} {'cache':>8} {'threads':>7} {'records/s':>12}")
        for store in args.stores:
            for cache in (CACHE_ON, 0):
                for threads in args.threads:
                    rate = run_count(batches, args.records, store, cache, threads, extra)
                    cache_text = "10 MiB" if cache else "0"
                    print(f"{store:<10} {cache_text:>8} {threads:>7} {rate:>12,.0f}", flush=True)
    if args.only in (None, "restore"):
        print(f"Restore: a changelog of {args.records:,} records ({max(1, args.records // 10):,} keys)")
        print(f"{'store':<10} {'records/s':>12}")
        for store in args.stores:
            print(f"{store:<10} {run_restore(args.records, store):>12,.0f}", flush=True)


if __name__ == "__main__":
    main()
