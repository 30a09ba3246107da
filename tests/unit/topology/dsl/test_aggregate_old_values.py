"""The old value an aggregation forwards with an aggregate's first update (differences 22).

Kafka's KStreamAggregate and KStreamWindowAggregate start a new aggregate from the initializer's
value and forward that value as the update's old value (``Change(new, initializer())``) when old
values are sent; a reduce has no initializer (null). Through a cache, the flush reads the old value
from the store below, which holds none yet: null. No DSL output of a windowed table shows it, but a
processor under the table does, and so does a re-grouping of a plain aggregation's table: Kafka's
subtractor takes the initializer's value out of the group first.

The expected values were taken from Kafka Streams 4.1.1's TopologyTestDriver with the same
topologies (a processor added under the aggregation's node, old values turned on by a suppress).
"""

from __future__ import annotations

from typing import Any

import pytest

from kstreams import (
    Consumed,
    KeyValue,
    Materialized,
    Serdes,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
)
from kstreams.processor import Processor, Record
from kstreams.topology.dsl.suppressed import BufferConfig

S = Serdes.string()
L = Serdes.long()


def _changes_under(drive: Any, kind: str, cache: int, compiled: bool) -> list[tuple[Any, Any, Any, int]]:
    """What a processor under the aggregation's node sees for a:x@1, a:y@2, with old values on."""
    seen: list[tuple[Any, Any, Any, int]] = []

    class Keep(Processor[Any, Any, Any, Any]):
        def process(self, record: Record[Any, Any]) -> None:
            change = record.value
            key = record.key
            shown = key if isinstance(key, str) else f"{key.key}@{key.start}/{key.end}"
            seen.append((shown, change.new_value, change.old_value, record.timestamp))

    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed.with_(S, S)).group_by_key()
    if kind == "plain-count":
        table = grouped.count(Materialized.as_("st"))
    else:
        windowed = grouped.windowed_by(TimeWindows.of_size_with_no_grace(10))
        if kind == "count":
            table = windowed.count(Materialized.as_("st"))
        elif kind == "aggregate":
            table = windowed.aggregate(
                lambda: "init", lambda k, v, agg: f"{agg}+{v}", Materialized.as_("st").with_value_serde(S)
            )
        else:
            table = windowed.reduce(lambda agg, v: f"{agg}+{v}", Materialized.as_("st"))
    # A suppress asks its parent for old values (Kafka's enableSendingOldValues).
    table.suppress(Suppressed.until_time_limit(1000, BufferConfig.unbounded()))
    topology = builder.build()
    topology.add_processor("keep", Keep, table.name)
    driver = drive(topology, statestore_cache_max_bytes=cache, processing_compiled=compiled)
    source = driver.create_input_topic("in", S, S)
    source.pipe_input("a", "x", 1)
    source.pipe_input("a", "y", 2)
    return seen


KAFKA_UNCACHED = {
    "count": [("a@0/10", 1, 0, 1), ("a@0/10", 2, 1, 2)],
    "aggregate": [("a@0/10", "init+x", "init", 1), ("a@0/10", "init+x+y", "init+x", 2)],
    "reduce": [("a@0/10", "x", None, 1), ("a@0/10", "x+y", "x", 2)],
    "plain-count": [("a", 1, 0, 1), ("a", 2, 1, 2)],
}


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "per-record"])
@pytest.mark.parametrize("kind", sorted(KAFKA_UNCACHED))
def test_a_first_update_without_a_cache_has_the_initializers_value_as_old_value(drive, kind, compiled):
    assert _changes_under(drive, kind, 0, compiled) == KAFKA_UNCACHED[kind]


@pytest.mark.parametrize("kind", sorted(KAFKA_UNCACHED))
def test_a_first_update_through_a_cache_has_no_old_value(drive, kind):
    # The driver flushes the cache after every record; the flush reads the old value below it.
    first, second = KAFKA_UNCACHED[kind]
    assert _changes_under(drive, kind, 10 * 1024 * 1024, True) == [(*first[:2], None, first[3]), second]


def test_the_initializers_own_value_is_the_old_value(drive):
    """Kafka forwards the very object the aggregator started from: an aggregator that adds to it
    in place leaves old and new the same object."""
    seen: list[Any] = []

    class Keep(Processor[Any, Any, Any, Any]):
        def process(self, record: Record[Any, Any]) -> None:
            seen.append(record.value)

    def append(key: Any, value: Any, agg: list[Any]) -> list[Any]:
        agg.append(value)
        return agg

    builder = StreamsBuilder()
    table = (
        builder.stream("in", Consumed.with_(S, S))
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(10))
        .aggregate(list, append, Materialized.as_("st").with_value_serde(Serdes.json()))
    )
    table.suppress(Suppressed.until_time_limit(1000, BufferConfig.unbounded()))
    topology = builder.build()
    topology.add_processor("keep", Keep, table.name)
    driver = drive(topology, statestore_cache_max_bytes=0)
    driver.create_input_topic("in", S, S).pipe_input("a", "x", 1)
    [change] = seen
    assert change.new_value == ["x"]
    assert change.old_value is change.new_value


def test_regrouping_a_count_subtracts_the_first_updates_initial_count(drive):
    """Kafka's regrouping forwards each first count's old value 0 to the new group, whose count
    subtracts it: a second key joining a group leaves its count at 1 (checked on Kafka Streams
    4.1.1; the oracle's regression aggregate-first-update-old-value holds the same case)."""
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(S, S)).group_by_key().count().group_by(
        lambda k, n: KeyValue(k[0], f"{k}={n}")
    ).count().to_stream().to("out")
    driver = drive(builder.build(), statestore_cache_max_bytes=0)
    source = driver.create_input_topic("in", S, S)
    for key, ts in [("a", 1), ("ab", 2), ("ab", 3)]:
        source.pipe_input(key, "v", ts)
    assert driver.create_output_topic("out", S, L).read_key_values_to_list() == [
        KeyValue("a", 1),
        KeyValue("a", 1),
        KeyValue("a", 1),
    ]
