# cython: language_level=3
"""The per-record core of the store layers below a metered store, in C.

Without a record cache every update of a DSL aggregation (and every ``put`` of a Processor API
store) goes through the change-logging layer and the store below it. Those were Python calls on
each write: the inner store's put, the database's buffered put, the current record's timestamp,
the changelog send. Here they are C, and the layers' Python methods call them:

- ``ChangelogSender``: a change-logging layer's way to its changelog partition (the task's record
  collector, the changelog topic and the task's partition, bound once). A change it logs carries
  the current record's timestamp, read from the task's context; a timestamped store's change
  carries its value's own timestamp instead, and the value without it (Kafka's changelog format).
- ``BufferedDatabase``: the point read and write of a database whose writes wait in a dict until
  they are written as one batch (a RocksDB database: ``kstreams.state.rocksdb``). Reads see
  buffered writes first.
- ``DatabaseStore``: a key-value store's get and put over its open ``BufferedDatabase``.
- ``LoggedPut``: a change-logging key-value layer's put: the store below written, then the change
  logged.
- ``SegmentIndex``: which segment of a segmented (window or session) store a timestamp's record is
  written to or read from, and the store's stream time.
- ``UniqueWindowPoints``: a segmented window store's point read and write of one window, when it
  keeps one value per window (no duplicates); ``LoggedWindowPoints`` the change-logging window
  layer's over it.

The Python classes that derive from these (``RocksDBDatabase``, ``RocksDBKeyValueStore``,
``Segments``) keep everything else: opening, creating and dropping, batch writes, scans, closing.
"""

import logging

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy

from kstreams._native.per_record cimport ContextRouting, RecordPosition
from kstreams._native.record_batch cimport RecordBatch
from kstreams._native.record_collector cimport RecordCollector

__all__ = [
    "BufferedDatabase",
    "ChangelogSender",
    "DatabaseStore",
    "LoggedPut",
    "LoggedWindowPoints",
    "SegmentIndex",
    "UniqueWindowPoints",
    "stamped_changes",
]

_window_logger = logging.getLogger("kstreams.state.rocksdb_window")


cdef class ChangelogSender:
    """Sends a store's changes to its changelog partition through the task's record collector.

    ``sender(key, value, timestamp)`` sends one change (value None: a tombstone);
    ``sender.log(key, value)`` sends it with the timestamp of the record the task's ``context`` is
    processing (``context.record_context.timestamp``), as a change-logging layer does on a put.
    Keys and values are bytes. Changelog records carry no headers.

    After ``split_timestamps()`` (the sender of a timestamped store, whose values are an 8-byte
    big-endian timestamp then the value's bytes) a value goes out as Kafka's
    ``ChangeLoggingTimestampedKeyValueBytesStore`` logs it: the plain value, in a record stamped
    with the value's timestamp; a tombstone keeps the timestamp it is given. Restoring puts the
    record's timestamp back in front (``Task.register_store``), so Kafka Streams and kstreams read
    each other's changelogs."""

    def __init__(self, RecordCollector collector not None, str topic not None, int32_t partition,
                 context):
        self._collector = collector
        self._topic = topic
        self._partition = partition
        self._context = context
        self._split_timestamps = False

    def split_timestamps(self):
        """Log the values of a timestamped store in Kafka's changelog format (see the class)."""
        self._split_timestamps = True

    @property
    def splits_timestamps(self):
        return self._split_timestamps

    def send_batch(self, batch):
        """Send a batch of changes (key, value or None, timestamp), each as ``sender(...)`` would."""
        if self._split_timestamps:
            self._collector.c_send_batch_timestamped(self._topic, self._partition, <RecordBatch?>batch)
        else:
            self._collector.send_batch(self._topic, self._partition, batch)

    @property
    def topic(self):
        return self._topic

    @property
    def partition(self):
        return self._partition

    def __call__(self, key, value, int64_t timestamp):
        self._send(key, value, timestamp)

    def log(self, key, value):
        """Send a change with the current record's timestamp."""
        self._log(key, value)

    cdef int _send(self, object key, object value, int64_t timestamp) except -1:
        cdef bytes timestamped
        if self._split_timestamps and value is not None:
            timestamped = bytes(value)
            if PyBytes_GET_SIZE(timestamped) < 8:
                raise ValueError(
                    f"A change of a timestamped store for changelog {self._topic} has a value of "
                    f"{PyBytes_GET_SIZE(timestamped)} bytes: it must start with an 8-byte timestamp"
                )
            timestamp = read_be64(PyBytes_AS_STRING(timestamped))
            value = timestamped[8:]
        return self._collector.c_send_bytes(self._topic, self._partition, key, value, timestamp, None)

    cdef int _log(self, object key, object value) except -1:
        context = self._context
        # A task's context is a ContextRouting; its record context moves along each batch (and
        # is swapped for a punctuation's), so it is read on every change.
        position = (<ContextRouting>context).record_context if isinstance(context, ContextRouting) \
            else context.record_context
        if isinstance(position, RecordPosition):
            return self._send(key, value, (<RecordPosition>position).timestamp)
        return self._send(key, value, position.timestamp)


