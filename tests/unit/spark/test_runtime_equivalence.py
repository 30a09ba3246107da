"""The final aggregates of a topology on Spark equal those of the streaming runtime (KafkaStreams
with stream threads on the EmbeddedCluster) over the same records."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from kstreams import Consumed, Grouped, KafkaStreams, Produced, Serdes, StreamsBuilder, Topology
from kstreams.spark import run_topology
from tests.support.waiting import wait_until

pytestmark = pytest.mark.spark

STRING = Serdes.string()
LONG = Serdes.long()


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


def test_word_count_on_spark_equals_the_streaming_runtime(
    spark: Any, embedded_cluster: Any, tmp_path: Path
) -> None:
    rng = random.Random(5)
    vocabulary = ["alpha", "beta", "gamma", "delta", "epsilon"]
    records = [
        (f"doc-{i % 11}".encode(), " ".join(rng.choices(vocabulary, k=rng.randint(1, 5))).encode(), 1_000 + i)
        for i in range(500)
    ]
    total_words = sum(len(value.split()) for _key, value, _ts in records)
    embedded_cluster.create_topic("sentences", 3)
    embedded_cluster.create_topic("word-counts", 3)
    for key, value, timestamp in records:
        embedded_cluster.produce("sentences", key, value, timestamp=timestamp)

    def streamed() -> dict[bytes, bytes]:
        return {r.key: r.value for r in embedded_cluster.read("word-counts")}

    config = {"application.id": "wc-equivalence", "commit.interval.ms": 100, "num.stream.threads": 2}
    streams = KafkaStreams(_word_count(), {**config, "state.dir": str(tmp_path)}, cluster=embedded_cluster)
    streams.start()
    try:
        wait_until(
            lambda: sum(LONG.deserialize("t", v) for v in streamed().values()) == total_words,
            60,
            f"the streaming runtime to count all {total_words} words",
        )
    finally:
        streams.close(timeout=30)

    df = spark.createDataFrame(records, "key binary, value binary, timestamp long").repartition(2)
    outputs = run_topology(spark, _word_count(), {"sentences": df}, config)

    on_spark = {r.key: r.value for r in outputs["word-counts"].collect()}
    assert on_spark == streamed()
