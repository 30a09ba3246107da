# Included by kernels.pyx (one extension module; see its docstring).
# Compiled predicates: values of a record's key/value and the vocabulary's comparisons.

# ------------------------------------------------------------------------------ predicates

cdef struct Val:
    int cat
    int is_int
    int64_t i
    double d
    const char* s
    Py_ssize_t n

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
                 Val* v, string* scratch, bint valid=False) noexcept nogil:
    cdef JTok tok
    v.is_int = 0
    if n < 0:
        v.cat = C_NULL
        return 0
    if enc == ENC_JSON:
        if valid and field != NULL:
            if j_field_of_valid(p, n, field, flen, &tok) < 0:
                return -1
        elif j_parse(p, n, field, flen, &tok, NULL) < 0:
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
    expression tree (``kstreams.predicates.Predicate.nodes()`` builds them); ``root`` indexes the
    node to evaluate; ``key_enc``/``value_enc`` are the encodings of the batch's columns.
    """

    def __init__(self, list nodes not None, int root, int key_enc, int value_enc):
        cdef PNode node
        self.nodes.clear()
        self.slots.clear()
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
            self.slots.push_back(-1)
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
            if self.slots[k] >= 0:
                return self._eval_captured(batch, i, k, node)
            field = self.fields[k].data()
        if node.side == 0:
            r = _decode(batch.key_ptr(i), batch.key_len(i), self.key_enc, field,
                        <Py_ssize_t>self.fields[k].size(), &v, &scratch, self.valid)
        else:
            r = _decode(batch.value_ptr(i), batch.value_len(i), self.value_enc, field,
                        <Py_ssize_t>self.fields[k].size(), &v, &scratch, self.valid)
        if r < 0:
            return -1
        return _compare(&v, node, &self.strings[k])

    cdef int _eval_captured(self, RecordBatch batch, Py_ssize_t i, int k, PNode* node) noexcept nogil:
        """_eval of a comparison whose field the batch's index holds."""
        cdef JTok tok
        cdef Val v
        cdef string scratch
        cdef const char* base = batch.key_ptr(i) if node.side == 0 else batch.value_ptr(i)
        memset(&v, 0, sizeof(Val))
        if _captured(self.index, i, self.slots[k], base, &tok) < 0 or \
                _val_from_tok(&tok, &v, &scratch) < 0:
            return -1
        return _compare(&v, node, &self.strings[k])

    def select(self, RecordBatch batch not None, bint validated=False):
        """int32 indices of the records the predicate holds for, or None when some record needs
        the Python path. ``validated``: every JSON column of the batch is known to be valid JSON
        (``validate`` passed it), so fields are found without parsing the rest of a document;
        fields the batch's index holds (``validate``'s ``fields``) are not looked for at all."""
        out = np.empty(batch.n, dtype=np.int32)
        cdef int32_t[::1] o = out
        cdef Py_ssize_t i, m = 0
        cdef int r = 0
        cdef int k
        self.valid = validated
        self.index = _index_of(batch)
        for k in range(<int>self.nodes.size()):
            self.slots[k] = -1
            if self.index is not None and self.nodes[k].has_field:
                self.slots[k] = self.index.slot(self.nodes[k].side, self.fields[k])
        try:
            with nogil:
                for i in range(batch.n):
                    r = self._eval(batch, i, self.root)
                    if r < 0:
                        break
                    if r:
                        o[m] = <int32_t>i
                        m += 1
        finally:
            self.index = None
        if r < 0:
            return None
        return out[:m]
