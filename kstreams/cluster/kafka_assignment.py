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

Every wait of the protocol is bounded and named (``AssignmentWatch``): from the moment a member
has no settled assignment (it subscribed, its group rebalances, it follows a new plan, or partitions
of its plan are still held by their previous owners) it measures the wait and keeps retrying; after
``ASSIGNMENT_WARNING_S`` it logs a WARNING naming what it waits for (a join, the coordinator's
member list, members' reports, the leader's plan, previous owners' acknowledgements, the cluster)
and how long, again every ``ASSIGNMENT_WARNING_REPEAT_S``; once the wait passes its bound (by
default twice the member's ``max.poll.interval.ms`` plus ``PLAN_DEADLINE_S``: the coordinator waits
up to max.poll.interval.ms for members to rejoin, a previous owner that stops polling is expelled
after as long, and a leader waits ``PLAN_DEADLINE_S`` for reports) ``step`` raises
``TaskAssignmentException`` with that description, which ends the polling thread and reaches the
uncaught exception handler. ``AssignmentWatch.seconds`` is the current wait (0 when settled), the
``assignment-wait-seconds`` metric.

Threads: used only by the thread that polls the consumer (the polling thread), inside ``poll``;
``AssignmentWatch.seconds`` may be read from any thread (a float replaced under the GIL).
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
from kstreams.errors import TaskAssignmentException

__all__ = [
    "ASSIGNMENT_WARNING_REPEAT_S",
    "ASSIGNMENT_WARNING_S",
    "AssignmentWatch",
    "PlanStep",
    "PlannedAssignment",
    "assignment_give_up_s",
]

logger = logging.getLogger(__name__)

REPORT = ASSIGNMENT_KIND_PREFIX + "report"
PLAN = ASSIGNMENT_KIND_PREFIX + "plan"
APPLIED = ASSIGNMENT_KIND_PREFIX + "applied"
REQUEST = ASSIGNMENT_KIND_PREFIX + "request"
# How long before a member that waits for the others asks again.
ASK_AGAIN_S = 2.0
# How long the leader waits for a member's report before assigning without it.
PLAN_DEADLINE_S = 10.0
# How long a member waits without a settled assignment before it warns, naming what it waits for;
# then how often it warns again while the wait lasts.
ASSIGNMENT_WARNING_S = 15.0
ASSIGNMENT_WARNING_REPEAT_S = 60.0
# The most often a member asks the coordinator again for a member list that does not include it,
# or that lacks a member that reported: each ask is a request (up to PROTOCOL_TIMEOUT_S), and a
# broker that never lists it would otherwise be asked at every poll.
MEMBERS_RETRY_S = 0.5


def assignment_give_up_s(max_poll_interval_ms: int) -> float:
    """How long a member waits for a settled assignment before it gives up: twice
    ``max_poll_interval_ms`` (the coordinator's rebalance timeout for rejoining members; the time
    after which a previous owner that stopped polling leaves the group) plus ``PLAN_DEADLINE_S``."""
    return 2 * max_poll_interval_ms / 1000.0 + PLAN_DEADLINE_S


class AssignmentWatch:
    """How long one member has waited for a settled assignment, and for what; warns and gives up.

    ``observe`` is called at every step of the protocol with what the member waits for now (None:
    settled). ``warn_after_s`` (at most half of ``give_up_after_s``) is when the first WARNING comes;
    ``give_up_after_s`` is when ``observe`` raises ``TaskAssignmentException``.
    """

    def __init__(
        self,
        group_id: str,
        give_up_after_s: float,
        warn_after_s: float = ASSIGNMENT_WARNING_S,
        repeat_s: float = ASSIGNMENT_WARNING_REPEAT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._group_id = group_id
        self._give_up_s = give_up_after_s
        self._warn_s = min(warn_after_s, give_up_after_s / 2)
        self._repeat_s = repeat_s
        self._clock = clock
        self._since: float | None = None  # when the current wait began (None: settled)
        self._next_warning = 0.0
        self._warned = False
        self.waiting_for: str | None = None

    @property
    def seconds(self) -> float:
        """How long the current wait has lasted (0.0 while the assignment is settled)."""
        since = self._since  # read once: the polling thread may end the wait meanwhile
        return 0.0 if since is None else max(0.0, self._clock() - since)

    def observe(self, waiting_for: str | None) -> None:
        """Note what the member waits for now (None: nothing); warn, or give up, when due."""
        now = self._clock()
        if waiting_for is None:
            if self._since is not None and self._warned:
                logger.info(
                    "Group %s: the assignment is complete after %.1fs of waiting",
                    self._group_id,
                    now - self._since,
                )
            self._since, self._warned, self.waiting_for = None, False, None
            return
        if self._since is None:
            self._since = now
            self._next_warning = now + self._warn_s
        self.waiting_for = waiting_for
        waited = now - self._since
        if waited >= self._give_up_s:
            raise TaskAssignmentException(
                f"Group {self._group_id}: no assignment after {waited:.0f}s of waiting for {waiting_for}; "
                f"gave up after {self._give_up_s:.0f}s (twice the member's max.poll.interval.ms plus "
                f"{PLAN_DEADLINE_S:.0f}s). Check that the broker supports what the wait names, that every "
                "member of the application runs and reaches the cluster, then restart the client"
            )
        if now >= self._next_warning:
            self._warned = True
            self._next_warning = now + self._repeat_s
            logger.warning(
                "Group %s: the assignment has waited %.0fs for %s; retrying (gives up after %.0fs)",
                self._group_id,
                waited,
                waiting_for,
                self._give_up_s,
            )


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
        *,
        give_up_after_s: float = assignment_give_up_s(300_000),
        warn_after_s: float = ASSIGNMENT_WARNING_S,
        members_note: Callable[[], str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._group_id = group_id
        self._assignor = assignor
        self._channel = channel
        self._members = members
        self._partition_counts = partition_counts
        # What the member list came from, said when it lacks this member (see _waiting_for).
        self._members_note = members_note
        self._clock = clock
        self.watch = AssignmentWatch(group_id, give_up_after_s, warn_after_s, clock=clock)
        self.member_id = ""
        self.generation = -1
        self._joining = True  # subscribed or rebalancing, not yet in the next generation
        self._report_due = False
        self._replan_due = False  # the next report asks the leader for a new plan
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
        self._live_at: float | None = None  # when the coordinator was last asked (None: ask now)
        self._live_reporters: frozenset[str] = frozenset()  # the reports known when it was asked
        self._ack_due: str | None = None
        self._failing: ClusterError | None = None

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
            self._live_at = None
        self.generation = generation
        self.member_id = member_id
        self._joining = False
        self._report_due = True
        self._joined_at = self._clock()

    def request_replan(self) -> None:
        """Ask for a new plan within this generation, made from the members' reports with this
        member's report renewed (a probing rebalance: its warm-ups caught up; or topics grew). On
        Apache Kafka a follower's rejoin with an unchanged subscription is answered with the
        current generation and no rebalance, so a new assignment is asked of the leader instead."""
        self._report_due = True
        self._replan_due = True

    def rejoining(self) -> None:
        """The membership consumer left its generation to join the next one (a rebalance began,
        or its membership was lost): the member keeps what it has and waits for the join."""
        self._joining = True

    def step(self, owned: set[TopicPartition]) -> PlanStep | None:
        """Publish, read and decide; the next thing to do with the fetching consumer, if any. A
        cluster call that fails (the broker is away) is tried again at the next poll: meanwhile
        the member keeps what it has. Raises ``TaskAssignmentException`` once the member has
        waited longer than its bound for a settled assignment (see ``AssignmentWatch``)."""
        step = None
        if self.generation >= 0 and self.member_id:
            try:
                step = self._step(owned)
            except ClusterError as exc:
                if self._failing is None:
                    logger.warning(
                        "Group %s: the assignment protocol waits for the cluster: %s", self._group_id, exc
                    )
                self._failing = exc
            else:
                if self._failing is not None:
                    logger.info("Group %s: the assignment protocol goes on", self._group_id)
                    self._failing = None
        # Judged on what the member will own once the step is applied.
        if step is not None:
            owned = (owned - set(step.revoke)) | set(step.acquire)
        self.watch.observe(self._waiting_for(owned, step))
        return step

    def _step(self, owned: set[TopicPartition]) -> PlanStep | None:
        now = self._clock()
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
                "replan": self._replan_due,
            }
        )
        self._report_due = False
        self._replan_due = False
        self._reported_at = self._clock()

    def _take(self, records: list[dict]) -> None:
        for record in records:
            kind = record.get("kind")
            if kind == APPLIED:
                self._acks.setdefault(str(record.get("plan")), set()).add(str(record.get("member")))
            elif record.get("generation") != self.generation:
                continue
            elif kind == REPORT:
                self._reports[str(record["member"])] = record
                if record.get("replan"):
                    self._my_plan_members = None  # a leader plans again, with this report
            elif kind == PLAN:
                self._plan = record
            elif kind == REQUEST and str(record.get("from")) != self.member_id:
                self._report_due = True

    # -- leading ----------------------------------------------------------------------------------

    def _leads(self) -> bool:
        members = self._members_now()
        return bool(members) and members[0] == self.member_id

    def _members_now(self) -> list[str]:
        # Asked again whenever a report comes from a member not known yet (joins change the set),
        # and while the list lacks this member; the same question at most every MEMBERS_RETRY_S.
        if (
            not self._live
            or any(m not in self._live for m in self._reports)
            or self.member_id not in self._live
        ):
            now = self._clock()
            reporters = frozenset(self._reports)
            if (
                self._live_at is None
                or reporters != self._live_reporters
                or now - self._live_at >= MEMBERS_RETRY_S
            ):
                self._live = sorted(self._members())
                self._live_at, self._live_reporters = now, reporters
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
            if self._clock() - self._reported_at >= ASK_AGAIN_S:
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
        now = self._clock()
        if len(ready) < len(missing) and now - (self._live_at or 0.0) >= ASK_AGAIN_S / 2:
            self._live = []  # an owner that left the group is seen at the next look
        return ready

    # -- waiting ----------------------------------------------------------------------------------

    def _waiting_for(self, owned: set[TopicPartition], step: PlanStep | None) -> str | None:
        """What keeps this member from a settled assignment now, in words for a warning (None:
        nothing). ``owned`` is what it holds once ``step`` is applied."""
        topic = self._channel.topic
        if self._joining or self.generation < 0 or not self.member_id:
            after = f" after generation {self.generation}" if self.generation >= 0 else ""
            return (
                f"the group coordinator to let this member join the group's next generation{after} "
                "(JoinGroup and SyncGroup of its membership consumer, which librdkafka retries)"
            )
        if self._failing is not None:
            return f"the cluster, whose calls fail: {self._failing}"
        if self.member_id not in self._live:
            listed = ", ".join(self._live) if self._live else "no members"
            note = f"; {self._members_note()}" if self._members_note is not None else ""
            return (
                f"the group coordinator to list this member ({self.member_id}) among the members of "
                f"generation {self.generation} (its group description names {listed}{note})"
            )
        plan, following = self._plan, self._following
        if plan is None:
            if self._live[0] == self.member_id:
                missing = [m for m in self._live if m not in self._reports]
                return (
                    f"the reports of {missing or 'the members'} for generation {self.generation} on "
                    f"{topic} ({self._channel.progress()}), to plan the assignment as the leader"
                )
            return (
                f"the assignment plan of generation {self.generation} from its leader "
                f"{self._live[0]} on {topic} ({self._channel.progress()})"
            )
        if self.member_id not in plan["members"]:
            return (
                f"a plan of generation {self.generation} that includes this member (the latest on "
                f"{topic} assigns only {sorted(plan['members'])}; this member reported again)"
            )
        if following is None or following.plan_id != plan["id"]:
            return f"this member to follow plan {plan['id']} of generation {self.generation}"
        # A first step of a plan is acknowledged as the consumer applies it, right after this.
        if not (following.acknowledged or (step is not None and step.acknowledge)):
            return f"the acknowledgement of plan {following.plan_id} to reach {topic}"
        held = sorted(following.partitions - owned)
        if held:
            owners = sorted({following.previous_owner.get(tp, "?") for tp in held})
            return (
                f"the previous owners {owners} of {held} to acknowledge plan {following.plan_id} on "
                f"{topic} or leave the group"
            )
        return None


def _userdata(report: dict | None) -> bytes:
    if report is None:
        return b""
    try:
        return base64.b64decode(report.get("userdata", ""))
    except ValueError:
        return b""
