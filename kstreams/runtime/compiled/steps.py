"""Batch steps: how a batch of one input partition runs through a compiled segment.

A segment is a tree of steps rooted at a source: each step takes a RecordBatch whose key and
value columns are in known encodings (the built-in serdes, see ``kernels``), runs a kernel over
the whole batch and hands its result to its children. A step whose kernel reports a record it
cannot handle exactly like Python (``None`` from the kernel) hands its input batch to its node's
Python processor record by record instead (the *boundary*), and so does every step made for a
node that has no kernel; the result is the per-record path's either way.

Steps hold the task's running ``ProcessorNode`` objects: the Python processor behind an
aggregation step is the same instance the per-record path uses, so state such as a windowed
aggregation's observed stream time is shared. A step reads and sets what its task's processor
context says is running (``SegmentTask``): the node, so that an exception names it, and the
record context, for the records it hands to Python processors.

Below a chain of Python functions the records are Python objects, not bytes: such steps take
``Columns`` (``run_columns``). A step that cannot use them hands them record by record to its node.
"""

from __future__ import annotations

import abc
import logging
import operator
import struct
from collections.abc import Callable
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from kstreams._native import kernels, python_chain
from kstreams._native.record_batch import RecordBatch
from kstreams.processor import Record
from kstreams.serdes import (
    BytesSerde,
    DoubleSerde,
    FloatSerde,
    IntegerSerde,
    JsonSerde,
    LongSerde,
    ShortSerde,
    StringSerde,
    json_loads,
)
from kstreams.state.caching import CachingKeyValueStore, CachingWindowStore
from kstreams.state.changelogging import ChangeLoggingKeyValueStore, ChangeLoggingWindowStore, change_pairs
from kstreams.state.inner_windowed import InnerWindowStore
from kstreams.state.store import KeyValueStore, WindowedKey
from kstreams.state.timestamped import is_timestamped
from kstreams.state.value_and_timestamp import ValueAndTimestamp
from kstreams.state.window_key_schema import changelog_key
from kstreams.topology.compiled_ops import PYTHON_FILTER

if TYPE_CHECKING:
    from kstreams.runtime.processor_context import ProcessorContextImpl
    from kstreams.state.metered import MeteredKeyValueStore, MeteredWindowStore
    from kstreams.topology.compiled_ops import OperationKernel
    from kstreams.topology.dsl.processors.aggregate import (
        StreamAggregateProcessor,
        WindowedAggregateProcessor,
    )
    from kstreams.topology.dsl.windows import TimeWindows
    from kstreams.topology.graph import ProcessorNode, SinkNode

__all__ = [
    "AggregateStep",
    "BoundaryStep",
    "ColumnSinkStep",
    "Columns",
    "CountColumnsStep",
    "FilterStep",
    "PassThroughStep",
    "ProjectStep",
    "PythonAggregateStep",
    "PythonChainStep",
    "PythonFilterStep",
    "PythonWindowedAggregateStep",
    "SegmentTask",
    "SinkStep",
    "Step",
    "change_writer",
    "decode_column",
    "encoding_of",
    "keeps_keys",
    "run_per_record",
]

logger = logging.getLogger(__name__)

_SERDE_ENCODINGS: dict[type, int] = {
    BytesSerde: kernels.BYTES,
    StringSerde: kernels.STRING,
    LongSerde: kernels.LONG,
    IntegerSerde: kernels.INT,
    ShortSerde: kernels.SHORT,
    DoubleSerde: kernels.DOUBLE,
    FloatSerde: kernels.FLOAT,
    JsonSerde: kernels.JSON,
}

# How a column's bytes turn back into the Python objects the serde of its encoding would make.
_DECODERS: dict[int, Any] = {enc: serde() for serde, enc in _SERDE_ENCODINGS.items()}

_WINDOW_START = struct.Struct(">q")

# A batch's columns, as the kernels number them.
KEYS = 0
VALUES = 1

# The big-endian numbers of the fixed-width encodings, as numpy reads a column of them at once.
_NUMBER_DTYPES: dict[int, str] = {
    kernels.LONG: ">i8",
    kernels.INT: ">i4",
    kernels.SHORT: ">i2",
    kernels.DOUBLE: ">f8",
    kernels.FLOAT: ">f4",
}


# One update of an aggregation: (key, window start or None, new aggregate, old aggregate, the new
# aggregate's timestamp, index of its record in the batch).
Update = tuple[Any, int | None, Any, Any, int, int]


class SegmentTask(Protocol):
    """What a compiled segment needs of the task that runs it (``StreamTask`` is one)."""

    @property
    def context(self) -> ProcessorContextImpl: ...


def decode_column(enc: int, topic: str | None, raw: list[bytes | None]) -> list[Any]:
    """A column's bytes as the built-in serde of ``enc`` reads them, for a batch the source's
    compiled segment accepted (so every value decodes)."""
    if enc == kernels.BYTES:
        return raw
    if enc == kernels.STRING:
        return _map_present(bytes.decode, raw)
    if enc == kernels.JSON:
        return _map_present(json_loads, raw)
    dtype = _NUMBER_DTYPES.get(enc)
    if dtype is not None:
        try:
            joined = b"".join(raw)  # type: ignore[arg-type]  # a None raises: decoded one by one below
        except TypeError:
            pass
        else:
            # Every value has the encoding's width (the batch was validated), so the concatenation
            # is an array of big-endian numbers; tolist() makes the ints and floats unpack would.
            return np.frombuffer(joined, dtype=dtype).tolist()  # type: ignore[no-any-return]
    deserialize = _DECODERS[enc].deserialize
    return [deserialize(topic, b) for b in raw]


