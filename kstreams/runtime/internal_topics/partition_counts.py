"""How many partitions each internal topic needs, and how many tasks each subtopology has.

Kafka Streams derives every count from the partition counts of the external source topics
(reference §4):

- a repartition topic has a fixed count when the topology gives one (``repartition(n)``); otherwise
  it takes the maximum count over the source topics of the subtopologies that write it. Repartition
  topics can feed each other, so the counts are computed as a fixpoint over the subtopologies;
- co-partitioned topics (joins) must line up: external topics of a group must already agree
  (``TopologyException("Topics not co-partitioned: [...]")``), repartition topics in a group with
  external topics take the external count, and a group of repartition topics only takes their maximum;
- a subtopology has one task per partition of its widest source topic, and a changelog has one
  partition per task of the subtopology that owns its store.

Everything here is a pure function of the plan and the source counts, so start-up, rebalances,
``init()`` and autoscaling compute counts the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from kstreams.errors import MissingSourceTopicException, TaskAssignmentException, TopologyException
from kstreams.topology.plan import InternalTopicSpec, SubtopologyPlan, TopologyPlan

__all__ = ["PartitionCounts", "compute_partition_counts"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionCounts:
    """The counts derived from one view of the source topics.

    ``topics`` maps every source topic (external and repartition) and every changelog topic to its
    partition count; ``tasks`` maps a subtopology id to its number of tasks. ``unresolved`` names
    internal topics whose count could not be computed (only when missing source topics were allowed).
    """

    topics: dict[str, int]
    tasks: dict[int, int]
    unresolved: frozenset[str] = field(default_factory=frozenset)


def compute_partition_counts(
    plan: TopologyPlan, source_counts: Mapping[str, int], *, allow_missing_sources: bool = False
) -> PartitionCounts:
    """The partition count of every internal topic and the task count of every subtopology.

    ``source_counts`` holds the counts of the external source topics that exist. A missing source
    topic raises ``MissingSourceTopicException`` unless ``allow_missing_sources``; then the counts
    that depend on it are left out and named in ``unresolved`` (``init()`` validates what it can
    before it reports missing source topics).

    Raises ``TaskAssignmentException`` when repartition topic counts cannot all be computed (a
    repartition topic nothing writes, or a cycle of repartition topics with no external input) and
    ``TopologyException`` when co-partitioned topics disagree.
    """
    repartition = {n: s for n, s in plan.internal_topics.items() if s.kind == "repartition"}
    external = [t for t in plan.source_topics if t not in repartition]
    missing = sorted(t for t in external if t not in source_counts)
    if missing and not allow_missing_sources:
        raise MissingSourceTopicException(_missing_sources_message(plan.application_id, missing))

    writers = _writers(plan, repartition)
    fixed = {n: s.partitions for n, s in repartition.items() if s.partitions is not None}
    pinned: dict[str, int] = dict(fixed)
    counts: dict[str, int] = {}
    # Co-partitioning can change the count of a repartition topic that feeds another subtopology, so
    # the fixpoint runs again with the enforced counts pinned until nothing moves.
    for _ in range(len(plan.copartition_groups) + 2):
        counts = _repartition_fixpoint(plan, repartition, writers, source_counts, pinned)
        unknown = sorted(n for n in repartition if n not in counts)
        if unknown and not missing:
            raise TaskAssignmentException(
                "Failed to compute number of partitions for all repartition topics, make sure all user "
                f"input topics are created and all Pattern subscriptions match at least one topic in the "
                f"cluster. Application {plan.application_id!r} could not resolve {unknown}: each needs a "
                "subtopology that writes it and reads from topics whose partition counts are known."
            )
        enforced = _enforce_copartitioning(plan, repartition, fixed, counts, source_counts)
        if all(counts.get(n) == c for n, c in enforced.items()):
            break
        pinned.update(enforced)

    topics: dict[str, int] = {t: source_counts[t] for t in external if t in source_counts}
    topics.update(counts)
    tasks: dict[int, int] = {}
    for sub in plan.subtopologies:
        widths = [topics.get(t) for t in sub.source_topics]
        if sub.source_topics and all(w is not None for w in widths):
            tasks[sub.id] = max(w for w in widths if w is not None)
    for name, spec in plan.internal_topics.items():
        if spec.kind == "changelog" and spec.subtopology in tasks:
            topics[name] = tasks[spec.subtopology]
    unresolved = frozenset(n for n in plan.internal_topics if n not in topics)
    return PartitionCounts(topics=topics, tasks=tasks, unresolved=unresolved)


def _missing_sources_message(application_id: str, missing: list[str]) -> str:
    return (
        f"Missing source topics {missing} of application {application_id!r}: the topology reads them but "
        "they do not exist on the cluster. Create them (Kafka Streams never creates source topics), "
        "or fix the topic names in the topology."
    )


def _writers(
    plan: TopologyPlan, repartition: Mapping[str, InternalTopicSpec]
) -> dict[str, list[SubtopologyPlan]]:
    writers: dict[str, list[SubtopologyPlan]] = {}
    for sub in plan.subtopologies:
        for topic in set(sub.sink_topics) | set(sub.repartition_sink_topics):
            if topic in repartition:
                writers.setdefault(topic, []).append(sub)
    return writers


def _repartition_fixpoint(
    plan: TopologyPlan,
    repartition: Mapping[str, InternalTopicSpec],
    writers: Mapping[str, list[SubtopologyPlan]],
    source_counts: Mapping[str, int],
    pinned: Mapping[str, int],
) -> dict[str, int]:
    """Counts of the repartition topics that can be resolved, pinned counts taken as given."""
    known: dict[str, int] = {n: c for n, c in pinned.items() if n in repartition}

    def inputs(topic: str) -> list[int | None]:
        return [
            known.get(t) if t in repartition else source_counts.get(t)
            for sub in writers.get(topic, ())
            for t in sub.source_topics
        ]

    while True:
        progress = False
        for name in repartition:
            if name in known:
                continue
            counts = inputs(name)
            if counts and all(c is not None for c in counts):
                known[name] = max(c for c in counts if c is not None)
                progress = True
        if progress:
            continue
        # Nothing resolves from fully known inputs: a cycle through repartition topics. Like Kafka,
        # settle one topic from the inputs known so far (unknown repartition inputs are skipped, a
        # missing external topic never is) and go on.
        for name in repartition:
            if name in known:
                continue
            subs = writers.get(name, ())
            if any(t not in repartition and t not in source_counts for s in subs for t in s.source_topics):
                continue
            partial = [c for c in inputs(name) if c is not None]
            if partial:
                known[name] = max(partial)
                progress = True
                break
        if not progress:
            return known


def _enforce_copartitioning(
    plan: TopologyPlan,
    repartition: Mapping[str, InternalTopicSpec],
    fixed: Mapping[str, int],
    counts: Mapping[str, int],
    source_counts: Mapping[str, int],
) -> dict[str, int]:
    """The counts co-partitioning imposes on repartition topics; raises when a group cannot line up."""
    enforced: dict[str, int] = {}
    for group in plan.copartition_groups:
        reps = sorted(t for t in group if t in repartition)
        externals = sorted(t for t in group if t not in repartition)
        if any(t not in source_counts for t in externals):
            continue  # a missing source topic is reported on its own
        if externals:
            by_topic = {t: source_counts[t] for t in externals}
            if len(set(by_topic.values())) > 1:
                listing = ", ".join(f"{t}:{n}" for t, n in by_topic.items())
                raise TopologyException(
                    f"Topics not co-partitioned: [{listing}]. The topics of a join must have the same "
                    "number of partitions: add partitions to the smaller topics, or repartition them "
                    "in the topology (repartition() with a partition count)."
                )
            target = next(iter(by_topic.values()))
            for topic in reps:
                if topic in fixed and fixed[topic] != target:
                    raise TopologyException(
                        f"Number of partitions [{fixed[topic]}] of repartition topic [{topic}] doesn't match "
                        f"number of partitions [{target}] of the source topics {externals} it is "
                        "co-partitioned with. Give the repartition() the same partition count as those "
                        "topics, or leave the count unset so it follows them."
                    )
        else:
            pinned = {t: fixed[t] for t in reps if t in fixed}
            if len(set(pinned.values())) > 1:
                listing = ", ".join(f"{t}:{n}" for t, n in pinned.items())
                raise TopologyException(
                    f"Repartition topics with fixed partition counts are co-partitioned but disagree: "
                    f"[{listing}]. Give every repartition() of a join the same partition count."
                )
            known = [counts[t] for t in reps if t in counts]
            if pinned:
                target = next(iter(pinned.values()))
            elif known:
                target = max(known)
            else:
                continue
        for topic in reps:
            enforced[topic] = target
    return enforced
