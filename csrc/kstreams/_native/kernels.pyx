# cython: language_level=3
"""Batch kernels of the compiled processors: whole-batch loops that run without the GIL.

Every kernel takes a RecordBatch (and, where it filters, returns indices or a new batch) and gives
exactly the result the per-record Python path would give, or reports that it cannot: a kernel
returns None (or an index >= 0 for ``validate``) when some record needs Python's behaviour (bytes
a serde rejects, a JSON number outside int64, an escaped JSON string, a sum that overflows the
store's serde, ...). The caller then runs that batch through the per-record path, so a rare
record costs speed, never correctness. Kernels have no side effects until they succeed.

Column encodings are the built-in serdes (kernels.pxd ``Encoding``); JSON columns hold JSON text.
Sources by role, included into this one extension module (so the kernels share inline C helpers
without cross-module cimports): kernels_json.pxi (JSON scanning), kernels_fields.pxi (top-level
fields captured by validation), kernels_codec.pxi (numbers and validation), kernels_predicate.pxi
(compiled predicates), this file (building batches: take, project, convert, split by partition),
kernels_aggregate.pxi (aggregation into the record cache), kernels_arrays.pxi (numpy callers),
kernels_window_keys.pxi (window store keys grouped by window start).

Lock discipline: ``aggregate`` holds the record cache's mutex (a leaf) only inside nogil blocks and
never while calling Python (store loads and flush listeners run after it is released).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from cython.operator cimport dereference as deref, preincrement as inc
from libc.stdint cimport INT32_MAX, INT32_MIN, INT64_MIN, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, strtod
from libc.string cimport memchr, memcmp, memcpy, memset
from libcpp.string cimport string
from libcpp.string_view cimport string_view
from libcpp.utility cimport pair
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

cimport numpy as cnp
import numpy as np

from kstreams._native.record_batch cimport RecordBatch, RecordBatchBuilder, c_murmur2
from kstreams._native.record_cache cimport (
    RecordCache, ks_CacheEntry, ks_FlushBatch, ks_NamedCache, ks_PendingFlush,
)

cnp.import_array()

cdef extern from * nogil:
    """
    static inline int ks_add_overflow(int64_t a, int64_t b, int64_t* out) {
        return __builtin_add_overflow(a, b, out);
    }
    """
    int ks_add_overflow(int64_t a, int64_t b, int64_t* out)

# Public constants (mirrored in kernels.pyi).
BYTES = ENC_BYTES
STRING = ENC_STRING
LONG = ENC_LONG
INT = ENC_INT
SHORT = ENC_SHORT
DOUBLE = ENC_DOUBLE
FLOAT = ENC_FLOAT
JSON = ENC_JSON

cdef enum:
    P_CMP = 0
    P_AND = 1
    P_OR = 2
    P_NOT = 3
    P_TRUE = 4

cdef enum:
    CMP_EQ = 0
    CMP_NE = 1
    CMP_LT = 2
    CMP_LE = 3
    CMP_GT = 4
    CMP_GE = 5
    CMP_IS_NULL = 6

# Value categories: how the predicate vocabulary compares values (kstreams/predicates.py).
cdef enum:
    C_NULL = 0
    C_BOOL = 1
    C_NUM = 2
    C_STR = 3
    C_BYTES = 4
    C_OTHER = 5

cdef enum:
    OP_COUNT = 0
    OP_SUM = 1
    OP_MIN = 2
    OP_MAX = 3
    OP_REDUCE = 4

COUNT = OP_COUNT
SUM = OP_SUM
MIN = OP_MIN
MAX = OP_MAX
REDUCE = OP_REDUCE
P_KINDS = {"cmp": P_CMP, "and": P_AND, "or": P_OR, "not": P_NOT, "true": P_TRUE}
CMP_OPS = {"eq": CMP_EQ, "ne": CMP_NE, "lt": CMP_LT, "le": CMP_LE, "gt": CMP_GT, "ge": CMP_GE,
           "is_null": CMP_IS_NULL}
CATEGORIES = {"null": C_NULL, "bool": C_BOOL, "num": C_NUM, "str": C_STR, "bytes": C_BYTES}

include "kernels_json.pxi"
include "kernels_fields.pxi"
include "kernels_codec.pxi"
include "kernels_predicate.pxi"

# ----------------------------------------------------------------------- building batches

cdef RecordBatch _with_headers(RecordBatch out, RecordBatch src, const int32_t* rows):
    """``out`` given the headers of ``src``'s records: record j of ``out`` is ``src``'s record
    ``rows[j]``, or record j when ``rows`` is NULL (then the two share src's header list, which
    nothing changes once a batch is built). Needs the GIL."""
    cdef Py_ssize_t j
    if src._headers is None:
        return out
    if rows == NULL:
        out._headers = src._headers
        out._hbase = src._hbase
    else:
        out._headers = [src._headers[src._hbase + rows[j]] for j in range(out.n)]
        out._hbase = 0
    return out

def carry_headers(RecordBatch out not None, RecordBatch src not None, rows=None):
    """``out`` with the headers of ``src``'s records: record j of ``out`` is record ``rows[j]``
    of ``src`` (an int32 array), or record j when ``rows`` is None. For batches built from
    columns a Python step computed from ``src``'s records."""
    cdef const int32_t[::1] picked
    cdef Py_ssize_t j
    if rows is None:
        if out.n != src.n:
            raise ValueError(f"{out.n} records cannot take the headers of {src.n}")
        return _with_headers(out, src, NULL)
    picked = rows
    if picked.shape[0] != out.n:
        raise ValueError(f"{out.n} records cannot take the headers of {picked.shape[0]}")
    for j in range(picked.shape[0]):
        if not 0 <= picked[j] < src.n:
            raise IndexError(f"record {picked[j]} of a batch of {src.n}")
    return _with_headers(out, src, &picked[0] if out.n else NULL)

