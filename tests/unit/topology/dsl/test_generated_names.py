"""Generated names and neighbour order as Kafka Streams 4.1.1 gives them.

Each topology is built as Kafka's DSL would build the same program, and its ``describe()`` is
compared with the text Kafka Streams' ``Topology.describe()`` printed for that program (captured
from Kafka 4.1.1). Names matter beyond ``describe()``: the stores and internal topics they name
must be Kafka's for a Java application's state to be handed over. The cases pin what Kafka does
and is easy to get wrong: a named operation still draws its index; a named table source is read
by ``<name>-source``; a grouped table's reduce store is a ``KTABLE-AGGREGATE-STATE-STORE``; an
unnamed join reuses the repartition of the stream's last join, even a named one; a table filter
given a Materialized without a name keeps no store; a global-table inner join is a
``KSTREAM-LEFTJOIN``; foreign-key join sources are ``KTABLE-SOURCE``s; a named grouping's
repartition feeds all its aggregations; ``count`` given a Materialized without a name draws an
extra store index (not on sliding windows); neighbours print in the order Kafka's sets kept them
when the nodes were linked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kstreams import (
    Consumed,
    Grouped,
    Joined,
    JoinWindows,
    KeyValue,
    Materialized,
    Named,
    Produced,
    Serdes,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
)

S = Serdes.string()
WINDOW = JoinWindows.of_time_difference_with_no_grace(10)


def s(b: StreamsBuilder, topic: str) -> Any:
    return b.stream(topic, Consumed.with_(S, S))


def t(b: StreamsBuilder, topic: str) -> Any:
    return b.table(topic, Consumed.with_(S, S))


def _same(value: Any) -> Any:
    return value


def _first(a: Any, b: Any) -> Any:
    return a


def _global_source(b: StreamsBuilder) -> None:
    b.global_table("g", Consumed.as_("x"))
    s(b, "a").map_values(_same).to("o")


def _mixed_reuse(b: StreamsBuilder) -> None:
    rekeyed = s(b, "a").select_key(lambda k, v: v)
    rekeyed.join(t(b, "b"), _first).to("o")
    rekeyed.join(t(b, "c"), _first, Joined.as_("n")).to("o2")
    rekeyed.join(t(b, "d"), _first).to("o3")


def _rekeyed_joined_three_times(b: StreamsBuilder) -> None:
    rekeyed = s(b, "a").select_key(lambda k, v: v)
    rekeyed.join(s(b, "b"), _first, WINDOW).to("o")
    rekeyed.left_join(s(b, "c"), _first, WINDOW).to("o2")
    rekeyed.join(t(b, "t"), _first).to("o3")


def _grouped_twice(b: StreamsBuilder) -> None:
    grouped = s(b, "a").select_key(lambda k, v: v).group_by_key(Grouped.as_("g"))
    grouped.count().to_stream().to("o")
    grouped.reduce(_first).to_stream().to("o2")


def _table_grouped_twice(b: StreamsBuilder) -> None:
    grouped = t(b, "a").group_by(lambda k, v: KeyValue(v, v), Grouped.as_("g"))
    grouped.count().to_stream().to("o")
    grouped.reduce(_first, _first).to_stream().to("o2")


COUNTS = Materialized.with_(S, Serdes.long())  # a Materialized without a name

PROGRAMS: dict[str, Callable[[StreamsBuilder], None]] = {
    "cntMatStream": lambda b: s(b, "a").group_by_key().count(COUNTS).to_stream().to("o"),
    "cntMatSession": lambda b: (
        s(b, "a")
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10))
        .count(COUNTS)
        .to_stream()
        .to("o")
    ),
    "cntMatSliding": lambda b: (
        s(b, "a")
        .group_by_key()
        .windowed_by(SlidingWindows.of_time_difference_with_no_grace(10))
        .count(COUNTS)
        .to_stream()
        .to("o")
    ),
    "tableGroupedTwiceNamed": _table_grouped_twice,
    "matFilterGen": lambda b: (
        t(b, "a").filter(lambda k, v: True, Materialized.with_(S, S)).map_values(_same).to_stream().to("o")
    ),
    "globalJoinGen": lambda b: (
        s(b, "a")
        .join(b.global_table("g", Consumed.with_(S, S)), lambda k, v: v, _first)
        .map_values(_same)
        .to("o")
    ),
    "fkLeftJoinGen": lambda b: t(b, "a").left_join(t(b, "b"), lambda v: v, _first).to_stream().to("o"),
    "groupedTwiceNamed": _grouped_twice,
    "filter": lambda b: s(b, "a").filter(lambda k, v: True, Named.as_("x")).map_values(_same).to("o"),
    "tableSource": lambda b: b.table("a", Consumed.as_("x")).map_values(_same).to_stream().to("o"),
    "globalSource": _global_source,
    "tableGroupByReducePlain": lambda b: (
        t(b, "a")
        .group_by(lambda k, v: KeyValue(v, v))
        .reduce(_first, _first)
        .to_stream()
        .map_values(_same)
        .to("o")
    ),
    "toStreamMapper": lambda b: t(b, "a").to_stream(lambda k, v: k, Named.as_("x")).map_values(_same).to("o"),
    "groupByCount": lambda b: (
        s(b, "a")
        .group_by(lambda k, v: v, Grouped.as_("g"))
        .count(Named.as_("x"))
        .to_stream()
        .map_values(_same)
        .to("o")
    ),
    "mixedReuse": _mixed_reuse,
    "tableJoin": lambda b: (
        t(b, "a").join(t(b, "b"), _first, Named.as_("x")).map_values(_same).to_stream().to("o")
    ),
    "rekeyedStreamStreamJoinUnnamed": _rekeyed_joined_three_times,
}

# Kafka Streams 4.1.1's describe() of each program, line by line.
KAFKA_DESCRIBES: dict[str, list[str]] = {
    "filter": [
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [a])",
        "      --> x",
        "    Processor: x (stores: [])",
        "      --> KSTREAM-MAPVALUES-0000000002",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: KSTREAM-MAPVALUES-0000000002 (stores: [])",
        "      --> KSTREAM-SINK-0000000003",
        "      <-- x",
        "    Sink: KSTREAM-SINK-0000000003 (topic: o)",
        "      <-- KSTREAM-MAPVALUES-0000000002",
    ],
    "tableSource": [
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: x-source (topics: [a])",
        "      --> x",
        "    Processor: x (stores: [])",
        "      --> KTABLE-MAPVALUES-0000000003",
        "      <-- x-source",
        "    Processor: KTABLE-MAPVALUES-0000000003 (stores: [])",
        "      --> KTABLE-TOSTREAM-0000000004",
        "      <-- x",
        "    Processor: KTABLE-TOSTREAM-0000000004 (stores: [])",
        "      --> KSTREAM-SINK-0000000005",
        "      <-- KTABLE-MAPVALUES-0000000003",
        "    Sink: KSTREAM-SINK-0000000005 (topic: o)",
        "      <-- KTABLE-TOSTREAM-0000000004",
    ],
    "globalSource": [
        "Topologies:",
        "   Sub-topology: 0 for global store (will not generate tasks)",
        "    Source: x-source (topics: [g])",
        "      --> x",
        "    Processor: x (stores: [g-STATE-STORE-0000000000])",
        "      --> none",
        "      <-- x-source",
        "  Sub-topology: 1",
        "    Source: KSTREAM-SOURCE-0000000003 (topics: [a])",
        "      --> KSTREAM-MAPVALUES-0000000004",
        "    Processor: KSTREAM-MAPVALUES-0000000004 (stores: [])",
        "      --> KSTREAM-SINK-0000000005",
        "      <-- KSTREAM-SOURCE-0000000003",
        "    Sink: KSTREAM-SINK-0000000005 (topic: o)",
        "      <-- KSTREAM-MAPVALUES-0000000004",
    ],
    "tableGroupByReducePlain": [
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [a])",
        "      --> KTABLE-SOURCE-0000000002",
        "    Processor: KTABLE-SOURCE-0000000002 (stores: [a-STATE-STORE-0000000000])",
        "      --> KTABLE-SELECT-0000000003",
        "      <-- KSTREAM-SOURCE-0000000001",
        "    Processor: KTABLE-SELECT-0000000003 (stores: [])",
        "      --> KSTREAM-SINK-0000000005",
        "      <-- KTABLE-SOURCE-0000000002",
        "    Sink: KSTREAM-SINK-0000000005 (topic: KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition)",
        "      <-- KTABLE-SELECT-0000000003",
        "",
        "  Sub-topology: 1",
        "    Source: KSTREAM-SOURCE-0000000006 (topics: "
        "[KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition])",
        "      --> KTABLE-REDUCE-0000000007",
        "    Processor: KTABLE-REDUCE-0000000007 (stores: [KTABLE-AGGREGATE-STATE-STORE-0000000004])",
        "      --> KTABLE-TOSTREAM-0000000008",
        "      <-- KSTREAM-SOURCE-0000000006",
        "    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])",
        "      --> KSTREAM-MAPVALUES-0000000009",
        "      <-- KTABLE-REDUCE-0000000007",
        "    Processor: KSTREAM-MAPVALUES-0000000009 (stores: [])",
        "      --> KSTREAM-SINK-0000000010",
        "      <-- KTABLE-TOSTREAM-0000000008",
        "    Sink: KSTREAM-SINK-0000000010 (topic: o)",
        "      <-- KSTREAM-MAPVALUES-0000000009",
    ],
    "toStreamMapper": [
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [a])",
        "      --> KTABLE-SOURCE-0000000002",
        "    Processor: KTABLE-SOURCE-0000000002 (stores: [])",
        "      --> x",
        "      <-- KSTREAM-SOURCE-0000000001",
        "    Processor: x (stores: [])",
        "      --> KSTREAM-KEY-SELECT-0000000004",
        "      <-- KTABLE-SOURCE-0000000002",
        "    Processor: KSTREAM-KEY-SELECT-0000000004 (stores: [])",
        "      --> KSTREAM-MAPVALUES-0000000005",
        "      <-- x",
        "    Processor: KSTREAM-MAPVALUES-0000000005 (stores: [])",
        "      --> KSTREAM-SINK-0000000006",
        "      <-- KSTREAM-KEY-SELECT-0000000004",
        "    Sink: KSTREAM-SINK-0000000006 (topic: o)",
        "      <-- KSTREAM-MAPVALUES-0000000005",
    ],
    "groupByCount": [
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [a])",
        "      --> g",
        "    Processor: g (stores: [])",
        "      --> g-repartition-filter",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: g-repartition-filter (stores: [])",
        "      --> g-repartition-sink",
        "      <-- g",
        "    Sink: g-repartition-sink (topic: g-repartition)",
        "      <-- g-repartition-filter",
        "",
        "  Sub-topology: 1",
        "    Source: g-repartition-source (topics: [g-repartition])",
        "      --> x",
        "    Processor: x (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000002])",
        "      --> KTABLE-TOSTREAM-0000000007",
        "      <-- g-repartition-source",
        "    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])",
        "      --> KSTREAM-MAPVALUES-0000000008",
        "      <-- x",
        "    Processor: KSTREAM-MAPVALUES-0000000008 (stores: [])",
        "      --> KSTREAM-SINK-0000000009",
        "      <-- KTABLE-TOSTREAM-0000000007",
        "    Sink: KSTREAM-SINK-0000000009 (topic: o)",
        "      <-- KSTREAM-MAPVALUES-0000000008",
    ],
    "mixedReuse": [
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [a])",
        "      --> KSTREAM-KEY-SELECT-0000000001",
        "    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])",
        "      --> KSTREAM-FILTER-0000000006, n-repartition-filter",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: KSTREAM-FILTER-0000000006 (stores: [])",
        "      --> KSTREAM-SINK-0000000005",
        "      <-- KSTREAM-KEY-SELECT-0000000001",
        "    Processor: n-repartition-filter (stores: [])",
        "      --> n-repartition-sink",
        "      <-- KSTREAM-KEY-SELECT-0000000001",
        "    Sink: KSTREAM-SINK-0000000005 (topic: KSTREAM-KEY-SELECT-0000000001-repartition)",
        "      <-- KSTREAM-FILTER-0000000006",
        "    Sink: n-repartition-sink (topic: n-repartition)",
        "      <-- n-repartition-filter",
        "",
        "  Sub-topology: 1",
        "    Source: KSTREAM-SOURCE-0000000007 (topics: [KSTREAM-KEY-SELECT-0000000001-repartition])",
        "      --> KSTREAM-JOIN-0000000008",
        "    Processor: KSTREAM-JOIN-0000000008 (stores: [b-STATE-STORE-0000000002])",
        "      --> KSTREAM-SINK-0000000009",
        "      <-- KSTREAM-SOURCE-0000000007",
        "    Source: KSTREAM-SOURCE-0000000003 (topics: [b])",
        "      --> KTABLE-SOURCE-0000000004",
        "    Sink: KSTREAM-SINK-0000000009 (topic: o)",
        "      <-- KSTREAM-JOIN-0000000008",
        "    Processor: KTABLE-SOURCE-0000000004 (stores: [b-STATE-STORE-0000000002])",
        "      --> none",
        "      <-- KSTREAM-SOURCE-0000000003",
        "",
        "  Sub-topology: 2",
        "    Source: n-repartition-source (topics: [n-repartition])",
        "      --> KSTREAM-JOIN-0000000024, n",
        "    Processor: KSTREAM-JOIN-0000000024 (stores: [d-STATE-STORE-0000000018])",
        "      --> KSTREAM-SINK-0000000025",
        "      <-- n-repartition-source",
        "    Source: KSTREAM-SOURCE-0000000011 (topics: [c])",
        "      --> KTABLE-SOURCE-0000000012",
        "    Source: KSTREAM-SOURCE-0000000019 (topics: [d])",
        "      --> KTABLE-SOURCE-0000000020",
        "    Processor: n (stores: [c-STATE-STORE-0000000010])",
        "      --> KSTREAM-SINK-0000000017",
        "      <-- n-repartition-source",
        "    Sink: KSTREAM-SINK-0000000017 (topic: o2)",
        "      <-- n",
        "    Sink: KSTREAM-SINK-0000000025 (topic: o3)",
        "      <-- KSTREAM-JOIN-0000000024",
        "    Processor: KTABLE-SOURCE-0000000012 (stores: [c-STATE-STORE-0000000010])",
        "      --> none",
        "      <-- KSTREAM-SOURCE-0000000011",
        "    Processor: KTABLE-SOURCE-0000000020 (stores: [d-STATE-STORE-0000000018])",
        "      --> none",
        "      <-- KSTREAM-SOURCE-0000000019",
    ],
    "tableJoin": [
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [a])",
        "      --> KTABLE-SOURCE-0000000002",
        "    Source: KSTREAM-SOURCE-0000000004 (topics: [b])",
        "      --> KTABLE-SOURCE-0000000005",
        "    Processor: KTABLE-SOURCE-0000000002 (stores: [a-STATE-STORE-0000000000])",
        "      --> x-join-this",
        "      <-- KSTREAM-SOURCE-0000000001",
        "    Processor: KTABLE-SOURCE-0000000005 (stores: [b-STATE-STORE-0000000003])",
        "      --> x-join-other",
        "      <-- KSTREAM-SOURCE-0000000004",
        "    Processor: x-join-other (stores: [a-STATE-STORE-0000000000])",
        "      --> x",
        "      <-- KTABLE-SOURCE-0000000005",
        "    Processor: x-join-this (stores: [b-STATE-STORE-0000000003])",
        "      --> x",
        "      <-- KTABLE-SOURCE-0000000002",
        "    Processor: x (stores: [])",
        "      --> KTABLE-MAPVALUES-0000000009",
        "      <-- x-join-this, x-join-other",
        "    Processor: KTABLE-MAPVALUES-0000000009 (stores: [])",
        "      --> KTABLE-TOSTREAM-0000000010",
        "      <-- x",
        "    Processor: KTABLE-TOSTREAM-0000000010 (stores: [])",
        "      --> KSTREAM-SINK-0000000011",
        "      <-- KTABLE-MAPVALUES-0000000009",
        "    Sink: KSTREAM-SINK-0000000011 (topic: o)",
        "      <-- KTABLE-TOSTREAM-0000000010",
    ],
    "rekeyedStreamStreamJoinUnnamed": [
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [a])",
        "      --> KSTREAM-KEY-SELECT-0000000001",
        "    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])",
        "      --> KSTREAM-FILTER-0000000004",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: KSTREAM-FILTER-0000000004 (stores: [])",
        "      --> KSTREAM-SINK-0000000003",
        "      <-- KSTREAM-KEY-SELECT-0000000001",
        "    Sink: KSTREAM-SINK-0000000003 (topic: KSTREAM-KEY-SELECT-0000000001-repartition)",
        "      <-- KSTREAM-FILTER-0000000004",
        "",
        "  Sub-topology: 1",
        "    Source: KSTREAM-SOURCE-0000000005 (topics: [KSTREAM-KEY-SELECT-0000000001-repartition])",
        "      --> KSTREAM-JOIN-0000000028, KSTREAM-WINDOWED-0000000006, KSTREAM-WINDOWED-0000000016",
        "    Source: KSTREAM-SOURCE-0000000002 (topics: [b])",
        "      --> KSTREAM-WINDOWED-0000000007",
        "    Source: KSTREAM-SOURCE-0000000012 (topics: [c])",
        "      --> KSTREAM-WINDOWED-0000000017",
        "    Processor: KSTREAM-WINDOWED-0000000006 (stores: [KSTREAM-JOINTHIS-0000000008-store])",
        "      --> KSTREAM-JOINTHIS-0000000008",
        "      <-- KSTREAM-SOURCE-0000000005",
        "    Processor: KSTREAM-WINDOWED-0000000007 (stores: [KSTREAM-JOINOTHER-0000000009-store])",
        "      --> KSTREAM-JOINOTHER-0000000009",
        "      <-- KSTREAM-SOURCE-0000000002",
        "    Processor: KSTREAM-WINDOWED-0000000016 (stores: [KSTREAM-JOINTHIS-0000000018-store])",
        "      --> KSTREAM-JOINTHIS-0000000018",
        "      <-- KSTREAM-SOURCE-0000000005",
        "    Processor: KSTREAM-WINDOWED-0000000017 (stores: [KSTREAM-OUTEROTHER-0000000019-store])",
        "      --> KSTREAM-OUTEROTHER-0000000019",
        "      <-- KSTREAM-SOURCE-0000000012",
        "    Processor: KSTREAM-JOINOTHER-0000000009 (stores: [KSTREAM-JOINTHIS-0000000008-store])",
        "      --> KSTREAM-MERGE-0000000010",
        "      <-- KSTREAM-WINDOWED-0000000007",
        "    Processor: KSTREAM-JOINTHIS-0000000008 (stores: [KSTREAM-JOINOTHER-0000000009-store])",
        "      --> KSTREAM-MERGE-0000000010",
        "      <-- KSTREAM-WINDOWED-0000000006",
        "    Processor: KSTREAM-JOINTHIS-0000000018 (stores: "
        "[KSTREAM-OUTERSHARED-0000000018-store, KSTREAM-OUTEROTHER-0000000019-store])",
        "      --> KSTREAM-MERGE-0000000020",
        "      <-- KSTREAM-WINDOWED-0000000016",
        "    Processor: KSTREAM-OUTEROTHER-0000000019 (stores: "
        "[KSTREAM-OUTERSHARED-0000000018-store, KSTREAM-JOINTHIS-0000000018-store])",
        "      --> KSTREAM-MERGE-0000000020",
        "      <-- KSTREAM-WINDOWED-0000000017",
        "    Processor: KSTREAM-JOIN-0000000028 (stores: [t-STATE-STORE-0000000022])",
        "      --> KSTREAM-SINK-0000000029",
        "      <-- KSTREAM-SOURCE-0000000005",
        "    Processor: KSTREAM-MERGE-0000000010 (stores: [])",
        "      --> KSTREAM-SINK-0000000011",
        "      <-- KSTREAM-JOINTHIS-0000000008, KSTREAM-JOINOTHER-0000000009",
        "    Processor: KSTREAM-MERGE-0000000020 (stores: [])",
        "      --> KSTREAM-SINK-0000000021",
        "      <-- KSTREAM-JOINTHIS-0000000018, KSTREAM-OUTEROTHER-0000000019",
        "    Source: KSTREAM-SOURCE-0000000023 (topics: [t])",
        "      --> KTABLE-SOURCE-0000000024",
        "    Sink: KSTREAM-SINK-0000000011 (topic: o)",
        "      <-- KSTREAM-MERGE-0000000010",
        "    Sink: KSTREAM-SINK-0000000021 (topic: o2)",
        "      <-- KSTREAM-MERGE-0000000020",
        "    Sink: KSTREAM-SINK-0000000029 (topic: o3)",
        "      <-- KSTREAM-JOIN-0000000028",
        "    Processor: KTABLE-SOURCE-0000000024 (stores: [t-STATE-STORE-0000000022])",
        "      --> none",
        "      <-- KSTREAM-SOURCE-0000000023",
    ],
    "matFilterGen": [
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [a])",
        "      --> KTABLE-SOURCE-0000000002",
        "    Processor: KTABLE-SOURCE-0000000002 (stores: [])",
        "      --> KTABLE-FILTER-0000000004",
        "      <-- KSTREAM-SOURCE-0000000001",
        "    Processor: KTABLE-FILTER-0000000004 (stores: [])",
        "      --> KTABLE-MAPVALUES-0000000005",
        "      <-- KTABLE-SOURCE-0000000002",
        "    Processor: KTABLE-MAPVALUES-0000000005 (stores: [])",
        "      --> KTABLE-TOSTREAM-0000000006",
        "      <-- KTABLE-FILTER-0000000004",
        "    Processor: KTABLE-TOSTREAM-0000000006 (stores: [])",
        "      --> KSTREAM-SINK-0000000007",
        "      <-- KTABLE-MAPVALUES-0000000005",
        "    Sink: KSTREAM-SINK-0000000007 (topic: o)",
        "      <-- KTABLE-TOSTREAM-0000000006",
    ],
    "globalJoinGen": [
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [a])",
        "      --> KSTREAM-LEFTJOIN-0000000004",
        "    Processor: KSTREAM-LEFTJOIN-0000000004 (stores: [])",
        "      --> KSTREAM-MAPVALUES-0000000005",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: KSTREAM-MAPVALUES-0000000005 (stores: [])",
        "      --> KSTREAM-SINK-0000000006",
        "      <-- KSTREAM-LEFTJOIN-0000000004",
        "    Sink: KSTREAM-SINK-0000000006 (topic: o)",
        "      <-- KSTREAM-MAPVALUES-0000000005",
        "",
        "  Sub-topology: 1 for global store (will not generate tasks)",
        "    Source: KSTREAM-SOURCE-0000000002 (topics: [g])",
        "      --> KTABLE-SOURCE-0000000003",
        "    Processor: KTABLE-SOURCE-0000000003 (stores: [g-STATE-STORE-0000000001])",
        "      --> none",
        "      <-- KSTREAM-SOURCE-0000000002",
    ],
    "fkLeftJoinGen": [
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KTABLE-SOURCE-0000000016 (topics: "
        "[KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic])",
        "      --> KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017",
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [a])",
        "      --> KTABLE-SOURCE-0000000002",
        "    Processor: "
        "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017 "
        "(stores: [a-STATE-STORE-0000000000])",
        "      --> KTABLE-FK-JOIN-OUTPUT-0000000018",
        "      <-- KTABLE-SOURCE-0000000016",
        "    Processor: KTABLE-FK-JOIN-OUTPUT-0000000018 (stores: [])",
        "      --> KTABLE-TOSTREAM-0000000020",
        "      <-- KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017",
        "    Processor: KTABLE-SOURCE-0000000002 (stores: [a-STATE-STORE-0000000000])",
        "      --> KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007",
        "      <-- KSTREAM-SOURCE-0000000001",
        "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007 (stores: [])",
        "      --> KTABLE-SINK-0000000008",
        "      <-- KTABLE-SOURCE-0000000002",
        "    Processor: KTABLE-TOSTREAM-0000000020 (stores: [])",
        "      --> KSTREAM-SINK-0000000021",
        "      <-- KTABLE-FK-JOIN-OUTPUT-0000000018",
        "    Sink: KSTREAM-SINK-0000000021 (topic: o)",
        "      <-- KTABLE-TOSTREAM-0000000020",
        "    Sink: KTABLE-SINK-0000000008 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic)",
        "      <-- KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007",
        "",
        "  Sub-topology: 1",
        "    Source: KSTREAM-SOURCE-0000000004 (topics: [b])",
        "      --> KTABLE-SOURCE-0000000005",
        "    Source: KTABLE-SOURCE-0000000009 (topics: "
        "[KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic])",
        "      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011",
        "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011 (stores: "
        "[KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010])",
        "      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012",
        "      <-- KTABLE-SOURCE-0000000009",
        "    Processor: KTABLE-SOURCE-0000000005 (stores: [b-STATE-STORE-0000000003])",
        "      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013",
        "      <-- KSTREAM-SOURCE-0000000004",
        "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012 "
        "(stores: [b-STATE-STORE-0000000003])",
        "      --> KTABLE-SINK-0000000015",
        "      <-- KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011",
        "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013 (stores: "
        "[KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010])",
        "      --> KTABLE-SINK-0000000015",
        "      <-- KTABLE-SOURCE-0000000005",
        "    Sink: KTABLE-SINK-0000000015 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic)",
        "      <-- KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012, "
        "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013",
    ],
    "groupedTwiceNamed": [
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [a])",
        "      --> KSTREAM-KEY-SELECT-0000000001",
        "    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])",
        "      --> g-repartition-filter",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: g-repartition-filter (stores: [])",
        "      --> g-repartition-sink",
        "      <-- KSTREAM-KEY-SELECT-0000000001",
        "    Sink: g-repartition-sink (topic: g-repartition)",
        "      <-- g-repartition-filter",
        "",
        "  Sub-topology: 1",
        "    Source: g-repartition-source (topics: [g-repartition])",
        "      --> KSTREAM-AGGREGATE-0000000003, KSTREAM-REDUCE-0000000010",
        "    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000002])",
        "      --> KTABLE-TOSTREAM-0000000007",
        "      <-- g-repartition-source",
        "    Processor: KSTREAM-REDUCE-0000000010 (stores: [KSTREAM-REDUCE-STATE-STORE-0000000009])",
        "      --> KTABLE-TOSTREAM-0000000014",
        "      <-- g-repartition-source",
        "    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])",
        "      --> KSTREAM-SINK-0000000008",
        "      <-- KSTREAM-AGGREGATE-0000000003",
        "    Processor: KTABLE-TOSTREAM-0000000014 (stores: [])",
        "      --> KSTREAM-SINK-0000000015",
        "      <-- KSTREAM-REDUCE-0000000010",
        "    Sink: KSTREAM-SINK-0000000008 (topic: o)",
        "      <-- KTABLE-TOSTREAM-0000000007",
        "    Sink: KSTREAM-SINK-0000000015 (topic: o2)",
        "      <-- KTABLE-TOSTREAM-0000000014",
    ],
    "tableGroupedTwiceNamed": [
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [a])",
        "      --> KTABLE-SOURCE-0000000002",
        "    Processor: KTABLE-SOURCE-0000000002 (stores: [a-STATE-STORE-0000000000])",
        "      --> g",
        "      <-- KSTREAM-SOURCE-0000000001",
        "    Processor: g (stores: [])",
        "      --> KSTREAM-SINK-0000000005",
        "      <-- KTABLE-SOURCE-0000000002",
        "    Sink: KSTREAM-SINK-0000000005 (topic: g-repartition)",
        "      <-- g",
        "",
        "  Sub-topology: 1",
        "    Source: KSTREAM-SOURCE-0000000006 (topics: [g-repartition])",
        "      --> KTABLE-AGGREGATE-0000000007, KTABLE-REDUCE-0000000013",
        "    Processor: KTABLE-AGGREGATE-0000000007 (stores: [KTABLE-AGGREGATE-STATE-STORE-0000000004])",
        "      --> KTABLE-TOSTREAM-0000000008",
        "      <-- KSTREAM-SOURCE-0000000006",
        "    Processor: KTABLE-REDUCE-0000000013 (stores: [KTABLE-AGGREGATE-STATE-STORE-0000000010])",
        "      --> KTABLE-TOSTREAM-0000000014",
        "      <-- KSTREAM-SOURCE-0000000006",
        "    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])",
        "      --> KSTREAM-SINK-0000000009",
        "      <-- KTABLE-AGGREGATE-0000000007",
        "    Processor: KTABLE-TOSTREAM-0000000014 (stores: [])",
        "      --> KSTREAM-SINK-0000000015",
        "      <-- KTABLE-REDUCE-0000000013",
        "    Sink: KSTREAM-SINK-0000000009 (topic: o)",
        "      <-- KTABLE-TOSTREAM-0000000008",
        "    Sink: KSTREAM-SINK-0000000015 (topic: o2)",
        "      <-- KTABLE-TOSTREAM-0000000014",
    ],
    "cntMatStream": [
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [a])",
        "      --> KSTREAM-AGGREGATE-0000000003",
        "    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000002])",
        "      --> KTABLE-TOSTREAM-0000000004",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: KTABLE-TOSTREAM-0000000004 (stores: [])",
        "      --> KSTREAM-SINK-0000000005",
        "      <-- KSTREAM-AGGREGATE-0000000003",
        "    Sink: KSTREAM-SINK-0000000005 (topic: o)",
        "      <-- KTABLE-TOSTREAM-0000000004",
    ],
    "cntMatSession": [
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [a])",
        "      --> KSTREAM-AGGREGATE-0000000003",
        "    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000002])",
        "      --> KTABLE-TOSTREAM-0000000004",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: KTABLE-TOSTREAM-0000000004 (stores: [])",
        "      --> KSTREAM-SINK-0000000005",
        "      <-- KSTREAM-AGGREGATE-0000000003",
        "    Sink: KSTREAM-SINK-0000000005 (topic: o)",
        "      <-- KTABLE-TOSTREAM-0000000004",
    ],
    "cntMatSliding": [
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [a])",
        "      --> KSTREAM-AGGREGATE-0000000002",
        "    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])",
        "      --> KTABLE-TOSTREAM-0000000003",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: KTABLE-TOSTREAM-0000000003 (stores: [])",
        "      --> KSTREAM-SINK-0000000004",
        "      <-- KSTREAM-AGGREGATE-0000000002",
        "    Sink: KSTREAM-SINK-0000000004 (topic: o)",
        "      <-- KTABLE-TOSTREAM-0000000003",
    ],
}


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_describe_names_and_orders_nodes_as_kafka(program: str) -> None:
    builder = StreamsBuilder()
    PROGRAMS[program](builder)
    assert str(builder.build().describe()).rstrip("\n").split("\n") == KAFKA_DESCRIBES[program]


def test_a_named_grouping_aggregated_twice_feeds_both_from_one_repartition(drive: Any) -> None:
    builder = StreamsBuilder()
    grouped = s(builder, "a").select_key(lambda k, v: v).group_by_key(Grouped.as_("g"))
    grouped.count().to_stream().to("counts", Produced.with_(S, Serdes.long()))
    grouped.reduce(lambda old, new: old + new).to_stream().to("joined", Produced.with_(S, S))
    driver = drive(builder.build(), statestore_cache_max_bytes=0)
    words = driver.create_input_topic("a", S, S)
    for key in ("k1", "k2"):
        words.pipe_input(key, "w", 1)
    counts = driver.create_output_topic("counts", S, Serdes.long())
    joined = driver.create_output_topic("joined", S, S)
    assert counts.read_key_values_to_list() == [("w", 1), ("w", 2)]
    assert joined.read_key_values_to_list() == [("w", "w"), ("w", "ww")]
