"""The producer client of the embedded broker, with Kafka's transactions.

``send`` appends the batch to the partition log at once (the embedded broker has no network, so
there is nothing to queue). A producer configured with "transactional.id" must call
``init_transactions`` first; that fences every older producer with the same id (their later calls
raise ``ProducerFencedError``) and aborts the transaction such a producer left open. Records sent in
a transaction are in the log but invisible to read_committed readers until ``commit_transaction``;
offsets given to ``send_offsets_to_transaction`` are committed to their group atomically with it.
A transaction still open "transaction.timeout.ms" (default 60000) after its first write is aborted
and its producer fenced, as Kafka's transaction coordinator does. An injected ``FatalClientError``
(``EmbeddedCluster.fail_next(op, error=FatalClientError(...))``) leaves the producer unusable, as a
fatal librdkafka error does: every later call raises it again.

Threads: a producer is used by one thread at a time (the port's rule); all broker state is
touched under the broker lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from kstreams._native.record_batch import RecordBatch
from kstreams.cluster.embedded_broker import EmbeddedBroker
from kstreams.cluster.embedded_log import Transaction
from kstreams.cluster.port import ClusterError, FatalClientError, TopicPartition

__all__ = ["EmbeddedProducer"]

logger = logging.getLogger(__name__)


class EmbeddedProducer:
    """A ``Producer`` of an ``EmbeddedCluster``."""

    def __init__(self, broker: EmbeddedBroker, config: Mapping[str, object] | None = None) -> None:
        config = dict(config or {})
        self._broker = broker
        tid = config.get("transactional.id")
        self._transactional_id = str(tid) if tid is not None else None
        self.client_id = str(config.get("client.id") or f"producer-{broker.next_client_number()}")
        # Kafka's default transaction.timeout.ms.
        self._txn_timeout = int(str(config.get("transaction.timeout.ms", 60000))) / 1000.0
        self._epoch: int | None = None
        self._txn: Transaction | None = None
        self._closed = False
        self._fatal: FatalClientError | None = None

    @property
    def transactional_id(self) -> str | None:
        return self._transactional_id

    def send(self, topic: str, partition: int, batch: RecordBatch) -> None:
        broker = self._broker
        self._check_fault("send")
        with broker.lock:
            self._check_usable()
            if self._transactional_id is not None:
                self._check_fenced()
                if self._txn is None:
                    raise ClusterError(
                        f"Transactional producer {self._transactional_id!r} sent to {topic}-{partition} "
                        "outside a transaction: call begin_transaction first"
                    )
            broker.append(topic, partition, batch, self._txn)

    def flush(self, timeout: float | None = None) -> None:
        # Every send is appended before it returns: there is never anything in flight.
        self._check_fault("flush")
        with self._broker.lock:
            self._check_usable()

    def partitions_for(self, topic: str) -> int:
        broker = self._broker
        self._check_fault("partitions_for")
        with broker.lock:
            self._check_usable()
            return len(broker.require_topic(topic).logs)

    def init_transactions(self) -> None:
        broker = self._broker
        self._check_fault("init_transactions")
        with broker.lock:
            self._check_usable()
            tid = self._require_transactional("init_transactions")
            self._epoch = broker.register_transactional_producer(tid)
            self._txn = None
            logger.info("Producer %s initialised transactions with epoch %d", tid, self._epoch)

    def begin_transaction(self) -> None:
        broker = self._broker
        self._check_fault("begin_transaction")
        with broker.lock:
            tid = self._transactional_state("begin_transaction")
            if self._txn is not None:
                raise ClusterError(f"Producer {tid!r} already has an open transaction")
            assert self._epoch is not None
            self._txn = Transaction(tid, self._epoch, self._txn_timeout)
            broker.open_transactions[tid] = self._txn

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group_id: str,
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> None:
        broker = self._broker
        self._check_fault("send_offsets_to_transaction")
        with broker.lock:
            txn = self._open_transaction("send_offsets_to_transaction")
            for tp, offset in offsets.items():
                if offset < 0:
                    raise ClusterError(f"Cannot commit offset {offset} of {tp} for group {group_id!r}")
            txn.started(time.monotonic())
            txn.offsets.setdefault(group_id, {}).update(offsets)
            # A later send of the same partition replaces its metadata too ("" when it has none).
            sent = txn.metadata.setdefault(group_id, {})
            for tp in offsets:
                sent[tp] = metadata.get(tp, "") if metadata is not None else ""

    def commit_transaction(self) -> None:
        self._end("commit_transaction", commit=True)

    def abort_transaction(self) -> None:
        self._end("abort_transaction", commit=False)

    def close(self) -> None:
        """Close the producer. An open transaction is aborted (a broker would abort it once the
        transaction times out; aborting now keeps read_committed readers from stalling)."""
        with self._broker.lock:
            if self._closed:
                return
            self._closed = True
            if self._txn is not None and self._transactional_id is not None:
                if self._broker.txn_epochs.get(self._transactional_id) == self._epoch:
                    self._broker.end_transaction(self._txn, commit=False)
                self._txn = None

    def _end(self, operation: str, commit: bool) -> None:
        broker = self._broker
        self._check_fault(operation)
        with broker.lock:
            txn = self._open_transaction(operation)
            broker.end_transaction(txn, commit)
            self._txn = None

    def _check_fault(self, operation: str) -> None:
        if self._fatal is not None:
            raise self._fatal
        try:
            self._broker.faults.check(operation)
        except FatalClientError as exc:
            self._fatal = exc
            raise

    def _check_usable(self) -> None:
        self._broker.check_open()
        if self._closed:
            raise ClusterError(f"Producer {self.client_id} is closed")

    def _check_fenced(self) -> None:
        assert self._transactional_id is not None
        if self._epoch is None:
            raise ClusterError(
                f"Transactional producer {self._transactional_id!r} must call init_transactions first"
            )
        # A transaction that outlived transaction.timeout.ms was aborted and its producer fenced.
        self._broker.expire_transactions(time.monotonic())
        self._broker.check_epoch(self._transactional_id, self._epoch)

    def _require_transactional(self, operation: str) -> str:
        if self._transactional_id is None:
            raise ClusterError(f"{operation} needs a producer configured with 'transactional.id'")
        return self._transactional_id

    def _transactional_state(self, operation: str) -> str:
        self._check_usable()
        tid = self._require_transactional(operation)
        self._check_fenced()
        return tid

    def _open_transaction(self, operation: str) -> Transaction:
        tid = self._transactional_state(operation)
        if self._txn is None:
            raise ClusterError(
                f"{operation}: producer {tid!r} has no open transaction (call begin_transaction)"
            )
        return self._txn
