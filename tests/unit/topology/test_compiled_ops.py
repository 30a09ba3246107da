"""DSL operations with batch kernels are recognised from their suppliers and marked in describe()."""

from __future__ import annotations

import operator

from kstreams import Consumed, Materialized, Serdes, StreamsBuilder, TimeWindows
from kstreams.predicates import json_field, value


def test_describe_marks_the_operations_that_compile() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(Serdes.string(), Serdes.long()))
    stream.filter(value().gt(5), named="compiled-filter").to("out")
    stream.filter(lambda k, v: v > 5, named="python-filter").to("out2")
    grouped = stream.group_by_key()
    grouped.reduce(operator.add, Materialized.as_("sums"), named="sum")
    grouped.reduce(lambda a, b: a + b, Materialized.as_("other"), named="lambda-reduce")
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(1000)).reduce(max, named="windowed-max")
    builder.stream("json", Consumed.with_(Serdes.string(), Serdes.json())).select_key(
        json_field("user"), named="rekey"
    ).to("rekeyed")
    description = builder.build().describe()
    assert description.compiled_nodes() == {
        "compiled-filter": "filter",
        "sum": "sum",
        "windowed-max": "windowed-max",
        "rekey": "project",
    }
    text = description.to_string(show_compiled=True)
    assert "Processor: sum (stores: [sums]) [compiled: sum]" in text
    assert "[compiled" not in str(description)  # Kafka's text is unchanged
