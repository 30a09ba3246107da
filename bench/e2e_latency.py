"""End-to-end latency of P1 (JSON filter + map) on a broker: kstreams, Kafka Streams and the loop.

Each system runs P1 of bench/e2e_throughput.py (keep the records whose "bot" is false, map each to
its "user" field) in a process of its own: kstreams (``--style`` dsl: compiled predicates, or lambda:
stdlib json in ``map_values`` and lambdas), Kafka Streams 4.1.1 (jvm/src/main/java/io/kstreams/bench,
Jackson) and a hand-written confluent-kafka consume-process-produce loop. The input and output topics
have ``message.timestamp.type=LogAppendTime``, so both ends are stamped by the broker's clock.

For each system and guarantee (``alos``: at_least_once with its default commit.interval.ms 30000;
``alos-100``: at_least_once with 100 ms; ``eos``: exactly_once_v2 with its default, 100 ms) one
process runs through:

1. the maximum throughput: a backlog of ``--backlog`` records is on the input when it starts; its
   rate is that of the records after the first one processed (start-up left out);
2. one phase per ``--loads`` (default 25%, 50%, 80% of that maximum): a rate-limited producer
   writes records for ``--seconds`` seconds, each with an "id" header that the pipelines pass on
   to their outputs (kstreams and Kafka Streams carry headers; the loop copies them); the next
   phase starts once the system has caught up. The producer is a process of its own that queues
   records built before the phase in C (kstreams' compiled sender), so it takes a small share of
   the cores the broker and the system measured run on, the same share for every system at the
   same rate.

Latency of a record is its output's append time minus its input's append time (both in ms, read
back from the topics after the run; outputs with read_committed). Under exactly_once_v2 an output
is appended before its transaction commits, so the script also prints ``visible``: the wall-clock
time a read_committed consumer in this process received the output minus the input's append time,
what a downstream application sees. Each system runs with its own defaults besides the guarantee
and commit interval (producer linger.ms: 100 in Kafka Streams, 5 in kstreams and in the loop's
librdkafka), which is what a user of each gets.

    python bench/e2e_latency.py --kafka --quick
    python bench/e2e_latency.py --kafka --repeat 3
    python bench/e2e_latency.py --bootstrap 127.0.0.1:9092 --seconds 20 --backlog 500000
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

PARTITIONS = 2
LOG_APPEND = {"message.timestamp.type": "LogAppendTime"}
GUARANTEES = {
    "alos": ("at_least_once", None),
    "alos-100": ("at_least_once", 100),
    "eos": ("exactly_once_v2", None),
}
_ID = struct.Struct(">q")
REPORT_S = 0.1  # how often a worker prints its processed count


# ------------------------------------------------------------------------ the worker processes


def _read_props(path: str) -> dict[str, str]:
    with open(path) as f:
        return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)


def _protocol(report: Any, run: Any) -> None:
    """BenchMain's protocol: print ready, wait for a line, start, print processed counts until
    stdin closes, then stop and print closed."""
    print("ready", flush=True)
    if not sys.stdin.readline():
        return
    stop = threading.Event()
    watcher = threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True)
    runner = threading.Thread(target=run, args=(stop,), daemon=True)
    runner.start()
    print("started", flush=True)
    watcher.start()
    last = -1
    while not stop.wait(REPORT_S):
        n = report()
        if n != last:
            print(f"processed {n}", flush=True)
            last = n
    runner.join(90)
    print("closed", flush=True)


def kstreams_worker(style: str, pipeline: str, inp: str, out: str, props_path: str) -> None:
    import e2e_throughput as bench

    from kstreams import KafkaStreams
    from kstreams.cluster import KafkaCluster

    props: dict[str, Any] = _read_props(props_path)
    bootstrap = props.pop("bootstrap.servers")
    for key, value in props.items():
        props[key] = int(value) if value.lstrip("-").isdigit() else value
    with tempfile.TemporaryDirectory(prefix="kstreams-latency-") as state_dir:
        streams = KafkaStreams(
            bench.topology(pipeline, inp, out, style),
            {**props, "state.dir": state_dir},
            cluster=KafkaCluster(bootstrap),
        )

        def run(stop: threading.Event) -> None:
            streams.start()
            stop.wait()
            streams.close(timeout=60)

        _protocol(lambda: bench._processed(streams), run)


def loop_worker(pipeline: str, inp: str, out: str, props_path: str) -> None:
    """P1 as a hand-written confluent-kafka loop: offsets committed (asynchronously) every
    commit.interval.ms under at_least_once; a transaction per commit interval, with the offsets,
    under exactly_once_v2 (consumer read_committed)."""
    from confluent_kafka import Consumer, KafkaException, Producer

    from kstreams.serdes import json_loads

    assert pipeline == "p1"
    props = _read_props(props_path)
    eos = props["processing.guarantee"] == "exactly_once_v2"
    interval = int(props.get("commit.interval.ms") or (100 if eos else 30_000)) / 1000
    consumer = Consumer(
        {
            "bootstrap.servers": props["bootstrap.servers"],
            "group.id": props["application.id"],
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **({"isolation.level": "read_committed"} if eos else {}),
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": props["bootstrap.servers"],
            "linger.ms": 5,
            **({"transactional.id": props["application.id"]} if eos else {}),
        }
    )
    seen = [0]

    def run(stop: threading.Event) -> None:
        consumer.subscribe([inp])
        if eos:
            producer.init_transactions()
            producer.begin_transaction()
        next_commit = time.monotonic() + interval
        while not stop.is_set():
            messages = consumer.consume(10_000, 0.005)
            for m in messages:
                if m.error():
                    continue
                doc = json_loads(m.value())
                if doc["bot"] is False:
                    while True:
                        try:
                            producer.produce(out, doc["user"].encode(), m.key(), headers=m.headers())
                            break
                        except BufferError:
                            producer.poll(0.01)
            seen[0] += len(messages)
            producer.poll(0)
            if time.monotonic() >= next_commit:
                next_commit = time.monotonic() + interval
                if eos:
                    positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
                    if positions:
                        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata())
                    producer.commit_transaction()
                    producer.begin_transaction()
                elif consumer.assignment():
                    try:
                        consumer.commit(asynchronous=True)
                    except KafkaException as exc:  # _NO_OFFSET: nothing consumed since the last commit
                        if exc.args[0].code() != -168:
                            raise
        if eos:
            producer.abort_transaction()
        producer.flush(30)
        consumer.close()

    _protocol(lambda: seen[0], run)


# ------------------------------------------------------------------------------- the driver


@dataclass
class Phase:
    load: float
    rate: float
    first_id: int
    produced: int = 0
    produced_rate: float = 0.0
    latencies: list[int] = field(default_factory=list)
    visible: list[float] = field(default_factory=list)


def _create_topics(bootstrap: str, *names: str) -> None:
    from kstreams.cluster import KafkaCluster

    cluster = KafkaCluster(bootstrap)
    for name in names:
        cluster.create_topic(name, PARTITIONS, LOG_APPEND)


def _producer(bootstrap: str) -> Any:
    from confluent_kafka import Producer

    # Kafka's default partitioner, so each key goes where a Java producer puts it.
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "partitioner": "murmur2_random"})


def _produce_backlog(bootstrap: str, topic: str, rows: list[tuple[bytes, bytes]], records: int) -> None:
    producer = _producer(bootstrap)
    for i in range(records):
        key, value = rows[i % len(rows)]
        while True:
            try:
                producer.produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(60)


def _phase_batches(
    rows: list[tuple[bytes, bytes]], parts: list[int], first_id: int, total: int
) -> dict[int, tuple[Any, Any]]:
    """Records first_id .. first_id + total - 1, each with its "id" header, as one RecordBatch per
    partition (Kafka's default partitioner), with the ids of each batch in order."""
    import numpy as np

    from kstreams._native.record_batch import RecordBatch

    ids: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    n = len(rows)
    for i in range(first_id, first_id + total):
        ids[parts[i % n]].append(i)
    pack = _ID.pack
    return {
        p: (
            RecordBatch.from_columns(
                [rows[i % n][0] for i in these],
                [rows[i % n][1] for i in these],
                [0] * len(these),  # "now"; the topic's LogAppendTime stamps them anyway
                p,
                -1,
                [[("id", pack(i))] for i in these],
            ),
            np.asarray(these, dtype=np.int64),
        )
        for p, these in ids.items()
        if these
    }


def load_producer(bootstrap: str, topic: str, rows: list[tuple[bytes, bytes]], conn: Any) -> None:
    """The rate-limited load producer, in a process of its own so that it shares neither the GIL
    with the tail consumer nor, as a Python loop of produce calls would, a core's worth of CPU with
    the system measured: each phase's records are built before its clock starts, and kstreams'
    compiled sender queues the ones due every half millisecond. For each (first id, rate, seconds)
    received on ``conn`` it answers (records, records/s) once every record is delivered."""
    from kstreams._native.record_batch import default_partition
    from kstreams.cluster.kafka_native import native_unavailable_reason
    from kstreams.cluster.kafka_producer import native_sender

    sender = native_sender({"bootstrap.servers": bootstrap, "linger.ms": 1})
    if sender is None:
        raise RuntimeError(
            f"the load producer needs kstreams' compiled sender: {native_unavailable_reason()}"
        )
    parts = [default_partition(key, PARTITIONS) for key, _ in rows]
    conn.send("ready")
    while (job := conn.recv()) is not None:
        first_id, rate, seconds = job
        total = int(rate * seconds)
        batches = _phase_batches(rows, parts, first_id, total)
        sent = dict.fromkeys(batches, 0)
        started = time.perf_counter()
        while True:
            due = first_id + min(total, int((time.perf_counter() - started) * rate) + 1)
            for p, (batch, ids) in batches.items():
                upto = int(ids.searchsorted(due))
                if upto > sent[p]:
                    sender.send_batch(topic, p, batch.slice(sent[p], upto), ())
                    sent[p] = upto
            sender.poll(0)
            if due >= first_id + total:
                break
            time.sleep(0.0005)
        sender.flush(30)
        failures = sender.take_failures()
        if failures:
            raise RuntimeError(f"{len(failures)} load records not delivered: {failures[0][0]}")
        conn.send((total, total / (time.perf_counter() - started)))
    sender.close()


class _Load:
    """The driver's end of ``load_producer``'s process."""

    def __init__(self, bootstrap: str, topic: str, rows: list[tuple[bytes, bytes]]) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=load_producer, args=(bootstrap, topic, rows, child), name="latency-load", daemon=True
        )
        self._process.start()
        if not self._conn.poll(60) or self._conn.recv() != "ready":
            raise RuntimeError("the load producer did not start")

    def produce(self, phase: Phase, seconds: float) -> None:
        """Produce at ``phase.rate`` records/s for ``seconds``, each with an "id" header."""
        self._conn.send((phase.first_id, phase.rate, seconds))
        if not self._conn.poll(seconds + 120):
            raise RuntimeError("the load producer did not finish its phase")
        phase.produced, phase.produced_rate = self._conn.recv()

    def close(self) -> None:
        self._conn.send(None)
        self._process.join(30)


