# cython: language_level=3
"""kstreams' own librdkafka clients: KafkaFetcher fetches straight into RecordBatches, KafkaSender
produces RecordBatches, both without a Python object or call per record.

confluent-kafka hands out one Python ``Message`` per fetched record (its key, value and topic
copied into new objects, a tuple per timestamp, each object tracked by the garbage collector), and
takes one Python call per produced record (arguments parsed, a per-message state allocated, and a
GIL round trip per delivery report); measured on a broker, ~0.9 us of the polling thread per
fetched record and ~1 us per produced one. Here records are copied between librdkafka and a
RecordBatch's arena without the GIL.

The fetcher serves consumers that only fetch partitions they assign themselves: manually assigned
consumers (restore, global) and the fetching consumer of a group member whose partitions its
assignor decides (the group membership stays a confluent-kafka consumer). The sender serves every
producer, transactions included. Their methods have the names and arguments of confluent-kafka's
``Consumer`` and ``Producer`` for what they do, and raise confluent-kafka's ``KafkaException``, so
the adapter treats both alike.

librdkafka is the one confluent-kafka loaded (``load`` is given its path): its functions are
looked up once with ``dlsym``, so kstreams builds without librdkafka's headers and always runs
the library version confluent-kafka ships. The structs declared below are librdkafka's public,
stable ABI (``rd_kafka_message_t``, ``rd_kafka_topic_partition_t``, ``rd_kafka_vu_t``).

librdkafka's log lines and failed deliveries arrive on librdkafka's callbacks; they are queued in
C and handed to Python by the thread that uses the client (``flush_logs``, ``take_failures``).
"""

from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport strlen
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from posix.dlfcn cimport RTLD_LOCAL, RTLD_NOW, dlerror, dlopen, dlsym

from libcpp.atomic cimport atomic
from libcpp.string cimport string
from libcpp.vector cimport vector

from kstreams._native.record_batch cimport (
    RecordBatch, RecordBatchBuilder, raw_header_get, raw_header_put, raw_header_size,
)

import logging

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

__all__ = ["KafkaFetcher", "KafkaSender", "load", "loaded"]


cdef extern from * nogil:
    """
    #include <mutex>
    #include <string>
    #include <vector>

    typedef struct rd_kafka_s rd_kafka_t;
    typedef struct rd_kafka_conf_s rd_kafka_conf_t;
    typedef struct rd_kafka_topic_s rd_kafka_topic_t;
    typedef struct rd_kafka_queue_s rd_kafka_queue_t;
    typedef struct rd_kafka_headers_s rd_kafka_headers_t;
    typedef struct rd_kafka_error_s rd_kafka_error_t;
    typedef struct rd_kafka_consumer_group_metadata_s rd_kafka_consumer_group_metadata_t;

    typedef struct ks_rd_kafka_message_s {
        int err;
        rd_kafka_topic_t *rkt;
        int32_t partition;
        void *payload;
        size_t len;
        void *key;
        size_t key_len;
        int64_t offset;
        void *_private;
    } ks_rd_kafka_message_t;

    typedef struct ks_rd_kafka_topic_partition_s {
        char *topic;
        int32_t partition;
        int64_t offset;
        void *metadata;
        size_t metadata_size;
        void *opaque;
        int err;
        void *_private;
    } ks_rd_kafka_topic_partition_t;

    typedef struct ks_rd_kafka_topic_partition_list_s {
        int cnt;
        int size;
        ks_rd_kafka_topic_partition_t *elems;
    } ks_rd_kafka_topic_partition_list_t;

    typedef struct ks_rd_kafka_vu_s {
        int vtype;
        union {
            const char *cstr;
            rd_kafka_topic_t *rkt;
            int i;
            int32_t i32;
            int64_t i64;
            struct { void *ptr; size_t size; } mem;
            struct { const char *name; const void *val; Py_ssize_t size; } header;
            rd_kafka_headers_t *headers;
            void *ptr;
            char _pad[64];
        } u;
    } ks_rd_kafka_vu_t;

    // A record librdkafka failed to deliver, as its delivery report gave it.
    struct ks_failure {
        int err;
        std::string topic;
        int32_t partition;
        bool has_key;
        std::string key;
        bool has_value;
        std::string value;
        int64_t timestamp;
        std::vector<std::string> header_names;
        std::vector<std::string> header_values;
        std::vector<char> header_present;
    };

    struct ks_log_line { int level; std::string facility; std::string text; };

    // What librdkafka's callbacks hand over (log lines, failed deliveries), kept until the
    // client's user takes them.
    struct ks_sink {
        std::mutex lock;
        std::vector<ks_log_line> lines;
        long dropped = 0;
        std::vector<ks_failure> failures;
    };

    static const size_t KS_LOG_LIMIT = 1000;
    static const char ks_empty[1] = "";

    typedef rd_kafka_error_t *(*ks_produceva_t)(rd_kafka_t *, const ks_rd_kafka_vu_t *, size_t);

    // One record into librdkafka's queue (copied): rd_kafka_produceva with the record's fields.
    // A length of -1 is a null key or value; timestamp 0 is "now".
    static rd_kafka_error_t *ks_produce_one(
            ks_produceva_t produceva, rd_kafka_t *rk, rd_kafka_topic_t *rkt, int32_t partition,
            const char *key, Py_ssize_t klen, const char *value, Py_ssize_t vlen, int64_t timestamp,
            rd_kafka_headers_t *headers) {
        ks_rd_kafka_vu_t vus[7];
        size_t n = 0;
        vus[n].vtype = 2; vus[n].u.rkt = rkt; n++;                  /* RD_KAFKA_VTYPE_RKT */
        vus[n].vtype = 3; vus[n].u.i32 = partition; n++;            /* PARTITION */
        vus[n].vtype = 7; vus[n].u.i = 0x2; n++;                    /* MSGFLAGS: F_COPY */
        if (klen >= 0) {                                            /* KEY */
            vus[n].vtype = 5; vus[n].u.mem.ptr = (void *)(klen ? key : ks_empty);
            vus[n].u.mem.size = (size_t)klen; n++;
        }
        if (vlen >= 0) {                                            /* VALUE */
            vus[n].vtype = 4; vus[n].u.mem.ptr = (void *)(vlen ? value : ks_empty);
            vus[n].u.mem.size = (size_t)vlen; n++;
        }
        vus[n].vtype = 8; vus[n].u.i64 = timestamp; n++;            /* TIMESTAMP */
        if (headers) { vus[n].vtype = 10; vus[n].u.headers = headers; n++; }   /* HEADERS */
        return produceva(rk, vus, n);
    }

    static void ks_log_push(ks_sink *sink, int level, const char *facility, const char *text) {
        std::lock_guard<std::mutex> guard(sink->lock);
        if (sink->lines.size() >= KS_LOG_LIMIT) { sink->dropped++; return; }
        sink->lines.push_back(ks_log_line{level, facility ? facility : "", text ? text : ""});
    }

    static void ks_failure_push(ks_sink *sink, ks_failure &failure) {
        std::lock_guard<std::mutex> guard(sink->lock);
        sink->failures.push_back(std::move(failure));
    }

    static void ks_failures_take(ks_sink *sink, std::vector<ks_failure> &out) {
        std::lock_guard<std::mutex> guard(sink->lock);
        out.swap(sink->failures);
    }

    static long ks_log_take(ks_sink *sink, std::vector<ks_log_line> &out) {
        std::lock_guard<std::mutex> guard(sink->lock);
        out.swap(sink->lines);
        long dropped = sink->dropped;
        sink->dropped = 0;
        return dropped;
    }
    """
    ctypedef struct rd_kafka_t:
        pass
    ctypedef struct rd_kafka_conf_t:
        pass
    ctypedef struct rd_kafka_topic_t:
        pass
    ctypedef struct rd_kafka_queue_t:
        pass
    ctypedef struct rd_kafka_headers_t:
        pass
    ctypedef struct rd_kafka_error_t:
        pass
    ctypedef struct rd_kafka_message_t "ks_rd_kafka_message_t":
        int err
        rd_kafka_topic_t *rkt
        int32_t partition
        void *payload
        size_t len
        void *key
        size_t key_len
        int64_t offset
    ctypedef struct rd_kafka_topic_partition_t "ks_rd_kafka_topic_partition_t":
        char *topic
        int32_t partition
        int64_t offset
        void *metadata
        size_t metadata_size
        int err
    ctypedef struct rd_kafka_topic_partition_list_t "ks_rd_kafka_topic_partition_list_t":
        int cnt
        rd_kafka_topic_partition_t *elems
    ctypedef struct rd_kafka_consumer_group_metadata_t:
        pass
    cdef cppclass ks_failure:
        int err
        string topic
        int32_t partition
        bint has_key
        string key
        bint has_value
        string value
        int64_t timestamp
        vector[string] header_names
        vector[string] header_values
        vector[char] header_present

    cdef cppclass ks_log_line:
        int level
        string facility
        string text
    cdef cppclass ks_sink:
        pass
    void ks_log_push(ks_sink *sink, int level, const char *facility, const char *text)
    ctypedef rd_kafka_error_t* (*ks_produceva_t)(rd_kafka_t*, const void*, size_t) noexcept nogil
    rd_kafka_error_t* ks_produce_one(
        ks_produceva_t produceva, rd_kafka_t* rk, rd_kafka_topic_t* rkt, int32_t partition,
        const char* key, Py_ssize_t klen, const char* value, Py_ssize_t vlen, int64_t timestamp,
        rd_kafka_headers_t* headers)
    void ks_failure_push(ks_sink *sink, ks_failure &failure)
    void ks_failures_take(ks_sink *sink, vector[ks_failure] &out)
    long ks_log_take(ks_sink *sink, vector[ks_log_line] &out)

