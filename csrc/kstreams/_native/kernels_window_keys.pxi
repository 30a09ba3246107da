# Included by kernels.pyx (one extension module; see its docstring).
# Window store keys: runs of keys by window start, for the window stores' batch reads and writes.
# A segmented store reads or writes each run in one call to its segment.

cdef inline int64_t _window_start(object key, Py_ssize_t start_from_end) except? -1:
    """The big-endian long that begins ``start_from_end`` (>= 8) bytes before the key's end."""
    if type(key) is not bytes:
        raise TypeError(f"window store keys are bytes, got {type(key).__name__}")
    cdef Py_ssize_t n = PyBytes_GET_SIZE(key)
    if n < start_from_end:
        raise ValueError(f"a {n}-byte key cannot end with a {start_from_end}-byte window suffix")
    return <int64_t>_be64(PyBytes_AS_STRING(key) + n - start_from_end)

cdef int _check_suffix(Py_ssize_t start_from_end, Py_ssize_t strip) except -1:
    if start_from_end < 8 or strip < 0 or strip > start_from_end - 8:
        raise ValueError(f"start_from_end={start_from_end}, strip={strip}: the window start takes 8 "
                         "bytes of the suffix, and strip may cut only what follows it")
    return 0

def window_key_runs(keys not None, Py_ssize_t start_from_end):
    """Consecutive runs of ``keys`` with the same window start, in order: a list of
    ``(start, [key, ...])``. The start is the big-endian long that begins ``start_from_end``
    bytes before a key's end (8 for a window key)."""
    cdef list out = []
    cdef list run = None
    cdef int64_t start, current = 0
    _check_suffix(start_from_end, 0)
    for key in keys:
        start = _window_start(key, start_from_end)
        if run is None or start != current:
            run = []
            out.append((start, run))
            current = start
        run.append(key)
    return out

def window_change_runs(changes not None, Py_ssize_t start_from_end, Py_ssize_t strip=0):
    """Consecutive runs of ``changes`` ((key, value) pairs, any iterable) with the same window
    start, in order: a list of ``(start, {key: value})`` where a later change of a key in a run
    replaces an earlier one, as a later put would. ``strip`` bytes are cut from the end of each
    key (12 and 4 turn changelog keys, which end with a 4-byte sequence number, into window
    keys). A dict per run and no pair objects kept: a batch of changes leaves nothing for the
    garbage collector."""
    cdef list out = []
    cdef dict run = None
    cdef int64_t start, current = 0
    cdef Py_ssize_t n
    _check_suffix(start_from_end, strip)
    for key, value in changes:
        start = _window_start(key, start_from_end)
        if run is None or start != current:
            run = {}
            out.append((start, run))
            current = start
        if strip:
            n = PyBytes_GET_SIZE(key)
            key = PyBytes_FromStringAndSize(PyBytes_AS_STRING(key), n - strip)
        run[key] = value
    return out
