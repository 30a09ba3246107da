# cython: language_level=3
"""C-level layout of KIP-613's end-to-end latency sensor (see e2e_latency.pyx), for the per-record
loops, which record a terminal node's latency without a Python call."""

from libc.stdint cimport int64_t


cdef class E2ELatencySensor:
    # Up to two samples, the newer last: start (monotonic s), count, total, min and max (ms).
    cdef double _start[2]
    cdef double _count[2]
    cdef double _total[2]
    cdef double _low[2]
    cdef double _high[2]
    cdef int _used

    cdef int _current(self, double now) noexcept
    cdef bint _live(self, int i, double now) noexcept
    cdef void record_ms(self, double latency_ms) noexcept
    cdef void record_at(self, double timestamp) noexcept
