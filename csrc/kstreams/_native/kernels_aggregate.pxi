# Included by kernels.pyx (one extension module; see its docstring).
# Count/sum/min/max per key (and window) into a record-cache namespace.

# ---------------------------------------------------------------------------- aggregation

cdef extern from * nogil:
    """
    #include <functional>
    #include <string_view>
    #include <unordered_map>

    /* The running aggregate of one cache key during one batch. */
    struct ks_Slot {
        int state = 0;          /* 0 unknown (read the store), 1 absent, 2 present */
        int64_t i = 0;
        double d = 0.0;
        int64_t ts = 0;
        Py_ssize_t last = -1;   /* index in the update list of the key's newest update */
    };

    /* A cache key without building it: the record key (a view into the batch) and the window
       start (INT64_MIN when not windowed). Slots are looked up per record without allocating. */
    struct ks_SlotKey {
        std::string_view key;
        int64_t start;
        bool operator==(const ks_SlotKey& o) const { return start == o.start && key == o.key; }
    };
    struct ks_SlotKeyHash {
        size_t operator()(const ks_SlotKey& k) const {
            return std::hash<std::string_view>()(k.key) ^ ((uint64_t)k.start * 0x9E3779B97F4A7C15ULL);
        }
    };
    typedef std::unordered_map<ks_SlotKey, ks_Slot, ks_SlotKeyHash> ks_SlotMap;
    typedef std::pair<const ks_SlotKey, ks_Slot> ks_SlotEntry;

    static inline ks_SlotEntry* ks_slot_for(ks_SlotMap& m, const char* k, size_t n, int64_t start) {
        ks_SlotKey key{std::string_view(k, n), start};
        auto it = m.try_emplace(key).first;
        return &*it;
    }
    """
    cppclass ks_Slot:
        int state
        int64_t i
        double d
        int64_t ts
        Py_ssize_t last
    cppclass ks_SlotKey:
        string_view key
        int64_t start
    cppclass ks_SlotEntry:
        ks_SlotKey first
        ks_Slot second
    cppclass ks_SlotMap:
        cppclass iterator:
            ks_SlotEntry& operator*()
            iterator operator++()
            bint operator!=(iterator)
            bint operator==(iterator)
        iterator begin()
        iterator end()
        void reserve(size_t)
        void clear()
        size_t size()
    ks_SlotEntry* ks_slot_for(ks_SlotMap& m, const char* k, size_t n, int64_t start)

cdef struct Update:
    ks_SlotEntry* entry
    Py_ssize_t record
    int64_t i       # the aggregate and its timestamp right after this update (pass 2 sets them)
    double d
    int64_t ts

cdef int64_t _NO_WINDOW = INT64_MIN

cdef int _decode_number(const char* p, Py_ssize_t n, int enc, int64_t* i, double* d) noexcept nogil:
    if enc == ENC_LONG and n == 8:
        i[0] = <int64_t>_be64(p)
    elif enc == ENC_INT and n == 4:
        i[0] = <int32_t>_be32(p)
    elif enc == ENC_DOUBLE and n == 8:
        d[0] = _as_double(_be64(p))
    else:
        return -1
    return 0

cdef int _slot_from_bytes(ks_Slot* slot, const char* p, Py_ssize_t n, int enc,
                          bint timestamped) noexcept nogil:
    if n < 0:
        slot.state = 1
        return 0
    if timestamped:
        # Kafka's ValueAndTimestamp bytes: the aggregate's timestamp (8 bytes, big-endian) first.
        if n < 8:
            return -1
        slot.ts = <int64_t>_be64(p)
        p += 8
        n -= 8
    if _decode_number(p, n, enc, &slot.i, &slot.d) < 0:
        return -1
    slot.state = 2
    return 0

cdef inline void _cache_key(const ks_SlotKey* key, string& out) noexcept nogil:
    """The record cache's key of a slot: the record key, then the window start when windowed."""
    cdef char suffix[8]
    out.assign(key.key.data(), key.key.size())
    if key.start != _NO_WINDOW:
        _put_be64(suffix, <uint64_t>key.start)
        out.append(suffix, 8)

cdef int _check_aggregation(int op, reducer, bint windowed, int64_t size_ms,
                            int64_t advance_ms) except -1:
    if windowed and (size_ms <= 0 or advance_ms <= 0):
        raise ValueError("windowed aggregation needs a positive size and advance")
    if (op == OP_REDUCE) != (reducer is not None):
        raise ValueError("REDUCE needs a reducer, and only REDUCE takes one")
    return 0


