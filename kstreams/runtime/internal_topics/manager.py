"""The internal topic manager: one place that sets up and checks an application's internal topics.

``InternalTopicManager`` serves every moment Kafka Streams looks at its internal topics:

- ``setup_for_rebalance()``, called by the runtime at start-up and on every rebalance, computes the
  partition count of every repartition and changelog topic and the task count of every subtopology
  (``partition_counts``), checks the topics on the cluster (``validation``) and then, by
  ``internal.topics.setup``:
  "automatic" creates missing topics and rectifies (where safe) or logs misconfigured configs;
  "manual" never creates: a missing topic raises ``MissingInternalTopicsException``, a misconfigured
  one ``MisconfiguredInternalTopicException``.
  A wrong partition count is fatal in both modes, except that with ``partition.autoscaling.enabled`` a
  topic with too few partitions is expanded (``autoscaling``, KIP-878).
- ``init()`` (``KafkaStreams.init()``, KIP-698) checks in the KIP's order: misconfiguration, missing
  source topics, then creates all internal topics if none exists, refuses if all exist, and creates the
  missing ones of an incomplete setup only when ``InitParameters`` allow it.
- the control topic ``<application.id>-control`` is created with the internal topics.

Retriable cluster errors are retried until the call's deadline (``TimeoutError`` past it); others
become ``StreamsException``. Deadlines use the monotonic clock; the injected ``clock`` times the
autoscaling timeout, so tests can move it.

Thread safety: ``setup_for_rebalance`` runs on the polling thread and ``init`` on the user's thread
before start; the metric reads (``current_parallelism``, ``expected_parallelism``,
``autoscaling_failures``) may come from any thread. ``_lock`` guards the last computed parallelism and
the set of misconfigurations already logged; it is never held during a call to the cluster.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from kstreams.cluster.port import Admin, ClusterError, TopicDescription, TopicExistsError
from kstreams.config import MANUAL_SETUP, StreamsConfig
from kstreams.errors import (
    InternalTopicsAlreadySetupException,
    MisconfiguredInternalTopicException,
    MissingInternalTopicsException,
    MissingSourceTopicException,
    StreamsException,
)
from kstreams.init_parameters import InitParameters
from kstreams.metrics import MetricsRegistry
from kstreams.runtime.internal_topics.autoscaling import PartitionAutoscaler
from kstreams.runtime.internal_topics.partition_counts import PartitionCounts, compute_partition_counts
from kstreams.runtime.internal_topics.requirements import (
    InternalTopicRequirement,
    control_topic_requirement,
    topic_requirement,
)
from kstreams.runtime.internal_topics.validation import TopicProblem, validate_topic
from kstreams.topology.plan import TopologyPlan

__all__ = ["DEFAULT_TIMEOUT_S", "InternalTopicManager", "SetupResult"]

logger = logging.getLogger(__name__)

# The default of default.api.timeout.ms (config.py), which a call without its own timeout follows.
DEFAULT_TIMEOUT_S = 60.0

_T = TypeVar("_T")


@dataclass(frozen=True)
class SetupResult:
    """What ``setup_for_rebalance`` found and did; the assignment reads its counts.

    - ``partition_counts``: partitions of every source (external and repartition) and changelog topic
      as they are on the cluster now, which is what may be assigned;
    - ``required_partition_counts``: the counts the topology requires (targets of autoscaling);
    - ``task_counts``: tasks per subtopology that can run now (``current_parallelism``): while an
      internal topic of a subtopology is short of partitions, only as many tasks as it has;
    - ``expected_task_counts``: tasks per subtopology once every internal topic has its required count;
    - ``created`` / ``expanded``: topics created or grown, with their partition counts;
    - ``rectified``: configs set on misconfigured topics; ``misconfigurations``: problems left as they
      are (logged, automatic mode only);
    - ``followup_rebalance`` and ``followup_delay_s``: the runtime must rebalance again after that many
      seconds (autoscaling grew topics, or must retry).
    """

    partition_counts: dict[str, int]
    required_partition_counts: dict[str, int]
    task_counts: dict[int, int]
    expected_task_counts: dict[int, int]
    created: dict[str, int] = field(default_factory=dict)
    expanded: dict[str, int] = field(default_factory=dict)
    rectified: dict[str, dict[str, str]] = field(default_factory=dict)
    misconfigurations: tuple[str, ...] = ()
    followup_rebalance: bool = False
    followup_delay_s: float = 0.0


class InternalTopicManager:
    """Computes, validates, creates and expands the internal topics of one application.

    ``admin`` is the cluster's admin client, ``plan`` the built topology. ``clock`` (seconds) times the
    autoscaling timeout. ``retry_backoff_s`` is the pause between retries of a retriable cluster error
    and the delay of a follow-up rebalance that retries autoscaling; ``expansion_settle_s`` the delay of
    the follow-up rebalance after a successful expansion (KIP-878: brokers may take seconds to learn of
    new partitions). ``with_control_topic`` False leaves the control topic out.
    """

    def __init__(
        self,
        admin: Admin,
        config: StreamsConfig,
        plan: TopologyPlan,
        clock: Callable[[], float] = time.monotonic,
        *,
        retry_backoff_s: float = 0.1,
        expansion_settle_s: float = 10.0,
        with_control_topic: bool = True,
    ) -> None:
        self._admin = admin
        self._config = config
        self._default_timeout_s = int(config["default.api.timeout.ms"]) / 1000.0
        self._plan = plan
        self._retry_backoff_s = retry_backoff_s
        self._expansion_settle_s = expansion_settle_s
        self._control = control_topic_requirement(config) if with_control_topic else None
        self._manual = config["internal.topics.setup"] == MANUAL_SETUP
        self._autoscaling_enabled = bool(config["partition.autoscaling.enabled"])
        self._replication_factor = int(config["replication.factor"])
        self._autoscaler = PartitionAutoscaler(admin, int(config["partition.autoscaling.timeout.ms"]), clock)
        self._lock = threading.Lock()
        self._current_tasks: dict[int, int] = {}  # guarded by _lock
        self._expected_tasks: dict[int, int] = {}  # guarded by _lock
        self._logged: set[str] = set()  # guarded by _lock

    # -- metrics ------------------------------------------------------------------------------------

    @property
    def autoscaling_failures(self) -> int:
        """Times autoscaling gave up after partition.autoscaling.timeout.ms (num-autoscaling-failures)."""
        return self._autoscaler.failures

    def current_parallelism(self, subtopology_id: int) -> int:
        """Tasks the subtopology can run with the partitions on the cluster at the last check (0 before)."""
        with self._lock:
            return self._current_tasks.get(subtopology_id, 0)

    def expected_parallelism(self, subtopology_id: int) -> int:
        """Tasks the subtopology will run once its internal topics have their required partitions."""
        with self._lock:
            return self._expected_tasks.get(subtopology_id, 0)

    def register_metrics(self, registry: MetricsRegistry, client_tags: Mapping[str, str]) -> None:
        """Register KIP-878's gauges: current-subtopology-parallelism for every subtopology, and, when
        partition.autoscaling.enabled, expected-subtopology-parallelism and num-autoscaling-failures."""

        def reader(read: Callable[[int], int], sid: int) -> Callable[[], float]:
            return lambda: float(read(sid))

        for sub in self._plan.subtopologies:
            tags = {**client_tags, "subtopology-id": str(sub.id)}
            registry.gauge(
                "current-subtopology-parallelism",
                "stream-subtopology-metrics",
                tags,
                reader(self.current_parallelism, sub.id),
            )
            if self._autoscaling_enabled:
                registry.gauge(
                    "expected-subtopology-parallelism",
                    "stream-subtopology-metrics",
                    tags,
                    reader(self.expected_parallelism, sub.id),
                )
        if self._autoscaling_enabled:
            registry.gauge(
                "num-autoscaling-failures",
                "stream-client-metrics",
                dict(client_tags),
                lambda: float(self.autoscaling_failures),
            )

    # -- the control topic --------------------------------------------------------------------------

    @property
    def control_topic(self) -> str | None:
        """The name of the application's control topic (None when it is left out)."""
        return None if self._control is None else self._control.name

    def ensure_control_topic(self, timeout: float | None = None) -> bool:
        """Create the control topic if it does not exist; True if this call created it."""
        if self._control is None:
            return False
        deadline = self._deadline(timeout)
        existing = self._describe([self._control.name], deadline, "describe the control topic")
        if self._control.name in existing:
            return False
        return bool(self._create([self._control], deadline))

    # -- rebalances ---------------------------------------------------------------------------------

    def setup_for_rebalance(self, timeout: float | None = None) -> SetupResult:
        """Check and set up the internal topics for an assignment; see the module doc for the rules.

        Raises ``MissingSourceTopicException``, ``MisconfiguredInternalTopicException``,
        ``MissingInternalTopicsException`` (manual mode), ``TopologyException`` (co-partitioning),
        ``TaskAssignmentException`` (counts cannot be computed), ``TimeoutError`` (the cluster kept
        failing retriably past ``timeout`` seconds, default default.api.timeout.ms).
        """
        deadline = self._deadline(timeout)
        snapshot = self._describe(self._all_topic_names(), deadline, "describe the application's topics")
        counts = compute_partition_counts(self._plan, self._source_counts(snapshot))
        requirements = self._requirements(counts)
        missing = [r for r in requirements if r.name not in snapshot]
        problems = self._problems(requirements, snapshot)

        under = [p for p in problems if p.kind == "under_partitioned"]
        config_problems = [p for p in problems if p.kind == "config"]
        fatal = [p for p in problems if p.kind == "over_partitioned"]
        if not self._autoscaling_enabled:
            fatal += under
        if self._manual:
            fatal += config_problems
        if fatal:
            raise MisconfiguredInternalTopicException(self._misconfigured_message(fatal))
        if missing and self._manual:
            raise MissingInternalTopicsException(self._missing_message(missing), [r.name for r in missing])

        created = self._create(missing, deadline) if missing else {}
        rectified, left = self._rectify(config_problems) if config_problems else ({}, [])

        effective = dict(counts.topics)
        current = {n: d.partitions for n, d in snapshot.items() if n in self._plan.internal_topics}
        effective.update(current)
        expanded: dict[str, int] = {}
        followup, delay = False, 0.0
        if under:
            outcome = self._autoscaler.expand(current, {p.topic: counts.topics[p.topic] for p in under})
            effective.update(outcome.counts)
            expanded = outcome.expanded
            followup = outcome.followup_rebalance
            delay = self._retry_backoff_s if outcome.error is not None else self._expansion_settle_s

        if self._control is not None and self._control.name not in snapshot:
            # Created in manual mode too: it holds only transient signals, never data to lose.
            created.update(self._create([self._control], deadline))

        task_counts = self._current_parallelism(counts, effective)
        with self._lock:
            self._current_tasks = dict(task_counts)
            self._expected_tasks = dict(counts.tasks)
        return SetupResult(
            partition_counts=effective,
            required_partition_counts=dict(counts.topics),
            task_counts=task_counts,
            expected_task_counts=dict(counts.tasks),
            created=created,
            expanded=expanded,
            rectified=rectified,
            misconfigurations=tuple(left),
            followup_rebalance=followup,
            followup_delay_s=delay if followup else 0.0,
        )

    # -- init() -------------------------------------------------------------------------------------

    def init(self, params: InitParameters | None = None, timeout: float | None = None) -> dict[str, int]:
        """Set up the internal topics before the application's first start (KIP-698).

        Checks in this order: 1. a misconfigured internal topic raises
        ``MisconfiguredInternalTopicException``; 2. a missing source topic ``MissingSourceTopicException``;
        3. if no internal topic exists, all are created; 4. if all exist,
        ``InternalTopicsAlreadySetupException``; 5. if some are missing, they are created when ``params``
        enable setup-if-incomplete, else ``MissingInternalTopicsException`` names them. ``TimeoutError``
        when the cluster keeps failing past ``timeout`` seconds (default: default.api.timeout.ms).
        Returns the created topics with their partition counts.
        """
        params = params if params is not None else InitParameters.init_parameters()
        deadline = self._deadline(timeout)
        snapshot = self._describe(self._all_topic_names(), deadline, "describe the application's topics")
        counts = compute_partition_counts(
            self._plan, self._source_counts(snapshot), allow_missing_sources=True
        )
        requirements = self._requirements(counts)
        # Topics whose count depends on a missing source topic are still checked for their configs.
        for name in sorted(counts.unresolved):
            if name in snapshot:
                spec = self._plan.internal_topics[name]
                requirements.append(topic_requirement(spec, snapshot[name].partitions, self._config))
        problems = self._problems(requirements, snapshot)
        if self._autoscaling_enabled:
            # A short topic is not misconfigured: the first rebalance expands it.
            problems = [p for p in problems if p.kind != "under_partitioned"]
        if problems:
            raise MisconfiguredInternalTopicException(self._misconfigured_message(problems))

        missing_sources = [t for t in self._plan.source_topics if t not in snapshot]
        if missing_sources:
            raise MissingSourceTopicException(
                f"Missing source topics {missing_sources} of application {self._plan.application_id!r}: "
                "init() cannot set up internal topics for them. Create the source topics first (Kafka "
                "Streams never creates them), then call init() again."
            )

        internal = sorted(self._plan.internal_topics)
        missing = [r for r in requirements if r.name not in snapshot]
        all_exist = bool(internal) and not missing
        if all_exist:
            self.ensure_control_topic(self._remaining(deadline))
            raise InternalTopicsAlreadySetupException(
                f"All internal topics of application {self._plan.application_id!r} already exist: the "
                "application was initialized before, and init() is only for the first start, a start after "
                "an application reset, or completing an incomplete setup. Start the application without "
                "calling init()."
            )
        if len(missing) < len(internal) and not params.setup_internal_topics_if_incomplete_enabled():
            raise MissingInternalTopicsException(
                self._missing_message(missing, from_init=True), [r.name for r in missing]
            )
        created = self._create(missing, deadline) if missing else {}
        if self._control is not None and self._control.name not in snapshot:
            created.update(self._create([self._control], deadline))
        logger.info(
            "init(): created internal topics %s of application %s", created, self._plan.application_id
        )
        effective = {**counts.topics, **{n: d.partitions for n, d in snapshot.items() if n in internal}}
        current_tasks = self._current_parallelism(counts, effective)
        with self._lock:
            self._expected_tasks = dict(counts.tasks)
            self._current_tasks = current_tasks
        return created

    # -- steps --------------------------------------------------------------------------------------

    def _all_topic_names(self) -> list[str]:
        names = set(self._plan.source_topics) | set(self._plan.internal_topics)
        if self._control is not None:
            names.add(self._control.name)
        return sorted(names)

    def _source_counts(self, snapshot: Mapping[str, TopicDescription]) -> dict[str, int]:
        return {t: snapshot[t].partitions for t in self._plan.source_topics if t in snapshot}

    def _requirements(self, counts: PartitionCounts) -> list[InternalTopicRequirement]:
        return [
            topic_requirement(spec, counts.topics[name], self._config)
            for name, spec in sorted(self._plan.internal_topics.items())
            if name in counts.topics
        ]

    @staticmethod
    def _problems(
        requirements: Sequence[InternalTopicRequirement], snapshot: Mapping[str, TopicDescription]
    ) -> list[TopicProblem]:
        return [p for r in requirements if r.name in snapshot for p in validate_topic(r, snapshot[r.name])]

    def _current_parallelism(self, counts: PartitionCounts, effective: Mapping[str, int]) -> dict[int, int]:
        """Tasks per subtopology that the topics on the cluster support now.

        A subtopology whose repartition source or changelog topic is short of its required count
        runs only as many tasks as that topic has partitions: a task beyond them would have no
        changelog partition for its stores, or would miss the records routed to it.
        """
        result: dict[int, int] = {}
        for sub in self._plan.subtopologies:
            expected = counts.tasks.get(sub.id, 0)
            own = set(sub.repartition_source_topics) | set(sub.changelog_topics.values())
            own |= {
                n
                for n, s in self._plan.internal_topics.items()
                if s.subtopology == sub.id and s.kind == "changelog"
            }
            short = [
                effective[t]
                for t in own
                if t in self._plan.internal_topics
                and t in effective
                and effective[t] < counts.topics.get(t, 0)
            ]
            result[sub.id] = min([expected, *short])
        return result

    def _rectify(self, problems: Sequence[TopicProblem]) -> tuple[dict[str, dict[str, str]], list[str]]:
        """Automatic mode: set the configs of safely fixable problems, log the others once."""
        fixes: dict[str, dict[str, str]] = {}
        left: list[str] = []
        for problem in problems:
            if problem.fix:
                fixes.setdefault(problem.topic, {}).update(problem.fix)
            else:
                left.append(problem.message)
        rectified: dict[str, dict[str, str]] = {}
        for topic, fix in fixes.items():
            try:
                self._admin.alter_topic_config(topic, fix)  # sets these keys, leaves the others
            except ClusterError as exc:
                left.extend(p.message for p in problems if p.topic == topic and p.fix)
                logger.warning(
                    "Could not rectify the config of internal topic %s with %s: %s", topic, fix, exc
                )
                continue
            rectified[topic] = fix
            logger.info("Rectified the config of internal topic %s: set %s", topic, fix)
        with self._lock:
            fresh = [m for m in left if m not in self._logged]
            self._logged.update(fresh)
        for message in fresh:
            logger.warning(
                "Misconfigured internal topic (internal.topics.setup=automatic, left as is): %s", message
            )
        return rectified, left

    def _create(self, requirements: Sequence[InternalTopicRequirement], deadline: float) -> dict[str, int]:
        """Create the topics, retrying retriable errors; returns the ones that now exist, with counts.

        A topic created meanwhile by another client (its rebalance raced ours) counts as done.
        """
        remaining = {r.name: r for r in requirements}
        done: dict[str, int] = {}
        while remaining:
            request = {n: (r.partitions, dict(r.config)) for n, r in remaining.items()}
            try:
                self._admin.create_topics(request, replication_factor=self._replication_factor)
                done.update({n: r.partitions for n, r in remaining.items()})
                logger.info("Created internal topics %s", {n: r.partitions for n, r in remaining.items()})
                return done
            except TopicExistsError as exc:
                logger.info("Some internal topics were created meanwhile (%s); checking which", exc)
            except ClusterError as exc:
                self._raise_unless_retriable(exc, f"create internal topics {sorted(remaining)}", deadline)
                self._backoff(deadline)
            existing = self._describe(sorted(remaining), deadline, "describe internal topics being created")
            for name, description in existing.items():
                done[name] = description.partitions
                del remaining[name]
        return done

    def _describe(self, names: Sequence[str], deadline: float, what: str) -> dict[str, TopicDescription]:
        return self._retrying(lambda: self._admin.describe_topics(list(names)), deadline, what)

    def _retrying(self, call: Callable[[], _T], deadline: float, what: str) -> _T:
        while True:
            try:
                return call()
            except TopicExistsError:
                raise
            except ClusterError as exc:
                self._raise_unless_retriable(exc, what, deadline)
                self._backoff(deadline)

    def _raise_unless_retriable(self, exc: ClusterError, what: str, deadline: float) -> None:
        app = self._plan.application_id
        if not exc.retriable:
            raise StreamsException(f"Could not {what} for application {app!r}: {exc}") from exc
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"Could not {what} for application {app!r} in the allotted time: the cluster kept failing "
                f"with retriable errors, the last: {exc}. Check that the cluster is available "
                "(bootstrap.servers), or allow a longer timeout (default.api.timeout.ms, or init's timeout)."
            ) from exc
        logger.debug("Could not %s (retriable, will retry): %s", what, exc)

    def _backoff(self, deadline: float) -> None:
        # A pause between retries of a failed request, not a wait for a condition.
        time.sleep(max(0.0, min(self._retry_backoff_s, deadline - time.monotonic())))

    def _deadline(self, timeout: float | None) -> float:
        """``timeout`` seconds from now; None: default.api.timeout.ms."""
        return time.monotonic() + (self._default_timeout_s if timeout is None else max(0.0, timeout))

    @staticmethod
    def _remaining(deadline: float) -> float:
        return max(0.0, deadline - time.monotonic())

    def _misconfigured_message(self, problems: Sequence[TopicProblem]) -> str:
        lines = "\n".join(f"- {p.message}" for p in problems)
        return (
            f"Misconfigured internal topics of application {self._plan.application_id!r}; fix them "
            f"before the application can run:\n{lines}"
        )

    def _missing_message(self, missing: Sequence[InternalTopicRequirement], from_init: bool = False) -> str:
        names = [r.name for r in missing]
        app = self._plan.application_id
        if from_init:
            return (
                f"Internal topics {names} of application {app!r} are missing while the others exist: their "
                "data may have been lost. To recreate them empty, call init() with "
                "InitParameters.init_parameters().enable_setup_internal_topics_if_incomplete(); to start "
                "over, reset the application and call init()."
            )
        return (
            f"Internal topics {names} of application {app!r} are missing and internal.topics.setup=manual, "
            "so they are not created during a rebalance. Before the first start, call KafkaStreams.init(); "
            "if they were deleted, their data is lost: reset the application, or recreate them with init() "
            "and InitParameters.init_parameters().enable_setup_internal_topics_if_incomplete()."
        )
