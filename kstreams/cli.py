"""The ``kstreams`` command.

``kstreams reset``, ``kstreams describe`` and ``kstreams run`` are the operating tools (see
``kstreams.tools.commands``). ``kstreams demo`` runs a realistic pipeline on the embedded cluster:
page views are generated, filtered (bot traffic dropped), counted per user in total and per user
in one-minute windows, and the results are checked against counts computed independently in plain
Python.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence

from kstreams.tools.commands import add_commands, run_command

__all__ = ["main"]

logger = logging.getLogger(__name__)

WINDOW_MS = 60_000
BOT_SHARE = 0.1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kstreams", description="Kafka Streams for Python.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the page-view counting demo on the embedded cluster")
    demo.add_argument("--records", type=int, default=200_000, help="page views to generate")
    demo.add_argument("--threads", type=int, default=2, help="stream threads")
    demo.add_argument("--users", type=int, default=1_000, help="distinct users")
    demo.add_argument("--partitions", type=int, default=4, help="partitions of the input topic")
    demo.add_argument("--metrics", action="store_true", help="print the client's metrics at the end")
    demo.add_argument("--log-level", default="WARNING")
    add_commands(sub)  # reset, describe, run
    args = parser.parse_args(argv)
    code = run_command(args)
    if code is not None:
        return code
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "demo":
        return run_demo(args.records, args.threads, args.users, args.partitions, args.metrics)
    return 2


def build_topology():  # type: ignore[no-untyped-def]
    """Page views (key user, JSON value) -> non-bot views counted per user, in total and per minute."""
    from kstreams import Consumed, Grouped, Materialized, Produced, Serdes, StreamsBuilder, TimeWindows
    from kstreams.predicates import json_field

    builder = StreamsBuilder()
    views = builder.stream("pageviews", Consumed.with_(Serdes.string(), Serdes.json()))
    # A predicate from kstreams.predicates runs compiled over whole batches (a lambda would work too).
    humans = views.filter(json_field("bot").eq(False))
    per_user = humans.group_by_key(Grouped.with_(Serdes.string(), Serdes.json()))
    (
        per_user.count(Materialized.as_("views-per-user"))
        .to_stream()
        .to("views-per-user", Produced.with_(Serdes.string(), Serdes.long()))
    )
    (
        per_user.windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_MS))
        .count(Materialized.as_("views-per-user-minute"))
        .to_stream()
        .map(lambda wk, count: (f"{wk.key}@{wk.start}", count))
        .to("views-per-user-minute", Produced.with_(Serdes.string(), Serdes.long()))
    )
    return builder.build()


def generate(records: int, users: int, partitions: int, seed: int = 7):  # type: ignore[no-untyped-def]
    """Per-partition batches of page views, and the exact expected counts."""
    from kstreams._native.record_batch import RecordBatch, default_partition

    rng = random.Random(seed)
    start = 1_700_000_000_000
    columns: dict[int, tuple[list[bytes], list[bytes], list[int]]] = {
        p: ([], [], []) for p in range(partitions)
    }
    totals: Counter[str] = Counter()
    windows: Counter[str] = Counter()
    pages = ["/", "/search", "/cart", "/checkout", "/product", "/help"]
    for i in range(records):
        user = f"user-{rng.randrange(users):05d}"
        ts = start + i * 3  # ~5.5 minutes of traffic per 100k views
        bot = rng.random() < BOT_SHARE
        value = json.dumps({"page": rng.choice(pages), "bot": bot, "ms": rng.randrange(1, 900)}).encode()
        key = user.encode()
        keys, values, stamps = columns[default_partition(key, partitions)]
        keys.append(key)
        values.append(value)
        stamps.append(ts)
        if not bot:
            totals[user] += 1
            windows[f"{user}@{ts - ts % WINDOW_MS}"] += 1
    batches = {p: RecordBatch.from_columns(k, v, t, p) for p, (k, v, t) in columns.items() if k}
    return batches, totals, windows


def run_demo(records: int, threads: int, users: int, partitions: int, show_metrics: bool) -> int:
    from kstreams import KafkaStreams
    from kstreams.cluster import EmbeddedCluster

    cluster = EmbeddedCluster()
    cluster.create_topic("pageviews", partitions)
    cluster.create_topic("views-per-user", partitions)
    cluster.create_topic("views-per-user-minute", partitions)
    print(f"Generating {records:,} page views from {users:,} users ...", file=sys.stderr)
    batches, totals, windows = generate(records, users, partitions)
    producer = cluster.producer()
    for partition, batch in batches.items():
        producer.send("pageviews", partition, batch)
    producer.flush()

    with tempfile.TemporaryDirectory(prefix="kstreams-demo-") as state_dir:
        streams = KafkaStreams(
            build_topology(),
            {
                "application.id": "pageview-demo",
                "num.stream.threads": threads,
                "state.dir": state_dir,
                "commit.interval.ms": 1000,
            },
            cluster=cluster,
        )
        started = time.monotonic()
        streams.start()
        _progress(streams, records, started)
        streams.close(timeout=60)
        elapsed = time.monotonic() - started
        if show_metrics:
            for name, value in sorted(streams.metrics().items(), key=lambda kv: (kv[0].group, kv[0].name)):
                print(f"{name.group:28} {name.name:32} {dict(name.tags)} {value:.3f}")

    ok = _check(cluster, totals, windows)
    print(
        f"Processed {records:,} records in {elapsed:.2f}s with {threads} thread(s): "
        f"{records / elapsed:,.0f} records/s",
        file=sys.stderr,
    )
    print("Result check: " + ("exact" if ok else "MISMATCH"), file=sys.stderr)
    return 0 if ok else 1


def _processed(streams) -> int:  # type: ignore[no-untyped-def]
    return int(
        sum(
            v
            for m, v in streams.metrics().items()
            if m.name == "process-total" and m.group == "stream-thread-metrics"
        )
    )


def _progress(streams, records: int, started: float) -> None:  # type: ignore[no-untyped-def]
    """Draw a progress bar until every input record was processed (processed counts can only grow,
    and removed threads drop their metrics, so the maximum seen is what counts)."""
    seen = 0
    deadline = started + max(60.0, records / 2_000)
    while time.monotonic() < deadline:
        seen = max(seen, _processed(streams))
        done = min(seen, records)
        width = 40
        filled = width * done // records
        rate = done / max(time.monotonic() - started, 1e-9)
        print(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done:,}/{records:,} ({rate:,.0f} records/s)",
            end="",
            file=sys.stderr,
            flush=True,
        )
        if seen >= records:
            break
        streams.wait_for_state(streams.State.ERROR, streams.State.NOT_RUNNING, timeout=0.2)
        if streams.state in (streams.State.ERROR, streams.State.NOT_RUNNING):
            break
    print(file=sys.stderr)


def _check(cluster, totals: Counter[str], windows: Counter[str]) -> bool:  # type: ignore[no-untyped-def]
    final_totals = {
        r.key.decode(): int.from_bytes(r.value, "big", signed=True) for r in cluster.read("views-per-user")
    }
    final_windows = {
        r.key.decode(): int.from_bytes(r.value, "big", signed=True)
        for r in cluster.read("views-per-user-minute")
    }
    ok = True
    if final_totals != dict(totals):
        wrong = sum(1 for u in totals if final_totals.get(u) != totals[u])
        print(f"Total counts differ for {wrong} users", file=sys.stderr)
        ok = False
    if final_windows != dict(windows):
        wrong = sum(1 for w in windows if final_windows.get(w) != windows[w])
        print(f"Windowed counts differ for {wrong} user-minutes", file=sys.stderr)
        ok = False
    return ok


if __name__ == "__main__":
    sys.exit(main())
