"""The batch step of a session-window count: each key's sessions read once per batch, not once
per record.

Record by record, ``SessionAggregateProcessor`` calls ``find_sessions`` for every record and reads
each session it merges from the store; this step reads each key of the batch once (the store below
the cache, then the cache's entries of that key), keeps the key's sessions in a list while it runs
the batch's records in record order with the processor's exact rule (merge, drop after grace,
tombstones first), and writes the results so that everything downstream is what the per-record
path gives:

- *Cached store* (a cache larger than 0): nothing is forwarded until the cache flushes, so what
  must match is the cache itself: each entry's value and timestamp, the order of dirty entries
  (the flush order) and the LRU order (the eviction order). The step makes the per-record path's
  cache operations in its order: each record's ``find_sessions`` touches the key's cache entries in
  its range (``touch_range``), then its removes and its put write one entry each. It does so
  only when the batch cannot make the cache evict (an eviction flushes mid-batch, downstream and
  into the store): the bound is checked before the cache is touched, and a batch that could evict
  runs record by record.
- *No cache* (caching disabled, no cache, or a cache of 0 bytes): every remove and put reaches the
  store, the changelog and downstream at once, so the step makes the processor's calls, record by
  record and in order (``store.remove``/``store.put``/``forwarder.maybe_forward``), and saves only the
  reads. Writes advance the store's stream time and may expire sessions mid-batch: the step asks the
  inner store which session ends are still live (``InnerSessionStore.min_live``) before each record.

The processor's ``observed_stream_time`` and ``dropped`` are updated as record by record. Records
with a null key are skipped, as the processor skips them. Headers go where the per-record path puts
them: without a cache every update and tombstone is forwarded without headers (Kafka's processor
forwards records it makes anew); with one, each entry the batch writes notes the headers of its
last write (the caching
layer's ``header_notes``, which its flush forwards), or loses its note when that record had none.

A C kernel was considered for grouping the batch by key: profiling shows grouping (one dict
lookup per record) below 5% of the step; the cost is the store and the cache, which are Python
objects and C++ structures behind the GIL-holding cache API.
"""

from __future__ import annotations

import bisect
import logging
import struct
from typing import TYPE_CHECKING, Any

from kstreams._native import kernels
from kstreams.processing.compiled.columns import decode_column
from kstreams.processing.compiled.steps import SegmentTask, Step
from kstreams.state.store import WindowedKey
from kstreams.state.window_key_schema import MAX_LONG, SESSION_SUFFIX, session_key

if TYPE_CHECKING:
    from kstreams._native.record_batch import RecordBatch
    from kstreams._native.record_cache import RecordCache
    from kstreams.processing.processor_context import ProcessorContextImpl
    from kstreams.state.caching import CachingSessionStore
    from kstreams.state.inner_windowed import InnerSessionStore
    from kstreams.state.metered import MeteredSessionStore
    from kstreams.topology.dsl.processors.session_aggregate import SessionAggregateProcessor
    from kstreams.topology.graph import ProcessorNode

__all__ = ["KEY_ENCODINGS", "SessionCountStep"]

logger = logging.getLogger(__name__)

_LONG = struct.Struct(">q")
_END_START = struct.Struct(">qq")
# What the record cache counts per entry besides key and value bytes (RecordCache.ENTRY_OVERHEAD).
_ENTRY_OVERHEAD = 64

# The key encodings whose source bytes are the store's key bytes (the serde writes back what it
# read); a JSON key may be re-encoded differently, a float key's NaN bits may not survive.
KEY_ENCODINGS = (kernels.BYTES, kernels.STRING, kernels.LONG, kernels.INT, kernels.SHORT)

# One session of a key while a batch runs: [end, start, count], kept sorted by (end, start), the
# order in which find_sessions returns them.
Session = list[int]


