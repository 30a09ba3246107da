# cython: language_level=3
"""C-level layout of ValueAndTimestamp (see value_and_timestamp.pyx), for modules that make them."""


cdef class ValueAndTimestamp:
    cdef readonly object value
    cdef readonly object timestamp
