"""The DSL's store choice (KIP-591 ``default.dsl.store``, KIP-954 ``dsl.store.suppliers.class``):
which stores a topology gets where an operation names no store type, and in what order the
operation, the builder's TopologyConfig and the client's config decide. The oracle's catalogue
runs cases both ways against Kafka Streams (``*-in-memory-by-*``)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest

from kstreams import (
    BuiltInDslStoreSuppliers,
    Consumed,
    DslKeyValueParams,
    DslSessionParams,
    DslStoreSuppliers,
    DslWindowParams,
    EmitStrategy,
    JoinWindows,
    Materialized,
    Serdes,
    SessionWindows,
    SlidingWindows,
    Stores,
    StreamJoined,
    StreamsBuilder,
    StreamsConfig,
    Suppressed,
    TimeWindows,
    TopologyConfig,
    TopologyTestDriver,
)
from kstreams.errors import ConfigException, TopologyException
from kstreams.state.suppliers import KeyValueBytesStoreSupplier

STRING = Serdes.string()
APP = {"application.id": "dsl", "default.key.serde": "string", "default.value.serde": "string"}
IN_MEMORY = "org.apache.kafka.streams.state.BuiltInDslStoreSuppliers$InMemoryDslStoreSuppliers"


def _every_kind(builder: StreamsBuilder) -> Any:
    """Tables, a foreign-key join, a stream-stream left join, windowed, session and suppressed
    aggregations and a global table: one store of each kind the DSL makes."""
    consumed = Consumed.with_(STRING, STRING)
    left = builder.table("l", consumed, Materialized.as_("left"))
    right = builder.table("r", consumed, Materialized.as_("right"))
    left.join(right, lambda v: v, lambda x, y: x + y).to_stream().to("o1")
    s1, s2 = builder.stream("s1", consumed), builder.stream("s2", consumed)
    windows = JoinWindows.of_time_difference_and_grace(10, 5)
    s1.left_join(s2, lambda x, y: f"{x}{y}", windows, StreamJoined.with_(STRING, STRING, STRING)).to("o2")
    s1.group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 5)).emit_strategy(
        EmitStrategy.on_window_close()
    ).count().to_stream().to("o3")
    s2.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, 5)).count().to_stream().to(
        "o4"
    )
    builder.global_table("g", consumed, Materialized.as_("glob"))
    left.to_stream().group_by_key().count().suppress(
        Suppressed.until_time_limit(5, Suppressed.BufferConfig.unbounded())
    ).to_stream().to("o5")
    return builder.build()


def _persistence(topology: Any, config: dict[str, Any] | None = None) -> dict[str, bool]:
    with TopologyTestDriver(topology, {**APP, **(config or {})}) as driver:
        return {name: driver.get_state_store(name).persistent for name in driver.get_all_state_stores()}


# Kafka Streams 4.1.1's TopologyTestDriver on the same topology, built with
# StreamsBuilder(TopologyConfig(...default.dsl.store=in_memory)): every store in memory but the
# foreign-key join's subscription store (always RocksDB) ; the suppress buffer is in memory anyway.
KAFKA_IN_MEMORY = {
    "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000008": True,
    "KSTREAM-AGGREGATE-STATE-STORE-0000000028": False,
    "KSTREAM-AGGREGATE-STATE-STORE-0000000032": False,
    "KSTREAM-AGGREGATE-STATE-STORE-0000000039": False,
    "KSTREAM-JOINTHIS-0000000024-store": False,
    "KSTREAM-OUTEROTHER-0000000025-store": False,
    "KSTREAM-OUTERSHARED-0000000024-store": False,
    "KTABLE-SUPPRESS-STATE-STORE-0000000042": False,
    "glob": False,
    "left": False,
    "right": False,
}


def _kafka_named(persistence: dict[str, bool]) -> dict[str, bool]:
    # kstreams' emit-on-close windowed aggregation keeps its emit position in a store of its own
    # (Kafka keeps it inside the window store): it follows the window store.
    return {name: p for name, p in persistence.items() if not name.endswith("-emit-position")}


def test_a_topology_config_puts_the_stores_kafka_streams_puts_in_memory_there() -> None:
    config = TopologyConfig(StreamsConfig({**APP, "default.dsl.store": "in_memory"}))
    persistence = _persistence(_every_kind(StreamsBuilder(config)))
    assert _kafka_named(persistence) == KAFKA_IN_MEMORY
    assert persistence["KSTREAM-AGGREGATE-STATE-STORE-0000000028-emit-position"] is False


def test_the_clients_dsl_store_suppliers_class_decides_what_the_builder_left_open() -> None:
    persistence = _persistence(_every_kind(StreamsBuilder()), {"dsl.store.suppliers.class": IN_MEMORY})
    assert _kafka_named(persistence) == KAFKA_IN_MEMORY


def test_the_clients_default_dsl_store_is_too_late_as_in_kafka_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="kstreams.topology.builder"):
        persistence = _persistence(_every_kind(StreamsBuilder()), {"default.dsl.store": "in_memory"})
    assert all(p for name, p in persistence.items() if not name.startswith("KTABLE-SUPPRESS"))
    assert "TopologyConfig" in caplog.text and "left" in caplog.text


def test_an_operations_store_type_wins_over_the_builders_and_the_builders_over_the_clients() -> None:
    builder = StreamsBuilder(TopologyConfig(StreamsConfig({**APP, "default.dsl.store": "rocksDB"})))
    stream = builder.stream("in")
    stream.group_by_key().count(Materialized.as_("fixed").with_store_type(Materialized.StoreType.IN_MEMORY))
    stream.group_by_key().count(Materialized.as_("by-builder"))
    persistence = _persistence(builder.build(), {"dsl.store.suppliers.class": IN_MEMORY})
    assert persistence == {"fixed": False, "by-builder": True}


class Recording(DslStoreSuppliers):
    """In-memory stores, recording what the DSL asked for and the configs it was given."""

    asked: list[Any]
    # The application id of the configs the last instance was configured with.
    configured_for: str | None = None

    def __init__(self) -> None:
        self.asked = []
        self._memory = BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers()

    def configure(self, configs: Any) -> None:
        Recording.configured_for = configs["application.id"]

    def key_value_store(self, params: DslKeyValueParams) -> Any:
        self.asked.append(params)
        return self._memory.key_value_store(params)

    def window_store(self, params: DslWindowParams) -> Any:
        self.asked.append(params)
        return self._memory.window_store(params)

    def session_store(self, params: DslSessionParams) -> Any:
        self.asked.append(params)
        return self._memory.session_store(params)


def test_an_operation_given_dsl_store_suppliers_gets_kafkas_parameters() -> None:
    suppliers = Recording()
    builder = StreamsBuilder()
    grouped = builder.stream("in").group_by_key()
    grouped.count(Materialized.as_(suppliers))
    grouped.windowed_by(SlidingWindows.of_time_difference_and_grace(100, 20)).emit_strategy(
        EmitStrategy.on_window_close()
    ).count(Materialized.as_("sliding").with_store_type(suppliers))
    grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(50, 10)).count(
        Materialized.as_("sessions").with_store_type(suppliers)
    )
    builder.stream("other").join(
        builder.stream("in2"),
        lambda a, b: a + b,
        JoinWindows.of_time_difference_with_no_grace(30),
        StreamJoined.with_(STRING, STRING, STRING).with_dsl_store_suppliers(suppliers),
    )
    topology = builder.build()
    kv, sliding, session, this_side, other_side = suppliers.asked
    assert kv == DslKeyValueParams("KSTREAM-AGGREGATE-STATE-STORE-0000000002", True)
    assert (sliding.store_name, sliding.is_sliding_window, sliding.is_timestamped) == ("sliding", True, True)
    assert sliding.emit_strategy is not None and sliding.emit_strategy.on_close
    assert (sliding.retention_period, sliding.window_size) == (
        timedelta(milliseconds=220),
        timedelta(milliseconds=100),
    )
    assert (session.store_name, session.retention_period) == ("sessions", timedelta(milliseconds=60))
    assert session.emit_strategy is not None and not session.emit_strategy.on_close
    assert this_side.retain_duplicates and not this_side.is_timestamped and not this_side.is_sliding_window
    assert other_side.window_size == timedelta(milliseconds=60)
    assert not any(store.supplier.persistent for store in topology.store_builders.values())


def test_the_clients_suppliers_are_configured_with_the_applications_configs() -> None:
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().count(Materialized.as_("counts"))
    topology = builder.build()
    Recording.configured_for = None
    with TopologyTestDriver(topology, {**APP, "dsl.store.suppliers.class": Recording}):
        supplier = topology.store_builders["counts"].supplier
    assert isinstance(supplier, KeyValueBytesStoreSupplier) and not supplier.persistent
    assert Recording.configured_for == "dsl"


class WrongKind(BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers):
    def key_value_store(self, params: DslKeyValueParams) -> Any:
        return Stores.in_memory_window_store(params.store_name, 1000, 100)


def test_suppliers_that_make_the_wrong_kind_of_store_fail_the_build() -> None:
    builder = StreamsBuilder(TopologyConfig(StreamsConfig({**APP, "dsl.store.suppliers.class": WrongKind})))
    with pytest.raises(TopologyException, match="must return a KeyValueBytesStoreSupplier"):
        builder.stream("in").group_by_key().count()


@pytest.mark.parametrize(
    ("config", "error", "message"),
    [
        ({"default.dsl.store": "memory"}, ConfigException, 'must be "rocksDB" or "in_memory"'),
        ({"dsl.store.suppliers.class": "Nope"}, ConfigException, "is not a dotted path"),
        (
            {"dsl.store.suppliers.class": dict},
            ConfigException,
            "is not a kstreams.DslStoreSuppliers: subclass it",
        ),
    ],
)
def test_bad_dsl_store_settings_fail_the_config(config: dict[str, Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        StreamsConfig({**APP, **config})


def test_a_topology_config_overrides_only_the_dsl_store_keys() -> None:
    app = StreamsConfig(APP)
    config = TopologyConfig(app, {"default.dsl.store": "in_memory"})
    assert config.store_type == "in_memory" and config.application_configs is app
    assert isinstance(
        config.resolve_dsl_store_suppliers(), BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers
    )
    with pytest.raises(ConfigException, match=r"max\.task\.idle\.ms apply to the whole client"):
        TopologyConfig(app, {"max.task.idle.ms": 10})
    with pytest.raises(TypeError, match="StreamsBuilder takes a TopologyConfig"):
        StreamsBuilder(app)  # type: ignore[arg-type]