def decode_whole_column(deserializer: Any, batch: Any, side: int) -> list[Any] | None:
    """The keys (``side`` KEYS) or values (VALUES) of a batch as ``deserializer`` reads each
    record, decoded at once when it is a built-in serde (in C, from the batch's memory, but for
    JSON); None when it is not, or when a record does not decode (wrong width, bad UTF-8 or
    JSON): the caller then deserializes record by record, so that record's error is raised, and
    handled, where it is."""
    enc = encoding_of(deserializer)
    if enc is None:
        return None
    if enc != kernels.JSON:
        return kernels.decode_objects(batch, side, enc)  # type: ignore[no-any-return]
    try:
        return decode_column(enc, None, batch.keys() if side == KEYS else batch.values())
    except Exception:
        return None


def _map_present(decode: Callable[[bytes], Any], raw: list[bytes | None]) -> list[Any]:
    """``decode`` over a column, None staying None. ``map`` iterates in C: without nulls (the usual
    column) there is no per-record Python bytecode at all."""
    try:
        return list(map(decode, raw))  # type: ignore[arg-type]  # a None raises, then handled below
    except (TypeError, AttributeError):
        if None not in raw:
            raise
        return [None if b is None else decode(b) for b in raw]


def encoding_of(serde: Any) -> int | None:
    """The kernel encoding of a built-in serde (exact type: a subclass may behave differently)."""
    return _SERDE_ENCODINGS.get(type(serde))


@dataclass(slots=True)
class Columns:
    """Records as Python objects, column by column (keys and values as the serdes made them);
    ``raw_keys``: the bytes the keys were decoded from (in the key encoding of the batch these
    columns came from), when nothing on the way changed the keys."""

    keys: list[Any]
    values: list[Any]
    timestamps: list[int]
    offsets: list[int]
    raw_keys: list[bytes | None] | None = None
    # The timestamp and offset columns as the int64 arrays they came from, when known: batch steps
    # take them as they are instead of converting the lists back.
    timestamps_array: Any = None
    offsets_array: Any = None
    # Where the records' headers are, when some record has any (None: no record has): the batch
    # they came from and their indices in it (an int32 array; None: record i is the batch's
    # record i), so sinks give their records those headers without decoding them.
    headers_from: tuple[RecordBatch, Any] | None = None

    def record_headers(self) -> list[Any] | None:
        """Each record's headers as the per-record path gives them, or None when none has any."""
        if self.headers_from is None:
            return None
        batch, rows = self.headers_from
        picked = range(len(batch)) if rows is None else rows.tolist()
        return [batch.headers(i) for i in picked]

    def headers_of(self, i: int) -> Any:
        """Record ``i``'s headers as the per-record path gives them (None: none)."""
        if self.headers_from is None:
            return None
        batch, rows = self.headers_from
        return batch.headers(i if rows is None else int(rows[i]))

    def headers_at(self, indices: Any) -> tuple[RecordBatch, Any] | None:
        """``headers_from`` for records made from these columns' records at ``indices`` (an
        integer array), for a sink's ``send_batch``."""
        if self.headers_from is None:
            return None
        batch, rows = self.headers_from
        picked = np.asarray(indices, dtype=np.int32) if rows is None else rows[indices]
        return batch, picked

    def arrays(self) -> tuple[Any, Any]:
        """(timestamps, offsets) as int64 arrays."""
        timestamps, offsets = self.timestamps_array, self.offsets_array
        if timestamps is None:
            timestamps = np.asarray(self.timestamps, dtype=np.int64)
        if offsets is None:
            offsets = np.asarray(self.offsets, dtype=np.int64)
        return timestamps, offsets


