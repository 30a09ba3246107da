# cython: language_level=3
"""The record cache: a byte-bounded LRU of named caches, one per "<task>-<store>".

Semantics follow Kafka Streams' ThreadCache/NamedCache (record_cache.pyi states them in full). The
records live in C++ memory: per namespace a hash index, an intrusive LRU list and an intrusive
dirty list in arrival order (re-putting a dirty key moves it to the end of that order, as Kafka's
NamedCache does). Entry bytes are len(key) + len(value) + ENTRY_OVERHEAD.

Lock order: a RecordCache's ``_mutex`` is a leaf below the scheduler's mutex (docs/internals.md).
A thread never blocks on it while holding the GIL, so a holder may take the GIL (the flush path
does, to take a reference to a listener) without risking a deadlock. The per-record calls (get,
put, delete, has_namespace) take it with a try-lock while keeping the GIL and release the GIL only
to wait when it is contended: releasing the GIL for every call would hand it to another thread
each time, and two stream threads running Python processors would spend their time passing the
GIL back and forth. Two caches are locked together only in
move_namespace, lower address first. Listeners are called with the GIL and without any mutex, so a
listener may read or write the cache.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.ref cimport Py_DECREF, Py_INCREF, PyObject
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from cython.operator cimport dereference as deref
from cython.operator cimport preincrement as inc
from libc.stdint cimport int64_t, uintptr_t
from libc.string cimport memcpy
from libcpp cimport bool
from libcpp.algorithm cimport sort
from libcpp.string cimport string
from libcpp.string_view cimport string_view
from libcpp.utility cimport move
from libcpp.vector cimport vector

__all__ = ["RecordCache"]

# Bytes counted per entry besides key and value: four list links (32), timestamp (8), flags and
# padding (8), and the hash-index slot (16). Fixed so that sizes are reproducible across platforms.
cdef enum:
    _ENTRY_OVERHEAD = 64


cdef inline int64_t _entry_bytes(const ks_CacheEntry* e) noexcept nogil:
    return <int64_t>(e.key.size() + e.value.size()) + _ENTRY_OVERHEAD


cdef inline void _set_value(ks_CacheEntry* e, const char* value, size_t size) noexcept nogil:
    """Copy a value (NULL: a tombstone's none) into the entry's buffer, reusing it; a buffer far
    larger than the value is given back rather than kept for the entry's life."""
    if value == NULL:
        e.value.clear()
    else:
        e.value.assign(value, size)
    if e.value.capacity() > 2 * size + 64:
        e.value.shrink_to_fit()


ctypedef ks_CacheEntry* _EntryPtr


cdef inline string_view _view(const string& s) noexcept nogil:
    return string_view(s.data(), s.size())


cdef inline void _lru_unlink(ks_NamedCache* nc, ks_CacheEntry* e) noexcept nogil:
    if e.lru_prev != NULL:
        e.lru_prev.lru_next = e.lru_next
    else:
        nc.lru_head = e.lru_next
    if e.lru_next != NULL:
        e.lru_next.lru_prev = e.lru_prev
    else:
        nc.lru_tail = e.lru_prev
    e.lru_prev = NULL
    e.lru_next = NULL


cdef inline void _lru_push_head(ks_NamedCache* nc, ks_CacheEntry* e) noexcept nogil:
    e.lru_prev = NULL
    e.lru_next = nc.lru_head
    if nc.lru_head != NULL:
        nc.lru_head.lru_prev = e
    nc.lru_head = e
    if nc.lru_tail == NULL:
        nc.lru_tail = e


cdef inline void _dirty_unlink(ks_NamedCache* nc, ks_CacheEntry* e) noexcept nogil:
    if e.dirty_prev != NULL:
        e.dirty_prev.dirty_next = e.dirty_next
    else:
        nc.dirty_head = e.dirty_next
    if e.dirty_next != NULL:
        e.dirty_next.dirty_prev = e.dirty_prev
    else:
        nc.dirty_tail = e.dirty_prev
    e.dirty_prev = NULL
    e.dirty_next = NULL


cdef inline void _dirty_append(ks_NamedCache* nc, ks_CacheEntry* e) noexcept nogil:
    e.dirty_next = NULL
    e.dirty_prev = nc.dirty_tail
    if nc.dirty_tail != NULL:
        nc.dirty_tail.dirty_next = e
    nc.dirty_tail = e
    if nc.dirty_head == NULL:
        nc.dirty_head = e


cdef void _free_named_cache(ks_NamedCache* nc) noexcept nogil:
    cdef ks_CacheEntry* e = nc.lru_head
    cdef ks_CacheEntry* nxt
    while e != NULL:
        nxt = e.lru_next
        del e
        e = nxt
    del nc


cdef inline void _acquire(mutex* mu) noexcept:
    """Lock mu from a thread that holds the GIL: one try-lock when uncontended; when contended the
    wait releases the GIL, because the thread holding mu may be waiting for the GIL."""
    if not mu.try_lock():
        with nogil:
            mu.lock()


cdef inline string _utf8(str s):
    cdef Py_ssize_t n
    cdef const char* p = PyUnicode_AsUTF8AndSize(s, &n)
    return string(p, n)


cdef inline string _bytes_to_string(bytes b):
    return string(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))


