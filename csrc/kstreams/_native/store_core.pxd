# cython: language_level=3
"""C-level layout of the store layers' per-record core (see store_core.pyx), for the accessors
that write through it."""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

from kstreams._native.record_collector cimport RecordCollector


cdef class ChangelogSender:
    cdef RecordCollector _collector
    cdef str _topic
    cdef int32_t _partition
    cdef object _context
    cdef bint _split_timestamps

    cdef int _send(self, object key, object value, int64_t timestamp) except -1
    cdef int _log(self, object key, object value) except -1


cdef class BufferedDatabase:
    cdef public dict _pending
    cdef public object _db
    cdef public Py_ssize_t max_pending

    cdef object _get(self, object key)
    cdef int _put(self, object key, object value) except -1


cdef class DatabaseStore:
    cdef public BufferedDatabase _db

    cdef BufferedDatabase _open(self)


cdef class LoggedPut:
    cdef object _inner_put
    cdef DatabaseStore _points
    cdef object _log_change
    cdef ChangelogSender _sender

    cdef int _put(self, object key, object value) except -1


cdef class SegmentIndex:
    cdef public dict _segments
    cdef public int64_t retention_ms
    cdef public int64_t interval
    cdef public int64_t observed_stream_time
    cdef public bint _live_known
    cdef public int64_t _live_from
    cdef public object _directory

    cdef BufferedDatabase _for_write(self, int64_t timestamp)
    cdef BufferedDatabase _for_read(self, int64_t timestamp)


cdef class UniqueWindowPoints:
    cdef SegmentIndex _segments
    cdef str _store_name

    cdef int _put(self, bytes key, object value, int64_t start) except -1
    cdef object _fetch(self, bytes key, int64_t start)


cdef class LoggedWindowPoints:
    cdef UniqueWindowPoints _points
    cdef ChangelogSender _sender

    cdef int _put(self, bytes key, object value, int64_t start) except -1
    cdef object _fetch(self, bytes key, int64_t start)


cdef bytes window_key(bytes key, int64_t start)


cdef inline int64_t read_be64(const char* p) noexcept nogil:
    """The signed 8-byte big-endian integer at ``p`` (the long serde's, a window start's)."""
    cdef const uint8_t* b = <const uint8_t*>p
    cdef uint64_t v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | b[i]
    return <int64_t>v


cdef inline void write_be64(char* p, int64_t value) noexcept nogil:
    """Write ``value`` at ``p`` as 8 big-endian bytes."""
    cdef uint64_t v = <uint64_t>value
    cdef int i
    for i in range(7, -1, -1):
        p[i] = <char>(v & 0xFF)
        v >>= 8
