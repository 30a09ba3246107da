"""End-to-end throughput of kstreams pipelines, beside the interpreter floor.

Pipelines over N records (default 1,000,000; ~100-byte JSON values, 10,000 keys, 2 partitions):

- P1 stateless: deserialize, keep the non-bot half (``json_field("bot").eq(False)``), map the value
  to its "user" field, serialize, write.
- P2 stateful: count per key (a logged, cached store) written to a topic, and a windowed count
  (1-minute tumbling windows, logged store).
- P3 a sum per key of a long value (``reduce(operator.add)``), written to a topic.

Each is written three ways (``--style``): ``dsl`` with kstreams' compiled vocabulary
(``Serdes.json()``, ``json_field``, ``operator.add``); ``lambda`` as a user writes it with plain
Python: values read as bytes and parsed in ``map_values`` (``--json stdlib``: the standard
library's json, through the same call as ``Serdes.json()``; ``--json orjson``: orjson), lambda
filters and mappers, ``reduce(lambda a, b: a + b)``; and ``processor``, a Processor API class per
pipeline that parses the value the same way, reads and writes its stores with ``get``/``put``
(``fetch``/``put`` for the window) and forwards every result. Its stores have the Processor API's
defaults (logged, not cached), so it runs only with ``--cache off``. The hand-written loops parse
JSON with the same library and the same call as the kstreams side.

``--headers`` gives every input record a header (a 16-byte "trace" id), as traced production data
has; kstreams passes it on to the records each one makes (output and, on P2/P3 with the cache off,
every update), and the loops then write it with the same records (not with changelog records).

``--cache off`` runs kstreams with ``statestore.cache.max.bytes=0``, so every update of a count or sum
is forwarded and logged, and the loops then write an output record and a changelog record per
update (P2 also one for the windowed count); with the cache on (the default) the loops write each
key's result and changelog record once at the end, which is what kstreams' cache comes close to.

Each runs on the embedded cluster (or, with ``--bootstrap``, a Kafka-protocol broker; with
``--kafka``, an Apache Kafka broker the script starts as the integration tests do) with 1 and 2
stream threads, with compiled processors and (``--paths both``) without them. For each run the
script prints records/s (input records over the time from start() until the last one was
processed; and, in brackets, from the first processed record on, without the start-up), process
CPU microseconds per input record (``time.process_time`` over the run: every thread of the
process, the embedded broker included) and peak RSS. Beside them, in the same process, the
interpreter floor: a hand-written Python loop over plain dicts doing the same work; with
``--bootstrap``, also a hand-written confluent-kafka consume-process-produce loop.

``--kafka-streams`` (on a broker) also runs each pipeline on Kafka Streams (the Java of
jvm/src/main/java/io/kstreams/bench/BenchMain.java, compiled with javac against the Kafka Streams of
jvm/pom.xml, in a child JVM: bench/kafka_streams_peer.py) with each ``--threads`` count and the same
commit interval, cache size, poll and fetch settings; JSON values are parsed by Jackson's
``readTree`` in the source's serde (as ``Serdes.json()`` does), stores are RocksDB as kstreams'. Its
CPU is the whole JVM's (GC and JIT threads included, /proc/<pid>/stat) over the same span as
kstreams'. At the end one table lists every run with its CPU per record over Kafka Streams' (same
thread count) and over the confluent-kafka loop's, and the same after start-up (from the first
processed record on: the JVM compiles its hot code in the first seconds of a run).

    python bench/e2e_throughput.py --records 1000000
    python bench/e2e_throughput.py --pipelines p2 p3 --threads 1 2 --records 5000000
    python bench/e2e_throughput.py --bootstrap 127.0.0.1:9092 --pipelines p1 p2
    python bench/e2e_throughput.py --style lambda --json orjson --paths both
    python bench/e2e_throughput.py --kafka --style lambda --json orjson --cache off --threads 1
    python bench/e2e_throughput.py --kafka --kafka-streams --style dsl lambda --cache off --threads 1 2
"""

from __future__ import annotations

import argparse
import gc
import json
import operator
import os
import random
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kstreams._native.record_batch import RecordBatch, default_partition
from kstreams.serdes import json_loads

WINDOW_MS = 60_000
# How often a run's progress is read, and how often near its end.
POLL_S = 0.05
FINE_POLL_S = 0.001
PARTITIONS = 2
_WRITTEN = 4096  # records a plain loop's output buffer holds
_LONG = struct.Struct(">q")
# Larger fetches and batches than Kafka's defaults (max.poll.records 1000, 1000 buffered records per
# partition): with the defaults the polling thread, not processing, bounds throughput.
RUNTIME_CONFIG: dict[str, Any] = {
    "max.poll.records": 20_000,
    "buffered.records.per.partition": 50_000,
    "processing.batch.size": 5_000,
    # A paused partition is resumed only after the polling thread's next poll returns; a short
    # poll keeps a drained buffer from waiting up to the default 100 ms.
    "poll.ms": 5,
}
# Fetches of a few MB a request keep a large backlog flowing; the receive limit stays above them
# for brokers that answer a fetch with more than fetch.max.bytes (some Kafka-compatible ones do).
BROKER_CONFIG: dict[str, Any] = {
    "main.consumer.fetch.max.bytes": 16 << 20,
    "main.consumer.max.partition.fetch.bytes": 4 << 20,
    "main.consumer.receive.message.max.bytes": 256 << 20,
}


