"""Record and FixedKeyRecord: the immutable (key, value, timestamp, headers) that flows between
processors; Change, the (new, old) value a table's processors forward to each other.

Every processor hop makes one (``with_value``, ``Record(...)``), so its cost is paid several times
per input record on the per-record path: as a C type it is made in a fifth of the time a frozen
dataclass takes. It behaves as the frozen dataclass it replaces: read-only attributes, equality
and hash over the four fields, the dataclass repr, ``match`` by position, pickling, and
``Record[K, V]`` in annotations. ``dataclasses.replace`` does not apply to it: use the ``with_*``
methods, as in Kafka Streams.
"""

cimport cython

from cpython.object cimport PyObject_RichCompare

from types import GenericAlias

__all__ = ["Change", "FixedKeyRecord", "Record", "WindowedKey"]


# A processor hop makes a record and drops the one before it: a freelist hands the dropped
# one's memory to the next without going through the allocator.
@cython.freelist(64)
cdef class _RecordFields:
    """What both record types hold and how they are made, shown and pickled (fields in
    record.pxd)."""

    def __init__(self, key, value, timestamp=0, headers=None):
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = headers

    def __class_getitem__(cls, item):
        return GenericAlias(cls, item)

    def __repr__(self):
        return (
            f"{type(self).__name__}(key={self.key!r}, value={self.value!r}, "
            f"timestamp={self.timestamp!r}, headers={self.headers!r})"
        )

    def __reduce__(self):
        return (type(self), (self.key, self.value, self.timestamp, self.headers))


cdef class Record(_RecordFields):
    """A record flowing through a topology: key, value, event-time timestamp (ms) and headers.

    Records are immutable; the ``with_*`` methods return modified copies.
    """

    __match_args__ = ("key", "value", "timestamp", "headers")

    def with_key(self, key):
        return new_record(key, self.value, self.timestamp, self.headers)

    def with_value(self, value):
        return new_record(self.key, value, self.timestamp, self.headers)

    def with_timestamp(self, timestamp):
        if timestamp < 0:
            raise ValueError(f"Timestamp must not be negative, got {timestamp}.")
        return new_record(self.key, self.value, timestamp, self.headers)

    def with_headers(self, headers):
        return new_record(self.key, self.value, self.timestamp, list(headers) if headers is not None else None)

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        cdef Record that = <Record>other
        return (self.key, self.value, self.timestamp, self.headers) == (
            that.key, that.value, that.timestamp, that.headers
        )

    def __hash__(self):
        return hash((self.key, self.value, self.timestamp, self.headers))


cdef class FixedKeyRecord(_RecordFields):
    """A record whose key a processor cannot change: key, value, timestamp (ms) and headers.

    Immutable; ``with_value``, ``with_timestamp`` and ``with_headers`` return modified copies that
    keep the key. Processors receive these from the runtime and forward copies of them.
    """

    def with_value(self, value):
        return _fixed_key_record(self.key, value, self.timestamp, self.headers)

    def with_timestamp(self, timestamp):
        if not isinstance(timestamp, int) or timestamp < 0:
            raise ValueError(f"Timestamp must be a non-negative int of ms, got {timestamp!r}.")
        return _fixed_key_record(self.key, self.value, timestamp, self.headers)

    def with_headers(self, headers):
        return _fixed_key_record(self.key, self.value, self.timestamp, list(headers) if headers else headers)

    def to_record(self):
        """The plain ``Record`` the topology passes downstream."""
        return new_record(self.key, self.value, self.timestamp, self.headers)

    def __eq__(self, other):
        if not isinstance(other, FixedKeyRecord):
            return False
        cdef FixedKeyRecord that = <FixedKeyRecord>other
        return (
            self.key == that.key
            and self.value == that.value
            and self.timestamp == that.timestamp
            and self.headers == that.headers
        )

    def __hash__(self):
        return hash((self.key, self.value, self.timestamp))


cdef inline object _fill(_RecordFields record, object key, object value, object timestamp, object headers):
    """``record`` (just allocated with ``__new__``) with its fields set: a record made without going
    through ``__init__``'s argument parsing."""
    record.key = key
    record.value = value
    record.timestamp = timestamp
    record.headers = headers
    return record


cdef inline object _fixed_key_record(object key, object value, object timestamp, object headers):
    return _fill(FixedKeyRecord.__new__(FixedKeyRecord), key, value, timestamp, headers)


@cython.freelist(64)
cdef class Change:
    """An update of one table row: the new value and, when known, the old one (None if absent),
    and whether the new value is the row's latest version (``is_latest``, Kafka's
    ``Change.isLatest``): False only for an out-of-order update of a versioned table, older than
    the row's latest version, which each downstream processor passes on or drops (KIP-914).
    Read-only; equal to another Change with equal values and flag. An aggregation or table makes
    one per update, so it is a C type (fields in record.pxd)."""

    __match_args__ = ("new_value", "old_value", "is_latest")

    def __init__(self, new_value, old_value=None, is_latest=True):
        self.new_value = new_value
        self.old_value = old_value
        self.is_latest = is_latest

    def __class_getitem__(cls, item):
        return GenericAlias(cls, item)

    def __eq__(self, other):
        if not isinstance(other, Change):
            return False
        cdef Change that = <Change>other
        return (
            self.new_value == that.new_value
            and self.old_value == that.old_value
            and self.is_latest == that.is_latest
        )

    def __hash__(self):
        return hash((self.new_value, self.old_value, self.is_latest))

    def __repr__(self):
        if self.is_latest:
            return f"Change(new={self.new_value!r}, old={self.old_value!r})"
        return f"Change(new={self.new_value!r}, old={self.old_value!r}, is_latest=False)"

    def __reduce__(self):
        return (Change, (self.new_value, self.old_value, self.is_latest))


cdef class WindowedKey:
    """A key in a window: what windowed aggregations emit as their key (Kafka's ``Windowed``).

    ``key``, ``start`` and ``end`` are plain read-only fields; ``window()`` gives Kafka's
    ``Window`` view (``start()``, ``end()``, ``start_time()``, ``end_time()``). Kafka's ``key()``
    accessor is the ``key`` field here: a method of that name would replace the field that
    existing code reads. Equal to, ordered against and hashed as the tuple ``(key, start, end)``
    (among WindowedKeys only), as the frozen dataclass it replaces was; a C type because windowed
    stores and aggregations make one per update (44 ns against 423; fields in record.pxd)."""

    __match_args__ = ("key", "start", "end")

    def __init__(self, key, start, end):
        self.key = key
        self.start = start
        self.end = end

    def __class_getitem__(cls, item):
        return GenericAlias(cls, item)

    def window(self):
        # Imported on use, as the one pure-Python type the compiled records need (a leaf module).
        from kstreams.window import Window

        return Window(self.start, self.end)

    def __richcmp__(self, other, int op):
        if type(other) is not type(self):
            return NotImplemented
        cdef WindowedKey that = <WindowedKey>other
        return PyObject_RichCompare((self.key, self.start, self.end), (that.key, that.start, that.end), op)

    def __hash__(self):
        return hash((self.key, self.start, self.end))

    def __repr__(self):
        return f"WindowedKey(key={self.key!r}, start={self.start!r}, end={self.end!r})"

    def __str__(self):
        # Kafka's Windowed.toString, which KStream.print shows.
        return f"[{self.key}@{self.start}/{self.end}]"

    def __reduce__(self):
        return (WindowedKey, (self.key, self.start, self.end))
