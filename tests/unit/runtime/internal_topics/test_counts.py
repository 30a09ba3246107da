"""Partition counts, required topic configs and topic validation: the pure rules of the internal topic
manager (reference §3-§4), on plans built by hand."""

from __future__ import annotations

import pytest

from kstreams.cluster.port import TopicDescription
from kstreams.config import StreamsConfig
from kstreams.errors import MissingSourceTopicException, TaskAssignmentException, TopologyException
from kstreams.init_parameters import InitParameters
from kstreams.runtime.internal_topics.partition_counts import compute_partition_counts
from kstreams.runtime.internal_topics.requirements import (
    control_topic_name,
    control_topic_requirement,
    required_topic_config,
    topic_requirement,
)
from kstreams.runtime.internal_topics.validation import validate_topic
from kstreams.topology.plan import InternalTopicSpec, SubtopologyPlan, TopologyPlan


def sub(
    sub_id: int,
    sources: tuple[str, ...],
    *,
    repartition_sources: tuple[str, ...] = (),
    repartition_sinks: tuple[str, ...] = (),
    changelogs: dict[str, str] | None = None,
) -> SubtopologyPlan:
    return SubtopologyPlan(
        id=sub_id,
        source_topics=sources + repartition_sources,
        repartition_source_topics=repartition_sources,
        sink_topics=repartition_sinks,
        repartition_sink_topics=repartition_sinks,
        stores=tuple(changelogs or {}),
        changelog_topics=dict(changelogs or {}),
    )


def plan(
    subs: list[SubtopologyPlan],
    specs: list[InternalTopicSpec],
    groups: tuple[frozenset[str], ...] = (),
) -> TopologyPlan:
    return TopologyPlan("app", tuple(subs), {s.name: s for s in specs}, groups)


def rep(name: str, reader: int, partitions: int | None = None) -> InternalTopicSpec:
    return InternalTopicSpec(name, "repartition", reader, partitions=partitions)


def changelog(name: str, owner: int, **kw: object) -> InternalTopicSpec:
    return InternalTopicSpec(name, "changelog", owner, store=name, **kw)  # type: ignore[arg-type]


# -- partition counts ------------------------------------------------------------------------------


def test_repartition_topic_takes_max_partitions_of_the_writing_subtopologys_sources() -> None:
    p = plan(
        [sub(0, ("a", "b"), repartition_sinks=("r",)), sub(1, (), repartition_sources=("r",))],
        [rep("r", 1)],
    )
    counts = compute_partition_counts(p, {"a": 3, "b": 5})
    assert counts.topics["r"] == 5
    assert counts.tasks == {0: 5, 1: 5}


def test_chain_of_repartition_topics_resolves_in_any_declaration_order() -> None:
    # r3 is declared (and read) first but depends on r2, which depends on r1, which depends on "in".
    p = plan(
        [
            sub(0, (), repartition_sources=("r2",), repartition_sinks=("r3",)),
            sub(1, (), repartition_sources=("r3",)),
            sub(2, (), repartition_sources=("r1",), repartition_sinks=("r2",)),
            sub(3, ("in",), repartition_sinks=("r1",)),
        ],
        [rep("r3", 1), rep("r2", 0), rep("r1", 2)],
    )
    counts = compute_partition_counts(p, {"in": 7})
    assert [counts.topics[t] for t in ("r1", "r2", "r3")] == [7, 7, 7]
    assert counts.tasks == {0: 7, 1: 7, 2: 7, 3: 7}


def test_fixed_repartition_count_wins_and_flows_downstream() -> None:
    p = plan(
        [
            sub(0, ("in",), repartition_sinks=("r1",)),
            sub(1, (), repartition_sources=("r1",), repartition_sinks=("r2",)),
            sub(2, (), repartition_sources=("r2",)),
        ],
        [rep("r1", 1, partitions=2), rep("r2", 2)],
    )
    counts = compute_partition_counts(p, {"in": 8})
    assert counts.topics["r1"] == 2
    assert counts.topics["r2"] == 2
    assert counts.tasks == {0: 8, 1: 2, 2: 2}


def test_repartition_topic_nothing_writes_fails_with_kafkas_message() -> None:
    p = plan([sub(0, ("in",)), sub(1, (), repartition_sources=("orphan",))], [rep("orphan", 1)])
    with pytest.raises(TaskAssignmentException, match="Failed to compute number of partitions for all"):
        compute_partition_counts(p, {"in": 2})


