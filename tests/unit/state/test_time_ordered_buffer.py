"""The suppression buffer: time order, non-resetting updates, prior values, size accounting,
change-logging at flush (values and tombstones) and restore from the changelog."""

from __future__ import annotations

from kstreams.serdes import Serdes
from kstreams.state.store import WindowedKey
from kstreams.state.time_ordered_buffer import (
    EMPTY_MIN_TIMESTAMP,
    BufferedRecord,
    InMemoryTimeOrderedKeyValueBuffer,
    TimeOrderedKeyValueBufferBuilder,
)

S = Serdes.string()
L = Serdes.long()


def _buffer(make_context, logging_enabled: bool = True):  # type: ignore[no-untyped-def]
    context = make_context()
    buffer = InMemoryTimeOrderedKeyValueBuffer("buf", S, L, logging_enabled)
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


def test_windowed_keys_round_trip(make_context):
    buffer, _ = _buffer(make_context)
    buffer.put(100, WindowedKey("a", 0, 100), 3, 2, 90, None)
    assert _drain(buffer) == [BufferedRecord(WindowedKey("a", 0, 100), 3, 2, 90, None)]


def test_size_counts_keys_values_and_context(make_context):
    buffer, _ = _buffer(make_context)
    buffer.put(1, "a", 1, None, 1, None)
    first = buffer.buffer_size()
    assert first > 0
    buffer.put(1, "a", 2, 1, 1, None)  # an old value now, and a prior (None)
    assert buffer.buffer_size() == first + 8
    buffer.put(1, "bb", 1, None, 1, None)
    assert buffer.buffer_size() == first + 8 + first + 1


def test_changelog_is_written_at_flush_with_tombstones_for_evicted_keys(make_context):
    buffer, context = _buffer(make_context)
    buffer.put(10, "a", 1, None, 10, None)
    buffer.put(11, "a", 2, 1, 11, None)
    buffer.put(20, "b", 1, None, 20, None)
    assert context.changelog == []
    buffer.flush()
    assert [(name, key, value is None, ts) for name, key, value, ts in context.changelog] == [
        ("buf", b"\x00a", False, 11),
        ("buf", b"\x00b", False, 20),
    ]
    context.changelog.clear()
    buffer.evict_while(lambda: buffer.min_timestamp() <= 10, lambda evicted: None)
    buffer.flush()
    assert context.changelog == [("buf", b"\x00a", None, 11)]
    context.changelog.clear()
    buffer.flush()
    assert context.changelog == []


def test_restore_rebuilds_the_buffer_of_the_last_flush(make_context):
    buffer, context = _buffer(make_context)
    buffer.put(10, "a", 2, 1, 12, [("h", None)])
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
        BufferedRecord("a", 2, 1, 12, [("h", None)]),
        BufferedRecord("c", 1, None, 30, None),
    ]


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
