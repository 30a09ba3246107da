"""The state manager: one restore thread that brings tasks' stores up to date from their changelogs.

New active tasks with logged stores are handed here by the polling thread. The restore thread
assigns their changelog partitions to the restore consumer, reads each from the task's checkpoint
(or the beginning) to the end offset captured when restoration started, applies the records to the
stores, and hands the restored task back through ``on_restored``. Meanwhile other tasks process:
restoration never blocks the stream threads or the polling thread.

Failures are reported through ``on_failure(task_entry, exc)``; the task stays out of processing.

Lock order: ``StateManager._lock`` is a leaf guarding the command list; the restore consumer is used
by the restore thread only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kstreams.cluster.port import Consumer, TopicPartition

if TYPE_CHECKING:
    from kstreams.runtime.metrics import MetricsRegistry
    from kstreams.runtime.task_manager import TaskEntry

__all__ = ["StateManager", "StateRestoreListener"]

logger = logging.getLogger(__name__)

_POLL_S = 0.05
_IDLE_WAIT_S = 0.5


class StateRestoreListener:
    """Watches restoration (Kafka's StateRestoreListener, snake_case). Override what you need."""

    def on_restore_start(self, topic_partition: TopicPartition, store_name: str,
                         starting_offset: int, ending_offset: int) -> None:
        """Restoration of one changelog partition begins."""

    def on_batch_restored(self, topic_partition: TopicPartition, store_name: str,
                          batch_end_offset: int, num_restored: int) -> None:
        """A batch of records was written to the store."""

    def on_restore_end(self, topic_partition: TopicPartition, store_name: str, total_restored: int) -> None:
        """The changelog partition is restored up to its end offset."""


@dataclass(eq=False)
class _Restoring:
    entry: TaskEntry
    # changelog partition -> (store name, end offset to reach)
    targets: dict[TopicPartition, tuple[str, int]] = field(default_factory=dict)
    restored: dict[TopicPartition, int] = field(default_factory=dict)  # next offset to apply
    counts: dict[TopicPartition, int] = field(default_factory=dict)  # records applied
    done: set[TopicPartition] = field(default_factory=set)


class StateManager(threading.Thread):
    """The restore thread and its restore consumer."""

    def __init__(
        self,
        name: str,
        consumer: Consumer,
        on_restored: Callable[[TaskEntry], None],
        on_failure: Callable[[TaskEntry | None, BaseException], None],
        metrics: MetricsRegistry,
        client_id: str,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self._consumer = consumer
        self._on_restored = on_restored
        self._on_failure = on_failure
        self._lock = threading.Condition()
        self._pending_add: list[TaskEntry] = []
        self._pending_remove: list[tuple[TaskEntry, threading.Event]] = []
        self._restoring: dict[Any, _Restoring] = {}
        self._stopping = False
        self.listener: StateRestoreListener = StateRestoreListener()
        tags = {"thread-id": name}
        self.restore_sensor = metrics.sensor("restore", "stream-state-updater-metrics", tags)
        metrics.gauge("restoring-tasks", "stream-state-updater-metrics", tags,
                      lambda: float(len(self._restoring)))
        metrics.gauge("records-remaining", "stream-state-updater-metrics", tags, self._remaining)
        self.total_restored = 0

    # -- commands (polling thread) ------------------------------------------------------------

    def add(self, entry: TaskEntry) -> None:
        with self._lock:
            self._pending_add.append(entry)
            self._lock.notify_all()

    def remove(self, entry: TaskEntry, timeout: float = 30.0) -> bool:
        """Stop restoring a task (it was revoked). Returns once the restore thread let go of it."""
        if not self.is_alive():
            return True
        done = threading.Event()
        with self._lock:
            if entry in self._pending_add:
                self._pending_add.remove(entry)
                return True
            self._pending_remove.append((entry, done))
            self._lock.notify_all()
        return done.wait(timeout)

    def shutdown(self) -> None:
        with self._lock:
            self._stopping = True
            self._lock.notify_all()

    def restoring_count(self) -> int:
        with self._lock:
            return len(self._restoring) + len(self._pending_add)

    def _remaining(self) -> float:
        remaining = 0
        for restoring in list(self._restoring.values()):
            for tp, (_, end) in restoring.targets.items():
                if tp not in restoring.done:
                    remaining += max(0, end - restoring.restored.get(tp, 0))
        return float(remaining)

    # -- the restore thread -------------------------------------------------------------------

    def run(self) -> None:
        logger.info("Restore thread %s started", self.name)
        try:
            while True:
                with self._lock:
                    if not self._restoring and not self._pending_add and not self._pending_remove:
                        self._lock.wait_for(
                            lambda: self._stopping or self._pending_add or self._pending_remove, _IDLE_WAIT_S
                        )
                    if self._stopping:
                        return
                    adds, self._pending_add = self._pending_add, []
                    removes, self._pending_remove = self._pending_remove, []
                changed = False
                for entry, done in removes:
                    changed |= self._restoring.pop(entry.task_id, None) is not None
                    done.set()
                for entry in adds:
                    try:
                        changed |= self._begin(entry)
                    except Exception as exc:
                        logger.error("Restoration of task %s could not start", entry.task_id, exc_info=exc)
                        self._on_failure(entry, exc)
                if changed:
                    self._assign()
                if self._restoring:
                    self._restore_some()
        except BaseException as exc:  # noqa: BLE001 - reported to the uncaught exception handler
            logger.error("Restore thread %s failed", self.name, exc_info=exc)
            self._on_failure(None, exc)
        finally:
            try:
                self._consumer.close()
            except Exception:
                logger.debug("Closing the restore consumer failed", exc_info=True)
            logger.info("Restore thread %s stopped", self.name)

    def _begin(self, entry: TaskEntry) -> bool:
        """Start restoring a task; a task with nothing to restore is handed back at once."""
        changelogs: dict[TopicPartition, Any] = entry.task.changelog_partitions()
        if not changelogs:
            self._on_restored(entry)
            return False
        ends = self._consumer.end_offsets(list(changelogs))
        starts = entry.task.checkpointed_offsets() if hasattr(entry.task, "checkpointed_offsets") else {}
        restoring = _Restoring(entry)
        for tp, store in changelogs.items():
            store_name = getattr(store, "name", str(store))
            start = starts.get(tp, 0)
            end = ends.get(tp, 0)
            if start >= end:
                continue
            restoring.targets[tp] = (store_name, end)
            restoring.restored[tp] = start
            self.listener.on_restore_start(tp, store_name, start, end)
        if not restoring.targets:
            self._on_restored(entry)
            return False
        self._restoring[entry.task_id] = restoring
        logger.info("Restoring task %s from %s", entry.task_id,
                    {str(tp): f"{s}..{e}" for tp, (_, e) in restoring.targets.items()
                     for s in [restoring.restored[tp]]})
        return True

    def _assign(self) -> None:
        wanted = [tp for r in self._restoring.values() for tp in r.targets if tp not in r.done]
        self._consumer.assign(wanted)
        for restoring in self._restoring.values():
            for tp in restoring.targets:
                if tp not in restoring.done:
                    self._consumer.seek(tp, restoring.restored[tp])

    def _restore_some(self) -> None:
        polled = self._consumer.poll(_POLL_S, 10000)
        by_partition: dict[TopicPartition, _Restoring] = {
            tp: r for r in self._restoring.values() for tp in r.targets
        }
        for tp, batch in polled:
            restoring = by_partition.get(tp)
            if restoring is None or tp in restoring.done:
                continue
            store_name, end = restoring.targets[tp]
            # Records at or past the end offset were written after restoration began: not ours.
            if batch.last_offset >= end:
                batch = batch.slice(0, max(0, end - batch.first_offset))
            if len(batch):
                restoring.entry.task.restore(tp, batch)
                restoring.restored[tp] = batch.last_offset + 1
                restoring.counts[tp] = restoring.counts.get(tp, 0) + len(batch)
                self.total_restored += len(batch)
                self.restore_sensor.record(len(batch), len(batch))
                self.listener.on_batch_restored(tp, store_name, batch.last_offset, len(batch))
        # A partition is done once its position reaches the end (compaction or aborted
        # transactions can leave gaps, so compare positions, not record counts).
        finished: list[_Restoring] = []
        for restoring in self._restoring.values():
            for tp, (store_name, end) in restoring.targets.items():
                if tp in restoring.done:
                    continue
                if self._consumer.position(tp) >= end or restoring.restored.get(tp, 0) >= end:
                    restoring.done.add(tp)
                    self.listener.on_restore_end(tp, store_name, restoring.counts.get(tp, 0))
            if len(restoring.done) == len(restoring.targets):
                finished.append(restoring)
        for restoring in finished:
            del self._restoring[restoring.entry.task_id]
            logger.info("Restored task %s", restoring.entry.task_id)
            self._on_restored(restoring.entry)
        if finished:
            self._assign()
