"""The port between the runtime and a Kafka cluster.

The runtime talks to Kafka only through these protocols; ``EmbeddedCluster`` (in-process) and
``KafkaCluster`` (confluent-kafka) implement them. Records cross the port as ``RecordBatch``es so
that no adapter forces per-record Python work on the runtime.

Threads: a ``Consumer`` and a ``Producer`` are each used by one thread at a time (the polling
thread, or the restore thread for the restore consumer); an ``Admin`` may be used from any thread.
Rebalance callbacks run inside ``Consumer.poll`` on the polling thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from kstreams._native.record_batch import RecordBatch

__all__ = [
    "ERROR_ASSIGNMENT",
    "ERROR_INCOMPLETE_SOURCE_TOPIC_METADATA",
    "ERROR_NONE",
    "ERROR_SHUTDOWN_REQUESTED",
    "AbortableTransactionError",
    "Admin",
    "Cluster",
    "ClusterError",
    "CommitFailedError",
    "Consumer",
    "ConsumerRecord",
    "FatalClientError",
    "GroupAssignor",
    "GroupListener",
    "GroupNotEmptyError",
    "MemberAssignment",
    "OffsetAndMetadata",
    "Producer",
    "ProducerFencedError",
    "RecordRejectedError",
    "RejectedRecord",
    "TopicDescription",
    "TopicExistsError",
    "TopicNotFoundError",
    "TopicPartition",
]

# Assignment error codes, as Kafka Streams carries them in rebalance user data.
ERROR_NONE = 0
ERROR_INCOMPLETE_SOURCE_TOPIC_METADATA = 1
ERROR_ASSIGNMENT = 3
ERROR_SHUTDOWN_REQUESTED = 4


@dataclass(frozen=True, order=True, slots=True)
class TopicPartition:
    """One partition of one topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A group's committed offset of one partition (the next offset to read) and the string
    committed with it (Kafka's ``OffsetAndMetadata``; "" when none was given). Kafka Streams
    keeps each partition's stream time there (``kstreams.processing.offset_metadata``)."""

    offset: int
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class TopicDescription:
    """What the cluster knows of a topic: its partition count and its non-default configs."""

    name: str
    partitions: int
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    """One record as read back from a topic (``Cluster.read``)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: list[tuple[str, bytes | None]] | None = None


class ClusterError(Exception):
    """A request to the cluster failed; ``retriable`` says whether trying again may succeed."""

    def __init__(self, message: str, retriable: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable


class TopicNotFoundError(ClusterError):
    """The named topic does not exist on the cluster."""


class TopicExistsError(ClusterError):
    """A topic to create already exists."""


class CommitFailedError(ClusterError):
    """A group member's commit was refused because the group no longer counts it as a member (its
    session timed out): its partitions are lost, and it rejoins in its next poll."""


class ProducerFencedError(ClusterError):
    """A newer producer with the same transactional id took over: this one must stop."""


class AbortableTransactionError(ClusterError):
    """The open transaction failed and must be aborted (librdkafka's abortable errors, such as an
    OUT_OF_ORDER_SEQUENCE_NUMBER that needs an epoch bump): after the abort the producer goes on,
    and the aborted work is redone from the last commit."""


class FatalClientError(ClusterError):
    """The client hit an error it cannot recover from and can never be used again (librdkafka's
    fatal errors, such as an idempotent producer's OUT_OF_ORDER_SEQUENCE_NUMBER after a broker lost
    its state): close it and create a new one."""


@dataclass(frozen=True, slots=True)
class RejectedRecord:
    """An output record the cluster refused for good, and why."""

    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: list[tuple[str, bytes | None]] | None
    reason: str


class RecordRejectedError(ClusterError):
    """The cluster refused some records for good (too large for the topic, invalid): they were not
    written, every other record of the same sends was. Retrying cannot help; the production
    exception handler decides whether the application goes on without them."""

    def __init__(self, records: list[RejectedRecord]) -> None:
        first = records[0]
        super().__init__(
            f"The cluster rejected {len(records)} record(s), the first for {first.topic}-{first.partition}: "
            f"{first.reason}"
        )
        self.records = records


class GroupNotEmptyError(ClusterError):
    """A request that needs a consumer group without active members (setting its offsets from
    outside, as the reset tool does) found members in it."""


@runtime_checkable
class Admin(Protocol):
    def create_topics(
        self, topics: Mapping[str, tuple[int, Mapping[str, str]]], replication_factor: int = -1
    ) -> None:
        """Create topics {name: (partitions, configs)}. Raises TopicExistsError naming the first
        topic that exists (the others are still created)."""

    def describe_topics(self, names: Sequence[str] | None = None) -> dict[str, TopicDescription]:
        """Descriptions of the named topics that exist (absent names are left out), or of all
        topics when names is None. Never creates a topic."""

    def delete_topics(self, names: Sequence[str]) -> None: ...

    def alter_topic_config(self, name: str, config: Mapping[str, str]) -> None: ...

    def create_partitions(self, counts: Mapping[str, int]) -> None:
        """Grow topics to the given partition counts. Raises ClusterError if a count is not larger."""

    def list_offsets(
        self, partitions: Sequence[TopicPartition], isolation: str = "read_uncommitted"
    ) -> dict[TopicPartition, tuple[int, int]]:
        """(log start offset, end offset) per partition; with "read_committed" the end is the
        last stable offset."""

    def delete_records(self, before: Mapping[TopicPartition, int]) -> None:
        """Advance log start offsets (purging repartition topics after commit)."""

    def committed_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """The group's committed offsets (partitions without one are left out). An offset a
        transaction committed is returned once the transaction has completed (Kafka's stable
        offsets), never the offset before it."""

    def alter_committed_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Set a group's committed offsets from outside the group (Kafka's AlterConsumerGroupOffsets).
        Raises GroupNotEmptyError when the group has active members: they would overwrite them."""

    def group_members(self, group_id: str) -> list[str]:
        """Member ids of the group's active members, sorted ([] for an empty or unknown group)."""

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Per partition, the earliest offset whose record has a timestamp (ms) at or after the one
        given, or the partition's end offset when no record is that recent (Kafka's ListOffsets by
        timestamp, with the tools' fallback to the end)."""


