"""Group membership of a ``KafkaConsumer``: joining, the assignment and the rebalance callbacks,
with librdkafka's group or with the application's assignor; ``GroupMembers``, the registry a
transactional producer finds a partition's member in.

Group members (the main consumer) subscribe with librdkafka's range assignor, which is eager: in a
rebalance every member first has all its partitions revoked (``on_partitions_revoked`` with the
whole assignment: commit now), then gets its full new assignment (``on_partitions_assigned``).
This keeps the port's rule that the new assignment is the old one plus the assigned partitions,
since the old one is empty after revocation. Partitions taken away without an orderly revocation
(session timeout, fencing) go to ``on_partitions_lost``. ``request_rejoin`` subscribes again to
the same topics, which makes librdkafka rejoin the group with fresh metadata; a consumer assigned
by an application's assignor also asks that assignor's leader for a new plan.

Application-wide error codes travel on the group's control topic (see ``kafka_control``) and reach
``on_assignment_error`` inside ``poll``; a rebalance reads them up to the topic's end before it
calls ``on_partitions_assigned``, so a member hears a signal sent before the rebalance first.

A member that subscribes with a ``GroupAssignor`` (a KafkaStreams client) is assigned by it
instead, through ``kafka_assignment``: a second librdkafka consumer holds the group membership and
commits, this one fetches what the assignor's plan gives it, incrementally, so the partitions that
stay keep fetching through every rebalance (cooperative rebalancing, KIP-429). Its waits are
bounded (``assignment_wait_seconds``; see ``kafka_assignment``): a poll raises
``TaskAssignmentException`` once the member has waited for a settled assignment for longer than
twice its ``max.poll.interval.ms`` plus ``PLAN_DEADLINE_S``.

The protocol needs the coordinator's list of the group's members. librdkafka asks for it with
ConsumerGroupDescribe (KIP-848, API 69) when the broker offers that API, and with DescribeGroups
(API 15) only when the broker answers that the group is not a KIP-848 group. A broker that offers
API 69 but answers it for a classic group with no members (Tansu 0.6: state Stable, no members,
the leader's id as assignor) would leave the group without a leader for ever; when the answer
lists no members although this member is in a generation, the member asks with DescribeGroups
(a client that does not ask for the broker's API versions, see ``KafkaCluster``) and, if that
lists it, from then on, with a WARNING naming the broker's gap.

``GroupMembership`` is the membership half of ``KafkaConsumer`` (which it is a base of): it reads
and updates the consumer's assignment, pauses and starting offsets, which the fetching half
(``kafka_consumer``, ``kafka_fetching``) keeps.

Threads: one thread at a time uses a consumer (the port's rule); rebalance callbacks run inside
``poll`` on that thread. ``GroupMembers`` has a lock of its own (a leaf).
"""

from __future__ import annotations

import logging
import struct
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kstreams.cluster.kafka_admin import KafkaAdmin
from kstreams.cluster.kafka_assignment import PlannedAssignment, PlanStep
from kstreams.cluster.kafka_control import ControlChannel
from kstreams.cluster.kafka_errors import cluster_error
from kstreams.cluster.kafka_fetching import ktp as _ktp
from kstreams.cluster.port import (
    ClusterError,
    GroupAssignor,
    GroupListener,
    TopicPartition,
)
from kstreams.errors import ConfigException

if TYPE_CHECKING:
    from kstreams.cluster.kafka_consumer import KafkaConsumer

__all__ = ["PROTOCOL_TIMEOUT_S", "GroupMembers", "GroupMembership", "committed_positions"]

logger = logging.getLogger(__name__)

# How long a call of the assignment protocol on the polling thread waits for the broker.
PROTOCOL_TIMEOUT_S = 5.0
# How long a rebalance waits to read the signals sent before it.
_CATCH_UP_S = 5.0
# librdkafka serialises group metadata as b"CGMDv2:" + generation id (int32, host byte order) + ...
_METADATA_MAGIC = b"CGMDv2:"
_GENERATION = struct.Struct("=i")