# librdkafka's functions, by the signatures of rdkafka.h.
ctypedef void (*log_cb_t)(const rd_kafka_t*, int, const char*, const char*) noexcept nogil
ctypedef int (*f_version_t)() noexcept nogil
ctypedef rd_kafka_conf_t* (*f_conf_new_t)() noexcept nogil
ctypedef int (*f_conf_set_t)(rd_kafka_conf_t*, const char*, const char*, char*, size_t) noexcept nogil
ctypedef void (*f_conf_set_log_cb_t)(rd_kafka_conf_t*, log_cb_t) noexcept nogil
ctypedef void (*f_conf_set_opaque_t)(rd_kafka_conf_t*, void*) noexcept nogil
ctypedef void (*f_conf_destroy_t)(rd_kafka_conf_t*) noexcept nogil
ctypedef rd_kafka_t* (*f_new_t)(int, rd_kafka_conf_t*, char*, size_t) noexcept nogil
ctypedef void* (*f_opaque_t)(const rd_kafka_t*) noexcept nogil
ctypedef const char* (*f_name_t)(const rd_kafka_t*) noexcept nogil
ctypedef int (*f_poll_set_consumer_t)(rd_kafka_t*) noexcept nogil
ctypedef rd_kafka_queue_t* (*f_queue_get_consumer_t)(rd_kafka_t*) noexcept nogil
ctypedef void (*f_queue_destroy_t)(rd_kafka_queue_t*) noexcept nogil
ctypedef void (*f_queue_yield_t)(rd_kafka_queue_t*) noexcept nogil
ctypedef rd_kafka_message_t* (*f_consume_queue_t)(rd_kafka_queue_t*, int) noexcept nogil
ctypedef Py_ssize_t (*f_consume_batch_queue_t)(
    rd_kafka_queue_t*, int, rd_kafka_message_t**, size_t) noexcept nogil
ctypedef void (*f_message_destroy_t)(rd_kafka_message_t*) noexcept nogil
ctypedef int64_t (*f_message_timestamp_t)(const rd_kafka_message_t*, int*) noexcept nogil
ctypedef int (*f_message_headers_t)(const rd_kafka_message_t*, rd_kafka_headers_t**) noexcept nogil
ctypedef int (*f_header_get_all_t)(
    const rd_kafka_headers_t*, size_t, const char**, const void**, size_t*) noexcept nogil
ctypedef const char* (*f_topic_name_t)(const rd_kafka_topic_t*) noexcept nogil
ctypedef const char* (*f_err2str_t)(int) noexcept nogil
ctypedef rd_kafka_topic_partition_list_t* (*f_tpl_new_t)(int) noexcept nogil
ctypedef rd_kafka_topic_partition_t* (*f_tpl_add_t)(
    rd_kafka_topic_partition_list_t*, const char*, int32_t) noexcept nogil
ctypedef void (*f_tpl_destroy_t)(rd_kafka_topic_partition_list_t*) noexcept nogil
ctypedef rd_kafka_error_t* (*f_tpl_error_op_t)(rd_kafka_t*, rd_kafka_topic_partition_list_t*) noexcept nogil
ctypedef int (*f_tpl_op_t)(rd_kafka_t*, rd_kafka_topic_partition_list_t*) noexcept nogil
ctypedef rd_kafka_error_t* (*f_seek_partitions_t)(
    rd_kafka_t*, rd_kafka_topic_partition_list_t*, int) noexcept nogil
ctypedef int (*f_committed_t)(rd_kafka_t*, rd_kafka_topic_partition_list_t*, int) noexcept nogil
ctypedef int (*f_query_watermark_offsets_t)(
    rd_kafka_t*, const char*, int32_t, int64_t*, int64_t*, int) noexcept nogil
