"""The DSL's parameter objects and the windowed-key serde."""

from __future__ import annotations

import pytest

from kstreams.errors import SerializationException
from kstreams.serdes import Serdes
from kstreams.state.store import WindowedKey
from kstreams.topology import (
    Consumed,
    Grouped,
    KeyValue,
    Materialized,
    Named,
    Produced,
    Repartitioned,
    WindowedSerdes,
)
from kstreams.topology.dsl import StoreType


def test_with_methods_return_new_objects_and_keep_the_original():
    base = Materialized.as_("store")
    changed = base.with_caching_disabled().with_logging_disabled().with_value_serde(Serdes.long())
    assert (base.caching_enabled, base.logging_enabled, base.value_serde) == (True, True, None)
    assert (changed.store_name, changed.caching_enabled, changed.logging_enabled) == ("store", False, False)
    assert changed.value_serde.name == "long"


def test_materialized_defaults_follow_kafka():
    materialized = Materialized()
    assert materialized.caching_enabled and materialized.logging_enabled
    assert materialized.store_type is None  # persistent
    assert Materialized.as_("x").with_store_type("in_memory").store_type is StoreType.IN_MEMORY
    assert Materialized.as_("x").with_retention(1000).retention_ms == 1000
    assert Materialized.as_("x").with_logging_enabled({"min.insync.replicas": "2"}).log_config == {
        "min.insync.replicas": "2"
    }


def test_parameter_constructors():
    consumed = Consumed.with_(Serdes.string(), Serdes.long()).with_offset_reset_policy("LATEST")
    assert consumed.offset_reset == "latest"
    assert Produced.with_(Serdes.string(), Serdes.long()).with_name("sink").name == "sink"
    assert Grouped.as_("g").with_key_serde(Serdes.string()).name == "g"
    repartitioned = Repartitioned.as_("r").with_number_of_partitions(4)
    assert (repartitioned.name, repartitioned.number_of_partitions) == ("r", 4)
    assert Named.as_("n").name == "n"
    assert KeyValue.pair("k", "v") == ("k", "v")


def test_illegal_names_and_values_are_rejected():
    with pytest.raises(ValueError, match="legal name"):
        Grouped.as_("has space")
    with pytest.raises(ValueError, match="non-empty"):
        Named.as_("")
    with pytest.raises(ValueError, match="positive"):
        Repartitioned.as_("r").with_number_of_partitions(0)
    with pytest.raises(ValueError, match="earliest"):
        Consumed().with_offset_reset_policy("sometime")


def test_time_windowed_serde_writes_kafkas_format():
    serde = WindowedSerdes.time_windowed_serde_from(Serdes.string(), 100)
    data = serde.serialize("t", WindowedKey("k", 300, 400))
    assert data == b"k" + (300).to_bytes(8, "big")
    assert serde.deserialize("t", data) == WindowedKey("k", 300, 400)
    assert serde.serialize("t", None) is None
    with pytest.raises(SerializationException, match="WindowedKey"):
        serde.serialize("t", "not windowed")
    with pytest.raises(SerializationException, match="at least 8 bytes"):
        serde.deserialize("t", b"abc")