class GroupMembers:
    """The live group-member consumers of one cluster object, by group id.

    A transactional producer commits offsets with the group metadata (generation, member id) of
    the consumer that read them, so the broker can fence zombies (KIP-447); the producer finds
    that consumer here. Held weakly: a consumer that is dropped without ``close`` disappears.
    """

    def __init__(self) -> None:
        # Several clients in one process share a cluster object: their polling threads register
        # and look up members concurrently, under this lock (a leaf: nothing is called under it).
        self._lock = threading.Lock()
        self._members: dict[str, weakref.WeakSet[KafkaConsumer]] = {}

    def add(self, group_id: str, consumer: KafkaConsumer) -> None:
        with self._lock:
            self._members.setdefault(group_id, weakref.WeakSet()).add(consumer)

    def remove(self, group_id: str, consumer: KafkaConsumer) -> None:
        with self._lock:
            members = self._members.get(group_id)
            if members is not None:
                members.discard(consumer)

    def owner_of(self, group_id: str, partitions: Sequence[TopicPartition]) -> KafkaConsumer | None:
        """The member of the group that is assigned all these partitions, or else any member."""
        with self._lock:
            members = list(self._members.get(group_id, ()))
        for member in members:
            if member.owns(partitions):
                return member
        return members[0] if members else None


