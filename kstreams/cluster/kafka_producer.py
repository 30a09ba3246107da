"""The ``Producer`` of a ``KafkaCluster``: kstreams' compiled ``KafkaSender`` (or, where it cannot
be used, confluent-kafka's Producer; see ``kafka_native``) behind the port.

Producers are idempotent unless configured otherwise; with ``transactional.id`` they are
transactional. A batch goes into librdkafka's queue whole (the sender) or record by record
(confluent-kafka); failed deliveries only are reported (``DeliveryFailures`` keeps them: from the
client's delivery callback, or taken from the sender), and ``flush`` (and ``commit_transaction``)
raise the first. A newer producer with the same transactional id
fences this one: every call then raises ``ProducerFencedError``.

Offsets sent to a transaction carry the group metadata (generation and member id) of the group
member that owns the partitions, found in the cluster's ``GroupMembers``, so the group coordinator
rejects commits from a member that has since lost them (KIP-447). Without such a member in this
process only the group id is sent, as Kafka's ``sendOffsetsToTransaction(offsets, groupId)`` does.

librdkafka's ``send_offsets_to_transaction`` can block for ever, past its timeout, when the group
coordinator went away during the transaction (librdkafka issue #5456; seen here when a broker
restarts). It therefore runs on a helper thread: if it has not returned a few seconds after its
timeout, the producer is given up with ``FatalClientError`` (the runtime replaces it, and the new
producer's ``init_transactions`` fences the stuck one), and ``close`` leaves the stuck handle alone.
Its timeout is at most the producer's ``transaction.timeout.ms``, and when it times out the
producer is given up too (``FatalClientError``): its transaction has outlived its timeout, so the
broker aborts it and fences the producer's epoch anyway, and a producer that lost its coordinators
during a broker outage would hang in its next ``send_offsets_to_transaction`` (librdkafka #5511:
it keeps a coordinator that it no longer connects to), where a new producer finds them afresh.
A producer given up that way is released without further calls (see ``close``).

Threads: one thread at a time uses a producer (the port's rule); the helper thread of a bounded
call only runs the one librdkafka call.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, cast

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from kstreams._native.record_batch import RecordBatch
from kstreams.cluster.kafka_admin import KafkaAdmin
from kstreams.cluster.kafka_client_config import librdkafka_logger
from kstreams.cluster.kafka_errors import SEQUENCE_LOST, cluster_error, delivery_error, kafka_error_of
from kstreams.cluster.kafka_membership import GroupMembers, committed_positions
from kstreams.cluster.kafka_native import native_settings
from kstreams.cluster.port import (
    AbortableTransactionError,
    ClusterError,
    FatalClientError,
    RecordRejectedError,
    RejectedRecord,
    TopicNotFoundError,
    TopicPartition,
)

__all__ = ["DeliveryFailures", "KafkaProducer", "native_sender", "refusal_error"]

logger = logging.getLogger(__name__)


def native_sender(settings: Mapping[str, object]) -> Any | None:
    """A ``KafkaSender`` with these confluent-kafka settings (its ``on_delivery`` callback is
    replaced by the sender's own failure list), or None when one cannot be used (see
    ``kafka_native``; the caller then builds a confluent-kafka ``Producer``)."""
    plain = native_settings(settings, ignored=("logger", "on_delivery"))
    if plain is None:
        return None
    from kstreams._native.kafka_clients import KafkaSender

    return KafkaSender(plain, librdkafka_logger)


# Producers given up while a librdkafka call into them never returned (see close).
_ABANDONED: list[object] = []
# How long send() lets librdkafka drain its queue when the queue is full before trying again.
_QUEUE_FULL_WAIT = 0.1
# How long past its own timeout a bounded librdkafka call may take before the producer is given up
# (a call that honours its timeout returns at once when it passes; a false alarm costs a new producer).
_HUNG_GRACE_S = 2.0
# Errors that refuse one record for good (retrying sends it again and again to the same refusal):
# the production exception handler decides about such records.
# Deliveries librdkafka purged: only an abort_transaction purges (kstreams never calls purge), so
# these records belong to an aborted transaction. Their reports can arrive in a poll after the
# abort, inside the next transaction, which they must not fail.
_PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})
_REJECTIONS = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_MSG_SIZE,
        KafkaError.INVALID_MSG,
        KafkaError.INVALID_RECORD,
        KafkaError.RECORD_LIST_TOO_LARGE,
    }
)


def _rejected(message: Message, error: KafkaError) -> RejectedRecord:
    """The record of a delivery report librdkafka failed for good."""
    partition = message.partition()
    return RejectedRecord(
        message.topic() or "",
        partition if partition is not None else -1,
        message.key(),
        message.value(),
        message.timestamp()[1],
        cast("list[tuple[str, bytes | None]] | None", message.headers()),
        f"{error.name()}: {error.str()}",
    )


class DeliveryFailures:
    """A producer's delivery callback (librdkafka's ``on_delivery`` setting, set when the client
    is built): it keeps the failed deliveries for ``flush`` and ``commit_transaction`` to raise.
    With ``delivery.report.only.error`` librdkafka calls it for failed records only, so a record
    that is delivered costs no Python call."""

    def __init__(self) -> None:
        # Appended by librdkafka's callback inside poll/flush, on the thread using the producer.
        self.failures: list[tuple[str, KafkaError]] = []
        self.rejected: list[RejectedRecord] = []

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            if error.code() in _PURGED:
                return
            if error.code() in _REJECTIONS:
                self.rejected.append(_rejected(message, error))
                return
            try:
                where = f"{message.topic()}-{message.partition()}"
            except Exception:  # a message of a fatally failed producer may not say where it went
                where = "a partition"
            self.failures.append((where, error))

    def record(
        self,
        error: KafkaError,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: list[tuple[str, bytes | None]] | None,
    ) -> None:
        """A failed delivery as kstreams' own producer reports it (``KafkaSender.take_failures``)."""
        if error.code() in _PURGED:
            return
        if error.code() in _REJECTIONS:
            reason = f"{error.name()}: {error.str()}"
            self.rejected.append(RejectedRecord(topic, partition, key, value, timestamp, headers, reason))
        else:
            self.failures.append((f"{topic}-{partition}" if topic else "a partition", error))


