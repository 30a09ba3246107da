"""The assignment protocol of a KafkaCluster member never waits in silence: a member without a
settled assignment warns within a bound naming what it waits for, shows the wait in the
``assignment-wait-seconds`` metric, keeps retrying, and after its bound raises
``TaskAssignmentException``, which reaches the uncaught exception handler. The broker is faked
(a control topic that loops records back or swallows them, a coordinator that lists given
members), so no broker is needed."""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from kstreams.client import KafkaStreams, StreamsUncaughtExceptionResponse
from kstreams.cluster import EmbeddedCluster
from kstreams.cluster.kafka_assignment import (
    ASK_AGAIN_S,
    MEMBERS_RETRY_S,
    PLAN_DEADLINE_S,
    PlannedAssignment,
    assignment_give_up_s,
)
from kstreams.cluster.kafka_consumer import KafkaConsumer
from kstreams.cluster.kafka_membership import GroupMembers
from kstreams.cluster.port import ClusterError, MemberAssignment, TopicPartition
from kstreams.errors import TaskAssignmentException
from kstreams.processor import Processor, Record
from kstreams.runtime.client_state import State
from kstreams.serdes import Serdes
from kstreams.state import Stores
from kstreams.topology.topology import Topology
from tests.support.waiting import wait_until

GROUP = "app"
TOPIC = "app-in"
ME = "b-member"
LEADER = "a-leader"
ASSIGNMENT_LOGGER = "kstreams.cluster.kafka_assignment"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeChannel:
    """A control topic: ``loopback`` hands every published record back, in order (a broker that
    works); otherwise records vanish (a fetch of the control topic that never returns them)."""

    topic = f"{GROUP}-control"

    def __init__(self, loopback: bool) -> None:
        self.loopback = loopback
        self.published: list[dict] = []
        self._inbox: list[dict] = []

    def publish(self, record: dict) -> None:
        self.published.append(record)
        if self.loopback:
            self._inbox.append(dict(record))

    def take_records(self) -> list[dict]:
        records, self._inbox = self._inbox, []
        return records

    def check_soon(self) -> None:
        pass

    def progress(self) -> str:
        return f"read up to offset {len(self.published) if self.loopback else 0}"

    # The consumer's side of the channel (signals of the application).
    def listen(self) -> None:
        pass

    def received_error_codes(self) -> list[int]:
        return []

    def close(self) -> None:
        pass


class EveryPartitionToEachMember:
    """An assignor that gives each member every partition of every topic (one member in these
    tests); its user data is empty."""

    def subscription(self) -> bytes:
        return b""

    def assign(
        self, subscriptions: Mapping[str, bytes], partition_counts: Mapping[str, int]
    ) -> dict[str, MemberAssignment]:
        partitions = tuple(
            TopicPartition(t, p) for t, n in sorted(partition_counts.items()) for p in range(n)
        )
        return {member: MemberAssignment(partitions) for member in subscriptions}

    def on_assignment(self, userdata: bytes) -> None:
        pass


def planned(
    members: Callable[[], list[str]],
    channel: FakeChannel,
    clock: FakeClock,
    give_up_s: float = 40.0,
    warn_s: float = 15.0,
) -> PlannedAssignment:
    return PlannedAssignment(
        GROUP,
        EveryPartitionToEachMember(),
        channel,  # type: ignore[arg-type]
        members=members,
        partition_counts=lambda: {TOPIC: 1},
        give_up_after_s=give_up_s,
        warn_after_s=warn_s,
        clock=clock,
    )


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == ASSIGNMENT_LOGGER and r.levelno == logging.WARNING
    ]


def test_follower_without_a_plan_warns_names_the_leader_and_gives_up(caplog):
    caplog.set_level(logging.INFO, ASSIGNMENT_LOGGER)
    clock = FakeClock()
    protocol = planned(lambda: [LEADER, ME], FakeChannel(loopback=False), clock, give_up_s=40.0)
    protocol.joined(3, ME)
    assert protocol.step(set()) is None
    clock.now += 14.0
    protocol.step(set())
    assert warnings_of(caplog) == []
    assert protocol.watch.seconds == pytest.approx(14.0)

    clock.now += 1.0
    protocol.step(set())
    [warning] = warnings_of(caplog)
    assert "waited 15s for the assignment plan of generation 3 from its leader a-leader" in warning
    assert "app-control" in warning and "retrying (gives up after 40s)" in warning

    clock.now += 25.0
    with pytest.raises(TaskAssignmentException) as failure:
        protocol.step(set())
    assert "no assignment after 40s of waiting for the assignment plan of generation 3" in str(failure.value)
    assert "max.poll.interval.ms" in str(failure.value)


