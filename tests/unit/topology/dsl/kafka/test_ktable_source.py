"""Apache Kafka's KTableSourceTest (kstream/internals), ported: what a source table forwards and
stores.

Kafka's ``testNotSendingOldValue`` / ``testSendingOldValue`` add a processor under the table's
node and look at the changes it forwards (new and old value); so do these ports, through the
public ``Topology.add_processor`` and ``KTable.name``. The old values are turned on as a user turns
them on: by grouping the table (``group_by`` needs them), where Kafka's test calls the internal
``enableSendingOldValues``. ``testValueGetter`` reads the table's store instead of Kafka's
internal value getter.

Not ported: ``testKTableSourceEmitOnChange`` (disabled in Kafka, KIP-557 waits on KAFKA-12508);
``kTableShouldLogAndMeterOnSkippedRecords`` and ``kTableShouldLogOnOutOfOrder`` check a metric and
log lines (here only their observable part is kept: a null-key record is dropped).
"""

from __future__ import annotations

from typing import Any

import pytest

from kstreams import Consumed, KeyValue, Materialized, Serdes, StreamsBuilder, Topology

pytestmark = pytest.mark.on_cluster(
    representative="test_table_store_holds_each_key_s_latest_value_and_timestamp"
)

S = Serdes.string()
I = Serdes.integer()  # noqa: E741 - Kafka's Serdes.Integer(), beside S


def test_table_forwards_every_update_and_deletion_with_its_timestamp(drive, captured):
    """testKTable"""
    builder = StreamsBuilder()
    builder.table("topic1", Consumed.with_(S, I)).to_stream().process(captured.supplier)
    topic = drive(builder.build()).create_input_topic("topic1", S, I)
    for key, value, ts in [
        ("A", 1, 10),
        ("B", 2, 11),
        ("C", 3, 12),
        ("D", 4, 13),
        ("A", None, 14),
        ("B", None, 15),
    ]:
        topic.pipe_input(key, value, ts)
    assert captured.processed == [
        ("A", 1, 10),
        ("B", 2, 11),
        ("C", 3, 12),
        ("D", 4, 13),
        ("A", None, 14),
        ("B", None, 15),
    ]


def test_table_drops_a_record_with_a_null_key(drive, captured):
    """kTableShouldLogAndMeterOnSkippedRecords (its observable part: nothing is forwarded or stored)"""
    builder = StreamsBuilder()
    builder.table("topic", Consumed.with_(S, S), Materialized.as_("store")).to_stream().process(
        captured.supplier
    )
    driver = drive(builder.build())
    driver.create_input_topic("topic", S, S).pipe_input(None, "value", 0)
    assert captured.processed == []
    assert list(driver.get_key_value_store("store").all()) == []


def test_table_store_holds_each_key_s_latest_value_and_timestamp(drive):
    """testValueGetter"""
    builder = StreamsBuilder()
    builder.table("topic1", Consumed.with_(S, S), Materialized.as_("store"))
    driver = drive(builder.build())
    topic = driver.create_input_topic("topic1", S, S)
    store = driver.get_timestamped_key_value_store("store")

    def rows() -> dict[str, Any]:
        found = {key: store.get(key) for key in "ABC"}
        return {key: None if v is None else (v.value, v.timestamp) for key, v in found.items()}

    for key, value, ts in [("A", "01", 10), ("B", "01", 20), ("C", "01", 15)]:
        topic.pipe_input(key, value, ts)
    assert rows() == {"A": ("01", 10), "B": ("01", 20), "C": ("01", 15)}
    topic.pipe_input("A", "02", 30)
    topic.pipe_input("B", "02", 5)
    assert rows() == {"A": ("02", 30), "B": ("02", 5), "C": ("01", 15)}
    topic.pipe_input("A", "03", 29)
    assert rows() == {"A": ("03", 29), "B": ("02", 5), "C": ("01", 15)}
    topic.pipe_input("A", None, 50)
    topic.pipe_input("B", None, 3)
    assert rows() == {"A": None, "B": None, "C": ("01", 15)}


def _changes_under_the_table(drive: Any, send_old_values: bool) -> tuple[Any, list[Any]]:
    seen: list[tuple[Any, Any, Any, int]] = []

    class _Keep:
        def init(self, context: Any) -> None:
            pass

        def process(self, record: Any) -> None:
            seen.append((record.key, record.value.new_value, record.value.old_value, record.timestamp))

        def close(self) -> None:
            pass

    builder = StreamsBuilder()
    table = builder.table("topic1", Consumed.with_(S, S))
    if send_old_values:
        table.group_by(KeyValue).count()
    topology: Topology = builder.build()
    topology.add_processor("proc1", _Keep, table.name)
    return drive(topology).create_input_topic("topic1", S, S), seen


def _take(seen: list[Any]) -> list[Any]:
    taken = list(seen)
    seen.clear()
    return taken


def test_table_forwards_no_old_values_unless_a_downstream_needs_them(drive):
    """testNotSendingOldValue"""
    topic, seen = _changes_under_the_table(drive, send_old_values=False)
    for key, value, ts in [("A", "01", 10), ("B", "01", 20), ("C", "01", 15)]:
        topic.pipe_input(key, value, ts)
    assert _take(seen) == [("A", "01", None, 10), ("B", "01", None, 20), ("C", "01", None, 15)]
    topic.pipe_input("A", "02", 8)
    topic.pipe_input("B", "02", 22)
    assert _take(seen) == [("A", "02", None, 8), ("B", "02", None, 22)]
    topic.pipe_input("A", "03", 12)
    assert _take(seen) == [("A", "03", None, 12)]
    topic.pipe_input("A", None, 15)
    topic.pipe_input("B", None, 20)
    assert _take(seen) == [("A", None, None, 15), ("B", None, None, 20)]


def test_table_forwards_old_values_when_a_downstream_needs_them(drive):
    """testSendingOldValue"""
    topic, seen = _changes_under_the_table(drive, send_old_values=True)
    for key, value, ts in [("A", "01", 10), ("B", "01", 20), ("C", "01", 15)]:
        topic.pipe_input(key, value, ts)
    assert _take(seen) == [("A", "01", None, 10), ("B", "01", None, 20), ("C", "01", None, 15)]
    topic.pipe_input("A", "02", 8)
    topic.pipe_input("B", "02", 22)
    assert _take(seen) == [("A", "02", "01", 8), ("B", "02", "01", 22)]
    topic.pipe_input("A", "03", 12)
    assert _take(seen) == [("A", "03", "02", 12)]
    topic.pipe_input("A", None, 15)
    topic.pipe_input("B", None, 20)
    assert _take(seen) == [("A", None, "03", 15), ("B", None, "02", 20)]