def take(RecordBatch batch not None, const int32_t[::1] indices):
    """A new batch of the records at ``indices`` (in that order), with their headers and their
    captured fields (``validate``)."""
    cdef RecordBatchBuilder builder = RecordBatchBuilder()
    cdef Py_ssize_t j, i, m = indices.shape[0]
    cdef FieldIndex index = _index_of(batch)
    cdef RecordBatch out
    with nogil:
        builder.reserve(m, 0)
        for j in range(m):
            i = indices[j]
            builder.append(batch.key_ptr(i), batch.key_len(i), batch.value_ptr(i),
                           batch.value_len(i), batch.ts(i), batch.part(i), batch.off(i))
    out = _with_headers(builder.finish(), batch, &indices[0] if m else NULL)
    if index is not None:
        out._fields = index.taken(indices)  # the same columns: their fields stay where they were
    return out

def project(RecordBatch batch not None, int src_side, str field, int dst_side, bint validated=False):
    """Replace the key (dst_side 0) or value (dst_side 1) by the JSON text of a top-level field of
    the key (src_side 0) or value (src_side 1), JSON documents (``field`` None: the whole
    document). A missing field, a non-object document or JSON null become None. None: some
    record needs the Python path. Records keep their headers. ``validated``: the documents are
    known to be valid JSON (``validate`` passed the batch), so a field is found without parsing
    the rest; a field the batch's index holds (``validate``'s ``fields``) is not looked for."""
    cdef RecordBatchBuilder builder = RecordBatchBuilder()
    cdef bytes fb = field.encode("utf-8") if field is not None else b""
    cdef const char* f = PyBytes_AS_STRING(fb) if field is not None else NULL
    cdef Py_ssize_t flen = PyBytes_GET_SIZE(fb)
    cdef Py_ssize_t i, n, tn
    cdef const char* p
    cdef const char* tp
    cdef JTok tok
    cdef int failed = 0
    cdef FieldIndex index = _index_of(batch)
    cdef int slot = index.slot(src_side, fb) if index is not None and f != NULL else -1
    with nogil:
        builder.reserve(batch.n, batch.c_nbytes())
        for i in range(batch.n):
            if src_side == 0:
                p = batch.key_ptr(i)
                n = batch.key_len(i)
            else:
                p = batch.value_ptr(i)
                n = batch.value_len(i)
            tp = NULL
            tn = -1
            if n >= 0:
                if slot >= 0:
                    if _captured(index, i, slot, p, &tok) < 0:
                        failed = 1
                        break
                elif validated and f != NULL:
                    if j_field_of_valid(p, n, f, flen, &tok) < 0:
                        failed = 1
                        break
                elif j_parse(p, n, f, flen, &tok, NULL) < 0:
                    failed = 1
                    break
                if tok.type != T_NONE and tok.type != T_NULL:
                    tp = tok.p - 1 if tok.type == T_STR else tok.p
                    tn = tok.n + 2 if tok.type == T_STR else tok.n
            if dst_side == 0:
                builder.append(tp, tn, batch.value_ptr(i), batch.value_len(i), batch.ts(i),
                               batch.part(i), batch.off(i))
            else:
                builder.append(batch.key_ptr(i), batch.key_len(i), tp, tn, batch.ts(i),
                               batch.part(i), batch.off(i))
    if failed:
        return None
    return _with_headers(builder.finish(), batch, NULL)