def test_warnings_repeat_while_the_wait_lasts(caplog):
    caplog.set_level(logging.INFO, ASSIGNMENT_LOGGER)
    clock = FakeClock()
    protocol = planned(lambda: [LEADER, ME], FakeChannel(loopback=False), clock, give_up_s=1000.0)
    protocol.joined(1, ME)
    for _ in range(200):  # a poll every second for 200 s
        protocol.step(set())
        clock.now += 1.0
    # At 15 s, then every 60 s.
    assert [w.split(" for ")[0] for w in warnings_of(caplog)] == [
        "Group app: the assignment has waited 15s",
        "Group app: the assignment has waited 75s",
        "Group app: the assignment has waited 135s",
        "Group app: the assignment has waited 195s",
    ]


def test_settled_single_member_ends_the_wait_and_says_so(caplog):
    caplog.set_level(logging.INFO, ASSIGNMENT_LOGGER)
    clock = FakeClock()
    protocol = planned(lambda: [ME], FakeChannel(loopback=True), clock)
    protocol.step(set())  # the first poll after subscribing
    clock.now += 20.0  # a slow join: warned while joining
    protocol.step(set())
    assert "to let this member join the group's next generation" in warnings_of(caplog)[0]
    protocol.joined(0, ME)
    owned: set[TopicPartition] = set()
    for _ in range(5):
        step = protocol.step(owned)
        if step is not None:
            owned = (owned - set(step.revoke)) | set(step.acquire)
            if step.acknowledge:
                protocol.applied(step.plan_id)
    assert owned == {TopicPartition(TOPIC, 0)}
    assert protocol.settled
    assert protocol.watch.seconds == 0.0
    assert any("the assignment is complete after 20.0s" in r.getMessage() for r in caplog.records)


def test_member_missing_from_the_coordinators_list_is_named_and_asked_again_at_a_bounded_rate(caplog):
    caplog.set_level(logging.INFO, ASSIGNMENT_LOGGER)
    clock = FakeClock()
    asked: list[float] = []

    def members() -> list[str]:
        asked.append(clock.now)
        return []  # a broker whose group description lists nobody

    protocol = planned(members, FakeChannel(loopback=True), clock)
    protocol.joined(0, ME)
    for _ in range(100):  # 100 polls within one retry interval
        protocol.step(set())
    assert len(asked) == 1
    clock.now += MEMBERS_RETRY_S
    protocol.step(set())
    assert len(asked) == 2
    clock.now += 15.0
    protocol.step(set())
    assert "to list this member (b-member) among the members of generation 0" in warnings_of(caplog)[0]
    assert "names no members" in warnings_of(caplog)[0]


def test_leader_names_the_members_whose_reports_it_waits_for(caplog):
    caplog.set_level(logging.INFO, ASSIGNMENT_LOGGER)
    clock = FakeClock()
    # Warned before PLAN_DEADLINE_S, after which the leader plans without the silent member.
    protocol = planned(lambda: [ME, "c-silent"], FakeChannel(loopback=True), clock, warn_s=5.0)
    protocol.joined(2, ME)
    protocol.step(set())
    clock.now += 5.0
    protocol.step(set())
    [warning] = warnings_of(caplog)
    assert "waited 5s for the reports of ['c-silent'] for generation 2" in warning
    assert "to plan the assignment as the leader" in warning


def test_cluster_failures_are_named_while_retried(caplog):
    caplog.set_level(logging.INFO, ASSIGNMENT_LOGGER)
    clock = FakeClock()

    def members() -> list[str]:
        raise ClusterError("Describing group 'app' timed out", retriable=True)

    protocol = planned(members, FakeChannel(loopback=True), clock)
    protocol.joined(0, ME)
    protocol.step(set())
    clock.now += 15.0
    protocol.step(set())
    assert (
        "waited 15s for the cluster, whose calls fail: Describing group 'app' timed out"
        in warnings_of(caplog)[-1]
    )


def test_give_up_bound_follows_max_poll_interval():
    assert assignment_give_up_s(300_000) == 600.0 + PLAN_DEADLINE_S
    assert assignment_give_up_s(7_000) == 14.0 + PLAN_DEADLINE_S
    assert ASK_AGAIN_S < PLAN_DEADLINE_S


