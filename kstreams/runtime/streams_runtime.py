"""The runtime of one KafkaStreams client: its parts, wired once, started and stopped together.

A ``StreamsRuntime`` owns the cluster clients (main consumer, restore consumer, producer), the
task scheduler, the record collector, the task manager, the committer, the restore thread (the
state updater) and the polling thread. The client keeps what is policy: the state machine, the
uncaught exception handler, and the stream threads (KIP-663), which it starts against this
runtime's scheduler and task manager.

Threads: built and started by the thread that calls ``KafkaStreams.start()``; stopped by the
client's close thread after the stream threads have ended. Its parts document their own locks.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from kstreams._native.record_collector import RecordCollector
from kstreams._native.scheduler import TaskScheduler
from kstreams.cluster.port import Admin, Cluster, Consumer, Producer, TopicNotFoundError
from kstreams.config import StreamsConfig
from kstreams.runtime.commit import Committer
from kstreams.runtime.internal_topics import InternalTopicManager
from kstreams.runtime.metrics import MetricsRegistry
from kstreams.runtime.polling_thread import PollingThread, RuntimeHooks
from kstreams.runtime.restore_listener import StateRestoreListener
from kstreams.runtime.retry import Retry
from kstreams.runtime.state_updater import StateUpdater
from kstreams.runtime.task_manager import TaskEntry, TaskManager
from kstreams.topology.plan import TopologyPlan

__all__ = ["StreamsRuntime", "time_left"]

logger = logging.getLogger(__name__)


class StreamsRuntime:
    """Every part the stream threads work with (see the module docstring)."""

    def __init__(
        self,
        client_id: str,
        process_id: uuid.UUID,
        config: StreamsConfig,
        plan: TopologyPlan,
        cluster: Cluster,
        admin: Admin,
        internal_topics: InternalTopicManager,
        metrics: MetricsRegistry,
        hooks: RuntimeHooks,
        on_restore_failure: Callable[[TaskEntry | None, BaseException], None],
        restore_listener: StateRestoreListener | None,
    ) -> None:
        app_id = config.application_id
        self._admin = admin
        self.partition_counts: dict[str, int] = {}
        consumer_config = dict(config.client_configs("main.consumer"))
        consumer_config.setdefault("client.id", f"{client_id}-consumer")
        consumer_config.setdefault("session.timeout.ms", config["session.timeout.ms"])
        consumer_config.setdefault("auto.offset.reset", config["auto.offset.reset"])
        restore_config = dict(config.client_configs("restore.consumer"))
        restore_config.setdefault("client.id", f"{client_id}-restore-consumer")
        producer_config = dict(config.client_configs("producer"))
        producer_config.setdefault("client.id", f"{client_id}-producer")
        if config.exactly_once:
            consumer_config["isolation.level"] = "read_committed"
            restore_config["isolation.level"] = "read_committed"
            producer_config["transactional.id"] = f"{app_id}-{process_id}"
        self.consumer: Consumer = cluster.consumer(app_id, consumer_config)
        restore_consumer = cluster.consumer(None, restore_config)
        self.producer: Producer = cluster.producer(producer_config)
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

        def new_producer() -> Producer:
            self.producer = cluster.producer(producer_config)
            return self.producer

        self.scheduler = TaskScheduler()
        collector = RecordCollector()
        state_dir = os.path.join(str(config["state.dir"]), app_id)
        self.task_manager = TaskManager(
            plan, config, collector, self.scheduler, self.partition_count, state_dir
        )
        polling_name = f"{client_id}-PollingThread"
        tags = {"thread-id": polling_name}
        retry = Retry.from_config(config)
        committer = Committer(
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
        self.polling = PollingThread(
            polling_name,
            config,
            self.consumer,
            self.producer,
            collector,
            self.scheduler,
            self.task_manager,
            self.state_updater,
            committer,
            hooks,
            metrics,
            list(plan.all_source_topics),
            retry,
            new_producer,
        )

    def start(self) -> None:
        self.state_updater.start()
        self.polling.start()

    def threads(self) -> list[Any]:
        """The runtime's own threads (the polling thread and the restore thread)."""
        return [self.polling, self.state_updater]

    def partition_count(self, topic: str) -> int:
        """Partitions of a topic the application writes to, cached until the next assignment."""
        count = self.partition_counts.get(topic)
        if count is None:
            found = self._admin.describe_topics([topic])
            if topic not in found:
                raise TopicNotFoundError(
                    f"Topic {topic} does not exist: create it before the application writes to it."
                )
            count = found[topic].partitions
            self.partition_counts[topic] = count
        return count

    def stop(self, deadline: float | None) -> bool:
        """Stop after the stream threads ended: the polling thread commits and closes every task
        and leaves the group, then the restore thread stops and the clients close. True if every
        thread stopped before the deadline (monotonic; None waits for ever)."""
        self.scheduler.shutdown()
        polling = self.polling
        ok = True
        if polling.is_alive():
            polling.request_stop()
            polling.join(time_left(deadline))
            ok = not polling.is_alive()
        if not polling.closed_cleanly and not polling.is_alive():
            self.task_manager.close_all(clean=False)
        if self.state_updater.is_alive():
            self.state_updater.shutdown()
            self.state_updater.join(time_left(deadline))
            ok = ok and not self.state_updater.is_alive()
        if not polling.is_alive():
            for client in (self.consumer, self.producer):
                _close_quietly(client)
        return ok

    def abandon(self) -> None:
        """Stop where it is, as a crashed process would (tests only): nothing is committed,
        closed or left."""
        if self.polling.is_alive():
            self.polling.abandon()
            self.polling.join(30.0)
        if self.state_updater.is_alive():
            self.state_updater.shutdown()
            self.state_updater.join(30.0)


def _close_quietly(client: Consumer | Producer) -> None:
    try:
        client.close()
    except Exception:
        logger.warning("Closing %s failed", type(client).__name__, exc_info=True)


def time_left(deadline: float | None) -> float | None:
    """Seconds until a monotonic deadline (never negative), or None for no deadline."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())
