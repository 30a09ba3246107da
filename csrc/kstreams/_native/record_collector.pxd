# C-level interface of kstreams._native.record_collector.
#
# Locks: each output partition has its own mutex (_PartitionBuffer.mu), a leaf in the lock order.
# No thread blocks on it while holding the GIL (a try_lock first, else a wait with the GIL
# released); while it is held, batch byte copies run without the GIL and only C structures and the
# partition's header list are touched (never Python callbacks).
# RecordCollector._parts and _by_topic (dicts) are only read or changed with the GIL held.

from libc.stdint cimport int32_t, int64_t, uint32_t
from libcpp.atomic cimport atomic
from libcpp.mutex cimport mutex
from libcpp.vector cimport vector

from kstreams._native.record_batch cimport RecordBatch


cdef struct CollectedEntry:
    int64_t pos         # start of key+value bytes in the partition's arena
    int32_t klen        # -1 = None
    int32_t vlen        # -1 = None
    uint32_t khash      # murmur2 of the key (set on changelog partitions only)
    int64_t ts
    Py_ssize_t hidx     # index into the partition's header list, or -1
    bint alive          # False once a newer record for the key superseded it (changelogs)


cdef class _PartitionBuffer:
    cdef mutex mu
    cdef char* arena                            # malloc'd key+value bytes, guarded by mu
    cdef size_t arena_len                       # guarded by mu
    cdef size_t arena_cap                       # guarded by mu
    cdef vector[CollectedEntry] entries         # guarded by mu
    # Changelog key index: open addressing with linear probing over `slots` (a power of two in
    # size); a slot holds 1 + the index of the key's newest entry, 0 when empty. Keys are
    # compared in the arena, so the index holds no copies of them. Guarded by mu.
    cdef size_t* slots
    cdef size_t nslots
    cdef size_t nkeys
    cdef list headers                           # guarded by mu (touched with the GIL held)
    cdef Py_ssize_t live                        # live entries, guarded by mu
    cdef Py_ssize_t live_bytes                  # key+value bytes of live entries, guarded by mu
    cdef Py_ssize_t suppressed                  # entries ever superseded, guarded by mu
    cdef bint changelog                         # guarded by mu
    cdef readonly str topic
    cdef readonly int32_t partition


cdef class RecordCollector:
    cdef dict _parts                # (topic, partition) -> _PartitionBuffer; GIL only
    cdef dict _by_topic             # topic -> list of its _PartitionBuffers by partition; GIL only
    cdef atomic[int64_t] _len
    cdef atomic[int64_t] _bytes
    cdef atomic[int64_t] _suppressed
    cdef atomic[int64_t] _sent

    cdef _PartitionBuffer _buffer(self, str topic, int32_t partition)
    cdef int _supersede(self, _PartitionBuffer pb, const char* key, Py_ssize_t klen,
                        size_t idx) except -1 nogil
    cdef int _append(self, _PartitionBuffer pb, const char* key, Py_ssize_t klen,
                     const char* value, Py_ssize_t vlen, int64_t ts) except -1 nogil
    cdef void _compact_if_due(self, _PartitionBuffer pb) noexcept nogil
    cdef void _publish(self, _PartitionBuffer pb, Py_ssize_t live0, Py_ssize_t bytes0,
                       Py_ssize_t suppressed0, Py_ssize_t sent) noexcept nogil
    cdef int c_send(self, str topic, int32_t partition, const char* key, Py_ssize_t klen,
                    const char* value, Py_ssize_t vlen, int64_t ts, object headers) except -1
    cdef int c_send_bytes(self, str topic, int32_t partition, object key, object value,
                          int64_t ts, object headers) except -1
    cdef int c_send_batch(self, str topic, int32_t partition, RecordBatch batch) except -1
    cdef int c_send_batch_timestamped(self, str topic, int32_t partition, RecordBatch batch) except -1
    cdef int _send_batch(self, str topic, int32_t partition, RecordBatch batch,
                         bint split_timestamps) except -1
