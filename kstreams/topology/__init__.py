"""Topologies: the Processor API ``Topology`` and the Streams DSL that builds onto it.

``Topology`` is imported on first use (the DSL names are light and imported at once).
"""

from __future__ import annotations

import importlib
from typing import Any

from kstreams.topology.dsl import (
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
    ValueTransformerWithKey,
    WindowedSerdes,
)

__all__ = [
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
]

_LAZY = {
    "Topology": "kstreams.topology.topology",
    "TopologyDescription": "kstreams.topology.topology",
}


def __getattr__(name: str) -> Any:
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(f"module 'kstreams.topology' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
