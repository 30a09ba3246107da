"""The runtime of one KafkaStreams client: its parts, wired once, started and stopped together.

A ``StreamsRuntime`` owns the cluster clients (main consumer, restore consumer, producer), the
task scheduler, the record collector, the task manager, the committer, the restore thread (the
state updater), the polling thread and the stream threads with their record caches
(``StreamThreads``). The client keeps what is policy: the state machine, the uncaught exception
handler, and when threads may be added or removed.

Threads: built and started by the thread that calls ``KafkaStreams.start()``; stopped by the
client's close thread, stream threads first. Its parts document their own locks.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

from kstreams._native.per_record import OutputPartitionCounts
from kstreams._native.scheduler import TaskScheduler
from kstreams.cluster.port import Consumer, Producer, TopicNotFoundError
from kstreams.config import StreamsConfig
from kstreams.metrics import Sensor
from kstreams.processing.record_collector import RecordCollector
from kstreams.runtime.assignment.streams_assignor import StreamsAssignor
from kstreams.runtime.client_parts import ClientParts
from kstreams.runtime.internal_topics.repartition_purge import RepartitionPurger
from kstreams.runtime.queries.metrics_endpoint import MetricsEndpoint
from kstreams.runtime.queries.query_endpoint import StoreQueries
from kstreams.runtime.restoration.global_state import GlobalStreamThread
from kstreams.runtime.restoration.state_updater import StateUpdater
from kstreams.runtime.retry import Retry, time_left
from kstreams.runtime.tasks.commit import Committer
from kstreams.runtime.tasks.task_manager import TaskEntry, TaskManager
from kstreams.runtime.threads.polling_parts import PollingParts, ProducerRenewal, RuntimeHooks
from kstreams.runtime.threads.polling_thread import PollingThread
from kstreams.runtime.threads.stream_thread import StreamThread
from kstreams.runtime.threads.stream_threads import StreamThreads
from kstreams.state.restore_listener import StateRestoreListener

__all__ = ["BACKLOG_PARTITION_FETCH_BYTES", "PRODUCER_LINGER_MS", "StreamsRuntime"]

logger = logging.getLogger(__name__)


class StreamsRuntime:
    """Every part the stream threads work with (see the module docstring)."""

    def __init__(
        self,
        parts: ClientParts,
        config: StreamsConfig,
        hooks: RuntimeHooks,
        on_stream_failure: Callable[[StreamThread, int, BaseException, bool], None],
        on_restore_failure: Callable[[TaskEntry | None, BaseException], None],
        task_sensor: Callable[[Any], Sensor],
        restore_listener: StateRestoreListener | None,
    ) -> None:
        app_id = config.application_id
        client_id, process_id, plan = parts.client_id, parts.process_id, parts.plan
        cluster, admin, metrics = parts.cluster, parts.admin, parts.metrics
        internal_topics = parts.internal_topics
        self.config = config
        self.metrics = metrics
        self.source_topics = list(plan.all_source_topics)
        self._admin = admin
        self._cluster = cluster
        self._client_id = client_id
        self._queries = parts.queries
        # Serves the client's metrics over HTTP from start() to stop() (metrics.http.port).
        self._metrics_endpoint: MetricsEndpoint | None = None
        # Partitions of the topics the application writes to, cached until the next assignment
        # (which clears them).
        self.partition_count = OutputPartitionCounts(self._describe_partition_count)
        consumer_config = dict(config.client_configs("main.consumer"))
        consumer_config.setdefault("client.id", f"{client_id}-consumer")
        consumer_config.setdefault("session.timeout.ms", config["session.timeout.ms"])
        consumer_config.setdefault("auto.offset.reset", config["auto.offset.reset"])
        # Kafka's metadata.max.age.ms is librdkafka's topic metadata refresh (how soon source
        # topics' new partitions are noticed); the embedded consumer's metadata is always current.
        consumer_config.setdefault("topic.metadata.refresh.interval.ms", config["metadata.max.age.ms"])
        restore_config = dict(config.client_configs("restore.consumer"))
        restore_config.setdefault("client.id", f"{client_id}-restore-consumer")
        _default_setting(restore_config, _FETCH_SIZE, BACKLOG_PARTITION_FETCH_BYTES)
        producer_config = dict(config.client_configs("producer"))
        producer_config.setdefault("client.id", f"{client_id}-producer")
        _default_setting(producer_config, _LINGER, PRODUCER_LINGER_MS)
        if config.exactly_once:
            consumer_config["isolation.level"] = "read_committed"
            restore_config["isolation.level"] = "read_committed"
            producer_config["transactional.id"] = f"{app_id}-{process_id}"
            # Kafka Streams' exactly-once producer default (librdkafka's is 60 s): the broker aborts
            # a crashed instance's open transaction within 10 s, and read_committed readers of its
            # partitions (the instance taking its tasks over) wait no longer than that.
            producer_config.setdefault("transaction.timeout.ms", 10000)
        self.consumer: Consumer = cluster.consumer(app_id, consumer_config)
        restore_consumer = cluster.consumer(None, restore_config)
        self._producer = ProducerRenewal.of(cluster, producer_config)
        try:
            if config["internal.topics.setup"] != "manual":
                # Create the internal topics before subscribing, so the first assignment covers
                # them. In manual mode nothing is created: the first assignment checks them and a
                # missing or misconfigured one reaches the uncaught exception handler.
                internal_topics.setup_for_rebalance()
        except BaseException:
            for client in (self.consumer, restore_consumer, self.producer):
                _close_quietly(client)
            raise

        self.scheduler = TaskScheduler()
        collector = self.collector = RecordCollector()
        state_dir = os.path.join(str(config["state.dir"]), app_id)
        self.task_manager = TaskManager(
            plan,
            config,
            collector,
            self.scheduler,
            self.partition_count,
            state_dir,
            metrics=metrics,
            client_id=client_id,
        )
        polling_name = f"{client_id}-PollingThread"
        tags = {"thread-id": polling_name}
        retry = self.retry = Retry.from_config(config)
        self.committer = Committer(
            self.scheduler,
            self.task_manager,
            collector,
            self.consumer,
            self.producer,
            app_id,
            config.exactly_once,
            metrics.sensor("commit", "stream-thread-metrics", tags),
            metrics.sensor(
                "commit-latency", "stream-thread-metrics", tags, total=False, rate=False, avg=True, max_=True
            ),
            retry,
        )
        self.purger = RepartitionPurger(
            admin,
            (topic for sub in plan.subtopologies for topic in sub.repartition_source_topics),
            int(config["repartition.purge.interval.ms"]),
            f"{client_id}-RepartitionPurger",
        )
        self.state_updater = StateUpdater(
            f"{client_id}-RestoreThread",
            restore_consumer,
            on_restored=lambda entry: self.polling.restored(entry),
            on_failure=on_restore_failure,
            metrics=metrics,
            admin=admin,
        )
        if restore_listener is not None:
            self.state_updater.listener = restore_listener
        # Global stores: a thread of their own with a group-less consumer of every partition of
        # the global topics (kstreams/runtime/restoration/global_state.py says why not the state updater).
        self.global_thread: GlobalStreamThread | None = None
        if plan.global_subtopologies:
            global_config = dict(config.client_configs("global.consumer"))
            global_config.setdefault("client.id", f"{client_id}-global-consumer")
            _default_setting(global_config, _FETCH_SIZE, BACKLOG_PARTITION_FETCH_BYTES)
            if config.exactly_once:
                global_config["isolation.level"] = "read_committed"
            self.global_thread = GlobalStreamThread(
                f"{client_id}-GlobalStreamThread",
                plan,
                config,
                cluster.consumer(None, global_config),
                admin,
                state_dir,
                on_failure=lambda exc: on_restore_failure(None, exc),
                metrics=metrics,
                client_id=client_id,
            )
            self.global_thread.listener = restore_listener
            self.task_manager.global_stores = self.global_thread.stores
        # Before any stream thread exists the configured count is what this client offers.
        configured_threads = int(config["num.stream.threads"])
        self.assignor = StreamsAssignor(
            str(process_id),
            config,
            plan,
            self.task_manager,
            self.state_updater,
            admin,
            lambda: len(self.stream_threads.live()) or configured_threads,
            metrics,
        )
        self.polling = PollingThread(
            polling_name,
            PollingParts(
                config,
                self.consumer,
                self._producer,
                collector,
                self.scheduler,
                self.task_manager,
                self.state_updater,
                self.committer,
                self.purger,
                self.assignor,
                retry,
                metrics,
                self.partition_count,
                self.source_topics,
            ),
            hooks,
        )
        self.stream_threads = StreamThreads(
            client_id,
            config,
            self.scheduler,
            self.task_manager,
            metrics,
            self.polling,
            on_stream_failure,
            task_sensor,
        )

    def start(self, render_metrics: Callable[[], str], store_queries: StoreQueries) -> None:
        """Bootstrap the global stores (blocking, as Kafka's GlobalStreamThread.start) and start
        the global thread; then the restore thread, the polling thread and ``num.stream.threads``
        stream threads, so no task processes before the global stores are complete; then the
        metrics endpoint (``render_metrics`` over HTTP) and the interactive queries' channel and
        endpoint (answering with ``store_queries``)."""
        if self.global_thread is not None:
            self.global_thread.bootstrap()
            self.global_thread.start()
        self.state_updater.start()
        self.polling.start()
        self.stream_threads.start(int(self.config["num.stream.threads"]))
        port = self.config["metrics.http.port"]
        if port is not None:
            self._metrics_endpoint = MetricsEndpoint(
                render_metrics,
                str(self.config["metrics.http.host"]),
                int(port),
                f"{self._client_id}-MetricsEndpoint",
            )
            self._metrics_endpoint.start()
        self._queries.start(self.consumer, self.task_manager, self.state_updater, store_queries)

    @property
    def metrics_url(self) -> str | None:
        """Where the metrics endpoint serves while it runs, else None."""
        endpoint = self._metrics_endpoint
        return endpoint.url if endpoint is not None else None

    def threads(self) -> list[Any]:
        """Every thread of the runtime (stream threads not yet pruned, the polling and restore threads)."""
        threads = [*self.stream_threads.all(), self.polling, self.state_updater]
        return threads + ([self.global_thread] if self.global_thread is not None else [])

    @property
    def producer(self) -> Producer:
        """The current producer (a fatal error replaces it, see ``ProducerRenewal``)."""
        return self._producer.current

    def _describe_partition_count(self, topic: str) -> int:
        found = self._admin.describe_topics([topic])
        if topic not in found:
            raise TopicNotFoundError(
                f"Topic {topic} does not exist: create it before the application writes to it."
            )
        return found[topic].partitions

    def stop(self, deadline: float | None) -> bool:
        """Stop the stream threads; then the polling thread commits and closes every task and
        leaves the group, the restore thread stops and the clients close. The endpoints and the
        metadata channel stop first, so the channel never reports tasks that are being closed as if
        they were still served. True if every thread stopped before the deadline (monotonic; None
        waits for ever)."""
        if self._metrics_endpoint is not None:
            self._metrics_endpoint.stop()
        self._queries.stop()
        ok = self.stream_threads.stop(deadline)
        self.scheduler.shutdown()
        polling = self.polling
        if polling.is_alive():
            polling.request_stop()
            polling.join(time_left(deadline))
            ok = ok and not polling.is_alive()
        if not polling.closed_cleanly and not polling.is_alive():
            self.task_manager.close_all(clean=False)
        if self.state_updater.is_alive():
            self.state_updater.shutdown()
            self.state_updater.join(time_left(deadline))
            ok = ok and not self.state_updater.is_alive()
        if not polling.is_alive():
            self.purger.close()
            for client in (self.consumer, self.producer):
                _close_quietly(client)
        ok = self._stop_global_thread(deadline) and ok
        return ok

    def _stop_global_thread(self, deadline: float | None) -> bool:
        """Stop the global thread last (stream threads read its stores until they stop); it
        checkpoints and closes its stores and consumer."""
        thread = self.global_thread
        if thread is None:
            return True
        thread.shutdown()
        if thread.is_alive():
            thread.join(time_left(deadline))
            return not thread.is_alive()
        if thread.ident is None:
            thread.close_unstarted()  # bootstrapped (or failed) but never started
        return True

    def abandon(self) -> None:
        """Stop where it is, as a crashed process would (tests only): nothing is committed,
        closed or left. Its endpoints go too, as a dead process's port would."""
        if self._metrics_endpoint is not None:
            self._metrics_endpoint.stop()
        self._queries.stop()
        self.purger.close()
        self.stream_threads.stop(time.monotonic() + 30.0)
        if self.polling.is_alive():
            self.polling.abandon()
            self.polling.join(30.0)
        if self.state_updater.is_alive():
            self.state_updater.shutdown()
            self.state_updater.join(30.0)
        if self.global_thread is not None and self.global_thread.is_alive():
            self.global_thread.shutdown()
            self.global_thread.join(30.0)


# Per partition and fetch request, for the consumers that read changelogs and global topics from
# their start (librdkafka's default is 1 MB). With 1 MB fetches the restore thread waited on the
# fetch queue in half its samples (py-spy --idle, bench/e2e_large_state.py, 10,000 keys); with 16 MB
# it restored 145k -> 269k records/s there, 126k -> 195k with 200,000 keys. Memory stays bounded by
# librdkafka's fetch.max.bytes (50 MB a request) and queued.max.messages.kbytes (64 MB queued).
BACKLOG_PARTITION_FETCH_BYTES = 16 << 20
_FETCH_SIZE = ("max.partition.fetch.bytes", "fetch.message.max.bytes")


# How long the producer lets a batch fill (librdkafka's default, and Java's since Kafka 4.0). Kafka
# Streams sets 100 ms, counting on Java's 16 KB batches shipping as they fill; librdkafka's batches
# hold up to 1 MB, so at moderate rates a 100 ms linger held nearly every record for all of it:
# bench/e2e_latency.py's p99 at half load was 2.6-3.8x Kafka Streams', p50 ~60 ms. With 5 ms, at
# full rate batches fill before the linger ends: P1/P2's CPU per record (bench/e2e_throughput.py
# --kafka, medians of 3) was the same within noise (P1 dsl 1.98 -> 1.67 us, P2 lambda 7.18 -> 7.47).
PRODUCER_LINGER_MS = 5
_LINGER = ("linger.ms", "queue.buffering.max.ms")


def _default_setting(config: dict[str, Any], names: tuple[str, str], value: int) -> None:
    """Set librdkafka's setting ``names[0]`` to ``value``, unless the user chose it under either of
    its names (``names[1]`` is librdkafka's alias)."""
    if not set(names) & config.keys():
        config[names[0]] = value


def _close_quietly(client: Consumer | Producer) -> None:
    try:
        client.close()
    except Exception:
        logger.warning("Closing %s failed", type(client).__name__, exc_info=True)
