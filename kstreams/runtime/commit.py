"""Committing all tasks at once (seeds/003 "Committing Active Tasks").

Run by the polling thread only. The procedure: stop every stream thread at the scheduler's barrier,
flush the caches and stores of all running tasks (their changelog and downstream records land in
the record collector), drain the collector into the producer and flush it, then commit the input
offsets — with the consumer (at_least_once) or inside the producer's transaction (exactly_once_v2)
— write checkpoints, and let the stream threads go again.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from kstreams._native.record_collector import RecordCollector
from kstreams._native.scheduler import TaskScheduler
from kstreams.cluster.port import CommitFailedError, Consumer, Producer, TopicPartition
from kstreams.errors import StreamsException

if TYPE_CHECKING:
    from kstreams.runtime.metrics import Sensor
    from kstreams.runtime.task_manager import TaskEntry, TaskManager

__all__ = ["Committer", "send_collected"]

logger = logging.getLogger(__name__)

BARRIER_TIMEOUT_S = 60.0


def send_collected(collector: RecordCollector, producer: Producer) -> int:
    """Move every buffered output record from the collector to the producer; returns the count."""
    sent = 0
    for topic, partition, batch in collector.drain():
        producer.send(topic, partition, batch)
        sent += len(batch)
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
        send_collected(self._collector, self._producer)
        offsets: dict[TopicPartition, int] = {}
        for entry in entries:
            offsets.update(entry.task.committable_offsets())
        if self._exactly_once:
            self._producer.flush()
            if offsets:
                self._producer.send_offsets_to_transaction(offsets, self._group_id)
            self._producer.commit_transaction()
            self._producer.begin_transaction()
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
        self._committed.update(offsets)
        for entry in entries:
            entry.task.commit_requested = False
            post_commit = getattr(entry.task, "post_commit", None)
            if post_commit is not None:
                post_commit()
        logger.debug("Committed %d tasks (%s): %s", len(entries), reason, offsets)

    def abort(self) -> None:
        """exactly_once_v2: abort the open transaction (a task failed mid-transaction)."""
        if self._exactly_once and self.in_transaction:
            self._producer.abort_transaction()
            self._producer.begin_transaction()

    def forget(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._committed.pop(tp, None)
