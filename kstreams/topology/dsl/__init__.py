"""The Streams DSL: StreamsBuilder, KStream, KTable, grouped and windowed streams, and their
parameter objects. It builds onto the Processor API ``Topology``."""

from kstreams.topology.dsl.branched import Branched, BranchedKStream
from kstreams.topology.dsl.builder import StreamsBuilder
from kstreams.topology.dsl.grouped import KGroupedStream, TimeWindowedKStream
from kstreams.topology.dsl.grouped_table import KGroupedTable
from kstreams.topology.dsl.kstream import KStream
from kstreams.topology.dsl.ktable import KTable
from kstreams.topology.dsl.parameters import (
    Consumed,
    Grouped,
    Joined,
    Materialized,
    Named,
    Produced,
    Repartitioned,
    StoreType,
    StreamJoined,
)
from kstreams.topology.dsl.records import Change, KeyValue
from kstreams.topology.dsl.windowed_serdes import TimeWindowedSerde, WindowedSerdes
from kstreams.topology.dsl.windows import JoinWindows, TimeWindows

__all__ = [
    "Branched",
    "BranchedKStream",
    "Change",
    "Consumed",
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
    "Produced",
    "Repartitioned",
    "StoreType",
    "StreamJoined",
    "StreamsBuilder",
    "TimeWindowedKStream",
    "TimeWindowedSerde",
    "TimeWindows",
    "WindowedSerdes",
]
