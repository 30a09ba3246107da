"""RecordCollector against a dict of lists plus a dict per changelog for suppression.

Run with ``pytest bench/test_bench_record_collector.py``; not part of the default test run.
"""

import pytest

from kstreams._native.record_batch import RecordBatch
from kstreams._native.record_collector import RecordCollector

BENCH = pytest.mark.benchmark(max_time=0.5, min_rounds=20, warmup=False)


@BENCH
@pytest.mark.benchmark(group="collector: send_batch 1000 to a changelog + drain")
def test_native_send_batch_changelog(benchmark, batch_1000: RecordBatch) -> None:
    c = RecordCollector()
    c.register_changelog("cl", 0)

    def run() -> None:
        for _ in range(4):
            c.send_batch("cl", 0, batch_1000)
        c.drain()

    benchmark(run)


@BENCH
@pytest.mark.benchmark(group="collector: send_batch 1000 to a changelog + drain")
def test_python_send_batch_changelog(benchmark, py_collector_cls, tuples_1000) -> None:
    c = py_collector_cls()
    c.register_changelog("cl", 0)

    def run() -> None:
        for _ in range(4):
            c.send_records("cl", 0, tuples_1000)
        c.drain()

    benchmark(run)


@BENCH
@pytest.mark.benchmark(group="collector: send_batch 1000 to a sink + drain")
def test_native_send_batch_sink(benchmark, batch_1000: RecordBatch) -> None:
    c = RecordCollector()

    def run() -> None:
        for _ in range(4):
            c.send_batch("out", 0, batch_1000)
        c.drain()

    benchmark(run)


@BENCH
@pytest.mark.benchmark(group="collector: send_batch 1000 to a sink + drain")
def test_python_send_batch_sink(benchmark, py_collector_cls, tuples_1000) -> None:
    c = py_collector_cls()

    def run() -> None:
        for _ in range(4):
            c.send_records("out", 0, tuples_1000)
        c.drain()

    benchmark(run)


@BENCH
@pytest.mark.benchmark(group="collector: send 1000 single records to a changelog + drain")
def test_native_send_single_changelog(benchmark, tuples_1000) -> None:
    c = RecordCollector()
    c.register_changelog("cl", 0)
    send = c.send

    def run() -> None:
        for key, value, ts, _, _, _ in tuples_1000:
            send("cl", 0, key, value, ts)
        c.drain()

    benchmark(run)


@BENCH
@pytest.mark.benchmark(group="collector: send 1000 single records to a changelog + drain")
def test_python_send_single_changelog(benchmark, py_collector_cls, tuples_1000) -> None:
    c = py_collector_cls()
    c.register_changelog("cl", 0)
    send = c.send

    def run() -> None:
        for key, value, ts, _, _, _ in tuples_1000:
            send("cl", 0, key, value, ts)
        c.drain()

    benchmark(run)
