"""compile_plan: subtopologies become Spark stages in dependency order."""

from __future__ import annotations

import pytest

from kstreams import Consumed, Grouped, Produced, Serdes, StreamsBuilder
from kstreams.errors import MissingSourceTopicException, TopologyException
from kstreams.spark.plan_compiler import compile_plan

pytestmark = pytest.mark.spark

STRING = Serdes.string()


def _word_count_plan():  # type: ignore[no-untyped-def]
    builder = StreamsBuilder()
    (
        builder.stream("lines", Consumed.with_(STRING, STRING))
        .flat_map_values(str.split)
        .group_by(lambda _k, word: word, Grouped.with_(STRING, STRING))
        .count()
        .to_stream()
        .to("counts", Produced.with_(STRING, Serdes.long()))
    )
    return builder.build().build("app")


def test_a_stage_reading_a_repartition_topic_runs_after_the_stage_writing_it() -> None:
    execution = compile_plan(_word_count_plan(), ["lines"])

    first, second = execution.stages
    assert (first.stateful, second.stateful) == (False, True)
    assert first.external_inputs == ("lines",)
    assert second.produced_inputs == first.repartition_sink_topics
    assert second.upstream == (first.subtopology,)
    assert execution.consumers_of(first.subtopology) == (second.subtopology,)
    (repartition,) = first.repartition_sink_topics
    assert repartition.startswith("app-") and not execution.is_output_topic(repartition)
    assert execution.is_output_topic("counts")


def test_an_external_topic_written_and_read_by_the_topology_feeds_its_reader() -> None:
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(STRING, STRING)).map_values(str.upper).to("middle")
    builder.stream("middle", Consumed.with_(STRING, STRING)).map_values(str.lower).to("out")
    plan = builder.build().build("app", {"default.key.serde": "string", "default.value.serde": "string"})

    execution = compile_plan(plan, ["in"])

    writer, reader = execution.stages
    assert reader.produced_inputs == ("middle",) and reader.upstream == (writer.subtopology,)
    assert execution.is_output_topic("middle")


def test_missing_and_unknown_inputs_are_rejected_with_the_topics_named() -> None:
    plan = _word_count_plan()

    with pytest.raises(MissingSourceTopicException, match="lines"):
        compile_plan(plan, [])
    with pytest.raises(TopologyException, match="typo"):
        compile_plan(plan, ["lines", "typo"])
    (repartition,) = plan.subtopologies[0].repartition_sink_topics
    with pytest.raises(TopologyException, match="repartition"):
        compile_plan(plan, ["lines", repartition])


def test_subtopologies_that_feed_each_other_in_a_loop_are_rejected() -> None:
    builder = StreamsBuilder()
    builder.stream("ping", Consumed.with_(STRING, STRING)).to("pong")
    builder.stream("pong", Consumed.with_(STRING, STRING)).to("ping")
    plan = builder.build().build("app", {"default.key.serde": "string", "default.value.serde": "string"})

    with pytest.raises(TopologyException, match="loop"):
        compile_plan(plan, ["ping"])
