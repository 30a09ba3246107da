# cython: language_level=3
"""C-level layout of the per-record path's record position, context routing, graph nodes and
processors (see per_record.pyx), for modules that read the current record's timestamp or serve
an aggregation's reads and writes."""

from libc.stdint cimport int64_t

from kstreams._native.e2e_latency cimport E2ELatencySensor


cdef class RecordPosition:
    cdef public object topic
    cdef public object partition
    cdef public int64_t offset
    cdef public object timestamp
    cdef public object headers
    cdef public object source


cdef class ContextRouting:
    cdef public object node
    cdef public object record_context
    cdef public object _failed
    cdef public object task_cache
    cdef public int64_t next_stream_due

    cdef int _forward(self, object record, object children) except -1
    cdef int _forward_fields(self, object key, object value, object timestamp, object headers,
                             object children) except -1


cdef class AggregateStep:
    cdef object step(self, object key, object value, object old)


cdef class ProcessCore:
    cdef int _process(self, object record) except -1
    cdef int _process_fields(self, object key, object value, object timestamp,
                             object headers) except -1


cdef class NodeBase:
    cdef public object name
    cdef public list children
    cdef public dict children_by_name
    cdef public E2ELatencySensor e2e_latency
    cdef object _process_fn
    cdef ProcessCore _core


cdef class AggregateAccess:
    cdef tuple _update(self, object key, object value, int64_t timestamp, int64_t window_start,
                       object apply, bint result=*)
