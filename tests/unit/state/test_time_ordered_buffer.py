"""The suppression buffer: time order (then serialized key, as Kafka's), non-resetting updates,
prior values, size accounting as Kafka's, change-logging at flush (values and tombstones), restore
from the changelog, Kafka's version 3 changelog (a record Kafka Streams wrote), and the version 1
and 2 changelogs of kstreams 0.1 and 0.2."""

from __future__ import annotations

import struct

import pytest

from kstreams.errors import ProcessorStateException
from kstreams.serdes import Serdes
from kstreams.state.store import WindowedKey
from kstreams.state.time_ordered_buffer import (
    EMPTY_MIN_TIMESTAMP,
    BufferedRecord,
    InMemoryTimeOrderedKeyValueBuffer,
    TimeOrderedKeyValueBufferBuilder,
    WindowedKeyFormat,
)

S = Serdes.string()
L = Serdes.long()
SESSIONS = WindowedKeyFormat(session=True)
TUMBLING_10 = WindowedKeyFormat(session=False, window_size_ms=10)


def _buffer(make_context, logging_enabled: bool = True, window_format=None):  # type: ignore[no-untyped-def]
    context = make_context()
    buffer = InMemoryTimeOrderedKeyValueBuffer("buf", S, L, logging_enabled, window_format)
    buffer.init(context, buffer)
    return buffer, context


def _drain(buffer: InMemoryTimeOrderedKeyValueBuffer) -> list[BufferedRecord]:
    evicted: list[BufferedRecord] = []
    buffer.evict_while(lambda: True, evicted.append)
    return evicted


def test_entries_leave_in_buffer_time_order_and_an_updated_key_keeps_its_place(make_context):
    buffer, _ = _buffer(make_context)
    buffer.put(20, "b", 1, None, 20, None)
    buffer.put(10, "a", 1, None, 10, None)
    buffer.put(30, "a", 2, 1, 30, [("h", b"1")])  # keeps time 10
    assert buffer.min_timestamp() == 10
    assert buffer.num_records() == 2
    evicted: list[BufferedRecord] = []
    assert buffer.evict_while(lambda: buffer.min_timestamp() <= 15, evicted.append) == 1
    assert evicted == [BufferedRecord("a", 2, 1, 30, [("h", b"1")])]
    assert buffer.min_timestamp() == 20
    assert _drain(buffer) == [BufferedRecord("b", 1, None, 20, None)]
    assert buffer.min_timestamp() == EMPTY_MIN_TIMESTAMP
    assert buffer.buffer_size() == 0


def test_prior_value_is_the_value_from_before_the_key_was_buffered(make_context):
    buffer, _ = _buffer(make_context)
    buffer.put(1, "a", 5, 4, 1, None)
    buffer.put(2, "a", 6, 5, 2, None)
    assert buffer.prior_value_for_buffered("a") == (True, 4)
    assert buffer.prior_value_for_buffered("b") == (False, None)


def test_windowed_keys_round_trip_in_kafkas_windowed_key_layouts(make_context):
    sessions, context = _buffer(make_context, window_format=SESSIONS)
    sessions.put(100, WindowedKey("a", 0, 100), 3, 2, 90, None)
    sessions.flush()
    # SessionWindowedSerializer: inner key, end, start.
    assert context.changelog[0][1] == b"a" + struct.pack(">qq", 100, 0)
    assert _drain(sessions) == [BufferedRecord(WindowedKey("a", 0, 100), 3, 2, 90, None)]
    windows, context = _buffer(make_context, window_format=TUMBLING_10)
    windows.put(10, WindowedKey("a", 0, 10), 3, 2, 9, None)
    windows.flush()
    # TimeWindowedSerializer: inner key, start; the end comes back from the window size.
    assert context.changelog[0][1] == b"a" + struct.pack(">q", 0)
    assert _drain(windows) == [BufferedRecord(WindowedKey("a", 0, 10), 3, 2, 9, None)]


def test_a_windowed_key_without_a_window_format_is_refused(make_context):
    buffer, _ = _buffer(make_context)
    with pytest.raises(ProcessorStateException, match="does not know how to write its window"):
        buffer.put(100, WindowedKey("a", 0, 100), 3, 2, 90, None)


def test_entries_of_equal_time_leave_in_serialized_key_order(make_context):
    # Kafka's buffer sorts by time, then by the serialized key's bytes: "ab..." before "d...",
    # whatever the windows (suppress-equal-time-order).
    buffer, _ = _buffer(make_context, window_format=SESSIONS)
    buffer.put(2, WindowedKey("d", 0, 2), 2, None, 2, None)
    buffer.put(2, WindowedKey("ab", 2, 2), 1, None, 2, None)
    buffer.put(2, WindowedKey("d", 0, 0), None, 1, 2, None)
    assert [r.key for r in _drain(buffer)] == [
        WindowedKey("ab", 2, 2),
        WindowedKey("d", 0, 0),
        WindowedKey("d", 0, 2),
    ]


