"""Small factories for the runtime's unit tests: each part built from its collaborators on the
embedded cluster, with no ``KafkaStreams`` client (as Kafka's StreamThreadTest, TaskManagerTest
and DefaultStateUpdaterTest build theirs).

``Parts`` builds the collaborators a test asks for, each once, in the order ``StreamsRuntime``
builds them; ``close()`` stops and closes whatever it built.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kstreams._native.per_record import OutputPartitionCounts
from kstreams._native.scheduler import TaskScheduler
from kstreams.cluster import EmbeddedCluster
from kstreams.cluster.port import Consumer, TopicPartition
from kstreams.config import StreamsConfig
from kstreams.metrics import MetricsRegistry
from kstreams.processing.record_collector import RecordCollector
from kstreams.processor import TaskId
from kstreams.runtime.assignment.streams_assignor import StreamsAssignor
from kstreams.runtime.internal_topics.repartition_purge import RepartitionPurger
from kstreams.runtime.restoration.state_updater import StateUpdater
from kstreams.runtime.retry import Retry
from kstreams.runtime.tasks.commit import Committer
from kstreams.runtime.tasks.task_manager import TaskEntry, TaskManager
from kstreams.runtime.threads.polling_parts import PollingParts, ProducerRenewal
from kstreams.serdes import Serdes
from kstreams.state import Stores
from kstreams.topology.plan import TopologyPlan
from kstreams.topology.topology import Topology
from tests.support.topologies import CountPerKey
from tests.support.waiting import wait_until

__all__ = [
    "IN",
    "OUT",
    "Parts",
    "counting_topology",
    "wait_until",
]

STRING = Serdes.string()
LONG = Serdes.long()
IN, OUT = "in", "out"


def counting_topology(persistent: bool = False) -> Topology:
    """String records from ``in``; each key's running count (a long, in the logged store
    ``counts``) to ``out``."""
    supplier = (
        Stores.persistent_key_value_store("counts")
        if persistent
        else Stores.in_memory_key_value_store("counts")
    )
    topology = Topology()
    topology.add_source("src", IN, key_deserializer=STRING, value_deserializer=STRING)
    topology.add_processor("count", CountPerKey, "src")
    topology.add_state_store(Stores.key_value_store_builder(supplier, STRING, LONG), "count")
    topology.add_sink("sink", OUT, "count", key_serializer=STRING, value_serializer=LONG)
    return topology


class Parts:
    """The runtime's parts for one application on ``cluster`` (see the module docstring)."""

    def __init__(
        self,
        cluster: EmbeddedCluster,
        tmp_path: Path,
        app_id: str,
        topology: Topology | None = None,
        partitions: int = 2,
        **config: Any,
    ) -> None:
        self.cluster = cluster
        self.app_id = app_id
        self.config = StreamsConfig(
            {
                "application.id": app_id,
                "state.dir": str(tmp_path / "state"),
                "commit.interval.ms": 100,
                **config,
            }
        )
        self.plan: TopologyPlan = (topology or counting_topology()).build(app_id, self.config)
        for topic in (IN, OUT, *self.plan.internal_topics):
            if topic not in cluster.topics():
                cluster.create_topic(topic, partitions)
        self.admin = cluster.admin()
        self.metrics = MetricsRegistry()
        self.collector = RecordCollector()
        self.scheduler = TaskScheduler()
        self.partition_count = OutputPartitionCounts(
            lambda topic: self.admin.describe_topics([topic])[topic].partitions
        )
        self.retry = Retry.from_config(self.config)
        self._consumer: Consumer | None = None
        self._producer: ProducerRenewal | None = None
        self._task_manager: TaskManager | None = None
        self._state_updater: StateUpdater | None = None
        self._committer: Committer | None = None
        self.restored: list[TaskEntry] = []
        self.restore_failures: list[tuple[TaskEntry | None, BaseException]] = []
        # Where restored tasks go besides ``restored`` (the polling thread, when a test runs one).
        self.forward_restored: Callable[[TaskEntry], None] | None = None
        self._restored_lock = threading.Lock()

    # -- collaborators, each built on first use ---------------------------------------------------

    @property
    def consumer(self) -> Consumer:
        """The main consumer (read_committed under exactly_once_v2), a member of the app's group."""
        if self._consumer is None:
            config: dict[str, Any] = {"client.id": f"{self.app_id}-consumer", "auto.offset.reset": "earliest"}
            if self.config.exactly_once:
                config["isolation.level"] = "read_committed"
            self._consumer = self.cluster.consumer(self.app_id, config)
        return self._consumer

    @property
    def producer(self) -> ProducerRenewal:
        if self._producer is None:
            config: dict[str, Any] = {"client.id": f"{self.app_id}-producer"}
            if self.config.exactly_once:
                config["transactional.id"] = f"{self.app_id}-test"
            self._producer = ProducerRenewal.of(self.cluster, config)
        return self._producer

    @property
    def task_manager(self) -> TaskManager:
        if self._task_manager is None:
            state_dir = os.path.join(str(self.config["state.dir"]), self.app_id)
            self._task_manager = TaskManager(
                self.plan,
                self.config,
                self.collector,
                self.scheduler,
                self.partition_count,
                state_dir,
                self.metrics,
            )
        return self._task_manager

    @property
    def state_updater(self) -> StateUpdater:
        """The restore thread (not started); restored tasks land in ``restored``."""
        if self._state_updater is None:
            config: dict[str, Any] = {"client.id": f"{self.app_id}-restore-consumer"}
            if self.config.exactly_once:
                config["isolation.level"] = "read_committed"
            self._state_updater = StateUpdater(
                f"{self.app_id}-RestoreThread",
                self.cluster.consumer(None, config),
                on_restored=self._on_restored,
                on_failure=lambda entry, exc: self.restore_failures.append((entry, exc)),
                metrics=self.metrics,
                admin=self.admin,
            )
        return self._state_updater

    @property
    def committer(self) -> Committer:
        if self._committer is None:
            tags = {"thread-id": "test"}
            self._committer = Committer(
                self.scheduler,
                self.task_manager,
                self.collector,
                self.consumer,
                self.producer.current,
                self.app_id,
                self.config.exactly_once,
                self.metrics.sensor("commit", "stream-thread-metrics", tags),
                self.metrics.sensor("commit-latency", "stream-thread-metrics", tags),
                self.retry,
            )
        return self._committer

    def polling_parts(self, threads: Callable[[], int] = lambda: 1) -> PollingParts:
        assignor = StreamsAssignor(
            "process",
            self.config,
            self.plan,
            self.task_manager,
            self.state_updater,
            self.admin,
            threads,
            self.metrics,
        )
        purger = RepartitionPurger(
            self.admin, (), int(self.config["repartition.purge.interval.ms"]), "purger"
        )
        return PollingParts(
            self.config,
            self.consumer,
            self.producer,
            self.collector,
            self.scheduler,
            self.task_manager,
            self.state_updater,
            self.committer,
            purger,
            assignor,
            self.retry,
            self.metrics,
            self.partition_count,
            list(self.plan.all_source_topics),
        )

    # -- helpers ----------------------------------------------------------------------------------

    def running_task(self, partition: int) -> TaskEntry:
        """A task of the counting topology for ``in``'s partition, created and running (a fresh
        task's in-memory store has nothing to restore)."""
        entry = self.task_manager.create(TaskId(0, partition), [TopicPartition(IN, partition)])
        self.task_manager.activate(entry)
        return entry

    def _on_restored(self, entry: TaskEntry) -> None:
        with self._restored_lock:
            self.restored.append(entry)
        if self.forward_restored is not None:
            self.forward_restored(entry)

    def close(self) -> None:
        if self._state_updater is not None and self._state_updater.is_alive():
            self._state_updater.shutdown()
            self._state_updater.join(10.0)
        if self._task_manager is not None:
            self._task_manager.close_all(clean=False)
        for client in (self._consumer, self._producer.current if self._producer else None):
            if client is not None:
                client.close()
