"""Metered layers' store metrics: Kafka's stream-state-metrics at recording level DEBUG, nothing at INFO."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kstreams._native.store_access import CachedKeyValueAccess
from kstreams.errors import SerializationException
from kstreams.metrics import MetricsRegistry
from kstreams.serdes import Serdes
from kstreams.state import Stores, WindowedKey
from kstreams.state.metered import STATE_METRICS_GROUP

KV_METHODS = ("put", "put_if_absent", "put_all", "get", "delete", "range", "reverse_range", "all", "flush")


def state_metrics(registry: MetricsRegistry) -> dict[tuple[str, str], float]:
    """(name, store id tag) -> value of every stream-state-metrics metric."""
    found = {}
    for metric, value in registry.snapshot().items():
        if metric.group == STATE_METRICS_GROUP:
            (store_tag,) = [k for k in metric.tags if k.endswith("-state-id")]
            found[(metric.name, store_tag)] = value
    return found


@pytest.fixture
def opened(make_context: Callable[..., Any]) -> Iterator[Callable[..., Any]]:
    """opened(builder, level="DEBUG", task_id="0_0", registry=None) -> (store, registry)."""
    stores: list[Any] = []

    def open_(
        builder: Any, level: str = "DEBUG", task_id: str = "0_0", registry: MetricsRegistry | None = None
    ) -> tuple[Any, MetricsRegistry]:
        registry = registry or MetricsRegistry(recording_level=level)
        store = builder.build()
        store.init(make_context(task_id=task_id, metrics=registry), store)
        stores.append(store)
        return store, registry

    yield open_
    for store in stores:
        if store.is_open:
            store.close()


@pytest.mark.parametrize("persistent", [False, True], ids=["in-memory", "rocksdb"])
def test_every_key_value_operation_records_its_rate_and_latency_in_ns_at_debug(
    opened: Callable[..., Any], persistent: bool
) -> None:
    supplier = (Stores.persistent_key_value_store if persistent else Stores.in_memory_key_value_store)("kv")
    store, registry = opened(Stores.key_value_store_builder(supplier, Serdes.string(), Serdes.long()))
    store.put("a", 1)
    assert store.put_if_absent("b", 2) is None
    store.put_all([("c", 3), ("d", 4)])
    assert store.get("a") == 1
    assert store.delete("d") == 4
    assert list(store.range("a", "b")) == [("a", 1), ("b", 2)]
    assert list(store.reverse_range("a", "b")) == [("b", 2), ("a", 1)]
    assert len(list(store.all())) == 3
    assert list(store.prefix_scan("c")) == [("c", 3)]
    store.flush()

    scope = "rocksdb" if persistent else "in-memory"
    metrics = state_metrics(registry)
    operations = ["put", "put-if-absent", "put-all", "get", "delete", "range", "all", "prefix-scan", "flush"]
    for op in [*operations, "restore"]:
        for suffix in ("rate", "latency-avg", "latency-max"):
            assert metrics[(f"{op}-{suffix}", f"{scope}-state-id")] > 0, (op, suffix)
    assert {name for name, _ in metrics} == {
        f"{op}-{suffix}"
        for op in [*operations, "restore"]
        for suffix in ("rate", "latency-avg", "latency-max")
    }
    # Latencies are nanoseconds, as in Kafka: an in-memory get takes well over 1 ns and under 1 s.
    assert 10 < metrics[("get-latency-avg", f"{scope}-state-id")] < 1e9
    # Tagged as Kafka tags store metrics, with the client id as thread-id (see metered.py).
    tags = {frozenset(m.tags.items()) for m in registry.snapshot() if m.group == STATE_METRICS_GROUP}
    assert tags == {frozenset({"thread-id": "client-1", "task-id": "0_0", f"{scope}-state-id": "kv"}.items())}


def test_window_and_session_stores_are_tagged_by_their_scope_and_meter_their_reads_as_fetch(
    opened: Callable[..., Any],
) -> None:
    window, registry = opened(
        Stores.window_store_builder(
            Stores.in_memory_window_store("w", retention_ms=60_000, window_size_ms=1000),
            Serdes.string(),
            None,
        )
    )
    session, _ = opened(
        Stores.session_store_builder(Stores.persistent_session_store("s", 60_000), Serdes.string(), None),
        registry=registry,
    )
    window.put("k", b"v", 0)
    assert window.fetch("k", 0) == b"v"
    assert list(window.fetch_range("k", 0, 10)) == [(0, b"v")]
    session.put(WindowedKey("k", 0, 5), b"agg")
    assert session.fetch_session("k", 0, 5) == b"agg"
    assert len(list(session.find_sessions("k", 0, 10))) == 1
    session.remove(WindowedKey("k", 0, 5))

    metrics = state_metrics(registry)
    window_ops = {name for name, tag in metrics if tag == "in-memory-window-state-id"}
    session_ops = {name for name, tag in metrics if tag == "rocksdb-session-state-id"}
    assert {n.rsplit("-", 1)[0] for n in window_ops if n.endswith("-rate")} == {
        "put",
        "fetch",
        "flush",
        "restore",
    }
    assert {n.rsplit("-", 1)[0] for n in session_ops if n.endswith("-rate")} == {
        "put",
        "remove",
        "fetch",
        "flush",
        "restore",
    }
    assert metrics[("fetch-latency-avg", "in-memory-window-state-id")] > 0
    assert metrics[("fetch-latency-avg", "rocksdb-session-state-id")] > 0
    assert metrics[("remove-rate", "rocksdb-session-state-id")] > 0


def timed_methods(store: Any) -> set[str]:
    """The store's methods bound over its class's other than to the C accessor (which a store
    without a caching layer binds its get and put to)."""
    bound = set(KV_METHODS) & set(vars(store))
    accessor = {name for name in bound if isinstance(vars(store)[name].__self__, CachedKeyValueAccess)}
    assert accessor in (set(), {"get", "put"})
    return bound - accessor


def test_at_info_no_store_metric_exists_and_the_methods_are_the_plain_ones(
    opened: Callable[..., Any],
) -> None:
    store, registry = opened(Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv")), "INFO")
    store.put(b"a", b"1")
    assert store.get(b"a") == b"1"
    store.flush()
    assert state_metrics(registry) == {}
    # No timed method is bound over the class's: the INFO hot path is the unmetered code itself.
    assert not timed_methods(store)


def test_without_a_registry_a_store_records_nothing(open_store: Callable[[Any], Any]) -> None:
    store = open_store(Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv")).build())
    store.put(b"a", b"1")
    assert store.get(b"a") == b"1"
    assert not timed_methods(store)


def test_an_iterator_is_timed_until_it_is_exhausted_or_closed(opened: Callable[..., Any]) -> None:
    store, registry = opened(Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv")))
    store.put(b"a", b"1")
    store.put(b"b", b"2")

    def all_count() -> float:
        return state_metrics(registry)[("all-rate", "in-memory-state-id")]

    entries = store.all()
    assert all_count() == 0
    next(entries)
    assert all_count() == 0  # still open
    entries.close()
    assert all_count() > 0


def test_a_call_that_raises_is_timed_too(opened: Callable[..., Any]) -> None:
    store, registry = opened(
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv"), Serdes.string(), Serdes.long())
    )
    with pytest.raises(SerializationException):
        store.put(object(), 1)
    assert state_metrics(registry)[("put-rate", "in-memory-state-id")] > 0


def test_closing_a_store_removes_its_metrics_only_and_reopening_registers_them_once(
    opened: Callable[..., Any], make_context: Callable[..., Any]
) -> None:
    builder = Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv"))
    first, registry = opened(builder, task_id="0_0")
    second, _ = opened(builder, task_id="0_1", registry=registry)
    first.put(b"a", b"1")
    first.close()
    tasks = {m.tags["task-id"] for m in registry.snapshot() if m.group == STATE_METRICS_GROUP}
    assert tasks == {"0_1"}
    assert not set(KV_METHODS) & set(vars(first))

    # A task resetting its stores closes and reopens the same instances: one put still counts once.
    first.init(make_context(task_id="0_0", metrics=registry), first)
    first.put(b"a", b"2")
    second.put(b"a", b"2")
    puts = {
        m.tags["task-id"]: v
        for m, v in registry.snapshot().items()
        if m.group == STATE_METRICS_GROUP and m.name == "put-rate"
    }
    assert puts["0_0"] == puts["0_1"] > 0
    second.close()
    assert {m.tags["task-id"] for m in registry.snapshot() if m.group == STATE_METRICS_GROUP} == {"0_0"}


def test_the_registry_records_a_level_and_every_coarser_one_as_kafka_does() -> None:
    assert not MetricsRegistry().should_record("DEBUG")
    assert MetricsRegistry().should_record("INFO")
    assert MetricsRegistry(recording_level="DEBUG").should_record("DEBUG")
    assert not MetricsRegistry(recording_level="DEBUG").should_record("TRACE")
    assert MetricsRegistry(recording_level="TRACE").should_record("DEBUG")


def test_a_key_changed_in_place_is_stored_under_its_new_bytes(opened: Callable[..., Any]) -> None:
    """The store remembers the bytes of the key it serialized last (a get and a put of one key
    serialize it once), but never for a key that can change in place between two calls."""
    builder = Stores.key_value_store_builder(
        Stores.in_memory_key_value_store("s"), Serdes.json(), Serdes.long()
    )
    store, _ = opened(builder)
    key = {"user": "a"}
    store.put(key, 1)
    key["user"] = "b"  # the same object, now another key
    store.put(key, 2)
    assert store.get({"user": "a"}) == 1
    assert store.get({"user": "b"}) == 2
    text = "user-1"
    store.put(text, 3)
    assert store.get(text) == 3 and store.raw_key(text) == b'"user-1"'
