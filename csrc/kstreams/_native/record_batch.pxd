# C-level interface of kstreams._native.record_batch, for other compiled modules.
#
# Layout. A batch's records live in C memory owned by small "_Memory" objects that batches share:
#   - arena:  one byte buffer; record i's key starts at arena[bounds[i]] and its value follows the
#             key at once, so bounds[i + 1] - bounds[i] is the record's key+value bytes (a None key
#             or value occupies no bytes).
#   - bounds: int64[n + 1]; klen, vlen: int32[n] (-1 = None); ts: int64[n]; part: int32[n];
#             off: int64[n].
#   - headers: a Python list (one entry per record of the storage) or None when no record has
#             headers; _hbase is this batch's first index into it. An entry is None, a list of
#             (str, bytes | None), or the record's headers as a Kafka client read them, undecoded:
#             one bytes object in the raw layout below (atomic, so the cyclic GC never walks it),
#             decoded only when Python code asks for the record's headers. Batches share entries.
# A RecordBatch's pointers are already advanced to its first record, so every accessor below takes
# an index relative to the batch (0 <= i < n). Slices therefore cost O(1) and share memory.
#
# Accessors are inline, noexcept and nogil; they do no bounds checking (callers loop over
# range(batch.n)).
#
# Building from C: RecordBatchBuilder appends records from raw pointers without the GIL and
# finish() hands the buffers to a new RecordBatch without copying the byte arena.

from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy


# Raw header layout, per header in order: int32 name length, the name's UTF-8 bytes, int32 value
# length (-1: None), the value's bytes; int32s in the machine's byte order (it never leaves the
# process: pickling and every Python accessor decode it).
cdef inline Py_ssize_t raw_header_size(Py_ssize_t name_len, Py_ssize_t value_len) noexcept nogil:
    return 8 + name_len + (value_len if value_len > 0 else 0)

cdef inline char* raw_header_put(char* p, const char* name, Py_ssize_t name_len, const char* value,
                                 Py_ssize_t value_len) noexcept nogil:
    """Write one header at p (value NULL: None); returns the position after it."""
    cdef int32_t n = <int32_t>name_len
    cdef int32_t v = <int32_t>value_len if value != NULL else -1
    memcpy(p, &n, 4)
    memcpy(p + 4, name, name_len)
    p += 4 + name_len
    memcpy(p, &v, 4)
    p += 4
    if v > 0:
        memcpy(p, value, v)
        p += v
    return p

cdef inline Py_ssize_t raw_header_get(const char* p, Py_ssize_t remaining, const char** name,
                                      Py_ssize_t* name_len, const char** value,
                                      Py_ssize_t* value_len) noexcept nogil:
    """Read the header at p (value NULL: None); returns the bytes it takes, -1 when the rest is
    not a whole header."""
    cdef int32_t n, v
    if remaining < 8:
        return -1
    memcpy(&n, p, 4)
    if n < 0 or remaining < 8 + n:
        return -1
    memcpy(&v, p + 4 + n, 4)
    if v > remaining - 8 - n:
        return -1
    name[0] = p + 4
    name_len[0] = n
    value[0] = p + 8 + n if v >= 0 else NULL
    value_len[0] = v if v > 0 else 0
    return 8 + n + (v if v > 0 else 0)

cdef list decode_raw_headers(bytes raw)


cdef class _Memory:
    """Owner of one malloc'd block; freed when the last batch using it goes away."""
    cdef void* ptr
    cdef Py_ssize_t size