def _ids_and_times(bootstrap: str, topic: str, isolation: str = "read_committed") -> dict[int, int]:
    """id header -> append time (ms) of every record of ``topic`` that has one."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"latency-read-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    consumer.subscribe([topic])
    times: dict[int, int] = {}
    eof: set[int] = set()
    deadline = time.monotonic() + 120
    while len(eof) < PARTITIONS and time.monotonic() < deadline:
        for m in consumer.consume(10_000, 0.5):
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    eof.add(m.partition())
                continue
            for name, value in m.headers() or ():
                if name == "id":
                    times[_ID.unpack(value)[0]] = m.timestamp()[1]
    consumer.close()
    return times


class _Tail(threading.Thread):
    """A read_committed consumer of the output: the wall-clock time (ms) each id arrived."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="latency-tail", daemon=True)
        from confluent_kafka import Consumer

        self.arrived: dict[int, float] = {}
        self.stop = threading.Event()
        self.assigned = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"latency-tail-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": "latest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 5,
            }
        )
        self._consumer.subscribe([topic], on_assign=lambda c, parts: self.assigned.set())

    def run(self) -> None:
        unpack = _ID.unpack
        while not self.stop.is_set():
            messages = self._consumer.consume(10_000, 0.05)
            now = time.time() * 1000
            for m in messages:
                for name, value in m.headers() or ():
                    if name == "id":
                        self.arrived[unpack(value)[0]] = now
        self._consumer.close()