cdef int _convert_one(const char* p, Py_ssize_t n, int src, int dst, char* scratch,
                      string* text, const char** out_p, Py_ssize_t* out_n) noexcept nogil:
    """Bytes of one column value re-encoded from src to dst as the dst serde would write the
    value src's serde read; scratch holds 8 bytes for numbers. -1: needs Python."""
    cdef JTok tok
    cdef int canonical = 0
    out_p[0] = p
    out_n[0] = n
    if n < 0:
        return 0
    if src == dst and src != ENC_JSON:
        return 0
    if src != ENC_JSON:
        return -1
    if j_parse(p, n, NULL, 0, &tok, &canonical) < 0:
        return -1
    if tok.type == T_NULL:
        out_n[0] = -1
        return 0
    if dst == ENC_JSON:
        return 0 if canonical else -1
    if dst == ENC_STRING:
        if tok.type != T_STR:
            return -1
        out_p[0] = tok.p
        out_n[0] = tok.n
        if tok.escaped:
            if _unescape(tok.p, tok.n, text[0]) < 0:
                return -1
            out_p[0] = text.data()
            out_n[0] = <Py_ssize_t>text.size()
        return 0
    if dst == ENC_LONG:
        if tok.type != T_INT or tok.big:
            return -1
        _put_be64(scratch, <uint64_t>tok.i)
        out_p[0] = scratch
        out_n[0] = 8
        return 0
    if dst == ENC_INT:
        if tok.type != T_INT or tok.big or tok.i < INT32_MIN or tok.i > INT32_MAX:
            return -1
        _put_be32(scratch, <uint32_t><int32_t>tok.i)
        out_p[0] = scratch
        out_n[0] = 4
        return 0
    if dst == ENC_DOUBLE:
        if tok.type == T_INT and not tok.big:
            _put_be64(scratch, _double_bits(<double>tok.i))
        elif tok.type == T_FLOAT:
            _put_be64(scratch, _double_bits(_parse_double(tok.p, tok.n)))
        else:
            return -1
        out_p[0] = scratch
        out_n[0] = 8
        return 0
    return -1

def convertible(int src, int dst):
    """Whether ``convert`` can ever re-encode from src to dst (else the boundary needs Python)."""
    return src == dst or (src == ENC_JSON and dst in (ENC_JSON, ENC_STRING, ENC_LONG, ENC_INT,
                                                       ENC_DOUBLE))

def convert(RecordBatch batch not None, int key_src, int key_dst, int value_src, int value_dst):
    """The batch with keys and values re-encoded for a sink's serializers (the same batch when
    nothing changes; records keep their headers), or None when some record needs the Python
    path."""
    cdef RecordBatchBuilder builder
    cdef Py_ssize_t i, kn, vn
    cdef const char* kp
    cdef const char* vp
    cdef char kscratch[8]
    cdef char vscratch[8]
    cdef string ktext, vtext
    cdef int failed = 0
    cdef int check_only = 0
    if (key_src == key_dst and key_src != ENC_JSON) and (value_src == value_dst and value_src != ENC_JSON):
        return batch
    builder = RecordBatchBuilder()
    with nogil:
        builder.reserve(batch.n, batch.c_nbytes())
        for i in range(batch.n):
            if _convert_one(batch.key_ptr(i), batch.key_len(i), key_src, key_dst, kscratch,
                            &ktext, &kp, &kn) < 0 or \
                    _convert_one(batch.value_ptr(i), batch.value_len(i), value_src, value_dst,
                                 vscratch, &vtext, &vp, &vn) < 0:
                failed = 1
                break
            builder.append(kp, kn, vp, vn, batch.ts(i), batch.part(i), batch.off(i))
    if failed:
        return None
    return _with_headers(builder.finish(), batch, NULL)

def split_partitions(RecordBatch batch not None, int num_partitions, int64_t round_robin):
    """Split a sink's serialized batch by output partition with Kafka's default partitioner
    (murmur2 of the key; null keys round robin from ``round_robin``). Returns
    ``([(partition, batch), ...], next_round_robin)``, each batch in input order, with its
    records' headers."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    cdef vector[int32_t] parts
    cdef vector[Py_ssize_t] counts
    cdef Py_ssize_t i, kl
    cdef int32_t p
    cdef int64_t rr = round_robin
    parts.resize(batch.n)
    counts.assign(num_partitions, 0)
    with nogil:
        for i in range(batch.n):
            kl = batch.key_len(i)
            if kl < 0:
                p = <int32_t>(rr % num_partitions)
                rr = p + 1
            else:
                p = (c_murmur2(batch.key_ptr(i), kl) & 0x7fffffff) % num_partitions
            parts[i] = p
            counts[p] += 1
    if num_partitions == 1 or batch.n == 0:
        return ([(0, batch)] if batch.n else []), rr
    cdef list out = []
    cdef RecordBatchBuilder builder
    cdef RecordBatch part
    cdef vector[int32_t] rows   # each part's records, to give them their headers
    cdef bint with_headers = batch._headers is not None
    cdef int32_t q
    for q in range(num_partitions):
        if counts[q] == 0:
            continue
        if counts[q] == batch.n:
            out.append((q, batch))
            break
        builder = RecordBatchBuilder()
        rows.clear()
        with nogil:
            builder.reserve(counts[q], 0)
            for i in range(batch.n):
                if parts[i] == q:
                    builder.append(batch.key_ptr(i), batch.key_len(i), batch.value_ptr(i),
                                   batch.value_len(i), batch.ts(i), q, batch.off(i))
                    if with_headers:
                        rows.push_back(<int32_t>i)
        part = _with_headers(builder.finish(), batch, rows.data())
        out.append((q, part))
    return out, rr

include "kernels_aggregate.pxi"
include "kernels_arrays.pxi"
include "kernels_window_keys.pxi"
