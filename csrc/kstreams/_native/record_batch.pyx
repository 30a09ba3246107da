"""Columnar, immutable batches of records held in C memory.

A RecordBatch is the unit in which records move between the cluster, the input buffers, the
compiled processors and the record collector. See record_batch.pxd for the memory layout and the
C-level accessors and builder other compiled modules use.
"""

cimport cython
cimport numpy as cnp
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.ref cimport Py_INCREF
from libc.stdint cimport INT32_MAX, int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy

import numpy as np

cnp.import_array()

__all__ = ["RecordBatch", "default_partition", "murmur2", "murmur3_hash128", "partitions_for_keys"]

cdef int64_t _ZERO_BOUND = 0


cdef class _Memory:
    def __dealloc__(self):
        if self.ptr != NULL:
            free(self.ptr)
            self.ptr = NULL


cdef inline _Memory _take(void* ptr, Py_ssize_t size):
    cdef _Memory m = _Memory.__new__(_Memory)
    m.ptr = ptr
    m.size = size
    return m


cdef inline _Memory _alloc(Py_ssize_t size):
    # malloc(0) may return NULL; always ask for at least one byte so NULL means failure.
    cdef void* p = malloc(size if size > 0 else 1)
    if p == NULL:
        raise MemoryError()
    return _take(p, size)


cdef inline bytes _bytes_or_none(const char* p, Py_ssize_t n):
    if n < 0:
        return None
    return PyBytes_FromStringAndSize(p, n)


cdef inline object _copy_headers(object headers):
    # Batches are immutable: callers get their own list, never the stored one.
    if headers is None:
        return None
    if type(headers) is bytes:
        return decode_raw_headers(<bytes>headers)
    return list(headers)


def copy_headers(headers):
    """A record's headers as a batch stores them (None, a list of (name, value), or the raw bytes
    a Kafka client read) as the per-record path gives them: a new list, or None."""
    return _copy_headers(headers)


cdef list decode_raw_headers(bytes raw):
    """A record's raw headers (record_batch.pxd) as [(name, bytes or None)], as confluent-kafka
    gives them."""
    cdef const char* p = PyBytes_AS_STRING(raw)
    cdef Py_ssize_t remaining = PyBytes_GET_SIZE(raw), used, name_len, value_len
    cdef const char* name
    cdef const char* value
    result = []
    while remaining > 0:
        used = raw_header_get(p, remaining, &name, &name_len, &value, &value_len)
        if used < 0:
            raise ValueError("malformed raw record headers")
        result.append(
            (name[:name_len].decode(errors="replace"), None if value == NULL else value[:value_len])
        )
        p += used
        remaining -= used
    return result


