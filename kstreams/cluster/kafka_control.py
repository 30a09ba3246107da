"""The control topic of a consumer group: application-wide signals without assignor user data.

Kafka Streams sends application-wide error codes (SHUTDOWN_APPLICATION) to every member in the
user data of a rebalance. librdkafka has no custom assignors, so the Kafka adapter sends them on
``<group.id>-control`` instead: one partition, one small JSON record per signal. Every main
consumer of the group reads that partition with its own manually assigned reader (no group),
starting at the end offset it had when the consumer subscribed, so each member sees every signal
sent while it is a member, its own included, and none sent before it joined.

Signals are rare, so the reader does not fetch all the time: a consumer assigned to a quiet
partition costs nothing on a Kafka broker (its fetches wait there), but on a broker that answers
empty fetches at once it spins, which cost more CPU than processing the records. The reader holds
no partition; every ``check_interval`` seconds the channel asks for the partition's end offset
without waiting for the answer, and only when the end has moved past what it read is the reader
assigned the partition, from the next offset to read, until it read up to that end. A signal
therefore arrives within about one interval (Kafka Streams' own signal needs a rebalance,
seconds). Assigning, not resuming a paused partition: librdkafka fetches a resumed partition only
when its broker thread next wakes, up to a second later, while an assignment wakes it at once
(the assignment protocol's messages travel here, and a rebalance waits for each of them).

The internal topic manager creates the control topic with the application's other internal
topics; a channel creates it itself (one partition) if it is missing, so a plain group of
consumers works too.

Threads: a channel belongs to one consumer and is used by the thread that uses that consumer.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import cast

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kstreams.cluster.kafka_admin import KafkaAdmin
from kstreams.cluster.kafka_client_config import build_client
from kstreams.cluster.kafka_errors import cluster_error
from kstreams.cluster.port import ClusterError, TopicExistsError, TopicPartition

__all__ = ["ASSIGNMENT_KIND_PREFIX", "CONTROL_TOPIC_SUFFIX", "ControlChannel", "control_topic"]

logger = logging.getLogger(__name__)

CONTROL_TOPIC_SUFFIX = "-control"
_FORMAT = 1
_KIND_ERROR = "assignment-error"
# Kinds of the assignment protocol's records (see kafka_assignment); the error kind is not one.
ASSIGNMENT_KIND_PREFIX = "assignment-protocol-"
# As the internal topic manager creates it: a signal matters only to the members of the moment.
_TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": "3600000"}
# How often a listening channel asks whether a signal arrived.
CHECK_INTERVAL = 0.5


def control_topic(group_id: str) -> str:
    """The control topic of a consumer group (an application's is ``<application.id>-control``)."""
    return group_id + CONTROL_TOPIC_SUFFIX


class ControlChannel:
    """Sends and receives the application-wide signals of one consumer group.

    ``consumer_settings`` and ``producer_settings`` build its reader and its sender; both are
    created only when first needed.
    """

    def __init__(
        self,
        group_id: str,
        admin: KafkaAdmin,
        consumer_settings: Callable[[], dict[str, object]],
        producer_settings: Callable[[], dict[str, object]],
        timeout: float = 30.0,
        check_interval: float = CHECK_INTERVAL,
    ) -> None:
        self.group_id = group_id
        self.topic = control_topic(group_id)
        self._partition = TopicPartition(self.topic, 0)
        self._admin = admin
        self._consumer_settings = consumer_settings
        self._producer_settings = producer_settings
        self._timeout = timeout
        self._check_interval = check_interval
        self._reader: Consumer | None = None
        self._sender: Producer | None = None
        self._next = 0  # the offset of the next signal to read
        self._reading_to: int | None = None  # resumed until the position reaches this end
        self._probe: Future | None = None
        self._probe_at = 0.0
        self._probe_failing = False
        self._end_seen: int | None = None  # the topic's end offset in the latest answer
        # Records of the assignment protocol (kafka_assignment), in log order, until taken.
        self._inbox: list[dict] = []

    def listen(self) -> None:
        """Start reading signals from the control topic's current end; idempotent."""
        if self._reader is not None:
            return
        self._ensure_topic()
        start = self._admin.list_offsets([self._partition])[self._partition][1]
        reader = build_client(
            Consumer, self._consumer_settings(), f"control reader of group {self.group_id!r}"
        )
        self._reader = reader
        self._next = start
        self._probe_at = time.monotonic() + self._check_interval
        logger.debug("Group %s: reading signals from %s at offset %d", self.group_id, self.topic, start)

    def received_error_codes(self) -> list[int]:
        """Error codes signalled since the last call, in the order they were sent (no waiting)."""
        if self._reader is None:
            return []
        if self._reading_to is None:
            self._check_end()
        return self._read(0.0) if self._reading_to is not None else []

    def catch_up(self, timeout: float) -> list[int]:
        """Every error code signalled up to now that was not returned yet, waiting up to
        ``timeout`` seconds for them. Called as a rebalance hands out partitions: a member that
        signalled before it left must be heard before anyone processes its partitions (Kafka
        Streams hears it in the same rebalance)."""
        if self._reader is None:
            return []
        deadline = time.monotonic() + timeout
        # A fresh request: an answer already on its way may predate the signal.
        self._probe = None
        probe = self._admin.end_offset_later(self._partition)
        wait([probe], timeout)
        if not probe.done():
            logger.warning("Group %s: no end offset of %s within %.1fs", self.group_id, self.topic, timeout)
            return []
        self._take_end(probe)
        codes: list[int] = []
        while self._reading_to is not None and time.monotonic() < deadline:
            codes += self._read(min(0.05, max(0.0, deadline - time.monotonic())))
        return codes

    def _read(self, timeout: float) -> list[int]:
        """Codes among the signals fetched so far; pauses the reader once it read to its target."""
        reader = self._reader
        assert reader is not None
        try:
            messages = reader.consume(100, timeout)
        except KafkaException as exc:
            raise cluster_error(f"Reading signals of group {self.group_id!r} from {self.topic}", exc) from exc
        codes = []
        for message in messages:
            if message.error() is not None:
                logger.warning("Group %s: control topic %s: %s", self.group_id, self.topic, message.error())
                continue
            self._next = max(self._next, cast(int, message.offset()) + 1)
            signal = _decode(message.value())
            if signal is not None and str(signal.get("kind", "")).startswith(ASSIGNMENT_KIND_PREFIX):
                self._inbox.append(signal)
            elif signal is not None and signal.get("kind") == _KIND_ERROR:
                logger.info(
                    "Group %s: member %s signalled error code %s",
                    self.group_id,
                    signal.get("member"),
                    signal.get("code"),
                )
                codes.append(int(signal["code"]))
        if self._reading_to is not None and self._next >= self._reading_to:
            # Anything fetched past the target is dropped with the assignment and fetched again
            # from ``_next`` next time.
            reader.incremental_unassign([KafkaTopicPartition(self.topic, 0)])
            self._reading_to = None
        return codes

    def _check_end(self) -> None:
        """Ask for the end offset every check interval, without waiting for the answer."""
        if self._probe is None:
            if time.monotonic() >= self._probe_at:
                self._probe = self._admin.end_offset_later(self._partition)
        elif self._probe.done():
            probe, self._probe = self._probe, None
            self._take_end(probe)

    def _take_end(self, probe: Future) -> None:
        """Act on an answered end-offset request: read up to the end if it moved."""
        self._probe_at = time.monotonic() + self._check_interval
        try:
            end = int(probe.result().offset)
        except KafkaException as exc:
            # Asked again at the next interval: a signal waits in the topic meanwhile. Said once
            # per outage, not every half second.
            if not self._probe_failing:
                logger.warning("Group %s: cannot get the end of %s: %s", self.group_id, self.topic, exc)
            self._probe_failing = True
            return
        if self._probe_failing:
            logger.info("Group %s: reading signals from %s again", self.group_id, self.topic)
            self._probe_failing = False
        self._end_seen = end
        if end > self._next:
            assert self._reader is not None
            if self._reading_to is None:
                try:
                    self._reader.incremental_assign([KafkaTopicPartition(self.topic, 0, self._next)])
                except KafkaException as exc:
                    what = f"Reading signals of group {self.group_id!r} from {self.topic}"
                    raise cluster_error(what, exc) from exc
            self._reading_to = max(end, self._reading_to or 0)

    def progress(self) -> str:
        """Where the reader stands, for the warnings of a waiting assignment: the next offset it
        reads and the topic's end offset as last reported (which a stalled reader or a broker
        that reports wrong end offsets tells apart)."""
        if self._reader is None:
            return "not read yet"
        end = "not answered yet" if self._end_seen is None else str(self._end_seen)
        failing = ", end offset requests failing" if self._probe_failing else ""
        return f"read up to offset {self._next}, end offset {end}{failing}"

    def take_records(self) -> list[dict]:
        """Assignment protocol records read since the last call, in log order (what
        ``received_error_codes`` fetched; no waiting)."""
        records, self._inbox = self._inbox, []
        return records

    def check_soon(self) -> None:
        """Ask for the topic's end at the next read rather than after the check interval (the
        assignment protocol waits for records); never blocks."""
        if self._probe is None:
            self._probe_at = 0.0

    def publish(self, record: dict) -> None:
        """Send one assignment protocol record (its ``kind`` starts with ``ASSIGNMENT_KIND_PREFIX``);
        returns once the broker has it."""
        self._send({"format": _FORMAT, **record}, f"Publishing {record.get('kind')}")

    def signal_error(self, code: int, member_id: str) -> None:
        """Send an error code to every listening member; returns once the broker has it."""
        self._send(
            {"format": _FORMAT, "kind": _KIND_ERROR, "code": code, "member": member_id},
            f"Signalling error code {code}",
        )
        logger.info("Group %s: member %s signalled error code %d", self.group_id, member_id, code)

    def _send(self, record: dict, what: str) -> None:
        self._ensure_topic()
        if self._sender is None:
            self._sender = build_client(
                Producer, self._producer_settings(), f"control sender of group {self.group_id!r}"
            )
        failures: list[str] = []

        def on_delivery(err: object, _message: object) -> None:
            if err is not None:
                failures.append(str(err))

        value = json.dumps(record, separators=(",", ":")).encode()
        try:
            self._sender.produce(
                self.topic, value, self.group_id.encode(), partition=0, on_delivery=on_delivery
            )
        except KafkaException as exc:
            raise cluster_error(f"{what} to group {self.group_id!r}", exc) from exc
        remaining = self._sender.flush(self._timeout)
        if remaining or failures:
            reason = failures[0] if failures else f"not acknowledged within {self._timeout}s"
            raise ClusterError(
                f"{what} to group {self.group_id!r} on {self.topic} failed: {reason}",
                retriable=not failures,
            )

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._sender is not None:
            self._sender.flush(self._timeout)
            self._sender = None

    def _ensure_topic(self) -> None:
        if self.topic in self._admin.partition_counts():
            return
        try:
            self._admin.create_topics({self.topic: (1, _TOPIC_CONFIG)})
        except TopicExistsError:
            # Another member created it first.
            pass


def _decode(value: bytes | None) -> dict | None:
    if not value:
        return None
    try:
        signal = json.loads(value)
    except ValueError:
        logger.warning("Ignoring a record on a control topic that is not a kstreams signal: %r", value[:100])
        return None
    if not isinstance(signal, dict) or "kind" not in signal:
        return None
    return signal
