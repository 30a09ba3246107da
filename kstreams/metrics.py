"""The metrics registry behind ``KafkaStreams.metrics()``, with Kafka Streams' metric names.

A ``Sensor`` counts events (and optionally their sizes or latencies) and yields Kafka's derived
metrics: ``<name>-total``, ``<name>-rate`` (per second over a sliding window), ``<name>-avg`` and
``<name>-max``. A gauge is a callable read at collection time. Each sensor is recorded by one thread
only; readers see a consistent-enough snapshot without a lock (ints and floats are replaced
atomically under the GIL). The exception is the read sensors of store metrics, which
interactive queries also record from the querying thread: a record racing another may lose its
update, never raise, so those counts are approximate under concurrent queries.

The registry carries ``metrics.recording.level`` (INFO, DEBUG or TRACE) as Kafka's ``Metrics``
does: metrics of a finer level than that (``should_record``) are not created, and their code paths
are not timed at all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kstreams.errors import ConfigException

__all__ = ["RECORDING_LEVELS", "MetricName", "MetricsRegistry", "Sensor"]

RATE_WINDOW_S = 30.0
_BUCKETS = 6
# Kafka's Sensor.RecordingLevel, coarsest first: a registry at one level records that level and
# every coarser one.
RECORDING_LEVELS = ("INFO", "DEBUG", "TRACE")


@dataclass(frozen=True, slots=True)
class MetricName:
    """A metric's identity: name, group (Kafka's "type") and tags (client-id, thread-id, task-id...)."""

    name: str
    group: str
    tags: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)
    _key: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", tuple(sorted(self.tags.items())))

    def __hash__(self) -> int:
        return hash((self.name, self.group, self._key))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MetricName) and (self.name, self.group, self._key) == (
            other.name,
            other.group,
            other._key,
        )


class Sensor:
    """Counts events for one metric family; rates are over a sliding window of buckets."""

    __slots__ = ("_bucket_len", "_buckets", "_clock", "count", "max", "total")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._bucket_len = RATE_WINDOW_S / _BUCKETS
        self._buckets: list[list[float]] = []  # [start, count]
        self.count = 0
        self.total = 0.0
        self.max = float("nan")

    def record(self, value: float = 1.0, events: int = 1) -> None:
        """Record ``events`` events whose summed value is ``value`` (sizes, or latencies: in ms for
        thread and task metrics, in ns for store metrics, as in Kafka)."""
        now = self._clock()
        buckets = self._buckets
        if not buckets or now - buckets[-1][0] >= self._bucket_len:
            buckets.append([now, 0.0])
            if len(buckets) > _BUCKETS:
                del buckets[0]
        buckets[-1][1] += events
        self.count += events
        self.total += value
        per_event = value / events if events else value
        if not per_event <= self.max:  # also replaces the initial NaN
            self.max = per_event

    def rate(self) -> float:
        """Events per second over the window (the window is shorter right after start)."""
        now = self._clock()
        live = [b for b in self._buckets if now - b[0] < RATE_WINDOW_S]
        if not live:
            return 0.0
        elapsed = max(now - live[0][0], self._bucket_len)
        return sum(b[1] for b in live) / elapsed

    def avg(self) -> float:
        return self.total / self.count if self.count else float("nan")


class MetricsRegistry:
    """All metrics of one client: sensors (with derived metrics) and gauges.

    ``recording_level`` is the client's ``metrics.recording.level``; code that records metrics of a
    finer level asks ``should_record`` once, when it sets up, rather than per event.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, recording_level: str = "INFO") -> None:
        if recording_level not in RECORDING_LEVELS:
            raise ConfigException(
                f"metrics.recording.level must be one of {', '.join(RECORDING_LEVELS)}, "
                f"got {recording_level!r}."
            )
        self._clock = clock
        self.recording_level = recording_level
        self._lock = threading.Lock()  # guards registration only; leaf lock
        self._gauges: dict[MetricName, Callable[[], float]] = {}

    def should_record(self, level: str) -> bool:
        """Whether metrics of ``level`` are recorded at this registry's recording level."""
        return RECORDING_LEVELS.index(level) <= RECORDING_LEVELS.index(self.recording_level)

    def sensor(
        self,
        name: str,
        group: str,
        tags: Mapping[str, str],
        *,
        total: bool = True,
        rate: bool = True,
        avg: bool = False,
        max_: bool = False,
        total_of_values: bool = False,
    ) -> Sensor:
        """A new sensor exposing ``<name>-total`` / ``-rate`` / ``-avg`` / ``-max`` as asked.

        ``total_of_values`` makes ``-total`` the sum of recorded values instead of the event count.
        """
        sensor = Sensor(self._clock)
        if total:
            self.gauge(
                f"{name}-total",
                group,
                tags,
                (lambda: sensor.total) if total_of_values else (lambda: float(sensor.count)),
            )
        if rate:
            self.gauge(f"{name}-rate", group, tags, sensor.rate)
        if avg:
            self.gauge(f"{name}-avg", group, tags, sensor.avg)
        if max_:
            self.gauge(f"{name}-max", group, tags, lambda: sensor.max)
        return sensor

    def gauge(self, name: str, group: str, tags: Mapping[str, str], read: Callable[[], float]) -> MetricName:
        metric = MetricName(name, group, dict(tags))
        with self._lock:
            self._gauges[metric] = read
        return metric

    def remove(self, predicate: Callable[[MetricName], bool]) -> None:
        """Drop every metric the predicate selects (a thread or task went away)."""
        with self._lock:
            for metric in [m for m in self._gauges if predicate(m)]:
                del self._gauges[metric]

    def snapshot(self) -> dict[MetricName, float]:
        with self._lock:
            gauges = list(self._gauges.items())
        return {metric: float(read()) for metric, read in gauges}

    def to_prometheus(self) -> str:
        """The Prometheus text exposition of every metric (gauges named kstreams_<group>_<name>)."""
        lines: list[str] = []
        by_family: dict[str, list[tuple[MetricName, float]]] = {}
        for metric, value in self.snapshot().items():
            family = _prom_name(f"kstreams_{metric.group}_{metric.name}")
            by_family.setdefault(family, []).append((metric, value))
        for family in sorted(by_family):
            lines.append(f"# TYPE {family} gauge")
            for metric, value in sorted(by_family[family], key=lambda mv: mv[0]._key):
                labels = ",".join(f'{_prom_name(k)}="{_escape(v)}"' for k, v in metric._key)
                lines.append(f"{family}{{{labels}}} {_prom_value(value)}")
        return "\n".join(lines) + "\n"


def _prom_name(text: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in text)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _prom_value(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))
