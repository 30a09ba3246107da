"""Tables kept in versioned stores (KIP-914): an out-of-order row goes to the history and is
forwarded marked not latest (to_stream writes it, table-table joins drop it), suppress refuses
a versioned table, and a stream-table join reads the row as of the stream record's time."""

from __future__ import annotations

import pytest

from kstreams.errors import TopologyException
from kstreams.serdes import Serdes
from kstreams.state import Stores, VersionedRecord
from kstreams.testing import TestRecord
from kstreams.topology import BufferConfig, Materialized, StreamsBuilder, Suppressed

S = Serdes.string()


def test_a_versioned_table_forwards_out_of_order_rows_and_joins_as_of_the_stream_time(drive) -> None:
    builder = StreamsBuilder()
    table = builder.table(
        "rows", materialized=Materialized.as_(Stores.persistent_versioned_key_value_store("tbl", 100))
    )
    table.to_stream().to("table-out")
    builder.stream("events").join(table, lambda event, row: f"{event}/{row}").to("joined")
    driver = drive(builder.build())
    rows = driver.create_input_topic("rows", S, S)
    rows.pipe_input("a", "A1", 10)
    rows.pipe_input("a", "A3", 30)
    rows.pipe_input("a", "A2", 20)  # out of order: into the history, and on, marked not latest
    rows.pipe_input("b", "B1", 200)  # stream time 200: history before 100 has expired
    rows.pipe_input("a", "late", 90)  # older than the history retention: dropped
    rows.pipe_input("b", None, 210)
    assert driver.create_output_topic("table-out", S, S).read_records_to_list() == [
        TestRecord("a", "A1", 10),
        TestRecord("a", "A3", 30),
        TestRecord("a", "A2", 20),
        TestRecord("b", "B1", 200),
        TestRecord("b", None, 210),
    ]
    store = driver.get_state_store("tbl")
    assert store.get("a", 25) is None  # before the retention horizon and older than the latest
    assert store.get("a") == VersionedRecord("A3", 30, None)
    assert store.get("b", 205) == VersionedRecord("B1", 200, 210)

    events = driver.create_input_topic("events", S, S)
    events.pipe_input("a", "e1", 150)  # stream time is 210 here: as of 150, a's row is A3
    events.pipe_input("b", "e2", 205)  # b was B1 at 205
    events.pipe_input("b", "e3", 215)  # deleted at 210: an inner join drops it
    events.pipe_input("c", "e4", 220)
    assert driver.create_output_topic("joined", S, S).read_records_to_list() == [
        TestRecord("a", "e1/A3", 150),
        TestRecord("b", "e2/B1", 205),
    ]


def test_a_versioned_table_joins_history_within_its_retention(drive) -> None:
    builder = StreamsBuilder()
    table = builder.table(
        "rows", materialized=Materialized.as_(Stores.in_memory_versioned_key_value_store("tbl", 1_000))
    )
    builder.stream("events").left_join(table, lambda event, row: f"{event}/{row}").to("joined")
    driver = drive(builder.build())
    rows = driver.create_input_topic("rows", S, S)
    rows.pipe_input("a", "A1", 10)
    rows.pipe_input("a", "A2", 20)
    events = driver.create_input_topic("events", S, S)
    events.pipe_input("a", "e0", 5)
    events.pipe_input("a", "e1", 15)
    events.pipe_input("a", "e2", 25)
    assert driver.create_output_topic("joined", S, S).read_records_to_list() == [
        TestRecord("a", "e0/None", 5),
        TestRecord("a", "e1/A1", 15),
        TestRecord("a", "e2/A2", 25),
    ]


def test_describe_shows_the_versioned_table_store() -> None:
    builder = StreamsBuilder()
    builder.table(
        "rows", materialized=Materialized.as_(Stores.persistent_versioned_key_value_store("tbl", 100))
    )
    text = str(builder.build().describe())
    assert "Processor: KTABLE-SOURCE-0000000001 (stores: [tbl])" in text


def test_an_out_of_order_row_reaches_the_stream_of_a_filter_but_no_table_join(drive) -> None:
    builder = StreamsBuilder()
    table = builder.table(
        "rows", materialized=Materialized.as_(Stores.persistent_versioned_key_value_store("tbl", 100))
    )
    table.filter(lambda key, value: value != "skip").map_values(str.lower).to_stream().to("derived")
    other = builder.table("others", materialized=Materialized.as_("others"))
    table.join(other, lambda row, other_row: f"{row}+{other_row}").to_stream().to("joined")
    driver = drive(builder.build())
    driver.create_input_topic("others", S, S).pipe_input("a", "O", 0)
    rows = driver.create_input_topic("rows", S, S)
    rows.pipe_input("a", "A3", 30)
    rows.pipe_input("a", "A2", 20)  # out of order
    rows.pipe_input("b", "skip", 10)  # filtered out: a versioned table's filter says so
    assert driver.create_output_topic("derived", S, S).read_records_to_list() == [
        TestRecord("a", "a3", 30),
        TestRecord("a", "a2", 20),
        TestRecord("b", None, 10),
    ]
    # The join's current row did not change: Kafka's table-table joins drop the update.
    assert driver.create_output_topic("joined", S, S).read_records_to_list() == [TestRecord("a", "A3+O", 30)]


def test_suppress_refuses_a_versioned_table_even_through_a_filter() -> None:
    builder = StreamsBuilder()
    table = builder.table(
        "rows", materialized=Materialized.as_(Stores.persistent_versioned_key_value_store("tbl", 100))
    )
    until = Suppressed.until_time_limit(10, BufferConfig.unbounded())
    for versioned in (table, table.filter(lambda key, value: True)):
        with pytest.raises(
            TopologyException, match=r"suppress\(\) is only supported for non-versioned KTables"
        ):
            versioned.suppress(until)
    # A table kept in a store of its own is not versioned any more: it may be suppressed.
    table.filter(lambda key, value: True, Materialized.as_("kept")).suppress(until)