ctypedef int (*f_error_code_t)(const rd_kafka_error_t*) noexcept nogil
ctypedef const char* (*f_error_string_t)(const rd_kafka_error_t*) noexcept nogil
ctypedef int (*f_error_flag_t)(const rd_kafka_error_t*) noexcept nogil
ctypedef void (*f_error_destroy_t)(rd_kafka_error_t*) noexcept nogil
ctypedef int (*f_consumer_close_t)(rd_kafka_t*) noexcept nogil
ctypedef void (*f_destroy_t)(rd_kafka_t*) noexcept nogil
ctypedef void (*dr_msg_cb_t)(rd_kafka_t*, const rd_kafka_message_t*, void*) noexcept nogil
ctypedef void (*f_conf_set_dr_msg_cb_t)(rd_kafka_conf_t*, dr_msg_cb_t) noexcept nogil
ctypedef int (*f_poll_t)(rd_kafka_t*, int) noexcept nogil
ctypedef int (*f_flush_t)(rd_kafka_t*, int) noexcept nogil
ctypedef int (*f_outq_len_t)(rd_kafka_t*) noexcept nogil
ctypedef rd_kafka_topic_t* (*f_topic_new_t)(rd_kafka_t*, const char*, void*) noexcept nogil
ctypedef void (*f_topic_destroy_t)(rd_kafka_topic_t*) noexcept nogil
ctypedef rd_kafka_headers_t* (*f_headers_new_t)(size_t) noexcept nogil
ctypedef void (*f_headers_destroy_t)(rd_kafka_headers_t*) noexcept nogil
ctypedef int (*f_header_add_t)(rd_kafka_headers_t*, const char*, Py_ssize_t, const void*, Py_ssize_t) noexcept nogil
ctypedef rd_kafka_error_t* (*f_txn_timeout_t)(rd_kafka_t*, int) noexcept nogil
ctypedef rd_kafka_error_t* (*f_txn_t)(rd_kafka_t*) noexcept nogil
ctypedef rd_kafka_error_t* (*f_send_offsets_t)(
    rd_kafka_t*, const rd_kafka_topic_partition_list_t*, const rd_kafka_consumer_group_metadata_t*,
    int) noexcept nogil
ctypedef rd_kafka_error_t* (*f_cgmd_read_t)(
    rd_kafka_consumer_group_metadata_t**, const void*, size_t) noexcept nogil
ctypedef void (*f_cgmd_destroy_t)(rd_kafka_consumer_group_metadata_t*) noexcept nogil

cdef struct Api:
    f_version_t version
    f_conf_new_t conf_new
    f_conf_set_t conf_set
    f_conf_set_log_cb_t conf_set_log_cb
    f_conf_set_opaque_t conf_set_opaque
    f_conf_destroy_t conf_destroy
    f_new_t new
    f_opaque_t opaque
    f_name_t name
    f_poll_set_consumer_t poll_set_consumer
    f_queue_get_consumer_t queue_get_consumer
    f_queue_destroy_t queue_destroy
    f_queue_yield_t queue_yield
    f_consume_queue_t consume_queue
    f_consume_batch_queue_t consume_batch_queue
    f_message_destroy_t message_destroy
    f_message_timestamp_t message_timestamp
    f_message_headers_t message_headers
    f_header_get_all_t header_get_all
    f_topic_name_t topic_name
    f_err2str_t err2str
    f_tpl_new_t tpl_new
    f_tpl_add_t tpl_add
    f_tpl_destroy_t tpl_destroy
    f_tpl_error_op_t incremental_assign
    f_tpl_error_op_t incremental_unassign
    f_tpl_op_t pause_partitions
    f_tpl_op_t resume_partitions
    f_tpl_op_t position
    f_seek_partitions_t seek_partitions
    f_committed_t committed
    f_query_watermark_offsets_t query_watermark_offsets
    f_error_code_t error_code
    f_error_string_t error_string
    f_error_flag_t error_is_fatal
    f_error_flag_t error_is_retriable
    f_error_destroy_t error_destroy
    f_consumer_close_t consumer_close
    f_destroy_t destroy
    f_conf_set_dr_msg_cb_t conf_set_dr_msg_cb
    ks_produceva_t produceva
    f_poll_t poll
    f_flush_t flush
    f_outq_len_t outq_len
    f_topic_new_t topic_new
    f_topic_destroy_t topic_destroy
    f_headers_new_t headers_new
    f_headers_destroy_t headers_destroy
    f_header_add_t header_add
    f_txn_timeout_t init_transactions
    f_txn_t begin_transaction
    f_send_offsets_t send_offsets_to_transaction
    f_txn_timeout_t commit_transaction
    f_txn_timeout_t abort_transaction
    f_error_flag_t error_txn_requires_abort
    f_cgmd_read_t cgmd_read
    f_cgmd_destroy_t cgmd_destroy

cdef Api _api
cdef bint _loaded = False

cdef enum:
    RD_KAFKA_PRODUCER = 0
    RD_KAFKA_CONSUMER = 1
    ERR__QUEUE_FULL = -184
    RD_KAFKA_CONF_OK = 0
    RD_KAFKA_RESP_ERR_NO_ERROR = 0
    ERR__FAIL = -196
    ERR__TIMED_OUT = -185
    ERR__INVALID_ARG = -186
    ERRSTR_SIZE = 512

# librdkafka's syslog levels as Python logging levels (as confluent-kafka maps them).
_LEVELS = {0: logging.CRITICAL, 1: logging.CRITICAL, 2: logging.CRITICAL, 3: logging.ERROR,
           4: logging.WARNING, 5: logging.INFO, 6: logging.INFO, 7: logging.DEBUG}


cdef void* _symbol(void* lib, const char* name) except NULL:
    cdef void* found = dlsym(lib, name)
    if found == NULL:
        raise OSError(f"librdkafka has no function {name.decode()}")
    return found