cdef class RecordBatch:
    """An immutable, columnar batch of records (key, value, timestamp, partition, offset, headers).

    Keys and values are bytes or None. Slices share the parent's memory; with_offsets and
    with_partition copy only the column they replace.
    """

    def __init__(self):
        raise TypeError("RecordBatch cannot be created directly; use from_records, from_columns, "
                        "concat or empty")

    # ---------------------------------------------------------------- construction

    @staticmethod
    def empty():
        """A batch with no records."""
        return RecordBatchBuilder().finish()

    @staticmethod
    def from_records(records):
        """Build from (key, value, timestamp, partition, offset, headers) tuples."""
        cdef RecordBatchBuilder b = RecordBatchBuilder()
        cdef object key, value, headers
        cdef Py_ssize_t kl, vl
        cdef const char* kp
        cdef const char* vp
        for rec in records:
            key, value, timestamp, partition, offset, headers = rec
            kp = NULL
            vp = NULL
            kl = -1
            vl = -1
            if key is not None:
                kp = PyBytes_AS_STRING(<bytes?>key)
                kl = PyBytes_GET_SIZE(key)
            if value is not None:
                vp = PyBytes_AS_STRING(<bytes?>value)
                vl = PyBytes_GET_SIZE(value)
            b.append(kp, kl, vp, vl, timestamp, partition, offset)
            if headers is not None:
                b.set_last_headers(headers)
        return b.finish()

    @staticmethod
    def from_columns(keys, values, timestamps, partitions=0, offsets=-1, headers=None):
        """Build from parallel columns. A scalar partition or offset fills the column; offsets of
        -1 mean "not yet assigned" (a producer's batch before the log appends it)."""
        cdef Py_ssize_t n = len(keys), i, kl, vl
        if len(values) != n or len(timestamps) != n:
            raise ValueError("keys, values and timestamps must have the same length")
        cdef bint scalar_part = isinstance(partitions, (int, np.integer))
        cdef bint scalar_off = isinstance(offsets, (int, np.integer))
        if not scalar_part and len(partitions) != n:
            raise ValueError("partitions must be an int or have one entry per record")
        if not scalar_off and len(offsets) != n:
            raise ValueError("offsets must be an int or have one entry per record")
        if headers is not None and len(headers) != n:
            raise ValueError("headers must have one entry per record")
        # Lists of ints (what a consumer's poll builds) are read as they are: converting them to
        # arrays first cost as much as copying the records.
        cdef bint ts_list = type(timestamps) is list
        cdef bint off_list = not scalar_off and type(offsets) is list
        cdef list ts_items, off_items
        cdef const int64_t[::1] tsv
        cdef const int32_t[::1] pv
        cdef const int64_t[::1] ov
        cdef int64_t ts_i, off_i
        if ts_list:
            ts_items = <list>timestamps
        else:
            tsv = np.ascontiguousarray(timestamps, dtype=np.int64)
        cdef int32_t pfill = 0
        cdef int64_t ofill = 0
        if scalar_part:
            pfill = partitions
        else:
            pv = np.ascontiguousarray(partitions, dtype=np.int32)
        if scalar_off:
            ofill = offsets
        elif off_list:
            off_items = <list>offsets
        else:
            ov = np.ascontiguousarray(offsets, dtype=np.int64)
        cdef RecordBatchBuilder b = RecordBatchBuilder()
        cdef object key, value, h
        cdef const char* kp
        cdef const char* vp
        # As lists (what every caller passes) they are read without the generic item protocol,
        # and their bytes are counted first so the arena is allocated once.
        cdef list key_list = keys if type(keys) is list else list(keys)
        cdef list value_list = values if type(values) is list else list(values)
        cdef Py_ssize_t nbytes = 0
        for i in range(n):
            key = key_list[i]
            value = value_list[i]
            if key is not None:
                nbytes += PyBytes_GET_SIZE(<bytes?>key)
            if value is not None:
                nbytes += PyBytes_GET_SIZE(<bytes?>value)
        b.reserve(n, nbytes)
        for i in range(n):
            key = key_list[i]
            value = value_list[i]
            kp = NULL
            vp = NULL
            kl = -1
            vl = -1
            if key is not None:
                kp = PyBytes_AS_STRING(<bytes?>key)
                kl = PyBytes_GET_SIZE(key)
            if value is not None:
                vp = PyBytes_AS_STRING(<bytes?>value)
                vl = PyBytes_GET_SIZE(value)
            ts_i = ts_items[i] if ts_list else tsv[i]
            if scalar_off:
                off_i = ofill
            else:
                off_i = off_items[i] if off_list else ov[i]
            b.append(kp, kl, vp, vl, ts_i, pfill if scalar_part else pv[i], off_i)
            if headers is not None:
                h = headers[i]
                if h is not None:
                    b.set_last_headers(h)
        return b.finish()

    @staticmethod
    def concat(batches):
        """One batch holding every record of the given batches, in order (copied once)."""
        cdef RecordBatch batch
        cdef Py_ssize_t total_n = 0, total_bytes = 0
        batches = list(batches)
        if len(batches) == 1:
            return batches[0]
        for batch in batches:
            total_n += batch.n
            total_bytes += batch.c_nbytes()
        cdef RecordBatchBuilder b = RecordBatchBuilder()
        b.reserve(total_n, total_bytes)
        for batch in batches:
            b.append_range(batch, 0, batch.n)
        return b.finish()

    # ---------------------------------------------------------------- access

    def __len__(self):
        return self.n

    cdef Py_ssize_t _index(self, Py_ssize_t i) except -1:
        if i < 0:
            i += self.n
        if i < 0 or i >= self.n:
            raise IndexError("record index out of range")
        return i

    cdef tuple _record(self, Py_ssize_t i):
        return (_bytes_or_none(self.key_ptr(i), self._klen[i]),
                _bytes_or_none(self.value_ptr(i), self._vlen[i]),
                self._ts[i], self._part[i], self._off[i], _copy_headers(self.c_headers(i)))

    def __getitem__(self, Py_ssize_t i):
        return self._record(self._index(i))

    def __iter__(self):
        cdef Py_ssize_t i
        for i in range(self.n):
            yield self._record(i)

    def __repr__(self):
        return f"RecordBatch(n={self.n}, nbytes={self.c_nbytes()})"

    def __reduce__(self):
        return (_from_records_list, (self.to_list(),))

    def key(self, Py_ssize_t i):
        i = self._index(i)
        return _bytes_or_none(self.key_ptr(i), self._klen[i])

    def value(self, Py_ssize_t i):
        i = self._index(i)
        return _bytes_or_none(self.value_ptr(i), self._vlen[i])

    def timestamp(self, Py_ssize_t i):
        return self._ts[self._index(i)]

    def partition(self, Py_ssize_t i):
        return self._part[self._index(i)]

    def offset(self, Py_ssize_t i):
        return self._off[self._index(i)]

    def headers(self, Py_ssize_t i):
        return _copy_headers(self.c_headers(self._index(i)))

    def to_list(self):
        cdef Py_ssize_t i
        return [self._record(i) for i in range(self.n)]

    def keys(self):
        cdef Py_ssize_t i
        return [_bytes_or_none(self.key_ptr(i), self._klen[i]) for i in range(self.n)]

    def values(self):
        cdef Py_ssize_t i
        return [_bytes_or_none(self.value_ptr(i), self._vlen[i]) for i in range(self.n)]

    @property
    def nbytes(self):
        """Bytes of key and value data (the measure RecordBuffer.bytes_held sums)."""
        return self.c_nbytes()

    @property
    def has_headers(self):
        """True when some record of the storage this batch views carries headers."""
        cdef Py_ssize_t i
        if self._headers is None:
            return False
        for i in range(self.n):
            if self._headers[self._hbase + i] is not None:
                return True
        return False

    # ---------------------------------------------------------------- derived batches

    cdef RecordBatch c_slice(self, Py_ssize_t start, Py_ssize_t stop):
        if start < 0:
            start = 0
        if stop > self.n:
            stop = self.n
        if stop < start:
            stop = start
        cdef RecordBatch r = RecordBatch.__new__(RecordBatch)
        r.n = stop - start
        r._arena_mem = self._arena_mem
        r._cols_mem = self._cols_mem
        r._part_mem = self._part_mem
        r._off_mem = self._off_mem
        r._headers = self._headers
        r._hbase = self._hbase + start
        r._arena = self._arena
        r._bounds = self._bounds + start
        r._klen = self._klen + start
        r._vlen = self._vlen + start
        r._ts = self._ts + start
        r._part = self._part + start
        r._off = self._off + start
        return r

    def slice(self, Py_ssize_t start, Py_ssize_t stop):
        """Records [start, stop) sharing this batch's memory (bounds are clamped)."""
        return self.c_slice(start, stop)

    def with_offsets(self, int64_t base_offset):
        """A copy whose offsets are base_offset, base_offset+1, ... (keys and values shared)."""
        cdef RecordBatch r = self.c_slice(0, self.n)
        cdef _Memory m = _alloc(self.n * sizeof(int64_t))
        cdef int64_t* o = <int64_t*>m.ptr
        cdef Py_ssize_t i
        with nogil:
            for i in range(self.n):
                o[i] = base_offset + i
        r._off_mem = m
        r._off = o
        return r

    def with_partition(self, int32_t partition):
        """A copy whose every record has this partition (keys and values shared)."""
        cdef RecordBatch r = self.c_slice(0, self.n)
        cdef _Memory m = _alloc(self.n * sizeof(int32_t))
        cdef int32_t* p = <int32_t*>m.ptr
        cdef Py_ssize_t i
        with nogil:
            for i in range(self.n):
                p[i] = partition
        r._part_mem = m
        r._part = p
        return r

    # ---------------------------------------------------------------- numpy views

    cdef object _view(self, const void* ptr, int typenum, _Memory owner):
        cdef cnp.npy_intp dims[1]
        dims[0] = self.n
        cdef cnp.ndarray arr = cnp.PyArray_SimpleNewFromData(1, dims, typenum, <void*>ptr)
        # PyArray_SetBaseObject steals a reference.
        Py_INCREF(owner)
        cnp.PyArray_SetBaseObject(arr, owner)
        cnp.PyArray_CLEARFLAGS(arr, cnp.NPY_ARRAY_WRITEABLE)
        return arr

    def timestamps_array(self):
        """int64 numpy view (read-only) of the timestamp column."""
        return self._view(self._ts, cnp.NPY_INT64, self._cols_mem)

    def offsets_array(self):
        """int64 numpy view (read-only) of the offset column."""
        return self._view(self._off, cnp.NPY_INT64, self._off_mem)

    def partitions_array(self):
        """int32 numpy view (read-only) of the partition column."""
        return self._view(self._part, cnp.NPY_INT32, self._part_mem)

    @property
    def first_offset(self):
        """Offset of the first record, or -1 when empty."""
        return self._off[0] if self.n else -1

    @property
    def last_offset(self):
        """Offset of the last record, or -1 when empty."""
        return self._off[self.n - 1] if self.n else -1

    @property
    def max_timestamp(self):
        """Largest timestamp in the batch, or -1 when empty."""
        cdef int64_t m = -1
        cdef Py_ssize_t i
        with nogil:
            for i in range(self.n):
                if self._ts[i] > m:
                    m = self._ts[i]
        return m