# -- a KafkaConsumer on a faked broker ---------------------------------------------------------


class FakeMembership:
    """librdkafka's membership consumer: joins the next generation (0 first) at the first poll
    after each subscribe."""

    def __init__(self) -> None:
        self._on_assign: Callable[..., None] | None = None
        self._joined = False
        self.generation = -1

    def subscribe(self, topics: list[str], on_assign: Callable[..., None], **_callbacks: Any) -> None:
        self._on_assign = on_assign
        self._joined = False

    def consume(self, _count: int, _timeout: float) -> list[Any]:
        if not self._joined and self._on_assign is not None:
            self._joined = True
            self.generation += 1
            self._on_assign(self, [])
        return []

    def memberid(self) -> str:
        return ME if self.generation >= 0 else ""

    def consumer_group_metadata(self) -> bytes:
        return b"CGMDv2:" + struct.pack("=i", self.generation) + GROUP.encode()

    def assign(self, _partitions: list[Any]) -> None:
        pass

    def unassign(self) -> None:
        pass

    def close(self) -> None:
        pass


class FakeFetcher:
    """confluent-kafka's Consumer as a fetcher of partitions that hold no records."""

    def __init__(self) -> None:
        self.assigned: list[Any] = []
        self._idle = threading.Event()  # never set: a poll waits out its timeout

    def consume(self, _count: int, timeout: float) -> list[Any]:
        self._idle.wait(timeout)
        return []

    def incremental_assign(self, partitions: list[Any]) -> None:
        self.assigned += partitions

    def incremental_unassign(self, partitions: list[Any]) -> None:
        pass

    def pause(self, _partitions: list[Any]) -> None:
        pass

    def resume(self, _partitions: list[Any]) -> None:
        pass

    def close(self) -> None:
        pass


class Coordinator:
    """The group coordinator's answers: the usual description (``listed``) and DescribeGroups'
    (``classic``: a list, or an exception it raises)."""

    def __init__(self, admin: Any, listed: list[str], classic: list[str] | Exception) -> None:
        self._admin = admin
        self.listed = listed
        self.classic = classic
        self.usual_asked = 0
        self.classic_asked = 0

    def group_members(self, _group_id: str, timeout: float | None = None) -> list[str]:
        self.usual_asked += 1
        return list(self.listed)

    def classic_members(self, _group_id: str, _timeout: float) -> list[str]:
        self.classic_asked += 1
        if isinstance(self.classic, Exception):
            raise self.classic
        return list(self.classic)

    def partition_counts(self) -> dict[str, int]:
        return {name: d.partitions for name, d in self._admin.describe_topics().items()}


def faked_consumer(coordinator: Coordinator, channel: FakeChannel, give_up_s: float = 600.0) -> KafkaConsumer:
    return KafkaConsumer(
        FakeFetcher(),  # type: ignore[arg-type]
        coordinator,  # type: ignore[arg-type]
        group_id=GROUP,
        control=channel,  # type: ignore[arg-type]
        members=GroupMembers(),
        auto_offset_reset="earliest",
        membership=FakeMembership,  # type: ignore[arg-type]
        classic_members=coordinator.classic_members,
        assignment_timeout_s=give_up_s,
    )


