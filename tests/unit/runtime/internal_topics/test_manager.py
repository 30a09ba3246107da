"""The internal topic manager on the embedded cluster: set-up at rebalances (automatic and manual),
init() and its order of checks (KIP-698), and partition autoscaling (KIP-878)."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams.cluster import ClusterError, EmbeddedCluster, TopicExistsError
from kstreams.config import StreamsConfig
from kstreams.errors import (
    InternalTopicsAlreadySetupException,
    MisconfiguredInternalTopicException,
    MissingInternalTopicsException,
    MissingSourceTopicException,
    StreamsException,
)
from kstreams.init_parameters import InitParameters
from kstreams.metrics import MetricName, MetricsRegistry
from kstreams.processor import Processor, ProcessorContext, Record
from kstreams.runtime.internal_topics.manager import InternalTopicManager
from kstreams.state.in_memory import InMemoryKeyValueStore, InMemoryWindowStore
from kstreams.state.store import StoreBuilder
from kstreams.topology.plan import InternalTopicSpec, SubtopologyPlan, TopologyPlan
from kstreams.topology.topology import Topology

APP = "app"
REP = "app-agg-repartition"
KV = "app-kv-changelog"
WIN = "app-win-changelog"
CONTROL = "app-control"


def two_stage_plan() -> TopologyPlan:
    """in -> [0: store kv] -> REP -> [1: windowed store win]."""
    subs = (
        SubtopologyPlan(0, ("in",), (), (REP,), (REP,), ("kv",), {"kv": KV}),
        SubtopologyPlan(1, (REP,), (REP,), (), (), ("win",), {"win": WIN}),
    )
    specs = {
        REP: InternalTopicSpec(REP, "repartition", 1),
        KV: InternalTopicSpec(KV, "changelog", 0, store="kv"),
        WIN: InternalTopicSpec(WIN, "changelog", 1, store="win", windowed=True, retention_ms=1000),
    }
    return TopologyPlan(APP, subs, specs, ())


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def manager(
    cluster: EmbeddedCluster, clock: FakeClock | None = None, /, **config: Any
) -> InternalTopicManager:
    props = {"application.id": APP, **config}
    return InternalTopicManager(
        cluster.admin(),
        StreamsConfig(props),
        two_stage_plan(),
        clock or FakeClock(),
        retry_backoff_s=0.01,
    )


@pytest.fixture
def cluster(embedded_cluster: EmbeddedCluster) -> EmbeddedCluster:
    embedded_cluster.create_topic("in", partitions=2)
    return embedded_cluster


def partitions(cluster: EmbeddedCluster) -> dict[str, int]:
    return {name: d.partitions for name, d in cluster.topics().items()}


# -- automatic set-up at rebalance ------------------------------------------------------------------


def test_rebalance_creates_internal_topics_with_required_counts_and_configs(cluster: EmbeddedCluster) -> None:
    result = manager(cluster).setup_for_rebalance()

    assert result.created == {REP: 2, KV: 2, WIN: 2, CONTROL: 1}
    assert result.task_counts == result.expected_task_counts == {0: 2, 1: 2}
    assert result.partition_counts == {"in": 2, REP: 2, KV: 2, WIN: 2}
    assert not result.followup_rebalance
    topics = cluster.topics()
    assert topics[REP].config["cleanup.policy"] == "delete"
    assert topics[REP].config["retention.ms"] == "-1"
    assert topics[KV].config["cleanup.policy"] == "compact"
    assert topics[WIN].config["cleanup.policy"] == "compact,delete"
    assert topics[WIN].config["retention.ms"] == str(1000 + 86400000)
    assert topics[CONTROL].partitions == 1 and topics[CONTROL].config["cleanup.policy"] == "delete"


def test_topic_configs_apply_under_the_topologys_own_configs(cluster: EmbeddedCluster) -> None:
    manager(
        cluster, **{"topic.min.insync.replicas": "2", "topic.segment.bytes": "1000"}
    ).setup_for_rebalance()
    assert cluster.topics()[KV].config["min.insync.replicas"] == "2"
    assert cluster.topics()[REP].config["segment.bytes"] == "1000"


def test_automatic_mode_recreates_a_deleted_internal_topic(cluster: EmbeddedCluster) -> None:
    m = manager(cluster)
    m.setup_for_rebalance()
    cluster.delete_topic(KV)
    assert m.setup_for_rebalance().created == {KV: 2}
    assert cluster.topics()[KV].config["cleanup.policy"] == "compact"


def test_automatic_mode_rectifies_a_broker_default_and_logs_an_explicit_misconfiguration(
    cluster: EmbeddedCluster, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.create_topic(KV, partitions=2)  # no cleanup.policy: the broker default "delete"
    cluster.create_topic(REP, partitions=2, config={"cleanup.policy": "compact"})
    result = manager(cluster).setup_for_rebalance()

    assert result.rectified == {KV: {"cleanup.policy": "compact"}}
    assert cluster.topics()[KV].config["cleanup.policy"] == "compact"
    assert cluster.topics()[REP].config["cleanup.policy"] == "compact"  # set by someone: left alone
    (left,) = result.misconfigurations
    assert f'internal topic {REP} should not contain "compact"' in left
    assert any(left in r.getMessage() for r in caplog.records)


def test_wrong_partition_count_fails_the_rebalance_in_automatic_mode(cluster: EmbeddedCluster) -> None:
    cluster.create_topic(KV, partitions=3, config={"cleanup.policy": "compact"})
    with pytest.raises(MisconfiguredInternalTopicException) as info:
        manager(cluster).setup_for_rebalance()
    assert f"Internal topic {KV} requires 2 partitions, but the existing topic on the broker has 3" in str(
        info.value
    )


def test_missing_source_topic_fails_the_rebalance_naming_it(embedded_cluster: EmbeddedCluster) -> None:
    with pytest.raises(MissingSourceTopicException, match=r"\['in'\]"):
        manager(embedded_cluster).setup_for_rebalance()
    assert REP not in embedded_cluster.topics()


# -- manual set-up at rebalance ---------------------------------------------------------------------


def test_manual_mode_never_creates_and_names_the_missing_topics(cluster: EmbeddedCluster) -> None:
    m = manager(cluster, **{"internal.topics.setup": "manual"})
    with pytest.raises(MissingInternalTopicsException) as info:
        m.setup_for_rebalance()
    assert info.value.topics == [REP, KV, WIN]
    assert set(cluster.topics()) == {"in"}


def test_manual_mode_runs_once_init_created_the_topics(cluster: EmbeddedCluster) -> None:
    m = manager(cluster, **{"internal.topics.setup": "manual"})
    m.init()
    result = m.setup_for_rebalance()
    assert result.created == {}
    assert result.task_counts == {0: 2, 1: 2}


def test_manual_mode_reports_a_deleted_topic_instead_of_recreating_it(cluster: EmbeddedCluster) -> None:
    m = manager(cluster, **{"internal.topics.setup": "manual"})
    m.init()
    cluster.delete_topic(WIN)
    with pytest.raises(MissingInternalTopicsException) as info:
        m.setup_for_rebalance()
    assert info.value.topics == [WIN]
    assert WIN not in cluster.topics()


def test_manual_mode_fails_on_a_misconfigured_config(cluster: EmbeddedCluster) -> None:
    m = manager(cluster, **{"internal.topics.setup": "manual"})
    m.init()
    cluster.admin().alter_topic_config(WIN, {"retention.ms": "10"})
    with pytest.raises(
        MisconfiguredInternalTopicException, match=f"internal topic {WIN} is 10 but should be"
    ):
        m.setup_for_rebalance()


# -- init() -----------------------------------------------------------------------------------------


def test_init_creates_every_internal_topic_when_none_exists(cluster: EmbeddedCluster) -> None:
    created = manager(cluster).init()
    assert created == {REP: 2, KV: 2, WIN: 2, CONTROL: 1}
    assert partitions(cluster) == {"in": 2, REP: 2, KV: 2, WIN: 2, CONTROL: 1}


def test_init_refuses_when_all_internal_topics_exist(cluster: EmbeddedCluster) -> None:
    m = manager(cluster)
    m.init()
    with pytest.raises(InternalTopicsAlreadySetupException, match="already exist"):
        m.init()


def test_init_on_incomplete_setup_names_missing_topics_unless_asked_to_create_them(
    cluster: EmbeddedCluster,
) -> None:
    m = manager(cluster)
    m.init()
    cluster.delete_topic(REP)
    cluster.delete_topic(KV)
    with pytest.raises(MissingInternalTopicsException) as info:
        m.init(InitParameters.init_parameters())
    assert info.value.topics == [REP, KV]
    assert REP not in cluster.topics()

    params = InitParameters.init_parameters().enable_setup_internal_topics_if_incomplete()
    assert m.init(params) == {REP: 2, KV: 2}
    assert partitions(cluster)[KV] == 2


def test_init_reports_a_missing_source_topic_after_misconfigurations(
    embedded_cluster: EmbeddedCluster,
) -> None:
    m = manager(embedded_cluster)
    with pytest.raises(MissingSourceTopicException, match="in"):
        m.init()
    assert set(embedded_cluster.topics()) == set()

    # A misconfigured topic is reported first, even while a source topic is missing.
    embedded_cluster.create_topic(KV, partitions=1, config={"cleanup.policy": "delete"})
    with pytest.raises(MisconfiguredInternalTopicException, match=f'{KV} should not contain "delete"'):
        m.init()


def test_init_reports_misconfiguration_before_anything_else(cluster: EmbeddedCluster) -> None:
    cluster.create_topic(REP, partitions=5, config={"cleanup.policy": "delete", "retention.ms": "-1"})
    with pytest.raises(MisconfiguredInternalTopicException) as info:
        manager(cluster).init()
    assert f"Internal topic {REP} requires 2 partitions, but the existing topic on the broker has 5" in str(
        info.value
    )
    assert "cannot be removed" in str(info.value)
    assert KV not in cluster.topics()


def test_init_retries_retriable_failures(cluster: EmbeddedCluster) -> None:
    cluster.fail_next("describe_topics", times=2)
    cluster.fail_next("create_topics", times=2)
    assert set(manager(cluster).init()) == {REP, KV, WIN, CONTROL}


def test_init_times_out_when_the_cluster_keeps_failing(cluster: EmbeddedCluster) -> None:
    cluster.fail_next("create_topics", times=10000)
    with pytest.raises(TimeoutError, match="in the allotted time"):
        manager(cluster).init(timeout=0.2)


def test_non_retriable_failure_is_a_streams_exception(cluster: EmbeddedCluster) -> None:
    cluster.fail_next("create_topics", error=ClusterError("not authorized", retriable=False))
    with pytest.raises(StreamsException, match="not authorized"):
        manager(cluster).init()


def test_a_topic_created_concurrently_counts_as_created(cluster: EmbeddedCluster) -> None:
    cluster.fail_next("create_topics", error=TopicExistsError(f"Topic {KV!r} already exists"))
    result = manager(cluster).setup_for_rebalance()
    assert set(result.created) == {REP, KV, WIN, CONTROL}
    assert partitions(cluster)[WIN] == 2


# -- partition autoscaling --------------------------------------------------------------------------


def grown(cluster: EmbeddedCluster, m: InternalTopicManager) -> None:
    """Set the topics up for 2 source partitions, then grow the source topic to 4."""
    m.setup_for_rebalance()
    cluster.create_partitions("in", 4)


def test_grown_source_topic_fails_clearly_without_autoscaling(cluster: EmbeddedCluster) -> None:
    m = manager(cluster)
    grown(cluster, m)
    with pytest.raises(MisconfiguredInternalTopicException) as info:
        m.setup_for_rebalance()
    message = str(info.value)
    assert (
        f"Internal topic {REP} requires 4 partitions, but the existing topic on the broker has 2" in message
    )
    assert "partition.autoscaling.enabled" in message


def test_autoscaling_expands_repartition_and_changelog_topics(cluster: EmbeddedCluster) -> None:
    m = manager(cluster, **{"partition.autoscaling.enabled": True})
    grown(cluster, m)
    assert m.current_parallelism(0) == 2

    result = m.setup_for_rebalance()
    assert result.expanded == {REP: 4, KV: 4, WIN: 4}
    assert result.followup_rebalance and result.followup_delay_s > 0
    assert partitions(cluster) == {"in": 4, REP: 4, KV: 4, WIN: 4, CONTROL: 1}
    assert result.task_counts == {0: 4, 1: 4}
    assert m.current_parallelism(1) == m.expected_parallelism(1) == 4

    settled = m.setup_for_rebalance()
    assert settled.expanded == {} and not settled.followup_rebalance


def test_over_partitioned_internal_topic_is_an_error_even_with_autoscaling(cluster: EmbeddedCluster) -> None:
    m = manager(cluster, **{"partition.autoscaling.enabled": True})
    m.setup_for_rebalance()
    cluster.create_partitions(KV, 3)
    with pytest.raises(
        MisconfiguredInternalTopicException, match=f"Internal topic {KV} requires 2 partitions"
    ):
        m.setup_for_rebalance()
    assert partitions(cluster)[KV] == 3


def test_failed_expansion_asks_for_a_followup_and_a_later_success_expands(cluster: EmbeddedCluster) -> None:
    m = manager(cluster, **{"partition.autoscaling.enabled": True})
    grown(cluster, m)
    cluster.fail_next("create_partitions")

    failed = m.setup_for_rebalance()
    assert failed.followup_rebalance and failed.expanded == {}
    assert failed.task_counts == {0: 2, 1: 2}  # only as many tasks as the short topics allow
    assert failed.expected_task_counts == {0: 4, 1: 4}
    assert (m.current_parallelism(0), m.expected_parallelism(0)) == (2, 4)

    retried = m.setup_for_rebalance()
    assert retried.expanded == {REP: 4, KV: 4, WIN: 4}
    assert m.autoscaling_failures == 0


def test_expansion_failing_past_the_timeout_is_counted_and_processing_continues(
    cluster: EmbeddedCluster,
) -> None:
    clock = FakeClock()
    m = manager(
        cluster, clock, **{"partition.autoscaling.enabled": True, "partition.autoscaling.timeout.ms": 1000}
    )
    grown(cluster, m)
    cluster.fail_next("create_partitions", times=100)

    assert m.setup_for_rebalance().followup_rebalance  # the timer starts at this first failure
    clock.now = 0.9
    assert m.setup_for_rebalance().followup_rebalance
    assert m.autoscaling_failures == 0
    clock.now = 1.0
    result = m.setup_for_rebalance()
    assert m.autoscaling_failures == 1
    assert not result.followup_rebalance
    assert result.task_counts == {0: 2, 1: 2}
    assert partitions(cluster)[REP] == 2


def test_any_success_resets_the_autoscaling_timer(cluster: EmbeddedCluster) -> None:
    clock = FakeClock()
    m = manager(
        cluster, clock, **{"partition.autoscaling.enabled": True, "partition.autoscaling.timeout.ms": 1000}
    )
    grown(cluster, m)
    cluster.fail_next("create_partitions")
    m.setup_for_rebalance()  # fails at t=0
    clock.now = 0.5
    assert m.setup_for_rebalance().expanded  # success at t=0.5 resets the timer

    cluster.create_partitions("in", 6)
    cluster.fail_next("create_partitions", times=100)
    clock.now = 1.2
    m.setup_for_rebalance()  # the timer starts again here
    clock.now = 2.1
    assert m.setup_for_rebalance().followup_rebalance
    assert m.autoscaling_failures == 0


def test_partial_growth_counts_as_progress(cluster: EmbeddedCluster) -> None:
    clock = FakeClock()
    m = manager(
        cluster, clock, **{"partition.autoscaling.enabled": True, "partition.autoscaling.timeout.ms": 1000}
    )
    grown(cluster, m)
    cluster.fail_next("create_partitions", times=100)
    m.setup_for_rebalance()  # fails at t=0
    cluster.create_partitions(KV, 4)  # some topic grew (as after a non-atomic request)
    clock.now = 1.5
    result = m.setup_for_rebalance()
    assert result.followup_rebalance
    assert m.autoscaling_failures == 0


def test_metrics_report_parallelism_and_failures() -> None:
    cluster = EmbeddedCluster()
    try:
        cluster.create_topic("in", partitions=2)
        m = manager(cluster, **{"partition.autoscaling.enabled": True})
        registry = MetricsRegistry()
        m.register_metrics(registry, {"client-id": "c1"})
        grown(cluster, m)
        m.setup_for_rebalance()
        values = registry.snapshot()
        tags = {"client-id": "c1", "subtopology-id": "1"}
        assert values[MetricName("current-subtopology-parallelism", "stream-subtopology-metrics", tags)] == 4
        assert values[MetricName("expected-subtopology-parallelism", "stream-subtopology-metrics", tags)] == 4
        failures = MetricName("num-autoscaling-failures", "stream-client-metrics", {"client-id": "c1"})
        assert values[failures] == 0
    finally:
        cluster.close()


def test_control_topic_is_created_once(cluster: EmbeddedCluster) -> None:
    m = manager(cluster)
    assert m.control_topic == CONTROL
    assert m.ensure_control_topic()
    assert not m.ensure_control_topic()
    assert partitions(cluster)[CONTROL] == 1


# -- with a topology built by the Topology (PAPI) builder ------------------------------------------


class Forward(Processor[Any, Any, Any, Any]):
    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context

    def process(self, record: Record[Any, Any]) -> None:
        self.context.forward(record)


class KeyValueBuilder(StoreBuilder):
    store_type = "keyvalue"  # type: ignore[assignment]

    def build(self) -> InMemoryKeyValueStore:
        return InMemoryKeyValueStore(self.name)


class WindowBuilder(StoreBuilder):
    store_type = "window"  # type: ignore[assignment]
    retention_ms = 5000  # type: ignore[assignment]

    def build(self) -> InMemoryWindowStore:
        return InMemoryWindowStore(self.name, 5000, 1000, False)


def test_internal_topics_of_a_built_topology(embedded_cluster: EmbeddedCluster, app_id: str) -> None:
    topology = (
        Topology()
        .add_internal_topic("by-key-repartition")
        .add_source("src", "orders")
        .add_processor("rekey", Forward, "src")
        .add_state_store(KeyValueBuilder("seen"), "rekey")
        .add_sink("to-rep", "by-key-repartition", "rekey")
        .add_source("rep-src", "by-key-repartition")
        .add_processor("window", Forward, "rep-src")
        .add_state_store(WindowBuilder("windows"), "window")
    )
    embedded_cluster.create_topic("orders", partitions=3)
    config = StreamsConfig({"application.id": app_id})
    m = InternalTopicManager(embedded_cluster.admin(), config, topology.build(app_id))

    created = m.init()

    assert created == {
        f"{app_id}-by-key-repartition": 3,
        f"{app_id}-seen-changelog": 3,
        f"{app_id}-windows-changelog": 3,
        f"{app_id}-control": 1,
    }
    windows = embedded_cluster.topics()[f"{app_id}-windows-changelog"]
    assert windows.config["retention.ms"] == str(5000 + 86400000)
    assert m.setup_for_rebalance().task_counts == {0: 3, 1: 3}


def test_failed_rectification_is_logged_not_raised(cluster: EmbeddedCluster) -> None:
    cluster.create_topic(KV, partitions=2)  # broker default cleanup.policy=delete
    cluster.fail_next("alter_topic_config", error=ClusterError("policy violation", retriable=False))
    result = manager(cluster).setup_for_rebalance()
    assert result.rectified == {}
    assert any(f'{KV} should not contain "delete"' in m for m in result.misconfigurations)


def test_init_with_autoscaling_leaves_a_short_topic_to_the_next_rebalance(cluster: EmbeddedCluster) -> None:
    m = manager(cluster, **{"partition.autoscaling.enabled": True})
    m.init()
    cluster.create_partitions("in", 4)
    cluster.delete_topic(KV)
    params = InitParameters.init_parameters().enable_setup_internal_topics_if_incomplete()
    assert m.init(params) == {KV: 4}
    assert (m.current_parallelism(1), m.expected_parallelism(1)) == (2, 4)
    assert m.setup_for_rebalance().expanded == {REP: 4, WIN: 4}
