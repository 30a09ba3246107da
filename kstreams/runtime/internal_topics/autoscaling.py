"""Partition autoscaling of internal topics (KIP-878).

When a source topic gains partitions, the repartition and changelog topics that follow it need more
partitions too. With ``partition.autoscaling.enabled`` the internal topic manager hands the
under-partitioned topics to ``PartitionAutoscaler.expand`` on each rebalance:

- it asks the admin to grow them (``create_partitions``); success resets the failure timer and asks
  for one follow-up rebalance, so the new partitions get assigned once every broker knows them;
- a failure (the call is not atomic: some topics may have grown) asks for a follow-up rebalance to
  retry with fresh metadata. The timer starts at the first failure and resets on any progress;
- once ``partition.autoscaling.timeout.ms`` passes with no progress, the next attempt is not made:
  ``num-autoscaling-failures`` goes up by one, a warning is logged, and processing goes on with the
  partitions that exist. A later rebalance that still finds the topics short starts over.

Thread safety: ``expand`` runs on the thread that runs the rebalance (the polling thread, or the user
thread in ``init()``); ``failures`` is read by metrics from any thread. ``_lock`` guards the timer and
the count and is never held during a call to the cluster.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kstreams.cluster.port import Admin

__all__ = ["AutoscalingOutcome", "PartitionAutoscaler"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AutoscalingOutcome:
    """What one autoscaling attempt did.

    ``expanded`` maps each topic that grew to its new count; ``counts`` holds the partition count of
    every topic that was to grow as it is now on the cluster; ``followup_rebalance`` says the runtime
    must rebalance again (to assign new partitions, or to retry); ``gave_up`` says the timeout passed
    and the failure was counted.
    """

    expanded: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    followup_rebalance: bool = False
    gave_up: bool = False
    error: Exception | None = None


class PartitionAutoscaler:
    """Grows internal topics to their required counts, retrying failures until a timeout without progress."""

    def __init__(self, admin: Admin, timeout_ms: int, clock: Callable[[], float]) -> None:
        self._admin = admin
        self._timeout_s = timeout_ms / 1000.0
        self._clock = clock
        self._lock = threading.Lock()
        self._first_failure: float | None = None  # guarded by _lock
        self._failures = 0  # guarded by _lock
        self._seen: dict[str, int] = {}  # counts of the topics to grow at the last attempt; guarded by _lock

    @property
    def failures(self) -> int:
        """How many times autoscaling gave up (the num-autoscaling-failures metric)."""
        with self._lock:
            return self._failures

    def expand(self, current: Mapping[str, int], required: Mapping[str, int]) -> AutoscalingOutcome:
        """Grow each topic in ``required`` from its ``current`` count. Never raises for a failure of
        the admin client, whatever its type (a ``ClusterError``, or a client library's own timeout
        or transport error): that counts as a failed expansion, retried in a follow-up rebalance."""
        targets = {t: n for t, n in required.items() if current.get(t, n) < n}
        if not targets:
            return AutoscalingOutcome(counts=dict(current))
        with self._lock:
            if any(n > self._seen.get(t, n) for t, n in current.items()):
                self._first_failure = None  # topics grew since the last attempt: that is progress
            self._seen = {t: current[t] for t in targets if t in current}
            first_failure = self._first_failure
        if first_failure is not None and self._clock() - first_failure >= self._timeout_s:
            return self._give_up(current, targets)
        try:
            self._admin.create_partitions(targets)
        except Exception as exc:  # every admin failure is a failed attempt, never a dead thread
            return self._failed(current, targets, exc)
        with self._lock:
            self._first_failure = None
        logger.info("Expanded internal topics to match their source topics: %s", targets)
        return AutoscalingOutcome(
            expanded=dict(targets), counts={**current, **targets}, followup_rebalance=True
        )

    def _failed(
        self, current: Mapping[str, int], targets: Mapping[str, int], exc: Exception
    ) -> AutoscalingOutcome:
        now_counts = dict(current)
        try:
            described = self._admin.describe_topics(list(targets))
        except Exception:  # the expansion failed already; what grew meanwhile is unknown
            described = {}
        grown = {t: d.partitions for t, d in described.items() if d.partitions > current.get(t, d.partitions)}
        now_counts.update({t: d.partitions for t, d in described.items()})
        with self._lock:
            self._seen.update({t: d.partitions for t, d in described.items() if t in self._seen})
            if grown:
                self._first_failure = None  # some topics grew: that is progress
            elif self._first_failure is None:
                self._first_failure = self._clock()
        logger.warning(
            "Could not expand internal topics %s (%s); grown meanwhile: %s. Will retry in a follow-up "
            "rebalance for up to partition.autoscaling.timeout.ms=%d without progress.",
            dict(targets),
            exc,
            grown or "none",
            int(self._timeout_s * 1000),
        )
        return AutoscalingOutcome(expanded=grown, counts=now_counts, followup_rebalance=True, error=exc)

    def _give_up(self, current: Mapping[str, int], targets: Mapping[str, int]) -> AutoscalingOutcome:
        with self._lock:
            self._failures += 1
            self._first_failure = None
            failures = self._failures
        logger.warning(
            "Giving up expanding internal topics %s: partition.autoscaling.timeout.ms=%d passed without "
            "progress (num-autoscaling-failures=%d). Processing continues with the partitions that exist; "
            "records in the new partitions of the source topics are not processed until the internal "
            "topics are expanded. Check the broker (quotas, authorization, availability).",
            {t: f"{current.get(t)}->{n}" for t, n in targets.items()},
            int(self._timeout_s * 1000),
            failures,
        )
        return AutoscalingOutcome(counts=dict(current), gave_up=True)
