"""run_topology: the same topology over the same input gives the same final aggregates on Spark
as the TopologyTestDriver (the StreamTask the streaming runtime runs)."""

from __future__ import annotations

import random
import sys
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

import pytest
from pyspark import cloudpickle

from kstreams import Consumed, Grouped, Produced, Serdes, StreamsBuilder, TimeWindows, Topology
from kstreams.errors import ConfigException, MissingSourceTopicException, StreamsException
from kstreams.processor import Processor, Record
from kstreams.spark import run_topology
from kstreams.state.stores import Stores
from kstreams.testing import TopologyTestDriver
from kstreams.topology import WindowedSerdes

pytestmark = pytest.mark.spark

# Processors defined in this module must travel to Spark's workers by value: the workers cannot
# import a test module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

STRING = Serdes.string()
LONG = Serdes.long()
BYTES = Serdes.bytes()
WINDOWED_STRING = WindowedSerdes.time_windowed_serde_from(STRING, 10_000)


def _sentences(count: int, seed: int) -> list[tuple[bytes, bytes, int]]:
    rng = random.Random(seed)
    vocabulary = ["kafka", "streams", "spark", "state", "store", "task", "topic", "window"]
    records = []
    for i in range(count):
        words = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 6)))
        records.append((f"line-{i % 13}".encode(), words.encode(), 1_000 + i * 250))
    return records


def _driver_output(
    topology: Topology,
    records: Iterable[tuple[bytes, bytes, int]],
    source: str,
    sink: str,
    config: dict[str, Any] | None = None,
) -> list[tuple[bytes | None, bytes | None, int]]:
    """What the test driver writes to ``sink`` for ``records`` piped in order, as raw bytes."""
    with TopologyTestDriver(topology, config) as driver:
        topic = driver.create_input_topic(source, BYTES, BYTES)
        for key, value, timestamp in records:
            topic.pipe_input(key, value, timestamp)
        output = driver.create_output_topic(sink, BYTES, BYTES)
        return [(r.key, r.value, r.timestamp) for r in output.read_records_to_list()]


def _final_values(rows: Iterable[tuple[Any, Any, int]]) -> dict[Any, Any]:
    final: dict[Any, Any] = {}
    for key, value, _timestamp in rows:
        final[key] = value
    return final


def _spark_rows(df: Any) -> list[tuple[bytes | None, bytes | None, int]]:
    return [(r.key, r.value, r.timestamp) for r in df.collect()]


def _word_count() -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream("sentences", Consumed.with_(STRING, STRING))
        .flat_map_values(lambda line: line.split())
        .group_by(lambda _key, word: word, Grouped.with_(STRING, STRING))
        .count()
        .to_stream()
        .to("word-counts", Produced.with_(STRING, LONG))
    )
    return builder.build()


def test_word_count_final_counts_equal_the_test_drivers(spark: Any) -> None:
    records = _sentences(400, seed=1)
    expected = _final_values(_driver_output(_word_count(), records, "sentences", "word-counts"))
    # Three input partitions: three tasks run the stateless subtopology before the shuffle.
    df = spark.createDataFrame(records, "key binary, value binary, timestamp long").repartition(3)

    outputs = run_topology(spark, _word_count(), {"sentences": df}, {"application.id": "wc"})

    assert set(outputs) == {"word-counts"}
    actual = _final_values(_spark_rows(outputs["word-counts"]))
    decoded = {STRING.deserialize("t", k): LONG.deserialize("t", v) for k, v in actual.items()}
    assert decoded == {STRING.deserialize("t", k): LONG.deserialize("t", v) for k, v in expected.items()}
    assert sum(decoded.values()) == sum(len(v.split()) for _k, v, _t in records)


