"""A count-per-key KafkaStreams application run as its own OS process by the multi-process tests.

    python tests/integration/streams_worker.py --bootstrap 127.0.0.1:9092 --application-id app \\
        --source in --sink out --state-dir /tmp/w1 --name w1 [--guarantee exactly_once_v2] \\
        [--instance-id w1] [--poison poison --handler SHUTDOWN_APPLICATION]

It counts records per key in a logged store and writes each running count to the sink (string
keys, long counts). It runs until its KafkaStreams reaches ERROR or NOT_RUNNING, or until SIGTERM
(a clean close). The parent follows it through stdout, one line per event, flushed at once:
``STATE <new> <old>`` on every state change and ``FINAL <state>`` as it exits (exit code 0 when
the client closed, 1 if ``close`` timed out). A record whose value equals ``--poison`` makes the
processor raise, and ``--handler`` answers the uncaught exception handler. ``--instance-id`` makes
the main consumer a static group member (KIP-345): a restarted worker with the same id takes the
place of a killed one at once. With ``--report-ms`` it also prints ``PROGRESS <task>=<records> ...``
(records processed per task since it started) and ``TASKS <active task> ... | <standby task> ...``
whenever they changed, every that many ms; and ``RESTORE <partition> <start> <end>`` as a store
begins restoring. Logs go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

# Run by file path from any directory: the repository root holds the kstreams package.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kstreams.client import KafkaStreams, StateRestoreListener, StreamsUncaughtExceptionResponse
from kstreams.cluster.kafka import KafkaCluster
from kstreams.processor import Processor, Record
from kstreams.serdes import Serdes
from kstreams.state import Stores
from kstreams.topology.topology import Topology

__all__ = ["PoisonRecordError", "count_topology", "main"]

logger = logging.getLogger(__name__)

LONG = Serdes.long()
STRING = Serdes.string()
# Fast rebalances on a test broker; Kafka refuses a session timeout under 6 s (group.min.session.timeout.ms).
CLUSTER_CONFIG = {
    "consumer.heartbeat.interval.ms": 100,
    "consumer.session.timeout.ms": 6000,
    "consumer.topic.metadata.refresh.interval.ms": 1000,
    "consumer.max.poll.interval.ms": 10000,
}


class PoisonRecordError(RuntimeError):
    """Raised by the processor for the poison record, to exercise the uncaught exception handler."""


def count_topology(
    source: str,
    sink: str,
    poison: str | None,
    store: str = "in_memory",
    processed: dict[str, int] | None = None,
) -> Topology:
    """Count per key in the logged store ``counts``, forwarding every running count to ``sink``;
    ``processed`` (if given) counts the records each task processed."""

    class CountPerKey(Processor):
        def init(self, context):  # type: ignore[no-untyped-def]
            self.context = context
            self.store = context.get_state_store("counts")

        def process(self, record: Record) -> None:
            if poison is not None and record.value == poison:
                raise PoisonRecordError(
                    f"poison record with key {record.key!r} in task {self.context.task_id}"
                )
            if processed is not None:
                task = str(self.context.task_id)
                processed[task] = processed.get(task, 0) + 1
            count = (self.store.get(record.key) or 0) + 1
            self.store.put(record.key, count)
            self.context.forward(record.with_value(count))

    topology = Topology()
    topology.add_source("src", source, key_deserializer=STRING, value_deserializer=STRING)
    topology.add_processor("count", CountPerKey, "src")
    topology.add_state_store(
        Stores.key_value_store_builder(
            Stores.persistent_key_value_store("counts")
            if store == "rocks_db"
            else Stores.in_memory_key_value_store("counts"),
            STRING,
            LONG,
        ),
        "count",
    )
    topology.add_sink("sink", sink, "count", key_serializer=STRING, value_serializer=LONG)
    return topology


def say(line: str) -> None:
    """One event line for the parent; stdout is a pipe, so flush at once."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--application-id", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--sink", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--name", required=True, help="client.id suffix, to tell the workers apart in logs")
    parser.add_argument(
        "--guarantee", default="exactly_once_v2", choices=["at_least_once", "exactly_once_v2"]
    )
    parser.add_argument("--commit-interval-ms", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--instance-id", default=None, help="group.instance.id of the main consumer")
    parser.add_argument("--poison", default=None, help="a record value that makes the processor raise")
    parser.add_argument("--store", default="in_memory", choices=["in_memory", "rocks_db"])
    parser.add_argument("--standby", type=int, default=0, help="num.standby.replicas")
    parser.add_argument("--probing-ms", type=int, default=600000, help="probing.rebalance.interval.ms")
    parser.add_argument("--acceptable-lag", type=int, default=10000, help="acceptable.recovery.lag")
    parser.add_argument("--report-ms", type=int, default=0, help="print PROGRESS and TASKS this often")
    parser.add_argument(
        "--handler",
        default="SHUTDOWN_CLIENT",
        choices=[r.value for r in StreamsUncaughtExceptionResponse],
        help="the uncaught exception handler's response",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format=f"%(asctime)s {args.name} %(levelname)s %(name)s %(threadName)s: %(message)s",
    )
    cluster = KafkaCluster(args.bootstrap, CLUSTER_CONFIG)
    config = {
        "application.id": args.application_id,
        "client.id": f"{args.application_id}-{args.name}",
        "num.stream.threads": args.threads,
        "commit.interval.ms": args.commit_interval_ms,
        "session.timeout.ms": 6000,
        "processing.guarantee": args.guarantee,
        "state.dir": args.state_dir,
        # A killed worker leaves its transaction open; the broker aborts it after this timeout, and
        # until then read_committed readers (the survivor's restore consumer among them) wait.
        "producer.transaction.timeout.ms": 10000,
        "num.standby.replicas": args.standby,
        "probing.rebalance.interval.ms": args.probing_ms,
        "acceptable.recovery.lag": args.acceptable_lag,
    }
    if args.instance_id is not None:
        config["main.consumer.group.instance.id"] = args.instance_id
    processed: dict[str, int] | None = {} if args.report_ms else None
    topology = count_topology(args.source, args.sink, args.poison, args.store, processed)
    streams = KafkaStreams(topology, config, cluster=cluster)
    streams.set_global_state_restore_listener(_RestoreReporter())
    response = StreamsUncaughtExceptionResponse(args.handler)

    def on_exception(exc: BaseException) -> StreamsUncaughtExceptionResponse:
        logger.error("Uncaught exception, answering %s: %s", response.value, exc)
        return response

    finished = threading.Event()
    terminal = {KafkaStreams.State.ERROR, KafkaStreams.State.NOT_RUNNING}

    def on_state(new: KafkaStreams.State, old: KafkaStreams.State) -> None:
        say(f"STATE {new.name} {old.name}")
        if new in terminal:
            finished.set()

    streams.set_uncaught_exception_handler(on_exception)
    streams.set_state_listener(on_state)
    # SIGTERM asks for a clean close from the main thread (signal handlers only set the event).
    signal.signal(signal.SIGTERM, lambda signum, frame: finished.set())
    streams.start()
    say(f"STARTED {os.getpid()} {streams.process_id}")
    if processed is not None:
        threading.Thread(
            target=_report, args=(streams, processed, args.report_ms / 1000, finished), daemon=True
        ).start()
    finished.wait()
    closed = streams.close(timeout=30)
    cluster.close()
    say(f"FINAL {streams.state.name}")
    return 0 if closed else 1


class _RestoreReporter(StateRestoreListener):
    def on_restore_start(self, topic_partition, store_name, starting_offset, ending_offset):  # type: ignore[no-untyped-def]
        say(f"RESTORE {topic_partition} {starting_offset} {ending_offset}")


def _report(
    streams: KafkaStreams, processed: dict[str, int], interval: float, finished: threading.Event
) -> None:
    """Print what changed every ``interval`` seconds: records processed per task, running tasks."""
    last_progress, last_tasks = "", ""
    while not finished.wait(interval):
        progress = " ".join(f"{t}={n}" for t, n in sorted(dict(processed).items()))
        threads = streams.metadata_for_local_threads()
        active = sorted(t for m in threads for t in m.active_tasks)
        standby = sorted(t for m in threads for t in m.standby_tasks)
        tasks = " ".join(active) + " | " + " ".join(standby)
        if progress != last_progress:
            say(f"PROGRESS {time.monotonic():.3f} {progress}")
            last_progress = progress
        if tasks != last_tasks:
            say(f"TASKS {tasks}")
            last_tasks = tasks


if __name__ == "__main__":
    sys.exit(main())