class Step:
    """One node of a compiled segment. ``run`` processes a batch in the given encodings;
    ``run_columns`` records given as Python objects."""

    name: str
    kernel: str  # what describe() and logs call the kernel; "" for a boundary
    # Whether the step calls Python code per record (holding the GIL): its batches then take the
    # stream threads' PythonGate. Compiled kernels, which release the GIL, set it False.
    calls_python = True
    # Whether the step passes each record's headers on (to its children, its sink, or the
    # per-record path at a boundary), so batches with headers may run through it. A step that
    # writes a record cache must also keep the cache's header notes current (``kernels.aggregate``).
    carries_headers = False

    def __init__(self, node: Any, children: list[Step]) -> None:
        self.node = node
        self.name = node.name
        self.children = children

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        raise TypeError(f"{type(self).__name__} does not run batches")

    def json_fields(self) -> list[tuple[int, str]]:
        """The top-level JSON fields (side 0 key, 1 value, name) the step's kernel looks up."""
        return []

    def _forward(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        if len(batch) == 0:
            return
        for child in self.children:
            child.run(task, batch, key_enc, value_enc)

    def boundary(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        """Run this step's node record by record (the per-record path from here on)."""
        if len(batch):
            run_per_record(task, self.node, _decoded(task, batch, key_enc, value_enc))

    def run_columns(self, task: SegmentTask, columns: Columns) -> None:
        """Hand each record to this step's node (the per-record path from here on)."""
        run_per_record(task, self.node, columns)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def run_per_record(task: SegmentTask, node: Any, columns: Columns) -> None:
    """Hand each record to ``node.process`` with its position, timestamp and headers in the
    context."""
    context = task.context
    position = context.record_context
    process = node.process
    headers = columns.record_headers()
    previous = position.headers
    try:
        for k, v, ts, offset, h in zip(
            columns.keys,
            columns.values,
            columns.timestamps,
            columns.offsets,
            repeat(None, len(columns.keys)) if headers is None else headers,
            strict=True,
        ):
            position.offset = offset
            position.timestamp = ts
            position.headers = h
            context.node = node
            process(Record(k, v, ts, h))
    finally:
        position.headers = previous


class BoundaryStep(Step):
    """A node without a kernel: the per-record path from here on."""

    kernel = ""
    carries_headers = True

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        self.boundary(task, batch, key_enc, value_enc)


class FilterStep(Step):
    """``filter``/``filter_not`` with a compiled predicate (``kstreams.predicates``), built for
    the encodings the compiler determined for this step."""

    kernel = "filter"
    calls_python = False
    carries_headers = True

    def __init__(
        self,
        node: Any,
        children: list[Step],
        predicate: Any,
        key_enc: int,
        value_enc: int,
        fields: list[tuple[int, str]],
    ) -> None:
        super().__init__(node, children)
        self._predicate = predicate
        self._encodings = (key_enc, value_enc)
        self._fields = fields

    def json_fields(self) -> list[tuple[int, str]]:
        return self._fields

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        # Every batch in a segment passed the source's validate: its JSON is known valid.
        selected = self._predicate.select(batch, True) if (key_enc, value_enc) == self._encodings else None
        if selected is None:
            self.boundary(task, batch, key_enc, value_enc)
            return
        if len(selected) != len(batch):
            batch = kernels.take(batch, selected)
        self._forward(task, batch, key_enc, value_enc)


class PythonFilterStep(Step):
    """``filter`` with a plain Python predicate: called per record with the GIL, but without a
    Record, a context switch or a forward per record."""

    kernel = "filter[python]"
    carries_headers = True

    def __init__(self, node: Any, children: list[Step], predicate: Callable[[Any, Any], Any], negate: bool):
        super().__init__(node, children)
        self._predicate = predicate
        self._negate = negate

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        topic = task.context.record_context.topic
        predicate = self._predicate
        negate = self._negate
        task.context.node = self.node  # an exception then names this processor
        keys = decode_column(key_enc, topic, batch.keys())
        values = decode_column(value_enc, topic, batch.values())
        keep = [
            i for i, (k, v) in enumerate(zip(keys, values, strict=True)) if bool(predicate(k, v)) != negate
        ]
        if len(keep) != len(batch):
            batch = kernels.take(batch, np.asarray(keep, dtype=np.int32))
        self._forward(task, batch, key_enc, value_enc)


class PythonChainStep(Step):
    """A chain of ``filter``/``map``/``map_values``/``select_key`` with plain Python functions,
    straight into sinks: each record goes through the functions in turn, called from C
    (``python_chain.run_chain``, with the GIL), and the survivors are serialized for each sink and
    sent as one batch per partition, without a Record, a context switch or a forward per record.

    The functions see the same records, in the same order of calls, as on the per-record path,
    and the sinks get the same records in the same order.
    """

    kernel = "chain[python]"
    carries_headers = True

    def __init__(self, nodes: list[ProcessorNode], ops: list[OperationKernel], children: list[Step]):
        super().__init__(nodes[0], children)
        self.nodes = nodes
        self._ops = ops
        self._chain = [_chain_op(op) for op in ops]
        self.keeps_keys = keeps_keys(ops)

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        context = task.context
        topic = context.record_context.topic
        context.node = self.node  # an exception then names the processor that raised
        raw_keys = batch.keys()
        keys = decode_column(key_enc, topic, raw_keys)
        values = decode_column(value_enc, topic, batch.values())
        failed = [0, 0]
        try:
            keys, values, kept = python_chain.run_chain(self._chain, keys, values, failed)
        except BaseException:
            # Name the processor and the record, as the per-record path's error does.
            operation, record = failed
            context.node = self.nodes[operation]
            context.record_context.offset = int(batch.offsets_array()[record])
            context.record_context.timestamp = int(batch.timestamps_array()[record])
            raise
        if not keys:
            return
        timestamps = batch.timestamps_array()
        offsets = batch.offsets_array()
        rows = None
        if kept is not None:
            index = np.asarray(kept, dtype=np.intp)
            timestamps = timestamps[index]
            offsets = offsets[index]
            if self.keeps_keys:
                raw_keys = [raw_keys[i] for i in kept]
            rows = index.astype(np.int32)
        raw = raw_keys if self.keeps_keys else None
        columns = Columns(keys, values, timestamps.tolist(), offsets.tolist(), raw, timestamps, offsets)
        if batch.has_headers:
            columns.headers_from = (batch, rows)
        for child in self.children:
            child.run_columns(task, columns)


# The run_chain kind of a Python map by its shape.
_MAP_KINDS = {
    "values": python_chain.VALUES,
    "values_with_key": python_chain.VALUES_WITH_KEY,
    "key": python_chain.KEY,
    "map": python_chain.MAP,
}


def _chain_op(op: OperationKernel) -> tuple[int, Any, bool]:
    """An operation as ``run_chain`` takes it: (kind, function, negate)."""
    kind = python_chain.FILTER if op.name == PYTHON_FILTER else _MAP_KINDS[op.shape]
    return kind, op.function, op.negate


def keeps_keys(ops: list[OperationKernel]) -> bool:
    """Whether a chain of Python operations leaves every record's key as it was."""
    return all(op.name == PYTHON_FILTER or op.shape in ("values", "values_with_key") for op in ops)


class CountColumnsStep(Step):
    """A count (plain or windowed) below a chain that kept the keys: a count reads only the key and
    whether the value is null, so the kernel counts a batch of the source's key bytes and empty or
    null values, as if the chain's values had been re-encoded."""

    carries_headers = True

    def __init__(self, node: ProcessorNode, count: AggregateStep, key_enc: int) -> None:
        super().__init__(node, [])
        self.kernel = count.kernel
        self.calls_python = False
        self._count = count
        self._key_enc = key_enc

    def run_columns(self, task: SegmentTask, columns: Columns) -> None:
        if columns.raw_keys is None:
            python = self._count.python
            if python is not None:
                python.run_columns(task, columns)
            else:
                super().run_columns(task, columns)
            return
        values = columns.values
        timestamps, offsets = columns.arrays()
        batch = RecordBatch.from_columns(
            columns.raw_keys,
            [None if v is None else b"" for v in values]
            if any(map(operator.is_, values, repeat(None)))
            else [b""] * len(values),
            timestamps,
            0,
            offsets,
        )
        if columns.headers_from is not None:
            batch = kernels.carry_headers(batch, *columns.headers_from)
        self._count.run(task, batch, self._key_enc, kernels.BYTES)


class ColumnSinkStep(Step):
    """A sink that takes batches, below a chain of Python functions: serializes the columns and
    sends one batch per partition."""

    kernel = "sink[python]"
    carries_headers = True
    node: SinkNode

    def __init__(self, node: SinkNode, reuses_keys: bool) -> None:
        super().__init__(node, [])
        # The sink would write the keys exactly as the source read them (same built-in serde,
        # one whose bytes survive a decode and encode): the source's bytes are sent as they are.
        self._reuses_keys = reuses_keys

    def run_columns(self, task: SegmentTask, columns: Columns) -> None:
        task.context.node = self.node
        timestamps, offsets = columns.arrays()
        self.node.send_batch(
            columns.keys,
            columns.values,
            timestamps,
            offsets,
            columns.raw_keys if self._reuses_keys else None,
            columns.headers_from,
        )


class _PythonAggregation(Step, abc.ABC):
    """What the batch forms of the DSL's aggregations share: the node's processor, its metered
    store and the caching layer below it (None: the store does not cache); and the write-back: each
    slot (key, window) once, after its last record, in the order of the slots' last records (the
    order a record-by-record cache keeps), stamped with the aggregate's timestamp (the largest of
    the records that made it, the stored aggregate's included: Kafka's rule), under the store's
    query lock so an interactive query sees the store before or after a batch, never in between.

    Without a cache (or with a cache of size 0) every update must go downstream. With ``sinks``
    (the sinks of a ``to_stream()`` below the aggregation, or none when nothing is below it) the
    step still reads and writes each slot once per batch, below the cache, and sends every update
    to the sinks as one batch: the records and the store they leave are the per-record path's, and
    so is the changelog once the record collector keeps the newest record per key (it does between
    commits, and no commit falls inside a batch). Without ``sinks`` (None) the per-record path runs.

    Headers: each slot is written with its last record's headers in the context, so the caching
    layer notes them and its flush forwards them; without a cache every update goes to the sinks
    with its record's headers.
    """

    carries_headers = True

    def __init__(
        self,
        node: ProcessorNode,
        processor: Any,
        store: Any,
        caching: Any,
        sinks: list[SinkNode] | None = None,
        same_keys: bool = False,
    ) -> None:
        super().__init__(node, [])
        self._processor = processor
        self._store = store
        self._caching = caching
        self._sinks = sinks
        # The store's key serde writes the bytes the records' keys came as (``Columns.raw_keys``),
        # so those are the keys' store bytes: no serialization per record.
        self._same_keys = same_keys
        # The layer writes go to when there is no cache to hold them: the one below the cache,
        # written a batch at a time where it takes batches (None: a put per slot).
        self._below = store.wrapped if caching is None else caching.wrapped
        self._write_changes = change_writer(self._below)
        self._decode, self._encode = _stamped_codec(store)

    @property
    def runs_uncached(self) -> bool:
        """Whether batches without a cache run here (else record by record)."""
        return self._sinks is not None

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        self.run_columns(task, _decoded(task, batch, key_enc, value_enc))

    def _raw_keys(self, columns: Columns) -> list[bytes] | None:
        """The records' keys as the store writes them, when they came with them (read only for
        records whose key is not null)."""
        return columns.raw_keys if self._same_keys else None  # type: ignore[return-value]

    def run_columns(self, task: SegmentTask, columns: Columns) -> None:
        cache = None if self._caching is None else self._caching.current_cache()
        if cache is None or cache.max_bytes == 0:
            if self._sinks is None:
                super().run_columns(task, columns)
            else:
                self._run_uncached(task, columns)
            return
        context = task.context
        context.node = self.node
        position = context.record_context
        slots = self._aggregate(position, columns)
        if not slots:
            return
        store = self._store
        encode = self._encode
        cached = store.wrapped  # the caching layer: what the metered store's put writes to
        headers_of = columns.headers_of
        previous = position.headers
        try:
            with store.query_lock:
                for _, start, aggregate, ts, i, raw in sorted(slots, key=_last_record):
                    position.offset = columns.offsets[i]
                    position.timestamp = ts
                    position.headers = headers_of(i)  # what the cache notes for the entry
                    self._put(cached, raw, start, encode(aggregate, ts))
        finally:
            position.headers = previous

    def _run_uncached(self, task: SegmentTask, columns: Columns) -> None:
        context = task.context
        context.node = self.node
        position = context.record_context
        updates: list[Update] = []
        slots = self._aggregate(position, columns, updates)
        if not slots:
            return
        store = self._store
        encode = self._encode
        # A store with a (zero-byte) cache writes as the cache's flush does, which neither writes
        # nor forwards the deletion of a key the store does not hold (CachingKeyValueStore._on_flush).
        skips_empty_deletes = self._caching is not None
        below = self._below
        with store.query_lock:
            writes: list[tuple[bytes, int | None, bytes | None, int]] = []
            for _, start, aggregate, ts, i, raw in sorted(slots, key=_last_record):
                position.offset = columns.offsets[i]  # an exception then names this record
                position.timestamp = columns.timestamps[i]
                data = encode(aggregate, ts)
                if data is None and skips_empty_deletes and self._get(below, raw, start) is None:
                    continue
                writes.append((raw, start, data, i))
            self._write(writes, columns, position)
        sinks = self._sinks
        if not sinks or not updates:
            return
        if skips_empty_deletes:
            updates = [u for u in updates if u[2] is not None or u[3] is not None]
        keys = [self._forwarded_key(k, start) for k, start, _, _, _, _ in updates]
        values = [new for _, _, new, _, _, _ in updates]
        # The cache's flush stamps a deletion with its record's timestamp, not the aggregate's.
        timestamps = np.asarray(
            [
                columns.timestamps[i] if new is None and skips_empty_deletes else ts
                for _, _, new, _, ts, i in updates
            ],
            dtype=np.int64,
        )
        indices = _last_indices(updates)
        offsets = columns.arrays()[1][indices]
        headers_from = columns.headers_at(indices)
        for sink in sinks:
            context.node = sink
            sink.send_batch(keys, values, timestamps, offsets, headers_from=headers_from)

    def _write(
        self, writes: list[tuple[bytes, int | None, bytes | None, int]], columns: Columns, position: Any
    ) -> None:
        """Each slot's newest bytes (slot key bytes, window start, bytes, index of its last
        record) into the layer below the cache, logged at its last record's timestamp as a put per
        record would log it: as one batch of changes where the layer takes them, else a put each."""
        if self._write_changes is None:
            for raw, start, data, i in writes:
                position.offset = columns.offsets[i]
                position.timestamp = columns.timestamps[i]
                self._put(self._below, raw, start, data)
            return
        if writes:
            timestamps, offsets = columns.arrays()
            self._write_changes(
                RecordBatch.from_columns(
                    [self._change_key(raw, start) for raw, start, _, _ in writes],
                    [data for _, _, data, _ in writes],
                    _at(timestamps, writes),
                    0,
                    _at(offsets, writes),
                )
            )

    def _change_key(self, raw: bytes, start: int | None) -> bytes:
        """A slot's key in a batch of changes (the changelog's key)."""
        return raw

    def _forwarded_key(self, key: Any, start: int | None) -> Any:
        """The key an update is forwarded with (a window's key and window for windowed stores)."""
        return key

    @abc.abstractmethod
    def _aggregate(
        self, position: Any, columns: Columns, updates: list[Update] | None = None
    ) -> list[list[Any]]:
        """Each slot's [key, window start, aggregate, timestamp, index of its last record, key
        bytes], updated record by record in record order (the position set per record); ``_update``
        does one record's update of a slot. With ``updates``, each update is appended to it as
        (key, window start, new aggregate, old aggregate, new timestamp, record index)."""

    @abc.abstractmethod
    def _get(self, layer: Any, raw: bytes, start: int | None) -> bytes | None:
        """A slot's stored bytes in ``layer`` (a layer below the metered store)."""

    @abc.abstractmethod
    def _put(self, layer: Any, raw: bytes, start: int | None, data: bytes | None) -> None:
        """Put a slot's bytes into ``layer``, as the metered store's put does into the layer below it
        (the change-logging layer, if it is that one or below it, logs the change)."""


def _new_slot(
    key: Any, start: int | None, stored: tuple[Any, int] | None, ts: int, i: int, raw: bytes
) -> list[Any]:
    """A slot for an aggregate read from the store as (value, timestamp) (None: none yet), before
    its first record."""
    if stored is None:
        return [key, start, None, ts, i, raw]
    return [key, start, stored[0], stored[1], i, raw]


def _stamped_codec(
    store: Any,
) -> tuple[Callable[[bytes | None], tuple[Any, int] | None], Callable[[Any, int], bytes | None]]:
    """How a step reads a DSL store's bytes as (value, timestamp) and writes (value, timestamp) as
    bytes: directly for kstreams' timestamped stores, through ``ValueAndTimestamp`` otherwise."""
    if is_timestamped(store) and hasattr(store, "_stamped_value"):
        return store._stamped_value, store._stamped_bytes

    def decode(data: bytes | None) -> tuple[Any, int] | None:
        stored = store._value(data)
        return None if stored is None else (stored.value, stored.timestamp)

    def encode(value: Any, timestamp: int) -> bytes | None:
        return store._value_bytes(ValueAndTimestamp.make(value, timestamp))  # type: ignore[no-any-return]

    return decode, encode


def _update(slot: list[Any], aggregate: Any, ts: int, i: int) -> None:
    """A record at ``ts`` (index ``i``) made ``aggregate``: its timestamp is the larger one, or the
    record's own when there was no aggregate (none yet, or deleted: ``store_access.updated_timestamp``)."""
    if slot[2] is None or ts > slot[3]:
        slot[3] = ts
    slot[2] = aggregate
    slot[4] = i


class PythonAggregateStep(_PythonAggregation):
    """count, reduce or aggregate with Python functions per key into a cached key-value store, a
    batch at a time: the functions run per record, in record order, but each key of the batch is
    read from the store once and written once."""

    kernel = "aggregate[python]"
    _processor: StreamAggregateProcessor
    _store: MeteredKeyValueStore[Any, Any]

    def _aggregate(
        self, position: Any, columns: Columns, updates: list[Update] | None = None
    ) -> list[list[Any]]:
        store = self._store
        raw_key = store.raw_key
        decode = self._decode
        read = store.wrapped.get  # the metered store's get, without serializing the key again
        apply = self._processor.spec._apply
        slots: dict[bytes, list[Any]] = {}
        offsets = columns.offsets
        raw_keys = self._raw_keys(columns)
        for i, (k, v, ts) in enumerate(zip(columns.keys, columns.values, columns.timestamps, strict=True)):
            if k is None or v is None:
                continue  # as the processor skips them (Kafka's rule for non-windowed aggregations)
            position.offset = offsets[i]  # an exception then names this record
            position.timestamp = ts
            slot = slots.get(raw := raw_key(k) if raw_keys is None else raw_keys[i])
            if slot is None:
                slot = slots[raw] = _new_slot(k, None, decode(read(raw)), ts, i, raw)
            old = slot[2]
            _update(slot, apply(k, v, old), ts, i)
            if updates is not None:
                updates.append((k, None, slot[2], old, slot[3], i))
        return list(slots.values())

    def _get(self, layer: Any, raw: bytes, start: int | None) -> bytes | None:
        return layer.get(raw)  # type: ignore[no-any-return]

    def _put(self, layer: Any, raw: bytes, start: int | None, data: bytes | None) -> None:
        layer.put(raw, data)


def _last_record(slot: list[Any]) -> int:
    return slot[4]  # type: ignore[no-any-return]


class PythonWindowedAggregateStep(_PythonAggregation):
    """A windowed count, reduce or aggregate with Python functions into a cached window store, a
    batch at a time, as ``PythonAggregateStep`` does per key: per (key, window) here. Records are
    assigned to windows and late ones dropped in record order, against the processor's own
    observed stream time, exactly as record by record."""

    kernel = "windowed-aggregate[python]"
    _processor: WindowedAggregateProcessor
    _store: MeteredWindowStore[Any, Any]

    def _aggregate(
        self, position: Any, columns: Columns, updates: list[Update] | None = None
    ) -> list[list[Any]]:
        store = self._store
        raw_key = store.raw_key
        decode = self._decode
        fetch = store.wrapped.fetch  # the metered store's fetch, without serializing the key again
        processor = self._processor
        apply = processor.spec._apply
        windows_for = processor.spec.windows.windows_for
        grace = processor.grace_ms
        observed = processor.observed_stream_time
        raw_keys = self._raw_keys(columns)
        dropped = 0
        slots: dict[tuple[bytes, int], list[Any]] = {}
        try:
            for i, (k, v, ts) in enumerate(
                zip(columns.keys, columns.values, columns.timestamps, strict=True)
            ):
                if k is None:
                    continue  # a null value still counts in a windowed aggregation (Kafka's rule)
                position.offset = columns.offsets[i]  # an exception then names this record
                position.timestamp = ts
                if ts > observed:
                    observed = ts
                close = observed - grace
                raw = raw_key(k) if raw_keys is None else raw_keys[i]
                for start, end in windows_for(ts):
                    if end <= close:
                        dropped += 1
                        continue
                    slot = slots.get((raw, start))
                    if slot is None:
                        stored = decode(fetch(raw, start))
                        slot = slots[(raw, start)] = _new_slot(k, start, stored, ts, i, raw)
                    old = slot[2]
                    _update(slot, apply(k, v, old), ts, i)
                    if updates is not None:
                        updates.append((k, start, slot[2], old, slot[3], i))
        finally:
            processor.observed_stream_time = observed
            processor.dropped += dropped
        return list(slots.values())

    def _get(self, layer: Any, raw: bytes, start: int | None) -> bytes | None:
        return layer.fetch(raw, start)  # type: ignore[no-any-return]

    def _put(self, layer: Any, raw: bytes, start: int | None, data: bytes | None) -> None:
        layer.put(raw, data, start)

    def _change_key(self, raw: bytes, start: int | None) -> bytes:
        assert start is not None
        return changelog_key(raw, start, 0)

    def _forwarded_key(self, key: Any, start: int | None) -> Any:
        assert start is not None
        return WindowedKey(key, start, start + self._processor.size_ms)


def change_writer(layer: Any) -> Callable[[RecordBatch], None] | None:
    """How a batch of changes (changelog records: key, value or None, timestamp; windowed keys in
    the changelog's layout) is written to a layer below a metered store, with its changelog if the
    layer logs, exactly as a put per change would; None for a layer of a kind not known here (a
    user's store, or a window store that retains duplicates)."""
    if isinstance(layer, ChangeLoggingKeyValueStore):
        return layer.write_changes
    if isinstance(layer, ChangeLoggingWindowStore):
        inner = layer.wrapped
        if isinstance(inner, InnerWindowStore) and not inner.retain_duplicates:
            return layer.write_changes
        return None
    if isinstance(layer, KeyValueStore):
        return lambda changes: layer.put_all(list(change_pairs(changes)))
    if isinstance(layer, InnerWindowStore) and not layer.retain_duplicates:
        return lambda changes: layer.put_changes(change_pairs(changes))
    return None


def _last_indices(rows: list[Any]) -> Any:
    """The record indices that end each of ``rows``, as an index array."""
    return np.fromiter((row[-1] for row in rows), dtype=np.intp, count=len(rows))


def _at(column: Any, rows: list[Any]) -> Any:
    """The entries of an int64 column at the record indices that end each of ``rows``."""
    return column[_last_indices(rows)]


def _decoded(task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> Columns:
    """A batch's records as Python objects, decoded as the source's serdes would, with the key
    bytes they were decoded from."""
    topic = task.context.record_context.topic
    raw_keys = batch.keys()
    timestamps, offsets = batch.timestamps_array(), batch.offsets_array()
    return Columns(
        decode_column(key_enc, topic, raw_keys),
        decode_column(value_enc, topic, batch.values()),
        timestamps.tolist(),
        offsets.tolist(),
        raw_keys,
        timestamps,
        offsets,
        (batch, None) if batch.has_headers else None,
    )


class ProjectStep(Step):
    """``select_key``/``map_values`` with an extractor (``kstreams.predicates``) of a JSON
    field: the new column holds the field's JSON text."""

    kernel = "project"
    calls_python = False
    carries_headers = True

    def __init__(self, node: Any, children: list[Step], src_side: int, field: str | None, dst_side: int):
        super().__init__(node, children)
        self._src_side = src_side
        self._field = field
        self._dst_side = dst_side

    def json_fields(self) -> list[tuple[int, str]]:
        return [] if self._field is None else [(self._src_side, self._field)]

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        src_enc = key_enc if self._src_side == 0 else value_enc
        if src_enc != kernels.JSON:
            if self._field is None:  # key()/value() of another encoding: copy the column
                if self._src_side == self._dst_side:
                    self._forward(task, batch, key_enc, value_enc)
                    return
            self.boundary(task, batch, key_enc, value_enc)
            return
        projected = kernels.project(batch, self._src_side, self._field, self._dst_side, True)
        if projected is None:
            self.boundary(task, batch, key_enc, value_enc)
            return
        if self._dst_side == 0:
            self._forward(task, projected, kernels.JSON, value_enc)
        else:
            self._forward(task, projected, key_enc, kernels.JSON)


class PassThroughStep(Step):
    kernel = "pass"
    calls_python = False
    carries_headers = True

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        self._forward(task, batch, key_enc, value_enc)


class SinkStep(Step):
    """A sink to a fixed topic with the default partitioner and built-in serializers: re-encode
    in bulk, split by partition, hand each partition's batch to the record collector."""

    kernel = "sink"
    calls_python = False
    carries_headers = True

    node: SinkNode

    def __init__(self, node: SinkNode, key_enc: int, value_enc: int) -> None:
        super().__init__(node, [])
        self._key_dst = key_enc
        self._value_dst = value_enc

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        converted = kernels.convert(batch, key_enc, self._key_dst, value_enc, self._value_dst)
        if converted is None:
            self.boundary(task, batch, key_enc, value_enc)
            return
        self.node.send_serialized(converted)


class AggregateStep(Step):
    """count, or reduce with ``operator.add``/``min``/``max`` or a Python reducer (on numbers), per
    key (and window), through the ``aggregate`` kernels: into the store's record cache, or, without
    a cache (or with a cache of size 0), straight into the store below it with
    ``aggregate_uncached`` when ``write_changes`` can write there and ``forward_to`` takes every
    update (the sinks' steps below a ``to_stream()``; ``[]``: nothing is below). Otherwise batches
    without a cache run in ``python`` (set by the compiler) or record by record."""

    # The kernels keep the cache's header notes current and forward updates with their records'
    # headers.
    carries_headers = True

    def __init__(
        self,
        node: ProcessorNode,
        op: int,
        kernel: str,
        key_enc: int,
        value_enc: int,
        store_enc: int,
        store: MeteredKeyValueStore[Any, Any] | MeteredWindowStore[Any, Any],
        caching: CachingKeyValueStore | CachingWindowStore | None,
        windows: TimeWindows | None = None,
        reducer: Callable[[Any, Any], Any] | None = None,
        write_changes: Callable[[RecordBatch], None] | None = None,
        forward_to: list[Step] | None = None,
    ) -> None:
        super().__init__(node, [])
        self._op = op
        self._reducer = reducer
        self.calls_python = reducer is not None  # REDUCE calls the reducer per record, with the GIL
        # The same aggregation with Python functions, for batches without a cache the kernel cannot
        # take; None: those run record by record. Set by the compiler.
        self.python: _PythonAggregation | None = None
        self.kernel = kernel
        self._key_enc = key_enc
        self._value_enc = value_enc
        self._store_enc = store_enc
        self._caching = caching
        self._windows = windows
        if windows is not None and forward_to:
            raise ValueError(
                "a windowed aggregation's updates are forwarded with windowed keys, not by the kernel"
            )
        self._write_changes = write_changes if forward_to is not None else None
        self._forward_to = forward_to or []
        # The DSL's stores hold ValueAndTimestamp bytes; the kernel reads and writes that format.
        self._timestamped = is_timestamped(store)
        # Writes hold the metered layer's query lock, as its put does, so an interactive query
        # never reads the store in the middle of a batch's update.
        self._query_lock = store.query_lock
        below: Any = store.wrapped if caching is None else caching.wrapped
        if windows is None:
            self._load: Callable[[bytes], bytes | None] = below.get
        else:
            fetch = below.fetch

            def load(cache_key: bytes) -> bytes | None:
                return fetch(cache_key[:-8], _WINDOW_START.unpack_from(cache_key, len(cache_key) - 8)[0])  # type: ignore[no-any-return]

            self._load = load
        # Batches without a cache read all their slots in one call (the layers ``change_writer``
        # knows read that way).
        self._load_many: Callable[[list[bytes]], list[bytes | None]] | None = None
        if self._write_changes is not None:
            self._load_many = below.get_many if windows is None else below.fetch_many

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        if key_enc != self._key_enc or (self._op != kernels.COUNT and value_enc != self._value_enc):
            self.boundary(task, batch, key_enc, value_enc)
            return
        caching = self._caching
        cache = None if caching is None else caching.current_cache()
        if cache is None or cache.max_bytes == 0:
            if self._write_changes is not None and self._run_uncached(task, batch, value_enc):
                return
            if self.python is not None and self.python.runs_uncached:
                self.python.run(task, batch, key_enc, value_enc)
            else:
                self.boundary(task, batch, key_enc, value_enc)
            return
        task.context.node = self.node  # a reducer's exception then names this processor
        with self._query_lock:
            result = self._aggregate(cache, batch, value_enc)
        if result is None:
            self.boundary(task, batch, key_enc, value_enc)

    def _run_uncached(self, task: SegmentTask, batch: RecordBatch, value_enc: int) -> bool:
        """The batch into the store below (and its changelog), every update forwarded: False
        when a record needs the Python path (nothing was written)."""
        assert self._write_changes is not None and self._load_many is not None
        task.context.node = self.node
        result = kernels.aggregate_uncached(
            batch,
            self._op,
            value_enc,
            self._store_enc,
            self._load_many,
            forward=bool(self._forward_to),
            **self._options(),
        )
        if result is None:
            return False
        observed, dropped, changes, updates = result
        self._advance(observed, dropped)
        with self._query_lock:
            self._write_changes(changes)
        if updates is not None:
            for sink in self._forward_to:
                sink.run(task, updates, self._key_enc, self._store_enc)
        return True

    def _aggregate(self, cache: Any, batch: RecordBatch, value_enc: int) -> Any:
        caching = self._caching
        assert caching is not None  # a cache came from it
        result = kernels.aggregate(
            cache,
            caching.namespace,
            batch,
            self._op,
            value_enc,
            self._store_enc,
            self._load,
            notes=caching.header_notes,
            **self._options(),
        )
        if result is not None:
            self._advance(*result)
        return result

    def _options(self) -> dict[str, Any]:
        """The kernels' keyword arguments for this aggregation: its windows and the stream time
        its processor observed, its reducer, the store's format."""
        options: dict[str, Any] = {"reducer": self._reducer, "timestamped": self._timestamped}
        windows = self._windows
        if windows is not None:
            processor: WindowedAggregateProcessor = self.node.processor
            options.update(
                windowed=True,
                size_ms=windows.size_ms,
                advance_ms=windows.advance_ms,
                grace_ms=windows.grace_ms,
                observed_time=processor.observed_stream_time,
            )
        return options

    def _advance(self, observed: int, dropped: int) -> None:
        """A windowed processor's stream time and dropped records after a batch a kernel ran."""
        if self._windows is not None:
            processor: WindowedAggregateProcessor = self.node.processor
            processor.observed_stream_time = observed
            processor.dropped += dropped
