# cython: language_level=3
"""The per-record path in C: a task's loop over the records of an input batch
(``run_records``), ``forward``'s loop over a node's children (``ContextRouting.forward``), the
DSL's most used processors and the sinks' send.

On the per-record path (Processor API classes, records with headers, ``processing.compiled=false``)
every input record passes through the task's loop and every processor hop through ``forward``.
Written in Python, the two loops' own bytecode (moving the record position along, setting the
node being run, saving and restoring the timestamp, the try/finally around the children) was a
quarter of the stream thread's samples in a filter + map. Here nothing of kstreams' is
interpreted between the user's calls. What the loops do, and in which order, is what the Python
loops did; the rare cases call back into the task: a record that fails to deserialize, a
timestamp extractor, a negative timestamp, a stream-time punctuation falling due, ``forward`` to
a named child.

The DSL's record-at-a-time processors (filter, map, map_values) are C processors too
(``FilterCore``, ``MapCore``, ``MapValuesCore``): each calls its user function and hands the result
to ``forward`` without an interpreted frame of its own. So are a stream aggregation's and a
time-windowed aggregation's ``process`` (``StreamAggregateCore``, ``WindowedAggregateCore``), and
the aggregation's function of (key, value, old aggregate) is an ``AggregateStep`` the store
accessor calls without building argument tuples. A sink with a fixed topic, the default
partitioner and built-in serializers sends from C (``SinkSender``). Each hands what it does not
do the same way back to Python (logging, emitting on window close, hopping windows, a null key).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport int32_t, int64_t, uint64_t

from kstreams._native.record cimport (
    Change,
    FixedKeyRecord,
    Record,
    _RecordFields,
    new_change,
    new_record,
    new_windowed_key,
)
from kstreams._native.record_batch cimport RecordBatch, c_murmur2
from kstreams._native.record_collector cimport RecordCollector

__all__ = [
    "AggregateAccess",
    "AggregateStep",
    "AggregatorStep",
    "BatchProgress",
    "ContextRouting",
    "CountStep",
    "FilterCore",
    "ForwardingCore",
    "MapCore",
    "MapValuesCore",
    "NEVER_DUE",
    "NodeBase",
    "OutputPartitionCounts",
    "ProcessCore",
    "RecordPosition",
    "SERIAL_BYTES",
    "SERIAL_LONG",
    "SERIAL_STRING",
    "ReduceStep",
    "SinkSender",
    "StreamAggregateCore",
    "WindowedAggregateCore",
    "key_value_of",
    "run_records",
]


cdef class RecordPosition:
    """The fields of a record context (``kstreams.processing.record_context.RecordContext``): the
    topic (None outside record processing), partition, offset (an int64: the per-record loop
    sets it without making an int), timestamp and headers (None: none) of the current record,
    and ``source``, the input batch it came from (fields in per_record.pxd)."""


# A due time no stream time reaches.
NEVER_DUE = 1 << 62


cdef class ContextRouting:
    """What the per-record path reads of a task's processor context: ``node``, the node being
    run (None between runs); ``record_context``, the current record's position; ``_failed``, the
    (exception, node name) of the innermost node a failure came from; and two fields the task
    keeps here for C to read per record: ``task_cache``, the record cache of the thread running
    the task (the task's ``record_cache``), and ``next_stream_due``, the stream time at which
    its next stream-time punctuation falls due. The task's context (``ProcessorContextImpl``)
    is this and the rest of ``ProcessorContext``; it defines ``_route(record, child_name)``,
    which resolves a named child or a ``To`` (fields in per_record.pxd)."""

    def __cinit__(self, *args, **kwargs):
        self.next_stream_due = NEVER_DUE

    def forward(self, record, child_name=None):
        """Pass ``record`` to every child of the node being run (with ``child_name``, a name or
        a ``To``, to that child), each child run as the node being run and with the record
        context's timestamp set to the record's; both are restored afterwards, also when a child
        raises. A failure remembers the innermost node it came from."""
        cdef object children
        if child_name is None:
            children = _children_of(self.node)
        else:
            record, children = self._route(record, child_name)
        self._forward(record, children)

    cdef int _forward(self, object record, object children) except -1:
        if isinstance(record, _RecordFields):
            return _forward_each(self, record, None, None, (<_RecordFields>record).timestamp, None,
                                 children)
        return _forward_each(self, record, None, None, record.timestamp, None, children)

    cdef int _forward_fields(self, object key, object value, object timestamp, object headers,
                             object children) except -1:
        """``_forward`` of a record given by its fields: C processors take the fields, and a
        Record is made (once) only for a child that needs the object."""
        return _forward_each(self, None, key, value, timestamp, headers, children)


cdef inline int _forward_each(ContextRouting routing, object record, object key, object value,
                              object timestamp, object headers, object children) except -1:
    """Run each of ``children`` as the node being run, with the record context's timestamp and
    headers set to the record's, on ``record`` (None: on the fields); restore all three after,
    also when a child raises, and remember the innermost node a failure came from."""
    cdef object node = routing.node
    cdef RecordPosition position = <RecordPosition?>routing.record_context
    cdef object previous = position.timestamp
    cdef object current = record
    # What a store's cache remembers of the record that last wrote an entry (Kafka's record
    # context), for the downstream record its flush forwards; most records have none, and then
    # there is nothing to set or restore.
    cdef object record_headers = headers if record is None else _headers_of(record)
    cdef object previous_headers = position.headers
    cdef bint swap_headers = record_headers is not None or previous_headers is not None
    position.timestamp = timestamp
    if swap_headers:
        position.headers = record_headers
    try:
        for child in children:
            routing.node = child
            current = _run_fields(child, key, value, timestamp, headers, current)
    except BaseException as exc:
        failed = routing._failed
        if failed is None or (<tuple>failed)[0] is not exc:
            routing._failed = (exc, routing.node.name)
        raise
    finally:
        routing.node = node
        position.timestamp = previous
        if swap_headers:
            position.headers = previous_headers
    return 0


cdef inline object _headers_of(object record):
    cdef _RecordFields fields = _fields(record)
    if fields is not None:
        return fields.headers
    return getattr(record, "headers", None)


# ---------------------------------------------------------------- graph nodes and C processors


cdef class ProcessCore:
    """A processor whose ``process`` is C (``_process``). A graph node whose ``process`` is a
    ProcessCore's own (no Python class overrides it) is run by the per-record loops without a
    Python call."""

    cdef int _process(self, object record) except -1:
        raise TypeError(f"{type(self).__name__} is a ProcessCore without a _process")

    cdef int _process_fields(self, object key, object value, object timestamp,
                             object headers) except -1:
        """``_process`` of a Record with these fields; a processor that only reads the fields
        overrides it, so that no Record is made for it."""
        return self._process(new_record(key, value, timestamp, headers))

    def process(self, record):
        self._process(record)


cdef ProcessCore _core_of(object process):
    """The ProcessCore whose own ``process`` the callable ``process`` is, else None."""
    owner = getattr(process, "__self__", None)
    if (
        isinstance(owner, ProcessCore)
        and type(owner).process is ProcessCore.process
        and process == owner.process
    ):
        return <ProcessCore>owner
    return None


cdef class NodeBase:
    """What every graph node (``kstreams.topology.graph``) has: ``name``, ``children`` in the
    order added, ``children_by_name``, and ``process(record)``. A node either sets ``process``
    (a callable) or defines it as a method. When the callable is a ``ProcessCore``'s own
    ``process``, the per-record loops call that processor's ``_process`` in C.

    ``e2e_latency``: the KIP-613 sensor of a terminal node (a sink or a processor without
    children; None for any other node, or without metrics). The loops record each record that
    reaches the node, once its ``process`` returned, as Kafka's ``forward`` does."""

    @property
    def process(self):
        return self._process_fn

    @process.setter
    def process(self, process):
        self._process_fn = process
        self._core = _core_of(process)


cdef inline int _run(object node, object record) except -1:
    """``node.process(record)``; in C for a C processor's own ``process``."""
    cdef NodeBase graph_node
    if isinstance(node, NodeBase):
        graph_node = <NodeBase>node
        if graph_node._core is not None:
            return graph_node._core._process(record)
        if graph_node._process_fn is not None:
            graph_node._process_fn(record)
            return 0
    node.process(record)
    return 0


cdef inline object _run_fields(object node, object key, object value, object timestamp,
                               object headers, object record):
    """Run ``node`` on ``record``, or, when it is None, on the record the fields make: a C
    processor takes the fields themselves; any other node gets a Record made from them. Returns
    the record it ran (None if none was made), so that siblings share one. A terminal node's
    end-to-end latency is recorded after it ran (``NodeBase.e2e_latency``)."""
    cdef NodeBase graph_node = None
    if isinstance(node, NodeBase):
        graph_node = <NodeBase>node
        if record is None and graph_node._core is not None:
            graph_node._core._process_fields(key, value, timestamp, headers)
            if graph_node.e2e_latency is not None and timestamp is not None:
                graph_node.e2e_latency.record_at(timestamp)
            return None
    if record is None:
        record = new_record(key, value, timestamp, headers)
    _run(node, record)
    if graph_node is not None and graph_node.e2e_latency is not None and timestamp is not None:
        graph_node.e2e_latency.record_at(timestamp)
    return record


cdef inline object _children_of(object node):
    if isinstance(node, NodeBase):
        return (<NodeBase>node).children
    return node.children


cdef inline int _process_by_fields(ProcessCore core, object record) except -1:
    """``core._process_fields`` of ``record``'s fields (read by attribute from a record type
    other than Record and FixedKeyRecord)."""
    cdef _RecordFields fields = _fields(record)
    if fields is not None:
        return core._process_fields(fields.key, fields.value, fields.timestamp, fields.headers)
    return core._process_fields(
        record.key, record.value, record.timestamp, getattr(record, "headers", None)
    )


cdef inline _RecordFields _fields(object record):
    """``record``'s C fields when it is a Record or a FixedKeyRecord (a subclass may define its
    fields otherwise: it is read by attribute), else None."""
    if type(record) is Record or type(record) is FixedKeyRecord:
        return <_RecordFields>record
    return None


cdef class BatchProgress:
    """How far ``run_records`` got, kept when a record's processing raises: ``processed``, the
    records run through the graph; ``last_offset``, the offset of the last record consumed
    (processed or skipped; -1: none); ``partition_time``, the largest timestamp of the records
    processed (as the extractor gave it), starting from the partition's time before the batch."""

    cdef public Py_ssize_t processed
    cdef public int64_t last_offset
    cdef public int64_t partition_time

    def __init__(self, int64_t partition_time):
        self.processed = 0
        self.last_offset = -1
        self.partition_time = partition_time


def run_records(
    task,
    BatchProgress progress not None,
    tp,
    RecordPosition position not None,
    ContextRouting context not None,
    children,
    RecordBatch batch not None,
    list decoded_keys,
    list decoded_values,
    key_deserialize,
    value_deserialize,
    headers_of,
    extractor,
):
    """Run each record of ``batch`` through ``children`` (the source's), in offset order, as
    ``StreamTask.process`` does: ``decoded_keys``/``decoded_values`` are the deserialized
    columns (None: deserialize record by record with ``key_deserialize(topic, data)``),
    ``headers_of(i)`` the headers of record ``i`` (None: the batch has none), ``extractor`` the
    source's timestamp extractor or None. ``position`` moves along the batch; the task's stream
    time advances and its stream-time punctuations run as records pass them. ``progress`` says
    how far it got."""
    cdef Py_ssize_t n = batch.n
    if (decoded_keys is not None and len(decoded_keys) != n) or (
        decoded_values is not None and len(decoded_values) != n
    ):
        raise ValueError("run_records: a decoded column differs in length from the batch")
    cdef Py_ssize_t i
    cdef int64_t offset, timestamp
    cdef int64_t stream_time = task.stream_time
    cdef object topic = position.topic
    cdef object key, value, headers, record
    cdef object timestamp_object = None
    cdef int64_t last_timestamp = -1
    for i in range(n):
        offset = batch._off[i]
        position.offset = offset
        headers = headers_of(i) if headers_of is not None else None
        try:
            if decoded_keys is None:
                key = key_deserialize(topic, _raw(batch.key_ptr(i), batch.key_len(i)))
            else:
                key = decoded_keys[i]
            if decoded_values is None:
                value = value_deserialize(topic, _raw(batch.value_ptr(i), batch.value_len(i)))
            else:
                value = decoded_values[i]
        except Exception as exc:
            task._on_deserialization_error(
                tp, offset, _raw(batch.key_ptr(i), batch.key_len(i)),
                _raw(batch.value_ptr(i), batch.value_len(i)), batch._ts[i], headers, exc,
            )
            progress.last_offset = offset
            continue
        timestamp = batch._ts[i]
        if extractor is not None:
            timestamp = task._extract_timestamp(
                extractor, new_record(key, value, timestamp, headers), progress.partition_time, tp,
                offset,
            )
            if timestamp < 0:
                progress.last_offset = offset
                continue
        elif timestamp < 0:
            task._reject_negative_timestamp(tp, offset, timestamp)
        if timestamp > progress.partition_time:
            progress.partition_time = timestamp
        if timestamp != last_timestamp or timestamp_object is None:
            # Neighbouring records mostly share a millisecond: they share its int too.
            timestamp_object = timestamp
            last_timestamp = timestamp
        position.timestamp = timestamp_object
        if headers_of is not None:
            position.headers = headers
        if timestamp > stream_time:
            stream_time = timestamp
            task.stream_time = timestamp_object
        record = None
        for child in children:
            context.node = child
            record = _run_fields(child, key, value, timestamp_object, headers, record)
        progress.last_offset = offset
        progress.processed += 1
        if stream_time >= context.next_stream_due:
            task._punctuate_stream_time(stream_time)


cdef inline object _raw(const char* data, Py_ssize_t size):
    """A record's key or value bytes as the batch holds them (None: a null)."""
    if size < 0:
        return None
    return PyBytes_FromStringAndSize(data, size)


# ------------------------------------------------------------ the DSL's record-at-a-time processors


def key_value_of(result, str what):
    """A mapper's result as (key, value); a clear error for anything else."""
    return _key_value(result, what)


cdef tuple _key_value(object result, str what):
    if type(result) is tuple and len(<tuple>result) == 2:
        return <tuple>result
    try:
        key, value = result
    except (TypeError, ValueError):
        raise TypeError(
            f"The mapper of {what} must return a KeyValue (or a (key, value) tuple), got {result!r}."
        ) from None
    return key, value


cdef ContextRouting _task_routing(object context):
    """``context`` when it is a task's (a ``ContextRouting`` whose ``forward`` is not
    overridden), whose forwards C may do itself; else None."""
    if isinstance(context, ContextRouting) and type(context).forward is ContextRouting.forward:
        return <ContextRouting>context
    return None


cdef class ForwardingCore(ProcessCore):
    """A processor that keeps its context to forward through (``init``). When the context is a
    task's (a ``ContextRouting`` whose ``forward`` is not overridden) records go to C ``forward``
    directly; any other context's ``forward`` is called as a method."""

    cdef public object context
    cdef ContextRouting _routing

    def init(self, context):
        self.context = context
        self._routing = _task_routing(context)

    cdef int _send(self, object record) except -1:
        cdef ContextRouting routing = self._routing
        if routing is None:
            self.context.forward(record)
        else:
            routing._forward(record, _children_of(routing.node))
        return 0

    cdef int _send_fields(self, object key, object value, object timestamp,
                          object headers) except -1:
        """``_send`` of a Record with these fields, made only if a child needs one."""
        cdef ContextRouting routing = self._routing
        if routing is None:
            self.context.forward(new_record(key, value, timestamp, headers))
        else:
            routing._forward_fields(key, value, timestamp, headers, _children_of(routing.node))
        return 0


cdef class FilterCore(ForwardingCore):
    """Forwards the records for which ``predicate(key, value)`` is true (false when ``negate``)."""

    cdef public object predicate
    cdef public bint negate

    def __init__(self, predicate, bint negate):
        self.predicate = predicate
        self.negate = negate

    cdef int _process(self, object record) except -1:
        # the record itself goes on (a FixedKeyRecord stays one)
        cdef _RecordFields fields = _fields(record)
        if fields is not None:
            kept = self.predicate(fields.key, fields.value)
        else:
            kept = self.predicate(record.key, record.value)
        if bool(kept) != self.negate:
            self._send(record)
        return 0

    cdef int _process_fields(self, object key, object value, object timestamp,
                             object headers) except -1:
        if bool(self.predicate(key, value)) != self.negate:
            self._send_fields(key, value, timestamp, headers)
        return 0


cdef class MapCore(ForwardingCore):
    """Forwards ``mapper(key, value)``, a KeyValue, as the record's key and value."""

    cdef public object mapper

    def __init__(self, mapper):
        self.mapper = mapper

    cdef int _process(self, object record) except -1:
        return _process_by_fields(self, record)

    cdef int _process_fields(self, object key, object value, object timestamp,
                             object headers) except -1:
        new_key, new_value = _key_value(self.mapper(key, value), "map")
        return self._send_fields(new_key, new_value, timestamp, headers)


cdef class MapValuesCore(ForwardingCore):
    """Forwards the record with its value replaced by ``mapper(value)`` (``mapper(key, value)``
    when ``with_key``)."""

    cdef public object mapper
    cdef public bint with_key

    def __init__(self, mapper, bint with_key):
        self.mapper = mapper
        self.with_key = with_key

    cdef int _process(self, object record) except -1:
        cdef Record r
        if type(record) is Record:
            r = <Record>record
            return self._process_fields(r.key, r.value, r.timestamp, r.headers)
        self._send(record.with_value(self._map(record.key, record.value)))  # a FixedKeyRecord stays one
        return 0

    cdef int _process_fields(self, object key, object value, object timestamp,
                             object headers) except -1:
        return self._send_fields(key, self._map(key, value), timestamp, headers)

    cdef object _map(self, object key, object value):
        return self.mapper(key, value) if self.with_key else self.mapper(value)


cdef class ToStreamCore(ForwardingCore):
    """``to_stream``: forwards each table update's new value (a ``change_type`` value's
    ``new_value``; any other value as it is), keyed by ``mapper(key, value)`` when there is one."""

    cdef public object mapper
    cdef object change_type

    def __init__(self, mapper, change_type):
        self.mapper = mapper
        self.change_type = change_type

    cdef int _process(self, object record) except -1:
        return _process_by_fields(self, record)

    cdef int _process_fields(self, object key, object value, object timestamp,
                             object headers) except -1:
        if isinstance(value, self.change_type):
            value = value.new_value
        if self.mapper is not None:
            key = self.mapper(key, value)
        return self._send_fields(key, value, timestamp, headers)


# ----------------------------------------------------------------------------- aggregations


cdef class AggregateStep:
    """An aggregation's function of (key, value, old aggregate or None) -> new aggregate: what
    the DSL's ``combine`` does for one kind, callable from C (``step``) and from Python."""

    cdef object step(self, object key, object value, object old):
        raise TypeError(
            "AggregateStep is the base of CountStep, ReduceStep and AggregatorStep: use one of those."
        )

    def __call__(self, key, value, old):
        return self.step(key, value, old)


cdef class CountStep(AggregateStep):
    """count: 1 for the first record, then one more."""

    cdef object step(self, object key, object value, object old):
        return 1 if old is None else old + 1

    def __reduce__(self):
        return (CountStep, ())


cdef class ReduceStep(AggregateStep):
    """reduce: the first value, then ``reducer(aggregate, value)``."""

    cdef readonly object reducer

    def __init__(self, reducer):
        self.reducer = reducer

    cdef object step(self, object key, object value, object old):
        return value if old is None else self.reducer(old, value)

    def __reduce__(self):
        return (ReduceStep, (self.reducer,))


cdef class AggregatorStep(AggregateStep):
    """aggregate: ``aggregator(key, value, aggregate)``, from ``initializer()`` for the first.
    ``last_initial`` is the initializer's value the last first step started from: Kafka forwards
    that very object as the old value of an aggregate's first update (``_first_old``), so an
    aggregation keeps a step of its own (one task runs it at a time)."""

    cdef readonly object initializer
    cdef readonly object aggregator
    cdef public object last_initial

    def __init__(self, initializer, aggregator):
        self.initializer = initializer
        self.aggregator = aggregator
        self.last_initial = None

    cdef object step(self, object key, object value, object old):
        if old is None:
            old = self.last_initial = self.initializer()
        return self.aggregator(key, value, old)

    def __reduce__(self):
        return (AggregatorStep, (self.initializer, self.aggregator))


cdef object _first_old(object apply):
    """The old value Kafka forwards with an aggregate's first update (the store held none): the
    initializer's value the aggregator started from (KStreamAggregate, KStreamWindowAggregate);
    0 for count; none for reduce (its initializer is null)."""
    if type(apply) is CountStep:
        return 0
    if type(apply) is AggregatorStep:
        return (<AggregatorStep>apply).last_initial
    return None


cdef class AggregateAccess:
    """A store accessor that serves one aggregation step in C (``_update``: see
    ``store_access.CachedKeyValueAccess.update``); an aggregation whose ``_step`` is an
    accessor's own ``update`` calls ``_update`` directly."""

    cdef tuple _update(self, object key, object value, int64_t timestamp, int64_t window_start,
                       object apply, bint result=True):
        """One step: ``(new, old, new timestamp)``; without ``result`` (a caller that forwards
        nothing) it may return None instead."""
        raise TypeError(f"{type(self).__name__} is an AggregateAccess without an _update")


cdef AggregateAccess _access_of(object step):
    """The AggregateAccess whose own ``update`` the callable ``step`` is, else None."""
    owner = getattr(step, "__self__", None)
    if isinstance(owner, AggregateAccess) and step == owner.update:
        return <AggregateAccess>owner
    return None


cdef class _AggregateCore(ProcessCore):
    """What both aggregations' ``process`` read: ``_step``, the store's update (``(key, value,
    timestamp, [window_start,] apply) -> (new, old, new timestamp)``), called in C when it is a
    store accessor's own; ``_apply``, the aggregation's function; ``_cached``, whether the
    store's cache forwards changes; ``_routing``, the task's context when changes are forwarded
    in C (``route_changes``), as ``_change_type(new, old)``."""

    cdef object _step_function
    cdef AggregateAccess _access
    cdef public object _apply
    cdef public bint _cached
    cdef ContextRouting _routing
    cdef object _change_type

    @property
    def _step(self):
        return self._step_function

    @_step.setter
    def _step(self, step):
        self._step_function = step
        self._access = _access_of(step)

    def route_changes(self, context, change_type):
        """Forward each change as ``change_type(new, old)`` (keyed by a ``WindowedKey`` of the
        record's key and window in a windowed aggregation) through ``context`` in C, as the
        aggregation's own forwarding does without a cache, when it is a task's context."""
        self._routing = _task_routing(context)
        self._change_type = change_type

    cdef int _process(self, object record) except -1:
        return _process_by_fields(self, record)


cdef class StreamAggregateCore(_AggregateCore):
    """``process`` of a stream aggregation (``StreamAggregateProcessor``, which sets the fields
    at init): a record with a null key or value goes to ``_skip``; any other is one
    ``_step(key, value, timestamp, _apply)`` (the store's read, aggregate, write), whose change
    goes to ``forwarder.maybe_forward`` (with the record's headers) unless the store's cache
    forwards it (``_cached``). A first update's old value is the initializer's (``_first_old``),
    as Kafka forwards it; a cache's flush reads the old value from the store below, none then."""

    cdef public object forwarder

    cdef int _process_fields(self, object key, object value, object timestamp,
                             object headers) except -1:
        if key is None or value is None:
            self._skip(new_record(key, value, timestamp, headers))
            return 0
        # with a cache, the cache forwards the change: the accessor makes no result
        cdef bint forwards = not self._cached
        if self._access is not None:
            change = self._access._update(key, value, timestamp, 0, self._apply, forwards)
        else:
            change = self._step_function(key, value, timestamp, self._apply)
        if forwards:
            new, old, stamp = change
            if old is None:
                old = _first_old(self._apply)
            if self._routing is not None:
                self._routing._forward_fields(key, _made_change(self._change_type, new, old), stamp, headers,
                                              _children_of(self._routing.node))
            else:
                self.forwarder.maybe_forward(key, new, old, stamp, headers)
        return 0


cdef class WindowedAggregateCore(_AggregateCore):
    """``process`` of a time-windowed aggregation (``WindowedAggregateProcessor``, which sets the
    fields): a record with a null key goes to ``_skip``; any other advances
    ``observed_stream_time`` and updates each of its windows (``size_ms`` long, ``advance_ms``
    apart) still open at ``observed_stream_time - grace_ms`` with one ``_step(key, value,
    timestamp, window_start, _apply)``. A closed window's record is counted in ``dropped`` and
    reported to ``_expired``. Changes are forwarded through ``_forward_window`` unless the store's
    cache forwards them (``_cached``) or results go out only when windows close
    (``emit_on_close``: ``_emit_closed_windows`` runs after the record's updates, dropped or not,
    as Kafka's ``maybeForwardFinalResult``)."""

    cdef public bint emit_on_close
    cdef public int64_t size_ms
    cdef public int64_t advance_ms
    cdef public int64_t grace_ms
    cdef public int64_t observed_stream_time
    cdef public int64_t dropped

    cdef int _process_fields(self, object key, object value, object timestamp_object,
                             object headers) except -1:
        if key is None:
            self._skip(new_record(key, value, timestamp_object, headers))
            return 0
        cdef int64_t timestamp = timestamp_object
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp
        cdef int64_t close_time = self.observed_stream_time - self.grace_ms
        cdef int64_t start, offset
        if self.advance_ms == self.size_ms:
            # tumbling: one window, found with one modulo (floored, as Python's %)
            offset = timestamp % self.size_ms
            if offset < 0:
                offset += self.size_ms
            start = timestamp - offset
            self._update(key, value, timestamp, start, start + self.size_ms, close_time, headers)
        else:
            for start, end in self.windows_for(timestamp):
                self._update(key, value, timestamp, start, end, close_time, headers)
        if self.emit_on_close:
            # After this record's writes, as Kafka: they move the store's retention on, so a
            # window that closed but has left the store (or a failing aggregator) emits nothing.
            self._emit_closed_windows(headers, close_time)
        return 0

    cdef int _update(self, object key, object value, int64_t timestamp, int64_t start, int64_t end,
                     int64_t close_time, object headers) except -1:
        if end <= close_time:
            self.dropped += 1
            self._expired(start, end)
            return 0
        cdef bint forwards = not self.emit_on_close and not self._cached
        if self._access is not None:
            change = self._access._update(key, value, timestamp, start, self._apply, forwards)
        else:
            change = self._step_function(key, value, timestamp, start, self._apply)
        if forwards:
            new, old, new_timestamp = change
            if old is None:
                old = _first_old(self._apply)
            if self._routing is not None:
                self._routing._forward_fields(
                    new_windowed_key(key, start, end), _made_change(self._change_type, new, old),
                    new_timestamp, headers, _children_of(self._routing.node))
            else:
                self._forward_window(key, start, end, new, old, new_timestamp, headers)
        return 0


# ----------------------------------------------------------------------------------- sinks

# How a sink's serializer turns a value into bytes, when C may do it itself.
SERIAL_STRING = 1  # a str as UTF-8 (StringSerde)
SERIAL_LONG = 2  # an int as 8 big-endian bytes (LongSerde)
SERIAL_BYTES = 3  # bytes as they are (BytesSerde)


cdef class OutputPartitionCounts:
    """The partition counts of the topics a client writes to. Calling it with a topic returns
    the count it keeps or, the first time, the count ``describe(topic)`` returns, which it keeps.
    Whoever learns that counts may have changed (a new assignment, partitions added by
    autoscaling) calls ``clear``. A ``SinkSender`` keeps its topic's count while ``generation``
    (bumped by ``clear``) stays the same, without a call per record."""

    cdef dict counts
    cdef object describe
    cdef readonly int64_t generation  # how many times the counts were cleared

    def __init__(self, describe):
        self.counts = {}
        self.describe = describe
        self.generation = 0

    def __call__(self, str topic not None):
        count = self.counts.get(topic)
        if count is None:
            count = self.describe(topic)
            self.counts[topic] = count
        return count

    def clear(self):
        """Forget every count: the next call describes the topic again."""
        self.counts.clear()
        self.generation += 1


cdef class SinkSender(ProcessCore):
    """The per-record send of a sink with a fixed topic and Kafka's default partitioner whose
    serializers are built in (``SERIAL_*`` kinds): the key and value serialized in C, the
    partition from murmur2 of the key and the topic's partition count, the record buffered in
    the collector. A record it cannot send exactly as the sink would (a null key, which goes
    round robin; a value of another type, which the serializer refuses; a negative or non-int
    timestamp) goes to ``fallback`` (the sink's ``send_record``), before anything was called."""

    cdef str topic
    cdef int key_kind
    cdef int value_kind
    cdef object partition_count
    cdef OutputPartitionCounts counts  # ``partition_count`` when it is one (else None)
    cdef int64_t counted_in      # the counts' generation ``count`` was read in (-1: none)
    cdef int32_t count
    cdef RecordCollector collector
    cdef object fallback

    def __init__(self, str topic not None, int key_kind, int value_kind, partition_count,
                 RecordCollector collector not None, fallback):
        if not (SERIAL_STRING <= key_kind <= SERIAL_BYTES and SERIAL_STRING <= value_kind <= SERIAL_BYTES):
            raise ValueError(f"SinkSender: unknown serializer kinds {key_kind}, {value_kind}")
        self.topic = topic
        self.key_kind = key_kind
        self.value_kind = value_kind
        self.partition_count = partition_count
        self.counts = partition_count if isinstance(partition_count, OutputPartitionCounts) else None
        self.counted_in = -1
        self.collector = collector
        self.fallback = fallback

    cdef int _process(self, object record) except -1:
        if type(record) is not Record:
            self.fallback(record)
            return 0
        return _process_by_fields(self, record)

    cdef int _process_fields(self, object key, object value, object timestamp,
                             object headers) except -1:
        cdef char key_long[8]
        cdef char value_long[8]
        cdef const char* kp = NULL
        cdef const char* vp = NULL
        cdef Py_ssize_t kl = -1, vl = -1
        cdef int overflow = 0
        cdef long long stamp
        if type(timestamp) is not int:
            return self._fall_back(key, value, timestamp, headers)
        stamp = PyLong_AsLongLongAndOverflow(timestamp, &overflow)
        if overflow or stamp < 0:
            return self._fall_back(key, value, timestamp, headers)
        if key is None or not _serialized(key, self.key_kind, key_long, &kp, &kl):
            return self._fall_back(key, value, timestamp, headers)
        if value is not None and not _serialized(value, self.value_kind, value_long, &vp, &vl):
            return self._fall_back(key, value, timestamp, headers)
        cdef int32_t partitions = self._partitions()
        if partitions <= 0:
            return self._fall_back(key, value, timestamp, headers)
        cdef int32_t partition = (c_murmur2(kp, kl) & 0x7fffffff) % partitions
        self.collector.c_send(self.topic, partition, kp, kl, vp, vl, stamp, headers)
        return 0

    cdef int32_t _partitions(self) except? -1:
        """The topic's partition count: the one kept while the counts' generation stays."""
        cdef OutputPartitionCounts counts = self.counts
        cdef int64_t generation
        if counts is None:
            return self.partition_count(self.topic)
        if counts.generation != self.counted_in:
            # read before the call: a clear while it describes the topic is seen next record
            generation = counts.generation
            self.count = counts(self.topic)
            self.counted_in = generation
        return self.count

    cdef int _fall_back(self, object key, object value, object timestamp, object headers) except -1:
        self.fallback(new_record(key, value, timestamp, headers))
        return 0


cdef bint _serialized(object data, int kind, char* long_buffer, const char** out,
                      Py_ssize_t* size) except -1:
    """Point ``out``/``size`` at ``data``'s serialized bytes (a long's go into ``long_buffer``);
    False when ``data`` is not of the kind's type (the serializer then decides)."""
    cdef int overflow = 0
    cdef long long number
    cdef uint64_t bits
    cdef int i
    if kind == SERIAL_STRING:
        if type(data) is not str:
            return False
        try:
            out[0] = PyUnicode_AsUTF8AndSize(data, size)
        except UnicodeEncodeError:
            return False  # lone surrogates: the serializer raises its own error
        return True
    if kind == SERIAL_LONG:
        if type(data) is not int:
            return False
        number = PyLong_AsLongLongAndOverflow(data, &overflow)
        if overflow:
            return False
        bits = <uint64_t>number
        for i in range(7, -1, -1):
            long_buffer[i] = <char>(bits & 0xFF)
            bits >>= 8
        out[0] = long_buffer
        size[0] = 8
        return True
    if type(data) is not bytes:
        return False
    out[0] = PyBytes_AS_STRING(data)
    size[0] = PyBytes_GET_SIZE(data)
    return True


cdef inline object _made_change(object change_type, object new, object old):
    """``change_type(new, old)``; the DSL's ``Change`` is made in C."""
    if change_type is Change:
        return new_change(new, old)
    return change_type(new, old)
