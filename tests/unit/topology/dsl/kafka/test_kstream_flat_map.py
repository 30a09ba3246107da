"""Apache Kafka's KStreamFlatMapTest (kstream/internals), ported: ``KStream.flat_map`` turns each
record into the records its mapper returns, in order, each with the input record's timestamp."""

from __future__ import annotations

from typing import Any

from kstreams import Consumed, KeyValue, Serdes, StreamsBuilder

S = Serdes.string()
I = Serdes.integer()  # noqa: E741 - Kafka's Serdes.Integer(), beside S


def test_flat_map_emits_each_mapped_pair_with_the_input_timestamp(drive, captured):
    """testFlatMap"""

    def mapper(key: int, value: Any) -> list[KeyValue]:
        return [KeyValue(str(key * 10 + i), str(value)) for i in range(key)]

    builder = StreamsBuilder()
    builder.stream("topic", Consumed.with_(I, S)).flat_map(mapper).process(captured.supplier)
    topic = drive(builder.build()).create_input_topic("topic", I, S)
    for key in (0, 1, 2, 3):
        topic.pipe_input(key, f"V{key}", key)
    assert captured.processed == [
        ("10", "V1", 1),
        ("20", "V2", 2),
        ("21", "V2", 2),
        ("30", "V3", 3),
        ("31", "V3", 3),
        ("32", "V3", 3),
    ]
