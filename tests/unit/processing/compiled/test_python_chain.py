"""A line of Python functions run as one batch step (``PythonChainStep``): the functions are
called in the per-record path's order, and an error names the processor whose function raised."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import pytest

from kstreams import Consumed, Produced, Serdes, StreamsBuilder
from kstreams._native.record_batch import RecordBatch
from kstreams.errors import StreamsException
from kstreams.processing.compiled.stateless_steps import PythonChainStep
from kstreams.testing import TopologyTestDriver

STRING = Serdes.string()
KEYS = [f"k{i % 7}" for i in range(60)]
VALUES = [f"v{i}" for i in range(60)]


def chain(calls: list[tuple[str, Any, Any]], fail_at: str | None = None) -> Any:
    """map_values -> filter -> map -> filter_not into "out"; each function logs its call."""

    def logged(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            calls.append((name, *args) if len(args) == 2 else (name, None, *args))
            if name == fail_at:
                raise RuntimeError(f"{name} failed")
            return fn(*args)

        return call

    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .map_values(logged("upper", str.upper))
        .filter(logged("odd", lambda k, v: int(v[1:]) % 2 == 1))
        .map(logged("swap", lambda k, v: (v, k)))
        .filter_not(logged("k3", lambda k, v: v == "k3"))
        .to("out", Produced.with_(STRING, STRING))
    )
    return builder.build()


def run(compiled: bool, fail_at: str | None = None) -> tuple[list[Any], list[Any], list[type]]:
    """(function calls, output records, step types) of one 60-record batch through the chain."""
    calls: list[tuple[str, Any, Any]] = []
    driver = TopologyTestDriver(chain(calls, fail_at), {"processing.compiled": compiled})
    try:
        task = next(iter(driver._tasks.values()))
        batch = RecordBatch.from_columns(
            [k.encode() for k in KEYS], [v.encode() for v in VALUES], list(range(1000, 1060)), 0, 0
        )
        driver._run_queue(deque([(task, "in", batch.with_offsets(driver._next_offset("in", 60)))]))
        out = driver.create_output_topic("out", STRING, STRING).read_records_to_list()
        steps = [type(step) for segment in task.compiled_segments.values() for step in segment.steps()]
        return calls, [(r.key, r.value, r.timestamp) for r in out], steps
    finally:
        driver.close()


def test_the_chain_calls_its_functions_record_by_record_as_the_per_record_path() -> None:
    calls, out, steps = run(compiled=True)
    per_record_calls, per_record_out, _ = run(compiled=False)
    assert PythonChainStep in steps
    assert calls == per_record_calls
    assert calls[:4] == [
        ("upper", None, "v0"),
        ("odd", "k0", "V0"),
        ("upper", None, "v1"),
        ("odd", "k1", "V1"),
    ]
    assert out == per_record_out
    assert out[0] == ("V1", "k1", 1001) and len(out) == 30 - 5  # odd values, less those keyed k3


@pytest.mark.parametrize("fail_at", ["upper", "odd", "swap", "k3"])
def test_an_exception_names_the_processor_whose_function_raised(fail_at: str) -> None:
    messages = []
    for compiled in (True, False):
        with pytest.raises(StreamsException, match=f"{fail_at} failed") as raised:
            run(compiled, fail_at)
        messages.append(str(raised.value))
    assert messages[0] == messages[1]  # the same processor, topic, partition and offset
    assert "processor=KSTREAM-" in messages[0]
    # the first record fails in the first two functions; the first to reach the others is offset 1
    offset = 0 if fail_at in ("upper", "odd") else 1
    assert f"offset={offset}:" in messages[0]