def _from_records_list(records):
    return RecordBatch.from_records(records)


# -------------------------------------------------------------------- builder

cdef inline Py_ssize_t _grow(Py_ssize_t cap, Py_ssize_t need) noexcept nogil:
    cdef Py_ssize_t c = cap if cap > 0 else 16
    while c < need:
        c *= 2
    return c


cdef void* _resized(void* p, size_t size) except NULL nogil:
    """realloc that raises MemoryError; on failure ``p`` is left as it was (still owned)."""
    cdef void* q = realloc(p, size)
    if q == NULL:
        with gil:
            raise MemoryError()
    return q


cdef class RecordBatchBuilder:
    """Accumulates records in growable C buffers and turns them into one RecordBatch."""

    def __cinit__(self):
        self._arena = NULL
        self._arena_len = 0
        self._arena_cap = 0
        self._bounds = NULL
        self._klen = NULL
        self._vlen = NULL
        self._ts = NULL
        self._part = NULL
        self._off = NULL
        self.n = 0
        self._cap = 0
        self._headers = None

    def __dealloc__(self):
        free(self._arena)
        free(self._bounds)
        free(self._klen)
        free(self._vlen)
        free(self._ts)
        free(self._part)
        free(self._off)

    cdef int reserve(self, Py_ssize_t records, Py_ssize_t nbytes) except -1 nogil:
        """Make room for `records` more records and `nbytes` more key/value bytes."""
        cdef Py_ssize_t need = self.n + records, cap
        if need > self._cap:
            cap = _grow(self._cap, need)
            self._bounds = <int64_t*>_resized(self._bounds, (cap + 1) * sizeof(int64_t))
            if self._cap == 0:
                self._bounds[0] = 0
            self._klen = <int32_t*>_resized(self._klen, cap * sizeof(int32_t))
            self._vlen = <int32_t*>_resized(self._vlen, cap * sizeof(int32_t))
            self._ts = <int64_t*>_resized(self._ts, cap * sizeof(int64_t))
            self._part = <int32_t*>_resized(self._part, cap * sizeof(int32_t))
            self._off = <int64_t*>_resized(self._off, cap * sizeof(int64_t))
            self._cap = cap
        need = self._arena_len + nbytes
        if need > self._arena_cap:
            cap = _grow(self._arena_cap if self._arena_cap > 0 else 256, need)
            self._arena = <char*>_resized(self._arena, cap)
            self._arena_cap = cap
        return 0

    cdef int append(self, const char* key, Py_ssize_t klen, const char* value, Py_ssize_t vlen,
                    int64_t ts, int32_t part, int64_t off) except -1 nogil:
        """Append one record; klen/vlen of -1 mean None (the pointer is then ignored)."""
        cdef Py_ssize_t kb = klen if klen > 0 else 0
        cdef Py_ssize_t vb = vlen if vlen > 0 else 0
        if kb > INT32_MAX or vb > INT32_MAX:
            with gil:
                raise ValueError("a record key or value is larger than 2 GiB")
        if self.n >= self._cap or self._arena_len + kb + vb > self._arena_cap:
            self.reserve(1, kb + vb)
        cdef Py_ssize_t i = self.n
        if kb:
            memcpy(self._arena + self._arena_len, key, kb)
        if vb:
            memcpy(self._arena + self._arena_len + kb, value, vb)
        self._arena_len += kb + vb
        self._klen[i] = <int32_t>(klen if klen >= 0 else -1)
        self._vlen[i] = <int32_t>(vlen if vlen >= 0 else -1)
        self._ts[i] = ts
        self._part[i] = part
        self._off[i] = off
        self._bounds[i + 1] = self._arena_len
        self.n = i + 1
        return 0

    cdef int append_range(self, RecordBatch batch, Py_ssize_t start, Py_ssize_t stop) except -1:
        """Append records [start, stop) of a batch, headers included (needs the GIL)."""
        cdef Py_ssize_t i, first = self.n, nb
        if stop <= start:
            return 0
        nb = <Py_ssize_t>(batch._bounds[stop] - batch._bounds[start])
        self.reserve(stop - start, nb)
        with nogil:
            # The batch's records are contiguous in its arena: copy the bytes and columns in bulk.
            memcpy(self._arena + self._arena_len, batch._arena + batch._bounds[start], nb)
            for i in range(stop - start):
                self._bounds[first + i + 1] = (batch._bounds[start + i + 1] - batch._bounds[start]
                                               + self._arena_len)
            memcpy(self._klen + first, batch._klen + start, (stop - start) * sizeof(int32_t))
            memcpy(self._vlen + first, batch._vlen + start, (stop - start) * sizeof(int32_t))
            memcpy(self._ts + first, batch._ts + start, (stop - start) * sizeof(int64_t))
            memcpy(self._part + first, batch._part + start, (stop - start) * sizeof(int32_t))
            memcpy(self._off + first, batch._off + start, (stop - start) * sizeof(int64_t))
            self._arena_len += nb
            self.n += stop - start
        if batch._headers is not None:
            for i in range(start, stop):
                h = batch._headers[batch._hbase + i]
                if h is not None:
                    self._set_headers(first + i - start, h)
        return 0

    cdef int _set_headers(self, Py_ssize_t i, object headers) except -1:
        """Record i's headers: a list nothing will change (a batch's stored list, or one the
        caller made for it), kept as it is; batches share such lists rather than copy them."""
        if self._headers is None:
            self._headers = [None] * self.n
        elif len(self._headers) < self.n:
            self._headers.extend([None] * (self.n - len(self._headers)))
        self._headers[i] = headers
        return 0

    cdef int set_last_headers(self, object headers) except -1:
        """Attach headers (an iterable of (str, bytes | None)) to the last appended record."""
        if self.n == 0:
            raise IndexError("no record to attach headers to")
        if headers is None:
            return 0
        return self._set_headers(self.n - 1, list(headers))

    cdef int adopt_arena(self, char* arena, Py_ssize_t capacity) except -1 nogil:
        """Take ownership of a malloc'd buffer of `capacity` bytes holding the key/value bytes of
        the records append_described() will add (the builder must be empty)."""
        if self.n != 0 or self._arena_len != 0:
            with gil:
                raise ValueError("adopt_arena needs an empty builder")
        free(self._arena)
        self._arena = arena
        self._arena_cap = capacity
        return 0

    cdef int append_described(self, Py_ssize_t klen, Py_ssize_t vlen, int64_t ts, int32_t part,
                              int64_t off) except -1 nogil:
        """Append a record whose key and value bytes are already in the arena at the current
        position (see adopt_arena)."""
        cdef Py_ssize_t nb = (klen if klen > 0 else 0) + (vlen if vlen > 0 else 0)
        if self._arena_len + nb > self._arena_cap:
            with gil:
                raise ValueError("append_described runs past the adopted arena")
        if self.n >= self._cap:
            self.reserve(1, 0)
        cdef Py_ssize_t i = self.n
        self._arena_len += nb
        self._klen[i] = <int32_t>(klen if klen >= 0 else -1)
        self._vlen[i] = <int32_t>(vlen if vlen >= 0 else -1)
        self._ts[i] = ts
        self._part[i] = part
        self._off[i] = off
        self._bounds[i + 1] = self._arena_len
        self.n = i + 1
        return 0

    cdef RecordBatch finish(self):
        """The built batch; the builder is left empty."""
        cdef Py_ssize_t n = self.n
        cdef Py_ssize_t col_bytes = (n + 1) * sizeof(int64_t) + 2 * n * sizeof(int64_t) \
            + 3 * n * sizeof(int32_t)
        cdef _Memory cols = _alloc(col_bytes)
        cdef char* base = <char*>cols.ptr
        cdef int64_t* bounds = <int64_t*>base
        cdef int64_t* ts = bounds + (n + 1)
        cdef int64_t* off = ts + n
        cdef int32_t* klen = <int32_t*>(off + n)
        cdef int32_t* vlen = klen + n
        cdef int32_t* part = vlen + n
        if n:
            memcpy(bounds, self._bounds, (n + 1) * sizeof(int64_t))
            memcpy(ts, self._ts, n * sizeof(int64_t))
            memcpy(off, self._off, n * sizeof(int64_t))
            memcpy(klen, self._klen, n * sizeof(int32_t))
            memcpy(vlen, self._vlen, n * sizeof(int32_t))
            memcpy(part, self._part, n * sizeof(int32_t))
        else:
            bounds[0] = 0
        cdef _Memory arena
        cdef void* shrunk
        if self._arena != NULL and self._arena_len > 0:
            # Hand the arena over without copying; give back the unused tail when it is large.
            if self._arena_cap > 2 * self._arena_len + 4096:
                shrunk = realloc(self._arena, self._arena_len)
                if shrunk != NULL:
                    self._arena = <char*>shrunk
            arena = _take(self._arena, self._arena_len)
            self._arena = NULL
            self._arena_cap = 0
        else:
            arena = _take(NULL, 0)
        self._arena_len = 0
        cdef RecordBatch r = RecordBatch.__new__(RecordBatch)
        r.n = n
        r._arena_mem = arena
        r._cols_mem = cols
        r._part_mem = cols
        r._off_mem = cols
        if self._headers is not None and len(self._headers) < n:
            self._headers.extend([None] * (n - len(self._headers)))
        r._headers = self._headers
        r._hbase = 0
        r._arena = <const char*>arena.ptr if arena.ptr != NULL else <const char*>&_ZERO_BOUND
        r._bounds = bounds
        r._klen = klen
        r._vlen = vlen
        r._ts = ts
        r._part = part
        r._off = off
        self.n = 0
        self._headers = None
        if self._bounds != NULL:
            self._bounds[0] = 0
        return r