def test_windowed_count_final_counts_equal_the_test_drivers(spark: Any) -> None:
    def topology() -> Topology:
        builder = StreamsBuilder()
        (
            builder.stream("clicks", Consumed.with_(STRING, STRING))
            .group_by_key()
            .windowed_by(TimeWindows.of_size_and_grace(10_000, 0))
            .count()
            .to_stream()
            .to("clicks-per-window", Produced.with_(WINDOWED_STRING, LONG))
        )
        return builder.build()

    rng = random.Random(7)
    records = [
        (f"user-{rng.randint(0, 9)}".encode(), b"click", 1_000 + i * 700 + rng.randint(0, 300))
        for i in range(300)
    ]
    records.sort(key=lambda r: r[2])
    config = {"application.id": "windows"}
    expected = _final_values(_driver_output(topology(), records, "clicks", "clicks-per-window", config))
    df = spark.createDataFrame(records, "key binary, value binary, timestamp long").repartition(2)

    outputs = run_topology(spark, topology(), {"clicks": df}, config)

    actual = _final_values(_spark_rows(outputs["clicks-per-window"]))
    assert actual == expected
    assert len(actual) > 10  # several users, several windows each
    assert sum(LONG.deserialize("t", v) for v in actual.values()) == len(records)


def test_stateless_filter_map_writes_the_test_drivers_records(spark: Any) -> None:
    def topology() -> Topology:
        builder = StreamsBuilder()
        (
            builder.stream("orders", Consumed.with_(STRING, STRING))
            .filter(lambda _key, value: int(value) % 3 != 0)
            .map(lambda key, value: (key.upper(), str(int(value) * 10)))
            .to("big-orders", Produced.with_(STRING, STRING))
        )
        return builder.build()

    records = [(f"c{i % 5}".encode(), str(i).encode(), 10_000 + i) for i in range(120)]
    expected = _driver_output(topology(), records, "orders", "big-orders")
    # Keys and values as strings and the timestamp as a Spark timestamp: run_topology converts.
    df = spark.createDataFrame(
        [(k.decode(), v.decode(), datetime.fromtimestamp(t / 1000, tz=timezone.utc)) for k, v, t in records],
        "key string, value string, timestamp timestamp",
    ).repartition(3)

    outputs = run_topology(spark, topology(), {"orders": df})

    assert Counter(_spark_rows(outputs["big-orders"])) == Counter(expected)
    assert len(expected) == 80


class RunningMax(Processor):
    """Keeps each key's largest value in a store and forwards it when it grows."""

    def init(self, context: Any) -> None:
        self.context = context
        self.store = context.get_state_store("max-store")

    def process(self, record: Record) -> None:
        current = self.store.get(record.key)
        if current is None or record.value > current:
            self.store.put(record.key, record.value)
            self.context.forward(record)


def test_processor_api_topology_with_a_persistent_store_runs_in_memory(spark: Any) -> None:
    def topology() -> Topology:
        store = Stores.key_value_store_builder(Stores.persistent_key_value_store("max-store"), STRING, LONG)
        return (
            Topology()
            .add_source("readings", "readings", key_deserializer=STRING, value_deserializer=LONG)
            .add_processor("max", RunningMax, "readings")
            .add_state_store(store, "max")
            .add_sink("maxima", "maxima", "max", key_serializer=STRING, value_serializer=LONG)
        )

    rng = random.Random(3)
    records = [
        (f"sensor-{rng.randint(0, 6)}".encode(), LONG.serialize("t", rng.randint(0, 1000)), 5_000 + i)
        for i in range(200)
    ]
    expected = _final_values(_driver_output(topology(), records, "readings", "maxima"))
    df = spark.createDataFrame(records, "key binary, value binary, timestamp long").repartition(2)

    outputs = run_topology(spark, topology(), {"readings": df}, {"application.id": "maxima"})

    assert _final_values(_spark_rows(outputs["maxima"])) == expected


def test_a_topology_source_without_an_input_dataframe_is_rejected(spark: Any) -> None:
    df = spark.createDataFrame([(b"k", b"v", 1)], "key binary, value binary, timestamp long")

    with pytest.raises(MissingSourceTopicException, match="sentences"):
        run_topology(spark, _word_count(), {})
    with pytest.raises(StreamsException, match="does not read"):
        run_topology(spark, _word_count(), {"sentences": df, "typo": df})


