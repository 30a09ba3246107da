"""Run an application until it is told to stop: what ``kstreams run`` does.

``run_application`` starts a KafkaStreams client for a topology and configuration, reports
progress, and closes the client when SIGINT or SIGTERM arrives (or ``stop`` is set, or the client
stops by itself). Progress is records processed per second and in total, and the input lag of the
application's consumer group (the committed offsets' distance from the input topics' ends, asked
of the cluster's admin every few seconds; Kafka Streams' own metrics carry no lag). On a terminal
it is one line redrawn in place; otherwise it is an INFO log line every ``log_interval`` seconds.

Exit codes: 0 when the client shut down cleanly (NOT_RUNNING), 1 when it ended in ERROR or did not
finish closing within ``close_timeout``.

Threads: the caller's thread waits on ``stop`` (a ``threading.Event``) with a timeout between
progress updates; signal handlers only set that event. Handlers are installed only when called
from the main thread (Python delivers signals there) and the previous ones are restored at the end.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Mapping
from types import FrameType
from typing import Any, TextIO

from kstreams.client import KafkaStreams, State
from kstreams.cluster.port import Cluster, ClusterError, TopicPartition
from kstreams.topology.description import SourceDescription
from kstreams.topology.topology import Topology

__all__ = ["EXIT_ERROR", "EXIT_OK", "Progress", "run_application", "source_topics"]

logger = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_ERROR = 1
LAG_REFRESH_SECONDS = 5.0


class Progress:
    """Processed-record rate and input lag of one running client."""

    def __init__(self, streams: KafkaStreams, clock: Any = time.monotonic) -> None:
        self._streams = streams
        self._clock = clock
        self._started = clock()
        self._last_time = self._started
        self._last_total = 0
        self._best_total = 0
        self._lag: int | None = None
        self._lag_time = float("-inf")

    def processed(self) -> int:
        """Records processed so far (the maximum seen: removed threads take their counts along)."""
        total = int(
            sum(
                value
                for metric, value in self._streams.metrics().items()
                if metric.name == "process-total" and metric.group == "stream-thread-metrics"
            )
        )
        self._best_total = max(self._best_total, total)
        return self._best_total

    def lag(self, input_topics: list[str]) -> int | None:
        """Total input lag of the application's group, refreshed at most every few seconds; None
        when it cannot be known (no input topics, or the cluster did not answer)."""
        now = self._clock()
        if now - self._lag_time < LAG_REFRESH_SECONDS:
            return self._lag
        self._lag_time = now
        try:
            admin = self._streams.cluster.admin()
            described = admin.describe_topics(input_topics)
            partitions = [TopicPartition(t, p) for t, d in described.items() for p in range(d.partitions)]
            if not partitions:
                self._lag = None
                return None
            bounds = admin.list_offsets(partitions)
            committed = admin.committed_offsets(self._streams.config.application_id, partitions)
            self._lag = sum(max(end - committed.get(tp, start), 0) for tp, (start, end) in bounds.items())
        except ClusterError as exc:
            logger.debug("Could not compute the input lag: %s", exc)
            self._lag = None
        return self._lag

    def line(self, input_topics: list[str]) -> str:
        now = self._clock()
        total = self.processed()
        rate = (total - self._last_total) / max(now - self._last_time, 1e-9)
        self._last_total, self._last_time = total, now
        lag = self.lag(input_topics)
        lag_text = f", input lag {lag:,}" if lag is not None else ""
        state = self._streams.state.name
        return f"{state}: {total:,} records processed ({rate:,.0f} records/s){lag_text}"


def run_application(
    topology: Topology,
    config: Mapping[str, Any],
    *,
    cluster: Cluster | None = None,
    input_topics: list[str] | None = None,
    stop: threading.Event | None = None,
    out: TextIO | None = None,
    interval: float = 1.0,
    log_interval: float = 10.0,
    close_timeout: float = 60.0,
) -> int:
    """Run ``topology`` with ``config`` until SIGINT/SIGTERM, ``stop``, or the client stops; return
    EXIT_OK or EXIT_ERROR (see the module docstring). ``input_topics`` (for the lag) defaults to
    the topology's source topics."""
    stop = stop or threading.Event()
    out = out or sys.stderr
    streams = KafkaStreams(topology, config, cluster=cluster)
    if input_topics is None:
        input_topics = source_topics(topology)
    progress = Progress(streams)
    tty = _is_tty(out)
    previous = _install_signal_handlers(stop)
    try:
        streams.set_state_listener(
            lambda new, old: stop.set() if new in (State.ERROR, State.NOT_RUNNING) else None
        )
        logger.info("Starting application %s (client %s)", streams.config.application_id, streams.client_id)
        try:
            streams.start()
        except Exception as exc:
            # start() failed synchronously (missing source topics, a port in use, ...): the client
            # is in ERROR already; the close below is a no-op and the exit code reports it.
            logger.error("The application could not start: %s", exc)
            return EXIT_ERROR
        if streams.metrics_url:
            print(f"Metrics at {streams.metrics_url}", file=out, flush=True)
        last_log = time.monotonic()
        while not stop.wait(interval):
            text = progress.line(input_topics)
            if tty:
                print(f"\r\x1b[2K{text}", end="", file=out, flush=True)
            elif time.monotonic() - last_log >= log_interval:
                last_log = time.monotonic()
                logger.info("%s", text)
        if tty:
            print(file=out, flush=True)
    finally:
        _restore_signal_handlers(previous)
        if streams.state not in (State.NOT_RUNNING, State.ERROR):
            logger.info("Stopping application %s", streams.config.application_id)
        closed = streams.close(timeout=close_timeout)
    final = progress.processed()
    if not closed:
        logger.error("The client did not finish closing within %.0fs", close_timeout)
        return EXIT_ERROR
    if streams.state is State.ERROR:
        logger.error("The application stopped with an error after %d records; see the log above", final)
        return EXIT_ERROR
    logger.info("Application %s stopped cleanly after %d records", streams.config.application_id, final)
    return EXIT_OK


def source_topics(topology: Topology) -> list[str]:
    # Source topics of the described topology; repartition topics appear under their short name
    # and are not found on the cluster, so they drop out of the lag.
    return sorted(
        {
            topic
            for sub in topology.describe().subtopologies
            for node in sub.nodes
            if isinstance(node, SourceDescription)
            for topic in node.topic_set
            if not topic.endswith("-repartition")
        }
    )


def _is_tty(out: TextIO) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):
        return False


_Handler = Any  # what signal.signal returns: a callable, an int, or None


def _install_signal_handlers(stop: threading.Event) -> dict[int, _Handler]:
    if threading.current_thread() is not threading.main_thread():
        return {}

    def handle(signum: int, _frame: FrameType | None) -> None:
        # Only set the event: close() runs on the main thread once the wait wakes.
        logger.info("Received %s: shutting down", signal.Signals(signum).name)
        stop.set()

    previous: dict[int, _Handler] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, handle)
    return previous


def _restore_signal_handlers(previous: dict[int, _Handler]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
