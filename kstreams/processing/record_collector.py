"""The record collector: where every task's output waits for the producer.

A task's sinks and its stores' change-logging write into one ``RecordCollector`` per client
(``kstreams._native.record_collector``, compiled from
``csrc/kstreams/_native/record_collector.pyx``; Kafka's RecordCollectorImpl): a buffer per output
partition, sink records in send order, changelog partitions keeping only each key's newest record
since the last drain. This module holds the collector's life in the streaming runtime:

- built: ``StreamsRuntime`` makes one with ``RecordCollector()`` and hands it to the task manager
  (every task sends into it) and to the committer and the polling thread (they drain it);
- drained: ``send_collected`` moves everything buffered into the producer, on the polling thread,
  every turn and inside every commit (``kstreams/runtime/tasks/commit.py``) before the offsets are
  committed, so no offset is committed ahead of the output of its records;
- dropped: an abort (exactly_once_v2) drains it without sending, and the production exception
  handler's skips (``record_errors.skip_rejected``) resend what the cluster did not refuse.

Threads: stream threads send while the polling thread drains; the collector's internal mutex is a
leaf. ``send_collected`` runs on the polling thread only (the producer is its).
"""

from __future__ import annotations

from kstreams._native.record_collector import RecordCollector
from kstreams.cluster.port import Producer, RecordRejectedError, RejectedRecord

__all__ = ["RecordCollector", "send_collected"]


def send_collected(
    collector: RecordCollector, producer: Producer, written: set[tuple[str, int]] | None = None
) -> int:
    """Move every buffered output record from the collector to the producer; returns the count.
    The (topic, partition) of every batch sent is added to ``written``. Records the cluster
    rejects for good are raised together, as one RecordRejectedError, once every batch is sent."""
    sent = 0
    rejected: list[RejectedRecord] = []
    for topic, partition, batch in collector.drain():
        try:
            producer.send(topic, partition, batch)
        except RecordRejectedError as exc:
            # The batch's other records were sent; so must the batches drained after it be.
            rejected.extend(exc.records)
        sent += len(batch)
        if written is not None:
            written.add((topic, partition))
    if rejected:
        raise RecordRejectedError(rejected)
    return sent
