"""Global state: the thread that fills a client's global stores and keeps them current.

A global store (``StreamsBuilder.global_table``, ``Topology.add_global_store``) holds every
partition of its topic on every client. Its subtopology (a source and the update processor that
writes the store) makes no tasks: one ``GlobalStateTask`` per global subtopology runs here, on the
client's ``GlobalStreamThread``, fed by its own consumer manually assigned all partitions of the
global topics (no group: every client reads everything).

Why a thread of its own rather than the state updater (the restore thread): the state updater
restores task changelogs to a fixed end and hands tasks back; a global store instead runs user
processors (``add_global_store``'s update processor) for ever, must be complete before *any* task
processes, and must not wait behind a long task restoration (nor hold one up). Kafka runs a
separate GlobalStreamThread for the same reasons, and so do we.

Start-up (``bootstrap``, called by ``StreamsRuntime.start`` on the starting thread before the
restore, polling and stream threads start, so the client cannot reach RUNNING first; Kafka's
``GlobalStreamThread.start`` blocks the same way): open the stores, read the checkpoint, seek each
partition to its checkpointed offset (from the beginning when a store is in memory, or there is no
checkpoint), take the end offsets, and process records through the update processors until every
partition reaches its end. Records go through the update processor during bootstrap too (Kafka's
"reprocess on restore" of KAFKA-7663/KIP-813's fix), so a custom processor sees every record once.
Then ``start()`` runs the thread that polls and applies whatever the topics receive.

Checkpoints: ``<state.dir>/<application.id>/global/.checkpoint`` (Kafka's file format) holds the
next offset of every global topic partition, written every ``commit.interval.ms`` after the stores
are flushed, and at close. It is used only when all stores of the partition's subtopology are
persistent: an in-memory store starts empty, so its topic is read from the beginning.

Threads and locks: the consumer and the global tasks are used by the starting thread during
``bootstrap`` and by this thread after it, never both. Stream threads only read the global stores
(``get``/``range``) while this thread writes them; the stores do no record caching (their
builders have caching disabled) so a read sees the newest write. ``_stop_requested`` is an Event,
the only shared state (not ``_stop``: that name is ``threading.Thread``'s own method, which
``join`` and ``is_alive`` call once the thread has ended).

Failures: an exception while bootstrapping propagates out of ``KafkaStreams.start()``; one in the
running thread is reported through ``on_failure(exc)`` (to the uncaught exception handler) and ends
the thread.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kstreams._native.record_collector import RecordCollector
from kstreams.cluster.port import Admin, Consumer, TopicPartition
from kstreams.errors import MissingSourceTopicException, StreamsException
from kstreams.processing.global_task import GLOBAL_STATE_DIR, GlobalStateTask
from kstreams.processor import TaskId
from kstreams.state.checkpoint import OffsetCheckpoint

if TYPE_CHECKING:
    from kstreams.metrics import MetricsRegistry
    from kstreams.state.restore_listener import StateRestoreListener
    from kstreams.state.store import StateStore
    from kstreams.topology.plan import SubtopologyPlan, TopologyPlan

__all__ = ["GlobalStreamThread"]

logger = logging.getLogger(__name__)

_POLL_S = 0.1


def _no_sinks(topic: str) -> int:
    raise StreamsException(
        f"A global store's update processor forwarded a record towards topic {topic}: global "
        "subtopologies have no sinks, so update processors must not forward."
    )


class GlobalStreamThread(threading.Thread):
    """Bootstraps the global stores (``bootstrap``), then keeps them current (``start``)."""

    def __init__(
        self,
        name: str,
        plan: TopologyPlan,
        config: Any,
        consumer: Consumer,
        admin: Admin,
        state_dir: str,
        on_failure: Callable[[BaseException], None],
        metrics: MetricsRegistry | None = None,
        client_id: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self._plan = plan
        self._config = config
        self._consumer = consumer
        self._admin = admin
        self._on_failure = on_failure
        self._commit_interval_s = max(int(config["commit.interval.ms"]), 0) / 1000.0
        self.listener: StateRestoreListener | None = None
        # name -> store; the task manager hands this very dict to every stream task
        self.stores: dict[str, StateStore] = {}
        self._tasks: list[GlobalStateTask] = []
        self._task_for_topic: dict[str, GlobalStateTask] = {}
        self._persistent_topics: set[str] = set()
        self._positions: dict[TopicPartition, int] = {}  # next offset to apply
        self._checkpointed: dict[TopicPartition, int] = {}
        self._checkpoint = OffsetCheckpoint(os.path.join(state_dir, GLOBAL_STATE_DIR, ".checkpoint"))
        self._stop_requested = threading.Event()
        self._closed = False
        for sub in plan.global_subtopologies:
            task = GlobalStateTask(
                TaskId(sub.id, -1),
                sub,
                [],
                config,
                RecordCollector(),
                _no_sinks,
                state_dir,
                clock=clock,
                metrics=metrics,
                client_id=client_id,
            )
            self._tasks.append(task)
            for topic in sub.source_topics:
                self._task_for_topic[topic] = task

    # ------------------------------------------------------------------ start-up

    def bootstrap(self) -> None:
        """Open the global stores and read every global topic up to its current end (module
        docstring). Runs on the calling thread; raises on failure (the stores are then closed)."""
        try:
            self._open()
            partitions = self._assign()
            ends = self._consumer.end_offsets(partitions)
            self._catch_up(ends)
            self._write_checkpoint()
        except BaseException:
            self._close(clean=False)
            raise
        logger.info(
            "Global stores %s bootstrapped from %d partitions", sorted(self.stores), len(self._positions)
        )

    def _open(self) -> None:
        for task in self._tasks:
            task.initialize()
            self.stores.update(task.graph.stores)
            if task.graph.stores and all(s.persistent for s in task.graph.stores.values()):
                self._persistent_topics.update(task.subtopology.source_topics)
            task.initialize_processors()

    def _assign(self) -> list[TopicPartition]:
        topics = self._plan.global_source_topics
        found = self._admin.describe_topics(list(topics))
        missing = [t for t in topics if t not in found]
        if missing:
            raise MissingSourceTopicException(
                f"Global store source topics {missing} do not exist: create them before starting the "
                "application (a global table needs its topic to bootstrap from)."
            )
        partitions = [TopicPartition(t, p) for t in topics for p in range(found[t].partitions)]
        self._consumer.assign(partitions)
        checkpointed = self._checkpoint.read()
        bounds = self._admin.list_offsets(partitions)
        for tp in partitions:
            start, end = bounds.get(tp, (0, 0))
            offset = checkpointed.get(tp) if tp.topic in self._persistent_topics else None
            if offset is None or not start <= offset <= end:
                if offset is not None:
                    logger.warning(
                        "Global checkpoint of %s at %d is outside the log [%d, %d]: reading it from "
                        "the beginning",
                        tp,
                        offset,
                        start,
                        end,
                    )
                offset = start
            self._consumer.seek(tp, offset)
            self._positions[tp] = offset
            self._checkpointed[tp] = offset if tp in checkpointed else -1
        return partitions

    def _catch_up(self, ends: dict[TopicPartition, int]) -> None:
        """Apply records until every partition's position reaches its end offset."""
        listener = self.listener
        started = dict(self._positions)
        totals = dict.fromkeys(ends, 0)
        if listener is not None:
            for tp, end in ends.items():
                for store in self._task_for_topic[tp.topic].graph.stores:
                    listener.on_restore_start(tp, store, started[tp], end)
        behind = {tp for tp, end in ends.items() if self._positions[tp] < end}
        while behind:
            if self._stop_requested.is_set():
                raise StreamsException("The client closed while its global stores were bootstrapping.")
            for tp, batch in self._consumer.poll(_POLL_S):
                self._apply(tp, batch)
                totals[tp] += len(batch)
                if listener is not None:
                    for store in self._task_for_topic[tp.topic].graph.stores:
                        listener.on_batch_restored(tp, store, batch.last_offset, len(batch))
            # Compaction, aborted transactions and markers leave gaps: compare positions.
            for tp in list(behind):
                position = max(self._positions[tp], self._consumer.position(tp))
                if position >= ends[tp]:
                    self._positions[tp] = position
                    behind.discard(tp)
        if listener is not None:
            for tp in ends:
                for store in self._task_for_topic[tp.topic].graph.stores:
                    listener.on_restore_end(tp, store, totals[tp])

    def _apply(self, tp: TopicPartition, batch: Any) -> None:
        if len(batch) == 0:
            return
        self._task_for_topic[tp.topic].process(tp, batch)
        self._positions[tp] = max(self._positions.get(tp, 0), batch.last_offset + 1)

    # ------------------------------------------------------------------ running

    def run(self) -> None:
        next_checkpoint = time.monotonic() + self._commit_interval_s
        try:
            while not self._stop_requested.is_set():
                for tp, batch in self._consumer.poll(_POLL_S):
                    self._apply(tp, batch)
                if time.monotonic() >= next_checkpoint:
                    self._write_checkpoint()
                    next_checkpoint = time.monotonic() + self._commit_interval_s
        except BaseException as exc:
            logger.error("Global stream thread %s failed: %r", self.name, exc)
            self._close(clean=False)
            self._on_failure(exc)
            return
        self._close(clean=True)

    def _write_checkpoint(self) -> None:
        """Flush the stores, then record how far they are (persistent stores' topics only)."""
        for task in self._tasks:
            task.flush()
        offsets = {tp: o for tp, o in self._positions.items() if tp.topic in self._persistent_topics}
        if offsets and offsets != self._checkpointed:
            self._checkpoint.write(offsets)
            self._checkpointed = dict(offsets)

    # ------------------------------------------------------------------ shutdown

    def shutdown(self) -> None:
        """Ask the thread (or a bootstrap in progress) to stop; the thread checkpoints and closes."""
        self._stop_requested.set()

    def close_unstarted(self) -> None:
        """Close stores and consumer of a thread that bootstrapped but never started."""
        self._close(clean=True)

    def _close(self, clean: bool) -> None:
        if self._closed:
            return
        self._closed = True
        if clean:
            try:
                self._write_checkpoint()
            except Exception:
                logger.warning("Writing the global checkpoint failed at close", exc_info=True)
                clean = False
        self._close_tasks(clean)
        try:
            self._consumer.close()
        except Exception:
            logger.warning("Closing the global consumer failed", exc_info=True)

    def _close_tasks(self, clean: bool) -> None:
        for task in self._tasks:
            try:
                task.close(clean=clean)
            except Exception:
                logger.warning("Closing global task %s failed", task.task_id, exc_info=True)
        self.stores.clear()

    def subtopologies(self) -> list[SubtopologyPlan]:
        return [task.subtopology for task in self._tasks]
