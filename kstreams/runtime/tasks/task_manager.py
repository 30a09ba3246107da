"""The task manager: this client's active tasks, their input buffers, and their scheduling.

Tasks are created and closed by the polling thread (rebalance callbacks, failures); stream threads
look tasks up by scheduler handle. A task is either restoring (owned by the state updater's restore
thread) or running (registered with the scheduler, processed by whichever stream thread holds its
lock), never both.

Local state: a task holds its directory's lock (``StateDirectory``) from creation to close, so two
clients never open one task's persistent stores. A task whose directory another client still holds
waits in state LOCKED (its input buffers fill meanwhile) and is created by ``retry_locked`` once
the lock is free. Its ``TaskCheckpoint`` decides where restoration starts and is written on a
clean close (see ``checkpoints``). Standby tasks are created here too, and recycled into active
tasks when their task is assigned to this client.

Lock order: ``TaskManager._lock`` is taken before the scheduler's internal mutex and never while a
task is being processed; it guards only the dictionaries below.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kstreams._native.record_batch import RecordBatch
from kstreams._native.record_buffer import RecordBuffer
from kstreams._native.record_collector import RecordCollector
from kstreams._native.scheduler import TaskScheduler
from kstreams.cluster.port import TopicPartition
from kstreams.config import StreamsConfig
from kstreams.errors import LockException
from kstreams.metrics import MetricsRegistry
from kstreams.processing.task import StreamTask
from kstreams.processor import TaskId
from kstreams.runtime.tasks.checkpoints import TaskCheckpoint
from kstreams.runtime.tasks.standby import StandbyTask
from kstreams.state.directory import StateDirectory
from kstreams.state.store import StateStore
from kstreams.topology.plan import TopologyPlan

__all__ = ["TaskEntry", "TaskManager", "TaskState"]

logger = logging.getLogger(__name__)


class TaskState(enum.Enum):
    """Where an active task is in its life; only RUNNING tasks are scheduled."""

    LOCKED = "LOCKED"  # waiting for another client to release the task directory
    RESTORING = "RESTORING"  # owned by the restore thread
    RUNNING = "RUNNING"
    FAILED = "FAILED"  # its processing raised; a stream thread marked it before releasing it
    CLOSED = "CLOSED"

    @property
    def restoring(self) -> bool:
        """Not yet processing (waiting for its directory or restoring): the restore thread may
        hold it, so closing it must take it from the restore thread first."""
        return self is TaskState.LOCKED or self is TaskState.RESTORING


LOCK_RETRY_S = 0.1


@dataclass(eq=False)
class TaskEntry:
    """One active task with its per-partition input buffers and scheduler handle."""

    task: StreamTask
    handle: int
    buffers: dict[TopicPartition, RecordBuffer]
    checkpoint: TaskCheckpoint
    state: TaskState = TaskState.RESTORING
    # (partition, buffer) pairs in a fixed order, for the stream threads' merge by timestamp.
    ordered: list[tuple[TopicPartition, RecordBuffer]] = field(default_factory=list)
    # max.task.idle.ms in seconds (0: never wait) and the idling state (runtime/threads/task_idling.py).
    idle_s: float = 0.0
    idle_deadlines: dict[TopicPartition, float] = field(default_factory=dict)
    deferred: bool = False

    def __post_init__(self) -> None:
        self.ordered = sorted(self.buffers.items())

    @property
    def task_id(self) -> TaskId:
        return self.task.task_id

    def buffered(self) -> int:
        return sum(len(b) for b in self.buffers.values())


class TaskManager:
    """Creates, runs and closes the active tasks assigned to this client."""

    def __init__(
        self,
        plan: TopologyPlan,
        config: StreamsConfig,
        collector: RecordCollector,
        scheduler: TaskScheduler,
        partition_count: Callable[[str], int],
        state_dir: str,
        metrics: MetricsRegistry | None = None,
        client_id: str | None = None,
    ) -> None:
        self._plan = plan
        self._config = config
        self._idle_s = max(int(config["max.task.idle.ms"]), 0) / 1000.0
        self._collector = collector
        self._scheduler = scheduler
        self._partition_count = partition_count
        self._state_dir = state_dir
        self._metrics = metrics  # the client's, handed to each task for its stores' metrics
        self._client_id = client_id
        self.state_directory = StateDirectory(str(config["state.dir"]), config.application_id)
        self._exactly_once = config.exactly_once
        self._lock = threading.Lock()
        self._entries: dict[TaskId, TaskEntry] = {}
        # The client's global stores, given to every task it creates (set by the runtime).
        self.global_stores: dict[str, StateStore] = {}
        self._by_handle: dict[int, TaskEntry] = {}
        self._by_partition: dict[TopicPartition, tuple[TaskEntry, RecordBuffer]] = {}
        self._next_handle = 0
        self._last_lock_retry = 0.0

    # -- lookups (any thread) -------------------------------------------------------------

    def entry_for_handle(self, handle: int) -> TaskEntry | None:
        with self._lock:
            return self._by_handle.get(handle)

    def entries(self) -> list[TaskEntry]:
        with self._lock:
            return list(self._entries.values())

    def running(self) -> list[TaskEntry]:
        with self._lock:
            return [e for e in self._entries.values() if e.state is TaskState.RUNNING]

    def failed(self) -> list[TaskEntry]:
        """Tasks whose processing raised and that are not yet closed. Under the commit barrier this
        is exact: a stream thread marks its task failed before it releases it."""
        with self._lock:
            return [e for e in self._entries.values() if e.state is TaskState.FAILED]

    def entry(self, task_id: TaskId) -> TaskEntry | None:
        with self._lock:
            return self._entries.get(task_id)

    def task_ids(self) -> list[TaskId]:
        with self._lock:
            return sorted(self._entries)

    def buffer_for(self, partition: TopicPartition) -> RecordBuffer | None:
        with self._lock:
            found = self._by_partition.get(partition)
        return found[1] if found else None

    # -- the polling thread ---------------------------------------------------------------

    def route(self, partition: TopicPartition, batch: RecordBatch) -> int:
        """Push a polled batch into its task's buffer; returns the buffer's new length (-1 if the
        partition belongs to no task, which happens only between a revocation and its poll)."""
        found = self._by_partition.get(partition)
        if found is None:
            logger.debug("Dropping %d records of unassigned partition %s", len(batch), partition)
            return -1
        found[1].push(batch)
        return len(found[1])

    def tasks_for_partitions(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TaskId, list[TopicPartition]]:
        """Group input partitions by the task that reads them: subtopology of the topic, partition number."""
        grouped: dict[TaskId, list[TopicPartition]] = {}
        for tp in partitions:
            try:
                subtopology = self._plan.subtopology_for_topic(tp.topic)
            except KeyError:
                continue  # the control topic or a topic the topology no longer reads
            grouped.setdefault(TaskId(subtopology.id, tp.partition), []).append(tp)
        return grouped

    def create(
        self, task_id: TaskId, partitions: list[TopicPartition], standby: StandbyTask | None = None
    ) -> TaskEntry:
        """Create an active task and open its stores (processors are initialized after restoration).

        With ``standby`` (this client's standby of the task, already released by the restore
        thread) the standby's open, restored stores become the active task's. When another client
        holds the task directory, the entry waits in state LOCKED (see ``retry_locked``).
        """
        partitions = sorted(partitions)
        checkpoint: TaskCheckpoint
        state: TaskState
        if standby is not None and tuple(standby.partitions) == tuple(partitions):
            task = standby.task
            checkpoint = standby.checkpoint
            if self._exactly_once:
                # From now on the stores take writes of open transactions (see checkpoints).
                checkpoint.delete()
            state = TaskState.RESTORING
            logger.info("Recycled standby task %s into an active task", task_id)
        else:
            if standby is not None:
                standby.close()
            task = self._new_task(task_id, partitions)
            checkpoint = TaskCheckpoint(task_id, self.state_directory, self._exactly_once)
            state = TaskState.RESTORING if self._open(task, checkpoint) else TaskState.LOCKED
        buffers = {tp: RecordBuffer() for tp in partitions}
        with self._lock:
            handle = self._next_handle
            self._next_handle += 1
            entry = TaskEntry(task, handle, buffers, checkpoint, state, idle_s=self._idle_s)
            self._entries[task_id] = entry
            self._by_handle[handle] = entry
            for tp, buffer in buffers.items():
                self._by_partition[tp] = (entry, buffer)
        if state is TaskState.LOCKED:
            logger.warning("Task %s waits: another client still holds its state directory", task_id)
        else:
            logger.info("Created task %s for partitions %s", task_id, [str(p) for p in partitions])
        return entry

    def retry_locked(self) -> list[TaskEntry]:
        """Open the tasks that waited for their directory lock and got it; they now restore.
        Tried at most every ``LOCK_RETRY_S`` (each try opens the lock file)."""
        now = time.monotonic()
        if now - self._last_lock_retry < LOCK_RETRY_S:
            return []
        self._last_lock_retry = now
        opened = []
        for entry in self.entries():
            if entry.state is TaskState.LOCKED and self._open(entry.task, entry.checkpoint):
                with self._lock:
                    if self._entries.get(entry.task_id) is not entry:
                        continue
                    entry.state = TaskState.RESTORING
                logger.info("Task %s got its state directory; created", entry.task_id)
                opened.append(entry)
        return opened

    def create_standby(self, task_id: TaskId, partitions: list[TopicPartition]) -> StandbyTask | None:
        """A standby of the task with its stores open, or None when another client holds its
        directory (the next rebalance tries again)."""
        task = self._new_task(task_id, sorted(partitions))
        checkpoint = TaskCheckpoint(task_id, self.state_directory, self._exactly_once)
        if not self._open(task, checkpoint, standby=True):
            logger.info("No standby of task %s here: another client holds its state directory", task_id)
            return None
        logger.info("Created standby task %s", task_id)
        return StandbyTask(task, checkpoint, self.state_directory)

    def _new_task(self, task_id: TaskId, partitions: list[TopicPartition]) -> StreamTask:
        task = StreamTask(
            task_id,
            self._plan.subtopology(task_id.subtopology),
            partitions,
            self._config,
            self._collector,
            self._partition_count,
            self._state_dir,
            metrics=self._metrics,
            client_id=self._client_id,
        )
        task.global_stores = self.global_stores
        return task

    def _open(self, task: StreamTask, checkpoint: TaskCheckpoint, standby: bool = False) -> bool:
        """Lock the task directory, load the checkpoint and open the stores; False if locked."""
        try:
            self.state_directory.lock(task.task_id)
        except LockException:
            return False
        try:
            checkpoint.open(keep_file=standby)
            task.initialize()
            checkpoint.bind(task.changelog_partitions())
        except BaseException:
            self.state_directory.unlock(task.task_id)
            raise
        return True

    def is_stateful(self, task_id: TaskId) -> bool:
        """Whether the task has changelogged stores (and so may have standbys)."""
        return bool(self._plan.subtopology(task_id.subtopology).changelog_topics)

    def activate(self, entry: TaskEntry) -> None:
        """A restored task starts processing: its processors are initialized and it is scheduled."""
        entry.task.initialize_processors()
        with self._lock:
            if self._entries.get(entry.task_id) is not entry:
                return  # closed while it restored
            entry.state = TaskState.RUNNING
        self._scheduler.register(entry.handle, [b for _, b in entry.ordered])
        if entry.task.stream_time >= 0:
            # Stream time is known from the last commit: its due punctuations run before any
            # record (maybe_punctuate_stream_time), as Kafka punctuates every running task.
            self._scheduler.signal(entry.handle)
        self._scheduler.notify()
        logger.info("Task %s is running", entry.task_id)

    def remove(self, entry: TaskEntry, clean: bool) -> None:
        """Unschedule and close a task. The caller holds the commit barrier or the task is failed,
        so no stream thread processes it; a clean close has been committed already, and writes the
        task's checkpoint, as does closing a task that was still restoring. A dirty close of a
        processing task leaves the checkpoint of the last commit (at_least_once) or none
        (exactly_once_v2). The task directory is released either way."""
        if entry.state is TaskState.RUNNING or entry.state is TaskState.FAILED:
            self._scheduler.unregister(entry.handle)
        with self._lock:
            if self._entries.get(entry.task_id) is entry:
                del self._entries[entry.task_id]
            self._by_handle.pop(entry.handle, None)
            for tp in entry.buffers:
                if self._by_partition.get(tp, (None,))[0] is entry:
                    del self._by_partition[tp]
            locked_out = entry.state is TaskState.LOCKED
            # A restoring task's stores hold nothing but changelog records up to where the restore
            # thread left them (its checkpoint says where): worth keeping even on a dirty close.
            keep_checkpoint = clean or entry.state is TaskState.RESTORING
            entry.state = TaskState.CLOSED
        for buffer in entry.buffers.values():
            buffer.clear()
        if locked_out:
            logger.info("Dropped task %s, which never got its state directory", entry.task_id)
            return
        try:
            entry.task.close(clean)
            if keep_checkpoint:
                entry.checkpoint.write()
        except Exception:
            if clean:
                raise
            logger.warning(
                "Closing task %s dirty raised; its state is discarded", entry.task_id, exc_info=True
            )
        finally:
            self.state_directory.unlock(entry.task_id)
        logger.info("Closed task %s (%s)", entry.task_id, "clean" if clean else "dirty")

    def mark_failed(self, handle: int) -> TaskEntry | None:
        """Called by the stream thread that holds the task, before it releases it."""
        with self._lock:
            entry = self._by_handle.get(handle)
            if entry is not None and entry.state is TaskState.RUNNING:
                entry.state = TaskState.FAILED
        if entry is not None:
            self._scheduler.fail(handle)
        return entry

    def close_all(self, clean: bool) -> None:
        for entry in self.entries():
            try:
                self.remove(entry, clean)
            except Exception:
                logger.exception("Closing task %s failed", entry.task_id)