def _cuts(values: list[float]) -> list[float]:
    """p50, p99 and p99.9 of ``values`` (not empty)."""
    ordered = sorted(values)
    return [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in (0.5, 0.99, 0.999)]


def _shown(cuts: list[float] | None) -> str:
    if cuts is None:
        return f"{'(no outputs)':>24}"
    p50, p99, p999 = cuts
    return f"{p50:7.0f} {p99:7.0f} {p999:8.0f}"


def _percentiles(values: list[float]) -> str:
    return _shown(_cuts(values) if values else None)


def run_system(
    system: str, guarantee: str, bootstrap: str, rows: list[tuple[bytes, bytes]], args: argparse.Namespace
) -> tuple[float, list[Phase]]:
    """One system under one guarantee: (maximum records/s, phases with latencies)."""
    from kafka_streams_peer import KafkaStreamsPeer

    suffix = uuid.uuid4().hex[:6]
    inp, out = f"lat-in-{suffix}", f"lat-out-{suffix}"
    _create_topics(bootstrap, inp, out)
    _produce_backlog(bootstrap, inp, rows, args.backlog)
    processing, commit = GUARANTEES[guarantee]
    props: dict[str, Any] = {
        "application.id": f"lat-{system.replace(' ', '-')}-{suffix}",
        "bootstrap.servers": bootstrap,
        "processing.guarantee": processing,
        **({"commit.interval.ms": commit} if commit is not None else {}),
    }
    me = [sys.executable, os.path.abspath(__file__), "--worker"]
    command = {
        "kstreams dsl": [*me, "kstreams-dsl"],
        "kstreams lambda": [*me, "kstreams-lambda"],
        "loop": [*me, "loop"],
        "Kafka Streams": None,
    }[system]
    if command is None:
        props["report.ms"] = int(REPORT_S * 1000)
    phases: list[Phase] = []
    tail = _Tail(bootstrap, out)
    tail.start()
    with KafkaStreamsPeer("p1", inp, out, props, command) as worker:
        started = time.perf_counter()
        worker.start()
        if not worker.wait_processed(args.backlog, timeout=300):
            raise RuntimeError(
                f"{system} processed {worker.processed} of {args.backlog}: {worker.log_tail()}"
            )
        finished = time.perf_counter()
        first_at, first = worker.first_processed_at or started, worker.first_processed
        max_rate = (args.backlog - first) / (finished - first_at) if finished > first_at else 0.0
        tail.assigned.wait(30)
        load = _Load(bootstrap, inp, rows)
        next_id, expected = 0, args.backlog
        # Fixed rates put every system under the same absolute load; fractions, under its own.
        targets = list(args.rates) if args.rates else [share * max_rate for share in args.loads]
        for rate in targets:
            phase = Phase(rate / max_rate if max_rate else 0.0, rate, next_id)
            load.produce(phase, args.seconds)
            next_id += phase.produced
            expected += phase.produced
            worker.wait_processed(expected, timeout=120)
            phases.append(phase)
        load.close()
        time.sleep(1.0 if processing == "exactly_once_v2" or commit else 0.5)  # the last outputs appended
    tail.stop.set()
    tail.join(10)
    inputs = _ids_and_times(bootstrap, inp)
    outputs = _ids_and_times(bootstrap, out)
    for phase in phases:
        for i in range(phase.first_id, phase.first_id + phase.produced):
            appended = outputs.get(i)
            if appended is not None and i in inputs:
                phase.latencies.append(appended - inputs[i])
                if i in tail.arrived:
                    phase.visible.append(tail.arrived[i] - inputs[i])
    return max_rate, phases


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 2 and sys.argv[1] == "--worker":
        kind, rest = sys.argv[2], sys.argv[3:]
        if kind == "loop":
            loop_worker(*rest)
        else:
            kstreams_worker(kind.removeprefix("kstreams-"), *rest)
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", default=None, help="a Kafka broker (default: --kafka starts one)")
    parser.add_argument("--kafka", action="store_true", help="start an Apache Kafka broker for the run")
    parser.add_argument(
        "--systems",
        nargs="+",
        default=["kstreams dsl", "kstreams lambda", "Kafka Streams", "loop"],
        choices=["kstreams dsl", "kstreams lambda", "Kafka Streams", "loop"],
    )
    parser.add_argument("--guarantees", nargs="+", default=list(GUARANTEES), choices=list(GUARANTEES))
    parser.add_argument("--loads", nargs="+", type=float, default=[0.25, 0.5, 0.8])
    parser.add_argument(
        "--rates",
        nargs="+",
        type=float,
        help="records/s of the load phases, the same for every system (in place of --loads)",
    )
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each load phase")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds of every system in turn; with more than one, the medians of each phase's "
        "percentiles over the rounds are printed at the end",
    )
    parser.add_argument("--backlog", type=int, default=500_000, help="records of the maximum-throughput run")
    parser.add_argument(
        "--quick", action="store_true", help="3 s phases and a 100,000-record backlog (about 5 minutes)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.backlog = 3.0, 100_000
    if not (args.kafka or args.bootstrap):
        parser.error("latency is measured on a broker: --kafka or --bootstrap HOST:PORT")
    if args.kafka:
        from tests.support.kafka_broker import temporary_broker

        with temporary_broker("kstreams-latency-kafka-") as bootstrap:
            return _run(args, bootstrap)
    return _run(args, args.bootstrap)


def _run(args: argparse.Namespace, bootstrap: str) -> int:
    import e2e_throughput as bench

    data = bench.generate(20_000, 10_000, ["p1"])
    rows = [(k, v) for k, v, _, _ in data.rows("p1")]
    print(
        f"P1 on {bootstrap}: backlog {args.backlog:,} records, then {args.seconds:g} s at each of "
        + (
            f"{', '.join(f'{rate:,.0f}' for rate in args.rates)} records/s"
            if args.rates
            else f"{', '.join(f'{load:.0%}' for load in args.loads)} of each system's maximum"
        )
        + "; latency in ms "
        "(output append time - input append time; visible: received by a read_committed consumer)"
    )
    header = (
        f"{'system':16} {'guarantee':9} {'max rec/s':>9} {'load':>5} {'in rec/s':>9} {'outputs':>8}"
        f" | {'p50':>7} {'p99':>7} {'p99.9':>8} | visible: {'p50':>7} {'p99':>7} {'p99.9':>8}"
    )
    print(header, flush=True)
    rounds: dict[tuple[str, str, int], list[tuple[float, Phase]]] = {}
    for _ in range(args.repeat):
        for guarantee in args.guarantees:
            for system in args.systems:
                max_rate, phases = run_system(system, guarantee, bootstrap, rows, args)
                for n, phase in enumerate(phases):
                    rounds.setdefault((system, guarantee, n), []).append((max_rate, phase))
                    print(_line(system, guarantee, max_rate, phase), flush=True)
    if args.repeat > 1:
        print(f"\nmedians over {args.repeat} rounds (of max rec/s, in rec/s, outputs and each percentile)")
        print(header, flush=True)
        for (system, guarantee, _), runs in rounds.items():
            print(_median_line(system, guarantee, runs), flush=True)
    return 0


def _line(system: str, guarantee: str, max_rate: float, phase: Phase) -> str:
    return (
        f"{system:16} {guarantee:9} {max_rate:>9,.0f} {phase.load:>5.0%}"
        f" {phase.produced_rate:>9,.0f} {len(phase.latencies):>8,}"
        f" | {_percentiles(phase.latencies)} | visible: {_percentiles(phase.visible)}"
    )


def _median_line(system: str, guarantee: str, runs: list[tuple[float, Phase]]) -> str:
    from statistics import median

    def medians(column: str) -> str:
        cuts = [_cuts(getattr(phase, column)) for _, phase in runs if getattr(phase, column)]
        return _shown([median(c[i] for c in cuts) for i in range(3)] if cuts else None)

    phases = [phase for _, phase in runs]
    return (
        f"{system:16} {guarantee:9} {median(rate for rate, _ in runs):>9,.0f}"
        f" {median(p.load for p in phases):>5.0%} {median(p.produced_rate for p in phases):>9,.0f}"
        f" {median(len(p.latencies) for p in phases):>8,.0f}"
        f" | {medians('latencies')} | visible: {medians('visible')}"
    )


if __name__ == "__main__":
    sys.exit(main())
