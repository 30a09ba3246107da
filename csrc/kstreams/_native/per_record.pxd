# cython: language_level=3
"""C-level layout of the per-record path's record position and context routing (see
per_record.pyx), for modules that read the current record's timestamp."""


cdef class RecordPosition:
    cdef public object topic
    cdef public object partition
    cdef public object offset
    cdef public object timestamp
    cdef public object source


cdef class ContextRouting:
    cdef public object node
    cdef public object record_context
    cdef public object _failed

    cdef int _forward(self, object record, object children) except -1


cdef class AggregateStep:
    cdef object step(self, object key, object value, object old)
