"""Processing pause of a scale-out from 2 to 3 processes, on Apache Kafka.

    python bench/scale_out_bench.py --keys 20000            # this checkout
    python bench/scale_out_bench.py --repo /path/to/older/checkout   # another version, same bench

Two worker processes (tests/integration/streams_worker.py of ``--repo``: a count per key in a
logged in-memory store, at_least_once, one stream thread, every count forwarded to the output
topic) read a 6-partition topic. The bench loads ``--keys`` distinct keys (the store's size), then
produces a steady ``--rate`` records/s and starts a third worker. A reader thread follows the output
topic (read_uncommitted: under at_least_once a count is visible as soon as it is processed) and
records when each output partition (one per task) received records. It prints, for the
``--window`` seconds after the third worker started (and, as a baseline, for a window as long
before it):

- the longest pause of any task (the longest time an output partition received nothing),
- the median of the tasks' longest pauses, and how many tasks paused longer than one second,
- when the third worker first produced output.

Workers that support it get ``--probing-ms`` and ``--acceptable-lag`` (the state-aware assignor:
the third worker warms up before it takes tasks). Run the same command against an older checkout
(``git worktree add /tmp/before <commit>``; ``--repo /tmp/before``) for the figures before.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import itertools

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kstreams._native.record_batch import default_partition

PARTITIONS = 6


def start_worker(
    repo: Path, name: str, bootstrap: str, app: str, workdir: Path, extra: list[str]
) -> subprocess.Popen:
    worker = repo / "tests" / "integration" / "streams_worker.py"
    argv = [
        sys.executable,
        str(worker),
        "--bootstrap",
        bootstrap,
        "--application-id",
        app,
        "--source",
        f"{app}-in",
        "--sink",
        f"{app}-out",
        "--state-dir",
        str(workdir / name),
        "--name",
        name,
        "--guarantee",
        "at_least_once",
        "--threads",
        "1",
        *extra,
    ]
    log = open(workdir / f"{name}.log", "wb")
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL)


class OutputWatch:
    """Follows the output topic; keeps the arrival times per partition (monotonic seconds)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.arrivals: dict[int, list[float]] = {p: [] for p in range(PARTITIONS)}
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"watch-{uuid.uuid4()}"})
        self._consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(PARTITIONS)])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for message in self._consumer.consume(1000, 0.05):
                if message.error() is None:
                    self.arrivals[message.partition()].append(time.monotonic())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()


def longest_gap(times: list[float], start: float, end: float) -> float:
    inside = [start, *(t for t in times if start <= t <= end), end]
    return max(b - a for a, b in itertools.pairwise(inside))


def run(args: argparse.Namespace, bootstrap: str, workdir: Path) -> None:
    app = f"scale-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [NewTopic(f"{app}-in", PARTITIONS, 1), NewTopic(f"{app}-out", PARTITIONS, 1)]
    ).values():
        future.result(30)
    worker_text = (args.repo / "tests" / "integration" / "streams_worker.py").read_text()
    extra: list[str] = []
    if "--probing-ms" in worker_text:
        extra = ["--probing-ms", str(args.probing_ms), "--acceptable-lag", str(args.acceptable_lag)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(args.keys):
        key = f"key-{i}".encode()
        producer.produce(f"{app}-in", key=key, value=b"v", partition=default_partition(key, PARTITIONS))
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(60)
    workers = [start_worker(args.repo, f"w{i}", bootstrap, app, workdir, extra) for i in (1, 2)]
    watch = OutputWatch(bootstrap, f"{app}-out")
    # Both workers processed the load once every partition's output went quiet after having records.
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if all(watch.arrivals[p] and time.monotonic() - watch.arrivals[p][-1] > 2 for p in range(PARTITIONS)):
            break
    if args.verbose:
        print("output records per partition after the load:", {p: len(a) for p, a in watch.arrivals.items()})
    stop = threading.Event()

    def steady() -> None:
        n = 0
        while not stop.wait(0.02):
            for _ in range(max(1, args.rate // 50)):
                key = n % args.keys
                producer.produce(
                    f"{app}-in", key=f"key-{key}".encode(), value=b"v", partition=key % PARTITIONS
                )
                n += 1
            producer.poll(0)

    feeder = threading.Thread(target=steady, daemon=True)
    feeder.start()
    # A window as long, before the scale-out: the pauses this machine shows without one.
    baseline_start = time.monotonic()
    time.sleep(args.window)
    started = time.monotonic()
    third = start_worker(args.repo, "w3", bootstrap, app, workdir, extra)
    workers.append(third)
    time.sleep(args.window)
    end = time.monotonic()
    stop.set()
    feeder.join(10)
    watch.stop()
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.wait(60)
    gaps = sorted(longest_gap(watch.arrivals[p], started, end) for p in range(PARTITIONS))
    baseline = max(longest_gap(watch.arrivals[p], baseline_start, started) for p in range(PARTITIONS))
    third_log = (workdir / "w3.log").read_text(errors="replace")
    print(f"repo {args.repo}; store of {args.keys:,} keys; {args.rate} records/s; window {args.window}s")
    print(f"  longest pause of any task:     {gaps[-1]:.2f} s (without a scale-out: {baseline:.2f} s)")
    print(f"  median longest pause per task: {statistics.median(gaps):.2f} s")
    print(f"  tasks paused longer than 1 s:  {sum(g > 1 for g in gaps)} of {PARTITIONS}")
    print(f"  third worker warmed up first:  {'Warming up' in third_log}")
    print(f"  tasks the third worker ran:    {third_log.count(' is running')}")
    if args.verbose:
        for name in ("w1", "w2", "w3"):
            tail = (workdir / f"{name}.log").read_text(errors="replace").splitlines()[-15:]
            print(f"--- {name}", *tail, sep="\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=20000)
    parser.add_argument("--rate", type=int, default=300)
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--probing-ms", type=int, default=5000)
    parser.add_argument("--acceptable-lag", type=int, default=1000)
    parser.add_argument("--verbose", action="store_true", help="print the workers' log tails")
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    from tests.support.kafka_broker import KafkaBroker

    with tempfile.TemporaryDirectory(prefix="kstreams-scale-out-") as tmp:
        workdir = Path(tmp)
        broker = KafkaBroker(workdir)
        broker.start()
        try:
            broker.wait_ready()
            run(args, broker.bootstrap, workdir)
        finally:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
