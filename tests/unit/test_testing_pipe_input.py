"""TestInputTopic.pipe_input's overloads (Kafka's pipeInput(V), pipeInput(K, V), pipeInput(V,
Instant), pipeInput(K, V, Instant/long), pipeInput(TestRecord)) and the driver's wall clock."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest

from kstreams.serdes import Serdes
from kstreams.testing import TestRecord, TopologyTestDriver
from kstreams.topology.topology import Topology

S = Serdes.string()


def _passthrough() -> Topology:
    return (
        Topology()
        .add_source("src", "in", key_deserializer=S, value_deserializer=S)
        .add_sink("sink", "out", "src", key_serializer=S, value_serializer=S)
    )


def test_pipe_input_overloads_follow_kafkas_test_input_topic() -> None:
    instant = datetime(2024, 1, 1, tzinfo=timezone.utc)
    instant_ms = int(instant.timestamp() * 1000)
    with TopologyTestDriver(_passthrough(), initial_wall_clock_time_ms=0) as driver:
        inp = driver.create_input_topic("in", S, S, start_timestamp=100)
        inp.pipe_input("only-a-value")  # pipeInput(V): a null key
        inp.pipe_input("k", "v")  # pipeInput(K, V)
        inp.pipe_input("value-at", instant)  # pipeInput(V, Instant)
        inp.pipe_input("k2", "v2", 42)  # pipeInput(K, V, long)
        inp.pipe_input("k3", "v3", instant)  # pipeInput(K, V, Instant)
        inp.pipe_input("k4", None, 7)  # a tombstone
        inp.pipe_input("kw-value", timestamp=9)  # pipeInput(V) with a timestamp by keyword
        inp.pipe_input(key="k5", value="v5", timestamp=11)
        inp.pipe_input(TestRecord("k6", "v6", 13))
        records = driver.create_output_topic("out", S, S).read_records_to_list()
        assert [(r.key, r.value, r.timestamp) for r in records] == [
            (None, "only-a-value", 100),
            ("k", "v", 100),
            (None, "value-at", instant_ms),
            ("k2", "v2", 42),
            ("k3", "v3", instant_ms),
            ("k4", None, 7),
            (None, "kw-value", 9),
            ("k5", "v5", 11),
            ("k6", "v6", 13),
        ]


def test_pipe_input_refuses_ambiguous_or_missing_arguments() -> None:
    with TopologyTestDriver(_passthrough(), initial_wall_clock_time_ms=0) as driver:
        inp = driver.create_input_topic("in", S, S)
        with pytest.raises(TypeError, match="needs a value"):
            inp.pipe_input()
        with pytest.raises(TypeError, match="key twice"):
            inp.pipe_input("k", "v", key="k")
        with pytest.raises(TypeError, match="TestRecord"):
            inp.pipe_input(TestRecord("k", "v"), "other")


def test_the_wall_clock_starts_at_the_current_time_unless_given() -> None:
    before = int(time.time() * 1000)
    with TopologyTestDriver(_passthrough()) as driver:
        after = int(time.time() * 1000)
        assert before <= driver.wall_clock_time_ms <= after
        inp = driver.create_input_topic("in", S, S)
        inp.pipe_input("k", "v")
        (record,) = driver.create_output_topic("out", S, S).read_records_to_list()
        assert before <= record.timestamp <= after  # records default to the topic's clock: now
    with TopologyTestDriver(_passthrough(), initial_wall_clock_time_ms=5_000) as driver:
        assert driver.wall_clock_time_ms == 5_000
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    with TopologyTestDriver(_passthrough(), initial_wall_clock_time_ms=start) as driver:
        assert driver.wall_clock_time_ms == int(start.timestamp() * 1000)
