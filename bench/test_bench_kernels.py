"""Batch kernels against the per-record Python they replace, and stream-thread scaling.

Kernel benchmarks run one kernel over a 10,000-record batch (~100-byte JSON values, 1,000 keys).
The scaling test runs whole ``StreamTask.process`` calls (compiled segments) on pre-built batches
in one thread, then in two threads on two tasks, and prints the ratio, together with an estimate
of the GIL-held share of processing: a probe thread counts how far a pure-Python loop gets while
one processing thread runs, against how far it gets alone (1.0 = the GIL is always free).

The GIL-held time per batch is measured directly: the time ``task.process`` takes minus the time
spent inside the kernel calls (which release the GIL for their loops). A control runs a pure
nogil kernel in 1 and 2 threads under the same machine load: when the control does not reach
2.0, neither can anything else (other processes are using the second core).

Run with ``pytest bench/test_bench_kernels.py -s``; not part of the default test run.
"""

from __future__ import annotations

import json
import operator
import random
import struct
import tempfile
import threading
import time
from typing import Any

import pytest

from kstreams import Consumed, Materialized, Serdes, StreamsBuilder, StreamsConfig, TimeWindows
from kstreams._native import kernels
from kstreams._native.record_batch import RecordBatch
from kstreams._native.record_cache import RecordCache
from kstreams._native.record_collector import RecordCollector
from kstreams.cluster.port import TopicPartition
from kstreams.predicates import json_field
from kstreams.processing.task import StreamTask
from kstreams.processor import TaskId

BENCH = pytest.mark.benchmark(max_time=0.5, min_rounds=10, warmup=False)
N = 10_000
LONG = struct.Struct(">q")
_rng = random.Random(3)
KEYS = [f"user-{_rng.randrange(1000):05d}".encode() for _ in range(N)]
DOCS = [
    json.dumps(
        {"user": k.decode(), "page": "/checkout", "bot": _rng.random() < 0.5, "ms": _rng.randrange(900)},
        separators=(",", ":"),
    ).encode()
    for k in KEYS
]
LONGS = [LONG.pack(_rng.randrange(-1000, 1000)) for _ in KEYS]
JSON_BATCH = RecordBatch.from_columns(KEYS, DOCS, list(range(N)))
LONG_BATCH = RecordBatch.from_columns(KEYS, LONGS, list(range(N)))
BOT = json_field("bot").eq(False)


@BENCH
def test_validate_json_compiled(benchmark) -> None:  # type: ignore[no-untyped-def]
    assert benchmark(kernels.validate, JSON_BATCH, kernels.STRING, kernels.JSON) == -1


@BENCH
def test_deserialize_json_python(benchmark) -> None:  # type: ignore[no-untyped-def]
    serde = Serdes.json()
    benchmark(lambda: [serde.deserialize("t", v) for v in JSON_BATCH.values()])


@BENCH
def test_filter_compiled(benchmark) -> None:  # type: ignore[no-untyped-def]
    nodes, root = BOT.nodes()
    predicate = kernels.Predicate(nodes, root, kernels.STRING, kernels.JSON)
    benchmark(lambda: kernels.take(JSON_BATCH, predicate.select(JSON_BATCH)))


@BENCH
def test_filter_python(benchmark) -> None:  # type: ignore[no-untyped-def]
    loads = json.loads
    benchmark(lambda: [(k, v) for k, v in zip(KEYS, DOCS, strict=True) if loads(v)["bot"] is False])


@BENCH
def test_project_and_serialize_compiled(benchmark) -> None:  # type: ignore[no-untyped-def]
    def run() -> Any:
        projected = kernels.project(JSON_BATCH, 1, "user", 1)
        return kernels.convert(projected, kernels.STRING, kernels.STRING, kernels.JSON, kernels.STRING)

    benchmark(run)


@BENCH
@pytest.mark.parametrize("capture", [True, False], ids=["captured", "scanned"])
def test_segment_validate_filter_project_compiled(benchmark, capture: bool) -> None:  # type: ignore[no-untyped-def]
    """P1's compiled segment as a task runs it: the source validates (capturing the fields its
    steps read, or not), the filter selects and takes, the projection reads "user"."""
    nodes, root = BOT.nodes()
    predicate = kernels.Predicate(nodes, root, kernels.STRING, kernels.JSON)
    fields = [(1, "bot"), (1, "user")] if capture else []

    def run() -> Any:
        batch = JSON_BATCH.slice(0, N)  # a fresh batch: captured fields belong to a batch
        assert kernels.validate(batch, kernels.STRING, kernels.JSON, fields) == -1
        kept = kernels.take(batch, predicate.select(batch, True))
        return kernels.project(kept, 1, "user", 1, True)

    assert len(run()) == sum(1 for d in DOCS if json.loads(d)["bot"] is False)
    benchmark(run)


@BENCH
def test_split_partitions_compiled(benchmark) -> None:  # type: ignore[no-untyped-def]
    benchmark(kernels.split_partitions, JSON_BATCH, 2, 0)


def _cache() -> RecordCache:
    cache = RecordCache(64 << 20)
    cache.add_namespace("0_0-s", lambda entries: None)
    return cache


@BENCH
def test_count_per_key_compiled(benchmark) -> None:  # type: ignore[no-untyped-def]
    cache = _cache()
    load = {}.get
    benchmark(kernels.aggregate, cache, "0_0-s", JSON_BATCH, kernels.COUNT, kernels.JSON, kernels.LONG, load)


@BENCH
def test_windowed_count_compiled(benchmark) -> None:  # type: ignore[no-untyped-def]
    cache = _cache()
    load = {}.get
    benchmark(
        kernels.aggregate,
        cache,
        "0_0-s",
        JSON_BATCH,
        kernels.COUNT,
        kernels.JSON,
        kernels.LONG,
        load,
        True,
        60_000,
        60_000,
        0,
        -1,
    )


