"""Output buffers per output partition, with changelog suppression.

Sink partitions keep every record in send order. Partitions registered as changelogs keep only
the newest record per key since the last drain: an older entry for the key is marked dead and the
new one appended, so a drain returns each key's newest write in the order of those writes. Null
keys are never suppressed.

Locks: one mutex per output partition (a leaf; see record_collector.pxd). Senders to different
partitions do not contend; a drain swaps each partition's contents out under its mutex and builds
the output batch after releasing it.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItemWithError
from cpython.list cimport PyList_GET_SIZE
from cpython.ref cimport PyObject
from libc.stdint cimport INT32_MAX, int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset
from libcpp.mutex cimport mutex
from libcpp.vector cimport vector

from kstreams._native.record_batch cimport RecordBatch, RecordBatchBuilder, c_murmur2


cdef inline int64_t _read_be64(const char* p) noexcept nogil:
    """The signed 8-byte big-endian integer at ``p`` (a timestamped store value's timestamp)."""
    cdef const unsigned char* b = <const unsigned char*>p
    cdef uint64_t v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | b[i]
    return <int64_t>v

__all__ = ["RecordCollector"]


cdef inline void _acquire(mutex* mu) noexcept:
    """Lock mu from a thread that holds the GIL. Uncontended, this is one try_lock; contended, the
    wait releases the GIL, because the thread holding mu may be waiting for the GIL."""
    if not mu.try_lock():
        with nogil:
            mu.lock()

# Dead entries are compacted away once they are this many and outnumber the live ones, so a hot
# key on a changelog cannot grow a partition's buffer without bound between drains.
cdef Py_ssize_t _COMPACT_MIN_DEAD = 4096
# A single record at least this large is copied without the GIL.
cdef Py_ssize_t _NOGIL_COPY_BYTES = 16384


cdef class _PartitionBuffer:
    """One output partition's buffered records (fields guarded by mu)."""

    def __cinit__(self, str topic, int32_t partition):
        self.topic = topic
        self.partition = partition
        self.headers = []
        self.live = 0
        self.live_bytes = 0
        self.suppressed = 0
        self.changelog = False
        self.arena = NULL
        self.arena_len = 0
        self.arena_cap = 0
        self.slots = NULL
        self.nslots = 0
        self.nkeys = 0

    def __dealloc__(self):
        free(self.arena)
        free(self.slots)


cdef void _index_clear(_PartitionBuffer pb) noexcept nogil:
    """Forget every key (mu held). A large, mostly idle table is released rather than zeroed."""
    if pb.nslots > 4096 and pb.nkeys * 8 < pb.nslots:
        free(pb.slots)
        pb.slots = NULL
        pb.nslots = 0
    elif pb.nslots:
        memset(pb.slots, 0, pb.nslots * sizeof(size_t))
    pb.nkeys = 0


cdef void _index_put_new(_PartitionBuffer pb, size_t idx) noexcept nogil:
    """Insert entry idx, whose key is known not to be in the table (mu held, room ensured)."""
    cdef size_t mask = pb.nslots - 1
    cdef size_t i = pb.entries[idx].khash & mask
    while pb.slots[i] != 0:
        i = (i + 1) & mask
    pb.slots[i] = idx + 1
    pb.nkeys += 1


cdef int _index_reserve(_PartitionBuffer pb, size_t keys) except -1 nogil:
    """Room for `keys` keys at a load factor of at most 1/2, rehashing when it grows (mu held)."""
    cdef size_t n = pb.nslots if pb.nslots else 16
    cdef size_t* old = pb.slots
    cdef size_t old_n = pb.nslots
    cdef size_t i
    while keys * 2 > n:
        n *= 2
    if n == pb.nslots:
        return 0
    pb.slots = <size_t*>calloc(n, sizeof(size_t))
    if pb.slots == NULL:
        pb.slots = old
        with gil:
            raise MemoryError()
    pb.nslots = n
    pb.nkeys = 0
    for i in range(old_n):
        if old[i] != 0:
            _index_put_new(pb, old[i] - 1)
    free(old)
    return 0


cdef int _arena_reserve(_PartitionBuffer pb, size_t extra) except -1 nogil:
    """Room for `extra` more bytes in a partition's arena, growing geometrically (mu held)."""
    cdef size_t need = pb.arena_len + extra, cap
    cdef void* p
    if need <= pb.arena_cap:
        return 0
    cap = pb.arena_cap * 2 if pb.arena_cap else 4096
    if cap < need:
        cap = need
    p = realloc(pb.arena, cap)
    if p == NULL:
        with gil:
            raise MemoryError()
    pb.arena = <char*>p
    pb.arena_cap = cap
    return 0


cdef inline Py_ssize_t _entry_bytes(const CollectedEntry& e) noexcept nogil:
    return (e.klen if e.klen > 0 else 0) + (e.vlen if e.vlen > 0 else 0)


cdef void _compact(_PartitionBuffer pb) noexcept nogil:
    """Drop dead entries and their bytes; rebuild the key index (mu held). Without memory for
    the new arena it leaves the buffer as it is: compaction is an optimisation."""
    cdef char* arena = <char*>malloc(pb.live_bytes if pb.live_bytes > 0 else 1)
    cdef vector[CollectedEntry] entries
    cdef CollectedEntry e
    cdef size_t i, pos = 0
    cdef Py_ssize_t nb
    if arena == NULL:
        return
    entries.reserve(pb.live)
    for i in range(pb.entries.size()):
        e = pb.entries[i]
        if not e.alive:
            continue
        nb = _entry_bytes(e)
        memcpy(arena + pos, pb.arena + e.pos, nb)
        e.pos = pos
        pos += nb
        entries.push_back(e)
    free(pb.arena)
    pb.arena = arena
    pb.arena_len = pos
    pb.arena_cap = pb.live_bytes if pb.live_bytes > 0 else 1
    pb.entries.swap(entries)
    # Entry indexes moved: re-index the live keys. Each appears once and the table already holds
    # at least that many keys, so it has room.
    if pb.nslots:
        memset(pb.slots, 0, pb.nslots * sizeof(size_t))
    pb.nkeys = 0
    if pb.changelog and pb.nslots:
        for i in range(pb.entries.size()):
            if pb.entries[i].klen >= 0:
                _index_put_new(pb, i)


cdef class RecordCollector:
    """Thread-safe output buffers per (topic, partition); see the module docstring."""

    def __cinit__(self):
        self._parts = {}
        self._by_topic = {}
        self._len.store(0)
        self._bytes.store(0)
        self._suppressed.store(0)
        self._sent.store(0)

    cdef _PartitionBuffer _buffer(self, str topic, int32_t partition):
        # Buffers are never removed, so the by-topic lists only fill: a send looks its buffer up
        # by the topic (its hash is cached) and an index, without a (topic, partition) tuple.
        cdef PyObject* found = PyDict_GetItemWithError(self._by_topic, topic)
        cdef list partitions
        if found != NULL:
            partitions = <list><object>found
            if 0 <= partition < PyList_GET_SIZE(partitions):
                pb = partitions[partition]
                if pb is not None:
                    return <_PartitionBuffer>pb
        key = (topic, partition)
        pb = self._parts.get(key)
        if pb is None:
            # setdefault is atomic under the GIL: two racing senders end up with one buffer.
            pb = self._parts.setdefault(key, _PartitionBuffer(topic, partition))
        if partition >= 0:
            partitions = self._by_topic.setdefault(topic, [])
            if len(partitions) <= partition:
                partitions.extend([None] * (partition + 1 - len(partitions)))
            partitions[partition] = pb
        return <_PartitionBuffer>pb

    # ---------------------------------------------------------------- changelog registration

    def register_changelog(self, str topic not None, int32_t partition):
        """Keep only the newest record per key for this partition from now on."""
        cdef _PartitionBuffer pb = self._buffer(topic, partition)
        cdef size_t i
        cdef Py_ssize_t live0, bytes0, suppressed0
        with nogil:
            pb.mu.lock()
            if not pb.changelog:
                live0 = pb.live
                bytes0 = pb.live_bytes
                suppressed0 = pb.suppressed
                pb.changelog = True
                # Index what is already buffered, so a later write supersedes it.
                _index_clear(pb)
                try:
                    for i in range(pb.entries.size()):
                        if pb.entries[i].alive and pb.entries[i].klen >= 0:
                            pb.entries[i].khash = <uint32_t>c_murmur2(
                                pb.arena + pb.entries[i].pos, pb.entries[i].klen)
                            self._supersede(pb, pb.arena + pb.entries[i].pos,
                                            pb.entries[i].klen, i)
                finally:
                    self._publish(pb, live0, bytes0, suppressed0, 0)
                    pb.mu.unlock()
            else:
                pb.mu.unlock()

    def unregister_changelog(self, str topic not None, int32_t partition):
        """Stop suppressing for this partition (records already buffered stay)."""
        pb = self._parts.get((topic, partition))
        if pb is None:
            return
        cdef _PartitionBuffer p = <_PartitionBuffer>pb
        with nogil:
            p.mu.lock()
            p.changelog = False
            _index_clear(p)
            p.mu.unlock()

    def is_changelog(self, str topic not None, int32_t partition):
        pb = self._parts.get((topic, partition))
        if pb is None:
            return False
        cdef _PartitionBuffer p = <_PartitionBuffer>pb
        cdef bint r
        with nogil:
            p.mu.lock()
            r = p.changelog
            p.mu.unlock()
        return r

    # ---------------------------------------------------------------- sending

    cdef int _supersede(self, _PartitionBuffer pb, const char* key, Py_ssize_t klen,
                        size_t idx) except -1 nogil:
        """Make entry idx (whose khash is set) the newest for its key, killing the previous one
        (mu held)."""
        cdef uint32_t h = pb.entries[idx].khash
        cdef size_t mask, i, slot
        cdef CollectedEntry* old
        cdef Py_ssize_t nb
        if (pb.nkeys + 1) * 2 > pb.nslots:
            _index_reserve(pb, pb.nkeys + 1)
        mask = pb.nslots - 1
        i = h & mask
        while True:
            slot = pb.slots[i]
            if slot == 0:
                pb.slots[i] = idx + 1
                pb.nkeys += 1
                return 0
            old = &pb.entries[slot - 1]
            if old.khash == h and old.klen == klen and memcmp(pb.arena + old.pos, key, klen) == 0:
                break
            i = (i + 1) & mask
        old.alive = False
        nb = _entry_bytes(old[0])
        pb.live -= 1
        pb.live_bytes -= nb
        pb.suppressed += 1
        pb.slots[i] = idx + 1
        return 0

    cdef int _append(self, _PartitionBuffer pb, const char* key, Py_ssize_t klen,
                     const char* value, Py_ssize_t vlen, int64_t ts) except -1 nogil:
        """Append one record to a partition buffer (mu held). The collector-wide counters are
        brought up to date by _publish, once per call rather than per record."""
        cdef CollectedEntry e
        cdef Py_ssize_t kb = klen if klen > 0 else 0
        cdef Py_ssize_t vb = vlen if vlen > 0 else 0
        if kb > INT32_MAX or vb > INT32_MAX:
            with gil:
                raise ValueError("a record key or value is larger than 2 GiB")
        if pb.arena_len + kb + vb > pb.arena_cap:
            _arena_reserve(pb, kb + vb)
        e.pos = pb.arena_len
        e.klen = <int32_t>(klen if klen >= 0 else -1)
        e.vlen = <int32_t>(vlen if vlen >= 0 else -1)
        e.ts = ts
        e.hidx = -1
        e.alive = True
        e.khash = 0
        if kb:
            memcpy(pb.arena + pb.arena_len, key, kb)
        if vb:
            memcpy(pb.arena + pb.arena_len + kb, value, vb)
        pb.arena_len += kb + vb
        pb.entries.push_back(e)
        pb.live += 1
        pb.live_bytes += kb + vb
        if pb.changelog and klen >= 0:
            pb.entries.back().khash = <uint32_t>c_murmur2(key, klen)
            self._supersede(pb, key, klen, pb.entries.size() - 1)
        return 0

    cdef void _publish(self, _PartitionBuffer pb, Py_ssize_t live0, Py_ssize_t bytes0,
                       Py_ssize_t suppressed0, Py_ssize_t sent) noexcept nogil:
        """Add a partition's changes since (live0, bytes0, suppressed0) to the totals (mu held)."""
        self._len.fetch_add(pb.live - live0)
        self._bytes.fetch_add(pb.live_bytes - bytes0)
        if pb.suppressed != suppressed0:
            self._suppressed.fetch_add(pb.suppressed - suppressed0)
        self._sent.fetch_add(sent)

    cdef void _compact_if_due(self, _PartitionBuffer pb) noexcept nogil:
        """Compact when dead entries are many and outnumber the live ones (mu held). Header
        indexes survive compaction: the header list is left as it is."""
        cdef Py_ssize_t dead = <Py_ssize_t>pb.entries.size() - pb.live
        if dead >= _COMPACT_MIN_DEAD and dead > pb.live:
            _compact(pb)

    cdef int c_send(self, str topic, int32_t partition, const char* key, Py_ssize_t klen,
                    const char* value, Py_ssize_t vlen, int64_t ts, object headers) except -1:
        """Buffer one record from raw pointers (klen/vlen -1 = None); needs the GIL."""
        cdef _PartitionBuffer pb = self._buffer(topic, partition)
        cdef Py_ssize_t live0, bytes0, suppressed0
        if headers is not None:
            headers = list(headers)
        _acquire(&pb.mu)
        try:
            self._compact_if_due(pb)
            live0 = pb.live
            bytes0 = pb.live_bytes
            suppressed0 = pb.suppressed
            if klen + vlen < _NOGIL_COPY_BYTES:
                # Releasing and retaking the GIL costs more than copying a small record.
                self._append(pb, key, klen, value, vlen, ts)
            else:
                with nogil:
                    self._append(pb, key, klen, value, vlen, ts)
            self._publish(pb, live0, bytes0, suppressed0, 1)
            if headers is not None:
                pb.entries.back().hidx = len(pb.headers)
                pb.headers.append(headers)
        finally:
            pb.mu.unlock()
        return 0

    cdef int c_send_batch(self, str topic, int32_t partition, RecordBatch batch) except -1:
        """Buffer every record of a batch in order; the byte copies run without the GIL."""
        return self._send_batch(topic, partition, batch, False)

    cdef int c_send_batch_timestamped(self, str topic, int32_t partition, RecordBatch batch) except -1:
        """``c_send_batch`` of a timestamped store's changes, whose values are an 8-byte
        big-endian timestamp then the value: each is buffered as Kafka's changelog holds it, the
        plain value in a record stamped with that timestamp (a None value keeps the batch's
        timestamp). ValueError, and nothing buffered, if a value is shorter than 8 bytes."""
        cdef Py_ssize_t i
        for i in range(batch.n):
            if 0 <= batch.value_len(i) < 8:
                raise ValueError(
                    f"A change of a timestamped store for changelog {topic} has a value of "
                    f"{batch.value_len(i)} bytes: it must start with an 8-byte timestamp"
                )
        return self._send_batch(topic, partition, batch, True)

    cdef int _send_batch(self, str topic, int32_t partition, RecordBatch batch,
                         bint split_timestamps) except -1:
        if batch.n == 0:
            return 0
        cdef _PartitionBuffer pb = self._buffer(topic, partition)
        cdef Py_ssize_t i, n = batch.n
        cdef size_t base
        cdef Py_ssize_t live0, bytes0, suppressed0
        cdef const char* value
        cdef Py_ssize_t vlen
        cdef int64_t ts
        _acquire(&pb.mu)
        try:
            with nogil:
                self._compact_if_due(pb)
                live0 = pb.live
                bytes0 = pb.live_bytes
                suppressed0 = pb.suppressed
                base = pb.entries.size()
                _arena_reserve(pb, batch.c_nbytes())
                if base + n > pb.entries.capacity():
                    # Geometric: reserving the exact size would reallocate on every batch.
                    pb.entries.reserve(max(base + n, 2 * pb.entries.capacity()))
                try:
                    for i in range(n):
                        value = batch.value_ptr(i)
                        vlen = batch.value_len(i)
                        ts = batch.ts(i)
                        if split_timestamps and vlen >= 0:
                            ts = _read_be64(value)
                            value += 8
                            vlen -= 8
                        self._append(pb, batch.key_ptr(i), batch.key_len(i), value, vlen, ts)
                finally:
                    self._publish(pb, live0, bytes0, suppressed0, pb.entries.size() - base)
            if batch._headers is not None:
                # A batch's header lists never change: the buffer shares them.
                for i in range(n):
                    h = batch.c_headers(i)
                    if h is not None:
                        pb.entries[base + i].hidx = len(pb.headers)
                        pb.headers.append(h)
        finally:
            pb.mu.unlock()
        return 0

    def send(self, str topic not None, int32_t partition, key, value, int64_t timestamp,
             headers=None):
        """Buffer one record for (topic, partition)."""
        self.c_send_bytes(topic, partition, key, value, timestamp, headers)

    cdef int c_send_bytes(self, str topic, int32_t partition, object key, object value,
                          int64_t ts, object headers) except -1:
        """``c_send`` of a key and a value that are bytes or None."""
        cdef const char* kp = NULL
        cdef const char* vp = NULL
        cdef Py_ssize_t kl = -1, vl = -1
        if key is not None:
            kp = PyBytes_AS_STRING(<bytes?>key)
            kl = PyBytes_GET_SIZE(key)
        if value is not None:
            vp = PyBytes_AS_STRING(<bytes?>value)
            vl = PyBytes_GET_SIZE(value)
        return self.c_send(topic, partition, kp, kl, vp, vl, ts, headers)

    def send_batch(self, str topic not None, int32_t partition, RecordBatch batch not None):
        """Append a whole batch to one partition's buffer (suppressed per key if a changelog)."""
        self.c_send_batch(topic, partition, batch)

    # ---------------------------------------------------------------- draining

    def drain(self):
        """Remove and return every buffered record as (topic, partition, batch), each batch in
        the partition's send order (for changelogs: the order of each key's newest write).
        Output offsets are -1 (assigned by the log)."""
        cdef list out = []
        cdef _PartitionBuffer pb
        cdef char* arena
        cdef size_t arena_cap
        cdef vector[CollectedEntry] entries
        cdef list headers
        cdef Py_ssize_t live, live_bytes, j
        cdef size_t i
        cdef RecordBatchBuilder builder
        cdef CollectedEntry* e
        for pb in list(self._parts.values()):
            entries.clear()
            with nogil:
                pb.mu.lock()
                # Take the partition's contents; the batch is built after the mutex is released.
                arena = pb.arena
                arena_cap = pb.arena_cap
                pb.arena = NULL
                pb.arena_len = 0
                pb.arena_cap = 0
                entries.swap(pb.entries)
                _index_clear(pb)
                live = pb.live
                live_bytes = pb.live_bytes
                pb.live = 0
                pb.live_bytes = 0
                self._len.fetch_sub(live)
                self._bytes.fetch_sub(live_bytes)
            headers = pb.headers
            pb.headers = []
            pb.mu.unlock()
            if live == 0:
                free(arena)
                continue
            builder = RecordBatchBuilder()
            if <size_t>live == entries.size():
                # Nothing was superseded: the arena already has the batch's byte layout, so the
                # batch takes it over without a copy.
                builder.adopt_arena(arena, arena_cap)
                with nogil:
                    for i in range(entries.size()):
                        e = &entries[i]
                        builder.append_described(e.klen, e.vlen, e.ts, pb.partition, -1)
            else:
                try:
                    with nogil:
                        builder.reserve(live, live_bytes)
                        for i in range(entries.size()):
                            e = &entries[i]
                            if e.alive:
                                builder.append(arena + e.pos, e.klen,
                                               arena + e.pos + (e.klen if e.klen > 0 else 0),
                                               e.vlen, e.ts, pb.partition, -1)
                finally:
                    free(arena)
            if headers:
                j = 0
                for i in range(entries.size()):
                    e = &entries[i]
                    if e.alive:
                        if e.hidx >= 0:
                            builder._set_headers(j, headers[e.hidx])
                        j += 1
            out.append((pb.topic, pb.partition, builder.finish()))
        return out

    # ---------------------------------------------------------------- counters

    def __len__(self):
        """Records buffered now."""
        return self._len.load()

    @property
    def bytes_held(self):
        """Key and value bytes of the buffered records."""
        return self._bytes.load()

    @property
    def suppressed_total(self):
        """Changelog records dropped because a newer record for the same key superseded them."""
        return self._suppressed.load()

    @property
    def sent_total(self):
        """Records ever passed to send or send_batch (suppressed ones included)."""
        return self._sent.load()

    def __repr__(self):
        return (f"RecordCollector(len={self._len.load()}, partitions={len(self._parts)}, "
                f"suppressed_total={self._suppressed.load()})")
