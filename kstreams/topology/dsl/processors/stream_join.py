"""KStream-KStream windowed join: inner, left and outer, with Kafka's semantics.

Each side's records are kept in a window store (retention: window size plus grace, duplicates
retained) by a "windowed" processor, and each side's join processor looks the other side's store
up for records within the join window: a left record at time t joins right records in
[t - before, t + after]. Results carry the larger of the two timestamps.

Left and outer joins (with the spurious-result fix of the no-grace/with-grace JoinWindows) do not
emit an unjoined record at once: they park it in a shared "outer" key-value store and emit
``joiner(value, None)`` (or ``joiner(None, value)``) only when its window has closed (stream time
passed its timestamp plus the look-ahead plus grace) without a join partner. Grace bounds lateness
through the window stores' retention: a record older than that finds no partner.

When parked records go out follows Kafka Streams 4.1 (KStreamKStreamJoin) exactly, quirks included,
since the outputs are compared with it record by record:
- only a record at the current stream time triggers the scan, and the scan is skipped while the
  tracked "oldest" parked time plus this side's look-ahead plus grace has not passed stream time;
- the scan stops once it has seen an open window on both sides, and leaves the tracked time at the
  last parked record it looked at (which may be later than the oldest one still parked, so a later
  scan may wait longer than needed: Kafka's behaviour, matched here);
- an emitted unjoined result carries the headers of the record whose processing emitted it.

The outer store is Kafka's: its key is (timestamp, side, key), serialized as the timestamp (8 bytes,
big-endian), a side byte (0 right, 1 left) and the key's bytes, so the store's byte order is the
order unjoined records are emitted in: by timestamp, then the right side first, then by key. Its
value is the list of every waiting record of that key, side and timestamp, so duplicates are all
emitted (Kafka's ListValueStore).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Mapping
from typing import Any

from kstreams.processor import Processor, ProcessorContext, Record
from kstreams.serdes import serde_from_config
from kstreams.topology.dsl.processors.store_access import get_store

__all__ = [
    "JoinTimeTrackers",
    "JoinWindowSupplier",
    "LeftOrRightValueListSerde",
    "StreamStreamJoinSupplier",
    "TimestampedKeyAndJoinSideSerde",
]

logger = logging.getLogger(__name__)

_LEFT = b"\x01"
_RIGHT = b"\x00"
_NO_PARKED_RECORD = (1 << 63) - 1
_LONG_MASK = (1 << 64) - 1
_TIMESTAMP = struct.Struct(">q")
_LENGTH = struct.Struct(">i")


class _DefaultingSerde:
    """Wraps an inner serde that may be None until the application's default serde is known."""

    def __init__(self, inner: Any, config_key: str) -> None:
        self.inner = inner
        self._config_key = config_key

    def bind_defaults(self, configs: Mapping[str, Any]) -> None:
        if self.inner is None:
            self.inner = serde_from_config(configs, self._config_key)
        if self.inner is None:
            raise ValueError(
                f"A stream-stream join has no serde for its {self._config_key.split('.')[1]}s: give one "
                f"with StreamJoined.with_(...) or set {self._config_key}."
            )

    def serializer(self) -> Any:
        return self

    def deserializer(self) -> Any:
        return self

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        self.bind_defaults(configs)


class TimestampedKeyAndJoinSideSerde(_DefaultingSerde):
    """Key of the shared outer-join store, ``(timestamp, is_left, key)``: the timestamp (8 bytes,
    big-endian), a side byte (1 left, 0 right), then the key's bytes (Kafka's
    TimestampedKeyAndJoinSide), so keys sort by timestamp, then right before left, then key."""

    name = "timestamped-key-and-join-side"

    def __init__(self, key_serde: Any) -> None:
        super().__init__(key_serde, "default.key.serde")

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        timestamp, is_left, key = data
        side = _LEFT if is_left else _RIGHT
        return _TIMESTAMP.pack(timestamp) + side + (self.inner.serialize(topic, key) or b"")

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        data = bytes(data)
        (timestamp,) = _TIMESTAMP.unpack_from(data)
        is_left = data[8:9] == _LEFT
        return (timestamp, is_left, self.inner.deserialize(topic, data[9:]))