def test_size_counts_what_kafkas_resident_memory_size_estimate_counts(make_context):
    buffer, _ = _buffer(make_context)
    # buffer time 8 + key 1 + new value 8 + context (timestamp 8, offset 8, partition 4, topic 5)
    buffer.put(1, "a", 1, None, 1, None, topic="input", partition=0, offset=3)
    assert buffer.buffer_size() == 8 + 1 + 8 + 8 + 8 + 4 + 5
    # An update: the prior value (None) stays, the old value (8) is counted, headers too (name
    # length and value bytes).
    buffer.put(1, "a", 2, 1, 2, [("h1", b"xyz"), ("h2", None)], topic="input", partition=0, offset=4)
    updated = 28 + 1 + 8 + 8 + 5 + (2 + 3) + 2
    assert buffer.buffer_size() == updated
    # First buffering with an old value: prior and old are one value, counted once.
    buffer.put(1, "b", 2, 1, 2, None, topic="input")
    assert buffer.buffer_size() == updated + 28 + 1 + 8 + 8 + 5


def test_an_update_whose_old_value_equals_the_prior_counts_it_once(make_context):
    buffer, _ = _buffer(make_context)
    buffer.put(1, "a", 5, 4, 1, None)
    first = buffer.buffer_size()
    buffer.put(1, "a", 4, 4, 2, None)  # old == prior by value: Kafka keeps one array
    assert buffer.buffer_size() == first


def test_changelog_is_written_at_flush_with_tombstones_for_evicted_keys(make_context):
    buffer, context = _buffer(make_context)
    buffer.put(10, "a", 1, None, 10, None)
    buffer.put(11, "a", 2, 1, 11, None)
    buffer.put(20, "b", 1, None, 20, None)
    assert context.changelog == []
    buffer.flush()
    assert [(name, key, value is None, ts) for name, key, value, ts in context.changelog] == [
        ("buf", b"a", False, 11),
        ("buf", b"b", False, 20),
    ]
    context.changelog.clear()
    buffer.evict_while(lambda: buffer.min_timestamp() <= 10, lambda evicted: None)
    buffer.flush()
    assert context.changelog == [("buf", b"a", None, 11)]
    context.changelog.clear()
    buffer.flush()
    assert context.changelog == []


def test_restore_rebuilds_the_buffer_of_the_last_flush(make_context):
    buffer, context = _buffer(make_context)
    buffer.put(10, "a", 2, 1, 12, [("h", None)], topic="in", partition=0, offset=7)
    buffer.put(10, "a", 3, 2, 13, [("h", None)], topic="in", partition=0, offset=8)
    buffer.put(5, "b", 7, None, 5, None)
    buffer.put(30, "c", 1, None, 30, None)
    buffer.flush()
    buffer.evict_while(lambda: buffer.min_timestamp() <= 5, lambda evicted: None)
    buffer.flush()
    size = buffer.buffer_size()
    restored, new_context = _buffer(make_context)
    restore = new_context.registered["buf"]
    restore([(key, value) for _, key, value, _ in context.changelog])
    assert restored.num_records() == 2
    assert restored.buffer_size() == size
    assert restored.prior_value_for_buffered("a") == (True, 1)
    assert _drain(restored) == [
        BufferedRecord("a", 3, 2, 13, [("h", None)]),
        BufferedRecord("c", 1, None, 30, None),
    ]


def _version_1_value(
    time: int, timestamp: int, prior: bytes | None, old: bytes | None, new: bytes | None
) -> bytes:
    def optional(data: bytes | None) -> bytes:
        return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data

    return (
        struct.pack(">Bqq", 1, time, timestamp)
        + optional(prior)
        + optional(old)
        + optional(new)
        + b"\xff" * 4
    )


ONE, TWO = struct.pack(">q", 1), struct.pack(">q", 2)


def test_a_version_1_changelog_is_restored_and_rewritten_under_its_new_keys(make_context):
    buffer, context = _buffer(make_context)
    context.registered["buf"]([(b"\x00a", _version_1_value(10, 12, ONE, ONE, TWO))])  # type byte, key
    assert buffer.num_records() == 1
    assert buffer.prior_value_for_buffered("a") == (True, 1)
    buffer.flush()
    written = {key: value for _, key, value, _ in context.changelog}
    assert written[b"\x00a"] is None  # the old key goes
    # In Kafka's version 3: no version byte, the record context's timestamp first.
    assert written[b"a"] is not None and written[b"a"][:8] == struct.pack(">q", 12)
    assert _drain(buffer) == [BufferedRecord("a", 2, 1, 12, None)]


