"""Committing all tasks at once: one commit for every task of the client.

Run by the polling thread only. The procedure: stop every stream thread at the scheduler's barrier,
flush the caches and stores of all running tasks (their changelog and downstream records land in the
record collector), drain the collector into the producer
(``kstreams/processing/record_collector.py``) and flush it, then commit the input offsets, each with
its partition's time in the metadata as Kafka Streams commits it (``offset_metadata``) — with the
consumer (at_least_once) or inside the producer's transaction (exactly_once_v2) — record where each
task's changelogs end, write checkpoints (at_least_once; under exactly_once_v2 only a clean close
writes them, see ``checkpoints``), and let the stream threads go again.

Changelog offsets: the committer remembers every partition it sent records to since the last
commit; after a commit it asks the cluster for the end offsets of the running tasks' changelog
partitions among them. Under exactly_once_v2 the main consumer reads committed data, so these are
last stable offsets, which never overstate what a task wrote: a checkpoint may trail the state
(restoration then re-applies a few records, which is harmless) but never lead it.

Failures: a failed send, flush or transactional call raises to the polling thread, which calls
``abort()`` (exactly_once_v2: the open transaction is aborted, or, when the producer was fenced,
re-initialised) and rewinds every task to the last commit. A refused consumer commit under
at_least_once is logged and retried at the next commit. Under exactly_once_v2 a commit never runs
while a task is failed: the shared transaction holds that task's output of records whose offsets
it will not commit, so committing it would publish them twice (once now, once when the task is
processed again); ``commit_paused`` refuses, and the polling thread aborts instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kstreams._native.scheduler import TaskScheduler
from kstreams.cluster.port import (
    ClusterError,
    CommitFailedError,
    Consumer,
    FatalClientError,
    Producer,
    ProducerFencedError,
    TopicPartition,
)
from kstreams.errors import ProcessorStateException, StreamsException
from kstreams.processing.record_collector import RecordCollector, send_collected
from kstreams.runtime.retry import Retry
from kstreams.runtime.tasks.barrier import barrier

if TYPE_CHECKING:
    from kstreams.metrics import Sensor
    from kstreams.runtime.tasks.task_manager import TaskEntry, TaskManager

__all__ = ["Committer"]

logger = logging.getLogger(__name__)


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
        retry: Retry,
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
        self._retry = retry
        self._committed: dict[TopicPartition, int] = {}
        self.in_transaction = False
        # (topic, partition) sent to since the last commit: whose end offsets to look up.
        self.written: set[tuple[str, int]] = set()

    def send_collected(self) -> int:
        """Drain the record collector into the producer (see ``send_collected``). Under
        exactly_once_v2 a transaction is opened first if none is (a failed begin leaves none)."""
        if self._exactly_once and not self.in_transaction and len(self._collector):
            self._begin_transaction()
        return send_collected(self._collector, self._producer, self.written)

    def replace_producer(self, producer: Producer) -> None:
        """Use a new producer from now on (the old one hit a fatal error). Under exactly_once_v2 its
        transactions are initialised, which fences the old producer's epoch and aborts whatever it
        left open; the caller then aborts (a no-op) and rewinds every task."""
        self._producer = producer
        self.in_transaction = False
        self.written.clear()
        if self._exactly_once:
            self._retry.call("init_transactions", producer.init_transactions, "the replacement producer")

    def begin(self) -> None:
        """exactly_once_v2: open the first transaction (every send belongs to one)."""
        if self._exactly_once:
            self._retry.call("init_transactions", self._producer.init_transactions, "the producer")
            self._begin_transaction()

    def _begin_transaction(self) -> None:
        self._retry.call("begin_transaction", self._producer.begin_transaction, "the next transaction")
        self.in_transaction = True

    def commit_all(self, reason: str) -> bool:
        """Commit every running task; raises if the barrier cannot be reached or a client fails.
        False when it did not commit because a task failed (see ``commit_paused``)."""
        started = time.monotonic()
        with barrier(self._scheduler, f"a commit ({reason})"):
            committed = self.commit_paused(reason)
        if committed:
            self._commit_sensor.record()
            self._commit_latency.record((time.monotonic() - started) * 1000.0)
        return committed

    def commit_paused(self, reason: str) -> bool:
        """The commit, for a caller that already holds the barrier (revocation, close). False when
        nothing was committed because a task failed (exactly_once_v2): the caller must abort."""
        if self._exactly_once and self._task_manager.failed():
            logger.info("Not committing (%s): a task failed, so the open transaction is aborted", reason)
            return False
        entries: list[TaskEntry] = self._task_manager.running()
        for entry in entries:
            entry.task.flush()
        self.send_collected()
        offsets: dict[TopicPartition, int] = {}
        metadata: dict[TopicPartition, str] = {}
        for entry in entries:
            offsets.update(entry.task.committable_offsets())
            metadata.update(entry.task.committable_metadata())
        if self._exactly_once:
            self._producer.flush()
            if not self._still_member():
                # Kafka's coordinator refuses a transactional offset commit of a stale group
                # generation (KIP-447); the port cannot carry the generation, so check here.
                # The next poll reports the partitions lost, and their new owner redoes the work.
                logger.warning("Not committing: this client was dropped from the group; aborting")
                return False
            if not self.in_transaction:
                self._begin_transaction()  # nothing was sent since a begin failed: commit offsets alone
            if offsets:
                self._producer.send_offsets_to_transaction(offsets, self._group_id, metadata)
            self._producer.commit_transaction()
            self.in_transaction = False
            # A failure to begin the next one is retried here and, past task.timeout.ms, raised; the
            # commit stands either way (recovery rewinds to it).
            self._begin_transaction()
        else:
            self._producer.flush()
            changed = {tp: o for tp, o in offsets.items() if self._committed.get(tp) != o}
            if changed:
                try:
                    self._consumer.commit(changed, metadata)
                except CommitFailedError as exc:
                    # The group dropped this member: its next poll reports the partitions lost and
                    # their new owner redoes the uncommitted work (at least once).
                    logger.warning("Commit refused, the partitions are being reassigned: %s", exc)
                    return False
                except ClusterError as exc:
                    if not exc.retriable:
                        raise
                    # Everything is sent; the offsets go with the next commit.
                    logger.warning("Committing offsets failed (%s); retrying at the next commit", exc)
                    return False
        self._committed.update(offsets)
        self._record_changelog_ends(entries)
        for entry in entries:
            entry.task.commit_requested = False
        logger.debug("Committed %d tasks (%s): %s", len(entries), reason, offsets)
        return True

    def _still_member(self) -> bool:
        """Whether the group still counts this client's consumer as a member. Where the
        coordinator fences stale transactional commits itself, it is not asked (that would cost
        a request per commit)."""
        if self._consumer.fences_stale_transactional_commits:
            return True
        member = self._consumer.member_id
        return bool(member) and member in self._consumer.group_assignment()

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

    def abort(self, begin_next: bool = True) -> None:
        """exactly_once_v2: abort the open transaction (a task failed mid-transaction, or a send or
        a commit failed) and, with ``begin_next``, open the next one. Transient failures are
        retried; a producer whose abort keeps failing is initialised again, which aborts whatever
        it left open. A fenced producer (its transaction outlived ``transaction.timeout.ms`` and the
        cluster aborted it) raises ``ProducerFencedError``, one that hit a fatal error
        ``FatalClientError``: neither can be used again (librdkafka refuses every later call), so
        the caller replaces it (the new one's initialisation aborts the transaction) and calls again.
        The caller has drained the record collector (nothing of the aborted transaction may be
        sent into the next one)."""
        if not self._exactly_once:
            return
        self.written.clear()
        if self.in_transaction:
            try:
                self._retry.call("abort_transaction", self._producer.abort_transaction, "a failed task")
            except (ProducerFencedError, FatalClientError):
                raise
            except ClusterError as exc:
                raise StreamsException(
                    f"Aborting the transaction failed: {exc}. The client cannot guarantee exactly-once "
                    "any more and stops; restart it (its successor resumes from the last commit)."
                ) from exc
            except StreamsException as exc:  # the abort kept failing for task.timeout.ms
                logger.warning("%s Initialising transactions again instead.", exc)
                self._reinitialise()
        self.in_transaction = False
        if begin_next:
            self._begin_transaction()

    def _reinitialise(self) -> None:
        """A new producer epoch: the cluster aborts this transactional id's open transaction."""
        self.in_transaction = False
        self._retry.call("init_transactions", self._producer.init_transactions, "after a failed abort")

    def abort_quietly(self) -> None:
        """Best effort on the way out of a failed client: abort the open transaction at once, never
        raising (if it fails, the cluster aborts it when ``transaction.timeout.ms`` passes, and no
        one can commit it: this producer is closed next)."""
        if not self._exactly_once or not self.in_transaction:
            return
        self.in_transaction = False
        self._collector.drain()
        try:
            self._producer.abort_transaction()
        except Exception as exc:
            logger.warning("Could not abort the open transaction on the way out (%s)", exc)

    @property
    def committed(self) -> Mapping[TopicPartition, int]:
        """The last committed offset of each input partition of the running tasks."""
        return self._committed

    def forget(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._committed.pop(tp, None)
