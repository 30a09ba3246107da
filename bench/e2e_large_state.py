"""State that outgrows the cache: P2 with many distinct keys on RocksDB, on a broker, beside Kafka Streams.

P2 of bench/e2e_throughput.py (a count per key and a 1-minute windowed count, both RocksDB and
logged) over N input records (default 5,000,000) is run twice per system: with few keys (default
10,000: the stores' working set fits in RocksDB's block cache and memtables) and with many (default
1,000,000: most of it does not, and most updates are of keys absent from the record cache). For each
run it prints records/s, CPU per input record of the whole process (kstreams: every thread of the
Python process; Kafka Streams: the whole JVM, GC and JIT included) and RSS growth over the run; then the
ratio of the many-key run's CPU per record to the few-key run's.

Then restoration: a new client of Kafka Streams' run's application.id with an empty state directory
restores both stores from the changelogs that run wrote (kstreams reads Kafka Streams' changelog
format, so both restore the very same records; kstreams' own changelogs hold fewer, as its record
collector drops a key's superseded changelog records within a commit); it prints the changelog
records restored per second (from start() until the last store partition's restoration ended, as
the restore listener reports it) and the CPU per restored record, for kstreams and for Kafka Streams.

Both sides run with the same settings as bench/e2e_throughput.py (commit interval, poll and fetch
sizes, RocksDB stores), one stream thread, on the Apache Kafka broker the script starts (``--kafka``,
as the integration tests do) or on ``--bootstrap HOST:PORT``.

    python bench/e2e_large_state.py --kafka    # 5,000,000 records; 10,000 and 1,000,000 keys
    python bench/e2e_large_state.py --kafka --records 1000000 --many 200000 --systems kstreams
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import threading
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from e2e_throughput import (
    _KSTREAMS_ONLY,
    BROKER_CONFIG,
    RUNTIME_CONFIG,
    Data,
    _processed,
    _rss_mb,
    generate,
    load_input,
    topology,
)

from kstreams.runtime.streams_runtime import BACKLOG_PARTITION_FETCH_BYTES

STORES = ("counts", "windowed-counts")


def _changelog_records(bootstrap: str, app_id: str) -> int:
    """Records in the application's changelogs (their end offsets: nothing transactional here)."""
    from kstreams.cluster import KafkaCluster
    from kstreams.cluster.port import TopicPartition

    cluster = KafkaCluster(bootstrap)
    try:
        admin = cluster.admin()
        topics = admin.describe_topics([f"{app_id}-{store}-changelog" for store in STORES])
        partitions = [TopicPartition(t, p) for t, d in topics.items() for p in range(d.partitions)]
        return sum(end - start for start, end in admin.list_offsets(partitions).values())
    finally:
        cluster.close()


def _wait_group_empty(bootstrap: str, app_id: str, timeout: float = 60.0) -> None:
    """Wait until the application's group has no member left: Kafka Streams' consumers do not
    leave the group on close, so its members expire after ``session.timeout.ms``, and a client
    started before would fail to join (kstreams) or first wait for them (Kafka Streams)."""
    from confluent_kafka import ConsumerGroupState
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        group = admin.describe_consumer_groups([app_id])[app_id].result(timeout=10)
        if group.state in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD) and not group.members:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"group {app_id} still has members after {timeout:g} s")
        time.sleep(0.2)


def _config(app_id: str, state_dir: str, cache: bool) -> dict[str, Any]:
    return {
        "application.id": app_id,
        "num.stream.threads": 1,
        "state.dir": state_dir,
        "commit.interval.ms": 5000,
        "session.timeout.ms": 6000,  # Kafka Streams' members expire this soon after it closes
        **RUNTIME_CONFIG,
        **BROKER_CONFIG,
        # kstreams' restore consumer fetches this much per partition by default (Kafka Streams' 1 MB);
        # both restore with it, so the two read their changelogs alike.
        "restore.consumer.max.partition.fetch.bytes": BACKLOG_PARTITION_FETCH_BYTES,
        **({} if cache else {"statestore.cache.max.bytes": 0}),
    }