# -------------------------------------------------------------------- partitioning

@cython.cdivision(True)
cdef int32_t c_murmur2(const char* data, Py_ssize_t length) noexcept nogil:
    # Kafka's Utils.murmur2: 32-bit arithmetic wraps as Java ints do; Java's >>> is a logical
    # shift, hence unsigned arithmetic throughout.
    cdef uint32_t seed = 0x9747b28c
    cdef uint32_t m = 0x5bd1e995
    cdef int r = 24
    cdef uint32_t h = seed ^ <uint32_t>length
    cdef Py_ssize_t length4 = length // 4
    cdef Py_ssize_t i, i4
    cdef uint32_t k
    cdef const unsigned char* d = <const unsigned char*>data
    for i in range(length4):
        i4 = i * 4
        k = (<uint32_t>d[i4]) | (<uint32_t>d[i4 + 1] << 8) | (<uint32_t>d[i4 + 2] << 16) \
            | (<uint32_t>d[i4 + 3] << 24)
        k *= m
        k ^= k >> r
        k *= m
        h *= m
        h ^= k
    cdef Py_ssize_t rem = length % 4
    cdef Py_ssize_t tail = length & ~(<Py_ssize_t>3)
    if rem == 3:
        h ^= (<uint32_t>d[tail + 2]) << 16
    if rem >= 2:
        h ^= (<uint32_t>d[tail + 1]) << 8
    if rem >= 1:
        h ^= <uint32_t>d[tail]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return <int32_t>h


