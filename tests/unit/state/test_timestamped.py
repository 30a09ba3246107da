"""Timestamped stores (Kafka's TimestampedKeyValueStore / TimestampedWindowStore): ValueAndTimestamp
in and out, Kafka's bytes below the metered layer, and the plain-value facades."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams.errors import SerializationException
from kstreams.processor import Processor, Record
from kstreams.serdes import Serdes
from kstreams.state import Stores, TimestampedKeyValueStoreBuilder, ValueAndTimestamp, ValueAndTimestampSerde
from kstreams.state.timestamped import (
    KeyValueStoreFacade,
    WindowStoreFacade,
    is_timestamped,
    plain_value_view,
)
from kstreams.testing import TopologyTestDriver
from kstreams.topology.topology import Topology

S = Serdes.string()
L = Serdes.long()


class _Context:
    application_id = "app"
    task_id = "0_0"
    app_configs: dict[str, Any] = {}
    metrics = None

    def register(self, *args: Any, **kwargs: Any) -> None:
        pass


def _open(builder: Any) -> Any:
    store = builder.with_logging_disabled().build()
    store.init(_Context(), store)
    return store


def test_timestamped_key_value_store_keeps_kafkas_bytes_below_the_metered_layer() -> None:
    builder = Stores.timestamped_key_value_store_builder(Stores.in_memory_key_value_store("s"), S, L)
    assert isinstance(builder, TimestampedKeyValueStoreBuilder)
    assert builder.store_type == "keyvalue" and is_timestamped(builder)
    store = _open(builder)
    store.put("a", ValueAndTimestamp(7, 1234))
    assert store.get("a") == ValueAndTimestamp(7, 1234)
    raw = store.wrapped.get(b"a")
    assert raw == (1234).to_bytes(8, "big") + L.serialize("t", 7)
    assert ValueAndTimestampSerde(L).deserialize("t", raw) == ValueAndTimestamp(7, 1234)
    assert list(store.all()) == [("a", ValueAndTimestamp(7, 1234))]
    store.put("a", None)
    assert store.get("a") is None


@pytest.mark.parametrize("value_serde", [L, Serdes.integer()], ids=["long", "integer"])
def test_batch_steps_read_and_write_the_bytes_a_put_and_a_get_do(value_serde: Any) -> None:
    # Long values (counts) take a one-step path; any other serde the general one: same bytes.
    store = _open(
        Stores.timestamped_key_value_store_builder(Stores.in_memory_key_value_store("s"), S, value_serde)
    )
    for value, timestamp in [(7, 1234), (-3, 0), (0, -1), (2**31 - 1, 2**40)]:
        store.put("k", ValueAndTimestamp(value, timestamp))
        raw = store.wrapped.get(b"k")
        assert store._stamped_bytes(value, timestamp) == raw
        assert store._stamped_value(raw) == (value, timestamp)
    assert store._stamped_bytes(None, 5) is None and store._stamped_value(None) is None


def test_a_count_out_of_the_long_range_is_refused_by_the_serde() -> None:
    store = _open(Stores.timestamped_key_value_store_builder(Stores.in_memory_key_value_store("s"), S, L))
    with pytest.raises(SerializationException, match="outside the signed 64-bit range"):
        store._stamped_bytes(2**63, 1)


def test_a_plain_value_put_into_a_timestamped_store_is_refused_with_the_fix() -> None:
    store = _open(Stores.timestamped_key_value_store_builder(Stores.in_memory_key_value_store("s"), S, L))
    with pytest.raises(TypeError, match=r"ValueAndTimestamp\.make"):
        store.put("a", 7)


def test_timestamped_window_store_and_its_facade() -> None:
    supplier = Stores.in_memory_window_store("w", 1000, 100)
    store = _open(Stores.timestamped_window_store_builder(supplier, S, L))
    store.put("a", ValueAndTimestamp(3, 150), 100)
    assert store.fetch("a", 100) == ValueAndTimestamp(3, 150)
    facade = plain_value_view(store)
    assert isinstance(facade, WindowStoreFacade)
    assert facade.fetch("a", 100) == 3
    assert list(facade.fetch_range("a", 0, 200)) == [(100, 3)]
    assert [(w.start, v) for w, v in facade.all()] == [(100, 3)]
    assert facade.name == "w" and facade.is_open


def test_key_value_facade_shows_plain_values_and_puts_without_a_timestamp() -> None:
    store = _open(Stores.timestamped_key_value_store_builder(Stores.in_memory_key_value_store("s"), S, L))
    facade = plain_value_view(store)
    assert isinstance(facade, KeyValueStoreFacade)
    facade.put("b", 2)
    assert store.get("b") == ValueAndTimestamp(2, -1)  # Kafka's facade: NO_TIMESTAMP
    store.put("a", ValueAndTimestamp(1, 10))
    assert facade.get("a") == 1
    assert list(facade.range("a", "b")) == [("a", 1), ("b", 2)]
    assert facade.delete("a") == 1
    plain = _open(Stores.key_value_store_builder(Stores.in_memory_key_value_store("p"), S, L))
    assert plain_value_view(plain) is plain


class _Latest(Processor):
    def init(self, context: Any) -> None:
        self.counts = context.get_state_store("counts")
        self.windows = context.get_state_store("windows")

    def process(self, record: Record) -> None:
        self.counts.put(record.key, ValueAndTimestamp.make(record.value, record.timestamp))
        self.windows.put(record.key, ValueAndTimestamp.make(record.value, record.timestamp), 0)


def test_kafkas_persistent_timestamped_suppliers_make_rocksdb_stores_of_values_and_timestamps() -> None:
    counts = Stores.persistent_timestamped_key_value_store("counts")
    windows = Stores.persistent_timestamped_window_store("windows", 60_000, 10_000)
    assert counts.persistent and windows.persistent and counts.metrics_scope == "rocksdb"
    topology = Topology()
    topology.add_source("src", "in", key_deserializer=S, value_deserializer=L)
    topology.add_processor("latest", _Latest, "src")
    topology.add_state_store(Stores.timestamped_key_value_store_builder(counts, S, L), "latest")
    topology.add_state_store(Stores.timestamped_window_store_builder(windows, S, L), "latest")
    with TopologyTestDriver(topology) as driver:
        driver.create_input_topic("in", S, L).pipe_input("a", 7, 1_234)
        assert driver.get_timestamped_key_value_store("counts").get("a") == ValueAndTimestamp(7, 1_234)
        assert driver.get_timestamped_window_store("windows").fetch("a", 0) == ValueAndTimestamp(7, 1_234)
