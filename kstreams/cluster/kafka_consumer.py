"""The ``Consumer`` of a ``KafkaCluster``: librdkafka consumers behind the port (confluent-kafka's
for group membership; kstreams' compiled ``KafkaFetcher`` for fetching what the consumer assigns
itself, where it can be used, see ``kafka_native``).

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

Manually assigned consumers (the restore consumer) use incremental assignment, so partitions that
stay assigned keep their positions when the assignment changes.

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

``poll`` hands out one RecordBatch per partition (per run of its records), built by the fetcher
or with ``RecordBatch.from_columns`` from the messages confluent-kafka returns; records of paused
partitions or of partitions with a pending seek
are never handed out. A pause holds the partition's fetched records here until the resume (librdkafka
would drop and refetch them); librdkafka pauses the partition too once queued.max.messages.kbytes
are held.

Threads: one thread at a time uses a consumer (the port's rule); rebalance callbacks run inside
``poll`` on that thread.
"""

from __future__ import annotations

import logging
import struct
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from itertools import compress
from operator import itemgetter
from typing import Any, cast

import numpy as np
from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kstreams._native.record_batch import RecordBatch
from kstreams.cluster.kafka_admin import KafkaAdmin
from kstreams.cluster.kafka_assignment import PlannedAssignment, PlanStep, assignment_give_up_s
from kstreams.cluster.kafka_control import ControlChannel
from kstreams.cluster.kafka_errors import cluster_error, kafka_error_of
from kstreams.cluster.port import (
    ClusterError,
    CommitFailedError,
    GroupAssignor,
    GroupListener,
    TopicPartition,
)
from kstreams.errors import ConfigException

__all__ = ["DEFAULT_HOLD_BYTES", "GroupMembers", "KafkaConsumer", "message_partition"]

logger = logging.getLogger(__name__)

# librdkafka's default queued.max.messages.kbytes, in bytes: how much a consumer holds of paused
# partitions' records unless that setting says otherwise.
DEFAULT_HOLD_BYTES = 65_536 * 1024
# How long a call of the assignment protocol on the polling thread waits for the broker.
PROTOCOL_TIMEOUT_S = 5.0
# How long a rebalance waits to read the signals sent before it.
_CATCH_UP_S = 5.0
# Longest wait of a poll while the group's assignment protocol is under way: each of its steps
# (join seen, report read back, plan published and read, acknowledged) runs once per poll, so a
# whole poll.ms per step made a rebalance last a second where its messages take milliseconds.
REBALANCE_POLL_S = 0.01
# librdkafka serialises group metadata as b"CGMDv2:" + generation id (int32, host byte order) + ...
_METADATA_MAGIC = b"CGMDv2:"
_GENERATION = struct.Struct("=i")
# Errors librdkafka reports in poll and keeps retrying, but that no retry can cure: a Kafka
# consumer raises them from poll.
_UNRECOVERABLE = frozenset(
    {
        KafkaError._AUTO_OFFSET_RESET,
        KafkaError.INCONSISTENT_GROUP_PROTOCOL,
        KafkaError.INVALID_GROUP_ID,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError._AUTHENTICATION,
    }
)
# Message's accessors, unbound: mapped over a consume call's list in C, with no Python frame per
# message.
_error_of: Any = Message.error
_topic_of: Any = Message.topic
_partition_of: Any = Message.partition
_key_of: Any = Message.key
_value_of: Any = Message.value
_timestamp_of: Any = Message.timestamp
_offset_of: Any = Message.offset
_headers_of: Any = Message.headers
_second = itemgetter(1)
# Commit errors that mean the group no longer counts this consumer as a member of its generation.
_NOT_A_MEMBER = frozenset(
    {
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.FENCED_INSTANCE_ID,
    }
)


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


def _runs(messages: list[Message]) -> dict[tuple[str, int], list[Message]]:
    """The messages of one poll by (topic, partition), in order. librdkafka hands out a fetch's
    messages partition by partition, so the list is a few long runs: their boundaries are found
    with numpy, not with a Python step per message."""
    count = len(messages)
    topics = list(map(_topic_of, messages))
    partitions = list(map(_partition_of, messages))
    one_topic = topics.count(topics[0]) == count
    if one_topic and partitions.count(partitions[0]) == count:
        return {(topics[0], partitions[0]): messages}
    keys = np.array(partitions, dtype=np.int64)
    if not one_topic:
        ids = {topic: i for i, topic in enumerate(dict.fromkeys(topics))}
        keys += np.array(list(map(ids.__getitem__, topics)), dtype=np.int64) << 32
    starts = [0, *(np.flatnonzero(keys[1:] != keys[:-1]) + 1).tolist()]
    runs: dict[tuple[str, int], list[Message]] = {}
    for start, stop in zip(starts, [*starts[1:], count], strict=True):
        key = (topics[start], partitions[start])
        run = runs.get(key)
        if run is None:
            runs[key] = messages[start:stop]
        else:
            run.extend(messages[start:stop])
    return runs


