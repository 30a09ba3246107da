"""Assignment by an application's assignor on Kafka, without a custom librdkafka assignor.

librdkafka runs its assignors in C and offers no custom ones, so a ``KafkaConsumer`` that
subscribes with a ``GroupAssignor`` splits what a Kafka consumer does in one client:

- a *membership* consumer joins the group (subscribed to the topics, so metadata changes still
  rebalance the group; static membership applies to it). It gives the member id, the generation,
  liveness (heartbeats, session timeout), and the group metadata that fences offset commits. It
  fetches nothing: its range assignment is replaced by nothing as it arrives.
- the *fetching* consumer is assigned partitions incrementally, as the assignor decided. A
  rebalance of the group does not touch it, so tasks that stay keep fetching and processing
  through every rebalance: only the partitions that move stop, which is what Kafka's cooperative
  rebalancing (KIP-429) gives.
- the assignor's messages travel on the group's control topic (``kafka_control``), as records of
  this protocol (``PlannedAssignment``):

  1. ``report``: when the membership consumer joins generation G, the member publishes its
     subscription user data and the partitions it fetches now.
  2. ``plan``: the group's leader (the lowest member id of the group's members) waits for the
     reports of every member of G (asking again with ``request`` when one is missing, and after
     ``PLAN_DEADLINE_S`` assigning without it), runs the assignor and publishes the plan: every
     member's partitions and user data, and for each partition that moves, its previous owner.
     A report that arrives later for G (a static member that restarted without a rebalance has a
     new member id) makes the leader publish a new plan for G; members follow the latest plan
     of their generation in log order.
  3. ``applied``: a member first gives up what the plan takes from it (the runtime commits and
     closes those tasks), then acknowledges the plan. A member takes a moving partition only once
     its previous owner acknowledged the plan, or left the group: no partition is ever fetched by
     two members at once.

Offsets are committed by the membership consumer with the group's generation, so a member that
fell out of the group cannot commit (KIP-447 fencing for transactions, the same for plain commits).

Threads: used only by the thread that polls the consumer (the polling thread), inside ``poll``.
"""

from __future__ import annotations

import base64
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kstreams.cluster.kafka_control import ASSIGNMENT_KIND_PREFIX, ControlChannel
from kstreams.cluster.port import ClusterError, GroupAssignor, TopicPartition

__all__ = ["PlanStep", "PlannedAssignment"]

logger = logging.getLogger(__name__)

REPORT = ASSIGNMENT_KIND_PREFIX + "report"
PLAN = ASSIGNMENT_KIND_PREFIX + "plan"
APPLIED = ASSIGNMENT_KIND_PREFIX + "applied"
REQUEST = ASSIGNMENT_KIND_PREFIX + "request"
# How long before a member that waits for the others asks again.
ASK_AGAIN_S = 2.0
# How long the leader waits for a member's report before assigning without it.
PLAN_DEADLINE_S = 10.0


@dataclass
class PlanStep:
    """What the consumer does next for the plan it follows: hand ``userdata`` to the assignor (the
    first step of a plan), give up ``revoke`` then acknowledge, take ``acquire``."""

    plan_id: str
    userdata: bytes | None = None
    revoke: list[TopicPartition] = field(default_factory=list)
    acknowledge: bool = False
    acquire: list[TopicPartition] = field(default_factory=list)
    first: bool = False


@dataclass
class _Following:
    plan_id: str
    partitions: set[TopicPartition]
    previous_owner: dict[TopicPartition, str]
    acknowledged: bool = False


