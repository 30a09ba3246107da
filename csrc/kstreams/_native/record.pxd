# cython: language_level=3
"""C-level layout of Record and FixedKeyRecord (see record.pyx), for modules that make them."""


cdef class _RecordFields:
    cdef readonly object key
    cdef readonly object value
    cdef readonly object timestamp
    cdef readonly object headers


cdef class Record(_RecordFields):
    pass


cdef class FixedKeyRecord(_RecordFields):
    pass
