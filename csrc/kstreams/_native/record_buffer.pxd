# C-level interface of kstreams._native.record_buffer.
#
# A RecordBuffer is a FIFO of RecordBatch references. Its mutex (_mu) is a leaf: no thread blocks
# on it while holding the GIL (a try_lock first, else a wait with the GIL released), and nothing
# that can call back into Python runs while it is held.
#
# c_len() reads the buffered record count from an atomic without the mutex or the GIL; the
# TaskScheduler calls it from its own nogil sections.

from cpython.ref cimport PyObject
from libc.stdint cimport int64_t
from libcpp.atomic cimport atomic
from libcpp.deque cimport deque
from libcpp.mutex cimport mutex

from kstreams._native.record_batch cimport RecordBatch


cdef struct BufferEntry:
    PyObject* batch     # an owned reference to a RecordBatch
    Py_ssize_t pos      # records of the batch already popped
    Py_ssize_t n        # records in the batch
    const int64_t* ts   # the batch's columns, readable without the GIL
    const int64_t* off


cdef class RecordBuffer:
    cdef mutex _mu
    cdef deque[BufferEntry] _q      # guarded by _mu
    cdef Py_ssize_t _bytes          # guarded by _mu
    cdef atomic[Py_ssize_t] _len    # written under _mu, read anywhere

    cdef Py_ssize_t c_len(self) noexcept nogil
    cdef int c_push(self, RecordBatch batch) except -1
    cdef RecordBatch c_pop(self, Py_ssize_t max_records, long long max_timestamp)
