"""Compiling a TopologyPlan into the stages Spark runs, in dependency order.

Each subtopology becomes one stage. A stage reads its source topics: external topics come from
the DataFrames the caller passes, and topics that another stage writes (repartition topics, and
external topics that one subtopology writes and another reads) come from that stage's output. A
stage runs after every stage whose output it reads, so the stages form a DAG; a cycle (a
subtopology reading, directly or through others, a topic it writes) cannot be run as one pass
over finite input and is rejected.

Stateful stages (with stores) are run one task per Spark partition after a shuffle on the
serialized key; stateless stages run on their input partitions as they are.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kstreams.errors import MissingSourceTopicException, TopologyException
from kstreams.topology.plan import SubtopologyPlan, TopologyPlan

__all__ = ["ExecutionPlan", "Stage", "compile_plan"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stage:
    """One subtopology as Spark runs it.

    ``external_inputs`` are the source topics read from the caller's DataFrames, and
    ``produced_inputs`` the source topics written by earlier stages (a topic can be both when the
    caller passes records for a topic another stage also writes).
    """

    subtopology: int
    source_topics: tuple[str, ...]
    external_inputs: tuple[str, ...]
    produced_inputs: tuple[str, ...]
    sink_topics: tuple[str, ...]
    repartition_sink_topics: tuple[str, ...]
    stateful: bool
    upstream: tuple[int, ...]  # subtopologies whose output this stage reads


@dataclass(frozen=True)
class ExecutionPlan:
    """The stages in the order Spark must build them, and the topics that never leave Spark."""

    application_id: str
    stages: tuple[Stage, ...]
    repartition_topics: frozenset[str]
    changelog_topics: frozenset[str]

    def consumers_of(self, subtopology: int) -> tuple[int, ...]:
        """Stages that read some topic written by ``subtopology``."""
        return tuple(s.subtopology for s in self.stages if subtopology in s.upstream)

    def is_output_topic(self, topic: str) -> bool:
        """Whether records written to ``topic`` are returned to the caller (not internal)."""
        return topic not in self.repartition_topics and topic not in self.changelog_topics


def compile_plan(plan: TopologyPlan, input_topics: Iterable[str]) -> ExecutionPlan:
    """Order ``plan``'s subtopologies for one Spark run over ``input_topics``.

    Raises ``MissingSourceTopicException`` when an external source topic has neither an input
    DataFrame nor a stage writing it, and ``TopologyException`` when an input names a topic the
    topology does not read or the subtopologies form a cycle.
    """
    given = set(input_topics)
    repartition = frozenset(t for s in plan.subtopologies for t in s.repartition_source_topics)
    changelogs = frozenset(t for s in plan.subtopologies for t in s.changelog_topics.values())
    writers: dict[str, list[int]] = {}
    for sub in plan.subtopologies:
        for topic in sub.sink_topics:
            writers.setdefault(topic, []).append(sub.id)

    read = {t for s in plan.subtopologies for t in s.source_topics}
    unknown = sorted(given - read)
    if unknown:
        raise TopologyException(
            f"run_topology got input DataFrames for {unknown}, which the topology does not read: it reads "
            f"{sorted(plan.source_topics)}. Pass inputs only for the topology's source topics."
        )
    internal_given = sorted(given & repartition)
    if internal_given:
        raise TopologyException(
            f"run_topology got input DataFrames for the repartition topics {internal_given}: those are "
            "written by the topology itself; pass inputs only for its external source topics."
        )

    stages: dict[int, Stage] = {}
    for sub in plan.subtopologies:
        stages[sub.id] = _stage(sub, given, writers)
    missing = sorted(
        t
        for stage in stages.values()
        for t in stage.source_topics
        if t not in stage.external_inputs and t not in stage.produced_inputs
    )
    if missing:
        raise MissingSourceTopicException(
            f"run_topology has no records for the source topics {missing}: pass a DataFrame for each "
            f"(inputs={{topic: df}}, columns key, value, timestamp). Given: {sorted(given)}."
        )
    ordered = _topological_order(stages)
    logger.debug(
        "Spark stages of %s: %s", plan.application_id, [(s.subtopology, s.stateful) for s in ordered]
    )
    return ExecutionPlan(plan.application_id, tuple(ordered), repartition, changelogs)


def _stage(sub: SubtopologyPlan, given: set[str], writers: Mapping[str, list[int]]) -> Stage:
    produced = tuple(t for t in sub.source_topics if t in writers)
    upstream = sorted({w for t in produced for w in writers[t]})
    return Stage(
        subtopology=sub.id,
        source_topics=sub.source_topics,
        external_inputs=tuple(
            t for t in sub.source_topics if t in given and t not in sub.repartition_source_topics
        ),
        produced_inputs=produced,
        sink_topics=sub.sink_topics,
        repartition_sink_topics=sub.repartition_sink_topics,
        stateful=sub.stateful,
        upstream=tuple(upstream),
    )


def _topological_order(stages: Mapping[int, Stage]) -> list[Stage]:
    """Stages ordered so that each comes after its upstream stages (Kahn's algorithm, ties by id)."""
    remaining = {sid: set(stage.upstream) for sid, stage in stages.items()}
    ordered: list[Stage] = []
    while remaining:
        ready = sorted(sid for sid, ups in remaining.items() if not ups)
        if not ready:
            cycle = sorted(remaining)
            raise TopologyException(
                f"subtopologies {cycle} read topics they write (directly or through each other), which "
                "Spark cannot run as one pass over finite input. Write the looping topic out and run "
                "the topology again on it, or break the loop."
            )
        for sid in ready:
            ordered.append(stages[sid])
            del remaining[sid]
        for ups in remaining.values():
            ups.difference_update(ready)
    return ordered
