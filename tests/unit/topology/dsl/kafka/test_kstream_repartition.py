"""Apache Kafka's KStreamRepartitionTest (kstream/internals), ported: ``KStream.repartition``
with a custom partitioner, and joins of repartitioned streams whose partition counts differ.

Kafka's test mocks the ``StreamPartitioner`` and verifies its calls; here a recording partitioner
does the same.
"""

from __future__ import annotations

from typing import Any

import pytest

from kstreams import Consumed, JoinWindows, Repartitioned, Serdes, StreamsBuilder
from kstreams.errors import TopologyException

pytestmark = pytest.mark.on_cluster(
    representative="test_repartition_calls_the_custom_partitioner_for_each_record"
)

S = Serdes.string()
I = Serdes.integer()  # noqa: E741 - Kafka's Serdes.Integer(), beside S
APP = "repartition-app"


def _repartition_with(drive: Any, partition: int) -> tuple[list[Any], list[Any]]:
    """Kafka's case: records 0:X0@10 and 1:X1@11 through ``repartition`` named "test" whose
    partitioner puts every record on ``partition``; the partitioner's calls and the records of
    the repartition topic."""
    calls: list[tuple[Any, Any, int]] = []

    def partitioner(topic: str, key: Any, value: Any, num_partitions: int) -> int:
        calls.append((key, value, num_partitions))
        return partition

    builder = StreamsBuilder()
    builder.stream("input-topic").repartition(Repartitioned.stream_partitioner(partitioner).with_name("test"))
    driver = drive(builder.build(), application_id=APP, default_key_serde="integer")
    topic = driver.create_input_topic("input-topic", I, S)
    for key in (0, 1):
        topic.pipe_input(key, f"X{key}", key + 10)
    out = driver.create_output_topic(f"{APP}-test-repartition", I, S)
    return [(key, value) for key, value, _ in calls], [
        (r.key, r.value, r.timestamp) for r in out.read_records_to_list()
    ]


def test_repartition_calls_the_custom_partitioner_for_each_record(drive):
    """shouldInvokePartitionerWhenSet (the partitioner choosing the driver's one partition)"""
    calls, records = _repartition_with(drive, 0)
    assert calls == [(0, "X0"), (1, "X1")]
    assert records == [(0, "X0", 10), (1, "X1", 11)]


@pytest.mark.driver_only(
    reason="Kafka's TopologyTestDriver writes to a partition past the topic's partition count; a "
    "client on a cluster refuses it, as Kafka's producer does"
)
def test_repartition_to_a_partition_the_driver_lacks_still_writes_the_record(drive):
    """shouldInvokePartitionerWhenSet (as Kafka writes it: the partitioner returns partition 1)"""
    calls, records = _repartition_with(drive, 1)
    assert calls == [(0, "X0"), (1, "X1")]
    assert records == [(0, "X0", 10), (1, "X1", 11)]


def test_joining_repartitions_of_different_partition_counts_fails_at_build():
    """shouldThrowAnExceptionWhenNumberOfPartitionsOfRepartitionOperationsDoNotMatchWhenJoining"""
    builder = StreamsBuilder()
    topic_b = builder.stream("topic-b", Consumed.with_(I, S)).repartition(
        Repartitioned.as_("topic-b-scale-up").with_number_of_partitions(2)
    )
    builder.stream("input-topic", Consumed.with_(I, S)).repartition(
        Repartitioned.as_("input-topic-scale-up").with_number_of_partitions(4)
    ).join(topic_b, lambda value1, value2: value2, JoinWindows.of_time_difference_with_no_grace(10_000)).to(
        "topic-output"
    )
    with pytest.raises(TopologyException) as raised:
        builder.build().build(APP)
    assert (
        "Following topics do not have the same number of partitions: "
        f"[{{{APP}-input-topic-scale-up-repartition=4, {APP}-topic-b-scale-up-repartition=2}}]"
    ) in str(raised.value)