def load(str path):
    """Look up librdkafka's functions in the library at ``path`` (the one confluent-kafka uses).
    Raises OSError when it cannot be opened or lacks a function this module needs."""
    global _loaded
    if _loaded:
        return
    cdef bytes encoded = path.encode()
    cdef void* lib = dlopen(encoded, RTLD_NOW | RTLD_LOCAL)
    if lib == NULL:
        raise OSError(f"Cannot open librdkafka at {path}: {(<bytes>dlerror()).decode()}")
    _api.version = <f_version_t>_symbol(lib, b"rd_kafka_version")
    _api.conf_new = <f_conf_new_t>_symbol(lib, b"rd_kafka_conf_new")
    _api.conf_set = <f_conf_set_t>_symbol(lib, b"rd_kafka_conf_set")
    _api.conf_set_log_cb = <f_conf_set_log_cb_t>_symbol(lib, b"rd_kafka_conf_set_log_cb")
    _api.conf_set_opaque = <f_conf_set_opaque_t>_symbol(lib, b"rd_kafka_conf_set_opaque")
    _api.conf_destroy = <f_conf_destroy_t>_symbol(lib, b"rd_kafka_conf_destroy")
    _api.new = <f_new_t>_symbol(lib, b"rd_kafka_new")
    _api.opaque = <f_opaque_t>_symbol(lib, b"rd_kafka_opaque")
    _api.name = <f_name_t>_symbol(lib, b"rd_kafka_name")
    _api.poll_set_consumer = <f_poll_set_consumer_t>_symbol(lib, b"rd_kafka_poll_set_consumer")
    _api.queue_get_consumer = <f_queue_get_consumer_t>_symbol(lib, b"rd_kafka_queue_get_consumer")
    _api.queue_destroy = <f_queue_destroy_t>_symbol(lib, b"rd_kafka_queue_destroy")
    _api.queue_yield = <f_queue_yield_t>_symbol(lib, b"rd_kafka_queue_yield")
    _api.consume_queue = <f_consume_queue_t>_symbol(lib, b"rd_kafka_consume_queue")
    _api.consume_batch_queue = <f_consume_batch_queue_t>_symbol(lib, b"rd_kafka_consume_batch_queue")
    _api.message_destroy = <f_message_destroy_t>_symbol(lib, b"rd_kafka_message_destroy")
    _api.message_timestamp = <f_message_timestamp_t>_symbol(lib, b"rd_kafka_message_timestamp")
    _api.message_headers = <f_message_headers_t>_symbol(lib, b"rd_kafka_message_headers")
    _api.header_get_all = <f_header_get_all_t>_symbol(lib, b"rd_kafka_header_get_all")
    _api.topic_name = <f_topic_name_t>_symbol(lib, b"rd_kafka_topic_name")
    _api.err2str = <f_err2str_t>_symbol(lib, b"rd_kafka_err2str")
    _api.tpl_new = <f_tpl_new_t>_symbol(lib, b"rd_kafka_topic_partition_list_new")
    _api.tpl_add = <f_tpl_add_t>_symbol(lib, b"rd_kafka_topic_partition_list_add")
    _api.tpl_destroy = <f_tpl_destroy_t>_symbol(lib, b"rd_kafka_topic_partition_list_destroy")
    _api.incremental_assign = <f_tpl_error_op_t>_symbol(lib, b"rd_kafka_incremental_assign")
    _api.incremental_unassign = <f_tpl_error_op_t>_symbol(lib, b"rd_kafka_incremental_unassign")
    _api.pause_partitions = <f_tpl_op_t>_symbol(lib, b"rd_kafka_pause_partitions")
    _api.resume_partitions = <f_tpl_op_t>_symbol(lib, b"rd_kafka_resume_partitions")
    _api.position = <f_tpl_op_t>_symbol(lib, b"rd_kafka_position")
    _api.seek_partitions = <f_seek_partitions_t>_symbol(lib, b"rd_kafka_seek_partitions")
    _api.committed = <f_committed_t>_symbol(lib, b"rd_kafka_committed")
    _api.query_watermark_offsets = <f_query_watermark_offsets_t>_symbol(
        lib, b"rd_kafka_query_watermark_offsets")
    _api.error_code = <f_error_code_t>_symbol(lib, b"rd_kafka_error_code")
    _api.error_string = <f_error_string_t>_symbol(lib, b"rd_kafka_error_string")
    _api.error_is_fatal = <f_error_flag_t>_symbol(lib, b"rd_kafka_error_is_fatal")
    _api.error_is_retriable = <f_error_flag_t>_symbol(lib, b"rd_kafka_error_is_retriable")
    _api.error_destroy = <f_error_destroy_t>_symbol(lib, b"rd_kafka_error_destroy")
    _api.consumer_close = <f_consumer_close_t>_symbol(lib, b"rd_kafka_consumer_close")
    _api.destroy = <f_destroy_t>_symbol(lib, b"rd_kafka_destroy")
    _api.conf_set_dr_msg_cb = <f_conf_set_dr_msg_cb_t>_symbol(lib, b"rd_kafka_conf_set_dr_msg_cb")
    _api.produceva = <ks_produceva_t>_symbol(lib, b"rd_kafka_produceva")
    _api.poll = <f_poll_t>_symbol(lib, b"rd_kafka_poll")
    _api.flush = <f_flush_t>_symbol(lib, b"rd_kafka_flush")
    _api.outq_len = <f_outq_len_t>_symbol(lib, b"rd_kafka_outq_len")
    _api.topic_new = <f_topic_new_t>_symbol(lib, b"rd_kafka_topic_new")
    _api.topic_destroy = <f_topic_destroy_t>_symbol(lib, b"rd_kafka_topic_destroy")
    _api.headers_new = <f_headers_new_t>_symbol(lib, b"rd_kafka_headers_new")
    _api.headers_destroy = <f_headers_destroy_t>_symbol(lib, b"rd_kafka_headers_destroy")
    _api.header_add = <f_header_add_t>_symbol(lib, b"rd_kafka_header_add")
    _api.init_transactions = <f_txn_timeout_t>_symbol(lib, b"rd_kafka_init_transactions")
    _api.begin_transaction = <f_txn_t>_symbol(lib, b"rd_kafka_begin_transaction")
    _api.send_offsets_to_transaction = <f_send_offsets_t>_symbol(lib, b"rd_kafka_send_offsets_to_transaction")
    _api.commit_transaction = <f_txn_timeout_t>_symbol(lib, b"rd_kafka_commit_transaction")
    _api.abort_transaction = <f_txn_timeout_t>_symbol(lib, b"rd_kafka_abort_transaction")
    _api.error_txn_requires_abort = <f_error_flag_t>_symbol(lib, b"rd_kafka_error_txn_requires_abort")
    _api.cgmd_read = <f_cgmd_read_t>_symbol(lib, b"rd_kafka_consumer_group_metadata_read")
    _api.cgmd_destroy = <f_cgmd_destroy_t>_symbol(lib, b"rd_kafka_consumer_group_metadata_destroy")
    _loaded = True


def loaded():
    """Whether ``load`` succeeded."""
    return _loaded


cdef void _log_cb(const rd_kafka_t* rk, int level, const char* facility, const char* text) noexcept nogil:
    cdef ks_sink* sink = <ks_sink*>_api.opaque(rk)
    if sink != NULL:
        ks_log_push(sink, level, facility, text)


cdef object _kafka_error(
    int code, str reason, bint fatal=False, bint retriable=False, bint txn_requires_abort=False
):
    return KafkaException(
        KafkaError(code, reason, fatal=fatal, retriable=retriable, txn_requires_abort=txn_requires_abort)
    )


cdef object _error_of(rd_kafka_error_t* error, str what):
    """A KafkaException for ``error`` (destroyed here), with librdkafka's flags."""
    cdef int code = _api.error_code(error)
    cdef str reason = (<bytes>_api.error_string(error)).decode(errors="replace")
    cdef bint fatal = _api.error_is_fatal(error)
    cdef bint retriable = _api.error_is_retriable(error)
    cdef bint abort = _api.error_txn_requires_abort(error)
    _api.error_destroy(error)
    return _kafka_error(code, f"{what}: {reason}" if what else reason, fatal, retriable, abort)


