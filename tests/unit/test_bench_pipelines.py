"""The end-to-end benchmark compares like with like: each kstreams pipeline of
``bench/e2e_throughput.py`` (compiled DSL, lambdas, the per-record path, Processor API classes)
writes what the plain loop it is measured against computes."""

from __future__ import annotations

import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kstreams import KafkaStreams
from kstreams.cluster import EmbeddedCluster
from tests.support.waiting import holds_within

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import e2e_throughput as bench


def _kstreams_outputs(
    pipeline: str, data: Any, style: str, compiled: bool, cache: bool
) -> list[tuple[Any, ...]]:
    """Run the benchmark's topology over ``data`` as the benchmark configures it; its output
    records (key and value bytes, headers) in the order a consumer reads them."""
    suffix = uuid.uuid4().hex[:6]
    cluster = EmbeddedCluster()
    try:
        inp, out = bench.load_input(cluster, pipeline, data, suffix)
        with tempfile.TemporaryDirectory() as state_dir:
            streams = KafkaStreams(
                bench.topology(pipeline, inp, out, style),
                {
                    "application.id": f"bench-check-{suffix}",
                    "state.dir": state_dir,
                    **bench.RUNTIME_CONFIG,
                    **({} if cache else {"statestore.cache.max.bytes": 0}),
                    "processing.compiled": compiled,
                },
                cluster=cluster,
            )
            streams.start()
            try:
                deadline_ok = _wait_processed(streams, data.records)
            finally:
                streams.close(timeout=60)  # a clean close flushes the caches to the output
            assert deadline_ok, f"{pipeline} {style} compiled={compiled}: not every record was processed"
        return [(record.key, record.value, record.headers) for record in cluster.read(out)]
    finally:
        cluster.close()


def _wait_processed(streams: KafkaStreams, records: int) -> bool:
    """Whether ``streams`` processed ``records`` records within a minute (False at once if it
    stopped)."""
    stopped = (streams.State.ERROR, streams.State.NOT_RUNNING)
    holds_within(lambda: bench._processed(streams) >= records or streams.state in stopped, 60, every=0.05)
    return bench._processed(streams) >= records


def _latest(records: list[tuple[Any, ...]]) -> dict[bytes, bytes]:
    latest: dict[bytes, bytes] = {}
    for key, value, _ in records:
        latest[key] = value
    return latest


@pytest.mark.parametrize("pipeline", ["p1", "p2", "p3"])
@pytest.mark.parametrize(
    ("style", "compiled"), [("dsl", True), ("lambda", True), ("lambda", False), ("dsl", False)]
)
@pytest.mark.parametrize(("cache", "headers"), [(True, False), (False, False), (False, True)])
def test_each_kstreams_pipeline_writes_what_its_loop_computes(
    pipeline: str, style: str, compiled: bool, cache: bool, headers: bool
) -> None:
    _check_against_the_loop(pipeline, style, compiled, cache, headers)


@pytest.mark.parametrize("pipeline", ["p1", "p2", "p3"])
@pytest.mark.parametrize("headers", [False, True])
def test_the_processor_api_pipelines_write_what_the_loop_computes_without_a_cache(
    pipeline: str, headers: bool
) -> None:
    # Their stores are not cached (the Processor API's default) and they forward every update.
    _check_against_the_loop(pipeline, "processor", False, False, headers)


def _check_against_the_loop(pipeline: str, style: str, compiled: bool, cache: bool, headers: bool) -> None:
    data = bench.generate(3_000, 40, [pipeline], seed=3, chunk=1_000, headers=headers)
    expected: list[tuple[Any, ...]] = []
    bench.python_floor(pipeline, data, bench.json_loads, cache, outputs=expected)
    got = _frozen(_kstreams_outputs(pipeline, data, style, compiled, cache))
    expected = _frozen(expected)
    assert expected
    if headers:
        assert all(h for _, _, h in expected)
    if pipeline == "p1" or not cache:
        # every output record, and each key's in the same order
        assert Counter(got) == Counter(expected)
        assert _by_key(got) == _by_key(expected)
    else:
        # with a cache both write each key's result; kstreams may write earlier ones too
        assert len(_latest(expected)) == 40
        assert _latest(got) == _latest(expected)


def _by_key(records: list[tuple[Any, ...]]) -> dict[bytes, list[tuple[bytes, Any]]]:
    grouped: dict[bytes, list[tuple[bytes, Any]]] = {}
    for key, value, headers in records:
        grouped.setdefault(key, []).append((value, headers))
    return grouped


def _frozen(records: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Records with their headers as tuples (None for none), to be counted and compared."""
    return [(key, value, tuple(map(tuple, headers)) if headers else None) for key, value, headers in records]
