# Included by kernels.pyx (one extension module; see its docstring).
# Field indexes: where the top-level JSON fields a segment reads sit in each record, captured by
# the source's validation (which parses every document anyway), so that filters and projections
# below it find a field without scanning the document again.

cdef enum:
    T_UNKNOWN = -1      # not captured: a top-level name has an escape (it might spell the field)

# Index buffers are reused: a batch's index is a few hundred KB, which malloc would take from and
# give back to the system per batch (page faults cost more than the capture saves). Taken and
# given with the GIL held (FieldIndex objects are made and freed only with it), so the GIL guards
# the pool; it keeps the POOL_SIZE largest buffers given back.
cdef enum:
    POOL_SIZE = 4

cdef FTok* _pool_bufs[POOL_SIZE]
cdef Py_ssize_t _pool_caps[POOL_SIZE]
cdef int _pool_n = 0

cdef FTok* _pool_take(Py_ssize_t need, Py_ssize_t* capacity) noexcept:
    """A buffer of at least ``need`` FToks (its capacity in ``capacity``), or NULL."""
    global _pool_n
    cdef int j, best = -1
    cdef FTok* buf
    for j in range(_pool_n):
        if _pool_caps[j] >= need and (best < 0 or _pool_caps[j] < _pool_caps[best]):
            best = j
    if best >= 0:
        buf = _pool_bufs[best]
        capacity[0] = _pool_caps[best]
        _pool_n -= 1
        _pool_bufs[best] = _pool_bufs[_pool_n]
        _pool_caps[best] = _pool_caps[_pool_n]
        return buf
    capacity[0] = need if need > 0 else 1
    return <FTok*>malloc(capacity[0] * sizeof(FTok))

cdef void _pool_give(FTok* buf, Py_ssize_t capacity) noexcept:
    global _pool_n
    cdef int j, smallest = 0
    cdef FTok* kept
    cdef Py_ssize_t kept_cap
    if _pool_n < POOL_SIZE:
        _pool_bufs[_pool_n] = buf
        _pool_caps[_pool_n] = capacity
        _pool_n += 1
        return
    for j in range(1, POOL_SIZE):
        if _pool_caps[j] < _pool_caps[smallest]:
            smallest = j
    if _pool_caps[smallest] < capacity:  # keep the larger buffer, free the smaller
        kept, kept_cap = buf, capacity
        buf = _pool_bufs[smallest]
        _pool_bufs[smallest], _pool_caps[smallest] = kept, kept_cap
    free(buf)


cdef class FieldIndex:
    """The captured top-level JSON fields of every record of one batch: ``(side, name)`` slots,
    key fields first, and ``n`` rows of FTok (kernels.pxd). A batch carries its index
    (``RecordBatch._fields``) only while its columns are the ones the index was captured from:
    ``validate`` attaches it, ``take`` carries it (rows selected with the records) and every
    other kernel builds batches without one."""

    cdef int _allocate(self, Py_ssize_t n, int nf) except -1:
        self.n = n
        self.nf = nf
        self.toks = _pool_take(n * nf, &self.capacity)
        if self.toks == NULL:
            raise MemoryError()
        return 0

    def __dealloc__(self):
        if self.toks != NULL:
            _pool_give(self.toks, self.capacity)

    cdef int slot(self, int side, const string& name) noexcept:
        cdef int j
        for j in range(self.nf):
            if self.sides[j] == side and self.names[j] == name:
                return j
        return -1

    cdef FieldIndex taken(self, const int32_t[::1] indices):
        cdef FieldIndex out = FieldIndex.__new__(FieldIndex)
        cdef Py_ssize_t j, m = indices.shape[0]
        out.nkey = self.nkey
        out.names = self.names
        out.sides = self.sides
        out._allocate(m, self.nf)
        with nogil:
            for j in range(m):
                memcpy(out.row(j), self.row(indices[j]), self.nf * sizeof(FTok))
        return out


cdef FieldIndex _new_index(object fields, int key_enc, int value_enc, Py_ssize_t n):
    """An empty index for the JSON fields among ``fields`` ((side, name) pairs) of a batch in
    these encodings; None when none of them can be captured."""
    cdef FieldIndex index = FieldIndex.__new__(FieldIndex)
    cdef int side
    for side, enc in ((0, key_enc), (1, value_enc)):
        if enc != ENC_JSON:
            continue
        taken = 0
        for field_side, name in fields:
            if field_side == side and name is not None and taken < MAX_WANTED:
                index.names.push_back(name.encode("utf-8"))
                index.sides.push_back(side)
                taken += 1
        if side == 0:
            index.nkey = <int>index.names.size()
    if index.names.size() == 0:
        return None
    index._allocate(n, <int>index.names.size())
    return index


cdef inline void _want_of(FieldIndex index, int first, int stop, JFields* want) noexcept:
    cdef int j
    want.n = stop - first
    for j in range(want.n):
        want.names[j] = index.names[first + j].data()
        want.lens[j] = <Py_ssize_t>index.names[first + j].size()


cdef int _capture(const char* p, Py_ssize_t n, JFields* want, FTok* out) noexcept nogil:
    """Validate one JSON column value (n = -1: None) and store its wanted fields; 0 when valid."""
    cdef int j
    cdef JTok* t
    if n < 0:
        for j in range(want.n):
            out[j].type = T_NONE
        return 0
    if j_parse_fields(p, n, want, NULL) < 0:
        return -1
    for j in range(want.n):
        t = &want.found[j]
        out[j].type = T_UNKNOWN if want.unknown else t.type
        out[j].escaped = t.escaped
        out[j].big = t.big
        out[j].off = <int32_t>(t.p - p) if t.type != T_NONE else 0
        out[j].n = t.n
        out[j].i = t.i
    return 0


cdef inline int _captured(FieldIndex index, Py_ssize_t i, int slot, const char* base, JTok* tok) noexcept nogil:
    """Record i's token of a slot (base: the start of the column it was captured from); -1 when
    the field was not captured (the caller leaves the record to Python, as a scan would)."""
    cdef FTok* f = index.row(i) + slot
    if f.type == T_UNKNOWN:
        return -1
    tok.type = f.type
    tok.escaped = f.escaped
    tok.big = f.big
    tok.p = base + f.off
    tok.n = f.n
    tok.i = f.i
    return 0


cdef inline FieldIndex _index_of(RecordBatch batch):
    return <FieldIndex>batch._fields if batch._fields is not None else None


def indexed_fields(RecordBatch batch not None):
    """The (side, name) fields the batch carries captured positions of (a list), or None."""
    cdef FieldIndex index = _index_of(batch)
    if index is None:
        return None
    return [(index.sides[j], index.names[j].decode("utf-8")) for j in range(index.nf)]