cdef rd_kafka_t* _create(int kind, dict settings, ks_sink* sink) except NULL:
    """A librdkafka client of ``kind`` with these settings, logging (and, for a producer,
    reporting failed deliveries) to ``sink``."""
    cdef char errstr[ERRSTR_SIZE]
    cdef rd_kafka_conf_t* conf = _api.conf_new()
    cdef bytes key_b, value_b
    for key, value in settings.items():
        key_b = str(key).encode()
        value_b = (str(value).lower() if isinstance(value, bool) else str(value)).encode()
        if _api.conf_set(conf, key_b, value_b, errstr, ERRSTR_SIZE) != RD_KAFKA_CONF_OK:
            _api.conf_destroy(conf)
            raise _kafka_error(ERR__INVALID_ARG, (<bytes>errstr).decode(errors="replace"))
    _api.conf_set_log_cb(conf, _log_cb)
    _api.conf_set_opaque(conf, <void*>sink)
    if kind == RD_KAFKA_PRODUCER:
        _api.conf_set_dr_msg_cb(conf, _delivery_cb)
    # rd_kafka_new owns conf once it succeeds.
    cdef rd_kafka_t* rk = _api.new(kind, conf, errstr, ERRSTR_SIZE)
    if rk == NULL:
        _api.conf_destroy(conf)
        raise _kafka_error(ERR__INVALID_ARG, (<bytes>errstr).decode(errors="replace"))
    return rk


cdef void _log_lines(ks_sink* sink, object logger, str name):
    """Log what librdkafka queued in ``sink`` since the last call."""
    cdef vector[ks_log_line] lines
    cdef long dropped = ks_log_take(sink, lines)
    cdef size_t i
    for i in range(lines.size()):
        logger.log(
            _LEVELS.get(lines[i].level, logging.INFO),
            "%s [%s] %s",
            name,
            lines[i].facility.decode(errors="replace"),
            lines[i].text.decode(errors="replace"),
        )
    if dropped:
        logger.warning("%s: %d librdkafka log lines dropped (too many at once)", name, dropped)


