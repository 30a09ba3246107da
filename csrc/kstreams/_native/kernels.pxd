# cython: language_level=3
# C-level interface of kstreams._native.kernels: the batch kernels of the compiled processors.
#
# Encodings name how a column's bytes decode (the built-in serde that wrote them). A kernel that
# meets a record it cannot handle exactly as the Python serdes and processors would (invalid
# bytes, a JSON number out of int64 range, an escaped string it would have to unescape, ...)
# reports it instead of guessing, and the caller runs that batch through the per-record path.

from libc.stdint cimport int32_t, int64_t
from libcpp.string cimport string
from libcpp.vector cimport vector

from kstreams._native.record_batch cimport RecordBatch

cdef enum Encoding:
    ENC_BYTES = 0
    ENC_STRING = 1
    ENC_LONG = 2
    ENC_INT = 3
    ENC_SHORT = 4
    ENC_DOUBLE = 5
    ENC_FLOAT = 6
    ENC_JSON = 7

# One node of a compiled predicate (a flattened expression tree; children by index).
cdef struct PNode:
    int kind          # P_CMP, P_AND, P_OR, P_NOT, P_TRUE
    int side          # 0 key, 1 value
    int has_field     # compare a top-level JSON field instead of the whole value
    int cmp           # CMP_EQ ... CMP_GE, CMP_IS_NULL
    int ccat          # category of the constant
    int c_is_int
    int64_t ci
    double cd
    int a
    int b

# One captured top-level JSON field of one record (kernels_fields.pxi): a JSON token with its
# pointer stored as an offset from the start of the record's key or value.
cdef struct FTok:
    int32_t type
    int32_t escaped
    int32_t big
    int32_t off
    int64_t n
    int64_t i

cdef class FieldIndex:
    cdef Py_ssize_t n
    cdef int nf
    cdef int nkey                   # slots [0, nkey) are key fields, the rest value fields
    cdef vector[string] names
    cdef vector[int] sides
    cdef FTok* toks                 # n * nf, record-major (a buffer of the module's pool)
    cdef Py_ssize_t capacity        # FToks the buffer holds

    cdef inline FTok* row(self, Py_ssize_t i) noexcept nogil:
        return self.toks + i * self.nf

    cdef int _allocate(self, Py_ssize_t n, int nf) except -1

    cdef int slot(self, int side, const string& name) noexcept
    cdef FieldIndex taken(self, const int32_t[::1] indices)

cdef class Predicate:
    cdef vector[PNode] nodes
    cdef vector[string] fields      # per node (empty when no field)
    cdef vector[string] strings     # per node: the string/bytes constant
    cdef int key_enc
    cdef int value_enc
    cdef int root
    cdef bint valid                 # the batch being selected was validated (select's argument)
    cdef FieldIndex index           # the batch's captured fields, while select runs
    cdef vector[int] slots          # per node: its field's slot in index, or -1

    cdef int _eval(self, RecordBatch batch, Py_ssize_t i, int k) noexcept nogil
    cdef int _eval_captured(self, RecordBatch batch, Py_ssize_t i, int k, PNode* node) noexcept nogil
