# cython: language_level=3
"""KafkaFetcher: a librdkafka consumer that fetches straight into RecordBatches.

confluent-kafka hands out one Python ``Message`` per record (its key, value and topic copied
into new objects, a tuple per timestamp, each object tracked by the garbage collector), and the
adapter then reads each field back with a method call: measured on a broker, ~1.1 us of the
polling thread per record before any processing. A KafkaFetcher drives its own librdkafka
consumer and copies each fetched record's bytes into a RecordBatch's arena without the GIL and
without a Python object per record.

It is the consumer the adapter uses where it only fetches from partitions it assigns itself:
manually assigned consumers (restore, global) and the fetching consumer of a group member whose
partitions its assignor decides (the group membership stays a confluent-kafka consumer). Its
methods have the names and arguments of confluent-kafka's ``Consumer`` for what it does, and
raise confluent-kafka's ``KafkaException``, so the adapter treats both alike.

librdkafka is the one confluent-kafka loaded (``load`` is given its path): its functions are
looked up once with ``dlsym``, so kstreams builds without librdkafka's headers and always runs
the library version confluent-kafka ships. The structs declared below are librdkafka's public,
stable ABI (``rd_kafka_message_t``, ``rd_kafka_topic_partition_t``).

librdkafka's log lines arrive on its own threads; they are queued in C and logged to Python
logging by the thread that uses the fetcher (each ``consume_batches`` and ``close``).
"""

from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport strlen
from posix.dlfcn cimport RTLD_LOCAL, RTLD_NOW, dlerror, dlopen, dlsym

from libcpp.string cimport string
from libcpp.vector cimport vector

from kstreams._native.record_batch cimport RecordBatchBuilder

import logging

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