def test_cycle_through_repartition_topics_settles_from_the_external_input() -> None:
    p = plan(
        [
            sub(0, ("x",), repartition_sources=("r2",), repartition_sinks=("r1",)),
            sub(1, (), repartition_sources=("r1",), repartition_sinks=("r2",)),
        ],
        [rep("r1", 1), rep("r2", 0)],
    )
    counts = compute_partition_counts(p, {"x": 3})
    assert counts.topics["r1"] == 3
    assert counts.topics["r2"] == 3


def test_changelog_partitions_equal_tasks_of_the_owning_subtopology() -> None:
    p = plan(
        [sub(0, ("a", "b"), changelogs={"s": "app-s-changelog"})],
        [changelog("app-s-changelog", 0)],
    )
    counts = compute_partition_counts(p, {"a": 2, "b": 6})
    assert counts.topics["app-s-changelog"] == 6


def test_missing_source_topic_raises_naming_it() -> None:
    p = plan([sub(0, ("present", "absent"))], [])
    with pytest.raises(MissingSourceTopicException, match="absent"):
        compute_partition_counts(p, {"present": 1})


def test_missing_source_topic_allowed_leaves_dependent_topics_unresolved() -> None:
    p = plan(
        [
            sub(0, ("gone",), repartition_sinks=("r",), changelogs={"s": "app-s-changelog"}),
            sub(1, ("here",), changelogs={"t": "app-t-changelog"}),
            sub(2, (), repartition_sources=("r",)),
        ],
        [rep("r", 2), changelog("app-s-changelog", 0), changelog("app-t-changelog", 1)],
    )
    counts = compute_partition_counts(p, {"here": 4}, allow_missing_sources=True)
    assert counts.unresolved == {"r", "app-s-changelog"}
    assert counts.topics["app-t-changelog"] == 4


# -- co-partitioning --------------------------------------------------------------------------------


def test_external_copartitioned_topics_with_unequal_counts_are_rejected() -> None:
    p = plan([sub(0, ("left", "right"))], [], (frozenset({"left", "right"}),))
    with pytest.raises(TopologyException, match=r"Topics not co-partitioned: \[left:2, right:3\]"):
        compute_partition_counts(p, {"left": 2, "right": 3})


def test_repartition_topic_copartitioned_with_external_topic_takes_its_count() -> None:
    p = plan(
        [
            sub(0, ("wide",), repartition_sinks=("r",)),
            sub(1, ("narrow",), repartition_sources=("r",)),
        ],
        [rep("r", 1)],
        (frozenset({"r", "narrow"}),),
    )
    counts = compute_partition_counts(p, {"wide": 8, "narrow": 3})
    assert counts.topics["r"] == 3
    assert counts.tasks[1] == 3


def test_all_repartition_group_takes_the_maximum_and_it_flows_downstream() -> None:
    p = plan(
        [
            sub(0, ("a",), repartition_sinks=("ra",)),
            sub(1, ("b",), repartition_sinks=("rb",)),
            sub(2, (), repartition_sources=("ra", "rb"), repartition_sinks=("out",)),
            sub(3, (), repartition_sources=("out",)),
        ],
        [rep("ra", 2), rep("rb", 2), rep("out", 3)],
        (frozenset({"ra", "rb"}),),
    )
    counts = compute_partition_counts(p, {"a": 2, "b": 5})
    assert counts.topics["ra"] == counts.topics["rb"] == 5
    assert counts.topics["out"] == 5


def test_fixed_repartition_count_disagreeing_with_copartitioned_source_is_rejected() -> None:
    p = plan(
        [sub(0, ("in",), repartition_sinks=("r",)), sub(1, ("t",), repartition_sources=("r",))],
        [rep("r", 1, partitions=4)],
        (frozenset({"r", "t"}),),
    )
    with pytest.raises(TopologyException, match=r"repartition topic \[r\]"):
        compute_partition_counts(p, {"in": 2, "t": 2})


# -- required configs -----------------------------------------------------------------------------


def config(**extra: object) -> StreamsConfig:
    return StreamsConfig({"application.id": "app", **{k.replace("_", "."): v for k, v in extra.items()}})


def test_changelog_defaults_to_compact() -> None:
    assert required_topic_config(changelog("c", 0), config())["cleanup.policy"] == "compact"


def test_windowed_changelog_retention_is_store_retention_plus_additional() -> None:
    spec = changelog("c", 0, windowed=True, retention_ms=1000)
    result = required_topic_config(
        spec, StreamsConfig({"application.id": "app", "windowstore.changelog.additional.retention.ms": 500})
    )
    assert result["cleanup.policy"] == "compact,delete"
    assert result["retention.ms"] == "1500"


def test_repartition_defaults_delete_with_unlimited_retention() -> None:
    result = required_topic_config(rep("r", 0), config())
    assert result["cleanup.policy"] == "delete"
    assert result["retention.ms"] == "-1"


