# cython: language_level=3
"""C-level layout of the record cache (see record_cache.pyx for the semantics).

The entry and namespace records are plain C++ structs so their members get default initialisers
(Cython-defined classes cannot have constructors in a .pxd); all logic lives in the .pyx.
"""

from cpython.ref cimport PyObject
from libc.stdint cimport int64_t
from libcpp cimport bool
from libcpp.mutex cimport mutex
from libcpp.string cimport string
from libcpp.string_view cimport string_view
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector


cdef extern from * nogil:
    """
    #include <string>
    #include <string_view>
    #include <unordered_map>
    #include <vector>

    /* One cached record. It sits on two intrusive lists: the namespace's LRU list (head = most
       recently used) and, while dirty, its dirty list (head = oldest write). The index keys are
       views of `key`, which never moves because entries are heap-allocated and never copied. */
    struct ks_CacheEntry {
        std::string key;
        std::string value;
        int64_t timestamp = 0;
        bool tombstone = false;
        bool dirty = false;
        ks_CacheEntry* lru_prev = nullptr;
        ks_CacheEntry* lru_next = nullptr;
        ks_CacheEntry* dirty_prev = nullptr;
        ks_CacheEntry* dirty_next = nullptr;
    };

    /* One named cache ("<task>-<store>"). The listener pointer travels with the namespace when it
       moves to another cache. */
    struct ks_NamedCache {
        std::string name;
        std::unordered_map<std::string_view, ks_CacheEntry*> index;
        ks_CacheEntry* lru_head = nullptr;
        ks_CacheEntry* lru_tail = nullptr;
        ks_CacheEntry* dirty_head = nullptr;
        ks_CacheEntry* dirty_tail = nullptr;
        int64_t size_bytes = 0;
        int64_t dirty_count = 0;
        PyObject* listener = nullptr;  /* borrowed: the RecordCache's _listeners dict owns it */
    };

    /* A copied-out record handed to a listener after the cache's mutex is released. */
    struct ks_FlushEntry {
        std::string key;
        std::string value;
        int64_t timestamp = 0;
        bool tombstone = false;
    };

    /* Everything one namespace flush hands to its listener, and the tombstones to drop after. */
    struct ks_FlushBatch {
        std::string name;
        std::vector<ks_FlushEntry> entries;
        std::vector<std::string> tombstones;
    };

    /* A listener reference (owned) carried from the locked collection step to the unlocked call. */
    struct ks_PendingFlush {
        PyObject* listener = nullptr;
    };
    """
    cppclass ks_CacheEntry:
        string key
        string value
        int64_t timestamp
        bool tombstone
        bool dirty
        ks_CacheEntry* lru_prev
        ks_CacheEntry* lru_next
        ks_CacheEntry* dirty_prev
        ks_CacheEntry* dirty_next

    cppclass ks_NamedCache:
        string name
        unordered_map[string_view, ks_CacheEntry*] index
        ks_CacheEntry* lru_head
        ks_CacheEntry* lru_tail
        ks_CacheEntry* dirty_head
        ks_CacheEntry* dirty_tail
        int64_t size_bytes
        int64_t dirty_count
        PyObject* listener

    cppclass ks_FlushEntry:
        string key
        string value
        int64_t timestamp
        bool tombstone

    cppclass ks_FlushBatch:
        string name
        vector[ks_FlushEntry] entries
        vector[string] tombstones

    cppclass ks_PendingFlush:
        PyObject* listener


cdef class RecordCache:
    # Guards every field below; taken only without the GIL, never across a call into Python.
    cdef mutex _mutex
    cdef unordered_map[string_view, ks_NamedCache*] _caches
    cdef int64_t _max_bytes
    cdef int64_t _size_bytes
    cdef int64_t _entries
    cdef int64_t _hits
    cdef int64_t _misses
    cdef int64_t _evictions
    cdef int64_t _flushes
    # Namespace name -> listener (GIL-protected). It owns the listeners (visible to the cyclic GC);
    # each C++ namespace borrows its pointer, swapped or dropped only under _mutex.
    cdef dict _listeners
    cdef object __weakref__

    cdef ks_NamedCache* _find(self, const string& name) noexcept nogil
    cdef ks_NamedCache* _find_view(self, string_view name) noexcept nogil
    cdef void _upsert(self, ks_NamedCache* nc, string& key, string& value, bool tombstone,
                      int64_t timestamp, bool dirty) noexcept nogil
    cdef void _remove_entry(self, ks_NamedCache* nc, ks_CacheEntry* e) noexcept nogil
    cdef void _collect_flush(self, ks_NamedCache* nc, ks_CacheEntry* evicted,
                             vector[ks_FlushBatch]& out,
                             vector[ks_PendingFlush]& pending) noexcept nogil
    cdef void _evict_one(self, ks_NamedCache* nc, vector[ks_FlushBatch]& out,
                         vector[ks_PendingFlush]& pending) noexcept nogil
    cdef void _evict_while_over(self, ks_NamedCache* nc, vector[ks_FlushBatch]& out,
                                vector[ks_PendingFlush]& pending) noexcept nogil
    cdef void _drop_flushed_tombstones(self, vector[ks_FlushBatch]& batches) noexcept nogil
    cdef int _deliver(self, vector[ks_FlushBatch]& batches,
                      vector[ks_PendingFlush]& pending) except -1
    cdef object _unknown(self, str namespace)
    cdef vector[string] _sorted_names(self)
    cdef int _put(self, str namespace, bytes key, object value, int64_t timestamp,
                  bool dirty, bool only_if_absent) except -2
    cdef int _flush_one(self, const string& name, object namespace) except -1
    cdef int64_t _locked_read(self, int which) noexcept
    cdef int64_t _namespace_stat(self, str namespace, bool in_bytes) except -2