class LeftOrRightValueListSerde:
    """Value of the shared outer-join store: the list of ``(is_left, value)`` of every record
    waiting under one key; each entry a 4-byte length, a side byte, then the left or right value."""

    name = "left-or-right-value-list"

    def __init__(self, left_serde: Any, right_serde: Any) -> None:
        self.left = _DefaultingSerde(left_serde, "default.value.serde")
        self.right = _DefaultingSerde(right_serde, "default.value.serde")

    def bind_defaults(self, configs: Mapping[str, Any]) -> None:
        self.left.bind_defaults(configs)
        self.right.bind_defaults(configs)

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        self.bind_defaults(configs)

    def serializer(self) -> Any:
        return self

    def deserializer(self) -> Any:
        return self

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        parts = []
        for is_left, value in data:
            serde = self.left.inner if is_left else self.right.inner
            entry = (_LEFT if is_left else _RIGHT) + (serde.serialize(topic, value) or b"")
            parts.append(_LENGTH.pack(len(entry)))
            parts.append(entry)
        return b"".join(parts)

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        data = bytes(data)
        entries = []
        offset = 0
        while offset < len(data):
            (length,) = _LENGTH.unpack_from(data, offset)
            entry = data[offset + 4 : offset + 4 + length]
            offset += 4 + length
            is_left = entry[:1] == _LEFT
            serde = self.left.inner if is_left else self.right.inner
            entries.append((is_left, serde.deserialize(topic, entry[1:])))
        return entries


def _long_sum(*terms: int) -> int:
    """The sum as a Java long computes it (wrapping at 64 bits). Kafka adds the look-ahead and grace
    to a "no parked record" time of Long.MAX_VALUE, which wraps negative, so the first scan after a
    start (or restart, with records parked before it) always runs; matching that needs the wrap."""
    total = sum(terms) & _LONG_MASK
    return total - (1 << 64) if total >= 1 << 63 else total


class _TimeTracker:
    """Stream time shared by both join processors of one task, and the time of the parked record
    the last scan stopped at (Kafka's TimeTracker.minTime)."""

    __slots__ = ("min_time", "stream_time")

    def __init__(self) -> None:
        self.stream_time = -1
        self.min_time = _NO_PARKED_RECORD

    def advance(self, timestamp: int) -> None:
        if timestamp > self.stream_time:
            self.stream_time = timestamp


class JoinTimeTrackers:
    """One time tracker per task, shared by the two join processors of that task; a task's tracker
    is dropped when its processors close, so a task opened again starts afresh, as in Kafka."""

    def __init__(self) -> None:
        self._trackers: dict[Any, _TimeTracker] = {}

    def for_task(self, task_id: Any) -> _TimeTracker:
        tracker = self._trackers.get(task_id)
        if tracker is None:
            tracker = self._trackers[task_id] = _TimeTracker()
        return tracker

    def remove(self, task_id: Any) -> None:
        self._trackers.pop(task_id, None)


class JoinWindowSupplier:
    """Keeps one side's records in its window store and forwards them to its join processor."""

    kind = "join_window"

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _JoinWindow(self.store_name)


class _JoinWindow(Processor[Any, Any, Any, Any]):
    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.store = get_store(context, self.store_name)

    def process(self, record: Record[Any, Any]) -> None:
        self.context.forward(record)
        # A null key can never join, so it is not kept; the join processor still sees it (an
        # outer side emits it unjoined, KIP-962).
        if record.key is not None:
            self.store.put(record.key, record.value, record.timestamp)


class StreamStreamJoinSupplier:
    """One side's join processor: joins its records with the other side's window store, with
    ``joiner(left_value, right_value)``, or ``joiner(key, left_value, right_value)`` when
    ``with_key`` (Kafka's ValueJoinerWithKey)."""

    kind = "stream_stream_join"

    def __init__(
        self,
        is_left_side: bool,
        other_store_name: str,
        *,
        before_ms: int,
        after_ms: int,
        grace_ms: int,
        joiner: Callable[..., Any],
        outer: bool,
        outer_store_name: str | None,
        time_trackers: JoinTimeTrackers,
        outer_serdes: tuple[Any, ...] = (),
        with_key: bool = False,
    ) -> None:
        self.is_left_side = is_left_side
        self.other_store_name = other_store_name
        # The window as the left side sees it; the right side looks the other way.
        self.windows_before_ms = before_ms
        self.windows_after_ms = after_ms
        self.grace_ms = grace_ms
        self.joiner = joiner
        self.with_key = with_key
        self.outer = outer
        self.outer_store_name = outer_store_name
        self.time_trackers = time_trackers
        # Serdes of the shared outer store, bound to the default serdes at init when not given.
        self.outer_serdes = outer_serdes

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _StreamStreamJoin(self)


