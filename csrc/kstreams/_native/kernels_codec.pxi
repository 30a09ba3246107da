# Included by kernels.pyx (one extension module; see its docstring).
# Big-endian numbers of the built-in serdes, and validation of a batch's columns.

# --------------------------------------------------------------------------------- decoding

cdef inline uint64_t _be64(const char* p) noexcept nogil:
    cdef const uint8_t* b = <const uint8_t*>p
    return ((<uint64_t>b[0] << 56) | (<uint64_t>b[1] << 48) | (<uint64_t>b[2] << 40) |
            (<uint64_t>b[3] << 32) | (<uint64_t>b[4] << 24) | (<uint64_t>b[5] << 16) |
            (<uint64_t>b[6] << 8) | <uint64_t>b[7])

cdef inline uint32_t _be32(const char* p) noexcept nogil:
    cdef const uint8_t* b = <const uint8_t*>p
    return (<uint32_t>b[0] << 24) | (<uint32_t>b[1] << 16) | (<uint32_t>b[2] << 8) | <uint32_t>b[3]

cdef inline void _put_be64(char* p, uint64_t v) noexcept nogil:
    cdef int j
    for j in range(8):
        p[j] = <char>((v >> (56 - 8 * j)) & 0xFF)

cdef inline void _put_be32(char* p, uint32_t v) noexcept nogil:
    cdef int j
    for j in range(4):
        p[j] = <char>((v >> (24 - 8 * j)) & 0xFF)

cdef inline double _as_double(uint64_t bits) noexcept nogil:
    cdef double d
    memcpy(&d, &bits, 8)
    return d

cdef inline uint64_t _double_bits(double d) noexcept nogil:
    cdef uint64_t bits
    memcpy(&bits, &d, 8)
    return bits

cdef inline float _as_float(uint32_t bits) noexcept nogil:
    cdef float f
    memcpy(&f, &bits, 4)
    return f

cdef int _valid(const char* p, Py_ssize_t n, int enc) noexcept nogil:
    """Would the serde of this encoding deserialize these bytes (n = -1: None, always fine)?"""
    cdef JTok tok
    if n < 0:
        return 1
    if enc == ENC_BYTES:
        return 1
    if enc == ENC_STRING:
        return _utf8_valid(p, n)
    if enc == ENC_LONG or enc == ENC_DOUBLE:
        return n == 8
    if enc == ENC_INT or enc == ENC_FLOAT:
        return n == 4
    if enc == ENC_SHORT:
        return n == 2
    if enc == ENC_JSON:
        return j_parse(p, n, NULL, 0, &tok, NULL) == 0
    return 0

def validate(RecordBatch batch not None, int key_enc, int value_enc, fields=()):
    """Index of the first record whose key or value its serde would reject, or whose timestamp is
    negative; -1 when every record is fine. ``fields``: (side, name) top-level JSON fields (side 0
    key, 1 value) that steps below will read: parsing the documents anyway, validation captures
    where they are, and a batch found valid carries them (``indexed_fields``) to ``Predicate`` and
    ``project``, which then find them without a scan."""
    cdef Py_ssize_t i, bad = -1
    cdef FieldIndex index = _new_index(fields, key_enc, value_enc, batch.n) if fields else None
    cdef JFields want_key, want_value
    cdef FTok* row
    cdef int nkey = 0
    if index is not None:
        nkey = index.nkey
        _want_of(index, 0, nkey, &want_key)
        _want_of(index, nkey, index.nf, &want_value)
    with nogil:
        for i in range(batch.n):
            if batch.ts(i) < 0:
                bad = i
                break
            if index is None:
                if not _valid(batch.key_ptr(i), batch.key_len(i), key_enc) or \
                        not _valid(batch.value_ptr(i), batch.value_len(i), value_enc):
                    bad = i
                    break
                continue
            row = index.row(i)
            if want_key.n:
                if _capture(batch.key_ptr(i), batch.key_len(i), &want_key, row) < 0:
                    bad = i
                    break
            elif not _valid(batch.key_ptr(i), batch.key_len(i), key_enc):
                bad = i
                break
            if want_value.n:
                if _capture(batch.value_ptr(i), batch.value_len(i), &want_value, row + nkey) < 0:
                    bad = i
                    break
            elif not _valid(batch.value_ptr(i), batch.value_len(i), value_enc):
                bad = i
                break
    if bad < 0 and index is not None:
        batch._fields = index
    return bad