class SessionCountStep(Step):
    """``windowed_by(SessionWindows).count()`` over a batch, per key, with the per-record path's
    results (see the module docstring)."""

    kernel = "session-count[python]"
    carries_headers = True
    node: ProcessorNode

    def __init__(
        self,
        node: ProcessorNode,
        processor: SessionAggregateProcessor,
        store: MeteredSessionStore[Any, Any],
        caching: CachingSessionStore | None,
        inner: InnerSessionStore,
        key_enc: int,
    ) -> None:
        super().__init__(node, [])
        self._processor = processor
        self._store = store
        self._caching = caching
        self._inner = inner
        self._key_enc = key_enc

    def run(self, task: SegmentTask, batch: RecordBatch, key_enc: int, value_enc: int) -> None:
        if key_enc != self._key_enc:
            self.boundary(task, batch, key_enc, value_enc)
            return
        task.context.node = self.node
        cache = self._caching.current_cache() if self._caching is not None else None
        if cache is not None and cache.max_bytes > 0:
            if not self._run_cached(cache, batch):
                self.boundary(task, batch, key_enc, value_enc)
            return
        self._run_write_through(task, batch, key_enc)

    # ------------------------------------------------------------------ both modes

    def _group(self, raw_keys: list[bytes | None], timestamps: list[int]) -> dict[bytes, int]:
        """Each non-null key of the batch with its earliest timestamp (where its reads start)."""
        earliest: dict[bytes, int] = {}
        for k, ts in zip(raw_keys, timestamps, strict=True):
            if k is None:
                continue
            first = earliest.get(k)
            if first is None or ts < first:
                earliest[k] = ts
        return earliest

    def _stored(self, below: Any, key: bytes, earliest_end: int) -> dict[tuple[int, int], int]:
        """(end, start) -> count of a key's sessions in ``below`` that end at or after ``earliest_end``."""
        return {
            (session.end, session.start): _LONG.unpack(value)[0]
            for session, value in below.find_sessions(key, earliest_end, MAX_LONG)
        }

    def _merge_found(self, sessions: list[Session], ts: int, gap: int, live: int) -> tuple[int, int]:
        """(first, last) index in ``sessions`` of those a record at ``ts`` merges with:
        find_sessions(key, ts - gap, ts + gap) of the store, from the list."""
        first = bisect.bisect_left(sessions, [max(ts - gap, live)])
        last = first
        latest_start = ts + gap
        while last < len(sessions) and sessions[last][1] <= latest_start:
            last += 1
        # Sessions of one key never overlap, so sorted by end they are sorted by start too: the
        # first whose start is past ts + gap ends the run.
        return first, last

    # ------------------------------------------------------------------ no cache

    def _run_write_through(self, task: SegmentTask, batch: RecordBatch, key_enc: int) -> None:
        """The processor's calls, in record order, with each key's sessions read once."""
        context = task.context
        position = context.record_context
        gap = self._processor.gap_ms
        raw_keys = batch.keys()
        timestamps = batch.timestamps_array().tolist()
        typed = decode_column(key_enc, position.topic, raw_keys)
        below = self._store.wrapped  # the caching layer without a cache, or the change-logging layer
        sessions_of: dict[bytes, list[Session]] = {}
        for k, first_ts in self._group(raw_keys, timestamps).items():
            stored = self._stored(below, k, first_ts - gap)
            sessions_of[k] = sorted([end, start, count] for (end, start), count in stored.items())
        offsets = batch.offsets_array().tolist()
        previous_headers = position.headers
        try:
            self._write_through(context, batch, raw_keys, typed, timestamps, offsets, sessions_of)
        finally:
            position.headers = previous_headers

    def _write_through(
        self,
        context: ProcessorContextImpl,
        batch: RecordBatch,
        raw_keys: list[bytes | None],
        typed: list[Any],
        timestamps: list[int],
        offsets: list[int],
        sessions_of: dict[bytes, list[Session]],
    ) -> None:
        position = context.record_context
        has_headers = batch.has_headers
        processor = self._processor
        store = self._store
        forwarder = processor.forwarder
        inner = self._inner
        gap, grace = processor.gap_ms, processor.grace_ms
        observed = processor.observed_stream_time
        for i, (raw, key, ts, offset) in enumerate(zip(raw_keys, typed, timestamps, offsets, strict=True)):
            if raw is None:
                continue
            position.offset = offset
            position.timestamp = ts
            # the record's headers, in the context as record by record (the updates carry none)
            position.headers = batch.headers(i) if has_headers else None
            context.node = self.node
            if ts > observed:
                observed = processor.observed_stream_time = ts
            close_time = observed - grace - gap
            sessions = sessions_of[raw]
            live = inner.min_live()
            if sessions and sessions[0][0] < live:  # expired by a write since: gone from the store
                del sessions[: bisect.bisect_left(sessions, [live])]
            first, last = self._merge_found(sessions, ts, gap, live)
            found = sessions[first:last]
            start, end, count = _merged(found, ts)
            if end < close_time:
                processor.dropped += 1
                continue
            if start != ts or end != ts:
                for s_end, s_start, s_count in found:
                    old = WindowedKey(key, s_start, s_end)
                    store.remove(old)
                    forwarder.maybe_forward(old, None, s_count, s_end)
            del sessions[first:last]
            count += 1
            store.put(WindowedKey(key, start, end), count)
            forwarder.maybe_forward(WindowedKey(key, start, end), count, None, end)
            # Kept even when the store ignored the write (its end is already past the retention):
            # the next record's min_live check drops it, as the store's read would miss it.
            bisect.insort(sessions, [end, start, count])

    # ------------------------------------------------------------------ cached

    def _run_cached(self, cache: RecordCache, batch: RecordBatch) -> bool:
        """The batch into the cache with the per-record path's result; False (nothing done) when
        the batch could make the cache evict."""
        caching = self._caching
        assert caching is not None
        processor = self._processor
        gap, grace = processor.gap_ms, processor.grace_ms
        namespace = caching.namespace
        raw_keys = batch.keys()
        timestamps = batch.timestamps_array().tolist()
        earliest = self._group(raw_keys, timestamps)
        if not earliest:
            return True

        # The store below the cache (read without touching the cache).
        below = caching.wrapped
        stored = {k: self._stored(below, k, first_ts - gap) for k, first_ts in earliest.items()}

        # Bound the cache's growth: at most one new entry per record (its session) and one
        # tombstone per stored session; every other write replaces an entry with one no larger.
        growth = sum(len(k) + SESSION_SUFFIX + 8 + _ENTRY_OVERHEAD for k in raw_keys if k is not None)
        growth += sum(len(k) + SESSION_SUFFIX + _ENTRY_OVERHEAD for k, s in stored.items() for _ in s)
        if cache.size_bytes + growth > cache.max_bytes:
            logger.debug(
                "Session count %s: a batch of %d records could make the cache evict; it runs record "
                "by record.",
                self.name,
                len(raw_keys),
            )
            return False

        # Each key's sessions as its first record would read them: the store's, with the cache's
        # entries (values and tombstones) over them, read without touching them (the records'
        # reads below touch each of them).
        # Per batch key, the top of its range in the cache (its latest possible session), whose
        # length is that of all its cache keys.
        top_of = {k: session_key(k, MAX_LONG, MAX_LONG) for k in earliest}
        sessions_of: dict[bytes, list[Session]] = {}
        for k, first_ts in earliest.items():
            read = stored[k]
            lo, top = session_key(k, 0, max(first_ts - gap, 0)), top_of[k]
            for cache_key, value in cache.range_items(namespace, lo, top, len(top), False):
                s_end, s_start = _END_START.unpack_from(cache_key, len(k))
                if value is None:
                    read.pop((s_end, s_start), None)
                else:
                    read[(s_end, s_start)] = _LONG.unpack(value)[0]
            sessions_of[k] = sorted([end, start, count] for (end, start), count in read.items())

        # The per-record path's cache operations, in its order: each record's find_sessions touches
        # every entry in its key range, then its removes and its put write one entry each, noting
        # the record's headers (or dropping the entry's note), as the caching layer's put does.
        note_headers = caching.note_headers
        has_headers = batch.has_headers
        observed = processor.observed_stream_time
        dropped = 0

        def write(cache_key: bytes, value: bytes | None, ts: int, headers: Any) -> None:
            note_headers(cache_key, headers)
            cache.put(namespace, cache_key, value, ts)

        with self._store.query_lock:
            for i, (raw, ts) in enumerate(zip(raw_keys, timestamps, strict=True)):
                if raw is None:
                    continue
                if ts > observed:
                    observed = ts
                close_time = observed - grace - gap
                top = top_of[raw]
                cache.touch_range(namespace, session_key(raw, 0, max(ts - gap, 0)), top, len(top))
                sessions = sessions_of[raw]
                first, last = self._merge_found(sessions, ts, gap, 0)
                found = sessions[first:last]
                start, end, count = _merged(found, ts)
                if end < close_time:
                    dropped += 1
                    continue
                headers = batch.headers(i) if has_headers else None
                if start != ts or end != ts:
                    for s_end, s_start, _ in found:
                        write(session_key(raw, s_start, s_end), None, ts, headers)
                del sessions[first:last]
                count += 1
                write(session_key(raw, start, end), _LONG.pack(count), ts, headers)
                bisect.insort(sessions, [end, start, count])
        processor.observed_stream_time = observed
        processor.dropped += dropped
        return True


def _merged(found: list[Session], ts: int) -> tuple[int, int, int]:
    """(start, end, count before the record) of the session that a record at ``ts`` makes of the
    sessions it merges (``found``)."""
    start = end = ts
    count = 0
    for s_end, s_start, s_count in found:
        count += s_count
        start = min(start, s_start)
        end = max(end, s_end)
    return start, end, count
