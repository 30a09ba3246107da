# Included by kernels.pyx (one extension module; see its docstring).
# JSON scanning: validation, top-level fields, canonical form, string unescaping; UTF-8.

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
    MAX_WANTED = 8      # top-level fields one parse captures

cdef struct JFields:
    # Top-level members a parse captures while it validates the document.
    int n
    const char* names[MAX_WANTED]
    Py_ssize_t lens[MAX_WANTED]
    JTok found[MAX_WANTED]  # the last member of each name; T_NONE when absent or not an object
    int unknown             # a top-level name has an escape: it might spell a wanted name

cdef inline int _is_ws(char c) noexcept nogil:
    return c == c' ' or c == c'\t' or c == c'\n' or c == c'\r'

cdef inline void _skip_ws(JScan* s) noexcept nogil:
    cdef const char* q = s.p
    while q < s.end and _is_ws(q[0]):
        q += 1
    if q != s.p:
        s.canonical = 0
        s.p = q

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
    cdef uint64_t word
    while p < end:
        # ASCII (most keys and text) eight bytes a step.
        if end - p >= 8:
            memcpy(&word, p, 8)
            if not (word & 0x8080808080808080ULL):
                p += 8
                continue
        if p[0] < 0x80:
            p += 1
            continue
        k = _utf8_seq(p, end)
        if k == 0:
            return 0
        p += k
    return 1

cdef extern from * nogil:
    """
    /* The first byte at or after q (before end) that a JSON string scan must look at: the quote,
       the backslash, a control character (invalid) or a byte >= 0x80 (UTF-8 to validate); end
       when there is none. Eight bytes a step: per byte, "is zero" (after xor with the quote or
       backslash), "is below 0x20" and "has the high bit", over one mask of high bits. The word
       tests can flag a byte above a flagged one by a borrow, never below it, so the lowest flag
       is exact: on little-endian machines it is the first such byte in memory. The last bytes
       are read into a zero-filled word: a zero counts as a control character, so a string that
       runs to the end stops there. */
    static inline uint64_t ks_json_special8(uint64_t x) {
        const uint64_t ones = 0x0101010101010101ULL;
        uint64_t quote = x ^ (ones * 0x22), backslash = x ^ (ones * 0x5C);
        return ((((x - ones * 0x20) | (quote - ones) | (backslash - ones)) & ~x) | x)
            & (ones * 0x80);
    }
    static inline const char *ks_json_string_special(const char *q, const char *end) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        uint64_t x, mask;
        while (end - q >= 8) {
            memcpy(&x, q, 8);
            mask = ks_json_special8(x);
            if (mask)
                return q + (__builtin_ctzll(mask) >> 3);
            q += 8;
        }
        if (q >= end)
            return end;
        x = 0;
        memcpy(&x, q, (size_t)(end - q));
        mask = ks_json_special8(x);
        return q + (__builtin_ctzll(mask) >> 3);   /* a zero fill byte is flagged: <= end */
    #else
        for (; q < end; q++) {
            unsigned char c = (unsigned char)*q;
            if (c < 0x20 || c == 0x22 || c == 0x5C || c >= 0x80)
                return q;
        }
        return end;
    #endif
    }
    """
    const char* ks_json_string_special(const char* q, const char* end)

cdef int _j_string(JScan* s, JTok* tok) noexcept nogil:
    """At the opening quote. Fills tok (p/n = raw content); -1 when invalid."""
    cdef const char* start
    cdef const char* q
    cdef const char* end = s.end
    cdef char c
    cdef int h, code, j
    cdef Py_ssize_t k
    s.p += 1
    start = s.p
    tok.escaped = 0
    while True:
        q = ks_json_string_special(s.p, end)
        s.p = q
        if q >= end:
            return -1
        c = q[0]
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

cdef inline int _same(const char* a, const char* b, Py_ssize_t n) noexcept nogil:
    # Member names are short: a loop beats a call to memcmp.
    cdef Py_ssize_t k
    for k in range(n):
        if a[k] != b[k]:
            return 0
    return 1

cdef inline int _j_scalar(JScan* s, JTok* tok) noexcept nogil:
    """At a value that is not an object or an array (s.p < s.end). -1 when invalid."""
    cdef const char* start = s.p
    cdef char c = s.p[0]
    if c == c'"':
        return _j_string(s, tok)
    if c == c't':
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

cdef inline int _j_member(JScan* s, JTok* tok, int depth) noexcept nogil:
    """A member's or an element's value: scalars here, objects and arrays by recursion (most
    values are scalars: they skip the call and its frame)."""
    _skip_ws(s)
    if s.p >= s.end:
        return -1
    if s.p[0] == c'{' or s.p[0] == c'[':
        return _j_value(s, tok, depth, NULL)
    return _j_scalar(s, tok)

cdef int _j_value(JScan* s, JTok* tok, int depth, JFields* want) noexcept nogil:
    """Parse one value; tok describes it. With ``want`` (the document, depth 0), its ``found``
    get the top-level members of its names. -1 when invalid or beyond what the kernels handle."""
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
                    if want != NULL:
                        want.unknown = 1
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
                if _j_member(s, &sub, depth + 1) < 0:
                    return -1
                if want != NULL:
                    for j in range(want.n):
                        if key.n == want.lens[j] and _same(key.p, want.names[j], key.n):
                            want.found[j] = sub
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
                if _j_member(s, &sub, depth + 1) < 0:
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
    else:
        return _j_scalar(s, tok)
    tok.p = start
    tok.n = s.p - start
    return 0

