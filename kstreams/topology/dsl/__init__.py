"""The Streams DSL: StreamsBuilder, KStream, KTable, grouped and windowed streams, and their
parameter objects. It builds onto the Processor API ``Topology``."""

from kstreams.topology.dsl.branched import Branched, BranchedKStream
from kstreams.topology.dsl.builder import StreamsBuilder
from kstreams.topology.dsl.cogrouped import (
    CogroupedKStream,
    SessionWindowedCogroupedKStream,
    TimeWindowedCogroupedKStream,
)
from kstreams.topology.dsl.emit_strategy import EmitStrategy
from kstreams.topology.dsl.foreign_key_join import TableJoined
from kstreams.topology.dsl.global_ktable import GlobalKTable
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
from kstreams.topology.dsl.printed import Printed
from kstreams.topology.dsl.records import Change, KeyValue
from kstreams.topology.dsl.session_windowed import SessionWindowedKStream
from kstreams.topology.dsl.sliding_windowed import SlidingWindowedKStream
from kstreams.topology.dsl.suppressed import BufferConfig, Suppressed
from kstreams.topology.dsl.value_transformer import ValueTransformerWithKey
from kstreams.topology.dsl.windowed_serdes import SessionWindowedSerde, TimeWindowedSerde, WindowedSerdes
from kstreams.topology.dsl.windows import JoinWindows, SessionWindows, SlidingWindows, TimeWindows

__all__ = [
    "Branched",
    "BranchedKStream",
    "BufferConfig",
    "Change",
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
    "SessionWindowedSerde",
    "SessionWindows",
    "SlidingWindowedKStream",
    "SlidingWindows",
    "StoreType",
    "StreamJoined",
    "StreamsBuilder",
    "Suppressed",
    "TableJoined",
    "TimeWindowedCogroupedKStream",
    "TimeWindowedKStream",
    "TimeWindowedSerde",
    "TimeWindows",
    "ValueTransformerWithKey",
    "WindowedSerdes",
]
