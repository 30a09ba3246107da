# Included by kernels.pyx (one extension module; see its docstring).
# Window store keys: runs of keys by window start, for the window stores' batch reads and writes.

def window_start_runs(list items not None, Py_ssize_t start_from_end, Py_ssize_t strip=0):
    """Consecutive runs of ``items`` with the same window start, in order: a list of
    ``(start, [item, ...])``. An item is a key (bytes) or a ``(key, value)`` pair; its window
    start is the big-endian long that begins ``start_from_end`` bytes before the key's end
    (8: a window key; 12: a changelog key, which ends with a 4-byte sequence number). ``strip``:
    bytes cut from the end of each key in the result (4 turns changelog keys into window keys).
    A segmented store writes or reads each run in one call to its segment."""
    cdef list out = []
    cdef list run = None
    cdef int64_t start, current = 0
    cdef object item, key
    cdef Py_ssize_t n
    cdef bint pair
    if start_from_end < 8 or strip < 0 or strip > start_from_end - 8:
        raise ValueError(f"start_from_end={start_from_end}, strip={strip}: the start needs 8 bytes "
                         "and strip may cut only what follows it")
    for item in items:
        pair = type(item) is tuple
        key = (<tuple>item)[0] if pair else item
        if type(key) is not bytes:
            raise TypeError(f"window store keys are bytes, got {type(key).__name__}")
        n = PyBytes_GET_SIZE(key)
        if n < start_from_end:
            raise ValueError(f"a {n}-byte key cannot end with a {start_from_end}-byte window suffix")
        start = <int64_t>_be64(PyBytes_AS_STRING(key) + n - start_from_end)
        if run is None or start != current:
            run = []
            out.append((start, run))
            current = start
        if strip:
            key = PyBytes_FromStringAndSize(PyBytes_AS_STRING(key), n - strip)
            item = (key, (<tuple>item)[1]) if pair else key
        run.append(item)
    return out
