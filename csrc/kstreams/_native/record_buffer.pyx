"""A task's FIFO of input records, shared by one pushing and one popping thread.

Lock: RecordBuffer._mu (a C++ mutex, a leaf in the lock order). No thread blocks on it while
holding the GIL: _acquire tries it once and otherwise waits with the GIL released. While it is
held the code touches C structures and reference counts only; batch references taken out of the
queue are released, and popped records copied, after it is unlocked.
"""

from cpython.ref cimport Py_DECREF, Py_INCREF, PyObject
from libc.stdint cimport int64_t
from libcpp.mutex cimport mutex
from libcpp.vector cimport vector

from kstreams._native.record_batch cimport RecordBatch, RecordBatchBuilder

__all__ = ["RecordBuffer"]

# Batches are immutable, so every empty pop can share one empty batch.
cdef RecordBatch _EMPTY = RecordBatch.empty()


cdef inline void _acquire(mutex* mu) noexcept:
    """Lock mu from a thread that holds the GIL. Uncontended, this is one try_lock; contended, the
    wait releases the GIL, because the thread holding mu may be waiting for the GIL."""
    if not mu.try_lock():
        with nogil:
            mu.lock()


cdef struct _Segment:
    PyObject* batch     # an owned reference
    Py_ssize_t start
    Py_ssize_t stop


cdef class RecordBuffer:
    """Per-task-partition FIFO of RecordBatches (see the module docstring for its lock)."""

    def __cinit__(self):
        self._bytes = 0
        self._len.store(0)

    def __dealloc__(self):
        cdef BufferEntry e
        while not self._q.empty():
            e = self._q.front()
            self._q.pop_front()
            Py_DECREF(<object>e.batch)

    cdef Py_ssize_t c_len(self) noexcept nogil:
        return self._len.load()

    cdef int c_push(self, RecordBatch batch) except -1:
        if batch is None:
            raise TypeError("push needs a RecordBatch, not None")
        if batch.n == 0:
            return 0
        cdef BufferEntry e
        e.batch = <PyObject*>batch
        e.pos = 0
        e.n = batch.n
        e.ts = batch._ts
        e.off = batch._off
        # The queue's reference: taken before the entry becomes visible to the popper.
        Py_INCREF(batch)
        _acquire(&self._mu)
        try:
            self._q.push_back(e)
        except BaseException:
            self._mu.unlock()
            Py_DECREF(batch)
            raise
        self._bytes += batch.c_nbytes()
        self._len.fetch_add(batch.n)
        self._mu.unlock()
        return 0

    cdef RecordBatch c_pop(self, Py_ssize_t max_records, long long max_timestamp):
        cdef vector[_Segment] segs
        cdef _Segment seg
        cdef BufferEntry* e
        cdef RecordBatch b
        cdef Py_ssize_t remaining = max_records, take, j, taken = 0
        cdef bint cut
        if max_records <= 0:
            return _EMPTY
        cdef RecordBatchBuilder builder
        cdef size_t k
        cdef Py_ssize_t total_bytes = 0
        cdef bint locked = True
        _acquire(&self._mu)
        try:
            while remaining > 0 and not self._q.empty():
                e = &self._q.front()
                b = <RecordBatch>e.batch
                take = min(e.n - e.pos, remaining)
                cut = False
                if max_timestamp >= 0:
                    j = 0
                    while j < take:
                        # The first record of a pop is always taken, whatever its timestamp.
                        if e.ts[e.pos + j] > max_timestamp and (taken > 0 or j > 0):
                            cut = True
                            break
                        j += 1
                    take = j
                if take == 0:
                    break
                seg.batch = e.batch
                seg.start = e.pos
                seg.stop = e.pos + take
                # Recorded before the queue changes, so an exception leaves both consistent.
                segs.push_back(seg)
                e.pos += take
                if e.pos == e.n:
                    # The queue's reference moves into the segment.
                    self._q.pop_front()
                else:
                    Py_INCREF(b)
                self._bytes -= <Py_ssize_t>(b._bounds[seg.stop] - b._bounds[seg.start])
                remaining -= take
                taken += take
                if cut:
                    break
            self._len.fetch_sub(taken)
            locked = False
            self._mu.unlock()

            # Outside the mutex: slice or copy the taken records.
            if segs.size() == 0:
                return _EMPTY
            if segs.size() == 1:
                return (<RecordBatch>segs[0].batch).c_slice(segs[0].start, segs[0].stop)
            for k in range(segs.size()):
                b = <RecordBatch>segs[k].batch
                total_bytes += <Py_ssize_t>(b._bounds[segs[k].stop] - b._bounds[segs[k].start])
            builder = RecordBatchBuilder()
            builder.reserve(taken, total_bytes)
            for k in range(segs.size()):
                builder.append_range(<RecordBatch>segs[k].batch, segs[k].start, segs[k].stop)
            return builder.finish()
        finally:
            if locked:
                self._len.fetch_sub(taken)
                self._mu.unlock()
            for k in range(segs.size()):
                Py_DECREF(<object>segs[k].batch)

    def push(self, RecordBatch batch):
        """Append a batch (O(1): the batch is referenced, not copied)."""
        self.c_push(batch)

    def pop(self, Py_ssize_t max_records, long long max_timestamp=-1):
        """Remove and return up to max_records from the head as one batch (empty when empty).

        With max_timestamp >= 0, stop before the first record whose timestamp exceeds it, but
        always return at least one record when any is buffered. A pop within one pushed batch is
        a slice; across batches the records are copied once.
        """
        return self.c_pop(max_records, max_timestamp)

    def __len__(self):
        return self._len.load()

    @property
    def bytes_held(self):
        """Key and value bytes of the buffered records."""
        cdef Py_ssize_t b
        with nogil:
            self._mu.lock()
            b = self._bytes
            self._mu.unlock()
        return b

    @property
    def head_timestamp(self):
        """Timestamp of the oldest buffered record, or -1 when empty."""
        cdef int64_t r = -1
        with nogil:
            self._mu.lock()
            if not self._q.empty():
                r = self._q.front().ts[self._q.front().pos]
            self._mu.unlock()
        return r

    @property
    def head_offset(self):
        """Offset of the oldest buffered record, or -1 when empty."""
        cdef int64_t r = -1
        with nogil:
            self._mu.lock()
            if not self._q.empty():
                r = self._q.front().off[self._q.front().pos]
            self._mu.unlock()
        return r

    def clear(self):
        """Drop every buffered record; returns how many were dropped."""
        cdef deque[BufferEntry] dropped
        cdef Py_ssize_t n
        with nogil:
            self._mu.lock()
            dropped.swap(self._q)
            self._bytes = 0
            n = self._len.exchange(0)
            self._mu.unlock()
        while not dropped.empty():
            Py_DECREF(<object>dropped.front().batch)
            dropped.pop_front()
        return n

    def __repr__(self):
        return f"RecordBuffer(len={self._len.load()})"
