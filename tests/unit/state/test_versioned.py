"""Versioned key-value stores (KIP-889): versions, history retention and grace, changelog, restore."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kstreams.errors import TopologyException
from kstreams.serdes import Serdes
from kstreams.state import Stores, VersionedRecord
from kstreams.state.versioned import PUT_RETURN_CODE_NOT_PUT, PUT_RETURN_CODE_VALID_TO_UNDEFINED

S = Serdes.string()


@pytest.fixture(params=["in-memory", "persistent"])
def versioned(request: pytest.FixtureRequest, make_context: Callable[..., Any]) -> Callable[..., Any]:
    """versioned(retention=100, logging=True) -> (open typed store, its context)."""
    persistent = request.param == "persistent"
    opened: list[Any] = []

    def make(retention: int = 100, logging: bool = True, context: Any = None) -> tuple[Any, Any]:
        if persistent:
            supplier = Stores.persistent_versioned_key_value_store("v", retention)
        else:
            supplier = Stores.in_memory_versioned_key_value_store("v", retention)
        builder = Stores.versioned_key_value_store_builder(supplier, S, S)
        if not logging:
            builder.with_logging_disabled()
        store = builder.build()
        context = context or make_context()
        store.init(context, store)
        opened.append(store)
        return store, context

    yield make
    for store in opened:
        if store.is_open:
            store.close()


def test_get_returns_the_latest_or_the_version_valid_at_a_time(versioned) -> None:
    store, _ = versioned()
    assert store.put("k", "a", 10) == PUT_RETURN_CODE_VALID_TO_UNDEFINED
    assert store.put("k", "b", 20) == PUT_RETURN_CODE_VALID_TO_UNDEFINED
    assert store.get("k") == VersionedRecord("b", 20, None)
    assert store.get("k", 15) == VersionedRecord("a", 10, 20)
    assert store.get("k", 20) == VersionedRecord("b", 20, None)
    assert store.get("k", 9) is None
    assert store.get("other") is None


def test_an_out_of_order_put_lands_in_history_and_returns_its_valid_to(versioned) -> None:
    store, _ = versioned()
    store.put("k", "a", 10)
    store.put("k", "c", 30)
    assert store.put("k", "b", 20) == 30
    assert store.get("k", 25) == VersionedRecord("b", 20, 30)
    assert store.get("k") == VersionedRecord("c", 30, None)
    # The same timestamp again replaces that version.
    assert store.put("k", "B", 20) == 30
    assert store.get("k", 20) == VersionedRecord("B", 20, 30)


def test_a_deletion_at_the_only_version_s_time_leaves_no_history(versioned) -> None:
    """As Kafka's RocksDBVersionedStore: the deletion replaces the latest value and records no
    tombstone, so an older version put after it is the latest (with an earlier version, the
    deletion still ends that one's validity)."""
    store, _ = versioned()
    store.put("k", "a", 38)
    assert store.put("k", None, 38) == PUT_RETURN_CODE_VALID_TO_UNDEFINED
    assert store.get("k") is None
    assert store.put("k", "b", 35) == PUT_RETURN_CODE_VALID_TO_UNDEFINED
    assert store.get("k") == VersionedRecord("b", 35, None)
    store.put("j", "x", 30)
    store.put("j", "y", 38)
    store.put("j", None, 38)
    assert store.put("j", "z", 35) == 38
    store.put("i", None, 9)  # a deletion before: not a value valid up to 38
    store.put("i", "y", 38)
    store.put("i", None, 38)
    assert store.put("i", "z", 33) == PUT_RETURN_CODE_VALID_TO_UNDEFINED


def test_delete_is_a_tombstone_version_and_returns_what_was_valid(versioned) -> None:
    store, _ = versioned()
    store.put("k", "a", 10)
    assert store.delete("k", 20) == VersionedRecord("a", 10, None)
    assert store.get("k") is None
    assert store.get("k", 25) is None
    assert store.get("k", 15) == VersionedRecord("a", 10, 20)
    store.put("k", "b", 30)
    assert store.get("k") == VersionedRecord("b", 30, None)


def test_history_retention_drops_old_puts_and_answers_old_reads_only_from_the_latest(versioned) -> None:
    store, _ = versioned(retention=100)
    store.put("k", "a", 10)
    store.put("k", "b", 50)
    store.put("j", "x", 200)  # stream time 200: history before 100 has expired
    assert store.put("k", "late", 99) == PUT_RETURN_CODE_NOT_PUT
    # Older than the retention: only the latest version answers, and it is newer than 40 (a was valid then).
    assert store.get("k", 40) is None
    assert store.get("k", 60) == VersionedRecord("b", 50, None)
    assert store.get("k") == VersionedRecord("b", 50, None)  # the latest version never expires
    assert store.get("j", 150) is None
    assert store.put("k", "c", 100) == PUT_RETURN_CODE_VALID_TO_UNDEFINED  # within the grace period
    assert store.get("k", 120) == VersionedRecord("c", 100, None)


def test_the_latest_version_answers_old_reads_it_satisfies(versioned) -> None:
    store, _ = versioned(retention=10)
    store.put("k", "a", 5)
    store.put("j", "x", 100)
    assert store.get("k", 50) == VersionedRecord("a", 5, None)


def test_writes_go_to_the_changelog_with_the_version_timestamp(versioned) -> None:
    store, context = versioned()
    store.put("k", "a", 10)
    store.delete("k", 20)
    assert context.changelog == [("v", b"k", b"a", 10), ("v", b"k", None, 20)]


def test_restore_replays_the_changelog_with_its_timestamps(versioned, make_context, tmp_path) -> None:
    store, context = versioned()
    store.put("k", "a", 10)
    store.put("k", "c", 30)
    store.put("k", "b", 20)
    store.delete("j", 5)
    records = [(key, value, timestamp) for _, key, value, timestamp in context.changelog]

    fresh, fresh_context = versioned(context=make_context(state_dir=tmp_path / "other"))
    callback = fresh_context.registered["v"]
    assert getattr(callback, "with_timestamps", False)
    callback(records)
    assert fresh.get("k") == VersionedRecord("c", 30, None)
    assert fresh.get("k", 25) == VersionedRecord("b", 20, 30)
    assert fresh.get("k", 10) == VersionedRecord("a", 10, 20)
    assert fresh.get("j") is None


def test_the_builder_asks_for_a_compaction_lag_and_refuses_caching() -> None:
    supplier = Stores.persistent_versioned_key_value_store("v", 60_000)
    builder = Stores.versioned_key_value_store_builder(supplier, S, S)
    assert builder.log_config == {"min.compaction.lag.ms": str(60_000 + 86_400_000)}
    builder.with_logging_enabled({"segment.bytes": "1000"})
    assert builder.log_config["min.compaction.lag.ms"] == str(60_000 + 86_400_000)
    builder.with_caching_enabled()
    assert not builder.caching_enabled
    assert builder.build().keeps_every_changelog_record


def test_bad_versioned_store_arguments() -> None:
    with pytest.raises(TopologyException, match="negative"):
        Stores.persistent_versioned_key_value_store("v", -1)
    with pytest.raises(TypeError, match="versioned store supplier"):
        Stores.versioned_key_value_store_builder(Stores.in_memory_key_value_store("x"))  # type: ignore[arg-type]
