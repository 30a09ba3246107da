# cython: language_level=3
"""Batch kernels of the compiled processors: whole-batch loops that run without the GIL.

Every kernel takes a RecordBatch (and, where it filters, returns indices or a new batch) and gives
exactly the result the per-record Python path would give, or reports that it cannot: a kernel
returns None (or an index >= 0 for ``validate``) when some record needs Python's behaviour (bytes
a serde rejects, a JSON number outside int64, an escaped JSON string, a sum that overflows the
store's serde, ...). The caller then runs that batch through the per-record path, so a rare
record costs speed, never correctness. Kernels have no side effects until they succeed.

Column encodings are the built-in serdes (kernels.pxd ``Encoding``); JSON columns hold JSON text.
Lock discipline: ``aggregate`` holds the record cache's mutex (a leaf) only inside nogil blocks and
never while calling Python (store loads and flush listeners run after it is released).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cython.operator cimport dereference as deref, preincrement as inc
from libc.stdint cimport INT32_MAX, INT32_MIN, INT64_MIN, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport strtod
from libc.string cimport memcmp, memcpy
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

COUNT = OP_COUNT
SUM = OP_SUM
MIN = OP_MIN
MAX = OP_MAX
P_KINDS = {"cmp": P_CMP, "and": P_AND, "or": P_OR, "not": P_NOT, "true": P_TRUE}
CMP_OPS = {"eq": CMP_EQ, "ne": CMP_NE, "lt": CMP_LT, "le": CMP_LE, "gt": CMP_GT, "ge": CMP_GE,
           "is_null": CMP_IS_NULL}
CATEGORIES = {"null": C_NULL, "bool": C_BOOL, "num": C_NUM, "str": C_STR, "bytes": C_BYTES}

# --------------------------------------------------------------------------------------- JSON

cdef enum:
    T_NONE = 0      # no such field (or the document is not an object)
    T_NULL = 1
    T_TRUE = 2
    T_FALSE = 3
    T_INT = 4
    T_FLOAT = 5
    T_STR = 6
    T_OBJ = 7
    T_ARR = 8

cdef struct JTok:
    int type
    const char* p       # token start; strings: first byte after the opening quote
    Py_ssize_t n        # token length; strings: raw content length
    int escaped         # a string with backslash escapes
    int big             # an integer outside int64
    int64_t i

cdef struct JScan:
    const char* p
    const char* end
    int canonical       # json.dumps(compact, ensure_ascii=False) would write the same bytes

cdef enum:
    MAX_DEPTH = 64
    MAX_DUP_KEYS = 16

cdef inline int _is_ws(char c) noexcept nogil:
    return c == c' ' or c == c'\t' or c == c'\n' or c == c'\r'

cdef inline void _skip_ws(JScan* s) noexcept nogil:
    while s.p < s.end and _is_ws(s.p[0]):
        s.canonical = 0
        s.p += 1

cdef inline int _hex(char c) noexcept nogil:
    if c'0' <= c <= c'9':
        return c - c'0'
    if c'a' <= c <= c'f':
        return c - c'a' + 10
    if c'A' <= c <= c'F':
        return c - c'A' + 16   # >= 16 marks upper case (valid, not canonical)
    return -1

cdef Py_ssize_t _utf8_seq(const uint8_t* p, const uint8_t* end) noexcept nogil:
    """Length of the valid (strict) UTF-8 sequence at p, or 0 if invalid."""
    cdef uint8_t c = p[0]
    cdef Py_ssize_t avail = end - p
    if c < 0x80:
        return 1
    if 0xC2 <= c <= 0xDF:
        if avail >= 2 and (p[1] & 0xC0) == 0x80:
            return 2
        return 0
    if 0xE0 <= c <= 0xEF:
        if avail < 3 or (p[1] & 0xC0) != 0x80 or (p[2] & 0xC0) != 0x80:
            return 0
        if c == 0xE0 and p[1] < 0xA0:
            return 0
        if c == 0xED and p[1] >= 0xA0:
            return 0   # surrogates
        return 3
    if 0xF0 <= c <= 0xF4:
        if avail < 4 or (p[1] & 0xC0) != 0x80 or (p[2] & 0xC0) != 0x80 or (p[3] & 0xC0) != 0x80:
            return 0
        if c == 0xF0 and p[1] < 0x90:
            return 0
        if c == 0xF4 and p[1] >= 0x90:
            return 0
        return 4
    return 0

cdef int _utf8_valid(const char* data, Py_ssize_t n) noexcept nogil:
    cdef const uint8_t* p = <const uint8_t*>data
    cdef const uint8_t* end = p + n
    cdef Py_ssize_t k
    while p < end:
        if p[0] < 0x80:
            p += 1
            continue
        k = _utf8_seq(p, end)
        if k == 0:
            return 0
        p += k
    return 1

cdef int _j_string(JScan* s, JTok* tok) noexcept nogil:
    """At the opening quote. Fills tok (p/n = raw content); -1 when invalid."""
    cdef const char* start
    cdef char c
    cdef int h, code, j
    cdef Py_ssize_t k
    s.p += 1
    start = s.p
    tok.escaped = 0
    while s.p < s.end:
        c = s.p[0]
        if c == c'"':
            tok.type = T_STR
            tok.p = start
            tok.n = s.p - start
            s.p += 1
            return 0
        if c == c'\\':
            tok.escaped = 1
            if s.p + 1 >= s.end:
                return -1
            c = s.p[1]
            if c == c'u':
                if s.p + 6 > s.end:
                    return -1
                code = 0
                for j in range(4):
                    h = _hex(s.p[2 + j])
                    if h < 0:
                        return -1
                    if h >= 16:
                        s.canonical = 0
                        h -= 6
                    code = code * 16 + h
                if code >= 0x20 or code == 0x08 or code == 0x0c or code == 0x0a or code == 0x0d \
                        or code == 0x09:
                    s.canonical = 0
                s.p += 6
                continue
            if c == c'/':
                s.canonical = 0
            elif not (c == c'"' or c == c'\\' or c == c'b' or c == c'f' or c == c'n' or c == c'r'
                      or c == c't'):
                return -1
            s.p += 2
            continue
        if <uint8_t>c < 0x20:
            return -1   # json.loads is strict: raw control characters are invalid
        if <uint8_t>c >= 0x80:
            k = _utf8_seq(<const uint8_t*>s.p, <const uint8_t*>s.end)
            if k == 0:
                return -1
            s.p += k
            continue
        s.p += 1
    return -1

cdef int _j_number(JScan* s, JTok* tok) noexcept nogil:
    cdef const char* start = s.p
    cdef int neg = 0, is_int = 1
    cdef uint64_t acc = 0
    cdef uint64_t limit
    cdef int d
    tok.big = 0
    if s.p < s.end and s.p[0] == c'-':
        neg = 1
        s.p += 1
    if s.p >= s.end:
        return -1
    if s.p[0] == c'0':
        s.p += 1
    elif c'1' <= s.p[0] <= c'9':
        limit = <uint64_t>9223372036854775807ULL + <uint64_t>neg
        while s.p < s.end and c'0' <= s.p[0] <= c'9':
            d = s.p[0] - c'0'
            if acc > (limit - <uint64_t>d) // 10:
                tok.big = 1
            else:
                acc = acc * 10 + <uint64_t>d
            s.p += 1
    else:
        return -1   # NaN, Infinity: Python accepts them; leave them to Python
    if s.p < s.end and s.p[0] == c'.':
        is_int = 0
        s.p += 1
        if s.p >= s.end or not (c'0' <= s.p[0] <= c'9'):
            return -1
        while s.p < s.end and c'0' <= s.p[0] <= c'9':
            s.p += 1
    if s.p < s.end and (s.p[0] == c'e' or s.p[0] == c'E'):
        is_int = 0
        s.p += 1
        if s.p < s.end and (s.p[0] == c'+' or s.p[0] == c'-'):
            s.p += 1
        if s.p >= s.end or not (c'0' <= s.p[0] <= c'9'):
            return -1
        while s.p < s.end and c'0' <= s.p[0] <= c'9':
            s.p += 1
    tok.p = start
    tok.n = s.p - start
    if is_int:
        tok.type = T_INT
        if neg and acc == 0:
            s.canonical = 0   # -0 loads as 0
        if not tok.big:
            tok.i = -<int64_t>acc if neg else <int64_t>acc
    else:
        tok.type = T_FLOAT
        s.canonical = 0
    return 0

cdef int _j_value(JScan* s, JTok* tok, int depth, const char* field, Py_ssize_t flen,
                  JTok* found) noexcept nogil:
    """Parse one value; tok describes it. With a field (depth 0 object), found gets the last
    member of that name. -1 when invalid or beyond what the kernels handle."""
    cdef char c
    cdef JTok sub, key
    cdef const char* start
    cdef const char* keys_p[MAX_DUP_KEYS]
    cdef Py_ssize_t keys_n[MAX_DUP_KEYS]
    cdef int nkeys = 0, j
    if depth > MAX_DEPTH:
        return -1
    _skip_ws(s)
    if s.p >= s.end:
        return -1
    c = s.p[0]
    start = s.p
    if c == c'{':
        s.p += 1
        _skip_ws(s)
        if s.p < s.end and s.p[0] == c'}':
            s.p += 1
        else:
            while True:
                _skip_ws(s)
                if s.p >= s.end or s.p[0] != c'"':
                    return -1
                if _j_string(s, &key) < 0:
                    return -1
                if key.escaped:
                    s.canonical = 0
                    if field != NULL and depth == 0:
                        return -1   # an escaped name might spell the field
                if s.canonical:
                    if nkeys >= MAX_DUP_KEYS:
                        s.canonical = 0
                    else:
                        for j in range(nkeys):
                            if keys_n[j] == key.n and memcmp(keys_p[j], key.p, key.n) == 0:
                                s.canonical = 0   # json.loads keeps the last duplicate only
                                break
                        keys_p[nkeys] = key.p
                        keys_n[nkeys] = key.n
                        nkeys += 1
                _skip_ws(s)
                if s.p >= s.end or s.p[0] != c':':
                    return -1
                s.p += 1
                if _j_value(s, &sub, depth + 1, NULL, 0, NULL) < 0:
                    return -1
                if field != NULL and depth == 0 and key.n == flen and memcmp(key.p, field, flen) == 0:
                    found[0] = sub
                _skip_ws(s)
                if s.p >= s.end:
                    return -1
                if s.p[0] == c',':
                    s.p += 1
                    continue
                if s.p[0] == c'}':
                    s.p += 1
                    break
                return -1
        tok.type = T_OBJ
    elif c == c'[':
        s.p += 1
        _skip_ws(s)
        if s.p < s.end and s.p[0] == c']':
            s.p += 1
        else:
            while True:
                if _j_value(s, &sub, depth + 1, NULL, 0, NULL) < 0:
                    return -1
                _skip_ws(s)
                if s.p >= s.end:
                    return -1
                if s.p[0] == c',':
                    s.p += 1
                    continue
                if s.p[0] == c']':
                    s.p += 1
                    break
                return -1
        tok.type = T_ARR
    elif c == c'"':
        return _j_string(s, tok)
    elif c == c't':
        if s.end - s.p < 4 or memcmp(s.p, b"true", 4) != 0:
            return -1
        s.p += 4
        tok.type = T_TRUE
    elif c == c'f':
        if s.end - s.p < 5 or memcmp(s.p, b"false", 5) != 0:
            return -1
        s.p += 5
        tok.type = T_FALSE
    elif c == c'n':
        if s.end - s.p < 4 or memcmp(s.p, b"null", 4) != 0:
            return -1
        s.p += 4
        tok.type = T_NULL
    else:
        return _j_number(s, tok)
    tok.p = start
    tok.n = s.p - start
    return 0

cdef int j_parse(const char* p, Py_ssize_t n, const char* field, Py_ssize_t flen, JTok* out,
                 int* canonical) noexcept nogil:
    """Parse a whole JSON document. Without a field, out is the document's top-level token; with
    one, out is that top-level member (T_NONE when absent or not an object). -1: not handled."""
    cdef JScan s
    cdef JTok top
    s.p = p
    s.end = p + n
    s.canonical = 1
    out.type = T_NONE
    if _j_value(&s, &top, 0, field, flen, out if field != NULL else NULL) < 0:
        return -1
    _skip_ws(&s)
    if s.p != s.end:
        return -1
    if field == NULL:
        out[0] = top
    if canonical != NULL:
        canonical[0] = s.canonical
    return 0

# --------------------------------------------------------------------------------- decoding

cdef inline uint64_t _be64(const char* p) noexcept nogil:
    cdef const uint8_t* b = <const uint8_t*>p
    return ((<uint64_t>b[0] << 56) | (<uint64_t>b[1] << 48) | (<uint64_t>b[2] << 40) |
            (<uint64_t>b[3] << 32) | (<uint64_t>b[4] << 24) | (<uint64_t>b[5] << 16) |
            (<uint64_t>b[6] << 8) | <uint64_t>b[7])

cdef inline uint32_t _be32(const char* p) noexcept nogil:
    cdef const uint8_t* b = <const uint8_t*>p
    return (<uint32_t>b[0] << 24) | (<uint32_t>b[1] << 16) | (<uint32_t>b[2] << 8) | <uint32_t>b[3]

cdef inline void _put_be64(char* p, uint64_t v) noexcept nogil:
    cdef int j
    for j in range(8):
        p[j] = <char>((v >> (56 - 8 * j)) & 0xFF)

cdef inline void _put_be32(char* p, uint32_t v) noexcept nogil:
    cdef int j
    for j in range(4):
        p[j] = <char>((v >> (24 - 8 * j)) & 0xFF)

cdef inline double _as_double(uint64_t bits) noexcept nogil:
    cdef double d
    memcpy(&d, &bits, 8)
    return d

cdef inline uint64_t _double_bits(double d) noexcept nogil:
    cdef uint64_t bits
    memcpy(&bits, &d, 8)
    return bits

cdef inline float _as_float(uint32_t bits) noexcept nogil:
    cdef float f
    memcpy(&f, &bits, 4)
    return f

cdef int _valid(const char* p, Py_ssize_t n, int enc) noexcept nogil:
    """Would the serde of this encoding deserialize these bytes (n = -1: None, always fine)?"""
    cdef JTok tok
    if n < 0:
        return 1
    if enc == ENC_BYTES:
        return 1
    if enc == ENC_STRING:
        return _utf8_valid(p, n)
    if enc == ENC_LONG or enc == ENC_DOUBLE:
        return n == 8
    if enc == ENC_INT or enc == ENC_FLOAT:
        return n == 4
    if enc == ENC_SHORT:
        return n == 2
    if enc == ENC_JSON:
        return j_parse(p, n, NULL, 0, &tok, NULL) == 0
    return 0

def validate(RecordBatch batch not None, int key_enc, int value_enc):
    """Index of the first record whose key or value its serde would reject, or whose timestamp is
    negative; -1 when every record is fine."""
    cdef Py_ssize_t i, bad = -1
    with nogil:
        for i in range(batch.n):
            if batch.ts(i) < 0 or not _valid(batch.key_ptr(i), batch.key_len(i), key_enc) or \
                    not _valid(batch.value_ptr(i), batch.value_len(i), value_enc):
                bad = i
                break
    return bad

# ------------------------------------------------------------------------------ predicates

cdef struct Val:
    int cat
    int is_int
    int64_t i
    double d
    const char* s
    Py_ssize_t n

cdef void _put_utf8(string& out, uint32_t cp) noexcept nogil:
    if cp < 0x80:
        out.push_back(<char>cp)
    elif cp < 0x800:
        out.push_back(<char>(0xC0 | (cp >> 6)))
        out.push_back(<char>(0x80 | (cp & 0x3F)))
    elif cp < 0x10000:
        out.push_back(<char>(0xE0 | (cp >> 12)))
        out.push_back(<char>(0x80 | ((cp >> 6) & 0x3F)))
        out.push_back(<char>(0x80 | (cp & 0x3F)))
    else:
        out.push_back(<char>(0xF0 | (cp >> 18)))
        out.push_back(<char>(0x80 | ((cp >> 12) & 0x3F)))
        out.push_back(<char>(0x80 | ((cp >> 6) & 0x3F)))
        out.push_back(<char>(0x80 | (cp & 0x3F)))

cdef int _hex4(const char* p, uint32_t* out) noexcept nogil:
    cdef int j, h
    cdef uint32_t code = 0
    for j in range(4):
        h = _hex(p[j])
        if h < 0:
            return -1
        if h >= 16:
            h -= 6
        code = code * 16 + <uint32_t>h
    out[0] = code
    return 0

cdef int _unescape(const char* p, Py_ssize_t n, string& out) noexcept nogil:
    """The UTF-8 text of a (validated) JSON string's raw content, as json.loads reads it; -1 for
    a lone surrogate (Python keeps it; UTF-8 cannot hold it)."""
    cdef Py_ssize_t i = 0
    cdef uint32_t cp, low
    cdef char c
    out.clear()
    while i < n:
        c = p[i]
        if c != c'\\':
            out.push_back(c)
            i += 1
            continue
        c = p[i + 1]
        if c == c'u':
            if _hex4(p + i + 2, &cp) < 0:
                return -1
            i += 6
            if 0xD800 <= cp <= 0xDBFF:
                if i + 6 > n or p[i] != c'\\' or p[i + 1] != c'u' or _hex4(p + i + 2, &low) < 0 \
                        or not (0xDC00 <= low <= 0xDFFF):
                    return -1
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
                i += 6
            elif 0xDC00 <= cp <= 0xDFFF:
                return -1
            _put_utf8(out, cp)
            continue
        if c == c'b':
            out.push_back(c'\x08')
        elif c == c'f':
            out.push_back(c'\x0c')
        elif c == c'n':
            out.push_back(c'\n')
        elif c == c'r':
            out.push_back(c'\r')
        elif c == c't':
            out.push_back(c'\t')
        else:
            out.push_back(c)   # " \\ /
        i += 2
    return 0

cdef int _val_from_tok(JTok* tok, Val* v, string* scratch) noexcept nogil:
    cdef int t = tok.type
    if t == T_NONE or t == T_NULL:
        v.cat = C_NULL
    elif t == T_TRUE or t == T_FALSE:
        v.cat = C_BOOL
        v.i = 1 if t == T_TRUE else 0
    elif t == T_INT:
        if tok.big:
            return -1
        v.cat = C_NUM
        v.is_int = 1
        v.i = tok.i
    elif t == T_FLOAT:
        v.cat = C_NUM
        v.is_int = 0
        # strtod stops at the first byte after the number (a delimiter or the end of the text
        # follows every number we parsed; the arena is not NUL-terminated but always continues
        # with a non-number byte or ends at the record boundary, so parse a bounded copy).
        v.d = _parse_double(tok.p, tok.n)
    elif t == T_STR:
        v.cat = C_STR
        v.s = tok.p
        v.n = tok.n
        if tok.escaped:
            if scratch == NULL or _unescape(tok.p, tok.n, scratch[0]) < 0:
                return -1
            v.s = scratch.data()
            v.n = <Py_ssize_t>scratch.size()
    else:
        v.cat = C_OTHER
    return 0

cdef double _parse_double(const char* p, Py_ssize_t n) noexcept nogil:
    cdef char buf[64]
    if n >= 64:
        return _parse_double_long(p, n)
    memcpy(buf, p, n)
    buf[n] = 0
    return strtod(buf, NULL)

cdef double _parse_double_long(const char* p, Py_ssize_t n) noexcept nogil:
    cdef string s = string(p, n)
    return strtod(s.c_str(), NULL)

cdef int _decode(const char* p, Py_ssize_t n, int enc, const char* field, Py_ssize_t flen,
                 Val* v, string* scratch) noexcept nogil:
    cdef JTok tok
    v.is_int = 0
    if n < 0:
        v.cat = C_NULL
        return 0
    if enc == ENC_JSON:
        if j_parse(p, n, field, flen, &tok, NULL) < 0:
            return -1
        return _val_from_tok(&tok, v, scratch)
    if field != NULL:
        v.cat = C_NULL   # a field of a non-JSON value is None (never reached: compiler checks)
        return 0
    if enc == ENC_BYTES:
        v.cat = C_BYTES
        v.s = p
        v.n = n
    elif enc == ENC_STRING:
        v.cat = C_STR
        v.s = p
        v.n = n
    elif enc == ENC_LONG and n == 8:
        v.cat = C_NUM
        v.is_int = 1
        v.i = <int64_t>_be64(p)
    elif enc == ENC_INT and n == 4:
        v.cat = C_NUM
        v.is_int = 1
        v.i = <int32_t>_be32(p)
    elif enc == ENC_SHORT and n == 2:
        v.cat = C_NUM
        v.is_int = 1
        v.i = <int16_t>(((<uint8_t>p[0]) << 8) | <uint8_t>p[1])
    elif enc == ENC_DOUBLE and n == 8:
        v.cat = C_NUM
        v.d = _as_double(_be64(p))
    elif enc == ENC_FLOAT and n == 4:
        v.cat = C_NUM
        v.d = <double>_as_float(_be32(p))
    else:
        return -1
    return 0

cdef inline int _bytes_order(const char* a, Py_ssize_t an, const char* b, Py_ssize_t bn) noexcept nogil:
    cdef Py_ssize_t m = an if an < bn else bn
    cdef int r = memcmp(a, b, m) if m > 0 else 0
    if r != 0:
        return -1 if r < 0 else 1
    if an == bn:
        return 0
    return -1 if an < bn else 1

cdef int _compare(Val* a, PNode* node, const string* cs) noexcept nogil:
    """1/0: does ``a <cmp> constant`` hold under the vocabulary's rules."""
    cdef int op = node.cmp
    cdef int order
    cdef double x, y
    if op == CMP_IS_NULL:
        return a.cat == C_NULL
    if op == CMP_EQ or op == CMP_NE:
        order = 0
        if a.cat != node.ccat:
            order = 1
        elif a.cat == C_NULL:
            order = 0
        elif a.cat == C_BOOL:
            order = 0 if a.i == node.ci else 1
        elif a.cat == C_NUM:
            if a.is_int and node.c_is_int:
                order = 0 if a.i == node.ci else 1
            else:
                x = <double>a.i if a.is_int else a.d
                y = <double>node.ci if node.c_is_int else node.cd
                order = 0 if x == y else 1
        elif a.cat == C_STR or a.cat == C_BYTES:
            order = 0 if (a.n == <Py_ssize_t>cs.size() and
                          (a.n == 0 or memcmp(a.s, cs.data(), a.n) == 0)) else 1
        else:
            order = 1
        return (order == 0) if op == CMP_EQ else (order != 0)
    # ordering: only between numbers, between strings, between bytes
    if a.cat != node.ccat:
        return 0
    if a.cat == C_NUM:
        if a.is_int and node.c_is_int:
            order = 0 if a.i == node.ci else (-1 if a.i < node.ci else 1)
        else:
            x = <double>a.i if a.is_int else a.d
            y = <double>node.ci if node.c_is_int else node.cd
            if x != x or y != y:
                return 0   # NaN orders with nothing
            order = 0 if x == y else (-1 if x < y else 1)
    elif a.cat == C_STR or a.cat == C_BYTES:
        # UTF-8 byte order is code point order, which is how Python orders str
        order = _bytes_order(a.s, a.n, cs.data(), <Py_ssize_t>cs.size())
    else:
        return 0
    if op == CMP_LT:
        return order < 0
    if op == CMP_LE:
        return order <= 0
    if op == CMP_GT:
        return order > 0
    return order >= 0