class PlannedAssignment:
    """One member's side of the protocol (see the module docstring)."""

    def __init__(
        self,
        group_id: str,
        assignor: GroupAssignor,
        channel: ControlChannel,
        members: Callable[[], list[str]],
        partition_counts: Callable[[], Mapping[str, int]],
    ) -> None:
        self._group_id = group_id
        self._assignor = assignor
        self._channel = channel
        self._members = members
        self._partition_counts = partition_counts
        self.member_id = ""
        self.generation = -1
        self._report_due = False
        self._reported_at = 0.0
        self._joined_at = 0.0
        self._asked_at = 0.0
        # Of the current generation: reports by member, the latest plan, its acknowledgements.
        self._reports: dict[str, dict] = {}
        self._plan: dict | None = None
        self._acks: dict[str, set[str]] = {}
        self._my_plan_members: frozenset[str] | None = None  # the reports my last plan used
        self._following: _Following | None = None
        self._live: list[str] = []
        self._live_at = 0.0
        self._ack_due: str | None = None
        self._failing = False

    @property
    def settled(self) -> bool:
        """Whether this member holds what the latest plan of its generation gives it."""
        following = self._following
        return (
            following is not None
            and following.acknowledged
            and self._plan is not None
            and (following.plan_id == self._plan["id"])
        )

    def joined(self, generation: int, member_id: str) -> None:
        """The membership consumer joined ``generation`` (called from its assign callback)."""
        if generation != self.generation or member_id != self.member_id:
            # A new generation, or a rejoin under a new member id (after the member was lost; a
            # restarted broker even starts generations at 1 again): nothing seen so far applies.
            self._reports.clear()
            self._plan = None
            self._acks.clear()
            self._my_plan_members = None
            self._live = []
        self.generation = generation
        self.member_id = member_id
        self._report_due = True
        self._joined_at = time.monotonic()

    def step(self, owned: set[TopicPartition]) -> PlanStep | None:
        """Publish, read and decide; the next thing to do with the fetching consumer, if any. A
        cluster call that fails (the broker is away) is tried again at the next poll: meanwhile
        the member keeps what it has."""
        if self.generation < 0 or not self.member_id:
            return None
        try:
            step = self._step(owned)
        except ClusterError as exc:
            if not self._failing:
                logger.warning(
                    "Group %s: the assignment protocol waits for the cluster: %s", self._group_id, exc
                )
            self._failing = True
            return None
        if self._failing:
            logger.info("Group %s: the assignment protocol goes on", self._group_id)
            self._failing = False
        return step

    def _step(self, owned: set[TopicPartition]) -> PlanStep | None:
        now = time.monotonic()
        if self._ack_due is not None:
            self._publish_applied(self._ack_due)
        if self._report_due:
            self._report(owned)
        if not self.settled or self._i_lead_without_plan():
            self._channel.check_soon()  # records are read later in this poll, without waiting
        self._take(self._channel.take_records())
        if self._leads():
            self._maybe_plan(now)
        elif self._plan is None and now - self._reported_at >= ASK_AGAIN_S:
            self._report_due = True  # the leader may have missed it (it joined after us)
        return self._next_step(owned)

    def applied(self, plan_id: str) -> None:
        """This member gave up what plan ``plan_id`` takes from it: tell the others (now, or at
        the next step if the cluster cannot be reached)."""
        self._ack_due = plan_id
        try:
            self._publish_applied(plan_id)
        except ClusterError as exc:
            logger.warning("Group %s: acknowledging the assignment failed, retrying: %s", self._group_id, exc)

    def _publish_applied(self, plan_id: str) -> None:
        self._channel.publish({"kind": APPLIED, "plan": plan_id, "member": self.member_id})
        self._ack_due = None
        if self._following is not None and self._following.plan_id == plan_id:
            self._following.acknowledged = True

    # -- reading ----------------------------------------------------------------------------------

    def _report(self, owned: set[TopicPartition]) -> None:
        userdata = self._assignor.subscription()
        self._channel.publish(
            {
                "kind": REPORT,
                "generation": self.generation,
                "member": self.member_id,
                "owned": [[tp.topic, tp.partition] for tp in sorted(owned)],
                "userdata": base64.b64encode(userdata).decode(),
            }
        )
        self._report_due = False
        self._reported_at = time.monotonic()

    def _take(self, records: list[dict]) -> None:
        for record in records:
            kind = record.get("kind")
            if kind == APPLIED:
                self._acks.setdefault(str(record.get("plan")), set()).add(str(record.get("member")))
            elif record.get("generation") != self.generation:
                continue
            elif kind == REPORT:
                self._reports[str(record["member"])] = record
            elif kind == PLAN:
                self._plan = record
            elif kind == REQUEST and str(record.get("from")) != self.member_id:
                self._report_due = True

    # -- leading ----------------------------------------------------------------------------------

    def _leads(self) -> bool:
        members = self._members_now()
        return bool(members) and members[0] == self.member_id

    def _members_now(self) -> list[str]:
        # Asked again whenever a report comes from a member not known yet (joins change the set).
        if (
            not self._live
            or any(m not in self._live for m in self._reports)
            or self.member_id not in self._live
        ):
            self._live = sorted(self._members())
            self._live_at = time.monotonic()
        return self._live

    def _i_lead_without_plan(self) -> bool:
        return self._plan is None and self._leads()

    def _maybe_plan(self, now: float) -> None:
        members = self._members_now()
        reported = frozenset(m for m in members if m in self._reports)
        if self._my_plan_members == reported and self._plan is not None:
            return  # the plan out there answers these reports
        missing = [m for m in members if m not in self._reports]
        if missing and now - self._joined_at < PLAN_DEADLINE_S:
            if now - self._asked_at >= ASK_AGAIN_S / 4:
                self._asked_at = now
                self._channel.publish(
                    {"kind": REQUEST, "generation": self.generation, "from": self.member_id}
                )
            return
        if missing:
            logger.warning(
                "Group %s: no report from %s within %.0fs; assigning without their state",
                self._group_id,
                missing,
                PLAN_DEADLINE_S,
            )
        subscriptions = {m: _userdata(self._reports.get(m)) for m in members}
        decided = self._assignor.assign(subscriptions, self._partition_counts())
        owners = {
            TopicPartition(t, p): m
            for m, r in self._reports.items()
            if m in members
            for t, p in r.get("owned", ())
        }
        plan_members = {}
        for member in members:
            given = decided.get(member)
            partitions = sorted(given.partitions) if given is not None else []
            moving = {
                f"{tp.topic}:{tp.partition}": owners[tp]
                for tp in partitions
                if tp in owners and owners[tp] != member
            }
            plan_members[member] = {
                "partitions": [[tp.topic, tp.partition] for tp in partitions],
                "userdata": base64.b64encode(given.userdata if given is not None else b"").decode(),
                "from": moving,
            }
        plan = {"kind": PLAN, "generation": self.generation, "id": str(uuid.uuid4()), "members": plan_members}
        self._channel.publish(plan)
        self._my_plan_members = reported
        # Followed at once; the record read back later is the same plan.
        self._plan = plan
        logger.info(
            "Group %s: published the assignment of generation %d for %d member(s)",
            self._group_id,
            self.generation,
            len(members),
        )

    # -- following --------------------------------------------------------------------------------

    def _next_step(self, owned: set[TopicPartition]) -> PlanStep | None:
        plan = self._plan
        if plan is None:
            return None
        mine = plan["members"].get(self.member_id)
        if mine is None:
            # The plan predates our report: report again, which makes the leader plan again.
            if time.monotonic() - self._reported_at >= ASK_AGAIN_S:
                self._report_due = True
            return None
        following = self._following
        if following is None or following.plan_id != plan["id"]:
            partitions = {TopicPartition(t, int(p)) for t, p in mine["partitions"]}
            previous = {}
            for name, owner in mine.get("from", {}).items():
                topic, _, partition = name.rpartition(":")
                previous[TopicPartition(topic, int(partition))] = str(owner)
            self._following = following = _Following(plan["id"], partitions, previous)
            return PlanStep(
                plan["id"],
                userdata=base64.b64decode(mine.get("userdata", "")),
                revoke=sorted(owned - partitions),
                acknowledge=True,
                acquire=self._ready(following, owned),
                first=True,
            )
        acquire = self._ready(following, owned)
        return PlanStep(plan["id"], acquire=acquire) if acquire else None

    def _ready(self, following: _Following, owned: set[TopicPartition]) -> list[TopicPartition]:
        """Partitions of the plan this member may take now: nobody else held them, or their
        previous owner acknowledged the plan or left the group."""
        missing = following.partitions - owned
        if not missing:
            return []  # the usual case, at every poll: nothing to look up
        acked = self._acks.get(following.plan_id, set())
        live = set(self._members_now())
        ready = []
        for tp in sorted(missing):
            owner = following.previous_owner.get(tp)
            if owner is None or owner in acked or owner not in live:
                ready.append(tp)
        now = time.monotonic()
        if len(ready) < len(missing) and now - self._live_at >= ASK_AGAIN_S / 2:
            self._live = []  # an owner that left the group is seen at the next look
        return ready


def _userdata(report: dict | None) -> bytes:
    if report is None:
        return b""
    try:
        return base64.b64decode(report.get("userdata", ""))
    except ValueError:
        return b""
