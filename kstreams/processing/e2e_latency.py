"""KIP-613 end-to-end latency: ``record-e2e-latency-avg``/``-min``/``-max`` per source and terminal node.

Kafka Streams records, at INFO level, for each record reaching a source node or a terminal node (a
sink, or a processor without children such as the end of a ``foreach`` or ``process``), the
wall-clock time then minus the record's timestamp, in ms (group ``stream-processor-node-metrics``,
tagged by task and ``processor-node-id``). kstreams records the same: at source nodes per batch
(the batch's timestamps against the time the task starts on it); at terminal nodes per record on
the per-record path (the C loops, once the node's ``process`` returned: ``NodeBase.e2e_latency``)
and per batch on the compiled path (the batch a terminal step or a sink was handed). A node that is
not terminal has no sensor, so the loops pay nothing for it.

The sensor itself is C (``kstreams._native.e2e_latency``: two samples of 30 s, as Kafka's
metrics.num.samples and metrics.sample.window.ms); this module names its gauges.
"""

from __future__ import annotations

from collections.abc import Mapping

from kstreams._native.e2e_latency import E2ELatencySensor
from kstreams.metrics import MetricsRegistry

__all__ = ["E2E_LATENCY_GROUP", "E2ELatencySensor", "register_e2e_latency"]

E2E_LATENCY_GROUP = "stream-processor-node-metrics"


def register_e2e_latency(metrics: MetricsRegistry, tags: Mapping[str, str]) -> E2ELatencySensor:
    """A new sensor whose three gauges are registered under Kafka's names and ``tags``."""
    sensor = E2ELatencySensor()
    metrics.gauge("record-e2e-latency-avg", E2E_LATENCY_GROUP, tags, sensor.avg)
    metrics.gauge("record-e2e-latency-min", E2E_LATENCY_GROUP, tags, sensor.min)
    metrics.gauge("record-e2e-latency-max", E2E_LATENCY_GROUP, tags, sensor.max)
    return sensor