__all__ = ["KafkaFetcher", "load", "loaded"]


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

    struct ks_log_line { int level; std::string facility; std::string text; };

    // librdkafka's log lines, queued by its threads until the fetcher's user logs them.
    struct ks_log_sink {
        std::mutex lock;
        std::vector<ks_log_line> lines;
        long dropped = 0;
    };

    static const size_t KS_LOG_LIMIT = 1000;

    static void ks_log_push(ks_log_sink *sink, int level, const char *facility, const char *text) {
        std::lock_guard<std::mutex> guard(sink->lock);
        if (sink->lines.size() >= KS_LOG_LIMIT) { sink->dropped++; return; }
        sink->lines.push_back(ks_log_line{level, facility ? facility : "", text ? text : ""});
    }

    static long ks_log_take(ks_log_sink *sink, std::vector<ks_log_line> &out) {
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
        int err
    ctypedef struct rd_kafka_topic_partition_list_t "ks_rd_kafka_topic_partition_list_t":
        int cnt
        rd_kafka_topic_partition_t *elems

    cdef cppclass ks_log_line:
        int level
        string facility
        string text
    cdef cppclass ks_log_sink:
        pass
    void ks_log_push(ks_log_sink *sink, int level, const char *facility, const char *text)
    long ks_log_take(ks_log_sink *sink, vector[ks_log_line] &out)

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

cdef Api _api
cdef bint _loaded = False

cdef enum:
    RD_KAFKA_CONSUMER = 1
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
    _loaded = True


def loaded():
    """Whether ``load`` succeeded."""
    return _loaded


cdef void _log_cb(const rd_kafka_t* rk, int level, const char* facility, const char* text) noexcept nogil:
    cdef ks_log_sink* sink = <ks_log_sink*>_api.opaque(rk)
    if sink != NULL:
        ks_log_push(sink, level, facility, text)


cdef object _kafka_error(int code, str reason, bint fatal=False, bint retriable=False):
    return KafkaException(KafkaError(code, reason, fatal=fatal, retriable=retriable))


cdef object _error_of(rd_kafka_error_t* error, str what):
    """A KafkaException for ``error`` (destroyed here)."""
    cdef int code = _api.error_code(error)
    cdef str reason = (<bytes>_api.error_string(error)).decode(errors="replace")
    cdef bint fatal = _api.error_is_fatal(error)
    cdef bint retriable = _api.error_is_retriable(error)
    _api.error_destroy(error)
    return _kafka_error(code, f"{what}: {reason}", fatal, retriable)


cdef str _err2str(int code):
    return (<bytes>_api.err2str(code)).decode(errors="replace")


cdef class KafkaFetcher:
    """A librdkafka consumer that only fetches partitions assigned to it (see the module
    docstring). ``settings`` are librdkafka settings (strings); ``logger`` receives librdkafka's
    log lines. Not thread-safe: one thread uses it at a time."""

    cdef rd_kafka_t* _rk
    cdef rd_kafka_queue_t* _queue
    cdef ks_log_sink* _sink
    cdef rd_kafka_message_t** _messages
    cdef Py_ssize_t _capacity
    cdef object _logger
    cdef str _name

    def __cinit__(self, dict settings, object logger):
        if not _loaded:
            raise RuntimeError("kafka_fetcher.load() must be called first")
        self._logger = logger
        self._sink = new ks_log_sink()
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
        _api.conf_set_opaque(conf, <void*>self._sink)
        # rd_kafka_new owns conf from here on, also when it fails.
        self._rk = _api.new(RD_KAFKA_CONSUMER, conf, errstr, ERRSTR_SIZE)
        if self._rk == NULL:
            _api.conf_destroy(conf)
            raise _kafka_error(ERR__INVALID_ARG, (<bytes>errstr).decode(errors="replace"))
        _api.poll_set_consumer(self._rk)
        self._queue = _api.queue_get_consumer(self._rk)
        self._name = (<bytes>_api.name(self._rk)).decode(errors="replace")

    def __dealloc__(self):
        self._shutdown(False)
        if self._sink != NULL:
            del self._sink
            self._sink = NULL

    cdef void _shutdown(self, bint close_consumer) noexcept:
        cdef rd_kafka_t* rk = self._rk
        if rk == NULL:
            return
        self._rk = NULL
        with nogil:
            if self._queue != NULL:
                _api.queue_destroy(self._queue)
                self._queue = NULL
            if close_consumer:
                _api.consumer_close(rk)
            _api.destroy(rk)
        if self._messages != NULL:
            free(self._messages)
            self._messages = NULL

    cdef int _check_open(self) except -1:
        if self._rk == NULL:
            raise RuntimeError("Consumer closed")
        return 0

    def close(self):
        """Leave nothing assigned and destroy the client (idempotent)."""
        self._shutdown(True)
        self.flush_logs()

    def flush_logs(self):
        """Log what librdkafka logged since the last call."""
        cdef vector[ks_log_line] lines
        cdef long dropped = ks_log_take(self._sink, lines)
        cdef size_t i
        for i in range(lines.size()):
            self._logger.log(
                _LEVELS.get(lines[i].level, logging.INFO),
                "%s [%s] %s",
                self._name,
                lines[i].facility.decode(errors="replace"),
                lines[i].text.decode(errors="replace"),
            )
        if dropped:
            self._logger.warning("%s: %d librdkafka log lines dropped (too many at once)", self._name, dropped)

    # -------------------------------------------------------------- partition lists

    cdef rd_kafka_topic_partition_list_t* _list(self, partitions, bint offsets) except NULL:
        cdef rd_kafka_topic_partition_list_t* tpl = _api.tpl_new(max(1, len(partitions)))
        cdef rd_kafka_topic_partition_t* entry
        cdef bytes topic
        for tp in partitions:
            topic = tp.topic.encode()
            entry = _api.tpl_add(tpl, topic, tp.partition)
            if offsets:
                entry.offset = tp.offset
        return tpl

    cdef list _to_python(self, rd_kafka_topic_partition_list_t* tpl):
        cdef int i
        result = []
        for i in range(tpl.cnt):
            tp = KafkaTopicPartition(
                (<bytes>tpl.elems[i].topic).decode(), tpl.elems[i].partition, tpl.elems[i].offset
            )
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
        cdef rd_kafka_topic_partition_list_t* tpl = self._list(partitions, assign)
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
        cdef rd_kafka_topic_partition_list_t* tpl = self._list(partitions, False)
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
        cdef rd_kafka_topic_partition_list_t* tpl = self._list([partition], True)
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
        cdef rd_kafka_topic_partition_list_t* tpl = self._list(partitions, False)
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
        cdef rd_kafka_topic_partition_list_t* tpl = self._list(partitions, False)
        cdef int timeout_ms = -1 if timeout is None or timeout < 0 else int(timeout * 1000)
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
        cdef int timeout_ms = -1 if timeout is None or timeout < 0 else int(timeout * 1000)
        cdef int64_t low = -1, high = -1
        cdef int err
        with nogil:
            err = _api.query_watermark_offsets(self._rk, topic_c, part, &low, &high, timeout_ms)
        if err != RD_KAFKA_RESP_ERR_NO_ERROR:
            raise _kafka_error(err, f"get_watermark_offsets: {_err2str(err)}", fatal=False, retriable=err == ERR__TIMED_OUT)
        return (low, high)

    # -------------------------------------------------------------- fetching

    def consume_batches(self, Py_ssize_t max_records, double timeout):
        """Wait up to ``timeout`` seconds for records (returning as soon as some arrived) and take
        up to ``max_records``: ([(topic, partition, RecordBatch)], [(topic or None, partition,
        KafkaError)]). A partition's records come as one batch per run of its records, in order."""
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
        cdef Py_ssize_t n
        with nogil:
            n = _api.consume_batch_queue(self._queue, timeout_ms, messages, <size_t>max_records)
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
                        builder._set_headers(i - start, _headers_list(headers))
        finally:
            free(flags)
        topic = (<bytes>_api.topic_name(messages[start].rkt)).decode()
        return (topic, messages[start].partition, builder.finish())


cdef int _first_partition_error(rd_kafka_topic_partition_list_t* tpl) noexcept nogil:
    cdef int i
    for i in range(tpl.cnt):
        if tpl.elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR:
            return tpl.elems[i].err
    return RD_KAFKA_RESP_ERR_NO_ERROR


cdef list _headers_list(rd_kafka_headers_t* headers):
    """A record's headers as confluent-kafka gives them: [(name, bytes or None)]."""
    cdef size_t i = 0, size
    cdef const char* name
    cdef const void* value
    result = []
    while _api.header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR:
        result.append(
            ((<bytes>name).decode(errors="replace"), None if value == NULL else (<char*>value)[:size])
        )
        i += 1
    return result
