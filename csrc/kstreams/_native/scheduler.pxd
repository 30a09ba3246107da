# cython: language_level=3
"""C-level layout of the task scheduler (see scheduler.pyx for the semantics and the lock order)."""

from cpython.ref cimport PyObject
from libc.stdint cimport int64_t, uint64_t
from libcpp cimport bool
from libcpp.atomic cimport atomic
from libcpp.mutex cimport mutex
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector


cdef extern from * nogil:
    """
    #include <chrono>
    #include <condition_variable>
    #include <mutex>
    #include <vector>

    /* One registered task. `buffers` holds owned references to its RecordBuffers, taken and
       dropped with the GIL; the scheduler reads their lengths without the GIL. */
    struct ks_Task {
        int64_t id = -1;
        std::vector<PyObject*> buffers;
        bool held = false;       /* locked to one stream thread */
        bool failed = false;     /* never handed out until reset */
        bool signalled = false;  /* eligible once even when empty */
        bool deferred = false;   /* idling for input (max.task.idle.ms): not handed out until resumed */
        int closing = 0;          /* unregister calls waiting for it: not handed out */
        uint64_t last_served = 0;  /* tie-break: the least recently served task goes first */
    };

    static inline int64_t ks_monotonic_ns() {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now().time_since_epoch()).count();
    }

    /* Waits on `cv` with `m` already locked by the caller, who still holds it afterwards. The
       deadline is on the monotonic (steady) clock, so wall-clock jumps do not shorten or stretch
       a wait. Returns false once the deadline has passed. */
    static inline bool ks_wait_until_ns(std::condition_variable& cv, std::mutex& m,
                                        int64_t deadline_ns) {
        std::unique_lock<std::mutex> lk(m, std::adopt_lock);
        bool in_time = true;
        if (deadline_ns < 0) {
            cv.wait(lk);
        } else {
            std::chrono::steady_clock::time_point deadline{std::chrono::nanoseconds(deadline_ns)};
            in_time = cv.wait_until(lk, deadline) == std::cv_status::no_timeout;
        }
        lk.release();
        return in_time;
    }
    """
    cppclass ks_Task:
        int64_t id
        vector[PyObject*] buffers
        bool held
        bool failed
        bool signalled
        bool deferred
        int closing
        uint64_t last_served

    cppclass condition_variable "std::condition_variable":
        void notify_one() noexcept
        void notify_all() noexcept

    int64_t ks_monotonic_ns()
    bool ks_wait_until_ns(condition_variable& cv, mutex& m, int64_t deadline_ns)


cdef class TaskScheduler:
    # _mu guards every field below except _pause_flag (an atomic mirror of _paused, read by
    # holders without the lock). It is taken only without the GIL.
    cdef mutex _mu
    cdef condition_variable _cv
    cdef unordered_map[int64_t, ks_Task*] _by_id
    cdef vector[ks_Task*] _tasks
    cdef Py_ssize_t _holders
    cdef uint64_t _wake_generation
    cdef uint64_t _served
    cdef bool _paused
    cdef bool _shutdown
    cdef atomic[bool] _pause_flag

    cdef ks_Task* _find(self, int64_t task_id) noexcept nogil
    cdef ks_Task* _pick(self) noexcept nogil
    cdef int64_t c_next_task(self, double timeout) noexcept nogil
    cdef int c_release(self, int64_t task_id) noexcept nogil
    cdef void c_notify(self) noexcept nogil
    cdef int _set_failed(self, int64_t task_id, bool failed) except -1