class GroupListener(Protocol):
    """Callbacks a main consumer makes inside ``poll``, on the polling thread."""

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        """Partitions leave this member in an orderly rebalance: commit them now."""

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        """Partitions join this member (the full new assignment is the old one plus these)."""

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        """Partitions were taken away without a chance to commit (session timeout, fencing)."""

    def on_assignment_error(self, code: int) -> None:
        """The group carries an application-wide error code (ERROR_SHUTDOWN_REQUESTED, ...)."""


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    """What a group's leader hands one member: its partitions and the assignor's user data."""

    partitions: tuple[TopicPartition, ...]
    userdata: bytes = b""


class GroupAssignor(Protocol):
    """An application's assignor, run by the adapters in place of the group's range assignor
    (Kafka's ConsumerPartitionAssignor, with user data both ways).

    Each member's ``subscription`` reaches the group's leader, whose ``assign`` decides every
    member's partitions; each member then gets its own part through ``on_assignment``, on the
    polling thread, before the rebalance's ``on_partitions_assigned``. ``assign`` must be pure
    (no cluster calls, no locks of the runtime): an adapter may run it under its own lock, on any
    member's thread, and every member that runs it on the same input must get the same answer.
    """

    def subscription(self) -> bytes:
        """This member's user data for the next rebalance (what its client holds now)."""

    def assign(
        self, subscriptions: Mapping[str, bytes], partition_counts: Mapping[str, int]
    ) -> dict[str, MemberAssignment]:
        """{member id: assignment} for every member in ``subscriptions`` ({member id: its
        subscription user data}); ``partition_counts`` has every subscribed topic that exists."""

    def on_assignment(self, userdata: bytes) -> None:
        """This member's user data from the leader, for the generation that is being synced."""


