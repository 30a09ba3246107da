"""The polling thread: the only thread that touches the main consumer and the producer.

Each turn it: polls a batch (rebalance callbacks run inside the poll), routes the records into
their tasks' input buffers, pauses partitions whose buffers are full and resumes drained ones,
moves the record collector's output into the producer, signals tasks with due wall-clock
punctuation, commits every ``commit.interval.ms`` (or when a task asks), hands restored tasks to
the task manager, and drains the failure queue that stream threads and the restore thread fill.

Faults: the polling thread survives what a Kafka client survives. A transient error of ``poll``
is retried at the next turn (with backoff) for up to ``task.timeout.ms``; a failed send, flush or
commit, or a failed task under exactly_once_v2, makes every task "corrupted": the open transaction
is aborted and every task restarts from its last commit with its state restored (``_rewind_all``),
its cluster calls retried the same way. Only an error that retrying cannot fix, or one that outlasts
``task.timeout.ms``, ends the thread and reaches the uncaught exception handler; on the way out
the open transaction is aborted, so nothing of it can ever commit.

Lock order: the polling thread takes no lock of its own across calls; it calls the task manager
(its lock), the scheduler and the compiled structures (leaf mutexes).
"""

from __future__ import annotations

import enum
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kstreams.cluster.port import (
    ERROR_NONE,
    AbortableTransactionError,
    ClusterError,
    CommitFailedError,
    FatalClientError,
    ProducerFencedError,
    RecordRejectedError,
    TopicPartition,
)
from kstreams.errors import StreamsException
from kstreams.runtime.barrier import barrier
from kstreams.runtime.record_errors import skip_rejected
from kstreams.runtime.repeated_failures import RepeatedFailures
from kstreams.runtime.retry import FailureWindow, is_transient
from kstreams.runtime.standby import StandbyPlacer
from kstreams.runtime.task_idling import resume_ready
from kstreams.runtime.task_manager import TaskEntry, TaskState

if TYPE_CHECKING:
    from kstreams.runtime.internal_topics.manager import SetupResult
    from kstreams.runtime.stream_thread import StreamThread
    from kstreams.runtime.streams_runtime import StreamsRuntime

__all__ = ["Failure", "FailureSource", "PollingThread", "RuntimeHooks"]

logger = logging.getLogger(__name__)

# Longest poll while some partitions are paused because their tasks' buffers are full.
PAUSED_POLL_S = 0.001


class FailureSource(enum.Enum):
    """Which kind of thread an exception came from."""

    STREAM = "stream"
    RESTORE = "restore"
    POLLING = "polling"


@dataclass(frozen=True)
class Failure:
    """An exception raised on another thread, queued for the polling thread to handle.
    ``replace_thread`` is False for a stream thread that a removal had picked before it failed:
    REPLACE_THREAD then revives its task but starts no thread in its place."""

    source: FailureSource
    exception: BaseException
    thread: StreamThread | None = None
    entry: TaskEntry | None = None
    replace_thread: bool = True


class RuntimeHooks(Protocol):
    """What the polling thread reports to the client (implemented by KafkaStreams)."""

    def on_rebalance_started(self) -> None: ...

    def on_rebalance_finished(self) -> None: ...

    def on_failure(self, failure: Failure) -> None: ...

    def on_application_error(self, code: int) -> None: ...

    def on_assignment(self) -> SetupResult:
        """Internal topic checks for this assignment (may raise to the handler)."""
        ...