@BENCH
def test_sum_per_key_compiled(benchmark) -> None:  # type: ignore[no-untyped-def]
    cache = _cache()
    load = {}.get
    benchmark(kernels.aggregate, cache, "0_0-s", LONG_BATCH, kernels.SUM, kernels.LONG, kernels.LONG, load)


@BENCH
def test_sum_per_key_python_cache(benchmark) -> None:  # type: ignore[no-untyped-def]
    """What the per-record store path does per record: cache get, add, cache put."""
    cache = _cache()
    unpack, pack = LONG.unpack, LONG.pack

    def run() -> None:
        for k, v in zip(KEYS, LONGS, strict=True):
            hit = cache.get("0_0-s", k)
            old = unpack(hit[0])[0] if hit else 0
            cache.put("0_0-s", k, pack(old + unpack(v)[0]), 0)

    benchmark(run)


# ------------------------------------------------------------------------------ scaling


def _topology(pipeline: str) -> Any:
    builder = StreamsBuilder()
    if pipeline == "p2":
        grouped = builder.stream("in", Consumed.with_(Serdes.string(), Serdes.json())).group_by_key()
        grouped.count(Materialized.as_("counts"))
        grouped.windowed_by(TimeWindows.of_size_with_no_grace(60_000)).count(Materialized.as_("windowed"))
    else:
        grouped = builder.stream("in", Consumed.with_(Serdes.string(), Serdes.long())).group_by_key()
        grouped.reduce(operator.add, Materialized.as_("sums"))
    return builder.build()


def _task(pipeline: str, partition: int, state_dir: str) -> StreamTask:
    config = StreamsConfig({"application.id": "bench", "state.dir": state_dir})
    plan = _topology(pipeline).build("bench", config)
    task = StreamTask(
        TaskId(0, partition),
        plan.subtopologies[0],
        [TopicPartition("in", partition)],
        config,
        RecordCollector(),
        lambda topic: 2,
        state_dir,
    )
    task.record_cache = RecordCache(64 << 20)
    task.initialize()
    task.initialize_processors()
    assert task.compiled_segments, "the benchmark topology should compile"
    return task


def _process(task: StreamTask, batches: list[RecordBatch], partition: int, out: list[float]) -> None:
    tp = TopicPartition("in", partition)
    started = time.perf_counter()
    for batch in batches:
        task.process(tp, batch)
    out.append(time.perf_counter() - started)


def _batches(pipeline: str, partition: int, rounds: int) -> list[RecordBatch]:
    source = JSON_BATCH if pipeline == "p2" else LONG_BATCH
    out = []
    offset = 0
    for r in range(rounds):
        for start in range(0, N, 5000):
            chunk = source.slice(start, start + 5000).with_offsets(offset).with_partition(partition)
            offset += len(chunk)
            out.append(chunk)
        del r
    return out


_KERNELS = ("validate", "take", "project", "convert", "split_partitions", "aggregate")


def _gil_held_us(task: StreamTask, batches: list[RecordBatch]) -> tuple[float, float]:
    """(GIL-held us, total us) per batch: process() time minus time inside kernel calls."""
    inside = [0.0]
    originals = {name: getattr(kernels, name) for name in _KERNELS}

    def timed(fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                inside[0] += time.perf_counter() - started

        return call

    for name, fn in originals.items():
        setattr(kernels, name, timed(fn))
    try:
        times: list[float] = []
        _process(task, batches, 0, times)
    finally:
        for name, fn in originals.items():
            setattr(kernels, name, fn)
    n = len(batches)
    return (times[0] - inside[0]) / n * 1e6, times[0] / n * 1e6


def _control_ratio() -> float:
    """2-thread/1-thread throughput of a pure nogil kernel: the most any workload can scale now."""

    def work(out: list[float]) -> None:
        started = time.perf_counter()
        for _ in range(60):
            kernels.validate(JSON_BATCH, kernels.STRING, kernels.JSON)
        out.append(time.perf_counter() - started)

    one: list[float] = []
    work(one)
    two: list[float] = []
    threads = [threading.Thread(target=work, args=(two,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 2 * one[0] / max(two)


@pytest.mark.parametrize("pipeline", ["p2", "p3"])
def test_compiled_processing_scales_across_threads(pipeline: str) -> None:
    rounds = 20
    with tempfile.TemporaryDirectory() as state_dir:
        one = two = 0.0
        for _ in range(3):
            tasks = [_task(pipeline, p, f"{state_dir}/{p}-{time.monotonic_ns()}") for p in range(2)]
            batches = [_batches(pipeline, p, rounds) for p in range(2)]
            records = rounds * N
            times: list[float] = []
            _process(tasks[0], batches[0], 0, times)
            one = max(one, records / times[0])
            times = []
            threads = [
                threading.Thread(target=_process, args=(tasks[p], batches[p], p, times)) for p in range(2)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            two = max(two, 2 * records / max(times))
            for task in tasks:
                task.close(clean=False)
        task = _task(pipeline, 0, f"{state_dir}/gil")
        timed_batches = _batches(pipeline, 0, rounds)
        _process(task, timed_batches[:4], 0, [])  # first sight of every key: store loads
        held, total = _gil_held_us(task, timed_batches[4:])
        task.close(clean=False)
        control = _control_ratio()
    print(
        f"\n{pipeline}: task.process 1 thread {one / 1e6:.2f} M rec/s, 2 threads {two / 1e6:.2f} M rec/s, "
        f"ratio {two / one:.2f} (control: a pure nogil kernel scales {control:.2f} now); GIL held "
        f"{held:.0f} us of {total:.0f} us per 5000-record batch ({held / total:.0%})"
    )