cdef inline string_view _str_view(str s) except *:
    """A str's UTF-8 bytes without a copy: Python keeps them with the str, valid while it lives."""
    cdef Py_ssize_t n
    cdef const char* p = PyUnicode_AsUTF8AndSize(s, &n)
    return string_view(p, n)


cdef inline object _value_object(const string& value, bool tombstone):
    if tombstone:
        return None
    return PyBytes_FromStringAndSize(value.data(), value.size())


cdef class RecordCache:
    """A byte-bounded LRU cache of named caches with dirty tracking and flush listeners.

    Guarantees: the total of entry bytes stays within ``max_bytes`` after every call (except while
    the namespace written to is already empty, as in Kafka); every dirty entry reaches its
    namespace's listener exactly once per write unless deleted or its namespace removed; listener
    calls of one namespace hand entries in arrival order. Every method is thread-safe.
    """

    ENTRY_OVERHEAD = _ENTRY_OVERHEAD

    def __cinit__(self, int64_t max_bytes):
        self._listeners = {}
        self._max_bytes = 0
        self._size_bytes = 0
        self._entries = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        self._flushes = 0
        self._generation = 0

    def __init__(self, int64_t max_bytes) -> None:
        if max_bytes < 0:
            raise ValueError(f"record cache max_bytes must be >= 0, got {max_bytes}")
        self._max_bytes = max_bytes

    def __dealloc__(self):
        cdef ks_NamedCache* nc
        it = self._caches.begin()
        while it != self._caches.end():
            nc = deref(it).second
            _free_named_cache(nc)
            inc(it)
        self._caches.clear()

    # ---- locked helpers: called with _mutex held and without the GIL ----

    cdef ks_NamedCache* _find(self, const string& name) noexcept nogil:
        return self._find_view(_view(name))

    cdef ks_NamedCache* _find_view(self, string_view name) noexcept nogil:
        it = self._caches.find(name)
        if it == self._caches.end():
            return NULL
        return deref(it).second

    cdef void _upsert(self, ks_NamedCache* nc, string_view key, const char* value, size_t value_size,
                      bool tombstone, int64_t timestamp, bool dirty) noexcept nogil:
        cdef ks_CacheEntry* e = nc.index.get(key)
        if e != NULL:
            self._rewrite(nc, e, value, value_size, tombstone, timestamp, dirty)
            return
        e = new ks_CacheEntry()
        e.key.assign(key.data(), key.size())
        _set_value(e, value, value_size)
        e.tombstone = tombstone
        e.timestamp = timestamp
        nc.index.insert(e)
        _lru_push_head(nc, e)
        if dirty:
            e.dirty = True
            nc.dirty_count += 1
            _dirty_append(nc, e)
        self._entries += 1
        nc.size_bytes += _entry_bytes(e)
        self._size_bytes += _entry_bytes(e)

    cdef void _rewrite(self, ks_NamedCache* nc, ks_CacheEntry* e, const char* value, size_t value_size,
                       bool tombstone, int64_t timestamp, bool dirty) noexcept nogil:
        # The value is copied into the entry's own buffer: an update of a cached key (every
        # record of an aggregation) reuses that buffer and allocates nothing.
        if not dirty and e.dirty:
            # A value read from the store is older than the pending write: keep the write.
            return
        cdef int64_t delta = -_entry_bytes(e)
        _set_value(e, value, value_size)
        e.tombstone = tombstone
        e.timestamp = timestamp
        delta += _entry_bytes(e)
        _lru_unlink(nc, e)
        _lru_push_head(nc, e)
        if dirty:
            if e.dirty:
                _dirty_unlink(nc, e)
            else:
                e.dirty = True
                nc.dirty_count += 1
            _dirty_append(nc, e)
        nc.size_bytes += delta
        self._size_bytes += delta

    cdef void _remove_entry(self, ks_NamedCache* nc, ks_CacheEntry* e) noexcept nogil:
        """Unlink and account an entry (the caller frees it)."""
        cdef int64_t size = _entry_bytes(e)
        self._generation += 1
        _lru_unlink(nc, e)
        if e.dirty:
            _dirty_unlink(nc, e)
            nc.dirty_count -= 1
        nc.index.erase(_view(e.key))
        nc.size_bytes -= size
        self._size_bytes -= size
        self._entries -= 1

    cdef void _collect_flush(self, ks_NamedCache* nc, ks_CacheEntry* evicted,
                             vector[ks_FlushBatch]& out,
                             vector[ks_PendingFlush]& pending) noexcept nogil:
        """Copy out the namespace's dirty entries (``evicted`` first) and mark them clean."""
        cdef ks_FlushBatch* batch
        cdef ks_FlushEntry* fe
        cdef ks_CacheEntry* e
        cdef ks_CacheEntry* nxt
        cdef ks_PendingFlush p
        if evicted == NULL and nc.dirty_head == NULL:
            return
        out.resize(out.size() + 1)
        batch = &out.back()
        batch.name = nc.name
        if evicted != NULL:
            batch.entries.resize(batch.entries.size() + 1)
            fe = &batch.entries.back()
            fe.key = move(evicted.key)
            fe.value = move(evicted.value)
            fe.timestamp = evicted.timestamp
            fe.tombstone = evicted.tombstone
        e = nc.dirty_head
        while e != NULL:
            nxt = e.dirty_next
            batch.entries.resize(batch.entries.size() + 1)
            fe = &batch.entries.back()
            fe.key = e.key
            fe.value = e.value
            fe.timestamp = e.timestamp
            fe.tombstone = e.tombstone
            if e.tombstone:
                batch.tombstones.push_back(e.key)
            e.dirty = False
            e.dirty_prev = NULL
            e.dirty_next = NULL
            e = nxt
        nc.dirty_head = NULL
        nc.dirty_tail = NULL
        nc.dirty_count = 0
        self._flushes += 1
        # The listener stays alive while its namespace is reachable under this mutex; the owned
        # reference keeps it alive past the unlock, until the call.
        p.listener = nc.listener
        with gil:
            Py_INCREF(<object>p.listener)
        pending.push_back(p)

    cdef void _evict_one(self, ks_NamedCache* nc, vector[ks_FlushBatch]& out,
                         vector[ks_PendingFlush]& pending) noexcept nogil:
        cdef ks_CacheEntry* e = nc.lru_tail
        cdef bool was_dirty = e.dirty
        self._remove_entry(nc, e)
        self._evictions += 1
        if was_dirty:
            self._collect_flush(nc, e, out, pending)
        del e

    cdef void _evict_while_over(self, ks_NamedCache* nc, vector[ks_FlushBatch]& out,
                                vector[ks_PendingFlush]& pending) noexcept nogil:
        # Only the namespace written to gives up entries: another namespace may be mid-operation
        # in a listener further up the stack (Kafka stops here too).
        while self._size_bytes > self._max_bytes and nc.lru_tail != NULL:
            self._evict_one(nc, out, pending)

    cdef void _drop_flushed_tombstones(self, vector[ks_FlushBatch]& batches) noexcept nogil:
        cdef ks_NamedCache* nc
        cdef ks_CacheEntry* e
        cdef size_t i, j
        for i in range(batches.size()):
            if batches[i].tombstones.empty():
                continue
            nc = self._find(batches[i].name)
            if nc == NULL:
                continue
            for j in range(batches[i].tombstones.size()):
                e = nc.index.get(_view(batches[i].tombstones[j]))
                if e == NULL:
                    continue
                # Rewritten while the listener ran: the new write is kept.
                if e.dirty or not e.tombstone:
                    continue
                self._remove_entry(nc, e)
                del e

    # ---- delivery: with the GIL, without the mutex ----

    cdef int _deliver(self, vector[ks_FlushBatch]& batches,
                      vector[ks_PendingFlush]& pending) except -1:
        """Hand each batch to its listener, then drop the flushed tombstones; re-raise the first
        listener error after every listener has run, so no batch is silently lost."""
        cdef size_t i, j
        cdef ks_FlushBatch* batch
        cdef ks_FlushEntry* fe
        cdef object listener
        cdef list records
        error = None
        for i in range(batches.size()):
            batch = &batches[i]
            listener = <object>pending[i].listener
            Py_DECREF(listener)  # the local now holds the reference taken under the mutex
            records = []
            for j in range(batch.entries.size()):
                fe = &batch.entries[j]
                records.append((
                    PyBytes_FromStringAndSize(fe.key.data(), fe.key.size()),
                    _value_object(fe.value, fe.tombstone),
                    fe.timestamp,
                ))
            try:
                listener(records)
            except BaseException as exc:
                if error is None:
                    error = exc
        with nogil:
            self._mutex.lock()
            self._drop_flushed_tombstones(batches)
            self._mutex.unlock()
        if error is not None:
            raise error
        return 0

    cdef object _unknown(self, str namespace):
        return KeyError(
            f"record cache has no namespace {namespace!r}; add it with add_namespace() first"
        )

    # ---- namespaces ----

    def add_namespace(self, str namespace not None, listener) -> None:
        """Create a namespace flushing to ``listener``; on an existing namespace, replace its
        listener and keep its entries (a task's store re-attached to this cache)."""
        if not callable(listener):
            raise TypeError(f"listener for namespace {namespace!r} must be callable")
        cdef string name = _utf8(namespace)
        cdef ks_NamedCache* nc
        cdef PyObject* ptr = <PyObject*>listener
        with nogil:
            self._mutex.lock()
            nc = self._find(name)
            if nc == NULL:
                nc = new ks_NamedCache()
                nc.name = name
                self._caches[_view(nc.name)] = nc
            # The dict holds the reference; swapping both under the mutex keeps a collecting
            # thread from taking a reference to a listener that is being dropped.
            nc.listener = ptr
            with gil:
                self._listeners[namespace] = listener
            self._mutex.unlock()

    def remove_namespace(self, str namespace not None) -> None:
        """Drop a namespace and its entries without flushing (a task closed dirty)."""
        cdef string name = _utf8(namespace)
        cdef ks_NamedCache* nc
        with nogil:
            self._mutex.lock()
            nc = self._find(name)
            if nc != NULL:
                self._caches.erase(_view(nc.name))
                self._size_bytes -= nc.size_bytes
                self._entries -= <int64_t>nc.index.size()
                self._generation += 1
            self._mutex.unlock()
            if nc != NULL:
                _free_named_cache(nc)
        if nc != NULL:
            self._listeners.pop(namespace, None)

    def has_namespace(self, str namespace not None) -> bool:
        cdef string name = _utf8(namespace)
        cdef bool found
        _acquire(&self._mutex)
        found = self._find(name) != NULL
        self._mutex.unlock()
        return found

    def namespaces(self) -> list:
        """Names of every namespace, sorted."""
        cdef vector[string] names = self._sorted_names()
        return [names[i].decode("utf-8") for i in range(names.size())]

    cdef vector[string] _sorted_names(self):
        cdef vector[string] names
        with nogil:
            self._mutex.lock()
            it = self._caches.begin()
            while it != self._caches.end():
                names.push_back(deref(it).second.name)
                inc(it)
            self._mutex.unlock()
            sort(names.begin(), names.end())
        return names

    # ---- reads and writes ----

    def get(self, str namespace not None, bytes key not None):
        """(value, timestamp) if cached (value None: a cached tombstone); None on a miss.
        A hit moves the entry to most-recently-used."""
        return self._get(namespace, key)

    cdef tuple _get(self, str namespace, bytes key):
        return <tuple>self._get_fixed_ref(
            namespace, PyBytes_AS_STRING(key), <size_t>PyBytes_GET_SIZE(key), NULL, 0, NULL
        )

    cdef object _get_fixed_ref(self, str namespace, const char* key, size_t key_size, char* out,
                               size_t size, ks_EntryRef* ref):
        """``_get`` of the ``key_size`` key bytes at ``key``. With ``out``, a hit whose value is
        ``size`` bytes is copied into ``out`` instead of into a bytes object, and the result is
        ``True`` (no Python object made: a cached aggregate of fixed width is read this way on
        every record). On a hit ``ref`` (when not NULL) is set to the entry, for
        ``_put_raw_ref`` to write it again without looking it up."""
        # The hottest call of the per-record path: namespace and key are looked up as views and
        # the value copied once, into its bytes object (making bytes runs no Python code, so it
        # may happen under the mutex).
        cdef string_view name = _str_view(namespace)
        cdef string_view k = string_view(key, key_size)
        cdef object value = None
        cdef int64_t timestamp = 0
        cdef int found = 0
        cdef ks_NamedCache* nc
        cdef ks_CacheEntry* e
        _acquire(&self._mutex)
        try:
            nc = self._find_view(name)
            if nc == NULL:
                found = -1
            else:
                e = nc.index.get(k)
                if e == NULL:
                    self._misses += 1
                else:
                    self._hits += 1
                    found = 1
                    if out != NULL and not e.tombstone and e.value.size() == size:
                        memcpy(out, e.value.data(), size)
                        found = 2
                    elif not e.tombstone:
                        value = PyBytes_FromStringAndSize(e.value.data(), <Py_ssize_t>e.value.size())
                    timestamp = e.timestamp
                    _lru_unlink(nc, e)
                    _lru_push_head(nc, e)
                    if ref != NULL:
                        ref.nc = nc
                        ref.e = e
                        ref.generation = self._generation
        finally:
            self._mutex.unlock()
        if found == 2:
            return True
        if found == 1:
            return (value, timestamp)
        if found == -1:
            raise self._unknown(namespace)
        return None

    cdef int _put(self, str namespace, bytes key, object value, int64_t timestamp,
                  bool dirty, bool only_if_absent) except -2:
        """Returns 1 when written, 0 when an entry was present (only_if_absent)."""
        if value is None:
            return self._put_raw(namespace, key, NULL, 0, True, timestamp, dirty, only_if_absent)
        if type(value) is not bytes:
            raise TypeError(f"record cache values must be bytes or None, got {type(value).__name__}")
        # valid while the caller holds ``value``, which outlives this call
        return self._put_raw(namespace, key, PyBytes_AS_STRING(<bytes>value),
                             <size_t>PyBytes_GET_SIZE(<bytes>value), False, timestamp, dirty,
                             only_if_absent)

    cdef int _put_raw(self, str namespace, bytes key, const char* v, size_t v_size, bool tombstone,
                      int64_t timestamp, bool dirty, bool only_if_absent) except -2:
        """``_put`` of the ``v_size`` bytes at ``v`` (ignored for a tombstone)."""
        return self._put_raw_at(namespace, PyBytes_AS_STRING(key), <size_t>PyBytes_GET_SIZE(key), v,
                                v_size, tombstone, timestamp, dirty, only_if_absent)

    cdef int _put_raw_at(self, str namespace, const char* key, size_t key_size, const char* v,
                         size_t v_size, bool tombstone, int64_t timestamp, bool dirty,
                         bool only_if_absent) except -2:
        """``_put_raw`` of the ``key_size`` key bytes at ``key``."""
        cdef string_view name = _str_view(namespace)
        cdef string_view k = string_view(key, key_size)
        cdef int rc = 1
        cdef ks_NamedCache* nc
        cdef vector[ks_FlushBatch] batches
        cdef vector[ks_PendingFlush] pending
        _acquire(&self._mutex)
        nc = self._find_view(name)
        if nc == NULL:
            rc = -1
        else:
            if only_if_absent:
                e = nc.index.get(k)
                if e != NULL:
                    self._hits += 1
                    _lru_unlink(nc, e)
                    _lru_push_head(nc, e)
                    rc = 0
                else:
                    self._misses += 1
            if rc == 1:
                self._upsert(nc, k, v, v_size, tombstone, timestamp, dirty)
                self._evict_while_over(nc, batches, pending)
        self._mutex.unlock()
        if rc == -1:
            raise self._unknown(namespace)
        if not batches.empty():
            self._deliver(batches, pending)
        return rc

    cdef int _put_raw_ref(self, const ks_EntryRef* ref, str namespace, const char* key,
                          size_t key_size, const char* v, size_t v_size, int64_t timestamp) except -2:
        """A dirty ``_put_raw_at`` of the entry ``_get_fixed_ref`` found (``ref``): written in
        place, without looking the namespace and key up again, when no entry left this cache
        since (the generation is the same); else as ``_put_raw_at``."""
        cdef vector[ks_FlushBatch] batches
        cdef vector[ks_PendingFlush] pending
        if ref.e != NULL:
            _acquire(&self._mutex)
            if ref.generation == self._generation:
                self._rewrite(ref.nc, ref.e, v, v_size, False, timestamp, True)
                self._evict_while_over(ref.nc, batches, pending)
                self._mutex.unlock()
                if not batches.empty():
                    self._deliver(batches, pending)
                return 1
            self._mutex.unlock()
        return self._put_raw_at(namespace, key, key_size, v, v_size, False, timestamp, True, False)

    def put(self, str namespace not None, bytes key not None, value, int64_t timestamp) -> None:
        """Write an entry: dirty, most-recently-used, last in the dirty order (a re-put dirty key
        moves to the end, as in Kafka). Evicts from this namespace while over the limit."""
        self._put(namespace, key, value, timestamp, True, False)

    def put_if_absent(self, str namespace not None, bytes key not None, value,
                      int64_t timestamp) -> bool:
        """Put unless an entry for the key is cached (a cached tombstone counts as present, as in
        Kafka's NamedCache); returns True when written. Counts a hit or a miss like get."""
        return self._put(namespace, key, value, timestamp, True, True) == 1

    def put_clean(self, str namespace not None, bytes key not None, value,
                  int64_t timestamp) -> None:
        """Cache a value read from the store (not dirty: never flushed). A key holding a dirty
        entry keeps it, since that pending write is newer than anything in the store."""
        self._put(namespace, key, value, timestamp, False, False)

    def delete(self, str namespace not None, bytes key not None):
        """Remove an entry without flushing it; returns its (value, timestamp), or None."""
        cdef string name = _utf8(namespace)
        cdef string k = _bytes_to_string(key)
        cdef string value
        cdef int64_t timestamp = 0
        cdef bool tombstone = False
        cdef int found = 0
        cdef ks_NamedCache* nc
        cdef ks_CacheEntry* e
        _acquire(&self._mutex)
        nc = self._find(name)
        if nc == NULL:
            found = -1
        else:
            e = nc.index.get(_view(k))
            if e != NULL:
                found = 1
                self._remove_entry(nc, e)
                value = move(e.value)
                timestamp = e.timestamp
                tombstone = e.tombstone
                del e
        self._mutex.unlock()
        if found == 1:
            return (_value_object(value, tombstone), timestamp)
        if found == -1:
            raise self._unknown(namespace)
        return None

    def flush(self, namespace=None) -> None:
        """Flush one namespace, or every namespace (in name order) when None. Namespaces are
        flushed one at a time, so writes a listener makes into a later namespace are included."""
        cdef vector[string] names
        cdef size_t i
        if namespace is None:
            names = self._sorted_names()
            for i in range(names.size()):
                self._flush_one(names[i], None)
        else:
            self._flush_one(_utf8(namespace), namespace)

    cdef int _flush_one(self, const string& name, object namespace) except -1:
        cdef ks_NamedCache* nc
        cdef int rc = 0
        cdef vector[ks_FlushBatch] batches
        cdef vector[ks_PendingFlush] pending
        with nogil:
            self._mutex.lock()
            nc = self._find(name)
            if nc == NULL:
                rc = -1
            else:
                self._collect_flush(nc, NULL, batches, pending)
            self._mutex.unlock()
        if rc == -1:
            # Removed meanwhile when flushing everything; asked for by name otherwise.
            if namespace is None:
                return 0
            raise self._unknown(namespace)
        if not batches.empty():
            self._deliver(batches, pending)
        return 0

    def dirty_count(self, namespace=None) -> int:
        """Dirty entries of one namespace, or of every namespace when None."""
        cdef string name
        cdef int64_t count = 0
        cdef ks_NamedCache* nc
        cdef bool all_namespaces = namespace is None
        if not all_namespaces:
            name = _utf8(namespace)
        with nogil:
            self._mutex.lock()
            if all_namespaces:
                it = self._caches.begin()
                while it != self._caches.end():
                    count += deref(it).second.dirty_count
                    inc(it)
            else:
                nc = self._find(name)
                count = -1 if nc == NULL else nc.dirty_count
            self._mutex.unlock()
        if count < 0:
            raise self._unknown(namespace)
        return count

    def keys(self, str namespace not None) -> list:
        """Keys of a namespace in ascending byte order, without touching them."""
        return [key for key, _ in self._items(namespace, NULL, NULL, NULL, -1, False, True)]

    def range_items(self, str namespace not None, bytes lo, bytes hi, Py_ssize_t key_size=-1,
                    bint touch=True) -> list:
        """(key, value or None for a tombstone) of the namespace's entries with lo <= key <= hi
        (a None bound: unbounded), in ascending byte order; with ``key_size`` >= 0, only those of
        keys that long (a store's key of fixed-size suffixes: the entries of longer keys that begin
        with the same bytes lie in the same range and are another key's). With ``touch``, each
        entry returned counts as a hit and moves to most-recently-used in key order, as a get() of
        each key would. The range is read from the namespace's key order without the GIL."""
        cdef string lo_s, hi_s
        if lo is not None:
            lo_s = _bytes_to_string(lo)
        if hi is not None:
            hi_s = _bytes_to_string(hi)
        return self._items(namespace, &lo_s if lo is not None else NULL,
                           &hi_s if hi is not None else NULL, NULL, key_size, touch, True)

    def touch_range(self, str namespace not None, bytes lo not None, bytes hi not None,
                    Py_ssize_t key_size=-1) -> None:
        """What range_items(namespace, lo, hi, key_size) does to the cache (hits, recency),
        without copying the entries out."""
        cdef string lo_s = _bytes_to_string(lo)
        cdef string hi_s = _bytes_to_string(hi)
        self._items(namespace, &lo_s, &hi_s, NULL, key_size, True, False)

    def prefix_items(self, str namespace not None, bytes prefix not None) -> list:
        """As range_items, for the entries whose key begins with ``prefix``."""
        cdef string_view p = string_view(PyBytes_AS_STRING(prefix), <size_t>PyBytes_GET_SIZE(prefix))
        return self._items(namespace, NULL, NULL, &p, -1, True, True)

    cdef list _items(self, str namespace, const string* lo, const string* hi, const string_view* prefix,
                     Py_ssize_t key_size, bint touch, bint copy):
        """The entries in a range (or with a prefix) of keys ``key_size`` long (-1: any): touched
        when ``touch``, returned when ``copy`` (else None)."""
        cdef string name = _utf8(namespace)
        cdef vector[_EntryPtr] found
        cdef vector[string] keys
        cdef vector[string] values
        cdef vector[char] tombstones
        cdef ks_NamedCache* nc
        cdef ks_CacheEntry* e
        cdef size_t i
        with nogil:
            self._mutex.lock()
            nc = self._find(name)
            if nc != NULL:
                if prefix != NULL:
                    nc.index.prefixed(deref(prefix), found)
                else:
                    nc.index.range(lo, hi, key_size, found)
                for i in range(found.size()):
                    e = found[i]
                    if touch:
                        self._hits += 1
                        _lru_unlink(nc, e)
                        _lru_push_head(nc, e)
                    if copy:
                        keys.push_back(e.key)
                        values.push_back(e.value)
                        tombstones.push_back(e.tombstone)
            self._mutex.unlock()
        if nc == NULL:
            raise self._unknown(namespace)
        if not copy:
            return None
        return [
            (PyBytes_FromStringAndSize(keys[i].data(), keys[i].size()),
             _value_object(values[i], tombstones[i] != 0))
            for i in range(keys.size())
        ]

    def lru_keys(self, str namespace not None) -> list:
        """Keys of a namespace from least to most recently used (the eviction order)."""
        cdef string name = _utf8(namespace)
        cdef vector[string] keys
        cdef ks_NamedCache* nc
        cdef ks_CacheEntry* e
        cdef size_t i
        with nogil:
            self._mutex.lock()
            nc = self._find(name)
            if nc != NULL:
                e = nc.lru_tail
                while e != NULL:
                    keys.push_back(e.key)
                    e = e.lru_prev
            self._mutex.unlock()
        if nc == NULL:
            raise self._unknown(namespace)
        return [PyBytes_FromStringAndSize(keys[i].data(), keys[i].size()) for i in range(keys.size())]

    # ---- moving and sizing ----

    def move_namespace(self, str namespace not None, RecordCache other not None) -> None:
        """Move a namespace with all its entries (dirty state kept) into another cache; the other
        cache then evicts from it while over its own limit. Raises KeyError when this cache lacks
        the namespace and ValueError when the other cache already has it."""
        if other is self:
            if not self.has_namespace(namespace):
                raise self._unknown(namespace)
            return
        cdef string name = _utf8(namespace)
        cdef ks_NamedCache* nc
        cdef int rc = 0
        cdef vector[ks_FlushBatch] batches
        cdef vector[ks_PendingFlush] pending
        cdef RecordCache first = self
        cdef RecordCache second = other
        if <uintptr_t><void*>other < <uintptr_t><void*>self:
            first, second = other, self
        with nogil:
            # A fixed order (by address) so that two opposite moves cannot deadlock.
            first._mutex.lock()
            second._mutex.lock()
            nc = self._find(name)
            if nc == NULL:
                rc = -1
            elif other._find(name) != NULL:
                rc = -2
            else:
                self._caches.erase(_view(nc.name))
                self._size_bytes -= nc.size_bytes
                self._entries -= <int64_t>nc.index.size()
                self._generation += 1
                other._caches[_view(nc.name)] = nc
                other._size_bytes += nc.size_bytes
                other._entries += <int64_t>nc.index.size()
                with gil:
                    # Cannot raise (both mutexes are held): the dict always has the namespace.
                    other._listeners[namespace] = self._listeners.pop(namespace, None)
                other._evict_while_over(nc, batches, pending)
            second._mutex.unlock()
            first._mutex.unlock()
        if rc == -1:
            raise self._unknown(namespace)
        if rc == -2:
            raise ValueError(f"cannot move namespace {namespace!r}: the target cache already has it")
        if not batches.empty():
            other._deliver(batches, pending)

    def resize(self, int64_t max_bytes) -> None:
        """Set the limit. Shrinking evicts round-robin across namespaces (in name order, one entry
        per namespace per turn) until within the limit; growing just raises it."""
        if max_bytes < 0:
            raise ValueError(f"record cache max_bytes must be >= 0, got {max_bytes}")
        cdef vector[ks_FlushBatch] batches
        cdef vector[ks_PendingFlush] pending
        cdef vector[string] names
        cdef vector[ks_NamedCache*] caches
        cdef ks_NamedCache* nc
        cdef size_t i
        cdef bool evicted
        with nogil:
            self._mutex.lock()
            self._max_bytes = max_bytes
            if self._size_bytes > max_bytes:
                it = self._caches.begin()
                while it != self._caches.end():
                    names.push_back(deref(it).second.name)
                    inc(it)
                sort(names.begin(), names.end())
                for i in range(names.size()):
                    caches.push_back(self._find(names[i]))
                evicted = True
                while self._size_bytes > self._max_bytes and evicted:
                    evicted = False
                    for i in range(caches.size()):
                        if self._size_bytes <= self._max_bytes:
                            break
                        nc = caches[i]
                        if nc.lru_tail != NULL:
                            self._evict_one(nc, batches, pending)
                            evicted = True
            self._mutex.unlock()
        if not batches.empty():
            self._deliver(batches, pending)

    # ---- sizes and counters ----

    @property
    def max_bytes(self) -> int:
        return self._locked_read(0)

    @property
    def size_bytes(self) -> int:
        return self._locked_read(1)

    def __len__(self) -> int:
        return self._locked_read(2)

    @property
    def hits(self) -> int:
        return self._locked_read(3)

    @property
    def misses(self) -> int:
        return self._locked_read(4)

    @property
    def evictions(self) -> int:
        """Entries evicted to stay within the limit (clean or dirty)."""
        return self._locked_read(5)

    @property
    def flushes(self) -> int:
        """Namespace flushes that handed at least one entry to a listener."""
        return self._locked_read(6)

    cdef int64_t _locked_read(self, int which) noexcept:
        cdef int64_t out = 0
        with nogil:
            self._mutex.lock()
            if which == 0:
                out = self._max_bytes
            elif which == 1:
                out = self._size_bytes
            elif which == 2:
                out = self._entries
            elif which == 3:
                out = self._hits
            elif which == 4:
                out = self._misses
            elif which == 5:
                out = self._evictions
            else:
                out = self._flushes
            self._mutex.unlock()
        return out

    def namespace_size(self, str namespace not None) -> int:
        """Number of entries in a namespace."""
        return self._namespace_stat(namespace, False)

    def namespace_bytes(self, str namespace not None) -> int:
        """Bytes held by a namespace (entry bytes as counted against max_bytes)."""
        return self._namespace_stat(namespace, True)

    cdef int64_t _namespace_stat(self, str namespace, bool in_bytes) except -2:
        cdef string name = _utf8(namespace)
        cdef ks_NamedCache* nc
        cdef int64_t out = -1
        with nogil:
            self._mutex.lock()
            nc = self._find(name)
            if nc != NULL:
                out = nc.size_bytes if in_bytes else <int64_t>nc.index.size()
            self._mutex.unlock()
        if out < 0:
            raise self._unknown(namespace)
        return out

    def __repr__(self) -> str:
        return (f"RecordCache(max_bytes={self.max_bytes}, size_bytes={self.size_bytes}, "
                f"entries={len(self)})")