def murmur2(const unsigned char[::1] data not None):
    """Kafka's murmur2 hash (the Java client's, seed 0x9747b28c), as a signed 32-bit int."""
    cdef Py_ssize_t n = data.shape[0]
    cdef const char* p = <const char*>&data[0] if n else <const char*>&_ZERO_BOUND
    return c_murmur2(p, n)


cdef inline uint64_t _rotl64(uint64_t x, int r) noexcept nogil:
    return (x << r) | (x >> (64 - r))


cdef inline uint64_t _fmix64(uint64_t k) noexcept nogil:
    k ^= k >> 33
    k *= 0xff51afd7ed558ccdULL
    k ^= k >> 33
    k *= 0xc4ceb9fe1a85ec53ULL
    return k ^ (k >> 33)


cdef inline uint64_t _le64(const unsigned char* d, Py_ssize_t n) noexcept nogil:
    # The first n (at most 8) bytes as a little-endian number, as the reference reads blocks and tail.
    cdef uint64_t k = 0
    cdef Py_ssize_t i
    for i in range(n - 1, -1, -1):
        k = (k << 8) | d[i]
    return k


cdef void c_murmur3_128(const unsigned char* d, Py_ssize_t length, uint64_t seed, uint64_t* out) noexcept nogil:
    # MurmurHash3 x64 128 (Austin Appleby's reference, which Kafka's Murmur3.hash128 follows).
    cdef uint64_t c1 = 0x87c37b91114253d5ULL
    cdef uint64_t c2 = 0x4cf5ad432745937fULL
    cdef uint64_t h1 = seed, h2 = seed, k1, k2
    cdef Py_ssize_t blocks = length // 16, i, rest
    for i in range(blocks):
        k1 = _le64(d + 16 * i, 8)
        k2 = _le64(d + 16 * i + 8, 8)
        h1 ^= _rotl64(k1 * c1, 31) * c2
        h1 = (_rotl64(h1, 27) + h2) * 5 + 0x52dce729
        h2 ^= _rotl64(k2 * c2, 33) * c1
        h2 = (_rotl64(h2, 31) + h1) * 5 + 0x38495ab5
    rest = length - 16 * blocks
    if rest > 8:
        h2 ^= _rotl64(_le64(d + 16 * blocks + 8, rest - 8) * c2, 33) * c1
    if rest > 0:
        h1 ^= _rotl64(_le64(d + 16 * blocks, rest if rest < 8 else 8) * c1, 31) * c2
    h1 ^= <uint64_t>length
    h2 ^= <uint64_t>length
    h1 += h2
    h2 += h1
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 += h2
    h2 += h1
    out[0] = h1
    out[1] = h2