@dataclass
class Data:
    """The generated input: per-partition batches of JSON values and of long values."""

    json_batches: dict[int, list[RecordBatch]]
    long_batches: dict[int, list[RecordBatch]]
    records: int
    headers: bool = False

    def rows(self, pipeline: str) -> Any:
        """(key, value, timestamp, headers) of every record, as plain Python objects, chunk by
        chunk (headers None without ``--headers``)."""
        batches = self.long_batches if pipeline == "p3" else self.json_batches
        for chunks in batches.values():
            for chunk in chunks:
                n = len(chunk)
                headers = [chunk.headers(i) for i in range(n)] if self.headers else [None] * n
                yield from zip(
                    chunk.keys(), chunk.values(), chunk.timestamps_array().tolist(), headers, strict=True
                )


def generate(
    records: int,
    keys: int,
    pipelines: list[str],
    seed: int = 11,
    chunk: int = 20_000,
    headers: bool = False,
) -> Data:
    """The input records; JSON values only when a pipeline reads them (P1, P2), long values only
    for P3 (so a large P3 run does not hold JSON it never reads); with ``headers``, each with a
    "trace" header of 16 random bytes."""
    want_json = any(p in ("p1", "p2") for p in pipelines)
    want_long = "p3" in pipelines
    rng = random.Random(seed)
    start = int(time.time() * 1000) - records // 10  # near now: brokers may expire old records
    pages = ["/", "/search", "/cart", "/checkout", "/product", "/help"]
    cols: dict[int, tuple[list[bytes], list[bytes], list[bytes], list[int]]] = {
        p: ([], [], [], []) for p in range(PARTITIONS)
    }
    key_names = [f"user-{i:05d}".encode() for i in range(keys)]
    key_parts = [default_partition(k, PARTITIONS) for k in key_names]
    for i in range(records):
        k = rng.randrange(keys)
        key = key_names[k]
        bot = rng.random() < 0.5
        ms = rng.randrange(1, 900)
        value = (
            json.dumps(
                {
                    "user": key.decode(),
                    "page": pages[i % 6],
                    "bot": bot,
                    "ms": ms,
                    "ref": "campaign-0000000000"[: 10 + i % 9],
                },
                separators=(",", ":"),
            ).encode()
            if want_json
            else b""
        )
        long_value = _LONG.pack(ms - 450) if want_long else b""
        ts = start + i // 10
        keys_, values, longs, stamps = cols[key_parts[k]]
        keys_.append(key)
        values.append(value)
        longs.append(long_value)
        stamps.append(ts)
    json_batches: dict[int, list[RecordBatch]] = {}
    long_batches: dict[int, list[RecordBatch]] = {}

    def batches(ks: list[bytes], vs: list[bytes], ts: list[int], p: int) -> list[RecordBatch]:
        if not headers:
            return [
                RecordBatch.from_columns(ks[i : i + chunk], vs[i : i + chunk], ts[i : i + chunk], p)
                for i in range(0, len(ks), chunk)
            ]
        rows = [(k, v, t, p, 0, [("trace", rng.randbytes(16))]) for k, v, t in zip(ks, vs, ts, strict=True)]
        return [RecordBatch.from_records(rows[i : i + chunk]) for i in range(0, len(rows), chunk)]

    for p, (ks, vs, ls, ts) in cols.items():
        if want_json:
            json_batches[p] = batches(ks, vs, ts, p)
        if want_long:
            long_batches[p] = batches(ks, ls, ts, p)
    return Data(json_batches, long_batches, records, headers)


# --------------------------------------------------------------------------- the topologies


def json_library(name: str) -> Any:
    """The JSON parser of both sides: stdlib json (through kstreams' call of it) or orjson."""
    if name == "orjson":
        import orjson

        return orjson.loads
    return json_loads


def topology(pipeline: str, inp: str, out: str, style: str = "dsl", loads: Any = json_loads) -> Any:
    from kstreams import Consumed, Materialized, Produced, Serdes, StreamsBuilder, TimeWindows
    from kstreams.predicates import json_field

    if style == "processor":
        return _processor_topology(pipeline, inp, out, loads)
    builder = StreamsBuilder()
    if style == "lambda":
        return _lambda_topology(builder, pipeline, inp, out, loads)
    if pipeline == "p1":
        stream = builder.stream(inp, Consumed.with_(Serdes.string(), Serdes.json()))
        (
            stream.filter(json_field("bot").eq(False))
            .map_values(json_field("user"))
            .to(out, Produced.with_(Serdes.string(), Serdes.string()))
        )
    elif pipeline == "p2":
        stream = builder.stream(inp, Consumed.with_(Serdes.string(), Serdes.json()))
        grouped = stream.group_by_key()
        grouped.count(Materialized.as_("counts")).to_stream().to(
            out, Produced.with_(Serdes.string(), Serdes.long())
        )
        grouped.windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_MS)).count(
            Materialized.as_("windowed-counts")
        )
    else:
        stream = builder.stream(inp, Consumed.with_(Serdes.string(), Serdes.long()))
        stream.group_by_key().reduce(operator.add, Materialized.as_("sums")).to_stream().to(
            out, Produced.with_(Serdes.string(), Serdes.long())
        )
    return builder.build()