cdef int j_parse_fields(const char* p, Py_ssize_t n, JFields* want, int* canonical) noexcept nogil:
    """Parse (and so validate) a whole JSON document; ``want``'s found get its top-level members
    of the wanted names (``want`` may be NULL). -1: not handled."""
    cdef JScan s
    cdef JTok top
    cdef int j
    s.p = p
    s.end = p + n
    # Tracking the canonical form costs a duplicate-name check per member: only when asked.
    s.canonical = 1 if canonical != NULL else 0
    if want != NULL:
        want.unknown = 0
        for j in range(want.n):
            want.found[j].type = T_NONE
    if _j_value(&s, &top, 0, want) < 0:
        return -1
    _skip_ws(&s)
    if s.p != s.end:
        return -1
    if canonical != NULL:
        canonical[0] = s.canonical
    return 0

cdef int j_parse(const char* p, Py_ssize_t n, const char* field, Py_ssize_t flen, JTok* out,
                 int* canonical) noexcept nogil:
    """Parse a whole JSON document. Without a field, out is the document's top-level token; with
    one, out is that top-level member (T_NONE when absent or not an object). -1: not handled,
    which includes a top-level name with an escape (it might spell the field)."""
    cdef JScan s
    cdef JFields want
    if field == NULL:
        s.p = p
        s.end = p + n
        s.canonical = 1 if canonical != NULL else 0
        if _j_value(&s, out, 0, NULL) < 0:
            return -1
        _skip_ws(&s)
        if s.p != s.end:
            return -1
        if canonical != NULL:
            canonical[0] = s.canonical
        return 0
    want.n = 1
    want.names[0] = field
    want.lens[0] = flen
    if j_parse_fields(p, n, &want, canonical) < 0 or want.unknown:
        return -1
    out[0] = want.found[0]
    return 0

# --------------------------------------------------------- fields of documents known valid

cdef inline int _skip_string(JScan* s) noexcept nogil:
    """At the opening quote of a string of a valid document: past its closing quote. A quote
    closes the string unless an odd run of backslashes precedes it. 1 when the string has an
    escape, 0 when not, -1 when unterminated."""
    cdef const char* q
    cdef const char* b
    cdef int escaped = 0
    s.p += 1
    while True:
        q = <const char*>memchr(s.p, c'"', <size_t>(s.end - s.p))
        if q == NULL:
            return -1
        b = q
        while b > s.p and (b - 1)[0] == c'\\':
            b -= 1
        if memchr(s.p, c'\\', <size_t>(q - s.p)) != NULL:
            escaped = 1
        s.p = q + 1
        if (q - b) % 2 == 0:
            return escaped

cdef int _skip_valid_value(JScan* s) noexcept nogil:
    """Past one value of a valid document without parsing it: strings by their quotes, objects
    and arrays by their brackets, numbers and literals up to the next delimiter."""
    cdef char c = s.p[0]
    cdef int depth = 0
    if c == c'"':
        return -1 if _skip_string(s) < 0 else 0
    if c == c'{' or c == c'[':
        while s.p < s.end:
            c = s.p[0]
            if c == c'"':
                if _skip_string(s) < 0:
                    return -1
                continue
            if c == c'{' or c == c'[':
                depth += 1
            elif c == c'}' or c == c']':
                depth -= 1
                if depth == 0:
                    s.p += 1
                    return 0
            s.p += 1
        return -1
    while s.p < s.end and not (s.p[0] == c',' or s.p[0] == c'}' or s.p[0] == c']' or _is_ws(s.p[0])):
        s.p += 1
    return 0

cdef int j_field_of_valid(const char* p, Py_ssize_t n, const char* field, Py_ssize_t flen,
                          JTok* out) noexcept nogil:
    """``j_parse(p, n, field, flen, out, NULL)`` for a document already known to be valid JSON
    (a batch the source validated): the same result, but only the field's own value is parsed;
    the other members are skipped by their quotes and brackets. The last member of the name
    wins, as in ``json.loads``; an escaped top-level name is -1, as in ``j_parse``."""
    cdef JScan s
    cdef JTok sub
    cdef const char* key
    cdef Py_ssize_t key_n
    cdef int escaped
    s.p = p
    s.end = p + n
    s.canonical = 1
    out.type = T_NONE
    _skip_ws(&s)
    if s.p >= s.end or s.p[0] != c'{':
        return 0   # not an object: no field
    s.p += 1
    while True:
        _skip_ws(&s)
        if s.p >= s.end:
            return -1
        if s.p[0] == c'}':
            return 0
        if s.p[0] == c',':
            s.p += 1
            continue
        if s.p[0] != c'"':
            return -1
        key = s.p + 1
        escaped = _skip_string(&s)
        if escaped != 0:
            return -1   # an escaped name might spell the field (or the string is cut short)
        key_n = s.p - 1 - key
        _skip_ws(&s)
        if s.p >= s.end or s.p[0] != c':':
            return -1
        s.p += 1
        _skip_ws(&s)
        if s.p >= s.end:
            return -1
        if key_n == flen and memcmp(key, field, <size_t>flen) == 0:
            if _j_value(&s, &sub, 1, NULL) < 0:
                return -1
            out[0] = sub
        elif _skip_valid_value(&s) < 0:
            return -1

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