def murmur3_hash128(const unsigned char[::1] data not None, uint64_t seed=104729):
    """Kafka's ``Murmur3.hash128`` (default seed 104729) as 16 bytes: the two 64-bit halves,
    big-endian, as a foreign-key join's subscriptions carry a left value's hash."""
    cdef uint64_t h[2]
    cdef unsigned char out[16]
    cdef Py_ssize_t n = data.shape[0]
    cdef const unsigned char* p = &data[0] if n else <const unsigned char*>&_ZERO_BOUND
    cdef int i
    with nogil:
        c_murmur3_128(p, n, seed, h)
    for i in range(8):
        out[i] = (h[0] >> (56 - 8 * i)) & 0xff
        out[8 + i] = (h[1] >> (56 - 8 * i)) & 0xff
    return PyBytes_FromStringAndSize(<char*>out, 16)


def default_partition(const unsigned char[::1] key not None, int num_partitions):
    """Kafka's default partitioner for a non-null key: (murmur2(key) & 0x7fffffff) % n."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    cdef Py_ssize_t n = key.shape[0]
    cdef const char* p = <const char*>&key[0] if n else <const char*>&_ZERO_BOUND
    return (c_murmur2(p, n) & 0x7fffffff) % num_partitions


def partitions_for_keys(RecordBatch batch not None, int num_partitions):
    """int32 array of default_partition for every key of a batch (null keys get -1)."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    out = np.empty(batch.n, dtype=np.int32)
    cdef int32_t[::1] o = out
    cdef Py_ssize_t i, kl
    with nogil:
        for i in range(batch.n):
            kl = batch.key_len(i)
            if kl < 0:
                o[i] = -1
            else:
                o[i] = (c_murmur2(batch.key_ptr(i), kl) & 0x7fffffff) % num_partitions
    return out


