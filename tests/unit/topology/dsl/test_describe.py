"""describe() of DSL topologies: Kafka's node names and subtopologies split at repartition topics."""

from __future__ import annotations

from kstreams.topology import JoinWindows, Materialized, StreamsBuilder

WORD_COUNT = """\
Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [streams-plaintext-input])
      --> KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FLATMAPVALUES-0000000001 (stores: [])
      --> KSTREAM-KEY-SELECT-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-KEY-SELECT-0000000002 (stores: [])
      --> KSTREAM-FILTER-0000000006
      <-- KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FILTER-0000000006 (stores: [])
      --> KSTREAM-SINK-0000000005
      <-- KSTREAM-KEY-SELECT-0000000002
    Sink: KSTREAM-SINK-0000000005 (topic: KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition)
      <-- KSTREAM-FILTER-0000000006

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000007 (topics: [KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition])
      --> KSTREAM-AGGREGATE-0000000004
    Processor: KSTREAM-AGGREGATE-0000000004 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000003])
      --> KTABLE-TOSTREAM-0000000008
      <-- KSTREAM-SOURCE-0000000007
    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])
      --> KSTREAM-SINK-0000000009
      <-- KSTREAM-AGGREGATE-0000000004
    Sink: KSTREAM-SINK-0000000009 (topic: streams-wordcount-output)
      <-- KTABLE-TOSTREAM-0000000008

"""


def test_word_count_describes_as_in_kafka():
    builder = StreamsBuilder()
    (
        builder.stream("streams-plaintext-input")
        .flat_map_values(lambda line: line.split())
        .group_by(lambda key, word: word)
        .count()
        .to_stream()
        .to("streams-wordcount-output")
    )
    assert str(builder.build().describe()) == WORD_COUNT


def test_named_store_names_the_repartition_nodes():
    builder = StreamsBuilder()
    (
        builder.stream("in")
        .flat_map_values(lambda line: line.split())
        .group_by(lambda key, word: word)
        .count(Materialized.as_("counts-store"))
        .to_stream()
        .to("out")
    )
    text = str(builder.build().describe())
    assert "Sink: counts-store-repartition-sink (topic: counts-store-repartition)" in text
    assert "Source: counts-store-repartition-source (topics: [counts-store-repartition])" in text
    assert "Processor: KSTREAM-AGGREGATE-0000000003 (stores: [counts-store])" in text


def test_stream_table_join_is_one_subtopology_with_the_table_store():
    builder = StreamsBuilder()
    table = builder.table("table")
    builder.stream("stream").join(table, lambda s, t: s).to("out")
    description = builder.build().describe()
    text = str(description)
    assert "Sub-topology: 1" not in text
    assert "Processor: KTABLE-SOURCE-0000000002 (stores: [table-STATE-STORE-0000000000])" in text
    assert "Processor: KSTREAM-JOIN-0000000004 (stores: [table-STATE-STORE-0000000000])" in text


def test_stream_stream_join_connects_each_side_to_the_other_store():
    builder = StreamsBuilder()
    builder.stream("left").join(
        builder.stream("right"), lambda a, b: a, JoinWindows.of_time_difference_with_no_grace(10)
    ).to("out")
    text = str(builder.build().describe())
    assert "Processor: KSTREAM-JOINTHIS-0000000004 (stores: [KSTREAM-JOINOTHER-0000000005-store])" in text
    assert "Processor: KSTREAM-WINDOWED-0000000002 (stores: [KSTREAM-JOINTHIS-0000000004-store])" in text
    assert "Sub-topology: 1" not in text


def test_repartition_splits_subtopologies_in_order_of_their_sources():
    builder = StreamsBuilder()
    stream = builder.stream("in").select_key(lambda k, v: v)
    stream.group_by_key().count()
    stream.repartition().to("out")
    text = str(builder.build().describe())
    assert "Sub-topology: 2" in text
    assert "Sub-topology: 3" not in text