class PollingThread(threading.Thread):
    """Runs the client's I/O loop; see the module docstring."""

    def __init__(self, name: str, runtime: StreamsRuntime, hooks: RuntimeHooks) -> None:
        super().__init__(name=name, daemon=True)
        self._runtime = runtime  # for the producer, which a fatal error replaces
        config = self._config = runtime.config
        consumer = self._consumer = runtime.consumer
        self._collector = runtime.collector
        self._scheduler = runtime.scheduler
        task_manager = self._tasks = runtime.task_manager
        state_updater = self._state_updater = runtime.state_updater
        self.committer = runtime.committer
        self._hooks = hooks
        self._topics = runtime.source_topics
        retry = self._retry = runtime.retry
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
        # Failures without a success in between: of sends and commits, and of polls.
        self._commit_failures = FailureWindow(retry, "sending and committing")
        self._poll_failures = FailureWindow(retry, "the main consumer")
        self._assignor = runtime.assignor
        self._standbys = StandbyPlacer(self._assignor, consumer, task_manager, state_updater)
        self._deferred: set[TopicPartition] = set()  # assigned, but their task cannot run yet
        # Failed tasks whose restart waits (the failure repeats): task id -> (when, partitions).
        # Their partitions stay assigned and paused until then.
        self._delayed: dict[Any, tuple[float, list[TopicPartition]]] = {}
        self._application_error = ERROR_NONE  # a member asked the application to stop
        tags = {"thread-id": name}
        metrics = runtime.metrics
        self.poll_sensor = metrics.sensor("poll", "stream-thread-metrics", tags)
        self.poll_records = metrics.sensor(
            "poll-records", "stream-thread-metrics", tags, total=False, rate=False, avg=True, max_=True
        )
        self.send_sensor = metrics.sensor("send", "stream-thread-metrics", tags)
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
        self._production_handler = config.production_exception_handler()
        self._partition_count = runtime.partition_count
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
            self._recover("send", exc)
            sent = 0
        if sent:
            self.send_sensor.record(sent, sent)
        running = self._tasks.running()
        resume_ready(running, self._scheduler)
        self._signal_punctuations(running)
        self._drain_failures()
        self._start_delayed()
        try:
            self._maybe_commit(running)
        except ClusterError as exc:
            self._recover("commit", exc)
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
        while True:
            try:
                entry = self._restored.get_nowait()
            except queue.Empty:
                return
            if self._tasks.entry(entry.task_id) is not entry:
                continue
            try:
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
                self._commit_failures.succeeded()
            elif self._config.exactly_once and not self._tasks.failed():
                # Dropped from the group: the open transaction must not live on (a failed task's
                # own abort comes with its failure, drained next turn).
                self._rewind_all()

    def _recover(self, operation: str, exc: ClusterError) -> None:
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
        if fatal:
            self._replace_producer()
        self._rewind_all()
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
                self._rewind_all(drop=set(affected), barrier_held=True)
            else:
                for task_id in affected:
                    entry = self._tasks.entry(task_id)
                    if entry is not None:
                        if entry.state.restoring:
                            self._state_updater.remove(entry)
                        self._tasks.remove(entry, clean=committed and entry.state is TaskState.RUNNING)
        self._paused.difference_update(partitions)
        self._deferred.difference_update(partitions)
        self._forget_delayed(partitions)
        self.committer.forget(partitions)

    def on_lost(self, partitions: list[TopicPartition]) -> None:
        self._start_rebalance()
        lost = set(self._tasks.tasks_for_partitions(partitions))
        if self._config.exactly_once and any(self._tasks.entry(t) is not None for t in lost):
            # The open transaction holds the lost tasks' uncommitted work, which their new owner
            # redoes: abort it, and rewind the tasks that stay here as well.
            self._rewind_all(drop=lost)
        for task_id in lost:
            entry = self._tasks.entry(task_id)
            if entry is not None:
                self.close_dirty(entry)
        self._paused.difference_update(partitions)
        self._deferred.difference_update(partitions)
        self._forget_delayed(partitions)
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
            if self._tasks.entry(task_id) is not None or task_id in self._delayed:
                continue  # running, or restarted when its failure's delay is over
            if task_id.partition >= runnable.get(task_id.subtopology, task_id.partition + 1):
                self._deferred.update(tps)
                continue
            self._assigned_at[task_id] = time.monotonic()
            self._start(self._tasks.create(task_id, tps, standby=self._standbys.take(task_id)))
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

    def _start(self, entry: TaskEntry) -> None:
        """A created task restores (unless it waits for its state directory, see retry_locked)."""
        if entry.state is TaskState.RESTORING:
            self._state_updater.add(entry)

    def on_assignment_error(self, code: int) -> None:
        if code != ERROR_NONE:
            self._application_error = code
            self._hooks.on_application_error(code)

    # -- failures and shutdown ------------------------------------------------------------------

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
            self._rewind_all(drop={task_id} if delay else None)
        else:
            self.close_dirty(entry)
            if not delay:
                self._rewind(partitions)
                self._start(self._tasks.create(task_id, partitions))
        if delay:
            self._paused.difference_update(partitions)  # not resumed by _resume_drained
            self._consumer.pause(partitions)
            self._delayed[task_id] = (time.monotonic() + delay, partitions)

    def _start_delayed(self) -> None:
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
            self._start(self._tasks.create(task_id, partitions))

    def _forget_delayed(self, partitions: list[TopicPartition]) -> None:
        """Revoked or lost partitions: their delayed tasks are no longer this client's."""
        for task_id in self._tasks.tasks_for_partitions(partitions):
            self._delayed.pop(task_id, None)
            self._repeats.forget(task_id)

    def _replace_producer(self) -> None:
        """Close the producer that hit a fatal error and continue with a new one (Kafka Streams
        does the same rather than ending the client); its transaction is fenced by the new one."""
        logger.warning("The producer hit a fatal error: closing it and continuing with a new one")
        old = self._runtime.producer
        try:
            old.close()
        except Exception as exc:
            logger.info("Closing the failed producer raised (%s); dropping it", exc)
        self.committer.replace_producer(self._runtime.renew_producer())

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

    def _rewind_all(self, drop: set[Any] | None = None, barrier_held: bool = False) -> None:
        """Abort the open transaction (exactly_once_v2) and restart every task from its last
        commit, its state restored from the changelog; the tasks in ``drop`` (lost or revoked) are
        closed and not restarted. Every task goes, not only a failed one: the one transaction
        holds all their uncommitted writes."""
        if not barrier_held:
            with barrier(self._scheduler, "an abort and rewind"):
                self._rewind_all(drop, barrier_held=True)
            return
        self._collector.drain()  # output of the aborted transaction: never sent
        try:
            self.committer.abort()
        except FatalClientError as exc:
            # librdkafka declared the producer dead while aborting (e.g. INVALID_TXN_STATE): a new
            # producer's initialisation fences it and aborts its transaction, as after any fatal
            # producer error; then the next transaction begins.
            logger.warning("Aborting the transaction failed (%s)", exc)
            self._replace_producer()
            self.committer.abort()
        entries = self._tasks.entries()
        for entry in entries:
            self.close_dirty(entry)
        kept = [entry for entry in entries if drop is None or entry.task_id not in drop]
        if kept:
            self._rewind([tp for entry in kept for tp in entry.buffers])
        for entry in kept:
            self._start(self._tasks.create(entry.task_id, sorted(entry.buffers)))

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
                self._runtime.producer.flush()
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
