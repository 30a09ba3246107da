"""The group coordinator of the embedded broker: membership, range assignment, cooperative
hand-over of partitions, session expiry, committed offsets and the application error code.

The protocol is cooperative, as Kafka's with the cooperative-sticky assignor, but with Kafka's
range assignment (the one librdkafka offers, so both adapters place partitions alike):

- Every membership or metadata change is a rebalance: the generation grows and every member gets
  a new *target* assignment. For each subscribed topic, the members subscribed to it (sorted by
  member id) get contiguous ranges of its partitions, so co-partitioned topics land on one member.
  When every member subscribed with a ``GroupAssignor`` (a KafkaStreams client does), the leader's
  assignor (the lowest member id) decides the targets instead, from every member's subscription
  user data, and each member gets its own user data back when it syncs to the generation.
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
import time
import uuid
from collections.abc import Iterable, Mapping

from kstreams.cluster.port import ERROR_NONE, GroupAssignor, TopicPartition

__all__ = ["ConsumerGroup", "Membership", "range_assignment"]

logger = logging.getLogger(__name__)

# How long a rebalance of an assignor group waits for every member's subscription.
JOIN_WAIT_S = 2.0


class Membership:
    """One consumer's membership of a group, from join to leave or expulsion."""

    __slots__ = (
        "assigned_userdata",
        "assignor",
        "client_id",
        "error_delivered",
        "expelled",
        "generation",
        "in_poll",
        "last_seen",
        "member_id",
        "owned",
        "reported",
        "session_timeout",
        "target",
        "topics",
        "userdata",
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
        # The member's assignor, its latest subscription user data, and what the leader's
        # assignor gave it in the current generation.
        self.assignor: GroupAssignor | None = None
        self.userdata = b""
        self.assigned_userdata = b""
        self.reported = -1  # the generation whose subscription this member sent last

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
        # The metadata committed with each offset ("" when none was given).
        self.metadata: dict[TopicPartition, str] = {}
        self.error_code = ERROR_NONE
        # Set while the members of an assignor group report for a new generation.
        self.joining_since: float | None = None
        self._counts: dict[str, int] = {}
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
        assignor: GroupAssignor | None = None,
        userdata: bytes = b"",
    ) -> Membership:
        member = Membership(client_id, frozenset(topics), session_timeout, now)
        member.assignor = assignor
        member.userdata = userdata
        self.members[member.member_id] = member
        logger.info("Group %s: member %s joined", self.group_id, member.member_id)
        self.rebalance(partition_counts, f"{member.member_id} joined")
        if self.joining_since is not None:
            self.report(member, userdata, now)  # it joined with a fresh subscription
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
        """Start a new generation with fresh targets for every member. A group of assignor
        members first waits for every member's fresh subscription (``report``), as Kafka's
        JoinGroup does; until then nothing moves."""
        self.generation += 1
        logger.info(
            "Group %s: rebalance to generation %d (%s), %d member(s)",
            self.group_id,
            self.generation,
            reason,
            len(self.members),
        )
        if self.members and all(m.assignor is not None for m in self.members.values()):
            self.joining_since = time.monotonic()
            self._counts = dict(partition_counts)
            return
        self.joining_since = None
        targets = range_assignment({mid: m.topics for mid, m in self.members.items()}, partition_counts)
        for mid, member in self.members.items():
            member.target = targets[mid]
            member.assigned_userdata = b""

    @property
    def joining(self) -> bool:
        """Whether the group waits for its members' subscriptions (no partition moves meanwhile)."""
        return self.joining_since is not None

    def needs_report(self, member: Membership) -> bool:
        return self.joining_since is not None and member.reported != self.generation

    def report(self, member: Membership, userdata: bytes, now: float) -> None:
        """A member's fresh subscription for the joining generation."""
        member.userdata = userdata
        member.reported = self.generation
        self.maybe_assign(now)

    def join_deadline(self) -> float | None:
        return None if self.joining_since is None else self.joining_since + JOIN_WAIT_S

    def maybe_assign(self, now: float) -> bool:
        """Run the leader's assignor once every member reported, or the wait ran out (a member
        that does not report in time keeps the subscription it sent before); True if it ran."""
        if self.joining_since is None:
            return False
        if now < self.joining_since + JOIN_WAIT_S and any(
            m.reported != self.generation for m in self.members.values()
        ):
            return False
        self.joining_since = None
        subscriptions = {mid: m.topics for mid, m in self.members.items()}
        counts = self._counts
        targets = range_assignment(subscriptions, counts)
        userdata = {mid: b"" for mid in self.members}
        leader = self.members[min(self.members)]
        assert leader.assignor is not None
        topics = frozenset().union(*subscriptions.values())
        # The leader's assignor decides, as in Kafka; a failing one leaves the range targets
        # (every partition still has an owner) and is logged, not raised into a member's call.
        try:
            decided = leader.assignor.assign(
                {mid: m.userdata for mid, m in self.members.items()},
                {t: n for t, n in counts.items() if t in topics},
            )
        except Exception:
            logger.exception("Group %s: the leader's assignor failed; assigning by range", self.group_id)
        else:
            for mid in self.members:
                given = decided.get(mid)
                targets[mid] = set(given.partitions) if given is not None else set()
                userdata[mid] = given.userdata if given is not None else b""
        for mid, member in self.members.items():
            member.target = targets[mid]
            member.assigned_userdata = userdata[mid]
        return True

    # The cooperative hand-over, driven by each member's poll.

    def to_revoke(self, member: Membership) -> list[TopicPartition]:
        if self.joining_since is not None:
            return []
        return sorted(member.owned - member.target)

    def grantable(self, member: Membership) -> list[TopicPartition]:
        """Target partitions of the member that nobody owns now."""
        if self.joining_since is not None:
            return []
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
            self.metadata.pop(tp, None)

    def _drop_ownership(self, member: Membership) -> None:
        for tp in member.owned:
            if self._owners.get(tp) is member:
                del self._owners[tp]

    def _after_departure(self, partition_counts: Mapping[str, int], reason: str) -> None:
        if not self.members:
            # The application error code lives as long as the group has members.
            self.error_code = ERROR_NONE
        self.rebalance(partition_counts, reason)
