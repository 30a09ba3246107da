# cython: language_level=3
"""A line of Python ``filter``/``map``/``map_values``/``select_key`` functions run over a batch,
record by record, from C.

The batch step of such a line used to run each function over the whole batch in turn (one
``map`` per operation). That keeps every intermediate value of the batch alive at once: with
``map_values(json.loads)`` first, thousands of dicts, which the cyclic garbage collector then
walks again and again while the batch is built; and each filter compressed every column.
Here each record goes through all the functions before the next one starts (the order of calls
of the per-record path), its intermediate values die at once, and only survivors are appended.
The calls are made from C: there is no bytecode of kstreams' between them.
"""

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE

__all__ = ["FILTER", "KEY", "MAP", "VALUES", "VALUES_WITH_KEY", "run_chain"]

# What an operation does with a record: its function's arguments and what its result becomes.
FILTER = 0  # keep the record when bool(fn(key, value)) != negate
VALUES = 1  # value = fn(value)
VALUES_WITH_KEY = 2  # value = fn(key, value)
KEY = 3  # key = fn(key, value)
MAP = 4  # key, value = fn(key, value), a KeyValue or a (key, value) pair


cdef class _Op:
    cdef int kind
    cdef object fn
    cdef bint negate


def run_chain(list ops not None, list keys not None, list values not None, list failed not None):
    """Run every record (``keys[i]``, ``values[i]``) through ``ops``, a list of (kind, function,
    negate); returns (keys, values, kept) of the records that passed every filter, ``kept`` their
    positions in the input (None when all passed). When a function raises, ``failed`` (a list of
    two) is set to its operation's and its record's positions before the exception propagates."""
    cdef Py_ssize_t n = PyList_GET_SIZE(keys)
    if PyList_GET_SIZE(values) != n:
        raise ValueError(f"run_chain: {n} keys but {PyList_GET_SIZE(values)} values")
    cdef list compiled = []
    cdef _Op op
    for kind, fn, negate in ops:
        op = _Op.__new__(_Op)
        op.kind = kind
        op.fn = fn
        op.negate = negate
        if op.kind < FILTER or op.kind > MAP:
            raise ValueError(f"run_chain: unknown operation kind {kind!r}")
        compiled.append(op)
    cdef Py_ssize_t m = len(compiled)
    cdef list out_keys = []
    cdef list out_values = []
    cdef list kept = []
    cdef Py_ssize_t i = 0, j = 0
    cdef bint dropped = False
    cdef bint keep
    cdef object key, value, result
    try:
        for i in range(n):
            key = <object>PyList_GET_ITEM(keys, i)
            value = <object>PyList_GET_ITEM(values, i)
            keep = True
            for j in range(m):
                op = <_Op>PyList_GET_ITEM(compiled, j)
                if op.kind == FILTER:
                    if bool(op.fn(key, value)) == op.negate:
                        keep = False
                        break
                elif op.kind == VALUES:
                    value = op.fn(value)
                elif op.kind == VALUES_WITH_KEY:
                    value = op.fn(key, value)
                elif op.kind == KEY:
                    key = op.fn(key, value)
                else:
                    key, value = _key_value_of(op.fn(key, value))
            if keep:
                out_keys.append(key)
                out_values.append(value)
                if dropped:
                    kept.append(i)
            elif not dropped:
                kept = list(range(i))  # every record before this one passed
                dropped = True
    except BaseException:
        failed[0] = j
        failed[1] = i
        raise
    return out_keys, out_values, (kept if dropped else None)


cdef tuple _key_value_of(object result):
    """A mapper's result as (key, value); a clear error for anything else (as the per-record
    ``map`` says it)."""
    try:
        key, value = result
    except (TypeError, ValueError):
        raise TypeError(
            f"The mapper of map must return a KeyValue (or a (key, value) tuple), got {result!r}."
        ) from None
    return (key, value)