@runtime_checkable
class Consumer(Protocol):
    def subscribe(
        self, topics: Sequence[str], listener: GroupListener, assignor: GroupAssignor | None = None
    ) -> None:
        """Join the group. Without an ``assignor`` the group assigns partitions by range (as
        librdkafka's range assignor); with one, the assignor decides, as Kafka Streams' does."""

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        """Manual assignment (the restore consumer); replaces the previous one."""

    def assignment(self) -> list[TopicPartition]: ...

    def poll(self, timeout: float, max_records: int = 10000) -> list[tuple[TopicPartition, RecordBatch]]:
        """Fetch from the assigned, unpaused partitions; runs rebalance callbacks first."""

    def wakeup(self) -> None:
        """Make a ``poll`` that waits now, or else the next one, return at once (with what it
        has, maybe nothing), as Kafka's ``Consumer.wakeup`` without the exception. Safe from any
        thread; the polling thread's helpers call it when they hand it work."""

    def seek(self, partition: TopicPartition, offset: int) -> None: ...

    def seek_to_beginning(self, partitions: Sequence[TopicPartition]) -> None: ...

    def position(self, partition: TopicPartition) -> int: ...

    def pause(self, partitions: Sequence[TopicPartition]) -> None: ...

    def resume(self, partitions: Sequence[TopicPartition]) -> None: ...

    def paused(self) -> list[TopicPartition]: ...

    def commit(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None = None
    ) -> None:
        """Commit the next offsets to read, synchronously, each with the string ``metadata``
        gives its partition ("" for a partition it leaves out, as a commit without metadata
        replaces what an earlier one stored)."""

    def committed(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]: ...

    def committed_with_metadata(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets with their metadata, in one request (partitions
        without a committed offset are left out)."""

    def end_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]: ...

    def request_rejoin(self) -> None:
        """Trigger a rebalance of the group (a follow-up rebalance after autoscaling)."""

    def signal_application_error(self, code: int) -> None:
        """Send an application-wide error code to every member of the group (SHUTDOWN_APPLICATION).
        Every member, this one included, receives it through ``on_assignment_error``."""

    @property
    def member_id(self) -> str: ...

    @property
    def rebalancing(self) -> bool:
        """Whether the group is between generations, so that a commit now would be refused (the
        runtime waits with its interval commits)."""

    @property
    def group_generation(self) -> int: ...

    def group_assignment(self) -> dict[str, list[TopicPartition]]:
        """The group's current assignment of every member, {member id: partitions}, this member
        included (empty for a consumer outside a group). Every member reads the same answer, so
        each can place standby replicas on the members that do not own a task."""

    @property
    def fences_stale_transactional_commits(self) -> bool:
        """Whether offsets this member sends to a transaction carry its group generation, so that
        the group coordinator itself refuses them once the member is out of the group (KIP-447).
        Where not, the runtime checks membership before each transactional commit."""

    def close(self) -> None:
        """Leave the group (an orderly leave triggers a rebalance) and release resources."""


@runtime_checkable
class Producer(Protocol):
    def send(self, topic: str, partition: int, batch: RecordBatch) -> None:
        """Queue a batch for one partition (the batch's partition column is ignored)."""

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every queued record is acknowledged; raises ClusterError on failure."""

    def partitions_for(self, topic: str) -> int:
        """Partition count of a topic (raises TopicNotFoundError)."""

    def init_transactions(self) -> None: ...

    def begin_transaction(self) -> None: ...

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group_id: str,
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> None:
        """Add the group's offsets to the open transaction, committed with it; ``metadata`` as
        for ``Consumer.commit``."""

    def commit_transaction(self) -> None: ...

    def abort_transaction(self) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class Cluster(Protocol):
    """A factory for the clients of one cluster, plus the helper methods tests and demos use."""

    def admin(self) -> Admin: ...

    def consumer(self, group_id: str | None, config: Mapping[str, object] | None = None) -> Consumer:
        """A consumer; with a group_id it joins that group on subscribe. Config keys of interest:
        "isolation.level" (read_uncommitted | read_committed), "session.timeout.ms",
        "auto.offset.reset" (earliest | latest | none), "client.id"."""

    def producer(self, config: Mapping[str, object] | None = None) -> Producer:
        """A producer; "transactional.id" in config makes it transactional."""

    # Helpers for tests and tools (the same on every adapter).
    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> None: ...

    def create_partitions(self, name: str, partitions: int) -> None: ...

    def produce(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int | None = None,
        partition: int | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> None: ...

    def read(self, topic: str, isolation: str = "read_committed") -> list[ConsumerRecord]:
        """Every record of a topic visible at that isolation, in partition then offset order."""

    def topics(self) -> dict[str, TopicDescription]: ...

    def delete_topic(self, name: str) -> None: ...