class GroupMembership:
    """The group-membership half of ``KafkaConsumer``: subscribing, the member's identity and
    generation, and the rebalance callbacks of librdkafka's group or of the application's
    assignor. Its state is set in ``KafkaConsumer.__init__``; what it uses of the fetching half
    is declared below."""

    # The consumer's state these methods read and update (set in KafkaConsumer.__init__).
    _consumer: Any
    _native: bool
    _fetcher_factory: Callable[[], Any] | None
    _membership_factory: Callable[[], Consumer] | None
    _membership: Consumer | None
    _assignor: GroupAssignor | None
    _planned: PlannedAssignment | None
    _membership_lost: bool
    _rebalancing: bool
    _classic_members: Callable[[str, float], list[str]] | None
    _classic_describe: bool | None
    _classic_failure: str
    _assignment_give_up_s: float
    _admin: KafkaAdmin
    _group_id: str | None
    _control: ControlChannel | None
    _members: GroupMembers
    _listener: GroupListener | None
    _topics: list[str]
    _assignment: set[TopicPartition]
    _paused: set[TopicPartition]
    _stopped: set[TopicPartition]
    _start: dict[TopicPartition, int]
    _in_rebalance: bool
    _listener_enabled: bool
    _closed: bool
    _generation: int

    if TYPE_CHECKING:  # the fetching half's methods (KafkaConsumer's), declared for the checker only

        def _forget(self, partitions: Sequence[TopicPartition] | set[TopicPartition]) -> None: ...

        def _on_fetch_error(self, where: str, error: Any) -> None: ...

        def _describe(self) -> str: ...

    # Group membership

    def subscribe(
        self, topics: Sequence[str], listener: GroupListener, assignor: GroupAssignor | None = None
    ) -> None:
        if self._group_id is None or self._control is None:
            raise ClusterError(
                "subscribe() needs a consumer created with a group_id: use cluster.consumer(group_id) "
                "for group membership, or assign() for manual assignment"
            )
        if self._assignment and not self._listener:
            raise ClusterError(
                "This consumer has a manual assignment: a consumer either assigns or subscribes"
            )
        self._listener = listener
        self._topics = list(topics)
        # Listen before joining, so no signal sent after we are a member is missed.
        self._control.listen()
        if assignor is not None:
            self._subscribe_planned(assignor)
            return
        self._subscribe()
        self._members.add(self._group_id, cast("KafkaConsumer", self))  # the one subclass
        logger.info("Consumer of group %s subscribed to %s", self._group_id, self._topics)

    def request_rejoin(self) -> None:
        if self._listener is None:
            raise ClusterError("request_rejoin() needs a subscribed consumer: call subscribe() first")
        logger.info("Consumer of group %s asks for a rebalance", self._group_id)
        if self._planned is not None:
            # Also ask the application's assignor's leader for a new plan within the generation:
            # on Apache Kafka a follower's rejoin with an unchanged subscription does not
            # rebalance a stable group (see request_replan).
            self._planned.request_replan()
        # Subscribing again makes librdkafka refresh metadata and rejoin (an eager rebalance).
        if self._membership is not None:
            self._subscribe_membership()
        else:
            self._subscribe()

    def signal_application_error(self, code: int) -> None:
        if self._control is None:
            raise ClusterError(
                "signal_application_error() needs a group member: create the consumer with a group_id"
            )
        self._control.signal_error(code, self.member_id)

    @property
    def member_id(self) -> str:
        client = self._group_client
        if self._closed or client is None:
            return ""
        return client.memberid() or ""

    @property
    def rebalancing(self) -> bool:
        """Whether the group is between generations (commits wait: they would be refused)."""
        return self._rebalancing

    @property
    def assignment_wait_seconds(self) -> float:
        """How long this member has waited for a settled assignment by its assignor (0.0 when it
        has one, or assigns otherwise): the ``assignment-wait-seconds`` metric. Safe from any
        thread."""
        planned = self._planned
        return 0.0 if planned is None else planned.watch.seconds

    @property
    def _group_client(self) -> Consumer | None:
        """The librdkafka consumer that is the group member (None: a compiled fetcher outside any
        group, which has no group state)."""
        if self._membership is not None:
            return self._membership
        return None if self._native else self._consumer

    @property
    def group_generation(self) -> int:
        """The generation of the group this member last joined (-1 before it joined)."""
        client = self._group_client
        if self._closed:
            return -1
        if client is None:
            return self._generation
        try:
            metadata = client.consumer_group_metadata()
        except (KafkaException, RuntimeError):
            return self._generation
        if isinstance(metadata, bytes) and metadata.startswith(_METADATA_MAGIC):
            return _GENERATION.unpack_from(metadata, len(_METADATA_MAGIC))[0]
        # Another librdkafka serialisation: fall back to counting our own assignments.
        return self._generation

    def group_assignment(self) -> dict[str, list[TopicPartition]]:
        """Every member's assignment in the group's current generation, from the group
        coordinator ({} for a consumer outside a group). Asked inside ``on_partitions_assigned``,
        it is the assignment this member just received, with every other member's."""
        if self._group_id is None or self._listener is None or self._closed:
            return {}
        return self._admin.group_assignment(self._group_id)

    @property
    def fences_stale_transactional_commits(self) -> bool:
        # Offsets go to the transaction with group_metadata() (generation and member id).
        return True

    def group_metadata(self) -> object:
        """librdkafka's group metadata of this member, for a transactional producer."""
        client = self._group_client
        if client is None:
            raise ClusterError(f"{self._describe()} is in no group: it has no group metadata")
        return client.consumer_group_metadata()

    # Rebalance callbacks (run by librdkafka inside consume, or close)

    def _subscribe(self) -> None:
        self._listener_enabled = True
        try:
            self._consumer.subscribe(
                self._topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
            )
        except KafkaException as exc:
            raise cluster_error(f"Subscribing group {self._group_id!r} to {self._topics}", exc) from exc

    def _on_assign(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        assigned = sorted(TopicPartition(p.topic, p.partition) for p in partitions)
        self._generation = max(self._generation, 0) + 1
        self._assignment = set(assigned)
        self._in_rebalance = True
        try:
            if self._listener is not None and self._listener_enabled:
                if self._control is not None:
                    # A member that signalled before leaving is heard before its partitions are
                    # processed here, as Kafka Streams hears it in the same rebalance.
                    for code in self._control.catch_up(_CATCH_UP_S):
                        self._listener.on_assignment_error(code)
                logger.info("Group %s: assigned %s", self._group_id, assigned)
                self._listener.on_partitions_assigned(list(assigned))
        finally:
            self._in_rebalance = False
            # Seeks made by the listener become the starting offsets of the assignment.
            start = [_ktp(tp, self._start.get(tp, OFFSET_INVALID)) for tp in assigned]
            consumer.assign(start)
            # So do its pauses: librdkafka starts every newly assigned partition unpaused.
            paused = [tp for tp in assigned if tp in self._paused]
            if paused:
                consumer.pause([_ktp(tp) for tp in paused])
                self._stopped.update(paused)

    def _on_revoke(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        self._end_assignment(consumer, partitions, lost=False)

    def _on_lost(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        self._end_assignment(consumer, partitions, lost=True)

    def _end_assignment(self, consumer: Consumer, partitions: list[KafkaTopicPartition], lost: bool) -> None:
        gone = sorted(TopicPartition(p.topic, p.partition) for p in partitions)
        self._in_rebalance = True
        try:
            if self._listener is not None and self._listener_enabled and gone:
                logger.info("Group %s: %s %s", self._group_id, "lost" if lost else "revoked", gone)
                if lost:
                    self._listener.on_partitions_lost(list(gone))
                else:
                    self._listener.on_partitions_revoked(list(gone))
        finally:
            self._in_rebalance = False
            self._assignment.difference_update(gone)
            self._forget(gone)
            consumer.unassign()

    # Assignment by the application's assignor (see kafka_assignment)

    def _subscribe_planned(self, assignor: GroupAssignor) -> None:
        assert self._membership_factory is not None and self._control is not None
        assert self._group_id is not None
        self._assignor = assignor
        self._membership = self._membership_factory()
        # The membership consumer joins the group; ``_consumer`` only fetches what the plans
        # assign, which the compiled fetcher can do.
        fetcher = self._fetcher_factory() if self._fetcher_factory is not None else None
        if fetcher is not None:
            self._consumer.close()
            self._consumer, self._native = fetcher, True
        group_id, topics, admin = self._group_id, set(self._topics), self._admin
        self._planned = PlannedAssignment(
            group_id,
            assignor,
            self._control,
            members=self._group_members,
            partition_counts=lambda: {t: n for t, n in admin.partition_counts().items() if t in topics},
            give_up_after_s=self._assignment_give_up_s,
            members_note=self._members_source,
        )
        self._subscribe_membership()
        self._members.add(group_id, cast("KafkaConsumer", self))  # the one subclass
        logger.info(
            "Consumer of group %s subscribed to %s (assigned by its assignor)", group_id, self._topics
        )

    def _subscribe_membership(self) -> None:
        assert self._membership is not None
        try:
            self._membership.subscribe(
                self._topics,
                on_assign=self._membership_assigned,
                on_revoke=self._membership_revoked,
                on_lost=self._membership_revoked_lost,
            )
        except KafkaException as exc:
            raise cluster_error(f"Subscribing group {self._group_id!r} to {self._topics}", exc) from exc

    def _membership_assigned(self, consumer: Consumer, _partitions: list[KafkaTopicPartition]) -> None:
        # The membership consumer fetches nothing: the assignor's plan decides what is fetched.
        consumer.assign([])
        self._rebalancing = False
        if self._planned is not None and not self._closed:
            self._planned.joined(self.group_generation, consumer.memberid() or "")
            logger.info("Group %s: joined generation %d", self._group_id, self._planned.generation)

    def _membership_revoked(self, consumer: Consumer, _partitions: list[KafkaTopicPartition]) -> None:
        consumer.unassign()
        self._rebalancing = True
        if self._planned is not None:
            self._planned.rejoining()

    def _group_members(self) -> list[str]:
        """The members of the group's current generation, by the coordinator. Asked on the polling
        thread, so a broker that does not answer stalls it for PROTOCOL_TIMEOUT_S at most."""
        group_id, planned = self._group_id, self._planned
        assert group_id is not None and planned is not None
        if self._classic_describe:
            assert self._classic_members is not None
            return self._classic_members(group_id, PROTOCOL_TIMEOUT_S)
        members = self._admin.group_members(group_id, timeout=PROTOCOL_TIMEOUT_S)
        me = planned.member_id
        # A coordinator lists every member of a generation; no member at all while this one is in
        # a generation is a broker that answers ConsumerGroupDescribe without classic members.
        if members or not me or self._classic_members is None or self._classic_describe is False:
            return members
        try:
            classic = self._classic_members(group_id, PROTOCOL_TIMEOUT_S)
        except (ClusterError, ConfigException) as exc:
            self._classic_describe = False
            self._classic_failure = str(exc)
            logger.warning(
                "Group %s: the broker's ConsumerGroupDescribe (KIP-848, API 69) answer lists no members "
                "although this member (%s) is in generation %d, and DescribeGroups (API 15) could not "
                "be asked: %s. The assignment cannot go on without the group's member list",
                group_id,
                me,
                planned.generation,
                exc,
            )
            return members
        if me not in classic:
            return members  # not in the group after all (expelled): the usual answer stands
        self._classic_describe = True
        logger.warning(
            "Group %s: the broker answers ConsumerGroupDescribe (KIP-848, API 69), which librdkafka "
            "prefers, with no members for this classic group although this member (%s) is in it "
            "(Tansu 0.6 does); its DescribeGroups (API 15) answer lists them, so this member asks "
            "that from now on",
            group_id,
            me,
        )
        return classic

    def _members_source(self) -> str:
        """Where the member list came from, for the warnings of a waiting assignment."""
        if self._classic_describe:
            return "asked with DescribeGroups (API 15): the broker's ConsumerGroupDescribe lists no members"
        if self._classic_describe is False:
            return (
                "the broker's ConsumerGroupDescribe (KIP-848, API 69) answer lists no members and "
                f"DescribeGroups (API 15) could not be asked: {self._classic_failure}"
            )
        return "as the broker answered librdkafka's describe_consumer_groups"

    def _membership_revoked_lost(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        self._membership_revoked(consumer, partitions)
        self._membership_lost = True

    def _run_membership(self) -> bool:
        """Serve the membership consumer's callbacks, then take the next step of the plan; whether
        a step was taken."""
        membership, planned, listener = self._membership, self._planned, self._listener
        assert membership is not None and planned is not None and listener is not None
        try:
            for message in membership.consume(1, 0.0):
                error = message.error()
                if error is not None:
                    self._on_fetch_error(f"the group membership of {self._describe()}", error)
        except KafkaException as exc:
            raise cluster_error(f"Polling the group membership of {self._describe()}", exc) from exc
        if self._membership_lost:
            # Out of the group (session timeout, fenced): what we fetch belongs to others now.
            self._membership_lost = False
            gone = sorted(self._assignment)
            if gone and self._listener_enabled:
                logger.warning("Group %s: lost %s", self._group_id, gone)
                listener.on_partitions_lost(list(gone))
            self._unassign(gone)
        step = planned.step(set(self._assignment))
        if step is None or not self._listener_enabled:
            return False
        self._apply(step)
        return True

    def _apply(self, step: PlanStep) -> None:
        listener, planned = self._listener, self._planned
        assert listener is not None and planned is not None
        if step.userdata is not None and self._assignor is not None:
            self._assignor.on_assignment(step.userdata)
        if step.revoke:
            logger.info("Group %s: revoked %s", self._group_id, step.revoke)
            try:
                listener.on_partitions_revoked(list(step.revoke))
            finally:
                self._unassign(step.revoke)
        if step.acknowledge:
            planned.applied(step.plan_id)
        if not (step.acquire or step.first):
            return
        acquire = sorted(step.acquire)
        self._generation = max(self._generation, 0) + 1
        self._assignment.update(acquire)
        if acquire:
            logger.info("Group %s: assigned %s", self._group_id, acquire)
        self._in_rebalance = True
        try:
            listener.on_partitions_assigned(list(acquire))
        finally:
            self._in_rebalance = False
            if acquire:
                try:
                    self._consumer.incremental_assign(
                        [_ktp(tp, self._start.get(tp, OFFSET_INVALID)) for tp in acquire]
                    )
                except KafkaException as exc:
                    raise cluster_error(f"Assigning {acquire}", exc) from exc
                paused = [tp for tp in acquire if tp in self._paused]
                if paused:
                    self._consumer.pause([_ktp(tp) for tp in paused])
                    self._stopped.update(paused)

    def _unassign(self, partitions: Sequence[TopicPartition]) -> None:
        gone = [tp for tp in partitions if tp in self._assignment]
        if not gone:
            return
        try:
            self._consumer.incremental_unassign([_ktp(tp) for tp in gone])
        except KafkaException as exc:
            raise cluster_error(f"Unassigning {gone}", exc) from exc
        self._assignment.difference_update(gone)
        self._forget(gone)


def committed_positions(
    offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None
) -> list[KafkaTopicPartition]:
    """Offsets to commit as librdkafka takes them, each with its metadata (none: the broker
    stores "")."""
    if not metadata:
        return [_ktp(tp, offset) for tp, offset in offsets.items()]
    return [
        KafkaTopicPartition(tp.topic, tp.partition, offset, metadata=metadata.get(tp, ""))
        for tp, offset in offsets.items()
    ]
