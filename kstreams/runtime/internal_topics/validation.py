"""Checks an existing internal topic against what the application requires (KIP-698).

A problem is anything that can lose data or break processing:

- a partition count other than the required one (a topic with too few partitions can be expanded
  when partition autoscaling is on; one with too many never can: partitions do not shrink);
- an unwindowed changelog whose ``cleanup.policy`` contains ``delete`` (old store updates vanish);
- a windowed changelog with ``delete`` whose ``retention.ms``/``retention.bytes`` is below the required;
- a repartition topic that is compacted, or that deletes with a finite ``retention.ms``/``retention.bytes``
  (records could vanish before they are processed; Kafka Streams purges them itself).

A config the broker does not report for the topic has the broker's default. When a problem comes
from such a default (no one set the value on the topic), setting the required value is safe and the
problem carries that ``fix``; a value someone set explicitly is only reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from kstreams.cluster.port import TopicDescription
from kstreams.runtime.internal_topics.requirements import InternalTopicRequirement

__all__ = ["BROKER_DEFAULTS", "ProblemKind", "TopicProblem", "validate_topic"]

ProblemKind = Literal["under_partitioned", "over_partitioned", "config"]

# Kafka broker defaults of the configs validated here (log.cleanup.policy, log.retention.hours=168, ...).
BROKER_DEFAULTS = {"cleanup.policy": "delete", "retention.ms": "604800000", "retention.bytes": "-1"}


@dataclass(frozen=True)
class TopicProblem:
    """One way an existing internal topic differs from its requirement.

    ``message`` says what is wrong and how to fix it; ``fix`` holds config values that rectify it
    safely (set only when the broker default is in effect), else it is empty.
    """

    topic: str
    kind: ProblemKind
    message: str
    fix: dict[str, str] = field(default_factory=dict)


def validate_topic(
    requirement: InternalTopicRequirement, description: TopicDescription
) -> list[TopicProblem]:
    """Every problem of one existing topic; empty when it is set up as required."""
    problems: list[TopicProblem] = []
    partition_problem = _check_partitions(requirement, description)
    if partition_problem is not None:
        problems.append(partition_problem)
    if requirement.kind == "changelog":
        problems.extend(_check_changelog(requirement, description.config))
    elif requirement.kind == "repartition":
        problems.extend(_check_repartition(requirement, description.config))
    return problems


def _check_partitions(req: InternalTopicRequirement, desc: TopicDescription) -> TopicProblem | None:
    if desc.partitions == req.partitions:
        return None
    head = (
        f"Internal topic {req.name} requires {req.partitions} partitions, but the existing topic on the "
        f"broker has {desc.partitions} partitions."
    )
    if desc.partitions < req.partitions:
        return TopicProblem(
            req.name,
            "under_partitioned",
            f"{head} A source topic of the application probably gained partitions. Set "
            "partition.autoscaling.enabled=true to let Kafka Streams expand its internal topics, or add "
            f"the partitions yourself (kafka-topics --alter --topic {req.name} --partitions "
            f"{req.partitions}).",
        )
    return TopicProblem(
        req.name,
        "over_partitioned",
        f"{head} Partitions cannot be removed: stop the application, delete the topic (its data is "
        "lost) or reset the application with the application reset tool, and recreate the internal "
        "topics with KafkaStreams.init() or by restarting with internal.topics.setup=automatic.",
    )


def _policy(config: Mapping[str, str]) -> tuple[set[str], bool]:
    raw = config.get("cleanup.policy")
    value = BROKER_DEFAULTS["cleanup.policy"] if raw is None else raw
    return {p.strip().lower() for p in value.split(",") if p.strip()}, raw is None


def _check_changelog(req: InternalTopicRequirement, actual: Mapping[str, str]) -> list[TopicProblem]:
    policy, defaulted = _policy(actual)
    required_policy, _ = _policy(req.config)
    if "delete" not in policy:
        return []
    if not req.windowed:
        if "delete" in required_policy:
            return []  # the topology asked for it
        return [
            TopicProblem(
                req.name,
                "config",
                f"Cleanup policy (cleanup.policy) of existing internal topic {req.name} should not contain "
                f'"delete", but is "{",".join(sorted(policy))}": the broker would delete old updates of the '
                "store and it could not be restored. Set cleanup.policy=compact on the topic (kafka-configs "
                f"--alter --entity-type topics --entity-name {req.name} "
                "--add-config cleanup.policy=compact).",
                {"cleanup.policy": req.config.get("cleanup.policy", "compact")} if defaulted else {},
            )
        ]
    return _check_retention(
        req,
        actual,
        "retention.ms",
        "Retention time",
        "the store's retention plus windowstore.changelog.additional.retention.ms",
    ) + _check_retention(
        req,
        actual,
        "retention.bytes",
        "Retention size",
        "size-based deletion drops windows the store still needs",
    )


def _check_repartition(req: InternalTopicRequirement, actual: Mapping[str, str]) -> list[TopicProblem]:
    policy, _ = _policy(actual)
    required_policy, _ = _policy(req.config)
    if "compact" in policy and "compact" not in required_policy:
        return [
            TopicProblem(
                req.name,
                "config",
                f"Cleanup policy (cleanup.policy) of existing internal topic {req.name} should not contain "
                f'"compact", but is "{",".join(sorted(policy))}": compaction drops records of a repartition '
                "topic before they are processed. Set cleanup.policy=delete on the topic (kafka-configs "
                f"--alter --entity-type topics --entity-name {req.name} --add-config cleanup.policy=delete).",
            )
        ]
    if "delete" not in policy:
        return []
    reason = "Kafka Streams purges repartition topics itself once records are processed"
    return _check_retention(req, actual, "retention.ms", "Retention time", reason) + _check_retention(
        req, actual, "retention.bytes", "Retention size", reason
    )


def _as_int(value: str | None) -> int | None:
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def _check_retention(
    req: InternalTopicRequirement, actual: Mapping[str, str], key: str, label: str, reason: str
) -> list[TopicProblem]:
    required = _as_int(req.config.get(key, "-1"))
    raw = actual.get(key)
    value = _as_int(BROKER_DEFAULTS[key] if raw is None else raw)
    if required is None or value is None:
        if required is not None and raw is not None:
            return [
                TopicProblem(
                    req.name,
                    "config",
                    f"{label} ({key}) of existing internal topic {req.name} "
                    f"is {raw!r}, which is not a number. Set {key}={required} on the topic.",
                )
            ]
        return []
    if value == -1 or (required != -1 and value >= required):
        return []
    wanted = "-1 (unlimited)" if required == -1 else f"{required} or larger"
    return [
        TopicProblem(
            req.name,
            "config",
            f"{label} ({key}) of existing internal topic {req.name} is {value} but should be {wanted} "
            f"({reason}). Set {key}={required} on the topic (kafka-configs --alter --entity-type topics "
            f"--entity-name {req.name} --add-config {key}={required}).",
            {key: str(required)} if raw is None else {},
        )
    ]
