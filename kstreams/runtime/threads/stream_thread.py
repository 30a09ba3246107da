"""Stream (processing) threads: pick a task, process its buffered records, release it.

A stream thread owns no task: each turn it asks the scheduler for the ready task with the most
buffered records, holds that task's lock while it processes batches (until the buffers are empty,
the time slice ends, or the commit barrier asks it to let go), then releases it. Adding or removing
a stream thread therefore needs no rebalance and moves no partitions.

Each thread owns one RecordCache, its share of ``statestore.cache.max.bytes``. When a thread picks
a task whose cache namespaces sit in another thread's cache, it moves them into its own first, so a
read always sees the task's newest write whichever thread processes it.

The threads of a client share one PythonGate: the batches of a task that calls Python processors
(``StreamTask.runs_python``) run under it, one thread at a time, since the GIL would serialise those
batches anyway and two threads trading it every few milliseconds run slower than one. A thread
keeps the gate for its whole run of the task (until the buffers are empty or the time slice ends):
handing it over after every batch cost a thread switch per few hundred records. Batches of
compiled, GIL-free segments skip the gate and run in parallel.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kstreams._native.record_cache import RecordCache
from kstreams._native.scheduler import TaskScheduler
from kstreams.runtime.threads.python_gate import PythonGate
from kstreams.runtime.threads.task_idling import must_wait

if TYPE_CHECKING:
    from kstreams.metrics import MetricsRegistry, Sensor
    from kstreams.runtime.tasks.task_manager import TaskEntry, TaskManager

__all__ = ["StreamThread", "ThreadState"]

logger = logging.getLogger(__name__)

_IDLE_WAIT_S = 0.5


class ThreadState(enum.Enum):
    CREATED = "CREATED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    DEAD = "DEAD"


class StreamThread(threading.Thread):
    """One processing thread. ``on_failure(thread, handle, exc)`` reports an exception; the thread
    then ends (the polling thread applies the uncaught exception handler)."""

    def __init__(
        self,
        name: str,
        scheduler: TaskScheduler,
        task_manager: TaskManager,
        cache_bytes: int,
        on_failure: Callable[[StreamThread, int, BaseException], None],
        metrics: MetricsRegistry,
        batch_size: int = 500,
        time_slice_ms: int = 100,
        task_sensor: Callable[[Any], Sensor] | None = None,
        python_gate: PythonGate | None = None,
        output_ready: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(name=name, daemon=True)
        # Shared by the client's threads (StreamThreads); a thread of its own gets its own gate.
        self._python_gate = python_gate if python_gate is not None else PythonGate()
        self._scheduler = scheduler
        self._task_manager = task_manager
        self.cache = RecordCache(cache_bytes)
        self._on_failure = on_failure
        # Told after each batch and each run of a task (punctuation may output too): its output is
        # sent at once, not at the next poll.
        self._output_ready = output_ready
        self._batch_size = batch_size
        self._time_slice_s = time_slice_ms / 1000.0
        self._stop_requested = threading.Event()
        self.state = ThreadState.CREATED
        # Set (under StreamThreads.lock) when processing failed: no removal picks it then.
        self.failed = False
        self._state_changed = threading.Condition()
        tags = {"thread-id": name}
        self._metrics = metrics
        self.process_sensor = metrics.sensor("process", "stream-thread-metrics", tags, avg=False)
        self.process_latency = metrics.sensor(
            "process-latency", "stream-thread-metrics", tags, total=False, rate=False, avg=True, max_=True
        )
        self.punctuate_sensor = metrics.sensor("punctuate", "stream-thread-metrics", tags)
        # Time spent waiting for a task with work: the thread's idle share.
        self._blocked_ns = 0
        metrics.gauge("blocked-time-ns-total", "stream-thread-metrics", tags, lambda: float(self._blocked_ns))
        cache_tags = {"thread-id": name, "record-cache-id": name}
        metrics.gauge("hit-ratio", "stream-record-cache-metrics", cache_tags, self._hit_ratio)
        metrics.gauge(
            "cache-size-bytes-total",
            "stream-record-cache-metrics",
            cache_tags,
            lambda: float(self.cache.size_bytes),
        )
        metrics.gauge(
            "cache-max-bytes", "stream-record-cache-metrics", cache_tags, lambda: float(self.cache.max_bytes)
        )
        self._task_sensor = task_sensor

    # -- control (any thread) -------------------------------------------------------------

    def request_stop(self) -> None:
        """Ask the thread to finish its current batch, release its task and end."""
        self._set_state(ThreadState.PENDING_SHUTDOWN)
        self._stop_requested.set()
        self._scheduler.wake_all()

    def wait_dead(self, timeout: float | None) -> bool:
        with self._state_changed:
            return self._state_changed.wait_for(lambda: self.state is ThreadState.DEAD, timeout)

    def _set_state(self, state: ThreadState) -> None:
        with self._state_changed:
            if self.state is ThreadState.DEAD:
                return
            if self.state is ThreadState.PENDING_SHUTDOWN and state is not ThreadState.DEAD:
                return
            self.state = state
            self._state_changed.notify_all()

    # -- the loop ---------------------------------------------------------------------------

    def start(self) -> None:
        self._set_state(ThreadState.STARTING)
        super().start()

    def run(self) -> None:
        self._set_state(ThreadState.RUNNING)
        logger.info("Stream thread %s started", self.name)
        try:
            while not self._stop_requested.is_set():
                waited = time.perf_counter_ns()
                handle = self._scheduler.next_task(_IDLE_WAIT_S)
                self._blocked_ns += time.perf_counter_ns() - waited
                if handle < 0:
                    continue
                try:
                    entry = self._task_manager.entry_for_handle(handle)
                    if entry is not None:
                        self._process(entry)
                        if self._output_ready is not None:
                            self._output_ready()
                except BaseException as exc:
                    self._task_manager.mark_failed(handle)
                    self._scheduler.release(handle)
                    logger.error(
                        "Stream thread %s failed processing task handle %d", self.name, handle, exc_info=exc
                    )
                    self._on_failure(self, handle, exc)
                    return
                self._scheduler.release(handle)
        finally:
            self._set_state(ThreadState.DEAD)
            self._metrics.remove(lambda m: m.tags.get("thread-id") == self.name)
            logger.info("Stream thread %s stopped", self.name)

    def _process(self, entry: TaskEntry) -> None:
        task = entry.task
        self._adopt_cache(task)
        scheduler = self._scheduler
        now = time.monotonic()
        deadline = now + self._time_slice_s
        if task.maybe_punctuate_wall_clock(int(time.time() * 1000)):
            self.punctuate_sensor.record()
        if task.maybe_punctuate_stream_time():
            self.punctuate_sensor.record()
        ordered = entry.ordered
        batch_size = self._batch_size
        task_sensor = self._task_sensor(task.task_id) if self._task_sensor is not None else None
        single = ordered[0][1] if len(ordered) == 1 else None
        idles = single is None and entry.idle_s > 0
        python_gate = self._python_gate if task.runs_python else None
        output_ready = self._output_ready
        task_id = task.task_id
        # The gate, from the first gated batch of this run to its end (see the module docstring).
        held: PythonGate | None = None
        cpu_started = 0.0
        try:
            while not scheduler.pause_requested and not self._stop_requested.is_set():
                if single is not None:
                    partition = ordered[0][0]
                    batch = single.pop(batch_size)
                else:
                    if idles and must_wait(entry):
                        entry.deferred = True
                        scheduler.defer(entry.handle)
                        break
                    picked = _pick_oldest(ordered)
                    if picked is None:
                        break
                    partition, buffer, bound = picked
                    batch = buffer.pop(batch_size, bound)
                n = len(batch)
                if n == 0:
                    break
                if held is None and python_gate is not None and python_gate.gates(task_id):
                    python_gate.acquire()
                    held = python_gate
                if held is not None:
                    cpu_started = time.thread_time()
                started = time.monotonic()
                task.process(partition, batch)
                finished = time.monotonic()
                if held is not None:
                    held.observe(task_id, time.thread_time() - cpu_started, finished - started)
                self.process_sensor.record(n, n)
                self.process_latency.record((finished - started) * 1000.0 / n)
                if task_sensor is not None:
                    task_sensor.record(n, n)
                if output_ready is not None:
                    # Each batch's output goes out now: while records keep arriving this loop can
                    # run for the whole time slice, and output held to its end waited up to 100 ms.
                    output_ready()
                if finished >= deadline:
                    break
        finally:
            if held is not None:
                held.release()

    def _hit_ratio(self) -> float:
        lookups = self.cache.hits + self.cache.misses
        return self.cache.hits / lookups if lookups else float("nan")

    def _adopt_cache(self, task) -> None:  # type: ignore[no-untyped-def]
        previous = task.record_cache
        if previous is self.cache:
            return
        if previous is not None:
            prefix = f"{task.task_id}-"
            for namespace in previous.namespaces():
                if namespace.startswith(prefix):
                    previous.move_namespace(namespace, self.cache)
        task.record_cache = self.cache


def _pick_oldest(ordered):  # type: ignore[no-untyped-def]
    """The non-empty buffer whose head record is oldest, and the head timestamp of the next
    oldest (records up to it can be taken without overtaking another partition)."""
    best = None
    best_ts = second_ts = -1
    for partition, buffer in ordered:
        ts = buffer.head_timestamp
        if ts < 0 and len(buffer) == 0:
            continue
        if best is None or ts < best_ts:
            if best is not None:
                second_ts = best_ts if second_ts < 0 else min(second_ts, best_ts)
            best, best_ts = (partition, buffer), ts
        elif second_ts < 0 or ts < second_ts:
            second_ts = ts
    if best is None:
        return None
    return best[0], best[1], second_ts
