# Included by kernels.pyx (one extension module; see its docstring).
# Numeric columns to and from numpy arrays, for Spark stages and other array callers.

# ------------------------------------------------------------------- numpy / Arrow callers

def decode_numbers(RecordBatch batch not None, int side, int enc):
    """The keys (side 0) or values (side 1) of a batch of LONG/INT/SHORT (int64 array) or
    DOUBLE/FLOAT (float64 array) columns, with a bool array marking None. For the Spark stages
    and other array callers. Raises ValueError on a value of the wrong width."""
    cdef bint floating = enc == ENC_DOUBLE or enc == ENC_FLOAT
    if enc not in (ENC_LONG, ENC_INT, ENC_SHORT, ENC_DOUBLE, ENC_FLOAT):
        raise ValueError(f"decode_numbers takes a numeric encoding, got {enc}")
    values = np.zeros(batch.n, dtype=np.float64 if floating else np.int64)
    nulls = np.zeros(batch.n, dtype=np.bool_)
    cdef double[::1] dv
    cdef int64_t[::1] iv
    cdef cnp.npy_bool[::1] nv = nulls
    cdef Py_ssize_t i, n, bad = -1
    cdef const char* p
    cdef Val v
    if floating:
        dv = values
    else:
        iv = values
    with nogil:
        for i in range(batch.n):
            if side == 0:
                p = batch.key_ptr(i)
                n = batch.key_len(i)
            else:
                p = batch.value_ptr(i)
                n = batch.value_len(i)
            if n < 0:
                nv[i] = 1
                continue
            if _decode(p, n, enc, NULL, 0, &v, NULL) < 0:
                bad = i
                break
            if floating:
                dv[i] = v.d
            else:
                iv[i] = v.i
    if bad >= 0:
        raise ValueError(f"record {bad} of the batch does not hold a value of encoding {enc}")
    return values, nulls

def decode_objects(RecordBatch batch not None, int side, int enc):
    """The keys (side 0) or values (side 1) of a batch as the built-in serde of ``enc`` reads
    each one (None for a null): bytes, str (strict UTF-8), int or float, made straight from the
    batch's memory. None when a record does not read that way (invalid UTF-8, a number of the
    wrong width) and for JSON: the caller then deserializes record by record, where that
    record's error is raised and handled."""
    if enc < ENC_BYTES or enc >= ENC_JSON:
        return None
    cdef Py_ssize_t i, n
    cdef const char* p
    cdef Val v
    cdef list out = []
    for i in range(batch.n):
        if side == 0:
            p = batch.key_ptr(i)
            n = batch.key_len(i)
        else:
            p = batch.value_ptr(i)
            n = batch.value_len(i)
        if n < 0:
            out.append(None)
        elif enc == ENC_BYTES:
            out.append(PyBytes_FromStringAndSize(p, n))
        elif enc == ENC_STRING:
            try:
                out.append(PyUnicode_DecodeUTF8(p, n, NULL))
            except UnicodeDecodeError:
                return None
        elif _decode(p, n, enc, NULL, 0, &v, NULL) < 0:
            return None
        elif enc == ENC_DOUBLE or enc == ENC_FLOAT:
            out.append(v.d)
        else:
            out.append(v.i)
    return out

def encode_numbers(values, int enc):
    """A list of bytes: each value of an int64 or float64 array in the encoding's big-endian form
    (LONG, INT, DOUBLE), as the built-in serdes write them."""
    cdef Py_ssize_t i, n = len(values)
    cdef char buf[8]
    cdef list out = []
    cdef const int64_t[::1] iv
    cdef const double[::1] dv
    if enc == ENC_DOUBLE:
        dv = np.ascontiguousarray(values, dtype=np.float64)
        for i in range(n):
            _put_be64(buf, _double_bits(dv[i]))
            out.append(PyBytes_FromStringAndSize(buf, 8))
    elif enc == ENC_LONG or enc == ENC_INT:
        iv = np.ascontiguousarray(values, dtype=np.int64)
        for i in range(n):
            if enc == ENC_LONG:
                _put_be64(buf, <uint64_t>iv[i])
                out.append(PyBytes_FromStringAndSize(buf, 8))
            else:
                if iv[i] < INT32_MIN or iv[i] > INT32_MAX:
                    raise OverflowError(f"{iv[i]} is outside the signed 32-bit range")
                _put_be32(buf, <uint32_t><int32_t>iv[i])
                out.append(PyBytes_FromStringAndSize(buf, 4))
    else:
        raise ValueError(f"encode_numbers takes LONG, INT or DOUBLE, got {enc}")
    return out
