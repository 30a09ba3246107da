"""The DSL's C record-at-a-time processors (filter, map, map_values) under any context, and the
aggregations' C step functions."""

from __future__ import annotations

import operator
import pickle
from typing import Any

import pytest

from kstreams import KeyValue
from kstreams._native.per_record import key_value_of
from kstreams.processor import FixedKeyRecord, Record
from kstreams.topology.dsl.processors.aggregate import _step_function, count_aggregator, count_initializer
from kstreams.topology.dsl.processors.stateless import FilterSupplier, MapSupplier, MapValuesSupplier


class ListContext:
    """A context that is not a task's: forward is an ordinary method (as in a test harness)."""

    def __init__(self) -> None:
        self.forwarded: list[Any] = []

    def forward(self, record: Any, child_name: Any = None) -> None:
        self.forwarded.append(record)


def run(supplier: Any, *records: Any) -> list[Any]:
    processor = supplier()
    context = ListContext()
    processor.init(context)
    for record in records:
        processor.process(record)
    return context.forwarded


def test_filter_keeps_what_the_predicate_accepts_and_negated_what_it_rejects() -> None:
    records = [Record("a", 1, 10), Record("b", 2, 20, [("h", b"1")])]
    assert run(FilterSupplier(lambda k, v: v > 1), *records) == [records[1]]
    assert run(FilterSupplier(lambda k, v: v > 1, negate=True), *records) == [records[0]]


def test_map_values_keeps_key_timestamp_and_headers_with_or_without_the_key() -> None:
    record = Record("k", 3, 7, [("h", b"x")])
    assert run(MapValuesSupplier(lambda v: v * 2), record) == [Record("k", 6, 7, [("h", b"x")])]
    assert run(MapValuesSupplier(lambda k, v: f"{k}{v}", with_key=True), record) == [
        Record("k", "k3", 7, [("h", b"x")])
    ]
    # a key-preserving record stays one
    assert run(MapValuesSupplier(lambda v: v + 1), FixedKeyRecord("k", 1, 2)) == [FixedKeyRecord("k", 2, 2)]


def test_map_takes_key_values_tuples_and_pairs_and_names_a_bad_result() -> None:
    record = Record("k", 3, 7)
    assert run(MapSupplier(lambda k, v: KeyValue(v, k)), record) == [Record(3, "k", 7)]
    assert run(MapSupplier(lambda k, v: [k + "!", v]), record) == [Record("k!", 3, 7)]
    with pytest.raises(TypeError, match=r"The mapper of map must return a KeyValue .* got 5"):
        run(MapSupplier(lambda k, v: 5), record)
    with pytest.raises(TypeError, match="got \\(1, 2, 3\\)"):
        key_value_of((1, 2, 3), "flat_map")


def _append(key: Any, value: Any, aggregate: list[Any]) -> list[Any]:
    return [*aggregate, value]


def test_aggregation_steps_combine_as_kafka_and_travel_pickled() -> None:
    count = _step_function("count", count_initializer, count_aggregator)
    reduce = _step_function("reduce", None, operator.add)
    aggregate = _step_function("aggregate", list, _append)
    assert (count("k", "v", None), count("k", "v", 4)) == (1, 5)
    assert (reduce("k", 3, None), reduce("k", 3, 4)) == (3, 7)  # the first value starts a reduce
    assert (aggregate("k", 3, None), aggregate("k", 3, [1])) == ([3], [1, 3])
    for step in (count, reduce, aggregate):  # a topology's specs go to Spark executors pickled
        again = pickle.loads(pickle.dumps(step))
        assert type(again) is type(step)
        assert again("k", 2, None) == step("k", 2, None)
