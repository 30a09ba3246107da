# cython: language_level=3
"""C-level layout of the record cache (see record_cache.pyx for the semantics).

The entry and namespace records are plain C++ structs so their members get default initialisers
(Cython-defined classes cannot have constructors in a .pxd); all logic lives in the .pyx.
"""

from cpython.ref cimport PyObject
from libc.stdint cimport int64_t, uint64_t
from libcpp cimport bool
from libcpp.mutex cimport mutex
from libcpp.string cimport string
from libcpp.string_view cimport string_view
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector


cdef extern from * nogil:
    """
    #include <map>
    #include <memory>
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

    /* A namespace's index: key -> entry, open addressing with linear probing over a power-of-two
       table of (hash, entry) slots, at most 3/4 full. A lookup usually reads one slot and the
       entry's key; std::unordered_map read a bucket, the node before the key's, its node and the
       key, and divided by a prime for every node it passed (a quarter of a cached aggregation's
       time went there). The keys are the entries' own `key`s: an entry never moves.

       Range and prefix reads need key order, which a hash table lacks; scanning every entry for
       them made a session store's reads cost time proportional to the cache (a session lookup per
       record: 1.7 ms a record with a 10 MB cache). So the index also keeps trees in key order,
       each built at the namespace's first read that needs it and kept from then on: a store read
       only by key (counts, sums) never pays for one. Byte order serves key-value ranges and
       prefixes. Window and session stores read one key's entries (the key, then fixed-size time
       suffixes), and in byte order the entries of longer keys that begin with the same bytes lie
       among them ("user-1"'s range holds every "user-10".."user-19"'s); ordered by size first,
       one key's entries are contiguous. */
    struct ks_SizeThenBytes {
        bool operator()(std::string_view a, std::string_view b) const {
            return a.size() != b.size() ? a.size() < b.size() : a < b;
        }
    };

    struct ks_IndexSlot {
        size_t hash;
        ks_CacheEntry* entry;
    };

    class ks_CacheIndex {
      public:
        /* The entry whose key is `key`, or nullptr. */
        ks_CacheEntry* get(std::string_view key) const {
            if (size_ == 0) return nullptr;
            const size_t h = std::hash<std::string_view>{}(key);
            for (size_t i = h & mask_;; i = (i + 1) & mask_) {
                const ks_IndexSlot& s = slots_[i];
                if (s.entry == nullptr) return nullptr;
                if (s.hash == h && std::string_view(s.entry->key) == key) return s.entry;
            }
        }

        /* Index `e` under its key (whose entry must not be indexed yet). */
        void insert(ks_CacheEntry* e) {
            if ((size_ + 1) * 4 > slots_.size() * 3) grow();
            place(std::hash<std::string_view>{}(std::string_view(e->key)), e);
            ++size_;
            const std::string_view key(e->key);
            if (bytes_) bytes_->emplace(key, e);
            if (sized_) sized_->emplace(key, e);
        }

        /* Append the entries with lo <= key <= hi (a null bound: unbounded) in ascending byte order
           (std::string_view compares as memcmp does); with key_size >= 0, only keys that long. */
        void range(const std::string* lo, const std::string* hi, long key_size,
                   std::vector<ks_CacheEntry*>& out) {
            if (lo && hi && *hi < *lo) return;
            if (key_size >= 0 && lo && hi && lo->size() == (size_t)key_size &&
                hi->size() == (size_t)key_size) {
                /* both bounds that long: the keys between them in size order are exactly those */
                const SizedOrder& order = built(sized_);
                auto end = order.upper_bound(std::string_view(*hi));
                for (auto it = order.lower_bound(std::string_view(*lo)); it != end; ++it)
                    out.push_back(it->second);
                return;
            }
            const BytesOrder& order = built(bytes_);
            auto it = lo ? order.lower_bound(std::string_view(*lo)) : order.begin();
            auto end = hi ? order.upper_bound(std::string_view(*hi)) : order.end();
            for (; it != end; ++it)
                if (key_size < 0 || it->first.size() == (size_t)key_size) out.push_back(it->second);
        }

        /* Append the entries whose key begins with `prefix`, in ascending byte order. */
        void prefixed(std::string_view prefix, std::vector<ks_CacheEntry*>& out) {
            const BytesOrder& order = built(bytes_);
            for (auto it = order.lower_bound(prefix); it != order.end(); ++it) {
                if (it->first.substr(0, prefix.size()) != prefix) break;
                out.push_back(it->second);
            }
        }

        /* Drop the entry indexed under `key`, if any. The slots after it move back into the gap
           (backward-shift deletion), so lookups never need tombstones. */
        void erase(std::string_view key) {
            if (size_ == 0) return;
            const size_t h = std::hash<std::string_view>{}(key);
            size_t i = h & mask_;
            for (;; i = (i + 1) & mask_) {
                const ks_IndexSlot& s = slots_[i];
                if (s.entry == nullptr) return;
                if (s.hash == h && std::string_view(s.entry->key) == key) break;
            }
            for (size_t j = (i + 1) & mask_; slots_[j].entry != nullptr; j = (j + 1) & mask_) {
                const size_t home = slots_[j].hash & mask_;
                /* slot j may move back to i unless its home lies cyclically in (i, j] */
                const bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
                if (!stays) {
                    slots_[i] = slots_[j];
                    i = j;
                }
            }
            slots_[i] = ks_IndexSlot{0, nullptr};
            --size_;
            if (bytes_) bytes_->erase(key);
            if (sized_) sized_->erase(key);
        }

        size_t size() const { return size_; }

      private:
        using BytesOrder = std::map<std::string_view, ks_CacheEntry*>;
        using SizedOrder = std::map<std::string_view, ks_CacheEntry*, ks_SizeThenBytes>;

        /* The tree, built from the hash table if this is its first use. */
        template <class Tree>
        const Tree& built(std::unique_ptr<Tree>& tree) {
            if (!tree) {
                tree = std::make_unique<Tree>();
                for (const ks_IndexSlot& s : slots_)
                    if (s.entry != nullptr) tree->emplace(std::string_view(s.entry->key), s.entry);
            }
            return *tree;
        }

        void place(size_t h, ks_CacheEntry* e) {
            size_t i = h & mask_;
            while (slots_[i].entry != nullptr) i = (i + 1) & mask_;
            slots_[i] = ks_IndexSlot{h, e};
        }

        void grow() {
            std::vector<ks_IndexSlot> old;
            old.swap(slots_);
            slots_.assign(old.empty() ? 16 : old.size() * 2, ks_IndexSlot{0, nullptr});
            mask_ = slots_.size() - 1;
            for (const ks_IndexSlot& s : old)
                if (s.entry != nullptr) place(s.hash, s.entry);
        }

        std::vector<ks_IndexSlot> slots_;
        size_t size_ = 0;
        size_t mask_ = 0;
        std::unique_ptr<BytesOrder> bytes_;  /* null until the first read in byte order */
        std::unique_ptr<SizedOrder> sized_;  /* null until the first read of one key's suffixes */
    };

    /* One named cache ("<task>-<store>"). The listener pointer travels with the namespace when it
       moves to another cache. */
    struct ks_NamedCache {
        std::string name;
        ks_CacheIndex index;
        ks_CacheEntry* lru_head = nullptr;
        ks_CacheEntry* lru_tail = nullptr;
        ks_CacheEntry* dirty_head = nullptr;
        ks_CacheEntry* dirty_tail = nullptr;
        int64_t size_bytes = 0;
        int64_t dirty_count = 0;
        PyObject* listener = nullptr;  /* borrowed: the RecordCache's _listeners dict owns it */
    };

    /* An entry found by a read, to write again without a lookup while `generation` is still the
       cache's (no entry has left the cache since: the pointers are valid). */
    struct ks_EntryRef {
        ks_NamedCache* nc = nullptr;
        ks_CacheEntry* e = nullptr;
        uint64_t generation = 0;
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

    cppclass ks_CacheIndex:
        ks_CacheEntry* get(string_view key)
        void insert(ks_CacheEntry* e)
        void erase(string_view key)
        void range(const string* lo, const string* hi, long key_size, vector[ks_CacheEntry*]& out)
        void prefixed(string_view prefix, vector[ks_CacheEntry*]& out)
        size_t size()

    cppclass ks_NamedCache:
        string name
        ks_CacheIndex index
        ks_CacheEntry* lru_head
        ks_CacheEntry* lru_tail
        ks_CacheEntry* dirty_head
        ks_CacheEntry* dirty_tail
        int64_t size_bytes
        int64_t dirty_count
        PyObject* listener

    cppclass ks_EntryRef:
        ks_NamedCache* nc
        ks_CacheEntry* e
        uint64_t generation

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
    # Counts entries and namespaces leaving this cache (an ks_EntryRef stays valid while it is
    # unchanged).
    cdef uint64_t _generation
    # Namespace name -> listener (GIL-protected). It owns the listeners (visible to the cyclic GC);
    # each C++ namespace borrows its pointer, swapped or dropped only under _mutex.
    cdef dict _listeners
    cdef object __weakref__

    cdef ks_NamedCache* _find(self, const string& name) noexcept nogil
    cdef ks_NamedCache* _find_view(self, string_view name) noexcept nogil
    cdef void _upsert(self, ks_NamedCache* nc, string_view key, const char* value, size_t value_size,
                      bool tombstone, int64_t timestamp, bool dirty) noexcept nogil
    cdef void _rewrite(self, ks_NamedCache* nc, ks_CacheEntry* e, const char* value, size_t value_size,
                       bool tombstone, int64_t timestamp, bool dirty) noexcept nogil
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
    cdef list _items(self, str namespace, const string* lo, const string* hi, const string_view* prefix,
                     Py_ssize_t key_size, bint touch, bint copy)
    cdef tuple _get(self, str namespace, bytes key)
    cdef object _get_fixed_ref(self, str namespace, const char* key, size_t key_size, char* out,
                               size_t size, ks_EntryRef* ref)
    cdef int _put(self, str namespace, bytes key, object value, int64_t timestamp,
                  bool dirty, bool only_if_absent) except -2
    cdef int _put_raw(self, str namespace, bytes key, const char* v, size_t v_size, bool tombstone,
                      int64_t timestamp, bool dirty, bool only_if_absent) except -2
    cdef int _put_raw_at(self, str namespace, const char* key, size_t key_size, const char* v,
                         size_t v_size, bool tombstone, int64_t timestamp, bool dirty,
                         bool only_if_absent) except -2
    cdef int _put_raw_ref(self, const ks_EntryRef* ref, str namespace, const char* key,
                          size_t key_size, const char* v, size_t v_size, int64_t timestamp) except -2
    cdef int _flush_one(self, const string& name, object namespace) except -1
    cdef int64_t _locked_read(self, int which) noexcept
    cdef int64_t _namespace_stat(self, str namespace, bool in_bytes) except -2
