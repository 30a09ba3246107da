"""Building a ``TopologyPlan`` from a ``Topology`` for one application.

Here, and only here, internal topic names get the ``<application.id>-`` prefix: repartition
topics become ``<application.id>-<name>`` and the changelog of a logged store
``<application.id>-<store>-changelog``. Subtopologies are numbered as ``describe()`` numbers them.

Global stores' subtopologies (a source and its update processor) take their number in that
sequence, as in Kafka, but go to ``TopologyPlan.global_subtopologies``: they make no tasks, so
task ids skip their numbers. Pattern sources read the given existing topics their pattern
matches in full, never an internal topic (``__``-prefixed, or this application's changelog,
repartition and control topics).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kstreams.config import cache_max_bytes_of
from kstreams.errors import TopologyException
from kstreams.serdes import serde_from_config
from kstreams.topology.graph import GraphTemplate, ProcessorTemplate, SinkTemplate, SourceTemplate
from kstreams.topology.grouping import node_groups
from kstreams.topology.nodes import ProcessorNodeSpec, SinkNodeSpec, SourceNodeSpec
from kstreams.topology.plan import InternalTopicSpec, SubtopologyPlan, TopologyPlan

if TYPE_CHECKING:
    from kstreams.state.store import StoreBuilder
    from kstreams.topology.topology import Topology

__all__ = ["build_plan", "changelog_store_name", "changelog_topic_name", "is_internal_topic"]

logger = logging.getLogger(__name__)

_WINDOWED_STORE_TYPES = ("window", "session")


def changelog_topic_name(application_id: str, store_name: str) -> str:
    """Kafka's changelog topic name of a store."""
    return f"{application_id}-{store_name}-changelog"


def changelog_store_name(application_id: str, topic: str) -> str | None:
    """The store whose changelog ``topic`` is (the inverse of ``changelog_topic_name``), or None
    when the topic is no changelog of this application."""
    prefix, suffix = f"{application_id}-", "-changelog"
    if len(topic) <= len(prefix) + len(suffix) or not (topic.startswith(prefix) and topic.endswith(suffix)):
        return None
    return topic[len(prefix) : -len(suffix)]


def is_internal_topic(application_id: str, topic: str) -> bool:
    """Whether a pattern source must skip ``topic``: the cluster's own topics (``__`` prefix) and
    this application's changelog, repartition and control topics."""
    if topic.startswith("__"):
        return True
    if not topic.startswith(f"{application_id}-"):
        return False
    return topic.endswith(("-changelog", "-repartition", "-control"))


def _use_client_dsl_store_suppliers(topology: Topology, config: Mapping[str, Any]) -> None:
    """The client's ``dsl.store.suppliers.class`` makes the stores the DSL made with the default
    and no TopologyConfig settled (Kafka's store factories read it as late as this). Its
    ``default.dsl.store`` does not (as in Kafka): said once, where it would have changed a store."""
    defaulted = [b for b in topology.store_builders.values() if getattr(b, "dsl_params", None) is not None]
    if not defaulted:
        return
    from kstreams.state.dsl_store_suppliers import apply_dsl_store_suppliers, dsl_store_suppliers

    suppliers = dsl_store_suppliers(config, read_store_type=False)
    if suppliers is not None:
        for builder in defaulted:
            apply_dsl_store_suppliers(builder, suppliers)
    elif config.get("default.dsl.store") not in (None, "rocksDB") and not getattr(
        topology, "_dsl_told", False
    ):
        topology._dsl_told = True  # type: ignore[attr-defined]
        logger.warning(
            "default.dsl.store=%s in the client's config does not change stores %s, which the topology "
            "made already (as in Kafka Streams): build with StreamsBuilder(TopologyConfig("
            "StreamsConfig(props))), or set dsl.store.suppliers.class, which the client applies.",
            config.get("default.dsl.store"),
            ", ".join(sorted(b.name for b in defaulted)),
        )