def _lambda_topology(builder: Any, pipeline: str, inp: str, out: str, loads: Any) -> Any:
    """The pipelines as a user writes them with plain Python functions."""
    from kstreams import Consumed, Materialized, Produced, Serdes, TimeWindows

    if pipeline == "p1":
        stream = builder.stream(inp, Consumed.with_(Serdes.string(), Serdes.bytes()))
        (
            stream.map_values(loads)
            .filter(lambda key, doc: doc["bot"] is False)
            .map_values(lambda doc: doc["user"])
            .to(out, Produced.with_(Serdes.string(), Serdes.string()))
        )
    elif pipeline == "p2":
        stream = builder.stream(inp, Consumed.with_(Serdes.string(), Serdes.bytes()))
        grouped = stream.map_values(loads).group_by_key()
        grouped.count(Materialized.as_("counts")).to_stream().to(
            out, Produced.with_(Serdes.string(), Serdes.long())
        )
        grouped.windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_MS)).count(
            Materialized.as_("windowed-counts")
        )
    else:
        stream = builder.stream(inp, Consumed.with_(Serdes.string(), Serdes.long()))
        stream.group_by_key().reduce(
            lambda a, b: a + b, Materialized.with_(Serdes.string(), Serdes.long())
        ).to_stream().to(out, Produced.with_(Serdes.string(), Serdes.long()))
    return builder.build()


def _processor_topology(pipeline: str, inp: str, out: str, loads: Any) -> Any:
    """The pipelines as a Processor API user writes them: a Processor class per pipeline over
    stores with the Processor API's defaults (logged, not cached), forwarding every result."""
    from kstreams import Serdes, Stores, Topology
    from kstreams.processor import Processor, ProcessorContext, Record

    class FilterMap(Processor[str, bytes, str, str]):
        def init(self, context: ProcessorContext[str, str]) -> None:
            self.forward = context.forward

        def process(self, record: Record[str, bytes]) -> None:
            doc = loads(record.value)
            if doc["bot"] is False:
                self.forward(record.with_value(doc["user"]))

    class Counts(Processor[str, bytes, str, int]):
        def init(self, context: ProcessorContext[str, int]) -> None:
            self.forward = context.forward
            self.counts = context.get_state_store("counts")
            self.windows = context.get_state_store("windowed-counts")

        def process(self, record: Record[str, bytes]) -> None:
            loads(record.value)
            key, timestamp = record.key, record.timestamp
            count = (self.counts.get(key) or 0) + 1
            self.counts.put(key, count)
            start = timestamp - timestamp % WINDOW_MS
            self.windows.put(key, (self.windows.fetch(key, start) or 0) + 1, start)
            self.forward(record.with_value(count))

    class Sums(Processor[str, int, str, int]):
        def init(self, context: ProcessorContext[str, int]) -> None:
            self.forward = context.forward
            self.sums = context.get_state_store("sums")

        def process(self, record: Record[str, int]) -> None:
            total = (self.sums.get(record.key) or 0) + record.value
            self.sums.put(record.key, total)
            self.forward(record.with_value(total))

    topology = Topology()
    value_serde = Serdes.long() if pipeline == "p3" else Serdes.bytes()
    topology.add_source(
        "source",
        inp,
        key_deserializer=Serdes.string().deserializer(),
        value_deserializer=value_serde.deserializer(),
    )
    supplier = {"p1": FilterMap, "p2": Counts, "p3": Sums}[pipeline]
    topology.add_processor("process", supplier, "source")
    long_serde = Serdes.long()
    if pipeline == "p2":
        topology.add_state_store(
            Stores.key_value_store_builder(
                Stores.persistent_key_value_store("counts"), Serdes.string(), long_serde
            ),
            "process",
        )
        topology.add_state_store(
            Stores.window_store_builder(
                Stores.persistent_window_store("windowed-counts", WINDOW_MS, WINDOW_MS),
                Serdes.string(),
                long_serde,
            ),
            "process",
        )
    elif pipeline == "p3":
        topology.add_state_store(
            Stores.key_value_store_builder(
                Stores.persistent_key_value_store("sums"), Serdes.string(), long_serde
            ),
            "process",
        )
    topology.add_sink(
        "sink",
        out,
        "process",
        key_serializer=Serdes.string().serializer(),
        value_serializer=(Serdes.string() if pipeline == "p1" else long_serde).serializer(),
    )
    return topology


# --------------------------------------------------------------------------------- floors


