"""The state and the request handling of the embedded broker: topics and their partition logs,
consumer groups, transactional ids, fault injection.

``EmbeddedBroker`` is the engine behind ``EmbeddedCluster`` and its clients. It validates and
applies requests the way a Kafka broker does (the same errors for the same mistakes), and wakes
blocked consumers whenever something they may wait for changes.

Threads and locks: one lock, ``EmbeddedBroker.lock``, guards all broker state; every method here
expects the caller to hold it. ``EmbeddedBroker.changed`` is a condition on that lock, notified on
every change a blocked poll may wait for (new visible records, a group change, a released
partition, topic changes, close). Nothing calls out of the broker (listener callbacks, user code)
while holding the lock. The fault injector's lock is a leaf below it.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence

from kstreams._native.record_batch import RecordBatch
from kstreams.cluster.embedded_faults import FaultInjector
from kstreams.cluster.embedded_group import ConsumerGroup
from kstreams.cluster.embedded_log import PartitionLog, Transaction
from kstreams.cluster.port import (
    ClusterError,
    ProducerFencedError,
    RecordRejectedError,
    RejectedRecord,
    TopicDescription,
    TopicExistsError,
    TopicNotFoundError,
    TopicPartition,
)

__all__ = ["EmbeddedBroker", "Topic"]

logger = logging.getLogger(__name__)

# Kafka's rule for topic names.
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


class Topic:
    """A topic: its configs and one log per partition."""

    __slots__ = ("config", "logs", "name", "next_null_key_partition")

    def __init__(self, name: str, partitions: int, config: Mapping[str, str]) -> None:
        self.name = name
        self.config = {str(k): str(v) for k, v in config.items()}
        self.logs = [PartitionLog() for _ in range(partitions)]
        # Records with a null key are spread round-robin (the helper `produce` places them).
        self.next_null_key_partition = 0

    def describe(self) -> TopicDescription:
        return TopicDescription(self.name, len(self.logs), dict(self.config))


class EmbeddedBroker:
    """All state of one in-process cluster, and the requests that change it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.faults = FaultInjector()
        self.topics: dict[str, Topic] = {}
        self.groups: dict[str, ConsumerGroup] = {}
        # transactional.id -> the epoch of its newest producer; older epochs are fenced.
        self.txn_epochs: dict[str, int] = {}
        # transactional.id -> its open transaction.
        self.open_transactions: dict[str, Transaction] = {}
        self.closed = False
        self._client_seq = 0

    def notify(self) -> None:
        self.changed.notify_all()

    def check_open(self) -> None:
        if self.closed:
            raise ClusterError("The EmbeddedCluster is closed: create a new one to continue")

    def next_client_number(self) -> int:
        self._client_seq += 1
        return self._client_seq

    # Topics

    def create_topics(self, topics: Mapping[str, tuple[int, Mapping[str, str]]]) -> None:
        """Create every topic that does not exist; raise TopicExistsError naming the first that
        did (the others are still created), or ClusterError for an invalid request."""
        existing: str | None = None
        for name, (partitions, _config) in topics.items():
            if not _LEGAL_TOPIC.fullmatch(name) or name in (".", ".."):
                raise ClusterError(
                    f"Invalid topic name {name!r}: use 1 to 249 of the characters [a-zA-Z0-9._-]"
                )
            if partitions < 1:
                raise ClusterError(
                    f"Cannot create topic {name!r} with {partitions} partitions: use 1 or more"
                )
        for name, (partitions, config) in topics.items():
            if name in self.topics:
                existing = existing or name
                continue
            self.topics[name] = Topic(name, partitions, config or {})
            logger.info("Created topic %s with %d partition(s)", name, partitions)
            self._topic_changed(name)
        self.notify()
        if existing is not None:
            raise TopicExistsError(f"Topic {existing!r} already exists", False)

    def delete_topics(self, names: Sequence[str]) -> None:
        """Delete the named topics; raise TopicNotFoundError naming the first that did not exist
        (the others are still deleted)."""
        missing: str | None = None
        for name in names:
            if self.topics.pop(name, None) is None:
                missing = missing or name
                continue
            logger.info("Deleted topic %s", name)
            for group in self.groups.values():
                group.forget_topic(name)
            self._topic_changed(name)
        self.notify()
        if missing is not None:
            raise TopicNotFoundError(f"Cannot delete topic {missing!r}: it does not exist")

    def describe_topics(self, names: Sequence[str] | None) -> dict[str, TopicDescription]:
        if names is None:
            return {name: topic.describe() for name, topic in self.topics.items()}
        return {name: self.topics[name].describe() for name in names if name in self.topics}

    def alter_topic_config(self, name: str, config: Mapping[str, str]) -> None:
        """Set the given configs of a topic, leaving the others as they are."""
        topic = self.require_topic(name)
        topic.config.update({str(k): str(v) for k, v in config.items()})

    def create_partitions(self, counts: Mapping[str, int]) -> None:
        """Grow topics; the whole request is validated before any topic grows."""
        for name, count in counts.items():
            current = len(self.require_topic(name).logs)
            if count <= current:
                raise ClusterError(
                    f"Cannot set the partition count of topic {name!r} to {count}: it has {current} "
                    "and partitions can only be added"
                )
        for name, count in counts.items():
            topic = self.topics[name]
            logger.info("Topic %s grows from %d to %d partitions", name, len(topic.logs), count)
            topic.logs.extend(PartitionLog() for _ in range(count - len(topic.logs)))
            self._topic_changed(name)
        self.notify()

    def require_topic(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise TopicNotFoundError(f"Topic {name!r} does not exist: create it first")
        return topic

    def log(self, tp: TopicPartition) -> PartitionLog | None:
        """The log of a partition, or None if its topic or the partition does not exist."""
        topic = self.topics.get(tp.topic)
        if topic is None or not 0 <= tp.partition < len(topic.logs):
            return None
        return topic.logs[tp.partition]

    def require_log(self, tp: TopicPartition) -> PartitionLog:
        logs = self.require_topic(tp.topic).logs
        if not 0 <= tp.partition < len(logs):
            raise ClusterError(
                f"Partition {tp} does not exist: topic {tp.topic!r} has {len(logs)} partitions"
            )
        return logs[tp.partition]

    def partition_counts(self) -> dict[str, int]:
        return {name: len(topic.logs) for name, topic in self.topics.items()}

    def list_offsets(
        self, partitions: Iterable[TopicPartition], read_committed: bool
    ) -> dict[TopicPartition, tuple[int, int]]:
        self.expire_transactions(time.monotonic())
        result = {}
        for tp in partitions:
            log = self.require_log(tp)
            result[tp] = (log.start_offset, log.high_watermark(read_committed))
        return result

    def delete_records(self, before: Mapping[TopicPartition, int]) -> None:
        """Advance log start offsets; -1 means "up to the end", as in Kafka's DeleteRecords."""
        targets = []
        for tp, offset in before.items():
            log = self.require_log(tp)
            if offset == -1:
                offset = log.end_offset
            if not 0 <= offset <= log.end_offset:
                raise ClusterError(
                    f"Cannot delete records of {tp} before offset {offset}: the log ends at {log.end_offset}"
                )
            targets.append((log, offset))
        for log, offset in targets:
            log.delete_before(offset)
        self.notify()

    def _topic_changed(self, name: str) -> None:
        """A topic appeared, disappeared or grew: rebalance the groups that subscribe to it."""
        counts = self.partition_counts()
        for group in self.groups.values():
            if group.subscribes_to(name):
                group.rebalance(counts, f"metadata of topic {name} changed")

    # Produce

    def append(self, topic: str, partition: int, batch: RecordBatch, txn: Transaction | None) -> None:
        tp = TopicPartition(topic, partition)
        log = self.require_log(tp)
        if len(batch) == 0:
            return
        batch, rejected = self._accepted(topic, partition, batch)
        if len(batch):
            self._append(tp, log, batch, partition, txn)
        if rejected:
            raise RecordRejectedError(rejected)

    def _accepted(
        self, topic: str, partition: int, batch: RecordBatch
    ) -> tuple[RecordBatch, list[RejectedRecord]]:
        """The records the topic's ``max.message.bytes`` admits, and those it refuses (a broker
        answers MESSAGE_TOO_LARGE for them)."""
        limit = self.topics[topic].config.get("max.message.bytes")
        if limit is None:
            return batch, []
        max_bytes = int(limit)
        kept: list[int] = []
        rejected: list[RejectedRecord] = []
        for i in range(len(batch)):
            key, value = batch.key(i), batch.value(i)
            size = len(key or b"") + len(value or b"")
            if size <= max_bytes:
                kept.append(i)
                continue
            rejected.append(
                RejectedRecord(
                    topic,
                    partition,
                    key,
                    value,
                    batch.timestamp(i),
                    batch.headers(i),
                    f"MESSAGE_TOO_LARGE: the record has {size} bytes, more than the topic's "
                    f"max.message.bytes={max_bytes}",
                )
            )
        if not rejected:
            return batch, []
        return RecordBatch.from_records([batch[i] for i in kept]), rejected

    def _append(
        self,
        tp: TopicPartition,
        log: PartitionLog,
        batch: RecordBatch,
        partition: int,
        txn: Transaction | None,
    ) -> None:
        entry = log.append(batch, partition, txn)
        if txn is not None:
            txn.started(time.monotonic())
            txn.record_write(tp, log, entry)
        # read_uncommitted readers see transactional records at once.
        self.notify()

    # Groups and offsets

    def group(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ConsumerGroup(group_id)
        return group

    def commit_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> None:
        """Store committed offsets, each with its metadata ("" where ``metadata`` has none, as a
        broker stores a commit without metadata). Offsets of partitions that no longer exist are
        dropped, as a broker forgets the offsets of a deleted topic."""
        group = self.group(group_id)
        for tp, offset in offsets.items():
            if self.log(tp) is None:
                logger.debug("Group %s: dropping the offset of %s, which does not exist", group_id, tp)
                continue
            if offset < 0:
                raise ClusterError(f"Cannot commit offset {offset} of {tp} for group {group_id!r}")
            group.offsets[tp] = offset
            group.metadata[tp] = metadata.get(tp, "") if metadata is not None else ""

    # Transactions

    def register_transactional_producer(self, transactional_id: str) -> int:
        """A producer calls init_transactions: bump the epoch (fencing older producers with this
        id) and abort the transaction an older producer left open. Returns the new epoch."""
        epoch = self.txn_epochs.get(transactional_id, -1) + 1
        self.txn_epochs[transactional_id] = epoch
        stale = self.open_transactions.pop(transactional_id, None)
        if stale is not None:
            logger.info(
                "Aborting the open transaction of fenced producer %s (epoch %d)",
                transactional_id,
                stale.epoch,
            )
            self._finish(stale, commit=False)
        return epoch

    def check_epoch(self, transactional_id: str, epoch: int) -> None:
        if self.txn_epochs.get(transactional_id) != epoch:
            raise ProducerFencedError(
                f"Producer with transactional.id {transactional_id!r} (epoch {epoch}) was fenced by a "
                "newer producer with the same id: close it and create a new one"
            )

    def expire_transactions(self, now: float) -> None:
        """Abort the transactions open for longer than their transaction.timeout.ms, bumping the
        epoch so that their producer is fenced, as a transaction coordinator does. A broker does
        this on a timer; here whoever may wait on the last stable offset calls it first."""
        for txn in list(self.open_transactions.values()):
            if txn.deadline is not None and txn.deadline <= now:
                logger.warning(
                    "Transaction of producer %s exceeded transaction.timeout.ms=%d: aborting it",
                    txn.transactional_id,
                    round(txn.timeout * 1000),
                )
                self.txn_epochs[txn.transactional_id] = self.txn_epochs.get(txn.transactional_id, 0) + 1
                self.end_transaction(txn, commit=False)

    def next_transaction_deadline(self) -> float | None:
        deadlines = [t.deadline for t in self.open_transactions.values() if t.deadline is not None]
        return min(deadlines) if deadlines else None

    def end_transaction(self, txn: Transaction, commit: bool) -> None:
        if self.open_transactions.get(txn.transactional_id) is txn:
            del self.open_transactions[txn.transactional_id]
        self._finish(txn, commit)

    def _finish(self, txn: Transaction, commit: bool) -> None:
        for log, entries in txn.writes.values():
            log.end_transaction(txn, entries, commit)
        if commit:
            for group_id, offsets in txn.offsets.items():
                self.commit_offsets(group_id, offsets, txn.metadata.get(group_id))
        self.notify()
