"""EmbeddedCluster: an in-process Kafka cluster, the default when no bootstrap.servers is set.

It is a real engine, not a mock: partitioned logs of ``RecordBatch``es, topic configs and
partition growth, consumer groups with cooperative rebalances, session expiry and committed
offsets, and transactions with read_committed visibility. Several KafkaStreams clients in one
process share one EmbeddedCluster to form one application.

    cluster = EmbeddedCluster()
    cluster.create_topic("in", partitions=2)
    cluster.produce("in", b"key", b"value")
    cluster.read("in")  # [ConsumerRecord(topic="in", partition=..., offset=0, ...)]

Fault injection for tests: ``fail_next(operation, times=1, error=None)`` makes the next ``times``
calls of a client operation raise ``error`` (by default a retriable ``ClusterError``) before doing
anything. Operations are named after the client methods: admin ("create_topics",
"describe_topics", "delete_topics", "alter_topic_config", "create_partitions", "list_offsets",
"delete_records", "committed_offsets", "alter_committed_offsets", "group_members",
"offsets_for_times"), producer ("send", "flush", "partitions_for",
"init_transactions", "begin_transaction", "send_offsets_to_transaction", "commit_transaction",
"abort_transaction") and consumer ("poll", "commit", "committed", "end_offsets"). The helper
methods of this class are never failed.

Threads: every client and helper may be used from any thread; the broker lock
(``EmbeddedBroker.lock``) guards all state (see ``embedded_broker``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from kstreams._native.record_batch import RecordBatch, default_partition
from kstreams.cluster.embedded_admin import EmbeddedAdmin
from kstreams.cluster.embedded_broker import EmbeddedBroker
from kstreams.cluster.embedded_consumer import EmbeddedConsumer
from kstreams.cluster.embedded_producer import EmbeddedProducer
from kstreams.cluster.port import ConsumerRecord, TopicDescription

__all__ = ["EmbeddedCluster"]

logger = logging.getLogger(__name__)

_ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


class EmbeddedCluster:
    """An in-process cluster: a ``Cluster`` whose clients the runtime cannot tell from Kafka's."""

    def __init__(self) -> None:
        self._broker = EmbeddedBroker()

    # Clients

    def admin(self) -> EmbeddedAdmin:
        return EmbeddedAdmin(self._broker)

    def consumer(self, group_id: str | None, config: Mapping[str, object] | None = None) -> EmbeddedConsumer:
        return EmbeddedConsumer(self._broker, group_id, config)

    def producer(self, config: Mapping[str, object] | None = None) -> EmbeddedProducer:
        return EmbeddedProducer(self._broker, config)

    # Fault injection

    def fail_next(self, operation: str, times: int = 1, error: Exception | None = None) -> None:
        """Make the next ``times`` calls of a client operation (of any client of this cluster)
        raise ``error``, by default a retriable ClusterError, before doing anything. Raises
        ValueError for an unknown operation name (the module docstring lists them)."""
        self._broker.faults.arm(operation, times, error)

    # Helpers for tests and tools (the same on every adapter)

    def create_topic(self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None) -> None:
        """Create a topic; TopicExistsError if it exists."""
        with self._broker.lock:
            self._broker.check_open()
            self._broker.create_topics({name: (partitions, config or {})})

    def create_partitions(self, name: str, partitions: int) -> None:
        """Grow a topic to ``partitions``; ClusterError unless that is more than it has."""
        with self._broker.lock:
            self._broker.check_open()
            self._broker.create_partitions({name: partitions})

    def produce(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int | None = None,
        partition: int | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> None:
        """Append one record, outside any transaction. Without a partition, a keyed record goes
        where Kafka's default partitioner puts it (murmur2 of the key), a null key round-robin."""
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        batch = RecordBatch.from_columns(
            [key], [value], [timestamp], 0, -1, headers=[headers] if headers is not None else None
        )
        with self._broker.lock:
            self._broker.check_open()
            found = self._broker.require_topic(topic)
            if partition is None:
                if key is not None:
                    partition = default_partition(key, len(found.logs))
                else:
                    partition = found.next_null_key_partition % len(found.logs)
                    found.next_null_key_partition += 1
            self._broker.append(topic, partition, batch, None)

    def read(self, topic: str, isolation: str = "read_committed") -> list[ConsumerRecord]:
        """Every record of a topic visible at that isolation, in partition then offset order."""
        if isolation not in _ISOLATION_LEVELS:
            raise ValueError(f"read: isolation must be one of {_ISOLATION_LEVELS}, got {isolation!r}")
        with self._broker.lock:
            self._broker.check_open()
            self._broker.expire_transactions(time.monotonic())
            logs = list(self._broker.require_topic(topic).logs)
            batches = [log.read_all(isolation == "read_committed") for log in logs]
        return [
            ConsumerRecord(topic, p, offset, key, value, ts, headers)
            for batch in batches
            if batch is not None
            for key, value, ts, p, offset, headers in batch
        ]

    def topics(self) -> dict[str, TopicDescription]:
        with self._broker.lock:
            self._broker.check_open()
            return self._broker.describe_topics(None)

    def delete_topic(self, name: str) -> None:
        """Delete a topic; TopicNotFoundError if it does not exist."""
        with self._broker.lock:
            self._broker.check_open()
            self._broker.delete_topics([name])

    def close(self) -> None:
        """Shut the cluster down: blocked polls wake, and every later call raises ClusterError."""
        with self._broker.lock:
            if self._broker.closed:
                return
            self._broker.closed = True
            self._broker.notify()
        self._broker.faults.clear()
        logger.info("EmbeddedCluster closed")

    def __enter__(self) -> EmbeddedCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        with self._broker.lock:
            return (
                f"EmbeddedCluster(topics={sorted(self._broker.topics)}, groups={sorted(self._broker.groups)})"
            )