cdef int _slot_updates(RecordBatch batch, int op, bint windowed, int64_t size_ms, int64_t advance_ms,
                       int64_t grace_ms, int64_t* observed, int64_t* dropped, ks_SlotMap& slots,
                       vector[Update]& updates) noexcept nogil:
    """Pass 1: the slot (key, or key and window) each record updates, in record order. Records with
    a null key are skipped, and those with a null value unless windowed counting (Kafka's rules);
    windowed, records are assigned to windows against the stream time observed so far and those
    of closed windows counted in ``dropped``. 1 when a record needs the Python path."""
    cdef Py_ssize_t i, kn
    cdef const char* kp
    cdef int64_t ts, start
    cdef Update u
    slots.reserve(<size_t>batch.n)
    updates.reserve(<size_t>batch.n)
    for i in range(batch.n):
        kn = batch.key_len(i)
        if kn < 0:
            continue
        if batch.value_len(i) < 0 and not (windowed and op == OP_COUNT):
            if windowed:
                return 1   # a windowed reduce of a null value: leave it to Python
            continue
        kp = batch.key_ptr(i)
        u.record = i
        if not windowed:
            u.entry = ks_slot_for(slots, kp, <size_t>kn, _NO_WINDOW)
            updates.push_back(u)
            continue
        ts = batch.ts(i)
        if ts > observed[0]:
            observed[0] = ts
        start = ts - size_ms + advance_ms
        if start < 0:
            start = 0
        start = (start // advance_ms) * advance_ms
        while start <= ts:
            if start + size_ms <= observed[0] - grace_ms:
                dropped[0] += 1
            else:
                u.entry = ks_slot_for(slots, kp, <size_t>kn, start)
                updates.push_back(u)
            start += advance_ms
    return 0


cdef int _load_slots(vector[ks_SlotEntry*]& entries, load, bint many, int store_enc,
                     bint timestamped) except -2:
    """Read slots' stored aggregates (bytes or None) from the store, by cache key: ``load(key)``
    per slot, or with ``many`` one ``load(keys)`` returning a list. -1 when some stored bytes do
    not decode (the Python path then runs)."""
    cdef Py_ssize_t j, n = <Py_ssize_t>entries.size()
    cdef string ck
    cdef list keys
    if many:
        keys = []
        for j in range(n):
            _cache_key(&entries[j].first, ck)
            keys.append(PyBytes_FromStringAndSize(ck.data(), ck.size()))
        stored_all = load(keys)
        if len(stored_all) != n:
            raise ValueError(f"the store's loader returned {len(stored_all)} values for {n} keys")
    for j in range(n):
        if many:
            stored = stored_all[j]
        else:
            _cache_key(&entries[j].first, ck)
            stored = load(PyBytes_FromStringAndSize(ck.data(), ck.size()))
        if stored is None:
            entries[j].second.state = 1
        elif type(stored) is not bytes or _slot_from_bytes(
                &entries[j].second, PyBytes_AS_STRING(stored), PyBytes_GET_SIZE(stored), store_enc,
                timestamped) < 0:
            return -1
    return 0


cdef inline void _encode_aggregate(int64_t i, double d, int64_t ts, int store_enc, bint timestamped,
                                   string& out) noexcept nogil:
    """An aggregate's bytes in the store's encoding (after its timestamp when ``timestamped``)."""
    cdef char buf[8]
    out.clear()
    if timestamped:
        _put_be64(buf, <uint64_t>ts)
        out.append(buf, 8)
    if store_enc == ENC_DOUBLE:
        _put_be64(buf, _double_bits(d))
        out.append(buf, 8)
    elif store_enc == ENC_INT:
        _put_be32(buf, <uint32_t><int32_t>i)
        out.append(buf, 4)
    else:
        _put_be64(buf, <uint64_t>i)
        out.append(buf, 8)


def aggregate(RecordCache cache not None, str namespace not None, RecordBatch batch not None,
              int op, int value_enc, int store_enc, load, bint windowed=False,
              int64_t size_ms=0, int64_t advance_ms=0, int64_t grace_ms=0,
              int64_t observed_time=-1, reducer=None, bint timestamped=False, dict notes=None):
    """Count, sum, min, max or reduce per key (per window when ``windowed``) of a batch into the
    store's record-cache namespace, exactly as the DSL's aggregate processors would record by record.

    REDUCE calls the Python ``reducer(aggregate, value)`` per record (with the GIL), on numbers as
    the built-in serdes decode them; a result the aggregate's encoding cannot hold (not an int for
    LONG/INT, out of range, not a float for DOUBLE) returns None, and the per-record path then runs
    the batch (calling the reducer again for its records).

    Records with a null key are skipped; records with a null value are skipped unless windowed
    counting (Kafka's rules). Old aggregates come from the cache, else from ``load(cache_key)``
    (the store below the cache: bytes or None). Each key's newest aggregate is written to the
    cache once per batch, in the order of the keys' last updates (so the cache's dirty order is
    the per-record path's), with the timestamp of its last record; evictions flush through the
    namespace's listener as usual. ``store_enc`` encodes the aggregate (LONG for counts).

    ``timestamped``: the store holds Kafka's ``ValueAndTimestamp`` bytes (8-byte big-endian
    timestamp, then the aggregate), and an aggregate's timestamp is the largest of the records that
    made it (Kafka's KStreamAggregate rule) rather than its last record's; the cache entry is stamped
    with that timestamp too.

    ``notes``: the caching layer's headers of dirty entries (cache key -> headers of the record
    that last wrote the entry; ``CachingKeyValueStore.header_notes``). Each entry written here gets
    the headers of its last record, or loses its note when that record has none, before any
    eviction this batch causes is flushed: a flushed entry goes downstream with its last writer's
    headers, as on the per-record path.

    Returns ``(observed_time, dropped)`` (windowed: the largest timestamp seen and the records
    dropped for closed windows), or None when some record needs the Python path.
    """
    cdef bytes ns_bytes = namespace.encode("utf-8")
    cdef string name = string(PyBytes_AS_STRING(ns_bytes), PyBytes_GET_SIZE(ns_bytes))
    cdef ks_SlotMap slots
    cdef vector[Update] updates
    cdef vector[ks_SlotEntry*] missing
    cdef Update u
    cdef ks_Slot* slot
    cdef ks_SlotEntry* entry
    cdef ks_SlotMap.iterator sit
    cdef ks_NamedCache* nc
    cdef ks_CacheEntry* e
    cdef Py_ssize_t j
    cdef int failed = 0, unknown_ns = 0
    cdef int64_t dropped = 0, observed = observed_time
    cdef string ck
    cdef vector[ks_FlushBatch] flushes
    cdef vector[ks_PendingFlush] pending
    cdef string wkey, wval
    # The entries written and their last records, when their header notes need updating.
    cdef bint noting = notes is not None and (batch._headers is not None or len(notes) > 0)
    cdef vector[pair[string, Py_ssize_t]] written
    _check_aggregation(op, reducer, windowed, size_ms, advance_ms)
    # Pass 1 (no GIL): the slots each record updates; then, under the cache mutex, the cached
    # aggregates of those slots.
    with nogil:
        failed = _slot_updates(batch, op, windowed, size_ms, advance_ms, grace_ms, &observed, &dropped,
                               slots, updates)
        if not failed:
            cache._mutex.lock()
            nc = cache._find(name)
            if nc == NULL:
                unknown_ns = 1
            else:
                sit = slots.begin()
                while sit != slots.end():
                    entry = &deref(sit)
                    _cache_key(&entry.first, ck)
                    e = nc.index.get(string_view(ck.data(), ck.size()))
                    if e == NULL:
                        missing.push_back(entry)
                    else:
                        if e.tombstone:
                            entry.second.state = 1
                        elif _slot_from_bytes(&entry.second, e.value.data(),
                                              <Py_ssize_t>e.value.size(), store_enc, timestamped) < 0:
                            failed = 1
                            break
                    inc(sit)
            cache._mutex.unlock()
    if unknown_ns:
        raise KeyError(f"record cache has no namespace {namespace!r}; add it with add_namespace() first")
    if failed:
        return None
    # Keys the cache does not hold: read the store below (Python, with the GIL).
    if _load_slots(missing, load, False, store_enc, timestamped) < 0:
        return None
    # Pass 2: the aggregates, record by record, in the slots (REDUCE calls Python, with the GIL).
    if op == OP_REDUCE:
        failed = _reduce_in_slots(batch, updates, value_enc, store_enc, reducer, timestamped)
    else:
        with nogil:
            failed = _aggregate_in_slots(batch, updates, op, value_enc, store_enc, timestamped)
    if failed:
        return None
    # Pass 3 (cache mutex, no GIL): each key's newest aggregate, in last-update order; then the
    # batch's maps are freed, still without the GIL.
    with nogil:
        cache._mutex.lock()
        nc = cache._find(name)
        if nc != NULL:
            for j in range(<Py_ssize_t>updates.size()):
                u = updates[j]
                slot = &u.entry.second
                if slot.last != j:
                    continue
                _encode_aggregate(slot.i, slot.d, slot.ts, store_enc, timestamped, wval)
                _cache_key(&u.entry.first, wkey)
                cache._upsert(nc, string_view(wkey.data(), wkey.size()), wval.data(), wval.size(),
                              False, slot.ts, True)
                cache._evict_while_over(nc, flushes, pending)
                if noting:
                    written.push_back(pair[string, Py_ssize_t](wkey, u.record))
        cache._mutex.unlock()
        slots.clear()
        updates.clear()
        updates.shrink_to_fit()
    if noting:
        _note_writers(notes, batch, written)
    if not flushes.empty():
        cache._deliver(flushes, pending)
    return observed, dropped


cdef int _note_writers(dict notes, RecordBatch batch,
                       vector[pair[string, Py_ssize_t]]& written) except -1:
    """Each written cache entry's note: the headers of its last record as the batch stores them
    (shared, never changed: the flush copies them), none when it has none
    (``CachingKeyValueStore._note_headers``, per record)."""
    cdef Py_ssize_t j
    for j in range(<Py_ssize_t>written.size()):
        key = PyBytes_FromStringAndSize(written[j].first.data(), written[j].first.size())
        headers = batch.c_headers(written[j].second)
        if headers:
            notes[key] = headers
        elif notes:
            notes.pop(key, None)
    return 0


def aggregate_uncached(RecordBatch batch not None, int op, int value_enc, int store_enc, load_many,
                       bint windowed=False, int64_t size_ms=0, int64_t advance_ms=0,
                       int64_t grace_ms=0, int64_t observed_time=-1, reducer=None,
                       bint timestamped=False, bint forward=False):
    """``aggregate`` without a record cache: what a store without one receives and forwards.

    The same aggregates, record by record, as ``aggregate`` computes; old aggregates come from one
    call ``load_many(cache_keys)`` (a list of bytes or None per key: the store). Nothing is
    written here: the caller writes ``changes`` to the store and its changelog, and forwards
    ``updates``.

    - ``changes``: each slot's newest aggregate once, in the order of the slots' last updates, as
      changelog records: the store key (windowed: Kafka's changelog key, record key then window
      start then sequence number 0), the store's bytes, and the timestamp and offset of the
      record that last updated it (the record a per-record put would log it with).
    - ``updates`` (only with ``forward``; not windowed): every update in record order, as the
      per-record path forwards them: the record key, the aggregate in ``store_enc`` (no
      timestamp), stamped with the aggregate's timestamp, at the record's offset, with the
      record's headers. None without ``forward``.

    Returns ``(observed_time, dropped, changes, updates)``, or None when some record needs the
    Python path.
    """
    cdef ks_SlotMap slots
    cdef vector[Update] updates
    cdef vector[ks_SlotEntry*] entries
    cdef ks_SlotMap.iterator sit
    cdef Update* u
    cdef ks_Slot* slot
    cdef Py_ssize_t j, i
    cdef int failed = 0
    cdef int64_t dropped = 0, observed = observed_time
    cdef string wkey, wval
    cdef char seq[4]
    cdef RecordBatchBuilder changes = RecordBatchBuilder()
    cdef RecordBatchBuilder forwarded = RecordBatchBuilder() if forward else None
    # Each forwarded update's record, for its headers.
    cdef bint carries = forward and batch._headers is not None
    cdef vector[int32_t] rows
    _check_aggregation(op, reducer, windowed, size_ms, advance_ms)
    if forward and windowed:
        raise ValueError("forwarding windowed updates needs their windowed keys: use the Python path")
    with nogil:
        failed = _slot_updates(batch, op, windowed, size_ms, advance_ms, grace_ms, &observed, &dropped,
                               slots, updates)
        if not failed:
            entries.reserve(slots.size())
            sit = slots.begin()
            while sit != slots.end():
                entries.push_back(&deref(sit))
                inc(sit)
    if failed:
        return None
    if not entries.empty() and _load_slots(entries, load_many, True, store_enc, timestamped) < 0:
        return None
    if op == OP_REDUCE:
        failed = _reduce_in_slots(batch, updates, value_enc, store_enc, reducer, timestamped)
    else:
        with nogil:
            failed = _aggregate_in_slots(batch, updates, op, value_enc, store_enc, timestamped)
    if failed:
        return None
    with nogil:
        _put_be32(seq, 0)
        for j in range(<Py_ssize_t>updates.size()):
            u = &updates[j]
            slot = &u.entry.second
            i = u.record
            if forward:
                _encode_aggregate(u.i, u.d, u.ts, store_enc, False, wval)
                forwarded.append(batch.key_ptr(i), batch.key_len(i), wval.data(),
                                 <Py_ssize_t>wval.size(), u.ts, batch.part(i), batch.off(i))
                if carries:
                    rows.push_back(<int32_t>i)
            if slot.last != j:
                continue
            _encode_aggregate(slot.i, slot.d, slot.ts, store_enc, timestamped, wval)
            _cache_key(&u.entry.first, wkey)
            if windowed:
                wkey.append(seq, 4)
            changes.append(wkey.data(), <Py_ssize_t>wkey.size(), wval.data(), <Py_ssize_t>wval.size(),
                           batch.ts(i), batch.part(i), batch.off(i))
        slots.clear()
        updates.clear()
        updates.shrink_to_fit()
    if forwarded is None:
        return observed, dropped, changes.finish(), None
    updated = forwarded.finish()
    if carries:
        _with_headers(updated, batch, rows.data())
    return observed, dropped, changes.finish(), updated


cdef inline void _stamp(ks_Slot* slot, int64_t ts, bint timestamped) noexcept nogil:
    """A slot's timestamp after a record at ``ts`` updated it: timestamped, the largest of the
    records that made the aggregate (the stored one's included); else the record's own."""
    if timestamped and slot.state == 2 and slot.ts > ts:
        return
    slot.ts = ts


cdef int _reduce_in_slots(RecordBatch batch, vector[Update]& updates, int value_enc, int store_enc,
                          object reducer, bint timestamped) except -1:
    """Pass 2 of REDUCE: 1 when a result does not fit the aggregate's encoding (nothing written)."""
    cdef Py_ssize_t j, i
    cdef Update* u
    cdef ks_Slot* slot
    cdef int64_t vi = 0
    cdef double vd = 0.0
    for j in range(<Py_ssize_t>updates.size()):
        u = &updates[j]
        slot = &u.entry.second
        i = u.record
        if _decode_number(batch.value_ptr(i), batch.value_len(i), value_enc, &vi, &vd) < 0:
            return 1
        if value_enc == ENC_DOUBLE:
            if slot.state != 2:
                slot.d = vd
            else:
                result = reducer(slot.d, vd)
                if type(result) is not float:
                    return 1
                slot.d = <double>result
        else:
            if slot.state != 2:
                slot.i = vi
            else:
                result = reducer(slot.i, vi)
                if type(result) is not int or not (-(1 << 63) <= result < (1 << 63)):
                    return 1
                slot.i = <int64_t>result
            if store_enc == ENC_INT and (slot.i < INT32_MIN or slot.i > INT32_MAX):
                return 1
        _stamp(slot, batch.ts(i), timestamped)
        slot.state = 2
        slot.last = j
        u.i = slot.i
        u.d = slot.d
        u.ts = slot.ts
    return 0


cdef int _aggregate_in_slots(RecordBatch batch, vector[Update]& updates, int op, int value_enc,
                             int store_enc, bint timestamped) noexcept nogil:
    """Pass 2 of COUNT/SUM/MIN/MAX: 1 when a record needs the Python path (nothing written)."""
    cdef Py_ssize_t j, i
    cdef Update* u
    cdef ks_Slot* slot
    cdef int64_t vi = 0, acc
    cdef double vd = 0.0
    for j in range(<Py_ssize_t>updates.size()):
        u = &updates[j]
        slot = &u.entry.second
        i = u.record
        if op == OP_COUNT:
            slot.i = (slot.i if slot.state == 2 else 0) + 1
        else:
            if _decode_number(batch.value_ptr(i), batch.value_len(i), value_enc, &vi, &vd) < 0:
                return 1
            if value_enc == ENC_DOUBLE:
                if slot.state != 2:
                    slot.d = vd
                elif op == OP_SUM:
                    slot.d = slot.d + vd
                elif op == OP_MIN:
                    if vd < slot.d:
                        slot.d = vd
                elif vd > slot.d:
                    slot.d = vd
            else:
                if slot.state != 2:
                    slot.i = vi
                elif op == OP_SUM:
                    if ks_add_overflow(slot.i, vi, &acc):
                        return 1   # Python's int would not fit the long serde either
                    slot.i = acc
                elif op == OP_MIN:
                    if vi < slot.i:
                        slot.i = vi
                elif vi > slot.i:
                    slot.i = vi
                if store_enc == ENC_INT and (slot.i < INT32_MIN or slot.i > INT32_MAX):
                    return 1
        _stamp(slot, batch.ts(i), timestamped)
        slot.state = 2
        slot.last = j
        u.i = slot.i
        u.d = slot.d
        u.ts = slot.ts
    return 0
