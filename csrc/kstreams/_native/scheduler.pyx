# cython: language_level=3
"""Task scheduling for the stream threads: per-task locks, most-buffered-first, the commit barrier.

A stream thread asks next_task() for a signalled task (one with a due punctuation or a commit
request), else the ready task with the most buffered records; the task is then locked to that
thread until it calls release(). The polling thread pushes records into the
tasks' RecordBuffers and calls notify(); at commit it calls pause_all() (no new acquisitions, wait
until no task is held) and resume_all().

Lock order: TaskScheduler._mu is a leaf below the task manager's lock and above the buffers'
mutexes (docs/internals.md). It is taken only without the GIL and nothing that can call into Python
runs while it is held; buffer lengths are read through RecordBuffer.c_len(), an atomic load that
takes no lock. Every blocking call waits on the condition variable _cv on the monotonic clock.
"""

from cpython.ref cimport Py_DECREF, Py_INCREF, PyObject
from cython.operator cimport dereference as deref
from libc.stdint cimport int64_t, uint64_t
from libcpp cimport bool
from libcpp.vector cimport vector

from kstreams._native.record_buffer cimport RecordBuffer

__all__ = ["TaskScheduler"]


cdef inline int64_t _deadline_ns(double timeout) noexcept nogil:
    """Monotonic deadline for a timeout in seconds; -1 (no deadline) for a negative timeout."""
    # Beyond ~100 years the nanosecond arithmetic would overflow: that is "forever" anyway.
    if timeout < 0 or timeout > 3e9 or timeout != timeout:
        return -1
    return ks_monotonic_ns() + <int64_t>(timeout * 1e9)


cdef inline Py_ssize_t _buffered(const ks_Task* t) noexcept nogil:
    cdef Py_ssize_t total = 0
    cdef size_t i
    for i in range(t.buffers.size()):
        # A borrowed cast: the task owns a reference to every buffer while registered.
        total += (<RecordBuffer>t.buffers[i]).c_len()
    return total