def python_floor(
    pipeline: str,
    data: Data,
    loads: Any = json_loads,
    cache: bool = True,
    outputs: list[tuple[Any, ...]] | None = None,
) -> tuple[float, float]:
    """The same work as a plain Python loop over dicts: (records/s, CPU us/record). With ``cache``
    each key's result (and its changelog record) is written once at the end, as kstreams' record
    cache comes close to; without, every update is written to the output and the changelogs, as
    kstreams does with the cache off. ``outputs`` (when given) receives the output records (key
    and value bytes, as kstreams' sink writes them, and the headers of the record that made each
    one: None for none and for the results written at the end)."""
    unpack = _LONG.unpack
    pack = _LONG.pack
    # Written records go to a bounded buffer, as a producer's queue drains: a list holding all of
    # them would grow the set of objects the cyclic GC walks (with --headers, a list per record)
    # and make the loop pay full collections that an application's producer does not cause.
    out: Any = deque(maxlen=_WRITTEN) if outputs is None else outputs
    changelog: Any = deque(maxlen=_WRITTEN)
    append = out.append
    log = changelog.append
    cpu0, t0 = time.process_time(), time.perf_counter()
    if pipeline == "p1":
        for key, value, _, headers in data.rows(pipeline):
            doc = loads(value)
            if doc["bot"] is False:
                append((key, doc["user"].encode(), headers))
    elif pipeline == "p2":
        counts: dict[bytes, int] = {}
        windows: dict[tuple[bytes, int], int] = {}
        for key, value, ts, headers in data.rows(pipeline):
            loads(value)
            c = counts[key] = counts.get(key, 0) + 1
            start = ts - ts % WINDOW_MS
            w = windows[(key, start)] = windows.get((key, start), 0) + 1
            if not cache:
                append((key, pack(c), headers))
                log((key, pack(c)))
                log((key + pack(start), pack(w)))
        if cache:
            for k, c in counts.items():
                append((k, pack(c), None))
                log((k, pack(c)))
            for (k, start), w in windows.items():
                log((k + pack(start), pack(w)))
    else:
        sums: dict[bytes, int] = {}
        for key, long_value, _, headers in data.rows(pipeline):
            s = sums[key] = sums.get(key, 0) + unpack(long_value)[0]
            if not cache:
                append((key, pack(s), headers))
                log((key, pack(s)))
        if cache:
            for k, s in sums.items():
                append((k, pack(s), None))
                log((k, pack(s)))
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    return data.records / wall, cpu / data.records * 1e6


def confluent_floor(
    pipeline: str,
    bootstrap: str,
    topic: str,
    records: int,
    loads: Any = json_loads,
    cache: bool = True,
    headers: bool = False,
) -> tuple[float, float, str]:
    """A hand-written confluent-kafka consume-process-produce loop doing the same work as
    ``python_floor``: output and changelog records per update without ``cache``, per key at the
    end with it; with ``headers``, each output record with the headers of the record that made
    it. Returns records/s, CPU us per record and the CPU per record by thread."""
    from confluent_kafka import Consumer, Producer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"floor-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            # The fetch limits kstreams runs with (BROKER_CONFIG), so both read alike.
            **{k.removeprefix("main.consumer."): v for k, v in BROKER_CONFIG.items()},
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    out = f"{topic}-floor-out"
    changelog, window_changelog = f"{topic}-floor-changelog", f"{topic}-floor-window-changelog"
    consumer.subscribe([topic])
    unpack = _LONG.unpack
    pack = _LONG.pack
    produce = producer.produce
    counts: dict[bytes, int] = {}
    windows: dict[tuple[bytes, int], int] = {}
    sums: dict[bytes, int] = {}
    seen = 0
    threads_before = _thread_cpu()
    cpu0, t0 = time.process_time(), time.perf_counter()
    deadline = t0 + 600
    while seen < records and time.perf_counter() < deadline:
        messages = consumer.consume(10_000, 1.0)
        for m in messages:
            if m.error():
                continue
            seen += 1
            key, value = m.key(), m.value()
            hdrs = m.headers() if headers else None
            # A full producer queue raises BufferError; like kstreams' producer, the loop then
            # serves delivery reports until the record fits (a try costs nothing until it raises).
            if pipeline == "p1":
                doc = loads(value)
                if doc["bot"] is False:
                    try:
                        produce(out, doc["user"].encode(), key, headers=hdrs)
                    except BufferError:
                        _produce_when_room(producer, out, doc["user"].encode(), key, hdrs)
            elif pipeline == "p2":
                loads(value)
                c = counts[key] = counts.get(key, 0) + 1
                ts = m.timestamp()[1]
                start = ts - ts % WINDOW_MS
                w = windows[(key, start)] = windows.get((key, start), 0) + 1
                if not cache:
                    try:
                        produce(out, pack(c), key, headers=hdrs)
                    except BufferError:
                        _produce_when_room(producer, out, pack(c), key, hdrs)
                    try:
                        produce(changelog, pack(c), key)
                    except BufferError:
                        _produce_when_room(producer, changelog, pack(c), key)
                    try:
                        produce(window_changelog, pack(w), key + pack(start))
                    except BufferError:
                        _produce_when_room(producer, window_changelog, pack(w), key + pack(start))
            else:
                total = sums[key] = sums.get(key, 0) + unpack(value)[0]
                if not cache:
                    try:
                        produce(out, pack(total), key, headers=hdrs)
                    except BufferError:
                        _produce_when_room(producer, out, pack(total), key, hdrs)
                    try:
                        produce(changelog, pack(total), key)
                    except BufferError:
                        _produce_when_room(producer, changelog, pack(total), key)
        producer.poll(0)
    if pipeline != "p1" and cache:
        table = counts if pipeline == "p2" else sums
        for k, c in table.items():
            _produce_when_room(producer, out, pack(c), k)
            _produce_when_room(producer, changelog, pack(c), k)
        for (k, start), w in windows.items():
            _produce_when_room(producer, window_changelog, pack(w), k + pack(start))
    producer.flush(60)
    if seen:
        consumer.commit(asynchronous=False)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    by_thread = _cpu_by_thread(threads_before, seen)
    consumer.close()
    return seen / wall, cpu / max(seen, 1) * 1e6, by_thread