def test_a_version_1_windowed_entry_is_restored_under_kafkas_windowed_key(make_context):
    buffer, context = _buffer(make_context, window_format=SESSIONS)
    legacy = b"\x01" + struct.pack(">qq", 0, 5) + b"w"  # type byte, start, end, inner key
    context.registered["buf"]([(legacy, _version_1_value(5, 5, None, None, ONE))])
    buffer.flush()
    written = {key: value for _, key, value, _ in context.changelog}
    assert written[legacy] is None
    assert written[b"w" + struct.pack(">qq", 5, 0)] is not None
    assert _drain(buffer) == [BufferedRecord(WindowedKey("w", 0, 5), 1, None, 5, None)]


def test_an_unreadable_changelog_value_is_a_clear_error(make_context):
    _, context = _buffer(make_context)
    with pytest.raises(
        ProcessorStateException, match="reads Kafka's version 3 and kstreams' versions 1 and 2"
    ):
        context.registered["buf"]([(b"a", b"\x00" * 12)])


# A record Kafka Streams 4.1.1 wrote to a suppress buffer changelog (HandoverApp, a 10 s window of
# String keys and values): key p0@1700000000000; header v = 3; context (timestamp, offset 0, the
# repartition topic, partition 0, no headers), prior "" (the aggregation's initializer, which Kafka
# sends as the old value of a window's first update), old equal to prior (-2), new "u0", buffer time
# 1700000010000.
_KAFKA_V3_KEY = b"p0" + struct.pack(">q", 1_700_000_000_000)
_KAFKA_V3_VALUE = bytes.fromhex(
    "0000018bcfe568000000000000000000000000376a312d4b53545245414d2d4147475245474154452d53544154452d"
    "53544f52452d303030303030303030392d7265706172746974696f6e000000000000000000000000fffffffe000000"
    "0275300000018bcfe58f10"
)


def test_a_buffer_kafka_streams_wrote_is_restored(make_context):
    context = make_context()
    windows = WindowedKeyFormat(session=False, window_size_ms=10_000)
    buffer = InMemoryTimeOrderedKeyValueBuffer("buf", S, S, True, windows)
    buffer.init(context, buffer)
    context.registered["buf"]([(_KAFKA_V3_KEY, _KAFKA_V3_VALUE)])
    assert buffer.min_timestamp() == 1_700_000_010_000
    start = 1_700_000_000_000
    assert _drain(buffer) == [BufferedRecord(WindowedKey("p0", start, start + 10_000), "u0", "", start, [])]


def test_the_changelog_is_kafkas_version_3_with_its_version_header(make_context):
    buffer, context = _buffer(make_context)
    buffer.put(10, "a", 2, 1, 12, None, topic="in", partition=0, offset=7)
    buffer.flush()
    assert context.changelog_headers == [[("v", b"\x03")]]
    ((_, key, value, _),) = context.changelog
    assert key == b"a" and value is not None
    assert value[:16] == struct.pack(">qq", 12, 7)  # no version byte: the record context first
    assert value[-8:] == struct.pack(">q", 10)  # the buffer time last


def test_a_kstreams_version_2_value_is_restored_and_rewritten_in_version_3(make_context):
    buffer, context = _buffer(make_context)
    buffer.put(10, "a", 2, 1, 12, None, topic="in", partition=0, offset=7)
    buffer.flush()
    ((_, key, value, _),) = context.changelog
    assert value is not None
    restored, new_context = _buffer(make_context)
    new_context.registered["buf"]([(key, b"\x02" + value)])
    restored.flush()
    assert [(k, v) for _, k, v, _ in new_context.changelog] == [(key, value)]
    assert _drain(restored) == [BufferedRecord("a", 2, 1, 12, None)]


def test_logging_disabled_buffer_neither_registers_nor_logs(make_context):
    buffer, context = _buffer(make_context, logging_enabled=False)
    buffer.put(1, "a", 1, None, 1, None)
    buffer.flush()
    assert context.registered == {} and context.changelog == []


def test_builder_builds_a_keyvalue_store_and_ignores_caching():
    builder = TimeOrderedKeyValueBufferBuilder("buf", S, L).with_caching_enabled()
    assert builder.store_type == "keyvalue"
    assert not builder.caching_enabled
    store = builder.build()
    assert isinstance(store, InMemoryTimeOrderedKeyValueBuffer)
    assert store.logging_enabled and not store.persistent
