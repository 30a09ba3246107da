"""What each internal topic must look like on the cluster: partition count and topic configs.

Configs are layered, the later winning (reference §3): library defaults for the topic's kind, then
the application's ``topic.*`` configs, then the configs the topology gives the topic (a store's log
config, a repartition's config). The one exception follows Kafka: a windowed changelog's
``retention.ms`` is computed from its store's retention (plus
``windowstore.changelog.additional.retention.ms``) and so wins over ``topic.retention.ms``; only the
topology's own config for that topic overrides it.

Besides changelog and repartition topics, every application has one control topic,
``<application.id>-control``: one partition with a short retention, on which the Kafka adapter carries
application-wide signals (SHUTDOWN_APPLICATION, task ownership for standby placement) that Kafka
Streams would carry in rebalance user data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from kstreams.config import StreamsConfig
from kstreams.topology.plan import InternalTopicSpec

__all__ = [
    "CONTROL_TOPIC_RETENTION_MS",
    "CONTROL_TOPIC_SUFFIX",
    "InternalTopicRequirement",
    "TopicKind",
    "control_topic_name",
    "control_topic_requirement",
    "required_topic_config",
    "topic_requirement",
]

TopicKind = Literal["repartition", "changelog", "control"]

CONTROL_TOPIC_SUFFIX = "-control"
# Signals on the control topic matter only to clients running now; an hour covers a slow rejoin.
CONTROL_TOPIC_RETENTION_MS = 3600000

# Kafka's own defaults for internal topics (InternalTopicConfig and its subclasses).
_CHANGELOG_DEFAULTS = {"cleanup.policy": "compact", "message.timestamp.type": "CreateTime"}
_WINDOWED_CHANGELOG_DEFAULTS = {"cleanup.policy": "compact,delete", "message.timestamp.type": "CreateTime"}
_REPARTITION_DEFAULTS = {
    "cleanup.policy": "delete",
    "retention.ms": "-1",
    "segment.bytes": "52428800",
    "message.timestamp.type": "CreateTime",
}


@dataclass(frozen=True)
class InternalTopicRequirement:
    """One topic the application needs: its name, kind, partition count and configs to create it with."""

    name: str
    kind: TopicKind
    partitions: int
    config: dict[str, str] = field(default_factory=dict)
    windowed: bool = False


def required_topic_config(spec: InternalTopicSpec, config: StreamsConfig) -> dict[str, str]:
    """The configs an internal topic is created with and validated against."""
    topic_configs = config.topic_configs()
    if spec.kind == "repartition":
        result = dict(_REPARTITION_DEFAULTS)
        result.update(topic_configs)
    elif spec.windowed:
        result = dict(_WINDOWED_CHANGELOG_DEFAULTS)
        result.update(topic_configs)
        additional = int(config["windowstore.changelog.additional.retention.ms"])
        result["retention.ms"] = str(_windowed_retention(spec.retention_ms, additional))
    else:
        result = dict(_CHANGELOG_DEFAULTS)
        result.update(topic_configs)
    result.update({k: str(v) for k, v in spec.config.items()})
    return result


def topic_requirement(
    spec: InternalTopicSpec, partitions: int, config: StreamsConfig
) -> InternalTopicRequirement:
    """The full requirement of one changelog or repartition topic, given its computed partition count."""
    return InternalTopicRequirement(
        name=spec.name,
        kind=spec.kind,
        partitions=partitions,
        config=required_topic_config(spec, config),
        windowed=spec.kind == "changelog" and spec.windowed,
    )


def control_topic_name(application_id: str) -> str:
    """The name of the application's control topic."""
    return f"{application_id}{CONTROL_TOPIC_SUFFIX}"


def control_topic_requirement(config: StreamsConfig) -> InternalTopicRequirement:
    """The control topic: one partition, deleted after a short retention."""
    return InternalTopicRequirement(
        name=control_topic_name(config.application_id),
        kind="control",
        partitions=1,
        config={"cleanup.policy": "delete", "retention.ms": str(CONTROL_TOPIC_RETENTION_MS)},
    )


def _windowed_retention(store_retention_ms: int, additional_ms: int) -> int:
    if store_retention_ms < 0:
        return -1  # a store that keeps everything needs a changelog that does too
    # Kafka caps the sum at Long.MAX_VALUE; brokers reject larger values.
    return min(store_retention_ms + additional_ms, 2**63 - 1)
