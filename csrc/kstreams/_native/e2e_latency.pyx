# cython: language_level=3
"""KIP-613's end-to-end latency of one node: wall-clock time minus the timestamp of each record
that reaches it, in ms, as ``record-e2e-latency-avg``/``-min``/``-max`` (the gauges are registered
by ``kstreams.processing.e2e_latency``).

In C because the per-record loops record every record that reaches a terminal node (a processor
without children, a sink): a Python call per record there would cost more than many processors.

The statistics are over a sliding window as Kafka's are (metrics.num.samples 2 of
metrics.sample.window.ms 30 s): two samples, the older dropped when a new one starts; NaN when
nothing was recorded in the window. A sensor is recorded by the thread that holds its task (one at
a time) and read by any: a reader sees plain doubles, at worst one record behind.
"""

from libc.math cimport INFINITY, NAN
from libc.stdint cimport int64_t
from posix.time cimport CLOCK_MONOTONIC, CLOCK_REALTIME, clock_gettime, timespec

__all__ = ["SAMPLES", "SAMPLE_WINDOW_S", "E2ELatencySensor"]

SAMPLE_WINDOW_S = 30.0
SAMPLES = 2

cdef double _WINDOW_S = SAMPLE_WINDOW_S
cdef int _SAMPLES = SAMPLES


cdef inline double _monotonic_s() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec + <double>ts.tv_nsec * 1e-9


cdef inline double _wall_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <double>ts.tv_sec * 1000.0 + <double>ts.tv_nsec * 1e-6


cdef class E2ELatencySensor:
    """The e2e latency of one node: avg, min and max in ms over the last ``SAMPLES`` windows of
    ``SAMPLE_WINDOW_S`` (fields in e2e_latency.pxd)."""

    def __cinit__(self):
        self._used = 0

    cdef int _current(self, double now) noexcept:
        """The sample to record into: a new one when the newest started a window ago or more."""
        cdef int i
        if self._used == 0 or now - self._start[self._used - 1] >= _WINDOW_S:
            if self._used == _SAMPLES:
                for i in range(_SAMPLES - 1):
                    self._start[i] = self._start[i + 1]
                    self._count[i] = self._count[i + 1]
                    self._total[i] = self._total[i + 1]
                    self._low[i] = self._low[i + 1]
                    self._high[i] = self._high[i + 1]
                self._used -= 1
            i = self._used
            self._start[i] = now
            self._count[i] = 0.0
            self._total[i] = 0.0
            self._low[i] = INFINITY
            self._high[i] = -INFINITY
            self._used += 1
        return self._used - 1

    cdef void record_ms(self, double latency_ms) noexcept:
        cdef int i = self._current(_monotonic_s())
        self._count[i] += 1.0
        self._total[i] += latency_ms
        if latency_ms < self._low[i]:
            self._low[i] = latency_ms
        if latency_ms > self._high[i]:
            self._high[i] = latency_ms

    cdef void record_at(self, double timestamp) noexcept:
        """One record with this timestamp (ms), reaching the node now."""
        self.record_ms(_wall_ms() - timestamp)

    def record(self, double latency_ms):
        """One record whose timestamp is ``latency_ms`` before now."""
        self.record_ms(latency_ms)

    def record_since(self, double timestamp):
        """One record with this timestamp (ms), reaching the node now."""
        self.record_at(timestamp)

    def record_timestamps(self, const int64_t[:] timestamps):
        """Every record of a batch, by its timestamps (an int64 array): now minus each."""
        cdef Py_ssize_t n = timestamps.shape[0], j
        if n == 0:
            return
        cdef int64_t ts, oldest = timestamps[0], newest = timestamps[0]
        cdef double total = 0.0
        for j in range(n):
            ts = timestamps[j]
            total += <double>ts
            if ts < oldest:
                oldest = ts
            if ts > newest:
                newest = ts
        cdef double now = _wall_ms()
        cdef int i = self._current(_monotonic_s())
        self._count[i] += <double>n
        self._total[i] += now * n - total
        if now - newest < self._low[i]:
            self._low[i] = now - newest
        if now - oldest > self._high[i]:
            self._high[i] = now - oldest

    def now_ms(self):
        """Wall-clock time in ms, as the sensor reads it."""
        return _wall_ms()

    cdef bint _live(self, int i, double now) noexcept:
        return self._count[i] > 0.0 and now - self._start[i] < _SAMPLES * _WINDOW_S

    def avg(self):
        cdef double now = _monotonic_s(), count = 0.0, total = 0.0
        cdef int i
        for i in range(self._used):
            if self._live(i, now):
                count += self._count[i]
                total += self._total[i]
        return total / count if count > 0.0 else NAN

    def min(self):
        cdef double now = _monotonic_s(), low = INFINITY
        cdef int i
        cdef bint seen = False
        for i in range(self._used):
            if self._live(i, now):
                seen = True
                if self._low[i] < low:
                    low = self._low[i]
        return low if seen else NAN

    def max(self):
        cdef double now = _monotonic_s(), high = -INFINITY
        cdef int i
        cdef bint seen = False
        for i in range(self._used):
            if self._live(i, now):
                seen = True
                if self._high[i] > high:
                    high = self._high[i]
        return high if seen else NAN
