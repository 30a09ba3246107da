"""Committing all tasks at once (seeds/003 "Committing Active Tasks").

Run by the polling thread only. The procedure: stop every stream thread at the scheduler's barrier,
flush the caches and stores of all running tasks (their changelog and downstream records land in
the record collector), drain the collector into the producer and flush it, then commit the input
offsets — with the consumer (at_least_once) or inside the producer's transaction (exactly_once_v2)
— record where each task's changelogs end, write checkpoints (at_least_once; under exactly_once_v2
only a clean close writes them, see ``checkpoints``), and let the stream threads go again.

Changelog offsets: the committer remembers every partition it sent records to since the last
commit; after a commit it asks the cluster for the end offsets of the running tasks' changelog
partitions among them. Under exactly_once_v2 the main consumer reads committed data, so these are
last stable offsets, which never overstate what a task wrote: a checkpoint may trail the state
(restoration then re-applies a few records, which is harmless) but never lead it.

Failures: a failed send, flush or transactional call raises to the polling thread, which calls
``abort()`` (exactly_once_v2: the open transaction is aborted, or, when the producer was fenced,
re-initialised) and rewinds every task to the last commit. A refused consumer commit under
at_least_once is logged and retried at the next commit.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from kstreams._native.record_collector import RecordCollector
from kstreams._native.scheduler import TaskScheduler
from kstreams.cluster.port import (
    ClusterError,
    CommitFailedError,
    Consumer,
    Producer,
    ProducerFencedError,
    TopicPartition,
)
from kstreams.errors import ProcessorStateException, StreamsException

if TYPE_CHECKING:
    from kstreams.runtime.metrics import Sensor
    from kstreams.runtime.task_manager import TaskEntry, TaskManager

__all__ = ["Committer", "send_collected"]

logger = logging.getLogger(__name__)

BARRIER_TIMEOUT_S = 60.0


def send_collected(
    collector: RecordCollector, producer: Producer, written: set[tuple[str, int]] | None = None
) -> int:
    """Move every buffered output record from the collector to the producer; returns the count.
    The (topic, partition) of every batch sent is added to ``written``."""
    sent = 0
    for topic, partition, batch in collector.drain():
        producer.send(topic, partition, batch)
        sent += len(batch)
        if written is not None:
            written.add((topic, partition))
    return sent


class Committer:
    """Commits every running task of one client in one step."""

    def __init__(
        self,
        scheduler: TaskScheduler,
        task_manager: TaskManager,
        collector: RecordCollector,
        consumer: Consumer,
        producer: Producer,
        group_id: str,
        exactly_once: bool,
        commit_sensor: Sensor,
        commit_latency: Sensor,
    ) -> None:
        self._scheduler = scheduler
        self._task_manager = task_manager
        self._collector = collector
        self._consumer = consumer
        self._producer = producer
        self._group_id = group_id
        self._exactly_once = exactly_once
        self._commit_sensor = commit_sensor
        self._commit_latency = commit_latency
        self._committed: dict[TopicPartition, int] = {}
        self.in_transaction = False
        # (topic, partition) sent to since the last commit: whose end offsets to look up.
        self.written: set[tuple[str, int]] = set()

    def send_collected(self) -> int:
        """Drain the record collector into the producer (see ``send_collected``)."""
        return send_collected(self._collector, self._producer, self.written)

    def begin(self) -> None:
        """exactly_once_v2: open the first transaction (every send belongs to one)."""
        if self._exactly_once:
            self._producer.init_transactions()
            self._producer.begin_transaction()
            self.in_transaction = True

    def commit_all(self, reason: str) -> None:
        """Commit every running task; raises if the barrier cannot be reached or a client fails."""
        started = time.monotonic()
        if not self._scheduler.pause_all(BARRIER_TIMEOUT_S):
            self._scheduler.resume_all()
            raise StreamsException(
                f"Stream threads did not release their tasks within {BARRIER_TIMEOUT_S:.0f}s for a "
                "commit; a processor is probably blocked. Check for blocking calls in processors."
            )
        try:
            self._commit_paused(reason)
        finally:
            self._scheduler.resume_all()
        self._commit_sensor.record()
        self._commit_latency.record((time.monotonic() - started) * 1000.0)

    def commit_paused(self, reason: str) -> None:
        """The commit, for a caller that already holds the barrier (revocation, close)."""
        self._commit_paused(reason)

    def _commit_paused(self, reason: str) -> None:
        entries: list[TaskEntry] = self._task_manager.running()
        for entry in entries:
            entry.task.flush()
        self.send_collected()
        offsets: dict[TopicPartition, int] = {}
        for entry in entries:
            offsets.update(entry.task.committable_offsets())
        if self._exactly_once:
            self._producer.flush()
            if not self._still_member():
                # Kafka's coordinator refuses a transactional offset commit of a stale group
                # generation (KIP-447); the port cannot carry the generation, so check here.
                # The next poll reports the partitions lost, and their new owner redoes the work.
                logger.warning("Not committing: this client was dropped from the group; aborting")
                self.abort()
                return
            if offsets:
                self._producer.send_offsets_to_transaction(offsets, self._group_id)
            self._producer.commit_transaction()
            self.in_transaction = False
            self._producer.begin_transaction()
            self.in_transaction = True
        else:
            self._producer.flush()
            changed = {tp: o for tp, o in offsets.items() if self._committed.get(tp) != o}
            if changed:
                try:
                    self._consumer.commit(changed)
                except CommitFailedError as exc:
                    # The group dropped this member: its next poll reports the partitions lost and
                    # their new owner redoes the uncommitted work (at least once).
                    logger.warning("Commit refused, the partitions are being reassigned: %s", exc)
                    return
                except ClusterError as exc:
                    if not exc.retriable:
                        raise
                    # Everything is sent; the offsets go with the next commit.
                    logger.warning("Committing offsets failed (%s); retrying at the next commit", exc)
                    return
        self._committed.update(offsets)
        self._record_changelog_ends(entries)
        for entry in entries:
            entry.task.commit_requested = False
            post_commit = getattr(entry.task, "post_commit", None)
            if post_commit is not None:
                post_commit()
        logger.debug("Committed %d tasks (%s): %s", len(entries), reason, offsets)

    def _still_member(self) -> bool:
        """Whether the group still counts this client's consumer as a member. Adapters whose
        transactions carry the consumer's group metadata (Kafka's, through ``group_metadata``)
        are fenced by the coordinator itself, so they are not asked (it would cost a request per
        commit)."""
        if hasattr(self._consumer, "group_metadata"):
            return True
        group_assignment = getattr(self._consumer, "group_assignment", None)
        if group_assignment is None:
            return True
        return bool(self._consumer.member_id) and self._consumer.member_id in group_assignment()

    def _record_changelog_ends(self, entries: list[TaskEntry]) -> None:
        """After a commit: note where each task's changelogs end, and (at_least_once) write the
        checkpoints."""
        written, self.written = self.written, set()
        owners: dict[TopicPartition, TaskEntry] = {}
        for entry in entries:
            for tp in entry.task.changelog_partitions():
                if (tp.topic, tp.partition) in written:
                    owners[tp] = entry
        if owners:
            try:
                ends = self._consumer.end_offsets(list(owners))
            except ClusterError as exc:
                # The checkpoints stay where they were (behind the state: safe); retried next commit.
                logger.warning("Could not read the changelogs' end offsets after a commit: %s", exc)
                self.written.update((tp.topic, tp.partition) for tp in owners)
                ends = {}
            for tp, end in ends.items():
                owners[tp].checkpoint.advance({tp: end})
        if self._exactly_once:
            return
        for entry in entries:
            try:
                entry.checkpoint.write()
            except ProcessorStateException as exc:
                logger.warning("Task %s: %s", entry.task_id, exc)

    def abort(self) -> None:
        """exactly_once_v2: abort the open transaction (a task failed mid-transaction, or a send or
        a commit failed) and open the next one. A fenced producer (its transaction outlived
        ``transaction.timeout.ms`` and was aborted by the cluster) is initialised again instead."""
        if not self._exactly_once:
            return
        self.written.clear()
        try:
            if self.in_transaction:
                self._producer.abort_transaction()
        except ProducerFencedError as exc:
            logger.warning("The producer was fenced (%s); initialising its transactions again", exc)
            self._producer.init_transactions()
        except ClusterError as exc:
            if not exc.retriable:
                raise StreamsException(
                    f"Aborting the transaction failed: {exc}. The client cannot guarantee exactly-once "
                    "any more and stops; restart it (its successor resumes from the last commit)."
                ) from exc
            # The cluster's state of the transaction is unknown: start over with a new epoch, which
            # aborts whatever this producer left open.
            logger.warning("Aborting the transaction failed (%s); initialising transactions again", exc)
            self._producer.init_transactions()
        self.in_transaction = False
        self._producer.begin_transaction()
        self.in_transaction = True

    def forget(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._committed.pop(tp, None)
