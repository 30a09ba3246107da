"""Task recovery: what the polling thread does when a task or a cluster call fails.

Kafka Streams' "task corrupted" and "task migrated" handling. A failed send, flush or commit, or a
failed task under exactly_once_v2, aborts the one open transaction and restarts every task from its
last commit, its state restored from the changelog (``rewind_all``): nothing is lost, nothing
counted twice. A failed task under at_least_once restarts alone (``revive``); one that fails again
at the same record restarts only after a growing delay (``RepeatedFailures``), its partitions paused
meanwhile. A producer that hit a fatal error is closed and replaced (``ProducerRenewal``); the new
one's initialisation fences the old one's transaction. An error that retrying cannot fix, or
failures without a successful commit for ``task.timeout.ms``, raise to the polling thread, which
ends and reports them to the uncaught exception handler.

Threads: the polling thread only (its loop and its rebalance callbacks). It shares the polling
thread's set of paused partitions (one object, used on that thread only).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kstreams.cluster.port import (
    AbortableTransactionError,
    ClusterError,
    CommitFailedError,
    FatalClientError,
    ProducerFencedError,
    RecordRejectedError,
    TopicPartition,
)
from kstreams.errors import StreamsException
from kstreams.processing.record_errors import skip_rejected
from kstreams.runtime.retry import FailureWindow, is_transient
from kstreams.runtime.tasks.barrier import barrier
from kstreams.runtime.tasks.task_manager import TaskEntry, TaskState
from kstreams.runtime.threads.repeated_failures import RepeatedFailures

if TYPE_CHECKING:
    from kstreams.runtime.threads.polling_parts import PollingParts

__all__ = ["TaskRecovery"]

logger = logging.getLogger(__name__)


class TaskRecovery:
    """Closes, revives and rewinds tasks for the polling thread (see the module docstring)."""

    def __init__(self, parts: PollingParts, paused: set[TopicPartition], tags: Mapping[str, str]) -> None:
        config = self._config = parts.config
        self._consumer = parts.consumer
        self._producer = parts.producer
        self._collector = parts.collector
        self._scheduler = parts.scheduler
        self._tasks = parts.task_manager
        self._state_updater = parts.state_updater
        self._committer = parts.committer
        self._retry = parts.retry
        self._paused = paused
        # Failures of sends and commits without a success in between.
        self._commit_failures = FailureWindow(parts.retry, "sending and committing")
        # Failed tasks whose restart waits (the failure repeats): task id -> (when, partitions).
        # Their partitions stay assigned and paused until then.
        self._delayed: dict[Any, tuple[float, list[TopicPartition]]] = {}
        metrics = parts.metrics
        self._dropped = metrics.sensor("dropped-records", "stream-thread-metrics", tags)
        repeated = metrics.sensor("repeated-task-failures", "stream-thread-metrics", tags)
        self._repeats = RepeatedFailures(
            int(config["retry.backoff.ms"]) / 1000.0, on_repeat=lambda delay: repeated.record()
        )
        metrics.gauge(
            "task-restart-backoff-ms",
            "stream-thread-metrics",
            tags,
            lambda: self._repeats.last_delay_s * 1000.0,
        )
        self._production_handler = config.production_exception_handler()
        self._partition_count = parts.partition_count

    def commit_succeeded(self) -> None:
        """A commit went through: the failure window of sends and commits starts again."""
        self._commit_failures.succeeded()

    def is_delayed(self, task_id: Any) -> bool:
        """Whether a failed task waits for its restart (its partitions stay paused)."""
        return task_id in self._delayed

    def recover(self, operation: str, exc: ClusterError) -> None:
        """A send, flush or commit failed: abort the transaction (exactly_once_v2) and rewind every
        task to the last commit, so that nothing is lost or counted twice. An error that retrying
        cannot fix, or failures without a successful commit for ``task.timeout.ms``, go to the
        uncaught exception handler instead."""
        if (
            isinstance(exc, RecordRejectedError)
            and not self._config.exactly_once
            and skip_rejected(
                self._production_handler, exc, self._collector, self._partition_count, self._dropped
            )
        ):
            return  # at_least_once: the handler goes on without the records the cluster refused
        fatal = isinstance(exc, FatalClientError)
        # A refused commit (the group moved on, e.g. a restarted coordinator forgot this member) is
        # Kafka Streams' TaskMigratedException: abort, rewind to the last commit, rejoin. An
        # abortable transaction error needs the same abort and rewind, and nothing more.
        migrated = isinstance(exc, (ProducerFencedError, CommitFailedError, AbortableTransactionError))
        if not (fatal or migrated or is_transient(exc)):
            raise StreamsException(
                f"{operation} failed with an error that retrying cannot fix: {exc}. "
                f"{self._uncommitted()} Fix the cause (e.g. a record larger than the broker accepts, "
                "a missing output topic) before restarting."
            ) from exc
        self._commit_failures.failed(operation, exc)
        logger.warning(
            "%s failed (%s): %s every task to its last commit",
            operation,
            exc,
            "aborting the transaction and rewinding" if self._config.exactly_once else "rewinding",
        )
        if fatal or isinstance(exc, ProducerFencedError):
            # A fenced producer never sends again (librdkafka declares it dead; Kafka Streams
            # resets its thread producer too): the new one's initialisation aborts its transaction.
            self._replace_producer()
        self.rewind_all()
        self._commit_failures.back_off()

    def _uncommitted(self) -> str:
        """What a failure that ends the thread leaves committed, under this guarantee."""
        if self._config.exactly_once:
            return (
                "The open transaction is aborted: nothing since the last commit is committed (no "
                "output record of it is ever visible to read_committed consumers, no input offset "
                "advances); after a restart those records are processed again."
            )
        return (
            "at_least_once has no transaction: output records sent since the last commit stay "
            "written, but the input offsets are not committed past the last commit, so after a "
            "restart those records are processed again and their output may be written twice."
        )

    def start(self, entry: TaskEntry) -> None:
        """A created task restores (unless it waits for its state directory, see retry_locked)."""
        if entry.state is TaskState.RESTORING:
            self._state_updater.add(entry)

    def close_dirty(self, entry: TaskEntry) -> None:
        """Close a task without committing (its thread failed or its partitions were lost)."""
        if entry.state.restoring:
            self._state_updater.remove(entry)
        self._tasks.remove(entry, clean=False)

    def revive(self, entry: TaskEntry, failed_at: tuple[str, int, int] | None = None) -> None:
        """Close a failed task dirty and recreate it from its last committed offsets: nothing is
        lost, and records processed since the last commit are processed again (at least once).
        A failure reported for a task that was rewound since (its entry replaced) needs nothing:
        the rewind already discarded what the failed run did.

        A task that fails again at the same record (``failed_at``) restarts only after a growing
        delay (``RepeatedFailures``); meanwhile its partitions stay paused."""
        if self._tasks.entry(entry.task_id) is not entry:
            return
        task_id = entry.task_id
        partitions = sorted(entry.buffers)
        delay = self._repeats.failed(task_id, failed_at)
        if self._config.exactly_once:
            # Its uncommitted output is inside the open transaction, together with every other
            # task's: abort it and rewind every task to the last commit (Kafka's "task corrupted").
            self.rewind_all(drop={task_id} if delay else None)
        else:
            self.close_dirty(entry)
            if not delay:
                self._rewind(partitions)
                self.start(self._tasks.create(task_id, partitions))
        if delay:
            self._paused.difference_update(partitions)  # not resumed by _resume_drained
            self._consumer.pause(partitions)
            self._delayed[task_id] = (time.monotonic() + delay, partitions)

    def start_delayed(self) -> None:
        """Restart the failed tasks whose delay is over, from their last commit."""
        if not self._delayed:
            return
        now = time.monotonic()
        for task_id in [t for t, (due, _) in self._delayed.items() if due <= now]:
            _, partitions = self._delayed.pop(task_id)
            if self._tasks.entry(task_id) is not None:
                continue  # a rebalance created it meanwhile
            # Seek now, not at the failure: whatever the paused partitions fetched meanwhile
            # was dropped (no task to route it to).
            self._rewind(partitions)
            self.start(self._tasks.create(task_id, partitions))

    def forget_delayed(self, partitions: list[TopicPartition]) -> None:
        """Revoked or lost partitions: their delayed tasks are no longer this client's."""
        for task_id in self._tasks.tasks_for_partitions(partitions):
            self._delayed.pop(task_id, None)
            self._repeats.forget(task_id)

    def _replace_producer(self) -> None:
        """Close the producer that hit a fatal error and continue with a new one (Kafka Streams
        does the same rather than ending the client); its transaction is fenced by the new one."""
        logger.warning("The producer hit a fatal error: closing it and continuing with a new one")
        old = self._producer.current
        try:
            old.close()
        except Exception as exc:
            logger.info("Closing the failed producer raised (%s); dropping it", exc)
        self._committer.replace_producer(self._producer.renew())

    def _rewind(self, partitions: list[TopicPartition]) -> None:
        committed = self._retry.call(
            "committed", lambda: self._consumer.committed(partitions), "rewinding tasks to their last commit"
        )
        for tp in partitions:
            if tp in committed:
                self._consumer.seek(tp, committed[tp])
            elif self._config["auto.offset.reset"] == "earliest":
                self._consumer.seek_to_beginning([tp])
        self._paused.difference_update(partitions)
        self._consumer.resume(partitions)

    def rewind_all(self, drop: set[Any] | None = None, barrier_held: bool = False) -> None:
        """Abort the open transaction (exactly_once_v2) and restart every task from its last
        commit, its state restored from the changelog; the tasks in ``drop`` (lost or revoked) are
        closed and not restarted. Every task goes, not only a failed one: the one transaction
        holds all their uncommitted writes."""
        if not barrier_held:
            with barrier(self._scheduler, "an abort and rewind"):
                self.rewind_all(drop, barrier_held=True)
            return
        self._collector.drain()  # output of the aborted transaction: never sent
        try:
            self._committer.abort()
        except (FatalClientError, ProducerFencedError) as exc:
            # librdkafka declared the producer dead while aborting (e.g. INVALID_TXN_STATE), or the
            # cluster fenced it (its transaction outlived transaction.timeout.ms): a new producer's
            # initialisation aborts its transaction, as after any fatal producer error; then the
            # next transaction begins.
            logger.warning("Aborting the transaction failed (%s)", exc)
            self._replace_producer()
            self._committer.abort()
        entries = self._tasks.entries()
        for entry in entries:
            self.close_dirty(entry)
        kept = [entry for entry in entries if drop is None or entry.task_id not in drop]
        if kept:
            self._rewind([tp for entry in kept for tp in entry.buffers])
        for entry in kept:
            self.start(self._tasks.create(entry.task_id, sorted(entry.buffers)))
