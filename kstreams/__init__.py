"""kstreams: Kafka Streams for Python, with a compiled core.

The public API. Names are imported on first use, so ``import kstreams`` stays light (it never
imports pyspark, and a process that only needs the test driver never starts the runtime).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # What type checkers see: the real classes (at run time __getattr__ below imports them lazily).
    from kstreams.client import (
        InitParameters,
        KafkaStreams,
        StateRestoreListener,
        StreamsUncaughtExceptionResponse,
    )
    from kstreams.config import StreamsConfig
    from kstreams.serdes import Serdes
    from kstreams.state import Stores
    from kstreams.topology import (
        Branched,
        Consumed,
        Grouped,
        Joined,
        JoinWindows,
        KeyValue,
        Materialized,
        Named,
        Produced,
        Repartitioned,
        StreamJoined,
        StreamsBuilder,
        TimeWindows,
        Topology,
        WindowedSerdes,
    )

__all__ = [
    "Branched",
    "Consumed",
    "Grouped",
    "InitParameters",
    "JoinWindows",
    "Joined",
    "KafkaStreams",
    "KeyValue",
    "Materialized",
    "Named",
    "Produced",
    "Repartitioned",
    "Serdes",
    "StateRestoreListener",
    "Stores",
    "StreamJoined",
    "StreamsBuilder",
    "StreamsConfig",
    "StreamsUncaughtExceptionResponse",
    "TimeWindows",
    "Topology",
    "WindowedSerdes",
]

__version__ = "0.1.0"

_HOMES = {
    "KafkaStreams": "kstreams.client",
    "InitParameters": "kstreams.client",
    "StreamsUncaughtExceptionResponse": "kstreams.client",
    "StreamsConfig": "kstreams.config",
    "Topology": "kstreams.topology",
    "StreamsBuilder": "kstreams.topology",
    "Consumed": "kstreams.topology",
    "Produced": "kstreams.topology",
    "Grouped": "kstreams.topology",
    "Materialized": "kstreams.topology",
    "TimeWindows": "kstreams.topology",
    "JoinWindows": "kstreams.topology",
    "KeyValue": "kstreams.topology",
    "Serdes": "kstreams.serdes",
    "Stores": "kstreams.state",
    "StateRestoreListener": "kstreams.client",
    "Branched": "kstreams.topology",
    "Joined": "kstreams.topology",
    "Named": "kstreams.topology",
    "Repartitioned": "kstreams.topology",
    "StreamJoined": "kstreams.topology",
    "WindowedSerdes": "kstreams.topology",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'kstreams' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