def _produce_when_room(producer: Any, topic: str, value: bytes, key: bytes, headers: Any = None) -> None:
    """Produce one record, serving delivery reports while librdkafka's queue is full."""
    while True:
        try:
            producer.produce(topic, value, key, headers=headers)
            return
        except BufferError:
            producer.poll(0.05)


# ----------------------------------------------------------------------------- the runs


def _rss_mb() -> float:
    """Resident set size now, in MB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _thread_cpu() -> dict[int, tuple[str, float, float]]:
    """(name, CPU seconds, of which system) each thread of this process has used so far, by
    thread id (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    result = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        user, system = int(fields[11]) / tick, int(fields[12]) / tick
        result[int(tid)] = (name, user + system, system)
    return result


def _cpu_by_thread(before: dict[int, tuple[str, float, float]], records: int) -> str:
    """CPU us per record of each kind of thread since ``before``: Python threads by their role
    (StreamThread-1 -> StreamThread, ...), librdkafka's by its own thread names (all clients
    together); the system part in brackets where it is a tenth or more (page faults of memory a
    thread touches for the first time show there)."""
    roles = {t.native_id: t.name.rsplit("-", 1)[-1] for t in threading.enumerate()}
    totals: dict[str, tuple[float, float]] = {}
    for tid, (name, cpu, system) in _thread_cpu().items():
        role = roles.get(tid, name)
        role = "StreamThread" if role.isdigit() else role
        _, cpu0, system0 = before.get(tid, (name, 0.0, 0.0))
        total, total_system = totals.get(role, (0.0, 0.0))
        totals[role] = (total + cpu - cpu0, total_system + system - system0)
    shown = sorted(((cpu, system, role) for role, (cpu, system) in totals.items() if cpu > 0), reverse=True)
    scale = 1e6 / max(records, 1)
    return ", ".join(
        f"{role} {cpu * scale:.2f}" + (f" ({system * scale:.2f} system)" if system >= cpu / 10 else "")
        for cpu, system, role in shown
    )


def _stream_threads_waiting(streams: Any, elapsed: float) -> str:
    """How much of the run each stream thread waited for a task with records (Kafka's
    blocked-time-ns-total): a thread that waits is starved by the polling thread, one that does
    not is bounded by its own work or by the CPU."""
    waited = sorted(
        (m.tags.get("thread-id", "?").rsplit("-", 1)[-1], v / 1e9)
        for m, v in streams.metrics().items()
        if m.name == "blocked-time-ns-total" and m.group == "stream-thread-metrics"
    )
    shares = ", ".join(f"{thread} {100 * s / elapsed:.0f}%" for thread, s in waited)
    return f"stream threads waited for a task (by thread: {shares} of the run)"


def _processed(streams: Any) -> int:
    return int(
        sum(
            v
            for m, v in streams.metrics().items()
            if m.name == "process-total" and m.group == "stream-thread-metrics"
        )
    )


def load_input(cluster: Any, pipeline: str, data: Data, suffix: str) -> tuple[str, str]:
    """Create the pipeline's input and output topics on ``cluster`` (names ending in ``suffix``)
    and write ``data`` to the input; returns (input topic, output topic)."""
    inp, out = f"{pipeline}-in-{suffix}", f"{pipeline}-out-{suffix}"
    cluster.create_topic(inp, PARTITIONS)
    cluster.create_topic(out, PARTITIONS)
    producer = cluster.producer()
    batches = data.long_batches if pipeline == "p3" else data.json_batches
    for partition, chunks in batches.items():
        for chunk in chunks:
            producer.send(inp, partition, chunk)
    producer.flush()
    return inp, out


def run_streams(
    pipeline: str,
    data: Data,
    threads: int,
    compiled: bool,
    bootstrap: str | None,
    style: str = "dsl",
    loads: Any = json_loads,
    cache: bool = True,
) -> dict[str, float]:
    from kstreams import KafkaStreams

    suffix = uuid.uuid4().hex[:6]
    if bootstrap:
        from kstreams.cluster import KafkaCluster

        cluster: Any = KafkaCluster(bootstrap)
    else:
        from kstreams.cluster import EmbeddedCluster

        cluster = EmbeddedCluster()
    inp, out = load_input(cluster, pipeline, data, suffix)
    with tempfile.TemporaryDirectory(prefix="kstreams-bench-") as state_dir:
        streams = KafkaStreams(
            topology(pipeline, inp, out, style, loads),
            {
                "application.id": f"bench-{pipeline}-{suffix}",
                "num.stream.threads": threads,
                "state.dir": state_dir,
                "commit.interval.ms": 5000,
                **RUNTIME_CONFIG,
                **(BROKER_CONFIG if bootstrap else {}),
                **({} if cache else {"statestore.cache.max.bytes": 0}),
                "processing.compiled": compiled,
            },
            cluster=cluster,
        )
        rss_before = peak_rss = _rss_mb()
        threads_before = _thread_cpu()
        cpu0 = time.process_time()
        started = time.perf_counter()
        streams.start()
        deadline = started + max(120.0, data.records / 5_000)
        seen = 0
        first_at: float | None = None  # when processing began (start-up: group join, stores)
        first_seen = 0
        cpu_first = cpu0
        last_at, last_seen = started, 0
        while time.perf_counter() < deadline:
            now = time.perf_counter()
            seen = max(seen, _processed(streams))
            if first_at is None and seen > 0:
                first_at, first_seen, cpu_first = now, seen, time.process_time()
            peak_rss = max(peak_rss, _rss_mb())
            if seen >= data.records:
                break
            # Poll finely once the end is due within the next poll: a whole run on the embedded
            # cluster can last 0.1-0.2 s, which a 50 ms poll would round by up to half.
            rate = (seen - last_seen) / (now - last_at) if now > last_at else 0.0
            last_at, last_seen = now, seen
            near_end = rate > 0 and (data.records - seen) / rate < 1.5 * POLL_S
            timeout = FINE_POLL_S if near_end else POLL_S
            if streams.wait_for_state(streams.State.ERROR, streams.State.NOT_RUNNING, timeout=timeout):
                break
        finished = time.perf_counter()
        elapsed = finished - started
        cpu = time.process_time() - cpu0
        by_thread = _cpu_by_thread(threads_before, seen)
        load = f"the process kept {cpu / elapsed:.2f} cores busy; {_stream_threads_waiting(streams, elapsed)}"
        streams.close(timeout=120)
    if seen < data.records:
        print(f"  !! {pipeline} processed only {seen:,} of {data.records:,} records", file=sys.stderr)
    steady = (seen - first_seen) / (finished - first_at) if first_at and finished > first_at else 0.0
    return {
        "rate": seen / elapsed,
        "steady": steady,
        "cpu_us": cpu / max(seen, 1) * 1e6,
        "cpu_steady_us": (cpu0 + cpu - cpu_first) / max(seen - first_seen, 1) * 1e6,
        "rss_before": rss_before,
        "rss_growth": peak_rss - rss_before,
        "by_thread": by_thread,
        "load": load,
    }


# Kafka Streams reads the same keys; receive.message.max.bytes is librdkafka's alone and
# processing.batch.size / processing.compiled kstreams' alone.
_KSTREAMS_ONLY = ("processing.batch.size", "processing.compiled", "main.consumer.receive.message.max.bytes")


def run_kafka_streams(
    pipeline: str, data: Data, threads: int, bootstrap: str, cache: bool = True
) -> dict[str, Any]:
    """The pipeline on Kafka Streams (bench/kafka_streams_peer.py, a child JVM) with the same
    configuration as ``run_streams``: commit interval, cache, poll and fetch settings. Records/s
    from start() until the stream threads' process-total reaches the input; CPU is the whole JVM's
    (GC and JIT threads included) over the same span."""
    from kafka_streams_peer import KafkaStreamsPeer

    from kstreams.cluster import KafkaCluster

    suffix = uuid.uuid4().hex[:6]
    inp, out = load_input(KafkaCluster(bootstrap), pipeline, data, suffix)
    props = {
        "application.id": f"bench-jvm-{pipeline}-{suffix}",
        "bootstrap.servers": bootstrap,
        "num.stream.threads": threads,
        "commit.interval.ms": 5000,
        **{k: v for k, v in {**RUNTIME_CONFIG, **BROKER_CONFIG}.items() if k not in _KSTREAMS_ONLY},
        **({} if cache else {"statestore.cache.max.bytes": 0}),
    }
    with KafkaStreamsPeer(pipeline, inp, out, props) as peer:
        rss_before = peer.rss_mb()
        cpu0 = peer.cpu_seconds()
        started = time.perf_counter()
        peer.start()
        done = peer.wait_processed(data.records, timeout=max(120.0, data.records / 5_000))
        finished = time.perf_counter()
        cpu = peer.cpu_seconds() - cpu0
        rss = peer.rss_mb()
        seen = peer.processed
        first_at, first_seen = peer.first_processed_at, peer.first_processed
        cpu_first = peer.first_processed_cpu
    if not done:
        print(
            f"  !! {pipeline} Kafka Streams processed only {seen:,} of {data.records:,} records",
            file=sys.stderr,
        )
    steady = (seen - first_seen) / (finished - first_at) if first_at and finished > first_at else 0.0
    return {
        "rate": seen / (finished - started),
        "steady": steady,
        "cpu_us": cpu / max(seen, 1) * 1e6,
        "cpu_steady_us": (cpu0 + cpu - cpu_first) / max(seen - first_seen, 1) * 1e6,
        "rss_before": rss_before,
        "rss_growth": rss - rss_before,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="200,000 records (a check that every side runs)")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--pipelines", nargs="+", default=["p1", "p2", "p3"], choices=["p1", "p2", "p3"])
    parser.add_argument("--paths", choices=["compiled", "python", "both"], default="compiled")
    parser.add_argument("--style", nargs="+", choices=["dsl", "lambda", "processor"], default=["dsl"])
    parser.add_argument("--json", choices=["stdlib", "orjson"], default="stdlib")
    parser.add_argument(
        "--bootstrap", default=None, help="a Kafka-protocol broker instead of the embedded cluster"
    )
    parser.add_argument(
        "--kafka",
        action="store_true",
        help="start an Apache Kafka broker (as tests/integration do) and run against it",
    )
    parser.add_argument(
        "--cache",
        choices=["on", "off"],
        default="on",
        help="off: statestore.cache.max.bytes=0 (every update emitted and logged), on both sides",
    )
    parser.add_argument(
        "--headers",
        action="store_true",
        help="every input record with a header; outputs carry it on both sides",
    )
    parser.add_argument(
        "--config",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="streams config overriding the benchmark's (e.g. poll.ms=100 max.poll.records=1000)",
    )
    parser.add_argument(
        "--thread-cpu",
        action="store_true",
        help="also print each kstreams run's CPU per record by thread (polling, stream, librdkafka), "
        "the cores the process kept busy, and how much of the run each stream thread waited for work",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run every side this many times, alternating, and also print the medians",
    )
    parser.add_argument(
        "--kafka-streams",
        action="store_true",
        help="also run each pipeline on Kafka Streams (Java, jvm/src/main/java/io/kstreams/bench) with "
        "every --threads count, on the same broker (needs --kafka or --bootstrap), and print one table",
    )
    parser.add_argument(
        "--kafka-defaults", action="store_true", help="run with the runtime defaults, not RUNTIME_CONFIG"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.records = 200_000
    if "processor" in args.style and args.cache == "on":
        parser.error(
            "--style processor needs --cache off: its stores have the Processor API's defaults (not "
            "cached) and it forwards every update, which the loops do only with --cache off"
        )
    if args.kafka_streams and not (args.kafka or args.bootstrap):
        parser.error("--kafka-streams runs on a broker: add --kafka or --bootstrap HOST:PORT")
    if args.kafka:
        from tests.support.kafka_broker import temporary_broker

        with temporary_broker("kstreams-bench-kafka-") as bootstrap:
            return _run(args, bootstrap)
    return _run(args, args.bootstrap)


def _run(args: argparse.Namespace, bootstrap: str | None) -> int:
    args.bootstrap = bootstrap
    if args.kafka_defaults:
        RUNTIME_CONFIG.clear()
    for item in args.config:
        key, _, value = item.partition("=")
        RUNTIME_CONFIG[key] = int(value) if value.lstrip("-").isdigit() else value

    t0 = time.perf_counter()
    data = generate(args.records, args.keys, args.pipelines, headers=args.headers)
    # The generated input stays alive for the whole run (with --headers, a list per record): out
    # of the cyclic GC's reach, as an application reading from a broker has no such heap, so that
    # neither side's full collections walk it.
    gc.freeze()
    where = args.bootstrap or "embedded cluster"
    print(
        f"{args.records:,} records, {args.keys:,} keys, {PARTITIONS} partitions, on the {where} "
        f"(generated in {time.perf_counter() - t0:.1f}s)"
    )
    paths = {"compiled": [True], "python": [False], "both": [True, False]}[args.paths]
    loads = json_library(args.json)
    cache = args.cache == "on"
    print(
        f"JSON: {args.json} on both sides; record cache {args.cache}"
        + ("; every record with a header" if args.headers else "")
    )
    table: list[tuple[str, dict[str, float]]] = []
    for pipeline in args.pipelines:
        runs: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            (f"{pipeline} python loop on dicts", partial(_floor_run, pipeline, data, loads, cache))
        ]
        if args.bootstrap:
            topic = _load_floor_topics(args.bootstrap, pipeline, data)
            runs.append(
                (
                    f"{pipeline} confluent-kafka loop",
                    partial(_floor_run, pipeline, data, loads, cache, args.bootstrap, topic),
                )
            )
        if args.kafka_streams:
            for threads in args.threads:
                run = partial(run_kafka_streams, pipeline, data, threads, args.bootstrap, cache)
                runs.append((f"{pipeline} Kafka Streams (Java) {threads} thread(s)", run))
        for style in args.style:
            for compiled in paths:
                for threads in args.threads:
                    label = f"{style} {'compiled' if compiled else 'per-record'}"
                    run = partial(
                        run_streams, pipeline, data, threads, compiled, args.bootstrap, style, loads, cache
                    )
                    runs.append((f"{pipeline} kstreams {label:17} {threads} thread(s)", run))
        # Runs alternate (loop, kstreams, loop, kstreams...) so that a slow phase of the machine
        # falls on both sides; the medians are what docs/performance.md quotes.
        results: dict[str, list[dict[str, Any]]] = {}
        for _ in range(args.repeat):
            for name, run in runs:
                result = run()
                results.setdefault(name, []).append(result)
                print(_result_line(name, result), flush=True)
                if args.thread_cpu and "by_thread" in result:
                    print(f"    CPU us/rec by thread: {result['by_thread']}", flush=True)
                if args.thread_cpu and "load" in result:
                    print(f"    load: {result['load']}", flush=True)
        medians = {
            name: {key: statistics.median(row[key] for row in rows) for key in rows[0] if key in _MEDIANS}
            for name, rows in results.items()
        }
        if args.repeat > 1:
            print(f"medians of {args.repeat} runs:")
            for name, median in medians.items():
                print(_result_line(name, median), flush=True)
        table.extend((name, median) for name, median in medians.items())
    if args.kafka_streams:
        _print_table(table)
    return 0


_MEDIANS = ("rate", "steady", "cpu_us", "cpu_steady_us")


def _print_table(table: list[tuple[str, dict[str, float]]]) -> None:
    """One table of every run (medians with --repeat): records/s, CPU us per record, and CPU per
    record over Kafka Streams' with as many threads and over the confluent-kafka loop's; for the
    streams runs also both after start-up (from the first processed record on: Kafka Streams' JIT
    compiles most of its code in the first seconds), and the ratio of those."""
    print()
    print(
        f"{'run':44} {'rec/s':>9} {'us CPU/rec':>10} {'x Kafka Streams':>15} {'x loop':>6}"
        f" | after start-up: {'rec/s':>9} {'us CPU/rec':>10} {'x Kafka Streams':>15}"
    )
    for name, row in table:
        pipeline = name.split()[0]
        threads = name.rsplit(" ", 2)[-2] if name.endswith("thread(s)") else None
        peer = next(
            (r for n, r in table if n == f"{pipeline} Kafka Streams (Java) {threads} thread(s)"), None
        )
        loop = next((r for n, r in table if n == f"{pipeline} confluent-kafka loop"), None)
        vs_peer = f"{row['cpu_us'] / peer['cpu_us']:.2f}" if peer else ""
        vs_loop = f"{row['cpu_us'] / loop['cpu_us']:.2f}" if loop and "python loop" not in name else ""
        line = f"{name:44} {row['rate']:>9,.0f} {row['cpu_us']:>10.2f} {vs_peer:>15} {vs_loop:>6}"
        if "cpu_steady_us" in row:
            steady_vs = f"{row['cpu_steady_us'] / peer['cpu_steady_us']:.2f}" if peer else ""
            line += f" | {'':16} {row['steady']:>9,.0f} {row['cpu_steady_us']:>10.2f} {steady_vs:>15}"
        print(line)


def _floor_run(
    pipeline: str,
    data: Data,
    loads: Any,
    cache: bool,
    bootstrap: str | None = None,
    topic: str | None = None,
) -> dict[str, Any]:
    """One run of a hand-written loop: on dicts, or (with ``bootstrap``) confluent-kafka's."""
    if not (bootstrap and topic):
        rate, cpu = python_floor(pipeline, data, loads, cache)
        return {"rate": rate, "cpu_us": cpu}
    rate, cpu, by_thread = confluent_floor(
        pipeline, bootstrap, topic, data.records, loads, cache, data.headers
    )
    return {"rate": rate, "cpu_us": cpu, "by_thread": by_thread}


def _load_floor_topics(bootstrap: str, pipeline: str, data: Data) -> str:
    """Create the confluent-kafka loop's input (with ``data``) and output topics; returns the
    input's name. Every run of the loop reads the whole input with a group of its own."""
    from kstreams.cluster import KafkaCluster

    topic = f"{pipeline}-floor-{uuid.uuid4().hex[:6]}"
    cluster = KafkaCluster(bootstrap)
    for name in (topic, *(f"{topic}-floor-{t}" for t in ("out", "changelog", "window-changelog"))):
        cluster.create_topic(name, PARTITIONS)
    producer = cluster.producer()
    for partition, chunks in (data.long_batches if pipeline == "p3" else data.json_batches).items():
        for chunk in chunks:
            producer.send(topic, partition, chunk)
    producer.flush()
    return topic


def _result_line(name: str, result: dict[str, Any]) -> str:
    line = f"{name:40}: {result['rate']:>12,.0f} rec/s"
    if "steady" in result:
        line += f" ({result['steady']:>10,.0f} after start-up)"
    line += f"  {result['cpu_us']:6.2f} us CPU/rec"
    if "cpu_steady_us" in result:
        line += f" ({result['cpu_steady_us']:6.2f} after start-up)"
    if "rss_before" in result:
        line += f"  RSS {result['rss_before']:,.0f} MB + {result['rss_growth']:,.0f} MB during the run"
    return line


if __name__ == "__main__":
    sys.exit(main())
