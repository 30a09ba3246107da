"""The state updater: the one restore thread that restores active tasks and keeps standby tasks
current (Kafka Streams' state updater; the per-task store registry is the task and its checkpoint).

New active tasks with logged stores are handed here by the polling thread. The restore thread
assigns their changelog partitions to the restore consumer, reads each from where the task's
checkpoint says its local state ends (the beginning for in-memory stores) to the end offset taken
when restoration started, applies the records to the stores, and hands the restored task back
through ``on_restored``. Meanwhile other tasks process: restoration never blocks the stream threads
or the polling thread. A checkpoint past its changelog's end vouches for records the changelog no
longer has: the task's stores are then wiped and restored from the beginning (``checkpoints``).

Under exactly_once_v2 the restore consumer reads committed records only, and the end to reach is
the partition's high watermark: a transaction still open on the changelog (a crashed owner's) is
waited out — it is aborted once it outlives ``transaction.timeout.ms`` — so the task never starts
processing on top of a state that misses records committed after that transaction.

Standby tasks (``add_standby``) are updated from their changelogs with no end: whatever the
changelog receives is applied, and their checkpoints are written every few seconds and on close.
While an active task restores, standby changelogs are paused so that the active one comes first.

Failures: a task whose restoration fails is reported through ``on_failure(task_entry, exc)`` and
leaves restoration (the uncaught exception handler decides; REPLACE_THREAD restores it afresh).
A standby that fails is closed and logged; the next rebalance may place it again. A failing poll
of the restore consumer is retried; an unexpected error ends the thread through
``on_failure(None, exc)``.

Size: one thread's loop over one restore consumer, whose assignment active restorations and
standbys share (an active one pauses the standbys' partitions); its commands, its poll and its
bookkeeping of both kinds change that one assignment on this thread, so they stay in one module
(about 600 lines) rather than split into parts that would each have to know the others' partitions.

Lock order: ``StateUpdater._lock`` is a leaf guarding the command lists; the restore consumer, the
restoring tasks and the standbys are used by the restore thread only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kstreams.cluster.port import Admin, ClusterError, Consumer, TopicPartition
from kstreams.errors import ProcessorStateException, StreamsException
from kstreams.state.restore_listener import StateRestoreListener

if TYPE_CHECKING:
    from kstreams.metrics import MetricsRegistry
    from kstreams.processor import TaskId
    from kstreams.runtime.tasks.standby import StandbyTask
    from kstreams.runtime.tasks.task_manager import TaskEntry

__all__ = ["StateUpdater"]

logger = logging.getLogger(__name__)

_POLL_S = 0.05
_STANDBY_POLL_S = 0.1
_IDLE_WAIT_S = 0.5
_RETRY_BACKOFF_S = 0.2
_PROGRESS_LOG_S = 10.0
_STANDBY_CHECKPOINT_S = 5.0


@dataclass(eq=False)
class _Restoring:
    entry: TaskEntry
    # changelog partition -> (store name, end offset to reach)
    targets: dict[TopicPartition, tuple[str, int]] = field(default_factory=dict)
    restored: dict[TopicPartition, int] = field(default_factory=dict)  # next offset to apply
    counts: dict[TopicPartition, int] = field(default_factory=dict)  # records applied
    done: set[TopicPartition] = field(default_factory=set)
    # changelog partitions with nothing to restore -> where the local state ends
    current: dict[TopicPartition, int] = field(default_factory=dict)


@dataclass(eq=False)
class _Standby:
    standby: StandbyTask
    positions: dict[TopicPartition, int] = field(default_factory=dict)  # next offset to apply
    checkpointed: dict[TopicPartition, int] = field(default_factory=dict)
    last_checkpoint: float = field(default_factory=time.monotonic)


class StateUpdater(threading.Thread):
    """The restore thread and its restore consumer."""

    def __init__(
        self,
        name: str,
        consumer: Consumer,
        on_restored: Callable[[TaskEntry], None],
        on_failure: Callable[[TaskEntry | None, BaseException], None],
        metrics: MetricsRegistry,
        admin: Admin | None = None,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self._consumer = consumer
        self._admin = admin
        self._on_restored = on_restored
        self._on_failure = on_failure
        self._lock = threading.Condition()
        self._pending_add: list[TaskEntry] = []
        self._pending_remove: list[tuple[TaskEntry, threading.Event]] = []
        self._pending_standby_add: list[StandbyTask] = []
        self._pending_standby_remove: list[tuple[TaskId, threading.Event, list[StandbyTask]]] = []
        self._restoring: dict[Any, _Restoring] = {}
        self._standbys: dict[Any, _Standby] = {}
        self._standby_ids: set[Any] = set()  # what the polling thread handed over and not taken back
        # The StandbyTask of each id handed over, for stale-store queries; pruned in standby_tasks().
        self._standby_tasks: dict[Any, StandbyTask] = {}
        self._stopping = False
        self.listener: StateRestoreListener = StateRestoreListener()
        tags = {"thread-id": name}
        self.restore_sensor = metrics.sensor("restore-records", "stream-state-updater-metrics", tags)
        self.update_sensor = metrics.sensor("update-records", "stream-state-updater-metrics", tags)
        metrics.gauge(
            "restoring-tasks", "stream-state-updater-metrics", tags, lambda: float(len(self._restoring))
        )
        metrics.gauge(
            "standby-updating-tasks", "stream-state-updater-metrics", tags, lambda: float(len(self._standbys))
        )
        metrics.gauge("records-remaining", "stream-state-updater-metrics", tags, self._remaining)
        self.total_restored = 0
        self._last_progress_log = time.monotonic()
        self._restored_at_last_log = 0

    # -- commands (polling thread) ------------------------------------------------------------

    def add(self, entry: TaskEntry) -> None:
        """Restore an active task, then hand it back through ``on_restored``."""
        with self._lock:
            self._pending_add.append(entry)
            self._lock.notify_all()

    def remove(self, entry: TaskEntry, timeout: float = 30.0) -> bool:
        """Stop restoring a task (it was revoked or failed). Returns once the restore thread let go
        of it; the task's checkpoint then holds how far its stores were restored."""
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

    def add_standby(self, standby: StandbyTask) -> None:
        """Keep a standby task current from its changelogs until ``remove_standby``."""
        with self._lock:
            self._standby_ids.add(standby.task_id)
            self._standby_tasks[standby.task_id] = standby
            self._pending_standby_add.append(standby)
            self._lock.notify_all()

    def remove_standby(self, task_id: TaskId, timeout: float = 30.0) -> StandbyTask | None:
        """Take a standby back (to recycle it into an active task, or to close it); None when there
        is no standby of that task. Its checkpoint then holds the positions its stores reached."""
        done = threading.Event()
        result: list[StandbyTask] = []
        with self._lock:
            if task_id not in self._standby_ids:
                return None
            self._standby_ids.discard(task_id)
            for standby in self._pending_standby_add:
                if standby.task_id == task_id:
                    self._pending_standby_add.remove(standby)
                    return standby
            if not self.is_alive():
                held = self._standbys.pop(task_id, None)
                return held.standby if held is not None else None
            self._pending_standby_remove.append((task_id, done, result))
            self._lock.notify_all()
        if not done.wait(timeout):
            raise StreamsException(
                f"The restore thread did not release standby task {task_id} within {timeout:.0f}s; "
                "a changelog read or a store write is probably blocked."
            )
        return result[0] if result else None

    def standby_ids(self) -> set[Any]:
        """Tasks this client keeps a standby of."""
        with self._lock:
            return set(self._standby_ids)

    def standby_positions(self) -> dict[Any, dict[TopicPartition, int]]:
        """Per standby task, the next changelog offset it applies, per changelog partition (any
        thread: the copies are taken under the lock; the restore thread only adds entries)."""
        with self._lock:
            held = list(self._standbys.values())
        return {h.standby.task_id: dict(h.positions) for h in held}

    def standby_tasks(self) -> list[StandbyTask]:
        """The standby tasks this client keeps (any thread; interactive queries of stale stores read
        their stores under each store's query lock, which restoration takes too)."""
        with self._lock:
            for gone in [t for t in self._standby_tasks if t not in self._standby_ids]:
                del self._standby_tasks[gone]
            return [self._standby_tasks[t] for t in sorted(self._standby_tasks)]

    def shutdown(self) -> None:
        """Stop the thread; it closes its standbys (checkpointing them) on the way out."""
        with self._lock:
            self._stopping = True
            self._lock.notify_all()

    def restoring_count(self) -> int:
        with self._lock:
            return len(self._restoring) + len(self._pending_add)

    def _remaining(self) -> float:
        remaining = 0
        for restoring in list(self._restoring.values()):
            for tp, (_, end) in list(restoring.targets.items()):
                if tp not in restoring.done:
                    remaining += max(0, end - restoring.restored.get(tp, 0))
        return float(remaining)

    # -- the restore thread -------------------------------------------------------------------

    def run(self) -> None:
        logger.info("Restore thread %s started", self.name)
        try:
            while True:
                with self._lock:
                    if not self._has_work():
                        self._lock.wait_for(lambda: self._stopping or self._has_commands(), _IDLE_WAIT_S)
                    if self._stopping:
                        return
                    adds, self._pending_add = self._pending_add, []
                    removes, self._pending_remove = self._pending_remove, []
                    standby_adds, self._pending_standby_add = self._pending_standby_add, []
                    standby_removes, self._pending_standby_remove = self._pending_standby_remove, []
                changed = self._apply_commands(adds, removes, standby_adds, standby_removes)
                if changed:
                    self._assign()
                if self._restoring or self._standbys:
                    self._poll_and_apply()
                    self._maybe_checkpoint_standbys()
                    self._maybe_log_progress()
        except BaseException as exc:  # reported to the uncaught exception handler
            logger.error("Restore thread %s failed", self.name, exc_info=exc)
            self._on_failure(None, exc)
        finally:
            self._close_standbys()
            try:
                self._consumer.close()
            except Exception:
                logger.debug("Closing the restore consumer failed", exc_info=True)
            logger.info("Restore thread %s stopped", self.name)

    def _has_commands(self) -> bool:
        return bool(
            self._pending_add
            or self._pending_remove
            or self._pending_standby_add
            or self._pending_standby_remove
        )

    def _has_work(self) -> bool:
        return bool(self._restoring or self._standbys) or self._has_commands()

    def _apply_commands(
        self,
        adds: list[TaskEntry],
        removes: list[tuple[TaskEntry, threading.Event]],
        standby_adds: list[StandbyTask],
        standby_removes: list[tuple[TaskId, threading.Event, list[StandbyTask]]],
    ) -> bool:
        changed = False
        for entry, done in removes:
            restoring = self._restoring.get(entry.task_id)
            if restoring is not None and restoring.entry is entry:
                del self._restoring[entry.task_id]
                entry.checkpoint.advance(self._reached(restoring))
                changed = True
            done.set()
        for task_id, done, result in standby_removes:
            held = self._standbys.pop(task_id, None)
            if held is not None:
                held.standby.checkpoint.advance(held.positions)
                result.append(held.standby)
                changed = True
            done.set()
        retry: list[TaskEntry] = []
        for entry in adds:
            try:
                changed |= self._begin(entry)
            except ClusterError as exc:
                if not exc.retriable:
                    failure = _as_streams_exception(entry, exc)
                    logger.error("Restoration of task %s could not start", entry.task_id, exc_info=failure)
                    self._on_failure(entry, failure)
                    continue
                logger.warning("Restoration of task %s could not start, retrying: %s", entry.task_id, exc)
                retry.append(entry)
            except Exception as exc:
                failure = _as_streams_exception(entry, exc)
                logger.error("Restoration of task %s could not start", entry.task_id, exc_info=failure)
                self._on_failure(entry, failure)
        if retry:
            with self._lock:
                self._lock.wait_for(lambda: self._stopping, _RETRY_BACKOFF_S)
                self._pending_add[:0] = retry
        for standby in standby_adds:
            try:
                self._begin_standby(standby)
                changed = True
            except Exception:
                logger.exception("Standby task %s could not start; closing it", standby.task_id)
                self._drop_standby(standby)
        return changed

    def _restore_ends(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Where restoration of each partition ends. The restore consumer's end offsets are the
        last stable offsets under read_committed; the high watermark is taken instead when it is
        larger, so that an open transaction is waited out rather than cut short (module doc)."""
        ends = self._consumer.end_offsets(partitions)
        if self._admin is not None:
            try:
                watermarks = self._admin.list_offsets(partitions, "read_uncommitted")
            except ClusterError as exc:
                logger.warning(
                    "Could not read the changelogs' high watermarks (%s); restoring to "
                    "their last stable offsets",
                    exc,
                )
            else:
                for tp, (_, high) in watermarks.items():
                    if high > ends.get(tp, 0):
                        logger.info(
                            "Changelog %s has an open transaction (stable up to %d, written up "
                            "to %d): restoration waits for it to end",
                            tp,
                            ends.get(tp, 0),
                            high,
                        )
                        ends[tp] = high
        return ends

    def _begin(self, entry: TaskEntry) -> bool:
        """Start restoring a task; a task with nothing to restore is handed back at once."""
        changelogs: dict[TopicPartition, Any] = entry.task.changelog_partitions()
        if not changelogs:
            self._on_restored(entry)
            return False
        ends = self._restore_ends(list(changelogs))
        if self._checkpoint_past_end(entry, changelogs, ends):
            # The local state holds records the changelog lost: only a rebuild matches the changelog.
            entry.task.reset_stores(entry.checkpoint.wipe)
            changelogs = entry.task.changelog_partitions()
        restoring = _Restoring(entry)
        for tp, store in changelogs.items():
            store_name = store.name
            start = entry.checkpoint.restore_start(tp)
            end = ends.get(tp, 0)
            if start >= end:
                restoring.current[tp] = start
                continue
            restoring.targets[tp] = (store_name, end)
            restoring.restored[tp] = start
            self._listen(entry, self.listener.on_restore_start, tp, store_name, start, end)
        if not restoring.targets:
            entry.checkpoint.advance(restoring.current)
            self._on_restored(entry)
            return False
        self._restoring[entry.task_id] = restoring
        logger.info(
            "Restoring task %s: %s",
            entry.task_id,
            ", ".join(f"{tp} {restoring.restored[tp]}..{end}" for tp, (_, end) in restoring.targets.items()),
        )
        return True

    def _checkpoint_past_end(
        self, entry: TaskEntry, changelogs: dict[TopicPartition, Any], ends: dict[TopicPartition, int]
    ) -> bool:
        """Whether the task's checkpoint puts a store past its changelog's end (logged per store)."""
        past = False
        for tp, store in changelogs.items():
            start = entry.checkpoint.restore_start(tp)
            if tp in ends and start > ends[tp]:
                past = True
                logger.warning(
                    "Task %s: the checkpoint of store %s is at offset %d of changelog %s, past its end "
                    "%d (the changelog was recreated or truncated, or state.dir was used against "
                    "another cluster). The task's local state is wiped and restored from the "
                    "changelogs' beginning.",
                    entry.task_id,
                    store.name,
                    start,
                    tp,
                    ends[tp],
                )
        return past

    def _begin_standby(self, standby: StandbyTask) -> None:
        held = _Standby(standby)
        for tp in standby.changelog_partitions():
            held.positions[tp] = standby.checkpoint.restore_start(tp)
        held.checkpointed = dict(held.positions)
        self._standbys[standby.task_id] = held
        logger.info(
            "Updating standby task %s from %s",
            standby.task_id,
            ", ".join(f"{tp}@{o}" for tp, o in held.positions.items()),
        )

    def _listen(self, entry: TaskEntry, callback: Callable[..., None], *args: Any) -> None:
        try:
            callback(*args)
        except Exception as exc:
            raise _ListenerError(entry, exc) from exc

    def _assign(self) -> None:
        actives = [
            (tp, r.restored[tp]) for r in self._restoring.values() for tp in r.targets if tp not in r.done
        ]
        standbys = [(tp, pos) for s in self._standbys.values() for tp, pos in s.positions.items()]
        self._consumer.assign([tp for tp, _ in actives] + [tp for tp, _ in standbys])
        for tp, offset in actives + standbys:
            if offset <= 0:
                self._consumer.seek_to_beginning([tp])
            else:
                self._consumer.seek(tp, offset)
        standby_tps = [tp for tp, _ in standbys]
        if standby_tps:
            # Active tasks wait for their restoration to process; standbys can wait for them.
            if actives:
                self._consumer.pause(standby_tps)
            else:
                self._consumer.resume(standby_tps)

    def _poll_and_apply(self) -> None:
        try:
            polled = self._consumer.poll(_POLL_S if self._restoring else _STANDBY_POLL_S, 10000)
        except ClusterError as exc:
            if not exc.retriable:
                raise
            logger.warning("Polling the restore consumer failed, retrying: %s", exc)
            with self._lock:
                self._lock.wait_for(lambda: self._stopping, _RETRY_BACKOFF_S)
            return
        actives: dict[TopicPartition, _Restoring] = {
            tp: r for r in self._restoring.values() for tp in r.targets
        }
        standbys: dict[TopicPartition, _Standby] = {
            tp: s for s in self._standbys.values() for tp in s.positions
        }
        failed: list[_Restoring] = []
        for tp, batch in polled:
            restoring = actives.get(tp)
            if restoring is not None:
                if tp not in restoring.done and restoring not in failed:
                    try:
                        self._apply_restore(restoring, tp, batch)
                    except Exception as exc:
                        failed.append(restoring)
                        self._fail(restoring, exc)
                continue
            held = standbys.get(tp)
            if held is not None and held.standby.task_id in self._standbys:
                try:
                    held.standby.task.restore(tp, batch)
                except Exception:
                    logger.exception(
                        "Standby task %s failed to apply %s; closing it", held.standby.task_id, tp
                    )
                    del self._standbys[held.standby.task_id]
                    self._drop_standby(held.standby)
                    continue
                held.positions[tp] = max(batch.last_offset + 1, self._consumer.position(tp))
                self.update_sensor.record(len(batch), len(batch))
        try:
            self._finish_restored()
        except _ListenerError as exc:
            restoring = self._restoring.get(exc.entry.task_id)
            if restoring is not None:
                self._fail(restoring, exc.cause)
        if failed or any(tp not in standbys and tp not in actives for tp, _ in polled):
            self._assign()

    def _apply_restore(self, restoring: _Restoring, tp: TopicPartition, batch: Any) -> None:
        store_name, end = restoring.targets[tp]
        # Records at or past the end offset were written after restoration began: not ours.
        if batch.last_offset >= end:
            batch = batch.slice(0, max(0, end - batch.first_offset))
        if not len(batch):
            return
        restoring.entry.task.restore(tp, batch)
        restoring.restored[tp] = batch.last_offset + 1
        restoring.counts[tp] = restoring.counts.get(tp, 0) + len(batch)
        self.total_restored += len(batch)
        self.restore_sensor.record(len(batch), len(batch))
        self._listen(
            restoring.entry, self.listener.on_batch_restored, tp, store_name, batch.last_offset, len(batch)
        )

    def _finish_restored(self) -> None:
        # A partition is done once its position reaches the end (compaction, aborted transactions
        # and transaction markers leave gaps, so compare positions, not record counts).
        finished: list[_Restoring] = []
        for restoring in list(self._restoring.values()):
            for tp, (store_name, end) in restoring.targets.items():
                if tp in restoring.done:
                    continue
                if restoring.restored.get(tp, 0) >= end or self._consumer.position(tp) >= end:
                    restoring.done.add(tp)
                    self._listen(
                        restoring.entry,
                        self.listener.on_restore_end,
                        tp,
                        store_name,
                        restoring.counts.get(tp, 0),
                    )
            if len(restoring.done) == len(restoring.targets):
                finished.append(restoring)
        for restoring in finished:
            del self._restoring[restoring.entry.task_id]
            restoring.entry.checkpoint.advance(self._reached(restoring))
            logger.info(
                "Restored task %s: %d records", restoring.entry.task_id, sum(restoring.counts.values())
            )
            self._on_restored(restoring.entry)
        if finished:
            self._assign()

    def _reached(self, restoring: _Restoring) -> dict[TopicPartition, int]:
        """Where a task's stores end now, per changelog partition."""
        reached = dict(restoring.current)
        for tp, (_, end) in restoring.targets.items():
            reached[tp] = end if tp in restoring.done else restoring.restored.get(tp, 0)
        return reached

    def _fail(self, restoring: _Restoring, exc: BaseException) -> None:
        entry = restoring.entry
        self._restoring.pop(entry.task_id, None)
        failure = _as_streams_exception(entry, exc)
        logger.error("Restoration of task %s failed", entry.task_id, exc_info=failure)
        self._on_failure(entry, failure)

    def _drop_standby(self, standby: StandbyTask) -> None:
        with self._lock:
            self._standby_ids.discard(standby.task_id)
        standby.checkpoint.delete()
        standby.close()

    def _maybe_checkpoint_standbys(self, force: bool = False) -> None:
        now = time.monotonic()
        for held in list(self._standbys.values()):
            if not force and now - held.last_checkpoint < _STANDBY_CHECKPOINT_S:
                continue
            held.last_checkpoint = now
            if held.positions == held.checkpointed or not held.standby.checkpoint.has_persistent_stores:
                continue
            held.standby.checkpoint.advance(held.positions)
            try:
                # RocksDB's write-ahead log holds what was applied; the checkpoint may trail it.
                held.standby.task.flush()
                held.standby.checkpoint.write()
                held.checkpointed = dict(held.positions)
            except Exception:
                logger.warning("Checkpointing standby task %s failed", held.standby.task_id, exc_info=True)

    def _maybe_log_progress(self) -> None:
        now = time.monotonic()
        elapsed = now - self._last_progress_log
        if elapsed < _PROGRESS_LOG_S:
            return
        restored = self.total_restored - self._restored_at_last_log
        self._last_progress_log = now
        self._restored_at_last_log = self.total_restored
        if self._restoring:
            logger.info(
                "Restoring %d task(s): %d records in the last %.0fs (%.0f records/s), %d remaining",
                len(self._restoring),
                restored,
                elapsed,
                restored / elapsed,
                int(self._remaining()),
            )

    def _close_standbys(self) -> None:
        for held in list(self._standbys.values()):
            held.standby.checkpoint.advance(held.positions)
            held.standby.close()
        self._standbys.clear()
        with self._lock:
            pending, self._pending_standby_add = self._pending_standby_add, []
            self._standby_ids.clear()
            # Whoever waits for a release gets it: nothing is restored or updated any more.
            for _, done in self._pending_remove:
                done.set()
            for _, done, _ in self._pending_standby_remove:
                done.set()
            self._pending_remove.clear()
            self._pending_standby_remove.clear()
        for standby in pending:
            standby.close()


def _as_streams_exception(entry: TaskEntry, exc: BaseException) -> BaseException:
    """The exception to report for a task's failed restoration, naming the task."""
    if isinstance(exc, _ListenerError):
        exc = exc.cause
    if isinstance(exc, StreamsException):
        exc.task_id = exc.task_id or entry.task_id
        return exc
    wrapped = ProcessorStateException(
        f"Restoring task {entry.task_id} from its changelogs failed: {exc!r}. Check the changelog "
        "topics and the restore listener; the uncaught exception handler decides what happens next.",
        task_id=entry.task_id,
    )
    wrapped.__cause__ = exc
    return wrapped


class _ListenerError(Exception):
    """A restore listener callback raised: the restoration of its task fails."""

    def __init__(self, entry: TaskEntry, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.entry = entry
        self.cause = cause
