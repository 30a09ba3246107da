"""kstreams: Kafka Streams for Python, with a compiled core.

The public API: every public name of Kafka Streams' ``org.apache.kafka.streams`` and
``org.apache.kafka.streams.kstream`` packages that kstreams implements, in Python spelling, plus the
names a DSL user needs beside them (serdes, stores, the client's enums). Each is also importable from
its home module. Names are imported on first use, so ``import kstreams`` stays light (it never
imports pyspark, and a process that only needs the test driver never starts the runtime).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # What type checkers see: the real classes (at run time __getattr__ below imports them lazily).
    from kstreams.client import KafkaStreams, StreamsUncaughtExceptionResponse, ThreadMetadata
    from kstreams.config import StreamsConfig
    from kstreams.init_parameters import InitParameters
    from kstreams.queries import (
        HostInfo,
        KeyQueryMetadata,
        QueryableStoreTypes,
        StoreQueryParameters,
        StreamsMetadata,
    )
    from kstreams.serdes import Serdes
    from kstreams.state import Stores, Window
    from kstreams.state import WindowedKey as Windowed
    from kstreams.state.dsl_store_suppliers import (
        BuiltInDslStoreSuppliers,
        DslKeyValueParams,
        DslSessionParams,
        DslStoreSuppliers,
        DslWindowParams,
    )
    from kstreams.state.restore_listener import StateRestoreListener
    from kstreams.state.rocksdb_config_setter import RocksDBConfigSetter
    from kstreams.testing import TestInputTopic, TestOutputTopic, TopologyTestDriver
    from kstreams.topology import (
        Branched,
        BranchedKStream,
        BufferConfig,
        CogroupedKStream,
        Consumed,
        EmitStrategy,
        GlobalKTable,
        Grouped,
        Joined,
        JoinWindows,
        KeyValue,
        KGroupedStream,
        KGroupedTable,
        KStream,
        KTable,
        Materialized,
        Named,
        Printed,
        Produced,
        Repartitioned,
        SessionWindowedCogroupedKStream,
        SessionWindowedKStream,
        SessionWindows,
        SlidingWindowedKStream,
        SlidingWindows,
        StreamJoined,
        StreamsBuilder,
        Suppressed,
        TableJoined,
        TimeWindowedCogroupedKStream,
        TimeWindowedKStream,
        TimeWindows,
        Topology,
        TopologyDescription,
        ValueTransformerWithKey,
        WindowedSerdes,
    )
    from kstreams.topology.topology_config import TopologyConfig

__all__ = [
    "Branched",
    "BranchedKStream",
    "BufferConfig",
    "BuiltInDslStoreSuppliers",
    "CogroupedKStream",
    "Consumed",
    "DslKeyValueParams",
    "DslSessionParams",
    "DslStoreSuppliers",
    "DslWindowParams",
    "EmitStrategy",
    "GlobalKTable",
    "Grouped",
    "HostInfo",
    "InitParameters",
    "JoinWindows",
    "Joined",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "KafkaStreams",
    "KeyQueryMetadata",
    "KeyValue",
    "Materialized",
    "Named",
    "Printed",
    "Produced",
    "QueryableStoreTypes",
    "Repartitioned",
    "RocksDBConfigSetter",
    "Serdes",
    "SessionWindowedCogroupedKStream",
    "SessionWindowedKStream",
    "SessionWindows",
    "SlidingWindowedKStream",
    "SlidingWindows",
    "StateRestoreListener",
    "StoreQueryParameters",
    "Stores",
    "StreamJoined",
    "StreamsBuilder",
    "StreamsConfig",
    "StreamsMetadata",
    "StreamsUncaughtExceptionResponse",
    "Suppressed",
    "TableJoined",
    "TestInputTopic",
    "TestOutputTopic",
    "ThreadMetadata",
    "TimeWindowedCogroupedKStream",
    "TimeWindowedKStream",
    "TimeWindows",
    "Topology",
    "TopologyConfig",
    "TopologyDescription",
    "TopologyTestDriver",
    "ValueTransformerWithKey",
    "Window",
    "Windowed",
    "WindowedSerdes",
]

__version__ = "0.1.0"

_CLIENT_NAMES = ("KafkaStreams", "StreamsUncaughtExceptionResponse", "ThreadMetadata")
_QUERY_NAMES = (
    "HostInfo",
    "KeyQueryMetadata",
    "QueryableStoreTypes",
    "StoreQueryParameters",
    "StreamsMetadata",
)
_TOPOLOGY_NAMES = (
    "Branched",
    "BranchedKStream",
    "BufferConfig",
    "CogroupedKStream",
    "Consumed",
    "EmitStrategy",
    "GlobalKTable",
    "Grouped",
    "JoinWindows",
    "Joined",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "KeyValue",
    "Materialized",
    "Named",
    "Printed",
    "Produced",
    "Repartitioned",
    "SessionWindowedCogroupedKStream",
    "SessionWindowedKStream",
    "SessionWindows",
    "SlidingWindowedKStream",
    "SlidingWindows",
    "StreamJoined",
    "StreamsBuilder",
    "Suppressed",
    "TableJoined",
    "TimeWindowedCogroupedKStream",
    "TimeWindowedKStream",
    "TimeWindows",
    "Topology",
    "TopologyDescription",
    "ValueTransformerWithKey",
    "WindowedSerdes",
)

# Each public name: (home module, name there). Kafka's ``Windowed`` is kstreams' ``WindowedKey``.
_HOMES: dict[str, tuple[str, str]] = {
    **{name: ("kstreams.client", name) for name in _CLIENT_NAMES},
    **{name: ("kstreams.queries", name) for name in _QUERY_NAMES},
    **{name: ("kstreams.topology", name) for name in _TOPOLOGY_NAMES},
    "InitParameters": ("kstreams.init_parameters", "InitParameters"),
    "StateRestoreListener": ("kstreams.state", "StateRestoreListener"),
    "RocksDBConfigSetter": ("kstreams.state.rocksdb_config_setter", "RocksDBConfigSetter"),
    **{
        name: ("kstreams.state.dsl_store_suppliers", name)
        for name in (
            "BuiltInDslStoreSuppliers",
            "DslKeyValueParams",
            "DslSessionParams",
            "DslStoreSuppliers",
            "DslWindowParams",
        )
    },
    "TopologyConfig": ("kstreams.topology.topology_config", "TopologyConfig"),
    "StreamsConfig": ("kstreams.config", "StreamsConfig"),
    "Serdes": ("kstreams.serdes", "Serdes"),
    "Stores": ("kstreams.state", "Stores"),
    "Window": ("kstreams.state", "Window"),
    "Windowed": ("kstreams.state", "WindowedKey"),
    "TopologyTestDriver": ("kstreams.testing", "TopologyTestDriver"),
    "TestInputTopic": ("kstreams.testing", "TestInputTopic"),
    "TestOutputTopic": ("kstreams.testing", "TestOutputTopic"),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'kstreams' has no attribute {name!r}")
    module, attribute = home
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
