"""StreamThreads: a client's stream threads (KIP-663) and the division of the record cache budget.

Threads are started, added and removed while the client runs; since tasks are not pinned to
threads (they are picked dynamically), none of this needs a rebalance or moves a partition: only
the record cache is redivided, every live thread getting an equal share of
``statestore.cache.max.bytes``. A thread that died keeps its name until it is pruned from the list,
so a replacement (REPLACE_THREAD) gets another one, as in Kafka.

The count is exact: live threads = configured + added - removed, whatever interleaves. A thread that
fails is marked failed under the lock before its failure is reported, and a removal never picks a
failed thread; a thread that a removal picked before it failed is reported as not to be replaced
(the removal already took it away). So no thread is both removed and replaced.

Lock: ``StreamThreads.lock`` (RLock) guards the thread list. It comes after the client's state lock
and before the task manager's lock; it is held only to read or change the list, never while waiting
for another thread: a resize that shrinks caches runs on the polling thread after it is released,
because the polling thread takes it when it applies REPLACE_THREAD.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from kstreams.errors import StreamsException
from kstreams.processing.record_cache import thread_share
from kstreams.runtime.retry import time_left
from kstreams.runtime.tasks.barrier import barrier
from kstreams.runtime.threads.python_gate import PythonGate
from kstreams.runtime.threads.stream_thread import StreamThread, ThreadState

if TYPE_CHECKING:
    from kstreams._native.scheduler import TaskScheduler
    from kstreams.config import StreamsConfig
    from kstreams.metrics import MetricsRegistry, Sensor
    from kstreams.runtime.tasks.task_manager import TaskManager

__all__ = ["PollingCalls", "StreamThreads"]

logger = logging.getLogger(__name__)

_SHRINK_TIMEOUT_S = 120.0


class PollingCalls(Protocol):
    """What the stream threads need of the polling thread (``PollingThread`` implements it)."""

    def is_alive(self) -> bool: ...

    def call(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        """Run ``fn`` on the polling thread between its turns and return its result."""
        ...

    def output_ready(self) -> None:
        """A stream thread processed records: their output can go out now."""
        ...


class StreamThreads:
    """The stream threads of one client (see the module docstring)."""

    def __init__(
        self,
        client_id: str,
        config: StreamsConfig,
        scheduler: TaskScheduler,
        task_manager: TaskManager,
        metrics: MetricsRegistry,
        polling: PollingCalls,
        on_failure: Callable[[StreamThread, int, BaseException, bool], None],
        task_sensor: Callable[[Any], Sensor],
    ) -> None:
        """``on_failure(thread, handle, exc, replace)``: a thread failed; ``replace`` is False when
        a removal had picked it, so REPLACE_THREAD must not start another in its place."""
        self.lock = threading.RLock()
        self._client_id = client_id
        self._cache_max_bytes = config.cache_max_bytes
        self._batch_size = int(config["processing.batch.size"])
        self._time_slice_ms = int(config["task.time.slice.ms"])
        self._scheduler = scheduler
        self._task_manager = task_manager
        self._metrics = metrics
        self._polling = polling
        self._on_failure = on_failure
        self._task_sensor = task_sensor
        self._threads: list[StreamThread] = []
        # One batch of Python processors at a time across the threads (see stream_thread).
        self._python_gate = PythonGate()

    def start(self, count: int) -> None:
        """Start ``count`` threads, each with an equal share of the cache budget."""
        with self.lock:
            share = thread_share(self._cache_max_bytes, count)
            for _ in range(count):
                self._start_one(share)

    def add(self, may_add: Callable[[], bool], reserved: tuple[str, ...] = ()) -> StreamThread | None:
        """Start one more thread if ``may_add()`` (asked under the lock) and redivide the caches;
        None if not. ``reserved`` names stay taken (a dying thread's)."""
        with self.lock:
            if not may_add():
                return None
            # The new thread starts with its share at once; the others shrink to theirs right
            # after, outside the lock (the caches briefly hold up to one share more than the total).
            thread = self._start_one(thread_share(self._cache_max_bytes, len(self.live()) + 1), reserved)
        self.resize_caches()
        return thread

    def request_removal(self) -> StreamThread | None:
        """Ask one live thread to stop (the calling thread if it is one) and return it; None if no
        thread is live. The caller waits for it and then calls ``resize_caches(exclude=it)``."""
        with self.lock:
            live = [t for t in self.live() if t.state is not ThreadState.PENDING_SHUTDOWN and not t.failed]
            if not live:
                return None
            current = threading.current_thread()
            victim = current if isinstance(current, StreamThread) and current in live else live[0]
            victim.request_stop()
            return victim

    def live(self) -> list[StreamThread]:
        """The threads that are not DEAD (dead ones are pruned from the list here)."""
        with self.lock:
            self._threads = [t for t in self._threads if t.state is not ThreadState.DEAD]
            return list(self._threads)

    def all(self) -> list[StreamThread]:
        """Every thread not yet pruned, dead ones included."""
        with self.lock:
            return list(self._threads)

    def resize_caches(self, exclude: StreamThread | None = None) -> None:
        """Give every live thread's cache (but ``exclude``'s, a thread being removed) its equal
        share of the budget, as the thread list is when the resize runs: concurrent changes each
        resize, and the last one sees the final list. Called with no lock held.

        Growing never evicts, so it happens at once from the caller. Shrinking may flush evicted
        entries downstream through their tasks' processors, so it runs on the polling thread under
        the commit barrier, while no task is being processed. A removed thread's cached entries stay
        where they are until a live thread next picks their task and adopts them.
        """

        def current() -> tuple[list[StreamThread], int]:
            threads = [t for t in self.live() if t is not exclude]
            return threads, thread_share(self._cache_max_bytes, len(threads))

        threads, size = current()
        if all(size >= t.cache.max_bytes for t in threads):
            for thread in threads:
                thread.cache.resize(size)
            return

        def shrink() -> None:
            threads, size = current()
            with barrier(self._scheduler, "shrinking the record caches"):
                for thread in threads:
                    thread.cache.resize(size)

        if self._polling.is_alive():
            try:
                self._polling.call(shrink, timeout=_SHRINK_TIMEOUT_S)
                return
            except StreamsException:
                pass  # the polling thread stopped meanwhile: no task runs, resize here
        threads, size = current()
        for thread in threads:
            thread.cache.resize(size)

    def stop(self, deadline: float | None) -> bool:
        """Ask every thread to stop and wait for them until ``deadline`` (monotonic; None: for
        ever); True if all ended."""
        threads = self.all()
        for thread in threads:
            thread.request_stop()
        running = [t for t in threads if t.is_alive() or t.state is not ThreadState.DEAD]
        return all(t.wait_dead(time_left(deadline)) for t in running)

    def _start_one(self, cache_bytes: int, reserved: tuple[str, ...] = ()) -> StreamThread:
        thread = StreamThread(
            self._free_name(reserved),
            self._scheduler,
            self._task_manager,
            cache_bytes,
            self._thread_failed,
            self._metrics,
            batch_size=self._batch_size,
            time_slice_ms=self._time_slice_ms,
            task_sensor=self._task_sensor,
            python_gate=self._python_gate,
            output_ready=self._polling.output_ready,
        )
        self._threads.append(thread)
        thread.start()
        return thread

    def _thread_failed(self, thread: StreamThread, handle: int, exc: BaseException) -> None:
        """Called by a failing thread before it ends: marked under the lock, so a removal either
        picked it before (no replacement) or will not pick it (see the module docstring)."""
        with self.lock:
            thread.failed = True
            replace = thread.state is not ThreadState.PENDING_SHUTDOWN
        self._on_failure(thread, handle, exc, replace)

    def _free_name(self, reserved: tuple[str, ...]) -> str:
        """``<client id>-StreamThread-<n>`` with the smallest n no live or reserved thread has."""
        names = {t.name for t in self.live()} | set(reserved)
        index = 1
        while f"{self._client_id}-StreamThread-{index}" in names:
            index += 1
        return f"{self._client_id}-StreamThread-{index}"
