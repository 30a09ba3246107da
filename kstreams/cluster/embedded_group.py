"""The group coordinator of the embedded broker: membership, range assignment, cooperative
hand-over of partitions, session expiry, committed offsets and the application error code.

The protocol is cooperative, as Kafka's with the cooperative-sticky assignor, but with Kafka's
range assignment (the one librdkafka offers, so both adapters place partitions alike):

- Every membership or metadata change is a rebalance: the generation grows and every member gets
  a new *target* assignment. For each subscribed topic, the members subscribed to it (sorted by
  member id) get contiguous ranges of its partitions, so co-partitioned topics land on one member.
- A member *owns* the partitions it was handed. In its next poll a member first revokes what it
  owns outside its target (``release``), then takes what is in its target and owned by nobody
  (``grant``). A partition therefore moves between live members only after the old owner revoked
  it, and two members never own (and fetch) one partition at once.
- A member that does not poll for its session timeout is expelled: what it owned is free at once,
  and it learns that it lost it if it ever polls again (``Membership.expelled``).

Threads: nothing here locks. A group belongs to one ``EmbeddedCluster`` and is used only under its
lock; listener callbacks are run by the consumer, outside that lock.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping

from kstreams.cluster.port import ERROR_NONE, TopicPartition

__all__ = ["ConsumerGroup", "Membership", "range_assignment"]

logger = logging.getLogger(__name__)


class Membership:
    """One consumer's membership of a group, from join to leave or expulsion."""

    __slots__ = (
        "client_id",
        "error_delivered",
        "expelled",
        "generation",
        "in_poll",
        "last_seen",
        "member_id",
        "owned",
        "session_timeout",
        "target",
        "topics",
    )

    def __init__(self, client_id: str, topics: frozenset[str], session_timeout: float, now: float) -> None:
        # Kafka's member ids are "<client.id>-<uuid>"; the range assignor sorts members by them.
        self.member_id = f"{client_id}-{uuid.uuid4()}"
        self.client_id = client_id
        self.topics = topics
        self.session_timeout = session_timeout
        self.last_seen = now
        # A member blocked in (or running callbacks of) poll is alive whatever the time.
        self.in_poll = False
        self.target: set[TopicPartition] = set()
        self.owned: set[TopicPartition] = set()
        # The generation this member last synchronised to (its callbacks ran for it); -1 before.
        self.generation = -1
        self.error_delivered = ERROR_NONE
        self.expelled = False

    def alive(self, now: float) -> bool:
        return self.in_poll or now - self.last_seen < self.session_timeout


def range_assignment(
    subscriptions: Mapping[str, frozenset[str]], partition_counts: Mapping[str, int]
) -> dict[str, set[TopicPartition]]:
    """Kafka's range assignor: {member id: partitions}. Topics absent from partition_counts (not
    existing) are assigned to nobody."""
    result: dict[str, set[TopicPartition]] = {member: set() for member in subscriptions}
    by_topic: dict[str, list[str]] = {}
    for member in sorted(subscriptions):
        for topic in subscriptions[member]:
            by_topic.setdefault(topic, []).append(member)
    for topic, members in by_topic.items():
        count = partition_counts.get(topic)
        if not count:
            continue
        share, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = share + (1 if i < extra else 0)
            result[member].update(TopicPartition(topic, p) for p in range(start, start + size))
            start += size
    return result


class ConsumerGroup:
    """One consumer group: its members, generation, committed offsets and error code."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.members: dict[str, Membership] = {}
        self.generation = 0
        self.offsets: dict[TopicPartition, int] = {}
        self.error_code = ERROR_NONE
        # Who owns each owned partition, for O(1) hand-over checks.
        self._owners: dict[TopicPartition, Membership] = {}

    # Membership changes. Each returns after the rebalance it causes.

    def join(
        self,
        client_id: str,
        topics: Iterable[str],
        session_timeout: float,
        now: float,
        partition_counts: Mapping[str, int],
    ) -> Membership:
        member = Membership(client_id, frozenset(topics), session_timeout, now)
        self.members[member.member_id] = member
        logger.info("Group %s: member %s joined", self.group_id, member.member_id)
        self.rebalance(partition_counts, f"{member.member_id} joined")
        return member

    def resubscribe(
        self, member: Membership, topics: Iterable[str], partition_counts: Mapping[str, int]
    ) -> None:
        member.topics = frozenset(topics)
        self.rebalance(partition_counts, f"{member.member_id} changed its subscription")

    def leave(self, member: Membership, partition_counts: Mapping[str, int]) -> None:
        """An orderly leave: what the member owned is free at once."""
        if self.members.pop(member.member_id, None) is None:
            return
        self._drop_ownership(member)
        logger.info("Group %s: member %s left", self.group_id, member.member_id)
        self._after_departure(partition_counts, f"{member.member_id} left")

    def expire(self, now: float, partition_counts: Mapping[str, int]) -> bool:
        """Expel the members whose session timed out; True if any was."""
        dead = [m for m in self.members.values() if not m.alive(now)]
        for member in dead:
            del self.members[member.member_id]
            self._drop_ownership(member)
            member.expelled = True
            logger.warning(
                "Group %s: member %s did not poll within session.timeout.ms=%d and was expelled",
                self.group_id,
                member.member_id,
                round(member.session_timeout * 1000),
            )
        if dead:
            self._after_departure(partition_counts, "session timeout")
        return bool(dead)

    def next_expiry(self) -> float | None:
        """The earliest monotonic time at which a member not in poll would expire."""
        deadlines = [m.last_seen + m.session_timeout for m in self.members.values() if not m.in_poll]
        return min(deadlines) if deadlines else None

    def subscribes_to(self, topic: str) -> bool:
        return any(topic in m.topics for m in self.members.values())

    def rebalance(self, partition_counts: Mapping[str, int], reason: str) -> None:
        """Start a new generation with fresh targets for every member."""
        self.generation += 1
        targets = range_assignment(
            {mid: m.topics for mid, m in self.members.items()},
            partition_counts,
        )
        for mid, member in self.members.items():
            member.target = targets[mid]
        logger.info(
            "Group %s: rebalance to generation %d (%s), %d member(s)",
            self.group_id,
            self.generation,
            reason,
            len(self.members),
        )

    # The cooperative hand-over, driven by each member's poll.

    def to_revoke(self, member: Membership) -> list[TopicPartition]:
        return sorted(member.owned - member.target)

    def grantable(self, member: Membership) -> list[TopicPartition]:
        """Target partitions of the member that nobody owns now."""
        return sorted(tp for tp in member.target - member.owned if tp not in self._owners)

    def release(self, member: Membership, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            member.owned.discard(tp)
            if self._owners.get(tp) is member:
                del self._owners[tp]

    def grant(self, member: Membership, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            member.owned.add(tp)
            self._owners[tp] = member

    def owner(self, tp: TopicPartition) -> Membership | None:
        return self._owners.get(tp)

    def forget_topic(self, topic: str) -> None:
        """Drop the committed offsets of a deleted topic."""
        for tp in [tp for tp in self.offsets if tp.topic == topic]:
            del self.offsets[tp]

    def _drop_ownership(self, member: Membership) -> None:
        for tp in member.owned:
            if self._owners.get(tp) is member:
                del self._owners[tp]

    def _after_departure(self, partition_counts: Mapping[str, int], reason: str) -> None:
        if not self.members:
            # The application error code lives as long as the group has members.
            self.error_code = ERROR_NONE
        self.rebalance(partition_counts, reason)