cdef class Predicate:
    """A compiled predicate over a batch's keys and values.

    ``nodes``: tuples ``(kind, side, field, cmp, category, constant, a, b)`` of a flattened
    expression tree (kstreams/topology/compiled/predicates.py builds them); ``root`` indexes the
    node to evaluate; ``key_enc``/``value_enc`` are the encodings of the batch's columns.
    """

    def __init__(self, list nodes not None, int root, int key_enc, int value_enc):
        cdef PNode node
        self.nodes.clear()
        self.fields.clear()
        self.strings.clear()
        for kind, side, field, cmp, category, constant, a, b in nodes:
            node.kind = P_KINDS[kind]
            node.side = side
            node.has_field = field is not None
            node.cmp = CMP_OPS.get(cmp, CMP_EQ) if cmp is not None else CMP_EQ
            node.ccat = CATEGORIES[category] if category is not None else C_NULL
            node.c_is_int = 0
            node.ci = 0
            node.cd = 0.0
            node.a = a
            node.b = b
            cs = b""
            if node.ccat == C_BOOL:
                node.ci = 1 if constant else 0
            elif node.ccat == C_NUM:
                if type(constant) is int:
                    node.c_is_int = 1
                    node.ci = constant
                else:
                    node.cd = float(constant)
            elif node.ccat == C_STR:
                cs = constant.encode("utf-8")
            elif node.ccat == C_BYTES:
                cs = bytes(constant)
            self.nodes.push_back(node)
            self.fields.push_back(field.encode("utf-8") if field is not None else b"")
            self.strings.push_back(cs)
        if not 0 <= root < <int>self.nodes.size():
            raise ValueError(f"predicate root {root} is not one of its {self.nodes.size()} nodes")
        self.root = root
        self.key_enc = key_enc
        self.value_enc = value_enc

    cdef int _eval(self, RecordBatch batch, Py_ssize_t i, int k) noexcept nogil:
        """1 true, 0 false, -1 cannot decide without Python."""
        cdef PNode* node = &self.nodes[k]
        cdef int r
        cdef Val v
        cdef string scratch
        cdef const char* field = NULL
        if node.kind == P_TRUE:
            return 1
        if node.kind == P_NOT:
            r = self._eval(batch, i, node.a)
            return r if r < 0 else 1 - r
        if node.kind == P_AND or node.kind == P_OR:
            r = self._eval(batch, i, node.a)
            if r < 0:
                return r
            # Python's `and`/`or` short-circuit: the second side is not evaluated
            if (node.kind == P_AND and r == 0) or (node.kind == P_OR and r == 1):
                return r
            return self._eval(batch, i, node.b)
        if node.has_field:
            field = self.fields[k].data()
        if node.side == 0:
            r = _decode(batch.key_ptr(i), batch.key_len(i), self.key_enc, field,
                        <Py_ssize_t>self.fields[k].size(), &v, &scratch)
        else:
            r = _decode(batch.value_ptr(i), batch.value_len(i), self.value_enc, field,
                        <Py_ssize_t>self.fields[k].size(), &v, &scratch)
        if r < 0:
            return -1
        return _compare(&v, node, &self.strings[k])

    def select(self, RecordBatch batch not None):
        """int32 indices of the records the predicate holds for, or None when some record needs
        the Python path."""
        out = np.empty(batch.n, dtype=np.int32)
        cdef int32_t[::1] o = out
        cdef Py_ssize_t i, m = 0
        cdef int r = 0
        with nogil:
            for i in range(batch.n):
                r = self._eval(batch, i, self.root)
                if r < 0:
                    break
                if r:
                    o[m] = <int32_t>i
                    m += 1
        if r < 0:
            return None
        return out[:m]