cdef class BufferedDatabase:
    """Point reads and writes of a database whose writes wait in ``_pending`` (key -> value, None
    deleting the key) until the subclass's ``write_pending()`` writes them as one batch, which
    ``put`` calls once more than ``max_pending`` writes wait. ``_db`` is the open database, whose
    ``get(key)`` gives a stored value or None; once it is None (closed), reads and writes call the
    subclass's ``_database()``, which raises saying why."""

    def __init__(self, Py_ssize_t max_pending):
        self._pending = {}
        self._db = None
        self.max_pending = max_pending

    def get(self, key):
        """The value for ``key``: a buffered write's, else the database's (None when absent)."""
        return self._get(key)

    def put(self, key, value):
        """Buffer a write of ``value`` (None deletes) for ``key``."""
        self._put(key, value)

    cdef object _get(self, object key):
        hit = self._pending.get(key, _ABSENT)
        if hit is not _ABSENT:
            return hit
        db = self._db
        if db is None:
            db = self._database()
        return db.get(key)

    cdef int _put(self, object key, object value) except -1:
        if self._db is None:
            self._database()
        pending = self._pending
        pending[key] = value
        if len(pending) > self.max_pending:
            self.write_pending()
        return 0


# No buffered write (None is one: a deletion).
cdef object _ABSENT = object()


def stamped_changes(list records not None):
    """Changelog records ``(key, value, timestamp)`` of a timestamped store as the store holds
    them: ``(key, timestamp + value)``, the timestamp as 8 big-endian bytes in front (Kafka's
    ``RecordConverters.rawValueToTimestampedValue``); a None value (a deletion) stays None."""
    cdef list out = [None] * len(records)
    cdef Py_ssize_t i, size
    cdef tuple record
    cdef bytes value, stamped
    cdef char* into
    for i in range(len(records)):
        record = <tuple?>records[i]
        if record[1] is None:
            out[i] = (record[0], None)
            continue
        value = <bytes?>record[1]
        size = PyBytes_GET_SIZE(value)
        stamped = PyBytes_FromStringAndSize(NULL, size + 8)
        into = PyBytes_AS_STRING(stamped)
        write_be64(into, <int64_t>record[2])
        memcpy(into + 8, PyBytes_AS_STRING(value), size)
        out[i] = (record[0], stamped)
    return out


cdef class DatabaseStore:
    """A key-value store of bytes whose point reads and writes go to its open
    ``BufferedDatabase`` (``_db``, None until the store is opened; the subclass's ``_database()``
    raises when it is not open)."""

    def get(self, key):
        """The value stored for ``key``, or None."""
        return self._open()._get(key)

    def put(self, key, value):
        """Store ``value`` for ``key`` (None deletes it)."""
        self._open()._put(key, value)

    cdef BufferedDatabase _open(self):
        db = self._db
        if db is None:
            self._database()  # raises, saying the store is not open
            raise ValueError(f"{type(self).__name__} is not open")
        return db


cdef class LoggedPut:
    """A change-logging key-value layer's ``put(key, value)``: the store below written, then the
    change logged with the current record's timestamp by ``log_change``: a ``ChangelogSender``
    (its ``log``, called in C) or a callable of (key, value)."""

    def __init__(self, inner, log_change):
        self._inner_put = inner.put
        self._points = inner if isinstance(inner, DatabaseStore) else None
        self._log_change = log_change
        self._sender = log_change if isinstance(log_change, ChangelogSender) else None

    def __call__(self, key, value):
        self._put(key, value)

    cdef int _put(self, object key, object value) except -1:
        if self._points is not None:
            self._points._open()._put(key, value)
        else:
            self._inner_put(key, value)
        if self._sender is not None:
            return self._sender._log(key, value)
        self._log_change(key, value)
        return 0


cdef inline int64_t _floor_div(int64_t a, int64_t b) noexcept nogil:
    """``a // b`` as Python rounds it (towards minus infinity), for b > 0."""
    cdef int64_t q = a / b
    if a % b != 0 and a < 0:
        q -= 1
    return q


