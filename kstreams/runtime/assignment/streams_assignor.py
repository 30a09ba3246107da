"""The application's group assignor: where tasks run, decided from where their state is.

Kafka Streams assigns tasks with its own partition assignor (StreamsPartitionAssignor, KIP-441's
high-availability task assignor); kstreams does the same through the port's ``GroupAssignor``:

- ``subscription`` is this client's report, sent as the member's user data: its process id, its
  stream threads, the tasks active here, its standby tasks, and per stateful task whose state it
  holds (open, standby, or checkpointed on disk) the lag of that state behind the changelogs' end,
  in records (a running active task reports 0). Lags are measured by the client that holds the
  state (one end-offset request per report), so that ``assign`` needs no cluster call: the
  embedded cluster runs it under its lock, and every member's answer to the same reports is the
  same.
- ``assign`` (the group's leader) maps partitions to tasks with the topology, runs
  ``assign_tasks`` (kstreams.runtime.assignment.task_assignor) and gives every member the partitions of its
  active tasks, plus user data with its standby and warm-up tasks and whether a probing rebalance
  is due.
- ``on_assignment`` keeps this member's standby and warm-up tasks for the standby placer, and the
  time of the probing rebalance for the polling thread. Warm-up replicas are standby tasks (as in
  Kafka): the restore thread keeps them current, and once their lag is within
  ``acceptable.recovery.lag`` the next (probing) rebalance makes them active.

User data is JSON: ``{"format": 1, ...}``. A member whose user data cannot be read (another
version) counts as a client with one thread and no state.

Threads: ``subscription`` and ``on_assignment`` run on the polling thread (inside the consumer's
poll); ``assign`` may run on any member's thread and reads only the topology and its arguments.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kstreams.cluster.port import Admin, ClusterError, MemberAssignment, TopicPartition
from kstreams.processor import TaskId
from kstreams.runtime.assignment.task_assignor import ClientReport, assign_tasks
from kstreams.state.checkpoint import TaskOffsetCheckpoint

if TYPE_CHECKING:
    from kstreams.config import StreamsConfig
    from kstreams.metrics import MetricsRegistry
    from kstreams.runtime.restoration.state_updater import StateUpdater
    from kstreams.runtime.tasks.task_manager import TaskManager
    from kstreams.topology.plan import TopologyPlan

__all__ = ["ReceivedAssignment", "StreamsAssignor", "tasks_of"]

logger = logging.getLogger(__name__)

_FORMAT = 1


def tasks_of(plan: TopologyPlan, partitions: Mapping[str, int]) -> dict[TaskId, list[TopicPartition]]:
    """Every task of the topology with its input partitions, for the given topic partition counts
    (a topic the topology does not read is skipped)."""
    tasks: dict[TaskId, list[TopicPartition]] = {}
    for topic, count in sorted(partitions.items()):
        try:
            sub = plan.subtopology_for_topic(topic)
        except KeyError:
            continue
        for partition in range(count):
            tasks.setdefault(TaskId(sub.id, partition), []).append(TopicPartition(topic, partition))
    return tasks


@dataclass(frozen=True)
class ReceivedAssignment:
    """What this member got in the last rebalance, besides its partitions."""

    standby: frozenset[TaskId] = frozenset()
    warmup: frozenset[TaskId] = frozenset()
    probing_rebalance: bool = False


class StreamsAssignor:
    """The ``GroupAssignor`` of one KafkaStreams client (see the module docstring)."""

    def __init__(
        self,
        process_id: str,
        config: StreamsConfig,
        plan: TopologyPlan,
        tasks: TaskManager,
        state_updater: StateUpdater,
        admin: Admin,
        threads: Callable[[], int],
        metrics: MetricsRegistry,
    ) -> None:
        self._process_id = process_id
        self._plan = plan
        self._tasks = tasks
        self._state_updater = state_updater
        self._admin = admin
        self._threads = threads
        self._standby_replicas = int(config["num.standby.replicas"])
        self._max_warmups = int(config["max.warmup.replicas"])
        self._acceptable_lag = int(config["acceptable.recovery.lag"])
        self.probing_interval_s = int(config["probing.rebalance.interval.ms"]) / 1000.0
        self._lock = threading.Lock()  # a leaf: guards ``received`` for readers on other threads
        self._received = ReceivedAssignment()
        self._warming: frozenset[TaskId] = frozenset()
        tags = {"client-id": process_id}
        # Group-wide figures of each rebalance, as the leader's assignment reports them to every
        # member, and this client's own warm-ups (started, and promoted to active tasks).
        self._moved = metrics.sensor(
            "rebalance-tasks-moved", "stream-client-metrics", tags, rate=False, total_of_values=True
        )
        self._warmups = metrics.sensor(
            "warmups-started", "stream-client-metrics", tags, rate=False, total_of_values=True
        )
        self._promoted = metrics.sensor(
            "warmups-promoted", "stream-client-metrics", tags, rate=False, total_of_values=True
        )

    @property
    def received(self) -> ReceivedAssignment:
        with self._lock:
            return self._received

    # -- GroupAssignor ----------------------------------------------------------------------------

    def subscription(self) -> bytes:
        active = set(self._tasks.task_ids())
        standbys = self._state_updater.standby_positions()
        lags, sizes = self._lags(active, standbys)
        report = {
            "format": _FORMAT,
            "process": self._process_id,
            "threads": max(1, self._threads()),
            "active": sorted(str(t) for t in active),
            "standby": sorted(str(t) for t in standbys),
            "lags": {str(t): lag for t, lag in sorted(lags.items())},
            "sizes": {str(t): size for t, size in sorted(sizes.items()) if size},
        }
        return json.dumps(report, separators=(",", ":")).encode()

    def assign(
        self, subscriptions: Mapping[str, bytes], partition_counts: Mapping[str, int]
    ) -> dict[str, MemberAssignment]:
        tasks = tasks_of(self._plan, partition_counts)
        stateful = [t for t in tasks if self._plan.subtopology(t.subtopology).changelog_topics]
        stateless = [t for t in tasks if not self._plan.subtopology(t.subtopology).changelog_topics]
        reports = {member: _report(member, data) for member, data in subscriptions.items()}
        # A client without state for a task must restore all of its changelogs (Kafka counts its
        # offset sum as 0): an empty changelog makes every client caught up.
        sizes: dict[TaskId, int] = {}
        for _, task_sizes in reports.values():
            for task, size in task_sizes.items():
                sizes[task] = max(size, sizes.get(task, 0))
        clients = {
            member: replace(report, lags={**{t: sizes.get(t, 0) for t in stateful}, **report.lags})
            for member, (report, _) in reports.items()
        }
        result = assign_tasks(
            clients,
            stateful,
            stateless,
            num_standby_replicas=self._standby_replicas,
            max_warmup_replicas=self._max_warmups,
            acceptable_recovery_lag=self._acceptable_lag,
        )
        warmups = sum(len(a.warmup) for a in result.clients.values())
        logger.info(
            "Assigned %d task(s) to %d client(s): %d moved, %d warm-up replica(s)%s",
            len(tasks),
            len(clients),
            len(result.moved),
            warmups,
            f"; a probing rebalance follows in {self.probing_interval_s:g}s"
            if result.probing_rebalance_needed
            else "",
        )
        # One member asks for the probing rebalance (a rejoin of one member rebalances the group):
        # the first that warms up a task, else the first member.
        warming = sorted(m for m, a in result.clients.items() if a.warmup) or sorted(result.clients)
        prober = warming[0] if result.probing_rebalance_needed and warming else None
        assignments = {}
        for member, given in result.clients.items():
            partitions = sorted(tp for task in given.active for tp in tasks[task])
            userdata = {
                "format": _FORMAT,
                "standby": sorted(str(t) for t in given.standby),
                "warmup": sorted(str(t) for t in given.warmup),
                "probing": member == prober,
                "moved": len(result.moved),
            }
            assignments[member] = MemberAssignment(tuple(partitions), json.dumps(userdata).encode())
        return assignments

    def on_assignment(self, userdata: bytes) -> None:
        try:
            data = json.loads(userdata) if userdata else {}
            received = ReceivedAssignment(
                frozenset(TaskId.parse(t) for t in data.get("standby", ())),
                frozenset(TaskId.parse(t) for t in data.get("warmup", ())),
                bool(data.get("probing", False)),
            )
        except (ValueError, TypeError, AttributeError):
            logger.warning("Ignoring assignment user data this client cannot read: %r", userdata[:200])
            received = ReceivedAssignment()
        moved = int(data.get("moved", 0)) if isinstance(data, dict) else 0
        with self._lock:
            previous, self._received = self._received, received
            # Warm-ups until they become active here (promoted), possibly some plans later.
            self._warming = self._warming | received.warmup
        self._moved.record(moved)
        started = received.warmup - previous.warmup
        self._warmups.record(len(started))
        if started:
            logger.info("Warming up %s here", sorted(map(str, started)))

    def promoted(self, task_ids: set[TaskId]) -> None:
        """Tasks just assigned here as active: those that were warming up here are promoted."""
        with self._lock:
            promoted = task_ids & self._warming
            self._warming = self._warming - promoted
        if promoted:
            self._promoted.record(len(promoted))
            logger.info("Warm-up replicas %s caught up and are active here now", sorted(map(str, promoted)))

    def partitions_of(self, task_id: TaskId) -> list[TopicPartition]:
        """The input partitions of a task (for the standby and warm-up tasks it is told to keep)."""
        sub = self._plan.subtopology(task_id.subtopology)
        return sorted(TopicPartition(topic, task_id.partition) for topic in sub.source_topics)

    # -- lags -------------------------------------------------------------------------------------

    def _lags(
        self, active: set[TaskId], standbys: Mapping[TaskId, Mapping[TopicPartition, int]]
    ) -> tuple[dict[TaskId, int], dict[TaskId, int]]:
        """Records each held task's state is behind its changelogs' end (0 for active tasks, the
        standby's position for standbys, the checkpoint for task directories on disk), and the
        records in every stateful task's changelogs (what a client without its state restores)."""
        positions: dict[TaskId, Mapping[TopicPartition, int]] = dict(standbys)
        for name in self._tasks.state_directory.task_dirs():
            try:
                task_id = TaskId.parse(name)
                self._plan.subtopology(task_id.subtopology)
            except (ValueError, KeyError):
                continue
            if task_id in active or task_id in positions:
                continue
            try:
                path = self._tasks.state_directory.checkpoint_path(task_id)
                positions[task_id] = TaskOffsetCheckpoint(path).read()
            except Exception:  # an unreadable checkpoint is wiped on open: no usable state
                continue
        lags: dict[TaskId, int] = dict.fromkeys(active, 0)
        try:
            names = sorted({t for sub in self._plan.subtopologies for t in sub.changelog_topics.values()})
            counts = (
                {name: d.partitions for name, d in self._admin.describe_topics(names).items()}
                if names
                else {}
            )
            changelogs: dict[TaskId, list[TopicPartition]] = {}
            for sub in self._plan.subtopologies:
                for topic in sub.changelog_topics.values():
                    for partition in range(counts.get(topic, 0)):
                        tp = TopicPartition(topic, partition)
                        changelogs.setdefault(TaskId(sub.id, partition), []).append(tp)
            offsets = self._admin.list_offsets(sorted(tp for tps in changelogs.values() for tp in tps))
        except ClusterError as exc:
            logger.warning("Could not measure the lag of local state (%s): reporting active tasks only", exc)
            return lags, {}
        sizes = {t: sum(offsets[tp][1] - offsets[tp][0] for tp in tps) for t, tps in changelogs.items()}
        for task_id, held in positions.items():
            lag = 0
            for tp in changelogs.get(task_id, ()):
                start, end = offsets[tp]
                lag += max(0, end - max(start, held.get(tp, start)))
            lags[task_id] = lag
        return lags, sizes

    def _changelogs(self, task_id: TaskId) -> list[TopicPartition]:
        sub = self._plan.subtopology(task_id.subtopology)
        return sorted(TopicPartition(topic, task_id.partition) for topic in sub.changelog_topics.values())


def _report(member: str, data: bytes) -> tuple[ClientReport, dict[TaskId, int]]:
    """A member's subscription and the changelog sizes it saw, or a stateless one-thread client
    when it cannot be read."""
    try:
        report = json.loads(data) if data else None
        if not isinstance(report, dict) or report.get("format") != _FORMAT:
            raise ValueError("not a kstreams subscription")
        client = ClientReport(
            process_id=member,
            threads=max(1, int(report.get("threads", 1))),
            active=frozenset(TaskId.parse(t) for t in report.get("active", ())),
            standby=frozenset(TaskId.parse(t) for t in report.get("standby", ())),
            lags={TaskId.parse(t): int(lag) for t, lag in report.get("lags", {}).items()},
        )
        return client, {TaskId.parse(t): int(n) for t, n in report.get("sizes", {}).items()}
    except (ValueError, TypeError, AttributeError):
        logger.warning("Member %s sent a subscription this client cannot read; assuming no state", member)
        return ClientReport(process_id=member, threads=1), {}