class KafkaConsumer:
    """A ``Consumer`` over one confluent-kafka Consumer.

    ``group_id`` is the group it joins on ``subscribe`` (None for a manually assigned consumer);
    ``control`` is the group's control channel (group members only); ``members`` the cluster's
    registry of group members. ``classic_members(group_id, timeout)`` lists a group's members with
    DescribeGroups, for brokers whose ConsumerGroupDescribe answer lists none (see the module
    docstring; None: never asked). ``assignment_timeout_s`` bounds the wait for an assignment by
    the assignor (``assignment_give_up_s`` of the membership consumer's max.poll.interval.ms).
    """

    def __init__(
        self,
        consumer: Consumer,
        admin: KafkaAdmin,
        *,
        group_id: str | None,
        control: ControlChannel | None,
        members: GroupMembers,
        auto_offset_reset: str,
        timeout: float = 30.0,
        hold_bytes: int = DEFAULT_HOLD_BYTES,
        membership: Callable[[], Consumer] | None = None,
        fetcher: Callable[[], Any] | None = None,
        classic_members: Callable[[str, float], list[str]] | None = None,
        assignment_timeout_s: float = assignment_give_up_s(300_000),
    ) -> None:
        # confluent-kafka's Consumer, or kstreams' compiled KafkaFetcher (same method names) when
        # this consumer only fetches what it assigns (see kafka_native).
        self._consumer: Any = consumer
        self._native = hasattr(consumer, "consume_batches")
        # The factory of a compiled fetcher that replaces ``consumer`` when a group member lets
        # its assignor decide its partitions (None: keep ``consumer``).
        self._fetcher_factory = fetcher
        # With an assignor: the factory of the membership consumer, the consumer, the protocol.
        self._membership_factory = membership
        self._membership: Consumer | None = None
        self._assignor: GroupAssignor | None = None
        self._planned: PlannedAssignment | None = None
        self._membership_lost = False
        self._rebalancing = False
        self._classic_members = classic_members
        # Whether the group's members are asked with DescribeGroups: None until the usual answer
        # lacked this member, then True (it lists them) or False (it could not be asked: why).
        self._classic_describe: bool | None = None
        self._classic_failure = ""
        self._assignment_give_up_s = assignment_timeout_s
        self._admin = admin
        self._group_id = group_id
        self._control = control
        self._members = members
        self._auto_offset_reset = auto_offset_reset
        self._timeout = timeout
        self._listener: GroupListener | None = None
        self._topics: list[str] = []
        self._assignment: set[TopicPartition] = set()
        # Paused as the runtime sees it. librdkafka drops what it fetched for a partition it
        # pauses and fetches it again on resume, so a pause only holds the partition's records
        # back here (``_held``); librdkafka pauses it too (``_stopped``) once ``hold_bytes`` are
        # held, as much as librdkafka's own queue of fetched records holds.
        self._paused: set[TopicPartition] = set()
        self._held: dict[TopicPartition, list[RecordBatch]] = {}
        self._held_bytes = 0
        self._stopped: set[TopicPartition] = set()
        self._hold_bytes = hold_bytes
        # Offsets set by seek or assignment that librdkafka has not taken up yet (its position is
        # unknown until it fetches), by partition.
        self._start: dict[TopicPartition, int] = {}
        # Seeks librdkafka refused because the partition was not fetching yet; retried each poll.
        self._pending_seeks: dict[TopicPartition, int] = {}
        self._in_rebalance = False
        # False while closing: librdkafka's final revocation is not passed to the listener.
        self._listener_enabled = True
        self._closed = False
        # Assignments counted, for a librdkafka whose group metadata this adapter cannot read.
        self._generation = -1

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
        self._members.add(self._group_id, self)
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

    # Assignment

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        if self._listener is not None:
            raise ClusterError("This consumer subscribed to a group: a consumer either assigns or subscribes")
        new = set(partitions)
        removed = self._assignment - new
        added = new - self._assignment
        try:
            if removed:
                self._consumer.incremental_unassign([_ktp(tp) for tp in removed])
            if added:
                self._consumer.incremental_assign(
                    [_ktp(tp, self._start.get(tp, OFFSET_INVALID)) for tp in added]
                )
        except KafkaException as exc:
            raise cluster_error(f"Assigning {sorted(new)}", exc) from exc
        self._assignment = new
        self._forget(removed)

    def assignment(self) -> list[TopicPartition]:
        # Copied in one step: another client's producer may read it from its own thread.
        return sorted(tuple(self._assignment))

    def owns(self, partitions: Sequence[TopicPartition]) -> bool:
        """Whether all these partitions are assigned to this consumer now (safe from any thread)."""
        return self._assignment.issuperset(partitions)

    # Fetching

    def poll(self, timeout: float, max_records: int = 10000) -> list[tuple[TopicPartition, RecordBatch]]:
        self._check_open()
        self._retry_pending_seeks()
        # A step of the assignment just ran the listener: its caller may have new work (tasks to
        # start), so this poll does not wait.
        stepped = self._membership is not None and self._run_membership()
        released = self._release_held()
        # Held records are ready now: no waiting for more.
        wait = 0.0 if released or stepped else max(0.0, timeout)
        if self._planned is not None and not self._planned.settled:
            wait = min(wait, REBALANCE_POLL_S)
        try:
            if self._native:
                runs, errors = self._consumer.consume_batches(max(1, max_records), wait)
            else:
                messages = self._consumer.consume(max(1, max_records), wait)
        except KafkaException as exc:
            raise cluster_error(f"Polling {self._describe()}", exc) from exc
        if self._control is not None and self._listener is not None:
            for code in self._control.received_error_codes():
                self._listener.on_assignment_error(code)
        if not self._native:
            return released + self._batches(messages)
        for topic, partition, error in errors:
            self._on_fetch_error(f"{topic}-{partition}" if topic else self._describe(), error)
        result = released
        for topic, partition, batch in runs:
            self._take(TopicPartition(topic, partition), batch, result)
        return result

    def wakeup(self) -> None:
        # Only kstreams' fetcher can cut a wait short (librdkafka's queue yield); with
        # confluent-kafka's consumer (KSTREAMS_KAFKA_CLIENTS=confluent) a poll waits out its timeout.
        if self._native:
            self._consumer.wakeup()

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._check_open()
        if offset < 0:
            raise ClusterError(f"Cannot seek {partition} to offset {offset}: offsets are 0 or more")
        if partition not in self._assignment:
            raise ClusterError(f"Cannot seek {partition}: it is not assigned to {self._describe()}")
        self._start[partition] = offset
        self._pending_seeks.pop(partition, None)
        self._drop_held(partition)
        if self._in_rebalance:
            # Inside on_partitions_assigned: the offset becomes the start of the assignment.
            return
        self._seek_now(partition, offset)

    def seek_to_beginning(self, partitions: Sequence[TopicPartition]) -> None:
        if not partitions:
            return
        for tp, (start, _end) in self._admin.list_offsets(list(partitions)).items():
            self.seek(tp, start)

    def position(self, partition: TopicPartition) -> int:
        self._check_open()
        if partition not in self._assignment:
            raise ClusterError(f"Cannot get the position of {partition}: it is not assigned to this consumer")
        if partition in self._pending_seeks:
            return self._pending_seeks[partition]
        held = self._held.get(partition)
        if held:
            return held[0].first_offset
        try:
            fetched = self._consumer.position([_ktp(partition)])[0].offset
        except KafkaException as exc:
            raise cluster_error(f"Getting the position of {partition}", exc) from exc
        # librdkafka knows the position only after fetching (it then includes skipped control
        # records); before that it is the offset we started from.
        if fetched >= 0:
            return fetched
        if partition in self._start:
            return self._start[partition]
        return self._initial_position(partition)

    def pause(self, partitions: Sequence[TopicPartition]) -> None:
        self._paused.update(tp for tp in partitions if tp in self._assignment)

    def resume(self, partitions: Sequence[TopicPartition]) -> None:
        targets = [tp for tp in partitions if tp in self._paused]
        if not targets:
            return
        self._paused.difference_update(targets)
        stopped = [tp for tp in targets if tp in self._stopped]
        if stopped:
            try:
                self._consumer.resume([_ktp(tp) for tp in stopped])
            except KafkaException as exc:
                raise cluster_error(f"Resuming {stopped}", exc) from exc
            self._stopped.difference_update(stopped)

    def paused(self) -> list[TopicPartition]:
        return sorted(self._paused)

    # Offsets

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._check_open()
        if not offsets:
            return
        if self._group_id is None:
            raise ClusterError("commit() needs a consumer created with a group_id")
        try:
            client = self._group_client
            assert (
                client is not None
            )  # a consumer with a group_id is a confluent-kafka one, or has a membership
            client.commit(offsets=[_ktp(tp, o) for tp, o in offsets.items()], asynchronous=False)
        except KafkaException as exc:
            err = kafka_error_of(exc)
            if err is not None and err.code() == KafkaError._NO_OFFSET:
                return
            if err is not None and err.code() in _NOT_A_MEMBER:
                raise CommitFailedError(
                    f"Commit of group {self._group_id!r} refused: {err.str()} ({err.name()}). This member "
                    "is no longer in the group's current generation; its partitions are lost and it "
                    "rejoins in its next poll"
                ) from exc
            raise cluster_error(f"Committing offsets of group {self._group_id!r}", exc) from exc

    def committed(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        self._check_open()
        if not partitions or self._group_id is None:
            return {}
        try:
            result = self._consumer.committed([_ktp(tp) for tp in partitions], timeout=self._timeout)
        except KafkaException as exc:
            raise cluster_error(f"Fetching the committed offsets of group {self._group_id!r}", exc) from exc
        return {TopicPartition(p.topic, p.partition): p.offset for p in result if p.offset >= 0}

    def end_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """End offsets; for a read_committed consumer the last stable offsets (as Kafka's)."""
        self._check_open()
        result = {}
        for tp in partitions:
            try:
                result[tp] = self._consumer.get_watermark_offsets(
                    _ktp(tp), timeout=self._timeout, cached=False
                )[1]
            except KafkaException as exc:
                raise cluster_error(f"Getting the end offset of {tp}", exc) from exc
        return result

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._group_id is not None:
            self._members.remove(self._group_id, self)
        # librdkafka revokes the assignment while closing; the runtime has already committed and
        # closed its tasks, so the revocation is not passed on.
        self._listener_enabled = False
        for client in (self._membership, self._consumer):
            if client is None:
                continue
            try:
                client.close()
            except (KafkaException, RuntimeError) as exc:
                logger.warning("Closing %s: %s", self._describe(), exc)
        if self._control is not None:
            self._control.close()
        logger.info("Closed %s", self._describe())

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
        self._members.add(group_id, self)
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

    # Internals

    def _batches(self, messages: list[Message]) -> list[tuple[TopicPartition, RecordBatch]]:
        # Every per-message step maps a C method over the list (no Python frame per message): at
        # ~1 us of Python per message this loop used to cost as much as processing the record.
        if not messages:
            return []
        errors = list(map(_error_of, messages))
        # any(), not errors.count(None): comparing a KafkaError with None raises inside C.
        if any(errors):
            for message, error in zip(messages, errors, strict=True):
                if error is not None:
                    topic = message.topic()
                    where = f"{topic}-{message.partition()}" if topic else self._describe()
                    self._on_fetch_error(where, error)
            messages = list(compress(messages, [e is None for e in errors]))
            if not messages:
                return []
        result: list[tuple[TopicPartition, RecordBatch]] = []
        runs = _runs(messages)
        for (topic, partition), run in runs.items():
            headers = list(map(_headers_of, run))
            batch = RecordBatch.from_columns(
                list(map(_key_of, run)),  # bytes: no deserializer is configured
                list(map(_value_of, run)),
                list(map(_second, map(_timestamp_of, run))),
                partition,
                list(map(_offset_of, run)),
                None if headers.count(None) == len(headers) else headers,
            )
            self._take(TopicPartition(topic, partition), batch, result)
        return result

    def _take(
        self, tp: TopicPartition, batch: RecordBatch, result: list[tuple[TopicPartition, RecordBatch]]
    ) -> None:
        """Pass on fetched records (to ``result``), or hold them while their partition is paused."""
        if tp in self._pending_seeks or tp not in self._assignment:
            return  # fetched before a seek or a revocation took effect
        self._start.pop(tp, None)
        if tp in self._paused:
            self._hold(tp, batch)
        else:
            result.append((tp, batch))

    def _hold(self, tp: TopicPartition, batch: RecordBatch) -> None:
        """Keep a paused partition's records until it resumes; once ``hold_bytes`` are held, stop
        librdkafka fetching the partition (it fetches again from after the held records)."""
        self._held.setdefault(tp, []).append(batch)
        self._held_bytes += batch.nbytes
        if tp not in self._stopped and self._held_bytes >= self._hold_bytes:
            try:
                self._consumer.pause([_ktp(tp)])
            except KafkaException as exc:
                raise cluster_error(f"Pausing {tp}", exc) from exc
            self._stopped.add(tp)

    def _release_held(self) -> list[tuple[TopicPartition, RecordBatch]]:
        """The held records of partitions resumed since, oldest first."""
        if not self._held:
            return []
        ready = [tp for tp in self._held if tp not in self._paused]
        released = [(tp, batch) for tp in ready for batch in self._held.pop(tp)]
        self._held_bytes -= sum(batch.nbytes for _, batch in released)
        return released

    def _drop_held(self, tp: TopicPartition) -> None:
        for batch in self._held.pop(tp, ()):
            self._held_bytes -= batch.nbytes

    def _on_fetch_error(self, where: str, error: KafkaError) -> None:
        """An error librdkafka reported while fetching ``where`` (a partition, or this consumer)."""
        code = error.code()
        if code == KafkaError._PARTITION_EOF:
            return
        if code == KafkaError.INVALID_SESSION_TIMEOUT:
            raise ClusterError(
                f"{self._describe()} cannot join its group: the broker refuses its session.timeout.ms "
                "(outside the broker's group.min.session.timeout.ms..group.max.session.timeout.ms, "
                "6000..1800000 by default): set session.timeout.ms within that range"
            )
        if error.fatal() or code in _UNRECOVERABLE:
            raise cluster_error(f"Fetching {where}", error)
        # Transient (broker down, topic not yet known): librdkafka retries by itself.
        logger.warning("Fetching %s: %s", where, error.str())

    def _seek_now(self, partition: TopicPartition, offset: int) -> None:
        try:
            self._consumer.seek(_ktp(partition, offset))
            self._pending_seeks.pop(partition, None)
            return
        except KafkaException as exc:
            err = kafka_error_of(exc)
            if err is None or err.code() not in _NOT_SEEKABLE_YET:
                raise cluster_error(f"Seeking {partition} to offset {offset}", exc) from exc
        # librdkafka has not started fetching the partition yet (_STATE), or its fetcher moved to
        # a newer version of the assignment while the seek was on its way (_OUTDATED, right after
        # an assign): either way the partition cannot be sought now.
        if self._listener is None or self._membership is not None:
            # Assigned by us, not by librdkafka's group: assign the partition again at the offset.
            try:
                self._consumer.incremental_unassign([_ktp(partition)])
                self._consumer.incremental_assign([_ktp(partition, offset)])
            except KafkaException as exc:
                raise cluster_error(f"Seeking {partition} to offset {offset}", exc) from exc
            if partition in self._stopped:
                self._consumer.pause([_ktp(partition)])
        else:
            self._pending_seeks[partition] = offset

    def _retry_pending_seeks(self) -> None:
        for tp, offset in list(self._pending_seeks.items()):
            if tp in self._assignment:
                self._seek_now(tp, offset)
            else:
                del self._pending_seeks[tp]

    def _initial_position(self, partition: TopicPartition) -> int:
        """Where fetching a partition with no known position starts: the committed offset, else
        the auto.offset.reset policy."""
        committed = self.committed([partition])
        if partition in committed:
            return committed[partition]
        if self._auto_offset_reset in ("earliest", "smallest", "beginning"):
            return self._admin.list_offsets([partition])[partition][0]
        if self._auto_offset_reset in ("latest", "largest", "end"):
            return self.end_offsets([partition])[partition]
        raise ClusterError(
            f"{partition} has no committed offset for group {self._group_id!r} and auto.offset.reset is "
            f"{self._auto_offset_reset!r}: seek it, or set auto.offset.reset to earliest or latest"
        )

    def _forget(self, partitions: Sequence[TopicPartition] | set[TopicPartition]) -> None:
        for tp in partitions:
            self._paused.discard(tp)
            self._stopped.discard(tp)
            self._drop_held(tp)
            self._pending_seeks.pop(tp, None)
            self._start.pop(tp, None)

    def _check_open(self) -> None:
        if self._closed:
            raise ClusterError(f"{self._describe()} is closed: create a new consumer")

    def _describe(self) -> str:
        if self._group_id is not None:
            return f"the consumer of group {self._group_id!r}"
        return "a manually assigned consumer"


def message_partition(message: Message) -> TopicPartition:
    """The partition a fetched (non-error) message comes from."""
    return TopicPartition(cast(str, message.topic()), cast(int, message.partition()))


# Seek errors that mean "not yet": the partition is (re)assigned at the offset instead.
_NOT_SEEKABLE_YET = frozenset({KafkaError._STATE, KafkaError._OUTDATED})


def _ktp(tp: TopicPartition, offset: int = OFFSET_INVALID) -> KafkaTopicPartition:
    return KafkaTopicPartition(tp.topic, tp.partition, offset)
