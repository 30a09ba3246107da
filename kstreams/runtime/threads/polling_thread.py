"""The polling thread: the only thread that touches the main consumer and the producer.

Each turn it: polls a batch (rebalance callbacks run inside the poll), routes the records into
their tasks' input buffers, pauses partitions whose buffers are full and resumes drained ones,
moves the record collector's output into the producer, signals tasks with due wall-clock
punctuation, commits every ``commit.interval.ms`` (or when a task asks), hands restored tasks to
the task manager, and drains the failure queue that stream threads and the restore thread fill.

Faults: the polling thread survives what a Kafka client survives. A transient error of ``poll``
is retried at the next turn (with backoff) for up to ``task.timeout.ms``; a failed send, flush or
commit, or a failed task under exactly_once_v2, makes every task "corrupted": the open transaction
is aborted and every task restarts from its last commit with its state restored
(``task_recovery.TaskRecovery``, which holds the failure handling), its cluster calls retried the
same way. Only an error that retrying cannot fix, or one that outlasts ``task.timeout.ms``, ends
the thread and reaches the uncaught exception handler; on the way out the open transaction is
aborted, so nothing of it can ever commit.

Its parts come in ``PollingParts`` (``polling_parts``), built by ``StreamsRuntime``; the rebalance
callbacks stay here with the loop because both change the same per-partition state (paused,
deferred and delayed partitions) on this thread.

Lock order: the polling thread takes no lock of its own across calls; it calls the task manager
(its lock), the scheduler and the compiled structures (leaf mutexes).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from kstreams.cluster.port import (
    ERROR_NONE,
    ClusterError,
    OffsetAndMetadata,
    TopicPartition,
)
from kstreams.errors import StreamsException
from kstreams.runtime.assignment.standby_placement import StandbyPlacer
from kstreams.runtime.retry import FailureWindow, is_transient
from kstreams.runtime.tasks.barrier import barrier
from kstreams.runtime.tasks.task_manager import TaskEntry, TaskState
from kstreams.runtime.threads.polling_parts import Failure, FailureSource, PollingParts, RuntimeHooks
from kstreams.runtime.threads.task_idling import resume_ready
from kstreams.runtime.threads.task_recovery import TaskRecovery

__all__ = ["PollingThread"]

logger = logging.getLogger(__name__)

# Longest poll while some partitions are paused because their tasks' buffers are full.
PAUSED_POLL_S = 0.001


class PollingThread(threading.Thread):
    """Runs the client's I/O loop; see the module docstring."""

    def __init__(self, name: str, parts: PollingParts, hooks: RuntimeHooks) -> None:
        super().__init__(name=name, daemon=True)
        self._producer = parts.producer  # a fatal error replaces the producer
        config = self._config = parts.config
        consumer = self._consumer = parts.consumer
        self._collector = parts.collector
        self._scheduler = parts.scheduler
        task_manager = self._tasks = parts.task_manager
        state_updater = self._state_updater = parts.state_updater
        self.committer = parts.committer
        self._purger = parts.purger
        self._hooks = hooks
        self._topics = parts.source_topics
        retry = self._retry = parts.retry
        self._stop_event = retry.stop
        self._failures: queue.SimpleQueue[Failure] = queue.SimpleQueue()
        self._restored: queue.SimpleQueue[TaskEntry] = queue.SimpleQueue()
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], threading.Event, list[Any]]] = (
            queue.SimpleQueue()
        )
        self._paused: set[TopicPartition] = set()
        self._buffer_bound = int(config["buffered.records.per.partition"])
        self._max_poll_records = int(config["max.poll.records"])
        self._poll_s = int(config["poll.ms"]) / 1000.0
        self._commit_interval_s = config.commit_interval_ms / 1000.0
        self._last_commit = time.monotonic()
        self._cleanup_delay_ms = int(config["state.cleanup.delay.ms"])
        self._last_cleanup = time.monotonic()
        self._in_rebalance = False
        self._followup_at: float | None = None
        self._abandoned = False
        # Failures of polls without a success in between.
        self._poll_failures = FailureWindow(retry, "the main consumer")
        self._assignor = parts.assignor
        self._standbys = StandbyPlacer(self._assignor, consumer, task_manager, state_updater)
        self._deferred: set[TopicPartition] = set()  # assigned, but their task cannot run yet
        self._application_error = ERROR_NONE  # a member asked the application to stop
        tags = {"thread-id": name}
        metrics = parts.metrics
        self.poll_sensor = metrics.sensor("poll", "stream-thread-metrics", tags)
        self.poll_records = metrics.sensor(
            "poll-records", "stream-thread-metrics", tags, total=False, rate=False, avg=True, max_=True
        )
        self.send_sensor = metrics.sensor("send", "stream-thread-metrics", tags)
        # Failed tasks and failed sends and commits: rewinds to the last commit. It shares the set
        # of paused partitions (a delayed task's stay paused; a rewound one's resume).
        self._recovery = TaskRecovery(parts, self._paused, tags)
        # A task's time without processing when it comes here: from its assignment to running.
        self._handover = metrics.sensor(
            "task-handover-latency",
            "stream-thread-metrics",
            tags,
            total=False,
            rate=False,
            avg=True,
            max_=True,
        )
        self._assigned_at: dict[Any, float] = {}
        # A KafkaCluster member assigned by its assignor over the control topic: how long it has
        # waited for a settled assignment (0 when it has one), as Kafka's consumer-coordinator-metrics.
        if hasattr(type(consumer), "assignment_wait_seconds"):
            metrics.gauge(
                "assignment-wait-seconds",
                "consumer-coordinator-metrics",
                tags,
                lambda: consumer.assignment_wait_seconds,  # type: ignore[attr-defined]
            )
        self.closed_cleanly = False
        # True while this thread is in (or about to enter) a poll that may wait: work handed to
        # it meanwhile wakes the poll up (``_wake``), so nothing waits for a poll.ms.
        self._waiting = False

    # -- other threads ----------------------------------------------------------------------

    def report(self, failure: Failure) -> None:
        self._failures.put(failure)
        self._wake()

    def restored(self, entry: TaskEntry) -> None:
        self._restored.put(entry)
        self._wake()

    def output_ready(self) -> None:
        """A stream thread processed records: their output goes out now, not after a poll.ms."""
        if len(self._collector):
            self._wake()

    def _wake(self) -> None:
        if self._waiting:
            self._consumer.wakeup()

    def call(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        """Run ``fn`` on the polling thread between turns and return its result (or raise)."""
        if threading.current_thread() is self:
            return fn()
        done = threading.Event()
        result: list[Any] = []
        self._calls.put((fn, done, result))
        self._wake()
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done.wait(0.05):
            if not self.is_alive() and not done.is_set():
                raise StreamsException("The polling thread stopped before it ran the request")
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"The polling thread did not run the request within {timeout}s")
        if result and isinstance(result[0], BaseException):
            raise result[0]
        return result[0] if result else None

    def request_stop(self) -> None:
        self._stop_event.set()
        self._wake()

    def abandon(self) -> None:
        """Stop without committing, closing tasks or leaving the group: what a crashed process
        leaves behind (tests use it to prove that a successor loses nothing)."""
        self._abandoned = True
        self._stop_event.set()
        self._wake()

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> None:
        logger.info("Polling thread %s started", self.name)
        try:
            self.committer.begin()
            self._consumer.subscribe(self._topics, _Listener(self), self._assignor)
            while not self._stop_event.is_set():
                self._turn()
            if not self._abandoned:
                self._shutdown_clean()
            else:
                self._drop_tasks()
        except BaseException as exc:  # reported to the uncaught exception handler
            logger.error("Polling thread %s failed", self.name, exc_info=exc)
            # Nothing of the open transaction may ever commit: abort it before anyone decides.
            self.committer.abort_quietly()
            self._hooks.on_failure(Failure(FailureSource.POLLING, exc))
        finally:
            logger.info("Polling thread %s stopped", self.name)

    def _turn(self) -> None:
        self._run_calls()
        self._drain_restored()
        for entry in self._tasks.retry_locked():
            self._state_updater.add(entry)
        # Full buffers paused their partitions: a long poll would sleep through the stream
        # threads draining them (resumed only between polls), so fetching would stall.
        timeout = min(self._poll_s, PAUSED_POLL_S) if self._paused else self._poll_s
        # Set before looking for work (output to send included): whoever hands work over after
        # the look sees it set and wakes the poll up.
        self._waiting = True
        if self._has_work():
            timeout = 0.0
        try:
            polled = self._poll(timeout)
        finally:
            self._waiting = False
        self.poll_sensor.record()
        if self._in_rebalance:
            self._finish_rebalance()
        if polled:
            count = 0
            for tp, batch in polled:
                length = self._tasks.route(tp, batch)
                count += len(batch)
                if length >= self._buffer_bound:
                    self._consumer.pause([tp])
                    self._paused.add(tp)
            self.poll_records.record(count)
            self._scheduler.notify()
        self._resume_drained()
        try:
            sent = self.committer.send_collected()
        except ClusterError as exc:
            self._recovery.recover("send", exc)
            sent = 0
        if sent:
            self.send_sensor.record(sent, sent)
        running = self._tasks.running()
        resume_ready(running, self._scheduler)
        self._signal_punctuations(running)
        self._drain_failures()
        self._recovery.start_delayed()
        try:
            self._maybe_commit(running)
        except ClusterError as exc:
            self._recovery.recover("commit", exc)
        self._maybe_clean_state()
        if self._followup_at is not None and time.monotonic() >= self._followup_at:
            # Autoscaling grew topics (or must retry): rebalance so the new partitions are assigned.
            self._followup_at = None
            self._consumer.request_rejoin()

    def _has_work(self) -> bool:
        """Work other threads handed over since this turn began (or output to send)."""
        return bool(
            len(self._collector)
            or not self._restored.empty()
            or not self._calls.empty()
            or not self._failures.empty()
            or self._stop_event.is_set()
        )

    def _run_calls(self) -> None:
        while True:
            try:
                fn, done, result = self._calls.get_nowait()
            except queue.Empty:
                return
            try:
                result.append(fn())
            except BaseException as exc:  # handed back to the caller
                result.append(exc)
            done.set()

    def _poll(self, timeout: float) -> list[Any]:
        """One poll; a transient error is retried at the next turn, after a backoff, until it has
        lasted ``task.timeout.ms`` (a Kafka consumer retries such errors by itself)."""
        try:
            polled = self._consumer.poll(timeout, self._max_poll_records)
        except ClusterError as exc:
            if not is_transient(exc):
                raise
            self._poll_failures.failed("poll", exc)
            logger.warning(
                "Polling the main consumer failed (attempt %d), retrying: %s",
                self._poll_failures.attempts,
                exc,
            )
            self._poll_failures.back_off()
            return []
        self._poll_failures.succeeded()
        return polled

    def _drain_restored(self) -> None:
        restored: list[TaskEntry] = []
        while True:
            try:
                entry = self._restored.get_nowait()
            except queue.Empty:
                break
            if self._tasks.entry(entry.task_id) is entry:
                restored.append(entry)
        if not restored:
            return
        committed: dict[TopicPartition, OffsetAndMetadata] = {}
        lookup: Exception | None = None
        try:
            # Each task starts from the partition times committed with its offsets (Kafka's
            # initializeTaskTime): one request for every task restored meanwhile.
            partitions = sorted(tp for entry in restored for tp in entry.buffers)
            committed = self._retry.call(
                "committed",
                lambda: self._consumer.committed_with_metadata(partitions),
                "initializing the restored tasks' stream time",
            )
        except Exception as exc:
            lookup = exc
        for entry in restored:
            try:
                if lookup is not None:
                    raise lookup
                entry.task.initialize_metadata(
                    {tp: committed[tp].metadata for tp in entry.buffers if tp in committed}
                )
                self._tasks.activate(entry)
                assigned_at = self._assigned_at.pop(entry.task_id, None)
                if assigned_at is not None:
                    waited_ms = (time.monotonic() - assigned_at) * 1000
                    self._handover.record(waited_ms)
                    logger.info(
                        "Task %s processes %.0f ms after it was assigned here", entry.task_id, waited_ms
                    )
            except Exception as exc:  # a processor's init() raised: the task fails, not the thread
                logger.error("Task %s could not start processing", entry.task_id, exc_info=exc)
                self._hooks.on_failure(Failure(FailureSource.RESTORE, exc, None, entry))

    def _drain_failures(self) -> None:
        while True:
            try:
                failure = self._failures.get_nowait()
            except queue.Empty:
                return
            self._hooks.on_failure(failure)

    def _resume_drained(self) -> None:
        if not self._paused:
            return
        resume = []
        for tp in self._paused:
            buffer = self._tasks.buffer_for(tp)
            if buffer is None or len(buffer) < self._buffer_bound // 2:
                resume.append(tp)
        if resume:
            self._paused.difference_update(resume)
            live = [tp for tp in resume if self._tasks.buffer_for(tp) is not None]
            if live:
                self._consumer.resume(live)

    def _signal_punctuations(self, running: list[TaskEntry]) -> None:
        now_ms = int(time.time() * 1000)
        for entry in running:
            due = entry.task.next_wall_clock_punctuation_ms()
            if due is not None and due <= now_ms:
                self._scheduler.signal(entry.handle)

    def _maybe_clean_state(self) -> None:
        """Every ``state.cleanup.delay.ms``, delete the state directories of tasks that no client
        has held for that long (Kafka's state cleaner)."""
        now = time.monotonic()
        if now - self._last_cleanup < self._cleanup_delay_ms / 1000.0:
            return
        self._last_cleanup = now
        try:
            self._tasks.state_directory.clean_unlocked(self._cleanup_delay_ms)
        except OSError as exc:  # a directory that cannot be deleted now is tried again next time
            logger.warning("Could not clean obsolete state directories: %s", exc)

    def _maybe_commit(self, running: list[TaskEntry]) -> None:
        now = time.monotonic()
        if self._consumer.rebalancing:
            return  # the group would refuse it; committed once the member joined the new generation
        requested = any(e.task.commit_requested for e in running)
        if requested or now - self._last_commit >= self._commit_interval_s:
            committed = self.committer.commit_all("requested" if requested else "interval")
            self._last_commit = time.monotonic()
            if committed:
                self._recovery.commit_succeeded()
                self._purger.after_commit(self.committer.committed)
            elif self._config.exactly_once and not self._tasks.failed():
                # Dropped from the group: the open transaction must not live on (a failed task's
                # own abort comes with its failure, drained next turn).
                self._recovery.rewind_all()

    # -- rebalances (inside consumer.poll) ------------------------------------------------------

    def _start_rebalance(self) -> None:
        if not self._in_rebalance:
            self._in_rebalance = True
            self._hooks.on_rebalance_started()

    def _finish_rebalance(self) -> None:
        if self._state_updater.restoring_count() == 0 and not self._has_unrestored():
            self._in_rebalance = False
            self._hooks.on_rebalance_finished()

    def _has_unrestored(self) -> bool:
        return any(e.state is not TaskState.RUNNING for e in self._tasks.entries())

    def on_revoked(self, partitions: list[TopicPartition]) -> None:
        self._start_rebalance()
        affected = self._tasks.tasks_for_partitions(partitions)
        if not affected:
            return
        with barrier(self._scheduler, "a revocation"):
            try:
                committed = self.committer.commit_paused("revocation")
                self.committer.send_collected()
            except ClusterError as exc:
                # The revoked tasks' new owners redo what was not committed here.
                logger.warning("Committing for a revocation failed (%s); closing the tasks dirty", exc)
                committed = False
            if not committed and (self._config.exactly_once or self._tasks.failed()):
                self._recovery.rewind_all(drop=set(affected), barrier_held=True)
            else:
                for task_id in affected:
                    entry = self._tasks.entry(task_id)
                    if entry is not None:
                        if entry.state.restoring:
                            self._state_updater.remove(entry)
                        self._tasks.remove(entry, clean=committed and entry.state is TaskState.RUNNING)
        self._paused.difference_update(partitions)
        self._deferred.difference_update(partitions)
        self._recovery.forget_delayed(partitions)
        self.committer.forget(partitions)

    def on_lost(self, partitions: list[TopicPartition]) -> None:
        self._start_rebalance()
        lost = set(self._tasks.tasks_for_partitions(partitions))
        if self._config.exactly_once and any(self._tasks.entry(t) is not None for t in lost):
            # The open transaction holds the lost tasks' uncommitted work, which their new owner
            # redoes: abort it, and rewind the tasks that stay here as well.
            self._recovery.rewind_all(drop=lost)
        for task_id in lost:
            entry = self._tasks.entry(task_id)
            if entry is not None:
                self.close_dirty(entry)
        self._paused.difference_update(partitions)
        self._deferred.difference_update(partitions)
        self._recovery.forget_delayed(partitions)
        self.committer.forget(partitions)

    def on_assigned(self, partitions: list[TopicPartition]) -> None:
        self._start_rebalance()
        if self._application_error != ERROR_NONE:
            # The application is shutting down: no new task starts, so none processes the record
            # that made a member ask for the shutdown (its partition comes here when it leaves).
            logger.info(
                "Not starting tasks for %s: the application is shutting down", sorted(map(str, partitions))
            )
            self._consumer.pause(sorted(partitions))
            return
        result = self._hooks.on_assignment()
        if result.followup_rebalance:
            self._followup_at = time.monotonic() + float(result.followup_delay_s)
        if self._assignor.received.probing_rebalance:
            # Warm-ups were placed: a probing rebalance moves their tasks once they caught up.
            probe_at = time.monotonic() + self._assignor.probing_interval_s
            self._followup_at = min(self._followup_at or probe_at, probe_at)
        # While autoscaling expands a subtopology's internal topics, only the tasks whose changelog
        # and repartition partitions exist may run; the others wait (paused) for a later assignment.
        runnable: dict[int, int] = result.task_counts
        previously_deferred = set(self._deferred)
        candidates = sorted(set(partitions) | previously_deferred)
        self._deferred.clear()
        gained = self._tasks.tasks_for_partitions(candidates)
        self._assignor.promoted({t for t in gained if self._tasks.entry(t) is None})
        for task_id, tps in gained.items():
            if self._tasks.entry(task_id) is not None or self._recovery.is_delayed(task_id):
                continue  # running, or restarted when its failure's delay is over
            if task_id.partition >= runnable.get(task_id.subtopology, task_id.partition + 1):
                self._deferred.update(tps)
                continue
            self._assigned_at[task_id] = time.monotonic()
            self._recovery.start(self._tasks.create(task_id, tps, standby=self._standbys.take(task_id)))
        self._standbys.rebalanced()
        if self._deferred:
            logger.info(
                "Deferring partitions %s until their internal topics are expanded",
                sorted(str(tp) for tp in self._deferred),
            )
            self._consumer.pause(sorted(self._deferred))
        ready = sorted(previously_deferred - self._deferred)
        if ready:
            self._consumer.resume(ready)

    def on_assignment_error(self, code: int) -> None:
        if code != ERROR_NONE:
            self._application_error = code
            self._hooks.on_application_error(code)

    # -- failures and shutdown ------------------------------------------------------------------

    def close_dirty(self, entry: TaskEntry) -> None:
        """Close a task without committing (its thread failed or its partitions were lost)."""
        self._recovery.close_dirty(entry)

    def revive(self, entry: TaskEntry, failed_at: tuple[str, int, int] | None = None) -> None:
        """Restart a failed task from its last commit (``TaskRecovery.revive``)."""
        self._recovery.revive(entry, failed_at)

    def _shutdown_clean(self) -> None:
        """Commit and close every task, then leave the group. When a task failed under
        exactly_once_v2, or the final commit fails, nothing is committed: the transaction is
        aborted and every task closed dirty (its successor resumes from the last commit)."""
        with barrier(self._scheduler, "the final commit"):
            try:
                committed = self.committer.commit_paused("close")
            except ClusterError as exc:
                logger.warning("The final commit failed (%s); closing every task dirty", exc)
                committed = False
            if not committed:
                self._collector.drain()
                try:
                    self.committer.abort(begin_next=False)
                except Exception as exc:
                    logger.warning("Could not abort the open transaction on close (%s)", exc)
                    self.committer.abort_quietly()
            for entry in self._tasks.entries():
                if entry.state.restoring:
                    self._state_updater.remove(entry)
                self._tasks.remove(entry, clean=committed and entry.state is TaskState.RUNNING)
        if committed:
            try:
                self._producer.current.flush()
            except ClusterError as exc:
                logger.warning("Flushing the producer on close failed: %s", exc)
        self.closed_cleanly = committed

    def _drop_tasks(self) -> None:
        """After ``abandon``: close every task dirty, as a crash would leave them — nothing is
        flushed or checkpointed — and release their state directories for a successor."""
        for entry in self._tasks.entries():
            if entry.state.restoring:
                self._state_updater.remove(entry)
        self._tasks.close_all(clean=False)


class _Listener:
    """Adapts the port's GroupListener callbacks to the polling thread."""

    def __init__(self, thread: PollingThread) -> None:
        self._thread = thread

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self._thread.on_revoked(partitions)

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self._thread.on_assigned(partitions)

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self._thread.on_lost(partitions)

    def on_assignment_error(self, code: int) -> None:
        self._thread.on_assignment_error(code)