def partitions_for_offsets(const int64_t[::1] offsets not None, data, int num_partitions):
    """int32 array of default_partition for each of the ``len(offsets) - 1`` keys held end to end
    in ``data`` (any buffer; key i is ``data[offsets[i]:offsets[i + 1]]``): an Arrow binary
    column's offsets and data buffers, read in place. The caller masks null keys."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    cdef Py_ssize_t n = offsets.shape[0] - 1 if offsets.shape[0] else 0
    cdef const unsigned char[::1] d
    cdef const char* base = <const char*>&_ZERO_BOUND
    cdef Py_ssize_t size = 0
    if data is not None:
        d = data
        size = d.shape[0]
        if size:
            base = <const char*>&d[0]
    out = np.empty(n, dtype=np.int32)
    cdef int32_t[::1] o = out
    cdef Py_ssize_t i, start, stop
    for i in range(n):
        start = offsets[i]
        stop = offsets[i + 1]
        if start < 0 or stop < start or stop > size:
            raise ValueError(f"key {i} spans [{start}, {stop}) outside a data buffer of {size} bytes")
    with nogil:
        for i in range(n):
            o[i] = (c_murmur2(base + offsets[i], offsets[i + 1] - offsets[i]) & 0x7fffffff) % num_partitions
    return out
