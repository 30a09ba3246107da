"""Stream joins with Kafka's ValueJoinerWithKey: ``with_key=True`` calls ``joiner(key, value,
other_value)`` with the stream record's key, in every stream join and every way it emits."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams.serdes import Serdes
from kstreams.topology import JoinWindows, Materialized, StreamsBuilder

S = Serdes.string()


def keyed(key: Any, left: Any, right: Any) -> str:
    return f"{key}:{left}+{right}"


def rows(driver: Any) -> list[tuple[Any, Any, int]]:
    return [
        (r.key, r.value, r.timestamp) for r in driver.create_output_topic("out", S, S).read_records_to_list()
    ]


@pytest.mark.parametrize("left", [False, True])
def test_stream_table_joins_pass_the_stream_key(drive, left: bool) -> None:
    builder = StreamsBuilder()
    stream = builder.stream("stream")
    join = stream.left_join if left else stream.join
    join(builder.table("table"), keyed, with_key=True).to("out")
    driver = drive(builder.build())
    driver.create_input_topic("table", S, S).pipe_input("a", "A", timestamp=1)
    stream_in = driver.create_input_topic("stream", S, S)
    stream_in.pipe_input("a", "x", timestamp=5)
    stream_in.pipe_input("b", "y", timestamp=6)
    assert rows(driver) == [("a", "a:x+A", 5)] + ([("b", "b:y+None", 6)] if left else [])


@pytest.mark.parametrize("left", [False, True])
def test_stream_global_table_joins_pass_the_stream_key_not_the_table_key(drive, left: bool) -> None:
    builder = StreamsBuilder()
    customers = builder.global_table("customers", materialized=Materialized.as_("customers-store"))
    orders = builder.stream("orders")
    join = orders.left_join if left else orders.join
    join(customers, lambda order_id, order: order.split("/")[0], keyed, with_key=True).to("out")
    driver = drive(builder.build())
    driver.create_input_topic("customers", S, S).pipe_input("c1", "Ada", timestamp=1)
    orders_in = driver.create_input_topic("orders", S, S)
    orders_in.pipe_input("o1", "c1/book", timestamp=2)
    orders_in.pipe_input("o2", "c9/pen", timestamp=3)
    assert rows(driver) == [("o1", "o1:c1/book+Ada", 2)] + ([("o2", "o2:c9/pen+None", 3)] if left else [])


def test_stream_stream_join_passes_the_key_from_either_side_in_the_left_right_order(drive) -> None:
    builder = StreamsBuilder()
    builder.stream("left").join(
        builder.stream("right"), keyed, JoinWindows.of_time_difference_with_no_grace(100), with_key=True
    ).to("out")
    driver = drive(builder.build())
    left, right = driver.create_input_topic("left", S, S), driver.create_input_topic("right", S, S)
    left.pipe_input("a", "L1", timestamp=0)
    right.pipe_input("a", "R1", timestamp=50)  # the right side triggers: still (key, left, right)
    left.pipe_input("a", "L2", timestamp=60)  # the left side triggers
    assert rows(driver) == [("a", "a:L1+R1", 50), ("a", "a:L2+R1", 60)]


def test_stream_stream_outer_join_passes_the_key_to_unjoined_records(drive) -> None:
    builder = StreamsBuilder()
    builder.stream("left").outer_join(
        builder.stream("right"), keyed, JoinWindows.of_time_difference_with_no_grace(10), with_key=True
    ).to("out")
    driver = drive(builder.build())
    left, right = driver.create_input_topic("left", S, S), driver.create_input_topic("right", S, S)
    left.pipe_input("a", "L", timestamp=0)  # parked until its window closes
    right.pipe_input("b", "R", timestamp=5)
    left.pipe_input(None, "N", timestamp=6)  # a null key never finds a partner: emitted at once
    left.pipe_input("c", "X", timestamp=100)  # closes the windows of L and R
    assert sorted(rows(driver), key=lambda r: r[2]) == [
        ("a", "a:L+None", 0),
        ("b", "b:None+R", 5),
        (None, "None:N+None", 6),
    ]


def test_stream_stream_left_join_passes_the_key_when_the_window_closes(drive) -> None:
    builder = StreamsBuilder()
    builder.stream("left").left_join(
        builder.stream("right"), keyed, JoinWindows.of_time_difference_with_no_grace(10), with_key=True
    ).to("out")
    driver = drive(builder.build())
    left = driver.create_input_topic("left", S, S)
    left.pipe_input("a", "L", timestamp=0)
    left.pipe_input("z", "Z", timestamp=50)
    assert rows(driver) == [("a", "a:L+None", 0)]


def test_a_joiner_that_cannot_take_its_arguments_fails_at_build_with_what_to_change() -> None:
    builder = StreamsBuilder()
    stream, table = builder.stream("s"), builder.table("t")
    with pytest.raises(TypeError, match=r"\(value, other_value\).*needs with_key=True"):
        stream.join(table, lambda key, value, other: value)
    with pytest.raises(TypeError, match=r"cannot take \(key, value, other_value\)"):
        stream.join(table, lambda value, other: value, with_key=True)
    windows = JoinWindows.of_time_difference_with_no_grace(10)
    with pytest.raises(TypeError, match="needs with_key=True"):
        stream.outer_join(builder.stream("r"), keyed, windows)
    with pytest.raises(TypeError, match="needs with_key=True"):
        stream.left_join(builder.global_table("g"), lambda k, v: k, keyed)
    # Defaults and *args fit either call; builtins without a signature are trusted.
    stream.join(table, lambda value, other, extra=None: value)
    stream.join(table, lambda *values: values[0], with_key=True)
    stream.join(table, max)