# ----------------------------------------------------------------------- building batches

def take(RecordBatch batch not None, const int32_t[::1] indices):
    """A new batch of the records at ``indices`` (in that order). Headers are not carried: the
    compiled path runs only over batches without headers."""
    cdef RecordBatchBuilder builder = RecordBatchBuilder()
    cdef Py_ssize_t j, i, m = indices.shape[0]
    with nogil:
        builder.reserve(m, 0)
        for j in range(m):
            i = indices[j]
            builder.append(batch.key_ptr(i), batch.key_len(i), batch.value_ptr(i),
                           batch.value_len(i), batch.ts(i), batch.part(i), batch.off(i))
    return builder.finish()

def project(RecordBatch batch not None, int src_side, str field, int dst_side):
    """Replace the key (dst_side 0) or value (dst_side 1) by the JSON text of a top-level field of
    the key (src_side 0) or value (src_side 1), JSON documents (``field`` None: the whole
    document). A missing field, a non-object document or JSON null become None. None: some
    record needs the Python path."""
    cdef RecordBatchBuilder builder = RecordBatchBuilder()
    cdef bytes fb = field.encode("utf-8") if field is not None else b""
    cdef const char* f = PyBytes_AS_STRING(fb) if field is not None else NULL
    cdef Py_ssize_t flen = PyBytes_GET_SIZE(fb)
    cdef Py_ssize_t i, n, tn
    cdef const char* p
    cdef const char* tp
    cdef JTok tok
    cdef int failed = 0
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
                if j_parse(p, n, f, flen, &tok, NULL) < 0:
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
    return builder.finish()

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
    nothing changes), or None when some record needs the Python path."""
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
    return builder.finish()

def split_partitions(RecordBatch batch not None, int num_partitions, int64_t round_robin):
    """Split a sink's serialized batch by output partition with Kafka's default partitioner
    (murmur2 of the key; null keys round robin from ``round_robin``). Returns
    ``([(partition, batch), ...], next_round_robin)``, each batch in input order."""
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
    cdef int32_t q
    for q in range(num_partitions):
        if counts[q] == 0:
            continue
        if counts[q] == batch.n:
            out.append((q, batch))
            break
        builder = RecordBatchBuilder()
        with nogil:
            builder.reserve(counts[q], 0)
            for i in range(batch.n):
                if parts[i] == q:
                    builder.append(batch.key_ptr(i), batch.key_len(i), batch.value_ptr(i),
                                   batch.value_len(i), batch.ts(i), q, batch.off(i))
        out.append((q, builder.finish()))
    return out, rr

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

cdef int _slot_from_bytes(ks_Slot* slot, const char* p, Py_ssize_t n, int enc) noexcept nogil:
    if n < 0:
        slot.state = 1
        return 0
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

def aggregate(RecordCache cache not None, str namespace not None, RecordBatch batch not None,
              int op, int value_enc, int store_enc, load, bint windowed=False,
              int64_t size_ms=0, int64_t advance_ms=0, int64_t grace_ms=0,
              int64_t observed_time=-1):
    """Count, sum, min or max per key (per window when ``windowed``) of a batch into the store's
    record-cache namespace, exactly as the DSL's aggregate processors would record by record.

    Records with a null key are skipped; records with a null value are skipped unless windowed
    counting (Kafka's rules). Old aggregates come from the cache, else from ``load(cache_key)``
    (the store below the cache: bytes or None). Each key's newest aggregate is written to the
    cache once per batch, in the order of the keys' last updates (so the cache's dirty order is
    the per-record path's), with the timestamp of its last record; evictions flush through the
    namespace's listener as usual. ``store_enc`` encodes the aggregate (LONG for counts).

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
    cdef unordered_map[string_view, ks_CacheEntry*].iterator cit
    cdef ks_NamedCache* nc
    cdef ks_CacheEntry* e
    cdef Py_ssize_t i, j, kn, vn
    cdef const char* kp
    cdef int failed = 0, unknown_ns = 0
    cdef int64_t ts, start, dropped = 0, observed = observed_time, vi = 0, acc
    cdef double vd = 0.0
    cdef string ck
    cdef vector[ks_FlushBatch] flushes
    cdef vector[ks_PendingFlush] pending
    cdef string wkey, wval
    cdef char buf[8]
    if windowed and (size_ms <= 0 or advance_ms <= 0):
        raise ValueError("windowed aggregation needs a positive size and advance")
    # Pass 1 (no GIL): the slots each record updates; then, under the cache mutex, the cached
    # aggregates of those slots.
    with nogil:
        slots.reserve(<size_t>batch.n)
        updates.reserve(<size_t>batch.n)
        for i in range(batch.n):
            kn = batch.key_len(i)
            if kn < 0:
                continue
            vn = batch.value_len(i)
            if vn < 0 and not (windowed and op == OP_COUNT):
                if windowed:
                    failed = 1   # a windowed reduce of a null value: leave it to Python
                    break
                continue
            kp = batch.key_ptr(i)
            if not windowed:
                u.entry = ks_slot_for(slots, kp, <size_t>kn, _NO_WINDOW)
                u.record = i
                updates.push_back(u)
                continue
            ts = batch.ts(i)
            if ts > observed:
                observed = ts
            start = ts - size_ms + advance_ms
            if start < 0:
                start = 0
            start = (start // advance_ms) * advance_ms
            while start <= ts:
                if start + size_ms <= observed - grace_ms:
                    dropped += 1
                else:
                    u.entry = ks_slot_for(slots, kp, <size_t>kn, start)
                    u.record = i
                    updates.push_back(u)
                start += advance_ms
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
                    cit = nc.index.find(string_view(ck.data(), ck.size()))
                    if cit == nc.index.end():
                        missing.push_back(entry)
                    else:
                        e = deref(cit).second
                        if e.tombstone:
                            entry.second.state = 1
                        elif _slot_from_bytes(&entry.second, e.value.data(),
                                              <Py_ssize_t>e.value.size(), store_enc) < 0:
                            failed = 1
                            break
                    inc(sit)
            cache._mutex.unlock()
    if unknown_ns:
        raise KeyError(f"record cache has no namespace {namespace!r}; add it with add_namespace() first")
    if failed:
        return None
    # Keys the cache does not hold: read the store below (Python, with the GIL).
    for j in range(<Py_ssize_t>missing.size()):
        entry = missing[j]
        _cache_key(&entry.first, ck)
        stored = load(PyBytes_FromStringAndSize(ck.data(), ck.size()))
        if stored is None:
            entry.second.state = 1
        elif type(stored) is not bytes or _slot_from_bytes(
                &entry.second, PyBytes_AS_STRING(stored), PyBytes_GET_SIZE(stored), store_enc) < 0:
            return None
    # Pass 2 (no GIL, no lock): the aggregates, record by record, in the slots.
    with nogil:
        for j in range(<Py_ssize_t>updates.size()):
            u = updates[j]
            slot = &u.entry.second
            i = u.record
            if op == OP_COUNT:
                slot.i = (slot.i if slot.state == 2 else 0) + 1
            else:
                if _decode_number(batch.value_ptr(i), batch.value_len(i), value_enc, &vi, &vd) < 0:
                    failed = 1
                    break
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
                            failed = 1   # Python's int would not fit the long serde either
                            break
                        slot.i = acc
                    elif op == OP_MIN:
                        if vi < slot.i:
                            slot.i = vi
                    elif vi > slot.i:
                        slot.i = vi
                    if store_enc == ENC_INT and (slot.i < INT32_MIN or slot.i > INT32_MAX):
                        failed = 1
                        break
            slot.state = 2
            slot.ts = batch.ts(i)
            slot.last = j
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
                if store_enc == ENC_DOUBLE:
                    _put_be64(buf, _double_bits(slot.d))
                    wval.assign(buf, 8)
                elif store_enc == ENC_INT:
                    _put_be32(buf, <uint32_t><int32_t>slot.i)
                    wval.assign(buf, 4)
                else:
                    _put_be64(buf, <uint64_t>slot.i)
                    wval.assign(buf, 8)
                _cache_key(&u.entry.first, wkey)
                cache._upsert(nc, wkey, wval, False, slot.ts, True)
                cache._evict_while_over(nc, flushes, pending)
        cache._mutex.unlock()
        slots.clear()
        updates.clear()
        updates.shrink_to_fit()
    if not flushes.empty():
        cache._deliver(flushes, pending)
    return observed, dropped

# ------------------------------------------------------------------- numpy / Arrow callers

def decode_numbers(RecordBatch batch not None, int side, int enc):
    """The keys (side 0) or values (side 1) of a batch of LONG/INT/SHORT (int64 array) or
    DOUBLE/FLOAT (float64 array) columns, with a bool array marking None. For the Spark stages
    and other array callers. Raises ValueError on a value of the wrong width."""
    cdef bint floating = enc == ENC_DOUBLE or enc == ENC_FLOAT
    if enc not in (ENC_LONG, ENC_INT, ENC_SHORT, ENC_DOUBLE, ENC_FLOAT):
        raise ValueError(f"decode_numbers takes a numeric encoding, got {enc}")
    values = np.zeros(batch.n, dtype=np.float64 if floating else np.int64)
    nulls = np.zeros(batch.n, dtype=np.bool_)
    cdef double[::1] dv
    cdef int64_t[::1] iv
    cdef cnp.npy_bool[::1] nv = nulls
    cdef Py_ssize_t i, n, bad = -1
    cdef const char* p
    cdef Val v
    if floating:
        dv = values
    else:
        iv = values
    with nogil:
        for i in range(batch.n):
            if side == 0:
                p = batch.key_ptr(i)
                n = batch.key_len(i)
            else:
                p = batch.value_ptr(i)
                n = batch.value_len(i)
            if n < 0:
                nv[i] = 1
                continue
            if _decode(p, n, enc, NULL, 0, &v, NULL) < 0:
                bad = i
                break
            if floating:
                dv[i] = v.d
            else:
                iv[i] = v.i
    if bad >= 0:
        raise ValueError(f"record {bad} of the batch does not hold a value of encoding {enc}")
    return values, nulls

def encode_numbers(values, int enc):
    """A list of bytes: each value of an int64 or float64 array in the encoding's big-endian form
    (LONG, INT, DOUBLE), as the built-in serdes write them."""
    cdef Py_ssize_t i, n = len(values)
    cdef char buf[8]
    cdef list out = []
    cdef const int64_t[::1] iv
    cdef const double[::1] dv
    if enc == ENC_DOUBLE:
        dv = np.ascontiguousarray(values, dtype=np.float64)
        for i in range(n):
            _put_be64(buf, _double_bits(dv[i]))
            out.append(PyBytes_FromStringAndSize(buf, 8))
    elif enc == ENC_LONG or enc == ENC_INT:
        iv = np.ascontiguousarray(values, dtype=np.int64)
        for i in range(n):
            if enc == ENC_LONG:
                _put_be64(buf, <uint64_t>iv[i])
                out.append(PyBytes_FromStringAndSize(buf, 8))
            else:
                if iv[i] < INT32_MIN or iv[i] > INT32_MAX:
                    raise OverflowError(f"{iv[i]} is outside the signed 32-bit range")
                _put_be32(buf, <uint32_t><int32_t>iv[i])
                out.append(PyBytes_FromStringAndSize(buf, 4))
    else:
        raise ValueError(f"encode_numbers takes LONG, INT or DOUBLE, got {enc}")
    return out