def test_stream_table_join_sees_table_updates_in_timestamp_order(spark: Any) -> None:
    def topology() -> Topology:
        builder = StreamsBuilder()
        prices = builder.table("prices", Consumed.with_(STRING, LONG))
        (
            builder.stream("orders", Consumed.with_(STRING, LONG))
            .join(prices, lambda quantity, price: quantity * price)
            .to("order-totals", Produced.with_(STRING, LONG))
        )
        return builder.build()

    rng = random.Random(11)
    events: list[tuple[str, bytes, bytes, int]] = []
    for i in range(200):
        topic = "prices" if i % 4 == 0 else "orders"
        value = rng.randint(1, 50) if topic == "prices" else rng.randint(1, 5)
        events.append(
            (topic, f"item-{rng.randint(0, 4)}".encode(), LONG.serialize(topic, value), 1_000 + i * 10)
        )
    config = {"application.id": "joins"}
    with TopologyTestDriver(topology(), config) as driver:
        inputs = {t: driver.create_input_topic(t, BYTES, BYTES) for t in ("prices", "orders")}
        for topic, key, value, timestamp in events:
            inputs[topic].pipe_input(key, value, timestamp)
        expected = driver.create_output_topic("order-totals", BYTES, BYTES).read_records_to_list()
    frames = {
        topic: spark.createDataFrame(
            [(k, v, t) for name, k, v, t in events if name == topic],
            "key binary, value binary, timestamp long",
        )
        for topic in ("prices", "orders")
    }

    outputs = run_topology(spark, topology(), frames, config)

    # Each order is joined with the price its item had at the order's time, as in the driver.
    assert Counter(_spark_rows(outputs["order-totals"])) == Counter(
        (r.key, r.value, r.timestamp) for r in expected
    )
    assert len(expected) > 100


def test_a_topic_written_and_read_by_the_topology_is_returned_and_feeds_its_reader(spark: Any) -> None:
    def topology() -> Topology:
        builder = StreamsBuilder()
        builder.stream("in", Consumed.with_(STRING, STRING)).map_values(str.upper).to(
            "middle", Produced.with_(STRING, STRING)
        )
        builder.stream("middle", Consumed.with_(STRING, STRING)).to(
            lambda _key, value, _metadata: "long-words" if len(value) > 4 else "short-words",
            Produced.with_(STRING, STRING),
        )
        return builder.build()

    words = ["a", "stream", "of", "records", "on", "spark"]
    df = spark.createDataFrame(
        [(None, w, 1_000 + i) for i, w in enumerate(words)], "key binary, value string, timestamp long"
    )

    outputs = run_topology(spark, topology(), {"in": df})

    def values(topic: str) -> list[str]:
        return sorted(STRING.deserialize(topic, r.value) for r in outputs[topic].collect())

    assert set(outputs) == {"middle", "long-words", "short-words"}
    assert values("middle") == sorted(w.upper() for w in words)
    assert values("long-words") == ["RECORDS", "SPARK", "STREAM"]
    assert values("short-words") == ["A", "OF", "ON"]


def test_a_failing_processor_fails_the_spark_job_naming_the_processor_and_record(spark: Any) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("numbers", Consumed.with_(STRING, STRING))
        .map_values(lambda value: str(100 // int(value)), named="divide")
        .to("quotients", Produced.with_(STRING, STRING))
    )
    df = spark.createDataFrame([("a", "5", 1), ("b", "0", 2)], "key string, value string, timestamp long")

    outputs = run_topology(spark, builder.build(), {"numbers": df})

    with pytest.raises(Exception, match=r"(?s)processor=divide.*topic=numbers.*ZeroDivisionError"):
        outputs["quotients"].collect()


def test_a_streaming_input_is_refused_at_once_naming_run_topology_stream(spark: Any) -> None:
    streaming = spark.readStream.format("rate").load()  # never started: only its kind matters
    static = spark.createDataFrame([(b"k", b"v", 1)], "key binary, value binary, timestamp long")
    with pytest.raises(
        ConfigException, match=r"streaming DataFrames for \['sentences'\].*run_topology_stream"
    ):
        run_topology(spark, _word_count(), {"sentences": streaming, "other": static})