def kstreams_run(data: Data, bootstrap: str, cache: bool) -> tuple[dict[str, float], tuple[str, str, str]]:
    """P2 on kstreams: its figures, and (application.id, input topic, output topic)."""
    from kstreams import KafkaStreams
    from kstreams.cluster import KafkaCluster

    suffix = uuid.uuid4().hex[:6]
    cluster = KafkaCluster(bootstrap)
    inp, out = load_input(cluster, "p2", data, suffix)
    app_id = f"large-state-{suffix}"
    result: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="kstreams-large-state-") as state_dir:
        streams = KafkaStreams(topology("p2", inp, out), _config(app_id, state_dir, cache), cluster=cluster)
        rss0 = peak = _rss_mb()
        cpu0, started = time.process_time(), time.perf_counter()
        streams.start()
        deadline = started + max(300.0, data.records / 2_000)
        while _processed(streams) < data.records and time.perf_counter() < deadline:
            peak = max(peak, _rss_mb())
            if streams.wait_for_state(streams.State.ERROR, timeout=0.05):
                raise RuntimeError("kstreams failed; see the log")
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu0
        seen = _processed(streams)
        streams.close(timeout=120)
    if seen < data.records:
        raise RuntimeError(f"kstreams processed only {seen:,} of {data.records:,} records")
    cluster.close()
    result.update(rate=seen / elapsed, cpu_us=cpu / seen * 1e6, rss_growth=peak - rss0)
    return result, (app_id, inp, out)


def kstreams_restore(bootstrap: str, app: tuple[str, str, str], cache: bool) -> dict[str, float]:
    """A kstreams client of the run ``app`` (application.id, input, output) with an empty state
    directory: the time and CPU until every record of its changelogs is restored."""
    from kstreams import KafkaStreams
    from kstreams.cluster import KafkaCluster
    from kstreams.state.restore_listener import StateRestoreListener

    app_id, inp, out = app

    expected = _changelog_records(bootstrap, app_id)
    _wait_group_empty(bootstrap, app_id)

    class Counter(StateRestoreListener):
        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.restored = 0
            self.done = threading.Event()
            self.at = 0.0

        def on_restore_end(self, topic_partition: Any, store_name: str, total_restored: int) -> None:
            with self.lock:
                self.restored += total_restored
                if self.restored >= expected:
                    self.at = time.perf_counter()
                    self.done.set()

    counter = Counter()
    cluster = KafkaCluster(bootstrap)
    with tempfile.TemporaryDirectory(prefix="kstreams-large-restore-") as state_dir:
        streams = KafkaStreams(topology("p2", inp, out), _config(app_id, state_dir, cache), cluster=cluster)
        streams.set_global_state_restore_listener(counter)
        cpu0, started = time.process_time(), time.perf_counter()
        streams.start()
        finished = counter.done.wait(max(300.0, expected / 2_000))
        cpu = time.process_time() - cpu0
        streams.close(timeout=120)
    cluster.close()
    if not finished:
        raise RuntimeError(f"kstreams restored only {counter.restored:,} of {expected:,} records")
    return {
        "restored": expected,
        "restore_rate": expected / (counter.at - started),
        "restore_cpu_us": cpu / expected * 1e6,
    }


def _jvm_props(app_id: str, bootstrap: str, cache: bool) -> dict[str, Any]:
    props = {
        k: v for k, v in _config(app_id, "", cache).items() if k not in _KSTREAMS_ONLY and k != "state.dir"
    }
    props["bootstrap.servers"] = bootstrap
    return props


def kafka_streams_run(
    data: Data, bootstrap: str, cache: bool
) -> tuple[dict[str, float], tuple[str, str, str]]:
    """P2 on Kafka Streams (bench/kafka_streams_peer.py), as ``kstreams_run``."""
    from kafka_streams_peer import KafkaStreamsPeer

    from kstreams.cluster import KafkaCluster

    suffix = uuid.uuid4().hex[:6]
    cluster = KafkaCluster(bootstrap)
    inp, out = load_input(cluster, "p2", data, suffix)
    cluster.close()
    app_id = f"large-state-jvm-{suffix}"
    props = {
        k: v for k, v in _config(app_id, "", cache).items() if k not in _KSTREAMS_ONLY and k != "state.dir"
    }
    props["bootstrap.servers"] = bootstrap
    with KafkaStreamsPeer("p2", inp, out, props) as peer:
        rss0 = peer.rss_mb()
        cpu0, started = peer.cpu_seconds(), time.perf_counter()
        peer.start()
        done = peer.wait_processed(data.records, timeout=max(300.0, data.records / 2_000))
        elapsed, cpu = time.perf_counter() - started, peer.cpu_seconds() - cpu0
        rss = peer.rss_mb()
        seen = peer.processed
    if not done:
        raise RuntimeError(f"Kafka Streams processed only {seen:,} of {data.records:,} records")
    return {"rate": seen / elapsed, "cpu_us": cpu / seen * 1e6, "rss_growth": rss - rss0}, (app_id, inp, out)