def test_topic_prefixed_configs_override_defaults_and_topic_spec_overrides_both() -> None:
    cfg = StreamsConfig(
        {"application.id": "app", "topic.min.insync.replicas": "2", "topic.segment.bytes": "100"}
    )
    plain = required_topic_config(rep("r", 0), cfg)
    assert plain["min.insync.replicas"] == "2"
    assert plain["segment.bytes"] == "100"  # topic.* over the library default 52428800
    spec = InternalTopicSpec("r", "repartition", 0, config={"segment.bytes": "200"})
    assert required_topic_config(spec, cfg)["segment.bytes"] == "200"


def test_control_topic_has_one_partition_and_deletes() -> None:
    req = control_topic_requirement(config())
    assert req.name == control_topic_name("app") == "app-control"
    assert req.partitions == 1
    assert req.config["cleanup.policy"] == "delete"


# -- validation -----------------------------------------------------------------------------------


def check(
    spec: InternalTopicSpec, partitions: int, actual_partitions: int, actual: dict[str, str]
) -> list[str]:
    req = topic_requirement(spec, partitions, config())
    return [p.message for p in validate_topic(req, TopicDescription(spec.name, actual_partitions, actual))]


def test_topic_matching_its_requirement_has_no_problem() -> None:
    assert check(rep("r", 0), 2, 2, {"cleanup.policy": "delete", "retention.ms": "-1"}) == []
    assert check(changelog("c", 0), 2, 2, {"cleanup.policy": "compact"}) == []


def test_wrong_partition_count_is_reported_with_kafkas_wording_and_a_fix() -> None:
    (message,) = check(changelog("c", 0), 4, 2, {"cleanup.policy": "compact"})
    assert (
        "Internal topic c requires 4 partitions, but the existing topic on the broker has 2 partitions."
        in message
    )
    assert "partition.autoscaling.enabled" in message
    (message,) = check(changelog("c", 0), 2, 4, {"cleanup.policy": "compact"})
    assert "requires 2 partitions" in message and "cannot be removed" in message


def test_unwindowed_changelog_with_delete_is_misconfigured() -> None:
    (message,) = check(changelog("c", 0), 1, 1, {"cleanup.policy": "compact,delete"})
    assert 'should not contain "delete"' in message and "cleanup.policy=compact" in message


def test_unwindowed_changelog_on_broker_default_policy_is_misconfigured_but_fixable() -> None:
    req = topic_requirement(changelog("c", 0), 1, config())
    (problem,) = validate_topic(req, TopicDescription("c", 1, {}))
    assert problem.fix == {"cleanup.policy": "compact"}


def test_windowed_changelog_with_too_short_retention_is_misconfigured() -> None:
    spec = changelog("w", 0, windowed=True, retention_ms=1000)
    (message,) = check(spec, 1, 1, {"cleanup.policy": "compact,delete", "retention.ms": "5000"})
    assert (
        "Retention time (retention.ms) of existing internal topic w is 5000 but should be 86401000" in message
    )
    assert check(spec, 1, 1, {"cleanup.policy": "compact,delete", "retention.ms": "86401000"}) == []
    assert check(spec, 1, 1, {"cleanup.policy": "compact"}) == []  # no delete: nothing expires


def test_compacted_repartition_topic_is_misconfigured() -> None:
    (message,) = check(rep("r", 0), 1, 1, {"cleanup.policy": "compact"})
    assert 'should not contain "compact"' in message


def test_repartition_topic_deleting_with_finite_retention_is_misconfigured() -> None:
    (message,) = check(rep("r", 0), 1, 1, {"cleanup.policy": "delete", "retention.ms": "1000"})
    assert "is 1000 but should be -1 (unlimited)" in message and "retention.ms=-1" in message
    # Broker default retention (7 days) applies when the topic does not set one.
    assert any("604800000" in m for m in check(rep("r", 0), 1, 1, {"cleanup.policy": "delete"}))
    (size,) = check(rep("r", 0), 1, 1, {"retention.ms": "-1", "retention.bytes": "1024"})
    assert "retention.bytes" in size


# -- InitParameters ---------------------------------------------------------------------------------


def test_init_parameters_default_to_not_setting_up_an_incomplete_setup() -> None:
    params = InitParameters.init_parameters()
    assert not params.setup_internal_topics_if_incomplete_enabled()
    enabled = params.enable_setup_internal_topics_if_incomplete()
    assert enabled.setup_internal_topics_if_incomplete_enabled()
    disabled = enabled.disable_setup_internal_topics_if_incomplete()
    assert not disabled.setup_internal_topics_if_incomplete_enabled()
    assert not params.setup_internal_topics_if_incomplete_enabled()  # setters return new instances
