"""The change-logging layers send every write to the changelog with the right key, value and time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kstreams._native.record_batch import RecordBatch
from kstreams.errors import ProcessorStateException
from kstreams.state.changelogging import ChangeLoggingKeyValueStore, ChangeLoggingWindowStore
from kstreams.state.in_memory import InMemoryKeyValueStore, InMemoryWindowStore
from kstreams.state.window_key_schema import changelog_key, from_changelog_key


def test_every_key_value_write_is_logged_with_the_record_timestamp(make_context: Callable[..., Any]) -> None:
    context = make_context()
    store = ChangeLoggingKeyValueStore(InMemoryKeyValueStore("kv"))
    store.init(context, store)
    context.timestamp = 100
    store.put(b"a", b"1")
    context.timestamp = 200
    assert store.put_if_absent(b"a", b"ignored") == b"1"
    assert store.put_if_absent(b"b", b"2") is None
    store.put_all([(b"c", b"3"), (b"a", None)])
    context.timestamp = 300
    assert store.delete(b"b") == b"2"
    assert context.changelog == [
        ("kv", b"a", b"1", 100),
        ("kv", b"b", b"2", 200),
        ("kv", b"c", b"3", 200),
        ("kv", b"a", None, 200),
        ("kv", b"b", None, 300),
    ]
    assert list(store.all()) == [(b"c", b"3")]


def test_explicit_timestamps_win_over_the_context(make_context: Callable[..., Any]) -> None:
    context = make_context()
    store = ChangeLoggingKeyValueStore(InMemoryKeyValueStore("kv"))
    store.init(context, store)
    context.timestamp = 5
    store.put_timestamped(b"a", b"1", 42)
    assert context.changelog == [("kv", b"a", b"1", 42)]


def test_window_writes_are_logged_with_window_changelog_keys(make_context: Callable[..., Any]) -> None:
    context = make_context()
    store = ChangeLoggingWindowStore(InMemoryWindowStore("w", 1000, 100, False))
    store.init(context, store)
    context.timestamp = 150
    store.put(b"k", b"1", 100)
    store.put(b"k", None, 100)
    assert context.changelog == [
        ("w", changelog_key(b"k", 100, 0), b"1", 150),
        ("w", changelog_key(b"k", 100, 0), None, 150),
    ]
    assert from_changelog_key(context.changelog[0][1]) == (b"k", 100, 0)


def test_a_batch_of_changes_is_written_and_logged_each_with_its_own_timestamp(
    make_context: Callable[..., Any],
) -> None:
    context = make_context()
    kv = ChangeLoggingKeyValueStore(InMemoryKeyValueStore("kv"))
    kv.init(context, kv)
    kv.put(b"gone", b"0")
    changes = [(b"a", b"1", 10), (b"gone", None, 20), (b"a", b"2", 30)]
    kv.write_changes(RecordBatch.from_columns(*map(list, zip(*changes, strict=True)), 0, [0, 1, 2]))
    assert list(kv.all()) == [(b"a", b"2")]
    assert context.changelog[1:] == [("kv", k, v, ts) for k, v, ts in changes]

    windows = ChangeLoggingWindowStore(InMemoryWindowStore("w", 1000, 100, False))
    windows.init(context, windows)
    keys = [changelog_key(b"k", 100, 0), changelog_key(b"k", 200, 0)]
    windows.write_changes(RecordBatch.from_columns(keys, [b"1", b"2"], [150, 250], 0, [3, 4]))
    assert list(windows.fetch_range(b"k", 0, 1000)) == [(100, b"1"), (200, b"2")]
    assert context.changelog[4:] == [("w", keys[0], b"1", 150), ("w", keys[1], b"2", 250)]


def test_a_batch_of_changes_cannot_name_the_sequence_numbers_of_duplicates(
    make_context: Callable[..., Any],
) -> None:
    context = make_context()
    store = ChangeLoggingWindowStore(InMemoryWindowStore("w", 1000, 100, True))
    store.init(context, store)
    with pytest.raises(ProcessorStateException, match="retains duplicates"):
        store.write_changes(RecordBatch.from_columns([changelog_key(b"k", 100, 0)], [b"1"], [1], 0, [0]))
    assert context.changelog == []


def test_duplicates_are_logged_under_distinct_sequence_numbers_and_restore_all(
    make_context: Callable[..., Any],
) -> None:
    context = make_context()
    store = ChangeLoggingWindowStore(InMemoryWindowStore("w", 1000, 100, True))
    store.init(context, store)
    store.put(b"k", b"1", 100)
    store.put(b"k", b"2", 100)
    store.put(b"k", None, 100)  # ignored, and not logged
    keys = [key for _, key, _, _ in context.changelog]
    assert len(keys) == 2 and len(set(keys)) == 2

    restored = InMemoryWindowStore("w", 1000, 100, True)
    fresh = make_context()
    restored.init(fresh, restored)
    fresh.registered["w"]([(key, value) for _, key, value, _ in context.changelog])
    assert list(restored.fetch_range(b"k", 0, 1000)) == [(100, b"1"), (100, b"2")]


def test_changelog_restores_a_store_to_the_same_content(make_context: Callable[..., Any]) -> None:
    context = make_context()
    store = ChangeLoggingKeyValueStore(InMemoryKeyValueStore("kv"))
    store.init(context, store)
    for i in range(20):
        store.put(b"k%d" % (i % 7), b"v%d" % i)
    store.delete(b"k3")
    restored = InMemoryKeyValueStore("kv")
    fresh = make_context()
    restored.init(fresh, restored)
    fresh.registered["kv"]([(key, value) for _, key, value, _ in context.changelog])
    assert list(restored.all()) == list(store.all())