cdef void _delivery_cb(rd_kafka_t* rk, const rd_kafka_message_t* m, void* opaque) noexcept nogil:
    """librdkafka's delivery report (inside poll/flush): a failed record is kept for
    ``KafkaSender.take_failures``; a delivered one costs nothing more."""
    if m.err == RD_KAFKA_RESP_ERR_NO_ERROR:
        return
    cdef ks_failure failure
    cdef int tstype
    cdef rd_kafka_headers_t* headers
    cdef const char* name
    cdef const void* value
    cdef size_t size, i = 0
    failure.err = m.err
    if m.rkt != NULL:
        failure.topic.assign(_api.topic_name(m.rkt))
    failure.partition = m.partition
    failure.has_key = m.key != NULL
    if m.key != NULL:
        failure.key.assign(<const char*>m.key, m.key_len)
    failure.has_value = m.payload != NULL
    if m.payload != NULL:
        failure.value.assign(<const char*>m.payload, m.len)
    failure.timestamp = _api.message_timestamp(m, &tstype)
    if _api.message_headers(m, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR:
        while _api.header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR:
            failure.header_names.push_back(string(name))
            failure.header_present.push_back(value != NULL)
            if value != NULL:
                failure.header_values.push_back(string(<const char*>value, size))
            else:
                failure.header_values.push_back(string())
            i += 1
    ks_failure_push(<ks_sink*>opaque, failure)


cdef int _timeout_ms(timeout) except? -2:
    """A timeout in seconds as librdkafka's milliseconds (None or negative: -1, for ever)."""
    return -1 if timeout is None or timeout < 0 else <int>(timeout * 1000)


cdef str _err2str(int code):
    return (<bytes>_api.err2str(code)).decode(errors="replace")


cdef class _Client:
    """What both clients hold: the librdkafka handle, the sink its callbacks fill, the logger of
    its log lines. Not thread-safe: one thread uses a client at a time."""

    cdef rd_kafka_t* _rk
    cdef ks_sink* _sink
    cdef object _logger
    cdef str _name

    cdef int _open(self, int kind, dict settings, object logger) except -1:
        if not _loaded:
            raise RuntimeError("kafka_clients.load() must be called first")
        self._logger = logger
        self._sink = new ks_sink()
        self._rk = _create(kind, settings, self._sink)
        self._name = (<bytes>_api.name(self._rk)).decode(errors="replace")
        return 0

    def __dealloc__(self):
        # Runs after the subclass's __dealloc__, which destroyed the handle using the sink.
        if self._sink != NULL:
            del self._sink
            self._sink = NULL

    cdef int _check_open(self) except -1:
        if self._rk == NULL:
            raise RuntimeError(f"{self._name} has been closed")
        return 0

    def flush_logs(self):
        """Log what librdkafka logged since the last call."""
        _log_lines(self._sink, self._logger, self._name)


cdef class KafkaFetcher(_Client):
    """A librdkafka consumer that only fetches partitions assigned to it (see the module
    docstring). ``settings`` are librdkafka settings; ``logger`` receives librdkafka's log
    lines."""

    cdef rd_kafka_queue_t* _queue
    cdef rd_kafka_message_t** _messages
    cdef Py_ssize_t _capacity
    # Set by ``wakeup`` before it yields the queue: the yield alone is lost when the non-waiting
    # take of ``consume_batches`` clears it, so the wait checks this too.
    cdef atomic[int] _woken

    def __cinit__(self, dict settings, object logger):
        self._open(RD_KAFKA_CONSUMER, settings, logger)
        _api.poll_set_consumer(self._rk)
        self._queue = _api.queue_get_consumer(self._rk)

    def __dealloc__(self):
        self._shutdown(False)

    cdef void _shutdown(self, bint close_consumer) noexcept:
        cdef rd_kafka_t* rk = self._rk
        if rk == NULL:
            return
        self._rk = NULL
        # Cleared with the GIL held: ``wakeup`` (any thread, GIL held) yields on a live queue or
        # sees none.
        cdef rd_kafka_queue_t* queue = self._queue
        self._queue = NULL
        with nogil:
            if queue != NULL:
                _api.queue_destroy(queue)
            if close_consumer:
                _api.consumer_close(rk)
            _api.destroy(rk)
        if self._messages != NULL:
            free(self._messages)
            self._messages = NULL

    def close(self):
        """Leave nothing assigned and destroy the client (idempotent)."""
        self._shutdown(True)
        self.flush_logs()

    # -------------------------------------------------------------- partition lists

    cdef list _to_python(self, rd_kafka_topic_partition_list_t* tpl):
        """confluent-kafka TopicPartitions of the list, with each one's offset and metadata (the
        string committed with the offset, which Kafka Streams uses for a partition's time). An
        offset committed through confluent-kafka has its metadata's C terminator stored with it
        (it sends strlen + 1 bytes); the terminator is dropped here, as confluent-kafka's own
        ``committed`` drops it."""
        cdef int i
        result = []
        for i in range(tpl.cnt):
            topic = (<bytes>tpl.elems[i].topic).decode()
            if tpl.elems[i].metadata != NULL and tpl.elems[i].metadata_size > 0:
                metadata = PyBytes_FromStringAndSize(
                    <const char*>tpl.elems[i].metadata, <Py_ssize_t>tpl.elems[i].metadata_size
                ).split(b"\0", 1)[0].decode("utf-8", "replace")
                tp = KafkaTopicPartition(
                    topic, tpl.elems[i].partition, tpl.elems[i].offset, metadata=metadata
                )
            else:
                tp = KafkaTopicPartition(topic, tpl.elems[i].partition, tpl.elems[i].offset)
            result.append(tp)
        return result

    # -------------------------------------------------------------- assignment

    def incremental_assign(self, partitions):
        self._check_open()
        self._assign_op(partitions, True)

    def incremental_unassign(self, partitions):
        self._check_open()
        self._assign_op(partitions, False)

    cdef int _assign_op(self, partitions, bint assign) except -1:
        cdef rd_kafka_topic_partition_list_t* tpl = _partition_list(partitions, assign)
        cdef rd_kafka_error_t* error
        with nogil:
            if assign:
                error = _api.incremental_assign(self._rk, tpl)
            else:
                error = _api.incremental_unassign(self._rk, tpl)
            _api.tpl_destroy(tpl)
        if error != NULL:
            raise _error_of(error, "assign" if assign else "unassign")
        return 0

    def pause(self, partitions):
        self._check_open()
        self._pause_op(partitions, True)

    def resume(self, partitions):
        self._check_open()
        self._pause_op(partitions, False)

    cdef int _pause_op(self, partitions, bint pause) except -1:
        cdef rd_kafka_topic_partition_list_t* tpl = _partition_list(partitions, False)
        cdef int err
        with nogil:
            err = _api.pause_partitions(self._rk, tpl) if pause else _api.resume_partitions(self._rk, tpl)
            if err == RD_KAFKA_RESP_ERR_NO_ERROR:
                err = _first_partition_error(tpl)
            _api.tpl_destroy(tpl)
        if err != RD_KAFKA_RESP_ERR_NO_ERROR:
            raise _kafka_error(err, f"{'pause' if pause else 'resume'}: {_err2str(err)}")
        return 0

    def seek(self, partition):
        """Seek one partition (a confluent-kafka TopicPartition with the offset); waits until the
        fetcher took it up, as confluent-kafka's seek does."""
        self._check_open()
        cdef rd_kafka_topic_partition_list_t* tpl = _partition_list([partition], True)
        cdef rd_kafka_error_t* error
        cdef int err = RD_KAFKA_RESP_ERR_NO_ERROR
        with nogil:
            error = _api.seek_partitions(self._rk, tpl, -1)
            if error == NULL:
                err = _first_partition_error(tpl)
            _api.tpl_destroy(tpl)
        if error != NULL:
            raise _error_of(error, f"Failed to seek to offset {partition.offset}")
        if err != RD_KAFKA_RESP_ERR_NO_ERROR:
            raise _kafka_error(err, f"Failed to seek to offset {partition.offset}: {_err2str(err)}")

    # -------------------------------------------------------------- offsets

    def position(self, partitions):
        self._check_open()
        cdef rd_kafka_topic_partition_list_t* tpl = _partition_list(partitions, False)
        cdef int err
        with nogil:
            err = _api.position(self._rk, tpl)
        try:
            if err != RD_KAFKA_RESP_ERR_NO_ERROR:
                raise _kafka_error(err, f"position: {_err2str(err)}")
            return self._to_python(tpl)
        finally:
            _api.tpl_destroy(tpl)

    def committed(self, partitions, timeout=-1):
        self._check_open()
        cdef rd_kafka_topic_partition_list_t* tpl = _partition_list(partitions, False)
        cdef int timeout_ms = _timeout_ms(timeout)
        cdef int err
        with nogil:
            err = _api.committed(self._rk, tpl, timeout_ms)
        try:
            if err != RD_KAFKA_RESP_ERR_NO_ERROR:
                raise _kafka_error(err, f"committed: {_err2str(err)}", fatal=False, retriable=err == ERR__TIMED_OUT)
            return self._to_python(tpl)
        finally:
            _api.tpl_destroy(tpl)

    def get_watermark_offsets(self, partition, timeout=-1, cached=False):
        """(low, high) offsets of a partition, asked of its leader (``cached`` must be False)."""
        self._check_open()
        if cached:
            raise ValueError("KafkaFetcher asks the broker: cached watermarks are not kept")
        cdef bytes topic = partition.topic.encode()
        cdef const char* topic_c = topic
        cdef int32_t part = partition.partition
        cdef int timeout_ms = _timeout_ms(timeout)
        cdef int64_t low = -1, high = -1
        cdef int err
        with nogil:
            err = _api.query_watermark_offsets(self._rk, topic_c, part, &low, &high, timeout_ms)
        if err != RD_KAFKA_RESP_ERR_NO_ERROR:
            raise _kafka_error(err, f"get_watermark_offsets: {_err2str(err)}", fatal=False, retriable=err == ERR__TIMED_OUT)
        return (low, high)

    # -------------------------------------------------------------- fetching

    def wakeup(self):
        """Make a ``consume_batches`` that waits now, or else the next one, return at once (with
        what it has, maybe nothing). Safe from any thread; nothing once the fetcher is closed."""
        if self._queue != NULL:
            self._woken.store(1)
            _api.queue_yield(self._queue)

    def consume_batches(self, Py_ssize_t max_records, double timeout):
        """Wait up to ``timeout`` seconds for records (returning as soon as some arrived, or at a
        ``wakeup``) and take up to ``max_records``: ([(topic, partition, RecordBatch)], [(topic or
        None, partition, KafkaError)]). A partition's records come as one batch per run of its
        records, in order."""
        self._check_open()
        if max_records < 1:
            max_records = 1
        if max_records > self._capacity:
            free(self._messages)
            self._messages = <rd_kafka_message_t**>malloc(max_records * sizeof(rd_kafka_message_t*))
            if self._messages == NULL:
                self._capacity = 0
                raise MemoryError()
            self._capacity = max_records
        cdef rd_kafka_message_t** messages = self._messages
        cdef int timeout_ms = 0 if timeout <= 0 else <int>(timeout * 1000)
        cdef Py_ssize_t n, more
        cdef rd_kafka_message_t* first
        with nogil:
            # librdkafka's batch call waits until the batch is full or the timeout passed: it
            # takes only what is there, then waits for one record (or a wakeup), then takes
            # what came with it, as Kafka's poll returns once records are there.
            n = _api.consume_batch_queue(self._queue, 0, messages, <size_t>max_records)
            if self._woken.exchange(0):
                timeout_ms = 0
            if n == 0 and timeout_ms > 0:
                first = _api.consume_queue(self._queue, timeout_ms)
                if first != NULL:
                    messages[0] = first
                    n = 1
                    if max_records > 1:
                        more = _api.consume_batch_queue(
                            self._queue, 0, messages + 1, <size_t>(max_records - 1)
                        )
                        if more > 0:
                            n += more
        self.flush_logs()
        if n < 0:
            raise _kafka_error(ERR__FAIL, "consume failed: librdkafka returned an error instead of records")
        batches = []
        errors = []
        cdef Py_ssize_t start = 0, stop
        try:
            while start < n:
                if messages[start].err != RD_KAFKA_RESP_ERR_NO_ERROR:
                    errors.append(self._message_error(messages[start]))
                    start += 1
                    continue
                stop = start + 1
                while (
                    stop < n
                    and messages[stop].err == RD_KAFKA_RESP_ERR_NO_ERROR
                    and messages[stop].rkt == messages[start].rkt
                    and messages[stop].partition == messages[start].partition
                ):
                    stop += 1
                batches.append(self._run(messages, start, stop))
                start = stop
        finally:
            with nogil:
                for start in range(n):
                    _api.message_destroy(messages[start])
        return batches, errors

    cdef tuple _message_error(self, rd_kafka_message_t* message):
        topic = None
        if message.rkt != NULL:
            topic = (<bytes>_api.topic_name(message.rkt)).decode(errors="replace")
        if message.payload != NULL and message.len > 0:
            reason = (<char*>message.payload)[:message.len].decode(errors="replace")
        else:
            reason = _err2str(message.err)
        return (topic, message.partition, KafkaError(message.err, reason))

    cdef tuple _run(self, rd_kafka_message_t** messages, Py_ssize_t start, Py_ssize_t stop):
        """One partition's consecutive records as a RecordBatch."""
        cdef rd_kafka_message_t* m
        cdef Py_ssize_t i, nbytes = 0, with_headers = 0
        cdef int tstype
        cdef int64_t ts
        cdef rd_kafka_headers_t* headers
        cdef RecordBatchBuilder builder = RecordBatchBuilder()
        cdef char* flags = <char*>malloc(stop - start)
        if flags == NULL:
            raise MemoryError()
        try:
            with nogil:
                for i in range(start, stop):
                    nbytes += <Py_ssize_t>messages[i].key_len + <Py_ssize_t>messages[i].len
                builder.reserve(stop - start, nbytes)
                for i in range(start, stop):
                    m = messages[i]
                    ts = _api.message_timestamp(m, &tstype)
                    builder.append(
                        <const char*>m.key,
                        <Py_ssize_t>m.key_len if m.key != NULL else -1,
                        <const char*>m.payload,
                        <Py_ssize_t>m.len if m.payload != NULL else -1,
                        ts,
                        m.partition,
                        m.offset,
                    )
                    flags[i - start] = _api.message_headers(m, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR
                    with_headers += flags[i - start]
            if with_headers:
                for i in range(start, stop):
                    if flags[i - start]:
                        _api.message_headers(messages[i], &headers)
                        builder._set_headers(i - start, _raw_headers(headers))
        finally:
            free(flags)
        topic = (<bytes>_api.topic_name(messages[start].rkt)).decode()
        return (topic, messages[start].partition, builder.finish())


cdef rd_kafka_topic_partition_list_t* _partition_list(partitions, bint offsets) except NULL:
    """A librdkafka partition list of confluent-kafka TopicPartitions (with their offsets)."""
    cdef rd_kafka_topic_partition_list_t* tpl = _api.tpl_new(max(1, len(partitions)))
    cdef rd_kafka_topic_partition_t* entry
    cdef bytes topic
    for tp in partitions:
        topic = tp.topic.encode()
        entry = _api.tpl_add(tpl, topic, tp.partition)
        if offsets:
            entry.offset = tp.offset
    return tpl


cdef int _first_partition_error(rd_kafka_topic_partition_list_t* tpl) noexcept nogil:
    cdef int i
    for i in range(tpl.cnt):
        if tpl.elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR:
            return tpl.elems[i].err
    return RD_KAFKA_RESP_ERR_NO_ERROR


cdef bytes _raw_headers(rd_kafka_headers_t* headers):
    """A record's headers in a batch's raw layout (record_batch.pxd): one bytes object, decoded
    into [(name, bytes or None)] only if Python code asks for them."""
    cdef size_t i = 0, size
    cdef const char* name
    cdef const void* value
    cdef Py_ssize_t total = 0
    cdef bytes raw
    cdef char* p
    while _api.header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR:
        total += raw_header_size(<Py_ssize_t>strlen(name), <Py_ssize_t>size if value != NULL else -1)
        i += 1
    raw = PyBytes_FromStringAndSize(NULL, total)
    p = PyBytes_AS_STRING(raw)
    i = 0
    while _api.header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR:
        p = raw_header_put(p, name, <Py_ssize_t>strlen(name), <const char*>value, <Py_ssize_t>size)
        i += 1
    return raw


cdef class KafkaSender(_Client):
    """A librdkafka producer that produces whole RecordBatches (see the module docstring).
    ``settings`` are librdkafka settings; ``logger`` receives librdkafka's log lines. Failed
    deliveries are kept until ``take_failures``. A transaction call may run on a helper thread
    while the owner waits for it."""

    cdef dict _topics  # topic name -> rd_kafka_topic_t* (as int), kept until close

    def __cinit__(self, dict settings, object logger):
        self._topics = {}
        self._open(RD_KAFKA_PRODUCER, settings, logger)

    def __dealloc__(self):
        self._destroy()

    cdef void _destroy(self) noexcept:
        cdef rd_kafka_t* rk = self._rk
        if rk == NULL:
            return
        self._rk = NULL
        for handle in self._topics.values():
            _api.topic_destroy(<rd_kafka_topic_t*><size_t>handle)
        self._topics = {}
        with nogil:
            _api.destroy(rk)

    def close(self):
        """Destroy the client without waiting for what is queued (flush first; idempotent)."""
        self._destroy()
        self.flush_logs()

    cdef rd_kafka_topic_t* _topic(self, str topic) except NULL:
        handle = self._topics.get(topic)
        if handle is not None:
            return <rd_kafka_topic_t*><size_t>handle
        cdef bytes name = topic.encode()
        cdef rd_kafka_topic_t* rkt = _api.topic_new(self._rk, name, NULL)
        if rkt == NULL:
            raise _kafka_error(ERR__INVALID_ARG, f"Cannot produce to topic {topic!r}: librdkafka refused it")
        self._topics[topic] = <size_t>rkt
        return rkt

    # -------------------------------------------------------------- producing

    def send_batch(self, str topic, int partition, RecordBatch batch, refusals):
        """Queue every record of ``batch`` for ``topic``-``partition`` (librdkafka copies them;
        a timestamp of -1 becomes "now"). When librdkafka's queue is full, delivery reports are
        served until there is room. Returns [(index, KafkaError)] of the records librdkafka
        refused with an error code in ``refusals`` (for good: too large, invalid); raises
        KafkaException for any other refusal (records before it are queued)."""
        self._check_open()
        cdef rd_kafka_topic_t* rkt = self._topic(topic)
        cdef Py_ssize_t n = batch.n, i = 0
        cdef int code
        cdef rd_kafka_error_t* error = NULL
        cdef rd_kafka_headers_t* headers
        cdef bint has_headers = batch._headers is not None
        refused = []
        while i < n:
            headers = NULL
            if has_headers:
                headers = _c_headers(batch.c_headers(i))
            with nogil:
                # Records without headers are queued in one stretch without the GIL.
                while True:
                    error = ks_produce_one(
                        _api.produceva, self._rk, rkt, partition,
                        batch.key_ptr(i), batch.key_len(i), batch.value_ptr(i), batch.value_len(i),
                        batch.ts(i) if batch.ts(i) > 0 else 0, headers,
                    )
                    if error != NULL:
                        code = _api.error_code(error)
                        if code == ERR__QUEUE_FULL:
                            _api.error_destroy(error)
                            error = NULL
                            _api.poll(self._rk, 100)
                            continue
                        break
                    headers = NULL  # the queued message owns them now
                    i += 1
                    if i >= n or has_headers:
                        break
            if error != NULL:
                if headers != NULL:
                    _api.headers_destroy(headers)
                if code in refusals:
                    refused.append((i, _error_of(error, "").args[0]))
                    error = NULL
                    i += 1
                    continue
                raise _error_of(error, f"Unable to produce message to {topic}-{partition}")
        return refused

    def poll(self, double timeout=0.0):
        """Serve delivery reports (failures are kept); returns how many events were served."""
        self._check_open()
        cdef int timeout_ms = 0 if timeout <= 0 else <int>(timeout * 1000)
        cdef int served
        with nogil:
            served = _api.poll(self._rk, timeout_ms)
        self.flush_logs()
        return served

    def flush(self, timeout=-1):
        """Wait up to ``timeout`` seconds (-1: for ever) until every queued record was delivered
        or failed; returns how many are still queued."""
        self._check_open()
        cdef int timeout_ms = _timeout_ms(timeout)
        cdef int left
        with nogil:
            _api.flush(self._rk, timeout_ms)
            left = _api.outq_len(self._rk)
        self.flush_logs()
        return left

    def take_failures(self):
        """The records that failed delivery since the last call: [(KafkaError, topic, partition,
        key, value, timestamp, headers)], in the order librdkafka reported them."""
        cdef vector[ks_failure] failures
        ks_failures_take(self._sink, failures)
        cdef size_t i, j
        result = []
        for i in range(failures.size()):
            headers = None
            if failures[i].header_names.size():
                headers = [
                    (
                        failures[i].header_names[j].decode(errors="replace"),
                        _bytes(failures[i].header_values[j]) if failures[i].header_present[j] else None,
                    )
                    for j in range(failures[i].header_names.size())
                ]
            result.append(
                (
                    KafkaError(failures[i].err, _err2str(failures[i].err)),
                    failures[i].topic.decode(errors="replace"),
                    failures[i].partition,
                    _bytes(failures[i].key) if failures[i].has_key else None,
                    _bytes(failures[i].value) if failures[i].has_value else None,
                    failures[i].timestamp,
                    headers,
                )
            )
        return result

    # -------------------------------------------------------------- transactions

    def init_transactions(self, timeout=-1):
        self._txn_call(0, timeout)

    def begin_transaction(self):
        self._txn_call(1, -1)

    def commit_transaction(self, timeout=-1):
        self._txn_call(2, timeout)

    def abort_transaction(self, timeout=-1):
        self._txn_call(3, timeout)

    cdef int _txn_call(self, int which, timeout) except -1:
        self._check_open()
        cdef int timeout_ms = _timeout_ms(timeout)
        cdef rd_kafka_error_t* error
        with nogil:
            if which == 0:
                error = _api.init_transactions(self._rk, timeout_ms)
            elif which == 1:
                error = _api.begin_transaction(self._rk)
            elif which == 2:
                error = _api.commit_transaction(self._rk, timeout_ms)
            else:
                error = _api.abort_transaction(self._rk, timeout_ms)
        self.flush_logs()
        if error != NULL:
            raise _error_of(error, "")
        return 0

    def send_offsets_to_transaction(self, positions, bytes group_metadata, timeout=-1):
        """Add the offsets (confluent-kafka TopicPartitions) to the transaction for the group whose
        metadata ``group_metadata`` is (confluent-kafka's ``consumer_group_metadata()``)."""
        self._check_open()
        cdef rd_kafka_consumer_group_metadata_t* cgmd = NULL
        cdef const char* buffer = group_metadata
        cdef rd_kafka_error_t* error = _api.cgmd_read(&cgmd, buffer, len(group_metadata))
        if error != NULL:
            raise _error_of(error, "Reading the consumer group metadata")
        cdef rd_kafka_topic_partition_list_t* tpl = _partition_list(positions, True)
        cdef int timeout_ms = _timeout_ms(timeout)
        cdef int i
        # Each offset's metadata (Kafka Streams keeps a partition's stream time there) points into
        # these bytes for the call, which copies the list; the pointers are cleared before the
        # list is destroyed, so librdkafka never frees memory it did not allocate.
        cdef list metadata = [
            p.metadata.encode() if getattr(p, "metadata", None) else None for p in positions
        ]
        cdef bytes encoded
        for i in range(tpl.cnt):
            if metadata[i] is not None:
                encoded = metadata[i]
                tpl.elems[i].metadata = <void*>PyBytes_AS_STRING(encoded)
                tpl.elems[i].metadata_size = <size_t>PyBytes_GET_SIZE(encoded)
        with nogil:
            error = _api.send_offsets_to_transaction(self._rk, tpl, cgmd, timeout_ms)
            for i in range(tpl.cnt):
                tpl.elems[i].metadata = NULL
                tpl.elems[i].metadata_size = 0
            _api.tpl_destroy(tpl)
            _api.cgmd_destroy(cgmd)
        self.flush_logs()
        if error != NULL:
            raise _error_of(error, "")


cdef bytes _bytes(const string& data):
    return PyBytes_FromStringAndSize(data.data(), <Py_ssize_t>data.size())


cdef rd_kafka_headers_t* _c_raw_headers(bytes raw) except NULL:
    cdef const char* p = PyBytes_AS_STRING(raw)
    cdef Py_ssize_t remaining = PyBytes_GET_SIZE(raw), used, name_len, value_len
    cdef const char* name
    cdef const char* value
    cdef rd_kafka_headers_t* result = _api.headers_new(4)
    while remaining > 0:
        used = raw_header_get(p, remaining, &name, &name_len, &value, &value_len)
        if used < 0:
            _api.headers_destroy(result)
            raise ValueError("malformed raw record headers")
        _api.header_add(result, name, name_len, value, value_len)
        p += used
        remaining -= used
    return result


cdef rd_kafka_headers_t* _c_headers(object headers) except? NULL:
    """librdkafka headers for a record's headers as a batch holds them: [(name, bytes or None)],
    raw (record_batch.pxd) or None (no headers)."""
    if not headers:
        return NULL
    if type(headers) is bytes:
        return _c_raw_headers(<bytes>headers)
    cdef rd_kafka_headers_t* result = _api.headers_new(len(headers))
    cdef bytes name_b
    cdef const char* value_c
    cdef Py_ssize_t value_len
    for name, value in headers:
        name_b = name.encode() if isinstance(name, str) else bytes(name)
        if value is None:
            value_c = NULL
            value_len = 0
        else:
            value_c = <bytes>value
            value_len = len(value)
        _api.header_add(result, name_b, len(name_b), value_c, value_len)
    return result
