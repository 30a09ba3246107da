"""Windowed page views: how often each page was viewed in each minute, one final count per minute.

Page views (key: the user, value: JSON like {"page": "/cart", "bot": false}) are filtered (bot
traffic dropped, with a compiled predicate), re-keyed by page, counted in one-minute tumbling
windows that accept records up to 10 seconds late, and suppressed until each window closes, so
``views-per-page-minute`` gets exactly one record per page and minute: the final count.

    python examples/page_views.py                                    # the embedded cluster
    python examples/page_views.py --bootstrap-servers 127.0.0.1:9092 # a Kafka cluster

A window closes when stream time (the largest timestamp seen) passes its end plus the grace, so
the last minute of the input stays open until later records arrive. The input topic has one
partition here, so that one stream time covers every page. The example produces three minutes of
views, prints the final counts and checks them against a count made in plain Python.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

from kstreams import (
    BufferConfig,
    Consumed,
    Grouped,
    KafkaStreams,
    Produced,
    Serdes,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    Topology,
)
from kstreams.cluster import EmbeddedCluster, KafkaCluster
from kstreams.predicates import json_field

INPUT_TOPIC = "page-views"
OUTPUT_TOPIC = "views-per-page-minute"
WINDOW = timedelta(minutes=1)
GRACE = timedelta(seconds=10)
START_MS = 1_700_000_040_000  # a whole minute
PAGES = ["/", "/search", "/cart", "/checkout"]


def build_topology() -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream(INPUT_TOPIC, Consumed.with_(Serdes.string(), Serdes.json()))
        .filter(json_field("bot").eq(False))  # compiled: runs over whole batches without the GIL
        .group_by(lambda _user, view: view["page"], Grouped.with_(Serdes.string(), Serdes.json()))
        .windowed_by(TimeWindows.of_size_and_grace(WINDOW, GRACE))
        .count()
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .map(lambda window, count: (f"{window.key}@{window.start}", count))
        .to(OUTPUT_TOPIC, Produced.with_(Serdes.string(), Serdes.long()))
    )
    return builder.build()


def produce_views(cluster: EmbeddedCluster | KafkaCluster, records: int) -> Counter[str]:
    """Made-up views over three minutes, in time order; returns the count of each closed window."""
    rng = random.Random(7)
    step_ms = 3 * 60_000 // records
    window_ms = int(WINDOW.total_seconds() * 1000)
    counts: Counter[str] = Counter()
    for i in range(records):
        timestamp = START_MS + i * step_ms
        view = {"page": rng.choice(PAGES), "bot": rng.random() < 0.2}
        cluster.produce(
            INPUT_TOPIC, f"user-{rng.randrange(20)}".encode(), json.dumps(view).encode(), timestamp
        )
        if not view["bot"]:
            counts[f"{view['page']}@{timestamp - timestamp % window_ms}"] += 1
    stream_time = START_MS + (records - 1) * step_ms
    grace_ms = int(GRACE.total_seconds() * 1000)
    return Counter(
        {w: n for w, n in counts.items() if int(w.split("@")[1]) + window_ms + grace_ms <= stream_time}
    )


def final_counts(cluster: EmbeddedCluster | KafkaCluster) -> dict[str, int]:
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
    parser.add_argument("--records", type=int, default=2_000, help="page views to produce")
    args = parser.parse_args(argv)

    cluster = KafkaCluster(args.bootstrap_servers) if args.bootstrap_servers else EmbeddedCluster()
    for topic in (INPUT_TOPIC, OUTPUT_TOPIC):
        if topic not in cluster.topics():
            cluster.create_topic(topic, partitions=1)
    if cluster.read(OUTPUT_TOPIC):
        print(f"{OUTPUT_TOPIC} is not empty: run this example on fresh topics", file=sys.stderr)
        return 1
    expected = produce_views(cluster, args.records)

    with tempfile.TemporaryDirectory(prefix="page-views-") as state_dir:
        config = {"application.id": "page-views-example", "state.dir": state_dir, "commit.interval.ms": 100}
        streams = KafkaStreams(build_topology(), config, cluster=cluster)
        streams.start()
        try:
            done = wait_for(lambda: final_counts(cluster) == expected)
        finally:
            streams.close()

    counts = final_counts(cluster)
    for window, count in sorted(counts.items(), key=lambda kv: (kv[0].split("@")[1], kv[0])):
        print(f"{window:26} {count}")
    if not done or len(cluster.read(OUTPUT_TOPIC)) != len(expected):  # one record per window
        print(f"MISMATCH: expected {dict(expected)}", file=sys.stderr)
        return 1
    print(f"OK: {len(counts)} closed windows, one final count each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
