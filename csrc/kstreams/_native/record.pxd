# cython: language_level=3
"""C-level layout of Record, FixedKeyRecord, Change and WindowedKey (see record.pyx), for modules
that make them."""


cdef class _RecordFields:
    cdef readonly object key
    cdef readonly object value
    cdef readonly object timestamp
    cdef readonly object headers


cdef class Record(_RecordFields):
    pass


cdef class FixedKeyRecord(_RecordFields):
    pass


cdef inline Record new_record(object key, object value, object timestamp, object headers):
    """A Record made without ``__init__``'s argument parsing (the per-record path makes one per
    processor hop)."""
    cdef Record made = Record.__new__(Record)
    made.key = key
    made.value = value
    made.timestamp = timestamp
    made.headers = headers
    return made


cdef class Change:
    cdef readonly object new_value
    cdef readonly object old_value
    cdef readonly bint is_latest


cdef inline Change new_change(object new_value, object old_value):
    """A Change made without ``__init__``'s argument parsing (an aggregation makes one per
    update); it is the latest version of its row."""
    cdef Change made = Change.__new__(Change)
    made.new_value = new_value
    made.old_value = old_value
    made.is_latest = True
    return made


cdef class WindowedKey:
    cdef readonly object key
    cdef readonly object start
    cdef readonly object end


cdef inline WindowedKey new_windowed_key(object key, object start, object end):
    """A WindowedKey made without ``__init__``'s argument parsing (windowed aggregations make one
    per update)."""
    cdef WindowedKey made = WindowedKey.__new__(WindowedKey)
    made.key = key
    made.start = start
    made.end = end
    return made
