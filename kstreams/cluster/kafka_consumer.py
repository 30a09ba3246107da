"""The ``Consumer`` of a ``KafkaCluster``: librdkafka consumers behind the port
(confluent-kafka's for group membership; kstreams' compiled ``KafkaFetcher`` for fetching what
the consumer assigns itself, where it can be used, see ``kafka_fetching.native_fetcher``).

``KafkaConsumer`` is two halves: group membership (``kafka_membership.GroupMembership``:
subscribing, the rebalance callbacks of librdkafka's group or of the application's assignor, the
member's generation and metadata) and, here, assignment, fetching, seeking, pausing and offsets.
Manually assigned consumers (the restore consumer) use incremental assignment, so partitions that
stay assigned keep their positions when the assignment changes.

``poll`` hands out one RecordBatch per partition (per run of its records), built by the fetcher
or with ``RecordBatch.from_columns`` from the messages confluent-kafka returns (``kafka_fetching``
gives both one shape); records of paused partitions or of partitions with a pending seek are
never handed out. A pause holds the partition's fetched records here until the resume (librdkafka
would drop and refetch them); librdkafka pauses the partition too once queued.max.messages.kbytes
are held.

Threads: one thread at a time uses a consumer (the port's rule); rebalance callbacks run inside
``poll`` on that thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kstreams._native.record_batch import RecordBatch
from kstreams.cluster.kafka_admin import KafkaAdmin
from kstreams.cluster.kafka_assignment import PlannedAssignment, assignment_give_up_s
from kstreams.cluster.kafka_control import ControlChannel
from kstreams.cluster.kafka_errors import cluster_error, kafka_error_of
from kstreams.cluster.kafka_fetching import (
    DEFAULT_HOLD_BYTES,
    NOT_SEEKABLE_YET,
    FetchedRun,
    FetchError,
    HeldRecords,
    fetch,
    fetch_error,
    split_messages,
)
from kstreams.cluster.kafka_fetching import ktp as _ktp
from kstreams.cluster.kafka_membership import GroupMembers, GroupMembership, committed_positions
from kstreams.cluster.port import (
    ClusterError,
    CommitFailedError,
    GroupAssignor,
    GroupListener,
    OffsetAndMetadata,
    TopicPartition,
)

__all__ = ["KafkaConsumer"]

logger = logging.getLogger(__name__)

# Longest wait of a poll while the group's assignment protocol is under way: each of its steps
# (join seen, report read back, plan published and read, acknowledged) runs once per poll, so a
# whole poll.ms per step made a rebalance last a second where its messages take milliseconds.
REBALANCE_POLL_S = 0.01
# Commit errors that mean the group no longer counts this consumer as a member of its generation.
_NOT_A_MEMBER = frozenset(
    {
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.FENCED_INSTANCE_ID,
    }
)


class KafkaConsumer(GroupMembership):
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
        self._held = HeldRecords(hold_bytes)
        self._stopped: set[TopicPartition] = set()
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
        released = self._held.release(self._paused)
        # Held records are ready now: no waiting for more.
        wait = 0.0 if released or stepped else max(0.0, timeout)
        if self._planned is not None and not self._planned.settled:
            wait = min(wait, REBALANCE_POLL_S)
        try:
            runs, errors = fetch(self._consumer, self._native, max(1, max_records), wait)
        except KafkaException as exc:
            raise cluster_error(f"Polling {self._describe()}", exc) from exc
        if self._control is not None and self._listener is not None:
            for code in self._control.received_error_codes():
                self._listener.on_assignment_error(code)
        return self._fetched(released, runs, errors)

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
        self._held.drop(partition)
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
        held = self._held.first_offset(partition)
        if held is not None:
            return held
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

    def commit(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None = None
    ) -> None:
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
            client.commit(offsets=committed_positions(offsets, metadata), asynchronous=False)
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
        return {tp: c.offset for tp, c in self.committed_with_metadata(partitions).items()}

    def committed_with_metadata(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        self._check_open()
        if not partitions or self._group_id is None:
            return {}
        # confluent-kafka decodes a commit's metadata as UTF-8, and now and then it holds a stray
        # byte past the string (seen under exactly_once_v2 on Apache Kafka): asked again, then
        # given up on. The offset stands either way; without its metadata a task starts with an
        # unknown stream time, as Kafka Streams does for a commit without one.
        for attempt in range(_METADATA_READS):
            try:
                result = self._consumer.committed([_ktp(tp) for tp in partitions], timeout=self._timeout)
            except KafkaException as exc:
                raise cluster_error(
                    f"Fetching the committed offsets of group {self._group_id!r}", exc
                ) from exc
            found = {
                TopicPartition(p.topic, p.partition): (p.offset, _readable_metadata(p))
                for p in result
                if p.offset >= 0
            }
            unreadable = sorted(str(tp) for tp, (_, metadata) in found.items() if metadata is None)
            if not unreadable:
                break
            if attempt == _METADATA_READS - 1:
                logger.warning(
                    "%s: the commit metadata of %s is not UTF-8; using the offsets without it "
                    "(those tasks start with an unknown stream time)",
                    self._describe(),
                    ", ".join(unreadable),
                )
        return {tp: OffsetAndMetadata(offset, metadata or "") for tp, (offset, metadata) in found.items()}

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

    # Internals

    def _batches(self, messages: list[Message]) -> list[tuple[TopicPartition, RecordBatch]]:
        """A confluent-kafka consume call's messages as the batches a poll hands out."""
        runs, errors = split_messages(messages)
        return self._fetched([], runs, errors)

    def _fetched(
        self,
        result: list[tuple[TopicPartition, RecordBatch]],
        runs: list[FetchedRun],
        errors: list[FetchError],
    ) -> list[tuple[TopicPartition, RecordBatch]]:
        """A fetch's errors raised or logged, then its runs added to ``result`` (or held)."""
        for topic, partition, error in errors:
            self._on_fetch_error(f"{topic}-{partition}" if topic else self._describe(), error)
        for topic, partition, batch in runs:
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
        if self._held.add(tp, batch) and tp not in self._stopped:
            try:
                self._consumer.pause([_ktp(tp)])
            except KafkaException as exc:
                raise cluster_error(f"Pausing {tp}", exc) from exc
            self._stopped.add(tp)

    def _on_fetch_error(self, where: str, error: KafkaError) -> None:
        """An error librdkafka reported while fetching ``where`` (a partition, or this consumer)."""
        fetch_error(where, error, self._describe())

    def _seek_now(self, partition: TopicPartition, offset: int) -> None:
        try:
            self._consumer.seek(_ktp(partition, offset))
            self._pending_seeks.pop(partition, None)
            return
        except KafkaException as exc:
            err = kafka_error_of(exc)
            if err is None or err.code() not in NOT_SEEKABLE_YET:
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
            self._held.drop(tp)
            self._pending_seeks.pop(tp, None)
            self._start.pop(tp, None)

    def _check_open(self) -> None:
        if self._closed:
            raise ClusterError(f"{self._describe()} is closed: create a new consumer")

    def _describe(self) -> str:
        if self._group_id is not None:
            return f"the consumer of group {self._group_id!r}"
        return "a manually assigned consumer"


# How often committed offsets are fetched when a commit's metadata cannot be decoded.
_METADATA_READS = 3


def _readable_metadata(partition: KafkaTopicPartition) -> str | None:
    """A fetched commit's metadata ("" if none), or None when it is not valid UTF-8."""
    try:
        return partition.metadata or ""
    except UnicodeDecodeError:
        return None
