# cython: language_level=3
"""Per-record reads and writes of a DSL key-value or window store, one call each.

A DSL aggregation reads and writes its store once per input record (per window, windowed). Through the store's layers
that is about six Python calls each way: the metered layer serializes key and value, the caching
layer finds the running thread's cache and the record's timestamp, the cache looks the entry up.
On a cache hit, which is most records, those calls were most of a record's time.
``CachedKeyValueAccess`` and ``CachedWindowAccess`` do what the layers do on that path in C: the key serialized by the built-in string serde (or
bytes taken as they are), the cache entry read or written directly, a timestamped long (a
count or a sum) decoded and encoded in place. Every other case calls the layers, which remain
the one definition of what a get and a put do: a cache miss, a deletion, another serde, no
cache, a cache the store has not registered with yet.

A store without a caching layer gets the same accessors in their direct form: the key and a
stamped long are made in C and read and written through the layer right below the metered one
(the change-logging layer: one call each way) instead of the metered layer's four or five. Over a
RocksDB store both are C throughout (``store_core``): the read, and the write with its changelog
record.

``StoreLock`` is a store's query lock (``threading.RLock``'s behaviour) that the accessors take
and release in C on every write, where an RLock cost two Python calls.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.pythread cimport (
    PY_LOCK_ACQUIRED,
    WAIT_LOCK,
    PyLockStatus,
    PyThread_acquire_lock,
    PyThread_allocate_lock,
    PyThread_free_lock,
    PyThread_get_thread_ident,
    PyThread_release_lock,
    PyThread_type_lock,
)
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_AsUTF8String
from libc.stdint cimport int64_t
from libc.string cimport memcpy
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

cdef extern from "pythread.h":
    PyLockStatus PyThread_acquire_lock_timed(PyThread_type_lock lock, long long microseconds,
                                             int intr_flag) nogil

from kstreams._native.per_record cimport AggregateAccess, AggregateStep, ContextRouting, RecordPosition
from kstreams._native.record_cache cimport RecordCache, ks_EntryRef
from kstreams._native.store_core cimport LoggedPut, LoggedWindowPoints, read_be64, window_key, write_be64
from kstreams._native.value_and_timestamp cimport ValueAndTimestamp

# The longest cache key an aggregation step builds on the stack (a window's: key and start).
cdef enum:
    _KEY_BUFFER = 256

__all__ = ["CachedKeyValueAccess", "CachedWindowAccess", "StoreLock"]


cdef inline double _monotonic() noexcept:
    cdef timespec now
    clock_gettime(CLOCK_MONOTONIC, &now)
    return now.tv_sec + now.tv_nsec / 1e9


cdef class StoreLock:
    """A reentrant lock, as ``threading.RLock``: the thread holding it may take it again and must
    release it as often; another thread waits (without the GIL) until it is free. The metered
    stores' ``query_lock``; C code takes it with ``take``/``give``, without Python calls.

    Every taker holds the GIL, so the lock's state (owner, count, waiters) is plain fields the
    GIL guards: a take or give nobody waits for is a few field writes. Only a thread that finds
    it held waits, on ``_wake``, a lock kept taken except while a give is signalling the
    waiters; the woken thread checks again, since a thread that never waited may have taken the
    lock first."""

    cdef PyThread_type_lock _wake
    cdef long _owner
    cdef Py_ssize_t _count
    cdef Py_ssize_t _waiting  # threads waiting on _wake
    cdef bint _signalled      # _wake released for the waiters, not yet taken by one

    def __cinit__(self):
        self._wake = PyThread_allocate_lock()
        if self._wake == NULL:
            raise MemoryError("could not allocate a lock")
        PyThread_acquire_lock(self._wake, WAIT_LOCK)
        self._owner = 0
        self._count = 0
        self._waiting = 0
        self._signalled = False

    def __dealloc__(self):
        if self._wake != NULL:
            if not self._signalled:
                PyThread_release_lock(self._wake)
            PyThread_free_lock(self._wake)

    cdef bint _take(self, long long timeout_us) except -1:
        """Take the lock; False when another thread holds it and ``timeout_us`` (-1: no limit)
        passed before it was free."""
        cdef long me = PyThread_get_thread_ident()
        if self._count > 0:
            if self._owner == me:
                self._count += 1
                return True
            if timeout_us == 0 or not self._wait_free(timeout_us):
                return False
        self._owner = me
        self._count = 1
        return True

    cdef bint _wait_free(self, long long timeout_us) except -1:
        """Wait with the GIL released until the lock is free (True) or ``timeout_us`` passed."""
        cdef PyLockStatus got
        cdef long long left = timeout_us
        cdef double deadline = _monotonic() + timeout_us / 1e6
        self._waiting += 1
        try:
            while self._count > 0:
                if timeout_us >= 0:
                    left = <long long>((deadline - _monotonic()) * 1e6)
                    if left <= 0:
                        return False
                with nogil:
                    got = PyThread_acquire_lock_timed(self._wake, left, 0)
                if got == PY_LOCK_ACQUIRED:
                    self._signalled = False
            return True
        finally:
            self._waiting -= 1

    cdef int take(self) except -1:
        self._take(-1)
        return 0

    cdef int give(self) except -1:
        if self._count == 0 or self._owner != PyThread_get_thread_ident():
            raise RuntimeError("cannot release un-acquired lock")
        self._count -= 1
        if self._count == 0:
            self._owner = 0
            if self._waiting > 0 and not self._signalled:
                self._signalled = True
                PyThread_release_lock(self._wake)
        return 0

    def acquire(self, bint blocking=True, double timeout=-1):
        """Take the lock (again, if this thread holds it); False when not blocking or when
        ``timeout`` seconds passed before it was free."""
        if not blocking:
            if timeout != -1:
                raise ValueError("can't specify a timeout for a non-blocking call")
            return self._take(0)
        if timeout < 0 and timeout != -1:
            raise ValueError("timeout value must be a non-negative number")
        return self._take(-1 if timeout == -1 else <long long>(timeout * 1e6))

    def release(self):
        """Release once; the lock is free when every take of the holder is released."""
        self.give()

    def __enter__(self):
        self._take(-1)
        return True

    def __exit__(self, exc_type, exc, tb):
        self.give()
        return False

    def __repr__(self):
        state = f"locked by {self._owner}, count={self._count}" if self._count else "unlocked"
        return f"<StoreLock {state}>"


cdef class _CachedAccess(AggregateAccess):
    """What both accessors share: the metered layer (``store``) whose results they give, the
    caching layer below it, and how to reach the running thread's cache; or, without a caching
    layer (``caching`` None), ``direct``: the layer right below the metered one, which stores the
    metered layer's bytes as they are (a change-logging layer), written directly and read
    directly or with ``direct_read`` (the same read one layer further down, where the direct
    layer's read only passes it on).

    Built once the store is open (it needs the caching layer's namespace). ``holder.record_cache``
    is the cache of the thread running the store's task (it changes when the task moves; a
    task's context holds the same as ``task_cache``) and
    ``context.record_context.timestamp`` the current record's timestamp, what the caching layer
    stamps entries with. ``string_keys``: the key serde is the built-in string serde;
    ``bytes_keys``: keys are stored as the bytes they are; ``stamped_longs``: values are
    ``ValueAndTimestamp`` of the built-in long serde, stored as 8-byte timestamp + 8-byte long;
    ``plain_longs``: values are ints of the built-in long serde (8 bytes), not timestamped.
    """

    cdef object _store
    cdef object _caching
    cdef object _holder
    cdef object _context
    cdef str _namespace
    cdef object _held  # the cache the namespace is known to be registered in (or None)
    cdef bint _string_keys
    cdef bint _bytes_keys
    cdef bint _stamped_longs
    cdef bint _plain_longs
    cdef StoreLock _lock  # the metered store's query lock, taken in C
    cdef ContextRouting _routing  # the context as a task's, read in C (None: another context)
    cdef dict _notes  # the caching layer's ``header_notes``: headers of dirty entries' last writes
    cdef object _direct_read  # without a cache: the direct layer's get (fetch)
    cdef object _direct_put  # and its put
    cdef LoggedPut _logged_put  # the direct key-value layer's put in C, where it has one
    cdef LoggedWindowPoints _logged_points  # the direct window layer's put and fetch in C, or None

    def __init__(self, store, caching, holder, context, str namespace not None, bint string_keys,
                 bint bytes_keys, bint stamped_longs, direct=None, direct_read=None,
                 bint plain_longs=False):
        if (caching is None) == (direct is None):
            raise ValueError("an accessor goes through a caching layer or, without one, a direct layer")
        self._store = store
        self._caching = caching
        self._holder = holder
        self._context = context
        self._namespace = namespace
        self._held = None
        self._string_keys = string_keys
        self._bytes_keys = bytes_keys
        self._stamped_longs = stamped_longs
        self._plain_longs = plain_longs
        self._lock = store.query_lock
        self._routing = context if isinstance(context, ContextRouting) else None
        self._notes = {} if caching is None else caching.header_notes
        if direct_read is None and direct is not None:
            direct_read = self._reader(direct)
        self._direct_read = direct_read
        self._direct_put = None if direct is None else direct.put
        logged_put = getattr(direct, "logged_put", None)
        self._logged_put = logged_put if isinstance(logged_put, LoggedPut) else None
        logged_points = getattr(direct, "logged_points", None)
        self._logged_points = logged_points if isinstance(logged_points, LoggedWindowPoints) else None

    cdef object _reader(self, object direct):
        """The direct layer's read of a key's (and window's) bytes."""
        raise TypeError("_CachedAccess is the base of CachedKeyValueAccess and CachedWindowAccess")

    cdef RecordCache _cache(self):
        """The running thread's cache with the namespace in it, or None (the layers then act)."""
        if self._caching is None:
            return None
        # a task's context holds its task's cache (``task_cache``), read without a lookup
        cache = self._routing.task_cache if self._routing is not None else self._holder.record_cache
        if cache is self._held and cache is not None:
            return <RecordCache>cache
        if type(cache) is not RecordCache:
            return None
        # A cache this store has not used yet: the caching layer registers the namespace in it.
        if self._caching.current_cache() is not cache:
            return None
        self._held = cache
        return <RecordCache>cache

    cdef object _key_bytes(self, object key):
        if self._string_keys and type(key) is str:
            return PyUnicode_AsUTF8String(key)
        if self._bytes_keys and type(key) is bytes:
            return key
        return self._store.raw_key(key)

    cdef object _decode(self, object data):
        """The metered layer's value of stored bytes (None: a cached deletion)."""
        cdef ValueAndTimestamp made
        if data is None:
            return None
        if self._stamped_longs and PyBytes_GET_SIZE(data) == 16:
            made = ValueAndTimestamp.__new__(ValueAndTimestamp)
            made.timestamp = read_be64(PyBytes_AS_STRING(data))
            made.value = read_be64(PyBytes_AS_STRING(data) + 8)
            return made
        if self._plain_longs and PyBytes_GET_SIZE(data) == 8:
            return read_be64(PyBytes_AS_STRING(data))
        return self._store._value(data)

    cdef object _encode(self, object value):
        """The bytes the metered layer stores for a value that is not None; None when it stores
        none (the layers then decide)."""
        cdef int overflow = 0
        cdef long long number
        if self._plain_longs and type(value) is int:
            number = PyLong_AsLongLongAndOverflow(value, &overflow)
            if not overflow:
                data = PyBytes_FromStringAndSize(NULL, 8)
                write_be64(PyBytes_AS_STRING(data), number)
                return data
        data = self._stamped_long(value) if self._stamped_longs else None
        return self._store._value_bytes(value) if data is None else data

    cdef object _stamped_long(self, object value):
        """The 16 stored bytes of a ValueAndTimestamp of two int64s, else None."""
        if type(value) is not ValueAndTimestamp:
            return None
        cdef ValueAndTimestamp stamped = <ValueAndTimestamp>value
        if type(stamped.value) is not int or type(stamped.timestamp) is not int:
            return None
        cdef int overflow = 0
        cdef long long number = PyLong_AsLongLongAndOverflow(stamped.value, &overflow)
        if overflow:
            return None
        cdef long long timestamp = PyLong_AsLongLongAndOverflow(stamped.timestamp, &overflow)
        if overflow:
            return None
        data = PyBytes_FromStringAndSize(NULL, 16)
        cdef char* p = PyBytes_AS_STRING(data)
        write_be64(p, timestamp)
        write_be64(p + 8, number)
        return data

    cdef tuple _updated(self, object key, object value, int64_t timestamp, object apply, object stored):
        """(new aggregate, old aggregate, new stamped value, its timestamp) of ``apply(key,
        value, old)`` over ``stored``: the timestamp is the larger of ``timestamp`` and the stored
        one's (Kafka's rule); the stamped value is None when the new aggregate is."""
        cdef int64_t stamp = timestamp
        cdef int64_t stored_stamp
        old = None
        if stored is not None:
            old = (<ValueAndTimestamp?>stored).value
            stored_stamp = (<ValueAndTimestamp>stored).timestamp
            if stored_stamp > stamp:
                stamp = stored_stamp
        return _applied(_call(apply, key, value, old), old, stamp)

    cdef Py_ssize_t _key_view(self, object key, int64_t window_start, char* buffer,
                              const char** out) except -2:
        """The cache key of ``key`` without a bytes object: its bytes are at ``out[0]`` (the
        key's own UTF-8 or bytes, or ``buffer``, _KEY_BUFFER long) and their count is returned;
        -1 when the key is of another kind or too long (the caller then makes the cache key)."""
        cdef const char* data
        cdef Py_ssize_t size
        if self._string_keys and type(key) is str:
            data = PyUnicode_AsUTF8AndSize(key, &size)
        elif self._bytes_keys and type(key) is bytes:
            data = PyBytes_AS_STRING(key)
            size = PyBytes_GET_SIZE(key)
        else:
            return -1
        return self._cache_key_view(data, size, window_start, buffer, out)

    cdef tuple _updated_fixed(self, object key, object value, int64_t timestamp, object apply,
                              char* fixed, bint* encoded, bint result):
        """``_updated`` over the stamped long whose 16 stored bytes are in ``fixed``. When the
        new aggregate is an int64 too its stored bytes replace those in ``fixed``, ``encoded`` is
        set, no ValueAndTimestamp is made and the result is ``_update``'s own: ``(new, old, new
        timestamp)``, or None without ``result``."""
        cdef int64_t stamp = read_be64(fixed)
        if timestamp > stamp:
            stamp = timestamp
        old = read_be64(fixed + 8)
        new = _call(apply, key, value, old)
        cdef int overflow = 0
        cdef long long number
        if type(new) is int:
            number = PyLong_AsLongLongAndOverflow(new, &overflow)
            if not overflow:
                write_be64(fixed, stamp)
                write_be64(fixed + 8, number)
                encoded[0] = True
                return (new, old, stamp) if result else None
        return _applied(new, old, stamp)

    cdef int _write(self, RecordCache cache, bytes cache_key, bytes data) except -1:
        """Put a dirty entry stamped with the current record's timestamp, under the store's
        query lock as the metered layer writes."""
        cdef ks_EntryRef unknown  # no entry found: the cache looks the key up
        return self._write_ref(cache, &unknown, PyBytes_AS_STRING(cache_key), PyBytes_GET_SIZE(cache_key),
                               PyBytes_AS_STRING(data), <size_t>PyBytes_GET_SIZE(data))

    cdef int _write_ref(self, RecordCache cache, const ks_EntryRef* ref, const char* cache_key,
                        Py_ssize_t key_size, const char* data, size_t size) except -1:
        """``_write`` of the ``size`` bytes at ``data`` under the ``key_size`` cache key bytes at
        ``cache_key``; the entry a read found (``ref``) is written without a second lookup. The
        entry is stamped with the current record's timestamp, and the caching layer remembers
        the record's headers as the entry's (``header_notes``), as its own ``_put`` does."""
        cdef object position = self._routing.record_context if self._routing is not None else None
        cdef int64_t timestamp
        cdef object headers
        if position is not None and isinstance(position, RecordPosition):
            timestamp = (<RecordPosition>position).timestamp
            headers = (<RecordPosition>position).headers
        else:
            position = self._context.record_context
            timestamp = position.timestamp
            headers = getattr(position, "headers", None)
        if headers is not None or self._notes:
            self._note_headers(cache_key, key_size, headers)
        self._lock.take()
        try:
            cache._put_raw_ref(ref, self._namespace, cache_key, <size_t>key_size, data, size, timestamp)
        finally:
            self._lock.give()
        return 0

    cdef int _note_headers(self, const char* cache_key, Py_ssize_t key_size, object headers) except -1:
        """Remember ``headers`` (when there are any) as those of the entry at ``cache_key``, else
        forget any remembered for it."""
        if headers:
            self._notes[PyBytes_FromStringAndSize(cache_key, key_size)] = headers
        elif self._notes:
            self._notes.pop(PyBytes_FromStringAndSize(cache_key, key_size), None)
        return 0

    # What a key-value and a window store do differently; ``window_start`` is ignored by the
    # key-value accessor.
    cdef bytes _cache_key(self, bytes key_bytes, int64_t window_start):
        """The cache key of ``key_bytes`` (a window's: followed by the window start)."""
        raise TypeError("_CachedAccess is the base of CachedKeyValueAccess and CachedWindowAccess")

    cdef Py_ssize_t _cache_key_view(self, const char* key, Py_ssize_t size, int64_t window_start,
                                    char* buffer, const char** out) except -2:
        """``_cache_key`` of the ``size`` key bytes at ``key``, as ``_key_view`` returns it."""
        raise TypeError("_CachedAccess is the base of CachedKeyValueAccess and CachedWindowAccess")

    cdef object _below(self, RecordCache cache, bytes key_bytes, int64_t window_start):
        """The stored bytes of a key ``cache`` does not hold, read below the cache."""
        raise TypeError("_CachedAccess is the base of CachedKeyValueAccess and CachedWindowAccess")

    cdef object _layers_get(self, object key, int64_t window_start):
        """The metered layer's own read (``get``/``fetch``)."""
        raise TypeError("_CachedAccess is the base of CachedKeyValueAccess and CachedWindowAccess")

    cdef int _layers_put(self, object key, object value, int64_t window_start) except -1:
        """The metered layer's own write (``put``)."""
        raise TypeError("_CachedAccess is the base of CachedKeyValueAccess and CachedWindowAccess")

    cdef object _get(self, object key, int64_t window_start):
        """The metered layer's value for ``key`` (None when absent)."""
        cdef RecordCache cache = self._cache()
        if cache is None:
            if self._direct_read is not None:
                return self._decode(self._read_direct(self._key_bytes(key), window_start))
            return self._layers_get(key, window_start)
        key_bytes = self._key_bytes(key)
        hit = cache._get(self._namespace, self._cache_key(key_bytes, window_start))
        if hit is None:
            return self._store._value(self._below(cache, key_bytes, window_start))
        return self._decode((<tuple>hit)[0])

    cdef int _put(self, object key, object value, int64_t window_start) except -1:
        """Write ``value`` for ``key`` (None deletes), as the metered layer's ``put``."""
        cdef RecordCache cache = self._cache()
        if value is None or (cache is None and self._direct_put is None):
            return self._layers_put(key, value, window_start)
        key_bytes = self._key_bytes(key)
        data = self._encode(value)
        if data is None:
            return self._layers_put(key, value, window_start)
        if cache is None:
            return self._write_direct(key_bytes, data, window_start)
        return self._write(cache, self._cache_key(key_bytes, window_start), data)

    cdef tuple _update(self, object key, object value, int64_t timestamp, int64_t window_start,
                       object apply, bint result=True):
        """One aggregation step (see ``CachedKeyValueAccess.update``)."""
        cdef RecordCache cache = self._cache()
        if cache is None:
            if self._direct_read is not None:
                return self._update_direct(key, value, timestamp, window_start, apply, result)
            stored = self._layers_get(key, window_start)
            new, old, made, stamp = self._updated(key, value, timestamp, apply, stored)
            self._layers_put(key, made, window_start)
            return new, old, stamp
        cdef char fixed[16]
        cdef bint encoded = False
        # The cache key as a view of the key's own bytes (or of ``buffer``) where it can be: no
        # bytes object is made on a cache hit, the every-record case.
        cdef char buffer[_KEY_BUFFER]
        cdef ks_EntryRef ref
        cdef const char* view = NULL
        cdef Py_ssize_t view_size = self._key_view(key, window_start, buffer, &view)
        key_bytes = None
        cache_key = None
        if view_size < 0:
            key_bytes = self._key_bytes(key)
            cache_key = self._cache_key(key_bytes, window_start)
            view = PyBytes_AS_STRING(cache_key)
            view_size = PyBytes_GET_SIZE(cache_key)
        if self._stamped_longs:
            hit = cache._get_fixed_ref(self._namespace, view, <size_t>view_size, fixed, 16, &ref)
        else:
            hit = cache._get_fixed_ref(self._namespace, view, <size_t>view_size, NULL, 0, &ref)
        if hit is True:
            fixed_result = self._updated_fixed(key, value, timestamp, apply, fixed, &encoded, result)
            if encoded:
                self._write_ref(cache, &ref, view, view_size, fixed, 16)
                return fixed_result
            new, old, made, stamp = fixed_result
        else:
            if hit is None:
                if key_bytes is None:
                    key_bytes = self._key_bytes(key)
                stored = self._store._value(self._below(cache, key_bytes, window_start))
            else:
                stored = self._decode((<tuple>hit)[0])
            new, old, made, stamp = self._updated(key, value, timestamp, apply, stored)
        data = None if made is None else self._encode(made)
        if data is None:
            self._layers_put(key, made, window_start)
        else:
            self._write_ref(cache, &ref, view, view_size, PyBytes_AS_STRING(data),
                            <size_t>PyBytes_GET_SIZE(data))
        return new, old, stamp

    cdef tuple _update_direct(self, object key, object value, int64_t timestamp, int64_t window_start,
                              object apply, bint result):
        """``_update`` without a cache: the stored bytes read from and written to the direct
        layer; a stamped long is aggregated in place, without a ValueAndTimestamp."""
        cdef char fixed[16]
        cdef bint encoded = False
        key_bytes = self._key_bytes(key)
        data = self._read_direct(key_bytes, window_start)
        if self._stamped_longs and data is not None and PyBytes_GET_SIZE(data) == 16:
            memcpy(fixed, PyBytes_AS_STRING(data), 16)
            fixed_result = self._updated_fixed(key, value, timestamp, apply, fixed, &encoded, result)
            if encoded:
                self._write_direct(key_bytes, PyBytes_FromStringAndSize(fixed, 16), window_start)
                return fixed_result
            new, old, made, stamp = fixed_result
        else:
            new, old, made, stamp = self._updated(key, value, timestamp, apply, self._decode(data))
        out = None if made is None else self._encode(made)
        if out is None:
            self._layers_put(key, made, window_start)
        else:
            self._write_direct(key_bytes, out, window_start)
        return new, old, stamp

    cdef object _read_direct(self, bytes key_bytes, int64_t window_start):
        """The direct layer's stored bytes for a key (and window), or None."""
        raise TypeError("_CachedAccess is the base of CachedKeyValueAccess and CachedWindowAccess")

    cdef int _write_direct(self, bytes key_bytes, bytes data, int64_t window_start) except -1:
        """Put bytes into the direct layer under the store's query lock, as the metered layer's
        ``put`` does."""
        raise TypeError("_CachedAccess is the base of CachedKeyValueAccess and CachedWindowAccess")


cdef class CachedKeyValueAccess(_CachedAccess):
    """``get(key)`` and ``put(key, value)`` of a metered key-value store whose next layer is a
    caching layer (or a change-logging one: the direct form), with the results of the metered
    layer's own ``get`` and ``put``."""

    def get(self, key):
        """The store's value for ``key`` (None when absent), as the metered layer's ``get``."""
        return self._get(key, 0)

    def put(self, key, value):
        """Write ``value`` for ``key`` (None deletes), as the metered layer's ``put``."""
        self._put(key, value, 0)

    def update(self, key, value, int64_t timestamp, apply):
        """One aggregation step: read ``key``'s stamped aggregate, compute ``apply(key, value,
        old)``, write it stamped with the larger of ``timestamp`` and the old one's (None
        deletes) and return ``(new, old, new timestamp)``. The same reads and writes as ``get``
        then ``put``, with the key serialized and the cache found once."""
        return self._update(key, value, timestamp, 0, apply)

    cdef bytes _cache_key(self, bytes key_bytes, int64_t window_start):
        return key_bytes

    cdef Py_ssize_t _cache_key_view(self, const char* key, Py_ssize_t size, int64_t window_start,
                                    char* buffer, const char** out) except -2:
        out[0] = key
        return size

    cdef object _below(self, RecordCache cache, bytes key_bytes, int64_t window_start):
        return self._caching.read_through(cache, key_bytes)

    cdef object _layers_get(self, object key, int64_t window_start):
        return type(self._store).get(self._store, key)

    cdef int _layers_put(self, object key, object value, int64_t window_start) except -1:
        type(self._store).put(self._store, key, value)
        return 0

    cdef object _reader(self, object direct):
        return direct.get

    cdef object _read_direct(self, bytes key_bytes, int64_t window_start):
        return self._direct_read(key_bytes)

    cdef int _write_direct(self, bytes key_bytes, bytes data, int64_t window_start) except -1:
        self._lock.take()
        try:
            if self._logged_put is not None:
                self._logged_put._put(key_bytes, data)
            else:
                self._direct_put(key_bytes, data)
        finally:
            self._lock.give()
        return 0


cdef class CachedWindowAccess(_CachedAccess):
    """``fetch(key, window_start)`` and ``put(key, value, window_start)`` of a metered window
    store whose next layer is a caching layer, with the results of the metered layer's own."""

    def fetch(self, key, int64_t window_start):
        """The store's value for ``key`` in the window starting at ``window_start`` (None when
        absent), as the metered layer's ``fetch``."""
        return self._get(key, window_start)

    def put(self, key, value, int64_t window_start):
        """Write ``value`` for ``key`` in the window starting at ``window_start`` (None deletes),
        as the metered layer's ``put``."""
        self._put(key, value, window_start)

    def update(self, key, value, int64_t timestamp, int64_t window_start, apply):
        """One aggregation step in the window starting at ``window_start``: as
        ``CachedKeyValueAccess.update``, with the window's ``fetch`` and ``put``."""
        return self._update(key, value, timestamp, window_start, apply)

    cdef bytes _cache_key(self, bytes key_bytes, int64_t window_start):
        return window_key(key_bytes, window_start)

    cdef Py_ssize_t _cache_key_view(self, const char* key, Py_ssize_t size, int64_t window_start,
                                    char* buffer, const char** out) except -2:
        if size + 8 > _KEY_BUFFER:
            return -1
        memcpy(buffer, key, size)
        write_be64(buffer + size, window_start)
        out[0] = buffer
        return size + 8

    cdef object _below(self, RecordCache cache, bytes key_bytes, int64_t window_start):
        # A window the cache does not hold is read below it, without filling the cache.
        return self._caching.wrapped.fetch(key_bytes, window_start)

    cdef object _layers_get(self, object key, int64_t window_start):
        return type(self._store).fetch(self._store, key, window_start)

    cdef int _layers_put(self, object key, object value, int64_t window_start) except -1:
        type(self._store).put(self._store, key, value, window_start)
        return 0

    cdef object _reader(self, object direct):
        return direct.fetch

    cdef object _read_direct(self, bytes key_bytes, int64_t window_start):
        if self._logged_points is not None:
            return self._logged_points._fetch(key_bytes, window_start)
        return self._direct_read(key_bytes, window_start)

    cdef int _write_direct(self, bytes key_bytes, bytes data, int64_t window_start) except -1:
        self._lock.take()
        try:
            if self._logged_points is not None:
                self._logged_points._put(key_bytes, data, window_start)
            else:
                self._direct_put(key_bytes, data, window_start)
        finally:
            self._lock.give()
        return 0


cdef inline object _call(object apply, object key, object value, object old):
    """``apply(key, value, old)``; an AggregateStep (the DSL's) is called in C."""
    if isinstance(apply, AggregateStep):
        return (<AggregateStep>apply).step(key, value, old)
    return apply(key, value, old)


cdef tuple _applied(object new, object old, object stamp):
    """``_updated``'s result: the stamped value is None when the new aggregate is."""
    if new is None:
        return (None, old, None, stamp)
    cdef ValueAndTimestamp made = ValueAndTimestamp.__new__(ValueAndTimestamp)
    made.value = new
    made.timestamp = stamp
    return (new, old, made, stamp)
