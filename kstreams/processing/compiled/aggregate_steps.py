"""Aggregation steps: count, reduce and aggregate per key (and window) a batch at a time, through
the ``aggregate`` kernels into the store's record cache or the layer below it (``AggregateStep``),
with Python functions over a key-value or window store (``PythonAggregateStep``,
``PythonWindowedAggregateStep``), and a count below a chain that kept the keys
(``CountColumnsStep``). The store and the records forwarded are what the per-record path leaves;
writes hold the metered store's query lock, so an interactive query sees a store before or after
a batch, never in between. Session counts are in ``session_steps``.

The module passes 600 lines because the four steps share one write-back (``_PythonAggregation``
and ``change_writer``, which ``AggregateStep`` uses too): apart they would import each other.
"""

from __future__ import annotations

import abc
import operator
import struct
from collections.abc import Callable
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from kstreams._native import kernels
from kstreams._native.record_batch import RecordBatch
from kstreams.processing.compiled.columns import Columns
from kstreams.processing.compiled.steps import SegmentTask, Step, decoded_columns
from kstreams.state.caching import CachingKeyValueStore, CachingWindowStore
from kstreams.state.changelogging import ChangeLoggingKeyValueStore, ChangeLoggingWindowStore, change_pairs
from kstreams.state.inner_windowed import InnerWindowStore
from kstreams.state.store import KeyValueStore, WindowedKey
from kstreams.state.timestamped import is_timestamped
from kstreams.state.value_and_timestamp import ValueAndTimestamp
from kstreams.state.window_key_schema import changelog_key

if TYPE_CHECKING:
    from kstreams._native.record_cache import RecordCache
    from kstreams.processing.record_context import RecordContext
    from kstreams.state.metered import MeteredKeyValueStore, MeteredWindowStore
    from kstreams.topology.dsl.processors.aggregate import (
        StreamAggregateProcessor,
        WindowedAggregateProcessor,
    )
    from kstreams.topology.dsl.windows import TimeWindows
    from kstreams.topology.graph import ProcessorNode, SinkNode

__all__ = [
    "AggregateStep",
    "CountColumnsStep",
    "PythonAggregateStep",
    "PythonWindowedAggregateStep",
    "change_writer",
]

_WINDOW_START = struct.Struct(">q")

# One update of an aggregation: (key, window start or None, new aggregate, old aggregate, the new
# aggregate's timestamp, index of its record in the batch).
Update = tuple[Any, int | None, Any, Any, int, int]


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
        processor: StreamAggregateProcessor | WindowedAggregateProcessor,
        store: MeteredKeyValueStore[Any, Any] | MeteredWindowStore[Any, Any],
        caching: CachingKeyValueStore | CachingWindowStore | None,
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
        self.run_columns(task, decoded_columns(task, batch, key_enc, value_enc))

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
        self,
        writes: list[tuple[bytes, int | None, bytes | None, int]],
        columns: Columns,
        position: RecordContext,
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
        self, position: RecordContext, columns: Columns, updates: list[Update] | None = None
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
        self, position: RecordContext, columns: Columns, updates: list[Update] | None = None
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
        self, position: RecordContext, columns: Columns, updates: list[Update] | None = None
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
    node: ProcessorNode

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

    def _aggregate(self, cache: RecordCache, batch: RecordBatch, value_enc: int) -> Any:
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