cdef class TaskScheduler:
    """Hands tasks to stream threads, one holder per task, fullest task first.

    Guarantees: a task is held by at most one thread at a time; a failed task is never handed out
    until reset; while a pause is requested no task is handed out; every wait is bounded by its
    timeout on the monotonic clock and releases the GIL.
    """

    def __cinit__(self):
        self._holders = 0
        self._wake_generation = 0
        self._served = 0
        self._paused = False
        self._shutdown = False
        self._pause_flag.store(False)

    def __init__(self) -> None:
        pass

    def __dealloc__(self):
        cdef ks_Task* t
        cdef size_t i, j
        for i in range(self._tasks.size()):
            t = self._tasks[i]
            for j in range(t.buffers.size()):
                Py_DECREF(<object>t.buffers[j])
            del t
        self._tasks.clear()
        self._by_id.clear()

    # ---- locked helpers: _mu held, no GIL ----

    cdef ks_Task* _find(self, int64_t task_id) noexcept nogil:
        it = self._by_id.find(task_id)
        if it == self._by_id.end():
            return NULL
        return deref(it).second

    cdef ks_Task* _pick(self) noexcept nogil:
        # A signalled task (a punctuation due, a commit asked for) goes first, least recently
        # served first: ranked by its buffer alone, an idle task with a due wall-clock
        # punctuation would wait for as long as any other task had records.
        cdef ks_Task* best = NULL
        cdef ks_Task* t
        cdef Py_ssize_t best_count = -1
        cdef Py_ssize_t count
        cdef bool best_signalled = False
        cdef size_t i
        for i in range(self._tasks.size()):
            t = self._tasks[i]
            if t.held or t.failed or t.closing > 0:
                continue
            if t.signalled:
                if not best_signalled or t.last_served < best.last_served:
                    best = t
                    best_signalled = True
                continue
            if best_signalled or t.deferred:
                continue
            count = _buffered(t)
            if count == 0:
                continue
            if count > best_count or (count == best_count and t.last_served < best.last_served):
                best = t
                best_count = count
        return best

    # ---- the hot path, callable from other compiled modules without the GIL ----

    cdef int64_t c_next_task(self, double timeout) noexcept nogil:
        cdef int64_t deadline = _deadline_ns(timeout)
        cdef int64_t result = -1
        cdef ks_Task* t
        cdef bool in_time = True
        cdef uint64_t generation
        self._mu.lock()
        # Only waiters present at a wake_all() return -1: a later caller sees a newer generation.
        generation = self._wake_generation
        while True:
            if self._shutdown or self._wake_generation != generation:
                break
            if not self._paused:
                t = self._pick()
                if t != NULL:
                    t.held = True
                    t.signalled = False
                    self._served += 1
                    t.last_served = self._served
                    self._holders += 1
                    result = t.id
                    break
            if not in_time or timeout == 0:
                break
            # Checking once more after the deadline catches a notify that raced with the timeout.
            in_time = ks_wait_until_ns(self._cv, self._mu, deadline)
        self._mu.unlock()
        return result

    cdef int c_release(self, int64_t task_id) noexcept nogil:
        """0 on success, -1 for an unknown task, -2 for a task that is not held."""
        cdef int rc = 0
        cdef ks_Task* t
        self._mu.lock()
        t = self._find(task_id)
        if t == NULL:
            rc = -1
        elif not t.held:
            rc = -2
        else:
            t.held = False
            self._holders -= 1
            self._cv.notify_all()
        self._mu.unlock()
        return rc

    cdef void c_notify(self) noexcept nogil:
        # Taking the mutex orders this notify after the push: a waiter either sees the new length
        # when it scans or is already waiting when the notify comes.
        self._mu.lock()
        self._cv.notify_all()
        self._mu.unlock()

    # ---- registration ----

    def register(self, int64_t task_id, buffers) -> None:
        """Make a task schedulable; its buffered count is the sum of its buffers' lengths (one
        buffer per input partition), read without the GIL. Raises ValueError if task_id is
        negative or already registered."""
        if task_id < 0:
            raise ValueError(f"task ids are non-negative integers, got {task_id}")
        cdef list bufs = list(buffers)
        for b in bufs:
            if not isinstance(b, RecordBuffer):
                raise TypeError(f"task {task_id}: buffers must be RecordBuffers, got {type(b).__name__}")
        cdef ks_Task* t = new ks_Task()
        t.id = task_id
        for b in bufs:
            Py_INCREF(b)
            t.buffers.push_back(<PyObject*>b)
        cdef bool duplicate = False
        with nogil:
            self._mu.lock()
            if self._find(task_id) != NULL:
                duplicate = True
            else:
                self._by_id[task_id] = t
                self._tasks.push_back(t)
                # A task registered with records already buffered is ready now.
                self._cv.notify_all()
            self._mu.unlock()
        if duplicate:
            for b in bufs:
                Py_DECREF(b)
            del t
            raise ValueError(f"task {task_id} is already registered with this scheduler")

    def unregister(self, int64_t task_id, double timeout=-1.0) -> bool:
        """Remove a task once no thread holds it (waits up to timeout seconds; < 0 waits forever).
        While it waits the task is not handed out. Returns False on timeout (the task stays
        registered and schedulable). Unknown ids return True."""
        cdef int64_t deadline = _deadline_ns(timeout)
        cdef ks_Task* t
        cdef bool removed = False
        cdef bool in_time = True
        cdef size_t i
        with nogil:
            self._mu.lock()
            t = self._find(task_id)
            if t == NULL:
                removed = True
            else:
                t.closing += 1
                while t.held and in_time:
                    in_time = ks_wait_until_ns(self._cv, self._mu, deadline)
                # unregister calls on one id may overlap: only one of them finds it here.
                if self._find(task_id) != t:
                    t = NULL
                    removed = True
                elif t.held:
                    t.closing -= 1
                    t = NULL
                else:
                    self._by_id.erase(task_id)
                    for i in range(self._tasks.size()):
                        if self._tasks[i] == t:
                            self._tasks[i] = self._tasks.back()
                            self._tasks.pop_back()
                            break
                    removed = True
                # Either way the scheduling picture changed (a task freed up or went away).
                self._cv.notify_all()
            self._mu.unlock()
        if t != NULL:
            for i in range(t.buffers.size()):
                Py_DECREF(<object>t.buffers[i])
            del t
        return removed

    # ---- acquiring and releasing ----

    def next_task(self, double timeout) -> int:
        """Lock and return an unheld, non-failed task: a signalled one first (even with an empty
        buffer), else the one with the most buffered records; ties go to the task served least
        recently. Waits up to timeout seconds (0 polls, < 0 waits until woken); returns -1
        on timeout, on wake_all(), while paused past the timeout, or after shutdown()."""
        cdef int64_t result
        with nogil:
            result = self.c_next_task(timeout)
        return result

    def release(self, int64_t task_id) -> None:
        """Unlock a task held by the caller, waking waiters (pause_all, unregister, next_task).
        Raises KeyError for an unknown task and RuntimeError for a task no thread holds."""
        cdef int rc
        with nogil:
            rc = self.c_release(task_id)
        if rc == -1:
            raise KeyError(f"task {task_id} is not registered with this scheduler")
        if rc == -2:
            raise RuntimeError(f"task {task_id} is not held: release() only after next_task() gave it")

    def notify(self) -> None:
        """Records were pushed: wake threads waiting in next_task."""
        with nogil:
            self.c_notify()

    def signal(self, int64_t task_id) -> None:
        """Make a task eligible once even with an empty buffer (due punctuation, a commit request);
        cleared when the task is next handed out. An unknown id is ignored: the task went away."""
        cdef ks_Task* t
        with nogil:
            self._mu.lock()
            t = self._find(task_id)
            if t != NULL:
                t.signalled = True
                t.deferred = False
                self._cv.notify_all()
            self._mu.unlock()

    def defer(self, int64_t task_id) -> None:
        """Keep a task's records from being handed out until resume(task_id) or signal(task_id):
        the task waits for input on its other partitions (max.task.idle.ms). Unknown ids are
        ignored."""
        cdef ks_Task* t
        with nogil:
            self._mu.lock()
            t = self._find(task_id)
            if t != NULL:
                t.deferred = True
            self._mu.unlock()

    def resume(self, int64_t task_id) -> None:
        """Make a deferred task eligible again by its buffered records. Unknown ids are ignored."""
        cdef ks_Task* t
        with nogil:
            self._mu.lock()
            t = self._find(task_id)
            if t != NULL and t.deferred:
                t.deferred = False
                self._cv.notify_all()
            self._mu.unlock()

    def is_deferred(self, int64_t task_id) -> bool:
        """Whether the task is deferred (False for an unknown id)."""
        cdef ks_Task* t
        cdef bool deferred = False
        with nogil:
            self._mu.lock()
            t = self._find(task_id)
            if t != NULL:
                deferred = t.deferred
            self._mu.unlock()
        return deferred

    def wake_all(self) -> None:
        """Make every current next_task waiter return -1 at once (a thread was asked to stop)."""
        with nogil:
            self._mu.lock()
            self._wake_generation += 1
            self._cv.notify_all()
            self._mu.unlock()

    # ---- the commit barrier ----

    def pause_all(self, double timeout=-1.0) -> bool:
        """The commit barrier: block new acquisitions, then wait until no task is held.
        Returns False on timeout (acquisitions stay blocked until resume_all)."""
        cdef int64_t deadline = _deadline_ns(timeout)
        cdef bool in_time = True
        cdef bool done
        with nogil:
            self._mu.lock()
            self._paused = True
            self._pause_flag.store(True)
            while self._holders > 0 and in_time:
                in_time = ks_wait_until_ns(self._cv, self._mu, deadline)
            done = self._holders == 0
            self._mu.unlock()
        return done

    def resume_all(self) -> None:
        """End the pause: tasks are handed out again."""
        with nogil:
            self._mu.lock()
            self._paused = False
            self._pause_flag.store(False)
            self._cv.notify_all()
            self._mu.unlock()

    @property
    def pause_requested(self) -> bool:
        """True while pause_all is pending or in force: a thread holding a task releases it."""
        return self._pause_flag.load()

    # ---- failure and shutdown ----

    def fail(self, int64_t task_id) -> None:
        """Mark a task failed: it is never handed out until reset(). Its holder still releases it."""
        self._set_failed(task_id, True)

    def reset(self, int64_t task_id) -> None:
        """Clear a task's failed mark, making it schedulable again."""
        self._set_failed(task_id, False)

    cdef int _set_failed(self, int64_t task_id, bool failed) except -1:
        cdef ks_Task* t
        with nogil:
            self._mu.lock()
            t = self._find(task_id)
            if t != NULL:
                t.failed = failed
                self._cv.notify_all()
            self._mu.unlock()
        if t == NULL:
            raise KeyError(f"task {task_id} is not registered with this scheduler")
        return 0

    def shutdown(self) -> None:
        """Every next_task returns -1 from now on; waiters wake at once."""
        with nogil:
            self._mu.lock()
            self._shutdown = True
            self._cv.notify_all()
            self._mu.unlock()

    # ---- inspection ----

    def is_held(self, int64_t task_id) -> bool:
        """Whether a thread holds the task (False for an unknown id)."""
        cdef bool held = False
        cdef ks_Task* t
        with nogil:
            self._mu.lock()
            t = self._find(task_id)
            if t != NULL:
                held = t.held
            self._mu.unlock()
        return held

    def holder_count(self) -> int:
        """Number of tasks held right now."""
        cdef Py_ssize_t n
        with nogil:
            self._mu.lock()
            n = self._holders
            self._mu.unlock()
        return n

    def task_ids(self) -> list:
        """Registered task ids, ascending."""
        cdef vector[int64_t] ids
        cdef size_t i
        with nogil:
            self._mu.lock()
            for i in range(self._tasks.size()):
                ids.push_back(self._tasks[i].id)
            self._mu.unlock()
        return sorted([ids[i] for i in range(ids.size())])

    def buffered(self, int64_t task_id) -> int:
        """Records buffered for a task across its buffers. Raises KeyError for an unknown task."""
        cdef Py_ssize_t n = -1
        cdef ks_Task* t
        with nogil:
            self._mu.lock()
            t = self._find(task_id)
            if t != NULL:
                n = _buffered(t)
            self._mu.unlock()
        if n < 0:
            raise KeyError(f"task {task_id} is not registered with this scheduler")
        return n

    def is_failed(self, int64_t task_id) -> bool:
        """Whether the task is marked failed (False for an unknown id)."""
        cdef bool failed = False
        cdef ks_Task* t
        with nogil:
            self._mu.lock()
            t = self._find(task_id)
            if t != NULL:
                failed = t.failed
            self._mu.unlock()
        return failed

    def __len__(self) -> int:
        """Number of registered tasks."""
        cdef size_t n
        with nogil:
            self._mu.lock()
            n = self._tasks.size()
            self._mu.unlock()
        return n
