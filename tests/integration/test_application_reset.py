"""The application reset tool end to end, on both adapters (the ``cluster`` fixture): a count runs
over its input, stops, is reset (offsets to earliest, internal topics deleted, local state cleaned)
and runs again; the second run's counts reproduce the first run's instead of doubling them."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

from kstreams import Consumed, Grouped, Materialized, Produced, Serdes, StreamsBuilder
from kstreams.client import KafkaStreams, State
from kstreams.cluster import EmbeddedCluster
from kstreams.cluster.port import TopicPartition
from kstreams.tools.application_reset import (
    ApplicationActiveError,
    ResetError,
    ResetPosition,
    plan_reset,
    reset_application,
)

WAIT = 60.0
NOW = int(time.time() * 1000)


def count_topology(app_id: str):  # type: ignore[no-untyped-def]
    builder = StreamsBuilder()
    (
        builder.stream(f"{app_id}-in", Consumed.with_(Serdes.string(), Serdes.string()))
        # A key change forces a repartition topic, so the reset has both kinds of internal topic.
        .select_key(lambda _k, v: v)
        .group_by_key(Grouped.with_(Serdes.string(), Serdes.string()))
        .count(Materialized.as_("counts"))
        .to_stream()
        .to(f"{app_id}-out", Produced.with_(Serdes.string(), Serdes.long()))
    )
    return builder.build()


def settings(cluster: Any, app_id: str, state_dir: str) -> dict[str, object]:
    config: dict[str, object] = {"application.id": app_id, "state.dir": state_dir, "commit.interval.ms": 100}
    if not isinstance(cluster, EmbeddedCluster):
        config.update({"session.timeout.ms": 6000, "consumer.heartbeat.interval.ms": 100})
    return config


def latest_counts(records: list) -> dict[str, int]:  # type: ignore[type-arg]
    return {r.key.decode(): int.from_bytes(r.value, "big", signed=True) for r in records}


def run_once(cluster: Any, app_id: str, state_dir: str, skip: int, expected: Counter[str]) -> dict[str, int]:
    """Run the count until the output past the first ``skip`` records holds every expected count,
    close it, and return those counts."""
    streams = KafkaStreams(count_topology(app_id), settings(cluster, app_id, state_dir), cluster=cluster)
    streams.clean_up()
    streams.start()
    try:
        deadline = time.monotonic() + WAIT
        while True:
            counts = latest_counts(cluster.read(f"{app_id}-out")[skip:])
            if counts == dict(expected) or any(counts.get(k, 0) > v for k, v in expected.items()):
                break
            assert streams.state is not State.ERROR, "the application failed"
            assert time.monotonic() < deadline, f"counts never reached {dict(expected)}: {counts}"
            streams.wait_for_state(State.ERROR, timeout=0.1)
    finally:
        assert streams.close(timeout=WAIT)
    return counts


def wait_group_empty(cluster: Any, app_id: str) -> None:
    deadline = time.monotonic() + WAIT
    while cluster.admin().group_members(app_id):
        assert time.monotonic() < deadline, "the closed application never left its group"
        time.sleep(0.1)  # polling the broker's view of the group


def test_a_reset_application_reprocesses_its_input_to_the_same_counts(cluster, app_id, tmp_path):
    cluster.create_topic(f"{app_id}-in", 2)
    cluster.create_topic(f"{app_id}-out", 2)
    words = ["a", "b", "a", "c", "a", "b"] * 5
    for i, word in enumerate(words):
        cluster.produce(f"{app_id}-in", str(i).encode(), word.encode(), NOW + i)
    expected = Counter(words)

    first = run_once(cluster, app_id, str(tmp_path), 0, expected)
    assert first == dict(expected)
    wait_group_empty(cluster, app_id)
    internal = sorted(
        t
        for t in cluster.topics()
        if t.startswith(app_id + "-") and t.endswith(("-changelog", "-repartition"))
    )
    assert internal == [f"{app_id}-counts-changelog", f"{app_id}-counts-repartition"]

    dry = reset_application(cluster, app_id, [f"{app_id}-in"], dry_run=True)
    assert dry.internal_topics == internal
    assert set(dry.offsets.values()) == {0}
    assert "dry run" in dry.describe()
    assert set(internal) <= set(cluster.topics()), "a dry run must change nothing"
    committed = cluster.admin().committed_offsets(
        app_id, [TopicPartition(f"{app_id}-in", p) for p in range(2)]
    )
    assert sum(committed.values()) == len(words)

    plan = reset_application(cluster, app_id, [f"{app_id}-in"])

    assert not set(internal) & set(cluster.topics())
    committed = cluster.admin().committed_offsets(
        app_id, [TopicPartition(f"{app_id}-in", p) for p in range(2)]
    )
    assert committed == {TopicPartition(f"{app_id}-in", 0): 0, TopicPartition(f"{app_id}-in", 1): 0}
    assert "clean_up()" in plan.describe()

    skip = len(cluster.read(f"{app_id}-out"))
    second = run_once(cluster, app_id, str(tmp_path), skip, expected)
    assert second == first  # the same counts, not doubled


def test_reset_refuses_a_running_application(cluster, app_id, tmp_path):
    cluster.create_topic(f"{app_id}-in", 1)
    cluster.create_topic(f"{app_id}-out", 1)
    streams = KafkaStreams(count_topology(app_id), settings(cluster, app_id, str(tmp_path)), cluster=cluster)
    streams.start()
    try:
        assert streams.wait_for_state(State.RUNNING, timeout=WAIT)
        deadline = time.monotonic() + WAIT
        while not cluster.admin().group_members(app_id):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        with pytest.raises(ApplicationActiveError, match=r"still running.*Stop every instance"):
            reset_application(cluster, app_id, [f"{app_id}-in"], dry_run=True)
        assert f"{app_id}-counts-changelog" in cluster.topics()
    finally:
        streams.close(timeout=WAIT)


def test_positions_other_than_earliest(cluster, app_id):
    topic = f"{app_id}-in"
    cluster.create_topic(topic, 1)
    for i in range(10):
        cluster.produce(topic, None, b"v", NOW + i * 1000, partition=0)
    tp = TopicPartition(topic, 0)

    def offset(position: ResetPosition) -> int:
        reset_application(cluster, app_id, [topic], position)
        return cluster.admin().committed_offsets(app_id, [tp])[tp]

    assert offset(ResetPosition.latest()) == 10
    assert offset(ResetPosition.to_offset(4)) == 4
    assert offset(ResetPosition.shift_by(-3)) == 1
    assert offset(ResetPosition.shift_by(-5)) == 0  # clamped to the log start
    assert offset(ResetPosition.to_offset(99)) == 10  # clamped to the log end
    assert offset(ResetPosition.to_timestamp(NOW + 6500)) == 7
    assert offset(ResetPosition.from_plan({tp: 2})) == 2
    plan = plan_reset(cluster, app_id, [topic, f"{app_id}-nope"], ResetPosition.to_offset(99))
    assert plan.missing_input_topics == [f"{app_id}-nope"]
    assert "past the log end 10" in plan.describe()


def test_internal_topics_must_belong_to_the_application(cluster, app_id):
    cluster.create_topic(f"{app_id}-x-changelog", 1)
    cluster.create_topic(f"{app_id}-other", 1)
    with pytest.raises(ResetError, match=f"{app_id}-other.*not internal topics"):
        reset_application(cluster, app_id, internal_topics=[f"{app_id}-other"])
    plan = reset_application(cluster, app_id, internal_topics=[f"{app_id}-x-changelog"])
    assert plan.internal_topics == [f"{app_id}-x-changelog"]
    assert f"{app_id}-x-changelog" not in cluster.topics()
    assert f"{app_id}-other" in cluster.topics()
