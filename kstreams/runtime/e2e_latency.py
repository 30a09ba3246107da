"""KIP-613 end-to-end latency: ``record-e2e-latency-avg``/``-min``/``-max`` per source and sink node.

Kafka Streams records, at INFO level, for each record reaching a source node or a terminal node, the
wall-clock time then minus the record's timestamp, in ms (group ``stream-processor-node-metrics``,
tagged by task and ``processor-node-id``). kstreams records the same at source nodes (per batch: the
batch's timestamps against the time the task starts on it) and at sink nodes (per batch on the
batch paths, per record on the per-record path). Kafka also counts processors without children as
terminal nodes; kstreams measures sinks only.

The statistics are over a sliding window as Kafka's are (metrics.num.samples 2 of
metrics.sample.window.ms 30 s): two samples, the older dropped when a new one starts; NaN when
nothing was recorded in the window. Each sensor is recorded by the thread that holds the task (one
at a time) and read by any: the gauges read plain floats.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from kstreams.runtime.metrics import MetricsRegistry

__all__ = ["E2E_LATENCY_GROUP", "E2ELatencySensor"]

E2E_LATENCY_GROUP = "stream-processor-node-metrics"
SAMPLE_WINDOW_S = 30.0
SAMPLES = 2


class E2ELatencySensor:
    """The e2e latency of one node: avg, min and max in ms over the last ``SAMPLES`` windows."""

    __slots__ = ("_clock", "_samples", "_wall")

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time
    ) -> None:
        self._clock = clock
        self._wall = wall
        self._samples: list[list[float]] = []  # [start, count, total, min, max]

    def _sample(self) -> list[float]:
        now = self._clock()
        samples = self._samples
        if not samples or now - samples[-1][0] >= SAMPLE_WINDOW_S:
            samples.append([now, 0.0, 0.0, float("inf"), float("-inf")])
            if len(samples) > SAMPLES:
                del samples[0]
        return samples[-1]

    def now_ms(self) -> float:
        return self._wall() * 1000.0

    def record(self, latency_ms: float) -> None:
        """One record whose timestamp is ``latency_ms`` before now."""
        s = self._sample()
        s[1] += 1
        s[2] += latency_ms
        if latency_ms < s[3]:
            s[3] = latency_ms
        if latency_ms > s[4]:
            s[4] = latency_ms

    def record_timestamps(self, timestamps: Any) -> None:
        """Every record of a batch, by its timestamps (an int64 array): now minus each."""
        n = len(timestamps)
        if n == 0:
            return
        now = self.now_ms()
        s = self._sample()
        s[1] += n
        s[2] += now * n - float(timestamps.sum())
        low, high = now - float(timestamps.max()), now - float(timestamps.min())
        if low < s[3]:
            s[3] = low
        if high > s[4]:
            s[4] = high

    def _live(self) -> list[list[float]]:
        now = self._clock()
        return [s for s in self._samples if now - s[0] < SAMPLES * SAMPLE_WINDOW_S and s[1]]

    def avg(self) -> float:
        live = self._live()
        count = sum(s[1] for s in live)
        return sum(s[2] for s in live) / count if count else float("nan")

    def min(self) -> float:
        live = self._live()
        return min(s[3] for s in live) if live else float("nan")

    def max(self) -> float:
        live = self._live()
        return max(s[4] for s in live) if live else float("nan")

    def register(self, metrics: MetricsRegistry, tags: Mapping[str, str]) -> None:
        """Expose the three gauges under Kafka's names."""
        metrics.gauge("record-e2e-latency-avg", E2E_LATENCY_GROUP, tags, self.avg)
        metrics.gauge("record-e2e-latency-min", E2E_LATENCY_GROUP, tags, self.min)
        metrics.gauge("record-e2e-latency-max", E2E_LATENCY_GROUP, tags, self.max)
