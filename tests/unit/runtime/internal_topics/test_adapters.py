"""The internal topic manager on both cluster adapters (embedded, and a real Kafka-protocol broker
through KafkaCluster): what a broker reports back must validate as it was created."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams.config import StreamsConfig
from kstreams.errors import (
    InternalTopicsAlreadySetupException,
    MisconfiguredInternalTopicException,
    MissingInternalTopicsException,
)
from kstreams.runtime.internal_topics.manager import InternalTopicManager
from kstreams.topology.plan import InternalTopicSpec, SubtopologyPlan, TopologyPlan


class Topics:
    """The names of one test's application: topics on a shared broker never collide."""

    def __init__(self, app_id: str) -> None:
        self.app = app_id
        self.source = f"in-{app_id}"
        self.rep = f"{app_id}-agg-repartition"
        self.kv = f"{app_id}-kv-changelog"
        self.win = f"{app_id}-win-changelog"
        self.control = f"{app_id}-control"

    def plan(self) -> TopologyPlan:
        subs = (
            SubtopologyPlan(0, (self.source,), (), (self.rep,), (self.rep,), ("kv",), {"kv": self.kv}),
            SubtopologyPlan(1, (self.rep,), (self.rep,), (), (), ("win",), {"win": self.win}),
        )
        specs = {
            self.rep: InternalTopicSpec(self.rep, "repartition", 1),
            self.kv: InternalTopicSpec(self.kv, "changelog", 0, store="kv"),
            self.win: InternalTopicSpec(
                self.win, "changelog", 1, store="win", windowed=True, retention_ms=1000
            ),
        }
        return TopologyPlan(self.app, subs, specs, ())


@pytest.fixture
def topics(cluster: Any, app_id: str) -> Topics:
    names = Topics(app_id)
    cluster.create_topic(names.source, partitions=2)
    return names


def manager(cluster: Any, topics: Topics, **config: Any) -> InternalTopicManager:
    props = StreamsConfig({"application.id": topics.app, **config})
    return InternalTopicManager(cluster.admin(), props, topics.plan(), retry_backoff_s=0.05)


def counts(cluster: Any, topics: Topics) -> dict[str, int]:
    wanted = {topics.source, topics.rep, topics.kv, topics.win, topics.control}
    return {name: d.partitions for name, d in cluster.topics().items() if name in wanted}


def test_created_topics_validate_clean_as_the_broker_reports_them(cluster: Any, topics: Topics) -> None:
    m = manager(cluster, topics)
    assert set(m.setup_for_rebalance().created) == {topics.rep, topics.kv, topics.win, topics.control}

    described = cluster.topics()
    assert described[topics.kv].config["cleanup.policy"] == "compact"
    assert described[topics.rep].config["retention.ms"] == "-1"
    again = m.setup_for_rebalance()
    assert again.created == {} and again.rectified == {} and again.misconfigurations == ()


def test_init_creates_then_refuses_then_names_a_deleted_topic(cluster: Any, topics: Topics) -> None:
    m = manager(cluster, topics, **{"internal.topics.setup": "manual"})
    m.init(timeout=30.0)
    assert counts(cluster, topics) == {
        topics.source: 2,
        topics.rep: 2,
        topics.kv: 2,
        topics.win: 2,
        topics.control: 1,
    }
    with pytest.raises(InternalTopicsAlreadySetupException):
        m.init(timeout=30.0)
    cluster.delete_topic(topics.kv)
    with pytest.raises(MissingInternalTopicsException) as info:
        m.setup_for_rebalance(timeout=30.0)
    assert info.value.topics == [topics.kv]


def test_explicitly_misconfigured_changelog_fails_manual_setup(cluster: Any, topics: Topics) -> None:
    cluster.create_topic(topics.kv, partitions=2, config={"cleanup.policy": "delete"})
    m = manager(cluster, topics, **{"internal.topics.setup": "manual"})
    with pytest.raises(MisconfiguredInternalTopicException, match=f'{topics.kv} should not contain "delete"'):
        m.setup_for_rebalance(timeout=30.0)


def test_autoscaling_expands_internal_topics_after_the_source_grows(cluster: Any, topics: Topics) -> None:
    m = manager(cluster, topics, **{"partition.autoscaling.enabled": True})
    m.setup_for_rebalance(timeout=30.0)
    cluster.create_partitions(topics.source, 4)

    result = m.setup_for_rebalance(timeout=30.0)

    assert result.expanded == {topics.rep: 4, topics.kv: 4, topics.win: 4}
    assert counts(cluster, topics)[topics.win] == 4
    assert result.task_counts == {0: 4, 1: 4}


def test_over_partitioned_internal_topic_is_reported(cluster: Any, topics: Topics) -> None:
    m = manager(cluster, topics, **{"partition.autoscaling.enabled": True})
    m.setup_for_rebalance(timeout=30.0)
    cluster.create_partitions(topics.rep, 3)
    with pytest.raises(MisconfiguredInternalTopicException, match=f"Internal topic {topics.rep} requires 2"):
        m.setup_for_rebalance(timeout=30.0)