def kafka_streams_restore(bootstrap: str, app: tuple[str, str, str], cache: bool) -> dict[str, float]:
    """As ``kstreams_restore``, on Kafka Streams."""
    from kafka_streams_peer import KafkaStreamsPeer

    app_id, inp, out = app
    expected = _changelog_records(bootstrap, app_id)
    _wait_group_empty(bootstrap, app_id)
    # A new peer has a new state directory: every store is restored from its changelog.
    with KafkaStreamsPeer("p2", inp, out, _jvm_props(app_id, bootstrap, cache)) as peer:
        cpu0, started = peer.cpu_seconds(), time.perf_counter()
        peer.start()
        if not peer.wait_restored(expected, timeout=max(300.0, expected / 2_000)):
            raise RuntimeError(f"Kafka Streams restored only {peer.restored:,} of {expected:,} records")
        cpu = peer.cpu_seconds() - cpu0
        assert peer.restored_at is not None
        return {
            "restored": expected,
            "restore_rate": expected / (peer.restored_at - started),
            "restore_cpu_us": cpu / expected * 1e6,
        }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--few", type=int, default=10_000, help="distinct keys of the small run")
    parser.add_argument("--many", type=int, default=1_000_000, help="distinct keys of the large run")
    parser.add_argument("--cache", choices=["on", "off"], default="off")
    parser.add_argument(
        "--systems", nargs="+", choices=["kstreams", "kafka-streams"], default=["kstreams", "kafka-streams"]
    )
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--kafka", action="store_true", help="start an Apache Kafka broker and run on it")
    args = parser.parse_args()
    if not (args.kafka or args.bootstrap):
        parser.error("this benchmark runs on a broker: add --kafka or --bootstrap HOST:PORT")
    if args.kafka:
        from tests.support.kafka_broker import temporary_broker

        with temporary_broker("kstreams-bench-kafka-") as bootstrap:
            return _run(args, bootstrap)
    return _run(args, args.bootstrap)


def _run(args: argparse.Namespace, bootstrap: str) -> int:
    cache = args.cache == "on"
    runners = {"kstreams": kstreams_run, "kafka-streams": kafka_streams_run}
    restorers = {"kstreams": kstreams_restore, "kafka-streams": kafka_streams_restore}
    print(f"P2 over {args.records:,} records on {bootstrap}, RocksDB stores, cache {args.cache}, 1 thread")
    cpu: dict[tuple[str, int], float] = {}
    for keys in (args.few, args.many):
        data = generate(args.records, keys, ["p2"])
        gc.freeze()  # the generated input stays alive for the run, out of the cyclic GC's reach
        apps = {}
        for system in args.systems:
            r, apps[system] = runners[system](data, bootstrap, cache)
            cpu[system, keys] = r["cpu_us"]
            print(
                f"{system:<14} {keys:>9,} keys: {r['rate']:>9,.0f} records/s, "
                f"{r['cpu_us']:6.1f} CPU us/record, RSS +{r['rss_growth']:.0f} MB",
                flush=True,
            )
        del data
        gc.unfreeze()
        gc.collect()
        # Both restore the same changelogs: Kafka Streams' when it ran (kstreams reads its format), so
        # that the record counts are equal (kstreams' collector writes fewer changelog records).
        source = "kafka-streams" if "kafka-streams" in apps else "kstreams"
        for system in args.systems:
            r = restorers[system](bootstrap, apps[source], cache)
            print(
                f"{system:<14} {keys:>9,} keys: restored {r['restored']:,.0f} records of {source}'s "
                f"changelogs at {r['restore_rate']:,.0f} records/s, {r['restore_cpu_us']:.1f} CPU us/record",
                flush=True,
            )
    for system in args.systems:
        ratio = cpu[system, args.many] / cpu[system, args.few]
        print(f"{system}: CPU per record with {args.many:,} keys / with {args.few:,} keys = {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