class _StreamStreamJoin(Processor[Any, Any, Any, Any]):
    def __init__(self, spec: StreamStreamJoinSupplier) -> None:
        self.spec = spec
        self.is_left = spec.is_left_side
        if self.is_left:
            self.before_ms, self.after_ms = spec.windows_before_ms, spec.windows_after_ms
        else:
            self.before_ms, self.after_ms = spec.windows_after_ms, spec.windows_before_ms
        self.dropped = 0

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.other = get_store(context, self.spec.other_store_name)
        self.outer_store = (
            get_store(context, self.spec.outer_store_name) if self.spec.outer_store_name else None
        )
        self.tracker = self.spec.time_trackers.for_task(context.task_id)
        for serde in self.spec.outer_serdes:
            serde.bind_defaults(context.app_configs)

    def _join(self, key: Any, this: Any, other: Any) -> Any:
        if self.is_left:
            return _apply_joiner(self.spec, key, this, other)
        return _apply_joiner(self.spec, key, other, this)

    def process(self, record: Record[Any, Any]) -> None:
        timestamp = record.timestamp
        self.tracker.advance(timestamp)
        if record.value is None or record.key is None:
            if self.spec.outer and record.value is not None:
                # A null key can never find a partner: an outer side emits it at once (KIP-962).
                self.context.forward(record.with_value(self._join(record.key, record.value, None)))
                return
            self.dropped += 1
            logger.debug("Skipping a record with a null key or value in a stream-stream join.")
            return
        # Late records need no check of their own: the window stores keep records only for the
        # window size plus grace, so a record whose window closed finds no partner.
        time_from = max(0, timestamp - self.before_ms)
        time_to = max(0, timestamp + self.after_ms)
        if self.outer_store is not None and timestamp == self.tracker.stream_time:
            self._emit_closed_unjoined(record)
        joined = False
        for other_timestamp, other_value in self.other.fetch_range(record.key, time_from, time_to):
            joined = True
            if self.outer_store is not None:
                # The other side's records of that time found a partner: none of them may be
                # emitted unjoined later. Read first, so a join writes no needless tombstone.
                other_key = (other_timestamp, not self.is_left, record.key)
                if self.outer_store.get(other_key) is not None:
                    self.outer_store.delete(other_key)
            self.context.forward(
                Record(
                    record.key,
                    self._join(record.key, record.value, other_value),
                    max(timestamp, other_timestamp),
                    record.headers,
                )
            )
        if joined or not self.spec.outer:
            return
        if self.outer_store is None or time_to < self.tracker.stream_time:
            # Eager results (no spurious-result fix), or the window is already closed.
            self.context.forward(record.with_value(self._join(record.key, record.value, None)))
        else:
            self.tracker.min_time = min(self.tracker.min_time, timestamp)
            this_key = (timestamp, self.is_left, record.key)
            waiting = self.outer_store.get(this_key) or []
            waiting.append((self.is_left, record.value))
            self.outer_store.put(this_key, waiting)

    def close(self) -> None:
        self.spec.time_trackers.remove(self.context.task_id)

    def _emit_closed_unjoined(self, trigger: Record[Any, Any]) -> None:
        """Emit, with ``trigger``'s headers, the parked records whose windows have closed (Kafka's
        emitNonJoinedOuterRecords; its rules are in the module docstring)."""
        tracker = self.tracker
        grace = self.spec.grace_ms
        before, after = self.spec.windows_before_ms, self.spec.windows_after_ms
        if _long_sum(tracker.min_time, self.after_ms, grace) >= tracker.stream_time:
            return  # the oldest parked record's window may still be open: no scan
        assert self.outer_store is not None
        tracker.min_time = _NO_PARKED_RECORD  # stays so when the store is empty
        # The store iterates in emission order (timestamp, right side first, key).
        closed = []
        left_open = right_open = False
        for stored_key, waiting in self.outer_store.all():
            timestamp, is_left, _ = stored_key
            tracker.min_time = timestamp
            if left_open and right_open:
                break  # every later record's window is open too, on both sides
            # A left record can still meet right records up to `after` later; a right record left
            # records up to `before` later.
            if timestamp + (after if is_left else before) + grace >= tracker.stream_time:
                if is_left:
                    left_open = True
                else:
                    right_open = True
                if left_open and right_open and len(waiting) > 1:
                    # Kafka's store iterates each parked value of a key as an entry of its own:
                    # the next one, of this time, stops the scan and leaves the minimum time here.
                    break
                continue
            closed.append((stored_key, waiting))
        # Emitted and deleted after the iteration, which must not see the store change under it.
        for stored_key, waiting in closed:
            timestamp, _, key = stored_key
            for is_left, value in waiting:
                result = (
                    _apply_joiner(self.spec, key, value, None)
                    if is_left
                    else _apply_joiner(self.spec, key, None, value)
                )
                self.context.forward(Record(key, result, timestamp, trigger.headers))
            self.outer_store.delete(stored_key)


def _apply_joiner(spec: StreamStreamJoinSupplier, key: Any, left: Any, right: Any) -> Any:
    return spec.joiner(key, left, right) if spec.with_key else spec.joiner(left, right)