cdef class SegmentIndex:
    """The open segments of a segmented store (``_segments``: segment id -> ``BufferedDatabase``;
    segment ``i`` holds timestamps in ``[i * interval, (i + 1) * interval)``), its observed stream
    time (the largest timestamp written), and which segment a record goes to.

    ``for_write`` advances stream time; once stream time moves the oldest live segment past every
    open one's id (``_live_from``, unknown until ``_live_known``), it calls the subclass's
    ``_drop_expired(min_live_segment)``, and for a segment not open yet its ``_create(id)``.
    Timestamps older than the retention (at or below stream time - retention) have no segment.
    ``_directory`` is None until the subclass opens the store (``_closed()`` then raises)."""

    def __init__(self, int64_t retention_ms, int64_t interval):
        if interval <= 0:
            raise ValueError(f"a segment interval must be positive, not {interval}")
        self._segments = {}
        self.retention_ms = retention_ms
        self.interval = interval
        self.observed_stream_time = -1  # no record yet (inner_windowed.NO_TIMESTAMP)
        self._live_known = False
        self._live_from = 0
        self._directory = None

    def min_live(self):
        """The oldest timestamp still within the retention."""
        return self.observed_stream_time - self.retention_ms + 1

    def for_write(self, int64_t timestamp):
        """The segment a record of this timestamp goes to (created when missing), or None when
        the timestamp is already past the retention. Advances stream time and drops expired
        segments."""
        return self._for_write(timestamp)

    def for_read(self, int64_t timestamp):
        """The segment holding this timestamp, if it is open and within the retention."""
        return self._for_read(timestamp)

    cdef BufferedDatabase _for_write(self, int64_t timestamp):
        if self._directory is None:
            self._closed()
            raise ValueError("the segments are not open")
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp
        cdef int64_t min_live_segment = _floor_div(self.observed_stream_time - self.retention_ms,
                                                   self.interval)
        if not self._live_known or min_live_segment > self._live_from:
            self._drop_expired(min_live_segment)
            # Segments made from now on hold timestamps within the retention: none is older.
            self._live_from = min_live_segment
            self._live_known = True
        if timestamp <= self.observed_stream_time - self.retention_ms:
            return None
        segment_id = _floor_div(timestamp, self.interval)
        segment = self._segments.get(segment_id)
        if segment is None:
            segment = self._create(segment_id)
        return segment

    cdef BufferedDatabase _for_read(self, int64_t timestamp):
        if timestamp <= self.observed_stream_time - self.retention_ms:
            return None
        return self._segments.get(_floor_div(timestamp, self.interval))


cdef class UniqueWindowPoints:
    """Point reads and writes of one window of a segmented window store that keeps one value per
    window: the value lives in the segment of the window's start, under ``window_key(key,
    start)``. A write to a window past the retention is skipped (logged at DEBUG), and such a
    window reads as absent."""

    def __init__(self, SegmentIndex segments not None, str store_name not None):
        self._segments = segments
        self._store_name = store_name

    def put(self, bytes key not None, value, int64_t start):
        """Write ``value`` (None deletes) for ``key`` in the window starting at ``start``."""
        self._put(key, value, start)

    def fetch(self, bytes key not None, int64_t start):
        """The value of ``key`` in the window starting at ``start``, or None."""
        return self._fetch(key, start)

    cdef int _put(self, bytes key, object value, int64_t start) except -1:
        segment = self._segments._for_write(start)
        if segment is None:
            _window_logger.debug("Store %s: skipping a write to expired window %d.", self._store_name, start)
            return 0
        return segment._put(window_key(key, start), value)

    cdef object _fetch(self, bytes key, int64_t start):
        segment = self._segments._for_read(start)
        if segment is None:
            return None
        return segment._get(window_key(key, start))


cdef class LoggedWindowPoints:
    """A change-logging window layer's point write over ``UniqueWindowPoints``: the window
    written, then the change sent to the changelog under (key, window start, sequence number 0),
    with the current record's timestamp; and its point read, which passes through."""

    def __init__(self, UniqueWindowPoints points not None, ChangelogSender sender not None):
        self._points = points
        self._sender = sender

    def put(self, bytes key not None, value, int64_t start):
        """Write and log ``value`` (None deletes) for ``key`` in the window starting at ``start``."""
        self._put(key, value, start)

    def fetch(self, bytes key not None, int64_t start):
        """The value of ``key`` in the window starting at ``start``, or None."""
        return self._points._fetch(key, start)

    cdef int _put(self, bytes key, object value, int64_t start) except -1:
        self._points._put(key, value, start)
        return self._sender._log(_changelog_key(key, start), value)

    cdef object _fetch(self, bytes key, int64_t start):
        return self._points._fetch(key, start)


cdef bytes window_key(bytes key, int64_t start):
    """``key`` followed by the 8-byte big-endian window start (``window_key_schema.window_key``)."""
    cdef Py_ssize_t n = PyBytes_GET_SIZE(key)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, n + 8)
    cdef char* p = PyBytes_AS_STRING(out)
    memcpy(p, PyBytes_AS_STRING(key), n)
    write_be64(p + n, start)
    return out


cdef bytes _changelog_key(bytes key, int64_t start):
    """``key``, the 8-byte window start and a 4-byte sequence number 0, all big-endian
    (``window_key_schema.changelog_key(key, start, 0)``)."""
    cdef Py_ssize_t n = PyBytes_GET_SIZE(key)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, n + 12)
    cdef char* p = PyBytes_AS_STRING(out)
    memcpy(p, PyBytes_AS_STRING(key), n)
    write_be64(p + n, start)
    p[n + 8] = p[n + 9] = p[n + 10] = p[n + 11] = 0
    return out
