"""RecordBuffer against a deque behind a threading.Lock, batch and single-record.

Run with ``pytest bench/test_bench_record_buffer.py``; not part of the default test run.
"""

import pytest

from kstreams._native.record_batch import RecordBatch
from kstreams._native.record_buffer import RecordBuffer

BENCH = pytest.mark.benchmark(max_time=0.5, min_rounds=20, warmup=False)


@BENCH
@pytest.mark.benchmark(group="buffer: push 4 x 1000, pop 4 x 1000")
def test_native_push_pop_batches_within_batch(benchmark, batch_1000: RecordBatch) -> None:
    buf = RecordBuffer()

    def run() -> None:
        for _ in range(4):
            buf.push(batch_1000)
        for _ in range(4):
            buf.pop(1000)

    benchmark(run)
    assert len(buf) == 0


@BENCH
@pytest.mark.benchmark(group="buffer: push 4 x 1000, pop 4 x 1000")
def test_python_push_pop_batches_within_batch(benchmark, py_buffer_cls, tuples_1000) -> None:
    buf = py_buffer_cls()

    def run() -> None:
        for _ in range(4):
            buf.push(tuples_1000)
        for _ in range(4):
            buf.pop(1000)

    benchmark(run)
    assert len(buf) == 0


@BENCH
@pytest.mark.benchmark(group="buffer: push 4 x 1000, pop 5 x 800 (across batches)")
def test_native_push_pop_batches_across_batches(benchmark, batch_1000: RecordBatch) -> None:
    buf = RecordBuffer()

    def run() -> None:
        for _ in range(4):
            buf.push(batch_1000)
        for _ in range(5):
            buf.pop(800)

    benchmark(run)
    assert len(buf) == 0


@BENCH
@pytest.mark.benchmark(group="buffer: push 4 x 1000, pop 5 x 800 (across batches)")
def test_python_push_pop_batches_across_batches(benchmark, py_buffer_cls, tuples_1000) -> None:
    buf = py_buffer_cls()

    def run() -> None:
        for _ in range(4):
            buf.push(tuples_1000)
        for _ in range(5):
            buf.pop(800)

    benchmark(run)
    assert len(buf) == 0


@BENCH
@pytest.mark.benchmark(group="buffer: push+pop 1000 single records")
def test_native_push_pop_single_records(benchmark, batch_1000: RecordBatch) -> None:
    singles = [batch_1000.slice(i, i + 1) for i in range(1000)]
    buf = RecordBuffer()

    def run() -> None:
        for b in singles:
            buf.push(b)
            buf.pop(1)

    benchmark(run)
    assert len(buf) == 0


@BENCH
@pytest.mark.benchmark(group="buffer: push+pop 1000 single records")
def test_python_push_pop_single_records(benchmark, py_buffer_cls, tuples_1000) -> None:
    singles = [[t] for t in tuples_1000]
    buf = py_buffer_cls()

    def run() -> None:
        for rec in singles:
            buf.push(rec)
            buf.pop(1)

    benchmark(run)
    assert len(buf) == 0