class KafkaProducer:
    """A ``Producer`` over one confluent-kafka Producer.

    ``group_only_metadata(group_id)`` gives librdkafka group metadata that names only a group, for
    offsets whose owner is not a member in this process; ``delivery`` is the delivery callback the
    client was built with; ``transaction_timeout`` (s) is the producer's transaction.timeout.ms.
    """

    def __init__(
        self,
        producer: Producer,
        admin: KafkaAdmin,
        members: GroupMembers,
        group_only_metadata: Callable[[str], object],
        *,
        delivery: DeliveryFailures,
        transactional_id: str | None,
        timeout: float = 30.0,
        transaction_timeout: float = 60.0,
    ) -> None:
        # confluent-kafka's Producer, or kstreams' compiled KafkaSender (same method names for
        # what both do; it produces whole batches and keeps failures itself, see kafka_native).
        self._producer: Any = producer
        self._native = hasattr(producer, "send_batch")
        self._delivery = delivery
        self._admin = admin
        self._members = members
        self._group_only_metadata = group_only_metadata
        self._transactional_id = transactional_id
        self._transactional = transactional_id is not None
        self._timeout = timeout
        self._offsets_timeout = min(timeout, transaction_timeout)
        # The same lists the client's delivery callback fills.
        self._failures = delivery.failures
        self._rejected = delivery.rejected
        # True from begin_transaction until the transaction is committed or aborted (also after
        # a failed commit, which must be followed by an abort).
        self._in_transaction = False
        self._closed = False
        self._hung: str | None = None  # the call that never returned (see the module docstring)
        self._given_up: str | None = None  # why the producer is not to be used any more

    def send(self, topic: str, partition: int, batch: RecordBatch) -> None:
        self._check_usable()
        count = len(batch)
        if count == 0:
            return
        if self._native:
            try:
                refused = self._producer.send_batch(topic, partition, batch, _REJECTIONS)
            except KafkaException as exc:
                raise refusal_error(f"Producing to {topic}-{partition}", exc, self._transactional) from exc
            for i, error in refused:
                self._keep_rejected(error, topic, partition, batch, i)
            self._producer.poll(0)
            self._raise_failures()
            return
        keys = batch.keys()
        values = batch.values()
        # librdkafka takes 0 as "now"; a batch's -1 means the record has no timestamp.
        timestamps = batch.timestamps_array().clip(min=0).tolist()
        produce = self._producer.produce
        # Positional arguments (topic, value, key, partition, on_delivery, callback, timestamp,
        # headers): keyword parsing cost as much as the rest of the call. No per-message callback:
        # the client's one delivery callback hears of failures only (delivery.report.only.error).
        i = 0
        try:
            if batch.has_headers:
                # The same header lists librdkafka takes (list is invariant, hence the cast).
                headers = cast(Callable[[int], list], batch.headers)
                for i in range(count):
                    produce(topic, values[i], keys[i], partition, None, None, timestamps[i], headers(i))
            else:
                for i in range(count):
                    produce(topic, values[i], keys[i], partition, None, None, timestamps[i])
        except BufferError:
            self._send_slowly(topic, partition, batch, keys, values, timestamps, i)
        except KafkaException as exc:
            if not self._reject(exc, topic, partition, batch, i):
                raise refusal_error(f"Producing to {topic}-{partition}", exc, self._transactional) from exc
            self._send_slowly(topic, partition, batch, keys, values, timestamps, i + 1)
        self._producer.poll(0)
        self._raise_failures()

    def _send_slowly(
        self,
        topic: str,
        partition: int,
        batch: RecordBatch,
        keys: list[bytes | None],
        values: list[bytes | None],
        timestamps: list[int],
        start: int,
    ) -> None:
        """Send records [start:] of a batch while librdkafka's queue is full, serving delivery
        reports until each record finds room."""
        produce = self._producer.produce
        has_headers = batch.has_headers
        i = start
        while i < len(keys):
            try:
                produce(
                    topic,
                    values[i],
                    keys[i],
                    partition,
                    None,
                    None,
                    timestamps[i],
                    cast(list, batch.headers(i)) if has_headers else None,
                )
            except BufferError:
                self._producer.poll(_QUEUE_FULL_WAIT)
                continue
            except KafkaException as exc:
                if not self._reject(exc, topic, partition, batch, i):
                    raise cluster_error(f"Producing to {topic}-{partition}", exc) from exc
            i += 1

    def flush(self, timeout: float | None = None) -> None:
        self._check_usable()
        limit = self._timeout if timeout is None else timeout
        remaining = self._producer.flush(limit)
        self._raise_failures()
        if remaining:
            raise ClusterError(
                f"{remaining} record(s) were not acknowledged within {limit}s: is the cluster reachable?",
                retriable=True,
            )

    def partitions_for(self, topic: str) -> int:
        # A full metadata listing, never a lookup by name (which may auto-create the topic).
        count = self._admin.partition_counts().get(topic)
        if count is None:
            raise TopicNotFoundError(f"Topic {topic!r} does not exist: create it first")
        return count

    # Transactions

    def init_transactions(self) -> None:
        self._require_transactional("init_transactions")
        self._call("Initializing transactions", self._producer.init_transactions, self._timeout)
        logger.info("Producer %s initialized transactions", self._transactional_id)

    def begin_transaction(self) -> None:
        self._require_transactional("begin_transaction")
        self._call("Beginning a transaction", self._producer.begin_transaction)
        self._in_transaction = True

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group_id: str,
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> None:
        self._require_transactional("send_offsets_to_transaction")
        if not offsets:
            return
        owner = self._members.owner_of(group_id, list(offsets))
        group = owner.group_metadata() if owner is not None else self._group_only_metadata(group_id)
        positions = committed_positions(offsets, metadata)
        what = f"Sending offsets of group {group_id!r} to the transaction"
        try:
            self._call_bounded(
                what,
                self._offsets_timeout,
                self._producer.send_offsets_to_transaction,
                positions,
                group,
                self._offsets_timeout,
            )
        except ClusterError as exc:
            if not _timed_out(exc.__cause__):
                raise
            self._given_up = f"{what} timed out"
            raise FatalClientError(
                f"{exc}. This producer may keep coordinators it lost (librdkafka #5511), and the "
                "broker aborts its transaction once it outlives transaction.timeout.ms: give it up "
                "and create a new one."
            ) from exc

    def commit_transaction(self) -> None:
        self._require_transactional("commit_transaction")
        self._call("Committing the transaction", self._producer.commit_transaction, self._timeout)
        self._raise_failures()
        self._in_transaction = False

    def abort_transaction(self) -> None:
        self._require_transactional("abort_transaction")
        # Records of the aborted transaction that failed do not matter any more.
        self._take_native_failures()
        self._failures.clear()
        self._call("Aborting the transaction", self._producer.abort_transaction, self._timeout)
        self._take_native_failures()
        self._failures.clear()
        self._in_transaction = False

    def close(self) -> None:
        """Close the producer. An open transaction is aborted: the broker would abort it only after
        transaction.timeout.ms, and read_committed readers of its partitions would stall until then."""
        if self._closed:
            return
        if self._hung is not None:
            # Any call into the stuck handle would block too; the cluster aborts its transaction
            # (fenced by the replacement, or when transaction.timeout.ms passes). Kept referenced:
            # destroying it would block whichever thread dropped the last reference.
            _ABANDONED.append(self._producer)
            self._closed = True
            logger.warning(
                "Dropping producer %s without closing it: %s never returned",
                self._transactional_id,
                self._hung,
            )
            return
        if self._given_up is not None:
            # Every call would wait for coordinators it lost; its transaction is aborted by the
            # broker. Destroying the handle can block: the last reference goes on a thread.
            self._closed = True
            logger.info("Releasing producer %s: %s", self._transactional_id, self._given_up)
            threading.Thread(
                target=_release, args=(self._producer,), name="kstreams-producer-release", daemon=True
            ).start()
            self._producer = None
            return
        if self._in_transaction:
            try:
                self.abort_transaction()
            except ClusterError as exc:
                logger.warning(
                    "Closing producer %s: aborting its open transaction failed: %s",
                    self._transactional_id,
                    exc,
                )
        remaining = self._producer.flush(self._timeout)
        self._take_native_failures()  # logged below with what is left; nobody raises them now
        self._closed = True
        if remaining:
            logger.warning("Closing a producer with %d record(s) not acknowledged", remaining)
        if self._failures or self._rejected:
            logger.warning(
                "Closing a producer whose last %d record(s) failed delivery",
                len(self._failures) + len(self._rejected),
            )
        if self._native:
            self._producer.close()
        logger.debug("Closed producer %s", self._transactional_id or "")

    # Internals

    def _reject(self, exc: KafkaException, topic: str, partition: int, batch: RecordBatch, i: int) -> bool:
        """Keep record ``i`` as rejected when librdkafka refused it for good (too large); False for
        any other error."""
        error = exc.args[0] if exc.args else None
        if not isinstance(error, KafkaError) or error.code() not in _REJECTIONS:
            return False
        self._keep_rejected(error, topic, partition, batch, i)
        return True

    def _keep_rejected(
        self, error: KafkaError, topic: str, partition: int, batch: RecordBatch, i: int
    ) -> None:
        key, value, timestamp, _p, _o, headers = batch[i]
        self._rejected.append(
            RejectedRecord(topic, partition, key, value, timestamp, headers, f"{error.name()}: {error.str()}")
        )

    def _take_native_failures(self) -> None:
        """Move the failed deliveries kstreams' own producer kept into the failure lists."""
        if self._native and not self._closed:
            for failure in self._producer.take_failures():
                self._delivery.record(*failure)

    def _raise_failures(self) -> None:
        self._take_native_failures()
        if not self._failures:
            if self._rejected:
                rejected = list(self._rejected)
                self._rejected.clear()
                raise RecordRejectedError(rejected)
            return
        count = len(self._failures)
        # The failure that needs the most: a lost sequence state needs a new producer.
        lost = next((f for f in self._failures if f[1].code() in SEQUENCE_LOST), None)
        where, error = lost or self._failures[0]
        self._failures.clear()
        raise delivery_error(f"Producing to {where} ({count} record(s) failed)", error)

    def _call(self, what: str, method: Callable[..., object], *args: object) -> None:
        self._check_usable()
        try:
            method(*args)
        except KafkaException as exc:
            who = f" of producer {self._transactional_id!r}" if self._transactional_id else ""
            raise cluster_error(what + who, exc) from exc

    def _call_bounded(self, what: str, timeout: float, method: Callable[..., object], *args: object) -> None:
        """``_call`` on a helper thread, given up ``_HUNG_GRACE_S`` after the call's own ``timeout``."""
        self._check_usable()
        outcome: list[BaseException | None] = []

        def run() -> None:
            try:
                self._call(what, method, *args)
                outcome.append(None)
            except BaseException as exc:  # raised on the caller's thread below
                outcome.append(exc)

        helper = threading.Thread(target=run, name=f"{self._transactional_id}-bounded-call", daemon=True)
        helper.start()
        helper.join(timeout + _HUNG_GRACE_S)
        if not outcome:
            self._hung = what
            raise FatalClientError(
                f"{what} did not return within {timeout + _HUNG_GRACE_S:.0f}s although its timeout "
                f"is {timeout:.0f}s (librdkafka issue #5456: the group coordinator went away during "
                "the transaction); this producer is given up"
            )
        if outcome[0] is not None:
            raise outcome[0]

    def _require_transactional(self, method: str) -> None:
        if self._transactional_id is None:
            raise ClusterError(
                f"{method}() needs a transactional producer: set transactional.id in its config"
            )

    def _check_usable(self) -> None:
        if self._hung is not None:
            raise FatalClientError(f"The producer is unusable: {self._hung} never returned; create a new one")
        if self._given_up is not None:
            raise FatalClientError(f"The producer is given up: {self._given_up}; create a new one")
        if self._closed:
            raise ClusterError("The producer is closed: create a new one")


def _timed_out(exc: BaseException | None) -> bool:
    """Whether a confluent-kafka exception is librdkafka's own request timeout."""
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return isinstance(error, KafkaError) and error.code() == KafkaError._TIMED_OUT


def _release(producer: Any) -> None:
    """Runs on a thread of its own: destroys a given-up producer (kstreams' sender at once, a
    confluent-kafka Producer when this last reference goes)."""
    if hasattr(producer, "send_batch"):
        producer.close()


def refusal_error(what: str, exc: KafkaException, transactional: bool) -> ClusterError:
    """The port error for a record librdkafka refused to queue. A transactional producer refuses
    with _STATE once its transaction failed (e.g. the broker answered a send with
    OUT_OF_ORDER_SEQUENCE_NUMBER after an abort purged queued records): librdkafka flags the
    failure on the transaction, not on this refusal, so it is said here that an abort is what it
    needs (if the producer's state is fatal instead, the abort says so)."""
    err = kafka_error_of(exc)
    if transactional and err is not None and err.code() == KafkaError._STATE:
        return AbortableTransactionError(
            f"{what} failed: {err.str()} ({err.name()}). The transaction failed: abort it and redo "
            "its work from the last commit in the next one."
        )
    return cluster_error(what, exc)