def poll_until(consumer: KafkaConsumer, condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        consumer.poll(0.01)


def test_member_asks_describe_groups_when_the_usual_description_lists_no_members(
    embedded_cluster, listener, caplog
):
    # Tansu 0.6 answers librdkafka's ConsumerGroupDescribe with no members; DescribeGroups lists them.
    caplog.set_level(logging.INFO, "kstreams.cluster")
    embedded_cluster.create_topic(TOPIC, partitions=1)
    coordinator = Coordinator(embedded_cluster.admin(), listed=[], classic=[ME])
    consumer = faked_consumer(coordinator, FakeChannel(loopback=True))
    recording = listener()
    consumer.subscribe([TOPIC], recording, EveryPartitionToEachMember())
    try:
        poll_until(consumer, lambda: recording.owned == {TopicPartition(TOPIC, 0)})
        assert consumer.assignment_wait_seconds == 0.0
        [fallback] = [r.getMessage() for r in caplog.records if "ConsumerGroupDescribe" in r.getMessage()]
        assert "with no members for this classic group" in fallback and "Tansu 0.6" in fallback
        # From then on only DescribeGroups is asked, in the next generation too.
        usual, classic = coordinator.usual_asked, coordinator.classic_asked
        consumer.request_rejoin()
        poll_until(consumer, lambda: coordinator.classic_asked > classic)
        assert consumer.group_generation == 1
        assert coordinator.usual_asked == usual
    finally:
        consumer.close()


def test_member_says_which_describe_failed_when_neither_lists_it(embedded_cluster, listener, caplog):
    caplog.set_level(logging.INFO, "kstreams.cluster")
    embedded_cluster.create_topic(TOPIC, partitions=1)
    refused = ClusterError("Describing group 'app' failed: disconnected")
    consumer = faked_consumer(
        Coordinator(embedded_cluster.admin(), listed=[], classic=refused), FakeChannel(True)
    )
    consumer.subscribe([TOPIC], listener(), EveryPartitionToEachMember())
    try:
        poll_until(consumer, lambda: any("could not be asked" in r.getMessage() for r in caplog.records))
        assert consumer.assignment_wait_seconds > 0.0
        assert consumer._planned is not None
        assert "DescribeGroups (API 15) could not be asked: Describing group 'app' failed" in str(
            consumer._planned.watch.waiting_for
        )
    finally:
        consumer.close()


# -- KafkaStreams on a faked broker: warning, metric, uncaught exception handler -------------------


class StalledCoordinatorCluster:
    """An EmbeddedCluster whose group members are KafkaConsumers on a faked broker whose
    coordinator never lists them (Tansu without DescribeGroups), assigned within ``give_up_s``."""

    def __init__(self, give_up_s: float) -> None:
        self._embedded = EmbeddedCluster()
        self._give_up_s = give_up_s

    def consumer(self, group_id: str | None, config: Mapping[str, object] | None = None) -> Any:
        if group_id is None:
            return self._embedded.consumer(None, config)
        refused = ClusterError("DescribeGroups is not offered")
        coordinator = Coordinator(self._embedded.admin(), listed=[], classic=refused)
        return faked_consumer(coordinator, FakeChannel(loopback=True), self._give_up_s)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedded, name)


class CountPerKey(Processor):
    def init(self, context):  # type: ignore[no-untyped-def]
        self.context = context
        self.store = context.get_state_store("counts")

    def process(self, record: Record) -> None:
        self.store.put(record.key, (self.store.get(record.key) or 0) + 1)


def count_topology() -> Topology:
    strings = Serdes.string()
    topology = Topology()
    topology.add_source("src", TOPIC, key_deserializer=strings, value_deserializer=strings)
    topology.add_processor("count", CountPerKey, "src")
    topology.add_state_store(
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("counts"), strings, Serdes.long()),
        "count",
    )
    return topology


# How long a test waits for what other threads do, unless it gives a timeout of its own.
WAIT_S = 10.0


def test_stalled_assignment_warns_shows_its_wait_and_reaches_the_uncaught_exception_handler(tmp_path, caplog):
    caplog.set_level(logging.INFO, "kstreams")
    cluster = StalledCoordinatorCluster(give_up_s=1.0)  # warns after 0.5 s
    cluster.create_topic(TOPIC, partitions=1)
    streams = KafkaStreams(
        count_topology(), {"application.id": GROUP, "state.dir": str(tmp_path)}, cluster=cluster
    )
    failures: list[BaseException] = []

    def handler(exc: BaseException) -> StreamsUncaughtExceptionResponse:
        failures.append(exc)
        return StreamsUncaughtExceptionResponse.SHUTDOWN_CLIENT

    streams.set_uncaught_exception_handler(handler)

    def wait_metric() -> float:
        [value] = [
            v
            for m, v in streams.metrics().items()
            if m.name == "assignment-wait-seconds" and m.group == "consumer-coordinator-metrics"
        ]
        return value

    streams.start()
    try:
        wait_until(lambda: wait_metric() > 0.1, WAIT_S, "the wait in assignment-wait-seconds")
        wait_until(lambda: bool(warnings_of(caplog)), WAIT_S, "the assignment's warning")
        assert "to list this member (b-member)" in warnings_of(caplog)[0]
        wait_until(lambda: bool(failures), WAIT_S, "the uncaught exception handler")
        [failure] = failures
        assert isinstance(failure, TaskAssignmentException)
        assert "no assignment after 1s of waiting for the group coordinator to list this member" in str(
            failure
        )
        assert "DescribeGroups is not offered" in str(failure)
        assert streams.wait_for_state(State.ERROR, timeout=10)
    finally:
        streams.close(timeout=10)
