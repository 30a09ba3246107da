"""Word count: lines of text in, the running count of every word out.

The "hello world" of Kafka Streams (Apache Kafka's WordCountDemo), in kstreams. The lines are split
into lower-cased words, re-keyed by word (a repartition topic), counted in a state store backed by
a changelog topic, and every updated count is written to ``word-counts``.

    python examples/word_count.py                                    # the embedded cluster
    python examples/word_count.py --bootstrap-servers 127.0.0.1:9092 # a Kafka cluster

It produces a few lines to ``lines``, runs the application until every count is out, prints the
final counts and checks them against a count made in plain Python (exit code 1 if they differ).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable

from kstreams import Consumed, Grouped, KafkaStreams, Materialized, Produced, Serdes, StreamsBuilder, Topology
from kstreams.cluster import EmbeddedCluster, KafkaCluster

INPUT_TOPIC = "lines"
OUTPUT_TOPIC = "word-counts"
LINES = [
    "all streams lead to kafka",
    "hello kafka streams",
    "join kafka summit",
    "to be or not to be",
]


def build_topology() -> Topology:
    """Lines (any key, string value) -> the count of every word (key: the word, value: a long)."""
    builder = StreamsBuilder()
    (
        builder.stream(INPUT_TOPIC, Consumed.with_(Serdes.string(), Serdes.string()))
        .flat_map_values(lambda line: line.lower().split())
        .group_by(lambda _key, word: word, Grouped.with_(Serdes.string(), Serdes.string()))
        .count(Materialized.as_("word-counts-store"))
        .to_stream()
        .to(OUTPUT_TOPIC, Produced.with_(Serdes.string(), Serdes.long()))
    )
    return builder.build()


def latest_counts(cluster: EmbeddedCluster | KafkaCluster) -> dict[str, int]:
    """The last count written for each word (a later record of a key replaces an earlier one)."""
    return {r.key.decode(): int.from_bytes(r.value, "big", signed=True) for r in cluster.read(OUTPUT_TOPIC)}


def wait_for(condition: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", help="a Kafka cluster (default: the embedded cluster)")
    args = parser.parse_args(argv)

    cluster = KafkaCluster(args.bootstrap_servers) if args.bootstrap_servers else EmbeddedCluster()
    for topic in (INPUT_TOPIC, OUTPUT_TOPIC):
        if topic not in cluster.topics():
            cluster.create_topic(topic, partitions=2)
    for i, line in enumerate(LINES):
        cluster.produce(INPUT_TOPIC, f"line-{i}".encode(), line.encode())
    # Every line in the topic, earlier runs' too on a Kafka cluster (their counts are restored).
    lines = [r.value.decode() for r in cluster.read(INPUT_TOPIC)]
    expected = Counter(word for line in lines for word in line.lower().split())

    with tempfile.TemporaryDirectory(prefix="word-count-") as state_dir:
        config = {
            "application.id": "word-count-example",
            "state.dir": state_dir,
            # Counts are cached and written out at each commit: commit often for a quick demo.
            "commit.interval.ms": 100,
        }
        streams = KafkaStreams(build_topology(), config, cluster=cluster)
        streams.start()
        try:
            done = wait_for(lambda: latest_counts(cluster) == expected)
        finally:
            streams.close()

    counts = latest_counts(cluster)
    for word, count in sorted(counts.items()):
        print(f"{word:8} {count}")
    if not done:
        print(f"MISMATCH: expected {dict(expected)}", file=sys.stderr)
        return 1
    print(f"OK: {sum(expected.values())} words counted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