cdef class RecordBatch:
    cdef Py_ssize_t n
    # Owners keep the memory behind the pointers alive.
    cdef _Memory _arena_mem
    cdef _Memory _cols_mem      # bounds, klen, vlen, ts (and part/off unless replaced)
    cdef _Memory _part_mem
    cdef _Memory _off_mem
    cdef object _headers        # list or None
    cdef Py_ssize_t _hbase
    # Positions of top-level JSON fields in this batch's columns (kernels' FieldIndex), or None.
    # Only kernels set it; a derived batch (slice, copy with new offsets) starts without one.
    cdef object _fields
    # Pointers advanced to this batch's first record.
    cdef const char* _arena
    cdef const int64_t* _bounds
    cdef const int32_t* _klen
    cdef const int32_t* _vlen
    cdef const int64_t* _ts
    cdef const int32_t* _part
    cdef const int64_t* _off

    cdef inline const char* key_ptr(self, Py_ssize_t i) noexcept nogil:
        return self._arena + self._bounds[i]

    cdef inline Py_ssize_t key_len(self, Py_ssize_t i) noexcept nogil:
        """Key length in bytes, or -1 for a None key."""
        return self._klen[i]

    cdef inline const char* value_ptr(self, Py_ssize_t i) noexcept nogil:
        cdef int32_t kl = self._klen[i]
        return self._arena + self._bounds[i] + (kl if kl > 0 else 0)

    cdef inline Py_ssize_t value_len(self, Py_ssize_t i) noexcept nogil:
        """Value length in bytes, or -1 for a None value (a tombstone)."""
        return self._vlen[i]

    cdef inline int64_t ts(self, Py_ssize_t i) noexcept nogil:
        return self._ts[i]

    cdef inline int32_t part(self, Py_ssize_t i) noexcept nogil:
        return self._part[i]

    cdef inline int64_t off(self, Py_ssize_t i) noexcept nogil:
        return self._off[i]

    cdef inline Py_ssize_t c_nbytes(self) noexcept nogil:
        """Key and value bytes of the batch (O(1): the records are contiguous in the arena)."""
        if self.n == 0:
            return 0
        return <Py_ssize_t>(self._bounds[self.n] - self._bounds[0])

    cdef inline object c_headers(self, Py_ssize_t i):
        """Headers of record i (a list of (str, bytes | None)) or None. Needs the GIL."""
        if self._headers is None:
            return None
        return self._headers[self._hbase + i]

    cdef RecordBatch c_slice(self, Py_ssize_t start, Py_ssize_t stop)
    cdef Py_ssize_t _index(self, Py_ssize_t i) except -1
    cdef tuple _record(self, Py_ssize_t i)
    cdef object _view(self, const void* ptr, int typenum, _Memory owner)


cdef class RecordBatchBuilder:
    """Growable C buffers that become one RecordBatch.

    append() copies a record's bytes from raw pointers and may run without the GIL; a length of
    -1 means None. set_last_headers() (GIL) attaches headers to the last appended record.
    append_from() copies record i of another batch, headers included (GIL held).
    finish() returns the batch and leaves the builder empty and reusable.

    Zero-copy building: adopt_arena() hands an empty builder a malloc'd byte buffer that already
    holds the records' key/value bytes back to back (key then value, None = no bytes);
    append_described() then adds each record's columns without copying bytes. Between the two,
    do not call append() or append_range() (they would write over the adopted bytes).
    """
    cdef char* _arena
    cdef Py_ssize_t _arena_len
    cdef Py_ssize_t _arena_cap
    cdef int64_t* _bounds       # capacity _cap + 1
    cdef int32_t* _klen
    cdef int32_t* _vlen
    cdef int64_t* _ts
    cdef int32_t* _part
    cdef int64_t* _off
    cdef Py_ssize_t n
    cdef Py_ssize_t _cap
    cdef list _headers          # None until a record has headers

    cdef int reserve(self, Py_ssize_t records, Py_ssize_t nbytes) except -1 nogil
    cdef int append(self, const char* key, Py_ssize_t klen, const char* value, Py_ssize_t vlen,
                    int64_t ts, int32_t part, int64_t off) except -1 nogil
    cdef int append_range(self, RecordBatch batch, Py_ssize_t start, Py_ssize_t stop) except -1
    cdef int set_last_headers(self, object headers) except -1
    cdef int _set_headers(self, Py_ssize_t i, object headers) except -1
    cdef int adopt_arena(self, char* arena, Py_ssize_t capacity) except -1 nogil
    cdef int append_described(self, Py_ssize_t klen, Py_ssize_t vlen, int64_t ts, int32_t part,
                              int64_t off) except -1 nogil
    cdef RecordBatch finish(self)


cdef int32_t c_murmur2(const char* data, Py_ssize_t length) noexcept nogil