def build_plan(
    topology: Topology,
    application_id: str,
    config: Mapping[str, Any] | None = None,
    existing_topics: Iterable[str] | None = None,
) -> TopologyPlan:
    """Resolve ``topology`` for ``application_id`` (see ``Topology.build``); pattern sources read
    the ``existing_topics`` they match."""
    if not isinstance(application_id, str) or not application_id:
        raise TopologyException(
            f"Cannot build the topology for application id {application_id!r}: give the non-empty "
            "application.id, which prefixes every internal topic."
        )
    specs = topology.nodes
    if not specs:
        raise TopologyException(
            "The topology has no nodes: add at least one source (add_source or StreamsBuilder.stream)."
        )
    internal = topology.internal_topics

    def resolve(topic: str) -> str:
        return f"{application_id}-{topic}" if topic in internal else topic

    candidates = sorted(t for t in existing_topics or () if not is_internal_topic(application_id, t))

    def topics_of(spec: SourceNodeSpec) -> tuple[str, ...]:
        if spec.pattern is None:
            return spec.topics
        return tuple(t for t in candidates if spec.pattern.fullmatch(t) and t not in claimed)

    claimed = {t for s in specs.values() if isinstance(s, SourceNodeSpec) for t in s.topics}
    global_nodes = topology.global_node_names

    default_key = serde_from_config(config, "default.key.serde")
    default_value = serde_from_config(config, "default.value.serde")
    if config is not None and _cache_disabled(config):
        # As Kafka's rewriteTopology: with no cache bytes there is nothing to cache in.
        for builder in topology.store_builders.values():
            builder.with_caching_disabled()
    if config is not None:
        _use_client_dsl_store_suppliers(topology, config)

    groups = node_groups({n: s.predecessors for n, s in specs.items()}, topology.store_users)
    subtopologies: list[SubtopologyPlan] = []
    global_subtopologies: list[SubtopologyPlan] = []
    patterns: dict[str, str] = {}  # pattern source -> its pattern
    internal_topics: dict[str, InternalTopicSpec] = {}
    offset_resets: dict[str, str] = {}
    for group_id, names in groups.items():
        source_topics: dict[str, None] = {}
        repartition_sources: dict[str, None] = {}
        sink_topics: dict[str, None] = {}
        repartition_sinks: dict[str, None] = {}
        stores: dict[str, StoreBuilder] = {}
        templates: list[SourceTemplate | ProcessorTemplate | SinkTemplate] = []
        for name in names:
            spec = specs[name]
            if isinstance(spec, SourceNodeSpec):
                source_topic_names = topics_of(spec)
                if spec.pattern is not None:
                    patterns[name] = spec.pattern.pattern
                resolved = tuple(resolve(t) for t in source_topic_names)
                for topic, full in zip(source_topic_names, resolved, strict=True):
                    source_topics[full] = None
                    if topic in internal:
                        repartition_sources[full] = None
                        props = internal[topic]
                        internal_topics[full] = InternalTopicSpec(
                            full, "repartition", group_id, props.partitions, dict(props.config)
                        )
                    if spec.offset_reset is not None:
                        offset_resets[full] = spec.offset_reset
                templates.append(
                    SourceTemplate(
                        name,
                        resolved,
                        spec.key_deserializer if spec.key_deserializer is not None else default_key,
                        spec.value_deserializer if spec.value_deserializer is not None else default_value,
                        spec.timestamp_extractor,
                        spec.pattern,
                    )
                )
            elif isinstance(spec, ProcessorNodeSpec):
                for store_name in spec.stores:
                    stores.setdefault(store_name, topology.store_builders[store_name])
                templates.append(
                    ProcessorTemplate(name, spec.supplier, spec.predecessors, tuple(spec.stores))
                )
            elif isinstance(spec, SinkNodeSpec):
                sink_topic = resolve(spec.topic) if spec.topic is not None else None
                if sink_topic is not None:
                    sink_topics[sink_topic] = None
                    if spec.topic in internal:
                        repartition_sinks[sink_topic] = None
                templates.append(
                    SinkTemplate(
                        name,
                        spec.predecessors,
                        sink_topic,
                        spec.topic_extractor,
                        spec.key_serializer if spec.key_serializer is not None else default_key,
                        spec.value_serializer if spec.value_serializer is not None else default_value,
                        spec.partitioner,
                    )
                )
        changelogs: dict[str, str] = {}
        for store_name, builder in stores.items():
            if not builder.logging_enabled:
                continue
            changelog = changelog_topic_name(application_id, store_name)
            changelogs[store_name] = changelog
            windowed = builder.store_type in _WINDOWED_STORE_TYPES
            internal_topics[changelog] = InternalTopicSpec(
                changelog,
                "changelog",
                group_id,
                None,
                dict(builder.log_config),
                store=store_name,
                windowed=windowed,
                retention_ms=builder.retention_ms if windowed else -1,
            )
        template = GraphTemplate(group_id, tuple(templates), dict(stores))
        is_global = all(name in global_nodes for name in names)
        (global_subtopologies if is_global else subtopologies).append(
            SubtopologyPlan(
                id=group_id,
                source_topics=tuple(source_topics),
                repartition_source_topics=tuple(repartition_sources),
                sink_topics=tuple(sink_topics),
                repartition_sink_topics=tuple(repartition_sinks),
                stores=tuple(stores),
                changelog_topics=changelogs,
                graph_factory=template.create,
            )
        )

    copartition_groups = _copartition_groups(topology, resolve)
    _validate_copartition(copartition_groups, internal_topics)
    logger.debug("Built the plan of %s: %d subtopologies", application_id, len(subtopologies))
    return TopologyPlan(
        application_id=application_id,
        subtopologies=tuple(subtopologies),
        internal_topics=internal_topics,
        copartition_groups=copartition_groups,
        store_builders=dict(topology.store_builders),
        offset_resets=offset_resets,
        global_subtopologies=tuple(global_subtopologies),
        source_patterns=patterns,
    )


def _cache_disabled(config: Mapping[str, Any]) -> bool:
    return cache_max_bytes_of(config) == 0


def _copartition_groups(topology: Topology, resolve: Any) -> tuple[frozenset[str], ...]:
    """Topics of each declared source group, merged transitively where groups share a topic
    (Kafka's ``copartitionGroups``), in the order first declared."""
    merged: list[set[str]] = []
    for source_group in topology.copartition_groups:
        topics: set[str] = set()
        for source_name in sorted(source_group):
            spec = topology.nodes[source_name]
            assert isinstance(spec, SourceNodeSpec)
            topics.update(resolve(t) for t in spec.topics)
        overlapping = [g for g in merged if g & topics]
        for group in overlapping:
            topics |= group
            merged.remove(group)
        merged.append(topics)
    return tuple(frozenset(g) for g in merged)


def _validate_copartition(
    groups: tuple[frozenset[str], ...], internal_topics: Mapping[str, InternalTopicSpec]
) -> None:
    """Repartition topics with fixed counts in one group must agree (when all are fixed)."""
    for group in groups:
        fixed = {
            t: internal_topics[t].partitions
            for t in group
            if t in internal_topics and internal_topics[t].partitions is not None
        }
        if fixed and set(fixed) == set(group) and len(set(fixed.values())) > 1:
            listing = ", ".join(f"{t}={n}" for t, n in sorted(fixed.items()))
            raise TopologyException(
                f"Following topics do not have the same number of partitions: [{{{listing}}}]. Topics "
                "that are joined must be co-partitioned: give their repartition operations the same "
                "number of partitions."
            )
