"""Apache Kafka's KTableMapValuesTest (kstream/internals), ported: what ``map_values`` on a table
forwards, what its store holds, and the changes it forwards with and without old values.

As in the KTableSourceTest port, the processor goes under the mapped table's node through the
public ``Topology.add_processor`` and ``KTable.name``, and old values are turned on as a user turns
them on: by grouping the mapped table (Kafka's test calls the internal ``enableSendingOldValues``).
``testQueryableValueGetter`` reads the mapped tables' stores instead of Kafka's internal value
getters.
"""

from __future__ import annotations

from typing import Any

import pytest

from kstreams import Consumed, Grouped, KeyValue, Materialized, Serdes, StreamsBuilder

pytestmark = pytest.mark.on_cluster(
    representative="test_mapped_table_forwards_each_mapped_value_with_its_timestamp"
)

S = Serdes.string()
I = Serdes.integer()  # noqa: E741 - Kafka's Serdes.Integer(), beside S
CONSUMED = Consumed.with_(S, S)


def _map_and_capture(drive: Any, captured: Any, *materialized: Any) -> None:
    builder = StreamsBuilder()
    table1 = builder.table("topic1", CONSUMED)
    table2 = table1.map_values(lambda value: ord(value[0]) - 48, *materialized)
    table2.to_stream().process(captured.supplier)
    topic = drive(builder.build()).create_input_topic("topic1", S, S)
    for key, value, ts in [("A", "1", 5), ("B", "2", 25), ("C", "3", 20), ("D", "4", 10)]:
        topic.pipe_input(key, value, ts)
    assert captured.processed == [("A", 1, 5), ("B", 2, 25), ("C", 3, 20), ("D", 4, 10)]


def test_mapped_table_forwards_each_mapped_value_with_its_timestamp(drive, captured):
    """testKTable"""
    _map_and_capture(drive, captured)


def test_materialized_mapped_table_forwards_the_same(drive, captured):
    """testQueryableKTable"""
    _map_and_capture(drive, captured, Materialized.as_("anyName").with_value_serde(I))


def test_mapped_stores_hold_each_key_s_mapped_value_and_timestamp(drive):
    """testQueryableValueGetter"""
    builder = StreamsBuilder()
    table1 = builder.table("topic1", CONSUMED)
    table2 = table1.map_values(int, Materialized.as_("store2").with_value_serde(I))
    table3 = table1.map_values(lambda value: -int(value), Materialized.as_("store3").with_value_serde(I))
    table4 = table1.map_values(int)
    assert table2.queryable_store_name == "store2"
    assert table3.queryable_store_name == "store3"
    assert table4.queryable_store_name is None
    driver = drive(builder.build())
    topic = driver.create_input_topic("topic1", S, S)
    stores = [driver.get_timestamped_key_value_store(name) for name in ("store2", "store3")]

    def rows() -> list[dict[str, Any]]:
        found = [{key: store.get(key) for key in "ABC"} for store in stores]
        return [{k: None if v is None else (v.value, v.timestamp) for k, v in f.items()} for f in found]

    for key, value, ts in [("A", "01", 50), ("B", "01", 10), ("C", "01", 30)]:
        topic.pipe_input(key, value, ts)
    assert rows() == [
        {"A": (1, 50), "B": (1, 10), "C": (1, 30)},
        {"A": (-1, 50), "B": (-1, 10), "C": (-1, 30)},
    ]
    topic.pipe_input("A", "02", 25)
    topic.pipe_input("B", "02", 20)
    assert rows() == [
        {"A": (2, 25), "B": (2, 20), "C": (1, 30)},
        {"A": (-2, 25), "B": (-2, 20), "C": (-1, 30)},
    ]
    topic.pipe_input("A", "03", 35)
    assert rows() == [
        {"A": (3, 35), "B": (2, 20), "C": (1, 30)},
        {"A": (-3, 35), "B": (-2, 20), "C": (-1, 30)},
    ]
    topic.pipe_input("A", None, 1)
    assert rows() == [{"A": None, "B": (2, 20), "C": (1, 30)}, {"A": None, "B": (-2, 20), "C": (-1, 30)}]


def _changes_under_the_mapped_table(drive: Any, send_old_values: bool) -> list[list[Any]]:
    seen: list[tuple[Any, Any, Any, int]] = []

    class _Keep:
        def init(self, context: Any) -> None:
            pass

        def process(self, record: Any) -> None:
            seen.append((record.key, record.value.new_value, record.value.old_value, record.timestamp))

        def close(self) -> None:
            pass

    builder = StreamsBuilder()
    table2 = builder.table("topic1", CONSUMED).map_values(int)
    if send_old_values:
        table2.group_by(KeyValue, Grouped.with_(S, I)).count()
    topology = builder.build()
    topology.add_processor("proc", _Keep, table2.name)
    topic = drive(topology).create_input_topic("topic1", S, S)
    found = []
    steps = [[("A", "01", 5), ("B", "01", 10), ("C", "01", 15)], [("A", "02", 10), ("B", "02", 8)]]
    for rows in [*steps, [("A", "03", 20)], [("A", None, 30)]]:
        for key, value, ts in rows:
            topic.pipe_input(key, value, ts)
        found.append(list(seen))
        seen.clear()
    return found


def test_mapped_table_forwards_no_old_values_unless_a_downstream_needs_them(drive):
    """testNotSendingOldValue"""
    assert _changes_under_the_mapped_table(drive, False) == [
        [("A", 1, None, 5), ("B", 1, None, 10), ("C", 1, None, 15)],
        [("A", 2, None, 10), ("B", 2, None, 8)],
        [("A", 3, None, 20)],
        [("A", None, None, 30)],
    ]


def test_mapped_table_forwards_old_values_when_a_downstream_needs_them(drive):
    """testSendingOldValue"""
    assert _changes_under_the_mapped_table(drive, True) == [
        [("A", 1, None, 5), ("B", 1, None, 10), ("C", 1, None, 15)],
        [("A", 2, 1, 10), ("B", 2, 1, 8)],
        [("A", 3, 2, 20)],
        [("A", None, 3, 30)],
    ]
