"""The partition log of the embedded broker, and the transactions that write into it.

A ``PartitionLog`` is a list of appended ``RecordBatch``es with their base offsets. Appending is
O(1) and reading from an offset is O(log n) in the number of batches (bisect), so no per-record
Python work happens on produce or fetch: records stay in the batches' C memory.

Transactions follow Kafka's log format: a transactional batch is appended at once, but a
read_committed reader stops at the last stable offset (LSO, the first offset of the oldest open
transaction) and skips batches of aborted transactions. Ending a transaction appends one control
record (the commit or abort marker) to every partition it wrote, which takes an offset like in
Kafka: readers never see it, but offsets have gaps after transactions, as on a real broker.

Threads: nothing here locks. Every object is owned by one ``EmbeddedCluster`` and touched only
under its lock.
"""

from __future__ import annotations

import logging
from bisect import bisect_right

from kstreams._native.record_batch import RecordBatch
from kstreams.cluster.port import TopicPartition

__all__ = ["LogEntry", "PartitionLog", "Transaction"]

logger = logging.getLogger(__name__)


class LogEntry:
    """One appended batch (or one control marker) of a partition log."""

    __slots__ = ("aborted", "base", "batch", "count")

    def __init__(self, base: int, batch: RecordBatch | None, count: int) -> None:
        self.base = base
        # None for a control record (a transaction marker).
        self.batch = batch
        self.count = count
        # Set when the transaction that wrote this batch aborts.
        self.aborted = False


class Transaction:
    """The open transaction of one transactional producer: what it wrote and the offsets it will
    commit. Nothing it wrote is visible to read_committed readers before it ends (see
    ``PartitionLog.end_transaction``)."""

    __slots__ = ("deadline", "epoch", "metadata", "offsets", "timeout", "transactional_id", "writes")

    def __init__(self, transactional_id: str, epoch: int, timeout: float) -> None:
        self.transactional_id = transactional_id
        self.epoch = epoch
        self.writes: dict[TopicPartition, tuple[PartitionLog, list[LogEntry]]] = {}
        # group id -> {partition: next offset to read}, applied only when the transaction commits.
        self.offsets: dict[str, dict[TopicPartition, int]] = {}
        # group id -> {partition: the metadata committed with its offset}
        self.metadata: dict[str, dict[TopicPartition, str]] = {}
        # transaction.timeout.ms in seconds. As on a broker, the clock starts with the first write
        # (or offsets), not at begin_transaction, which only changes the producer's state.
        self.timeout = timeout
        self.deadline: float | None = None

    def started(self, now: float) -> None:
        if self.deadline is None:
            self.deadline = now + self.timeout

    def record_write(self, tp: TopicPartition, log: PartitionLog, entry: LogEntry) -> None:
        written = self.writes.get(tp)
        if written is None or written[0] is not log:
            # A new log object under the same name means the topic was deleted and re-created.
            written = (log, [])
            self.writes[tp] = written
        written[1].append(entry)

    def __repr__(self) -> str:
        return f"Transaction({self.transactional_id!r}, epoch={self.epoch})"


class PartitionLog:
    """The records of one partition: log start offset, end offset, last stable offset, and reads
    from a position that never cross the visible limit of the reader's isolation level."""

    __slots__ = ("_bases", "_entries", "_open", "end_offset", "start_offset")

    def __init__(self) -> None:
        self._entries: list[LogEntry] = []
        # Base offset of every entry, kept beside the entries so that bisect needs no key function.
        self._bases: list[int] = []
        # Open transactions that wrote here -> their first offset. Insertion order is offset order
        # (offsets only grow), so the first value is the LSO.
        self._open: dict[Transaction, int] = {}
        self.start_offset = 0
        self.end_offset = 0

    @property
    def last_stable_offset(self) -> int:
        """The first offset a read_committed reader may not read yet."""
        for first in self._open.values():
            return first
        return self.end_offset

    def high_watermark(self, read_committed: bool) -> int:
        return self.last_stable_offset if read_committed else self.end_offset

    def append(self, batch: RecordBatch, partition: int, txn: Transaction | None = None) -> LogEntry:
        """Append a batch, assigning it the next offsets; returns its entry (O(1))."""
        base = self.end_offset
        stored = batch.with_partition(partition).with_offsets(base)
        entry = LogEntry(base, stored, len(stored))
        self._entries.append(entry)
        self._bases.append(base)
        self.end_offset = base + entry.count
        if txn is not None and txn not in self._open:
            self._open[txn] = base
        return entry

    def end_transaction(self, txn: Transaction, entries: list[LogEntry], commit: bool) -> None:
        """Close a transaction here: mark its batches aborted (when aborting) and write the marker."""
        if txn not in self._open:
            return
        if not commit:
            for entry in entries:
                entry.aborted = True
        del self._open[txn]
        marker = LogEntry(self.end_offset, None, 1)
        self._entries.append(marker)
        self._bases.append(marker.base)
        self.end_offset += 1

    def delete_before(self, offset: int) -> None:
        """Advance the log start offset (never backwards); whole batches below it are dropped."""
        if offset <= self.start_offset:
            return
        self.start_offset = offset
        # Entries are contiguous: those before the one holding `offset` end at or before it. The
        # entry holding `offset` stays and is sliced on read.
        drop = bisect_right(self._bases, offset) - 1
        if drop > 0:
            del self._entries[:drop]
            del self._bases[:drop]

    def read(self, position: int, max_records: int, read_committed: bool) -> tuple[RecordBatch | None, int]:
        """Up to max_records visible records from position (start_offset <= position <= end_offset).

        Returns the records as one batch (None when there are none) and the next position. The
        position moves past control markers and, for read_committed, past aborted batches, just as
        a Kafka consumer's position does, even when no record is returned.
        """
        limit = self.high_watermark(read_committed)
        position = max(position, self.start_offset)
        if position >= limit or max_records <= 0:
            return None, position
        i = max(bisect_right(self._bases, position) - 1, 0)
        slices: list[RecordBatch] = []
        taken = 0
        entries = self._entries
        while i < len(entries) and taken < max_records:
            entry = entries[i]
            i += 1
            if entry.base >= limit:
                break
            stop = min(entry.base + entry.count, limit)
            if stop <= position:
                continue
            if entry.batch is None or (read_committed and entry.aborted):
                position = stop
                continue
            lo = position - entry.base
            hi = min(stop - entry.base, lo + (max_records - taken))
            piece = entry.batch if lo == 0 and hi == entry.count else entry.batch.slice(lo, hi)
            slices.append(piece)
            taken += hi - lo
            position = entry.base + hi
        if not slices:
            return None, position
        return (slices[0] if len(slices) == 1 else RecordBatch.concat(slices)), position

    def offset_for_time(self, timestamp: int) -> int:
        """The earliest offset at or after the log start whose record's timestamp is at or after
        ``timestamp``, or the end offset when there is none (control markers and aborted batches
        hold no records a reader would see, so they never match)."""
        i = max(bisect_right(self._bases, self.start_offset) - 1, 0)
        for entry in self._entries[i:]:
            if entry.batch is None or entry.aborted:
                continue
            lo = max(self.start_offset - entry.base, 0)
            batch = entry.batch if lo == 0 else entry.batch.slice(lo, entry.count)
            if len(batch) == 0 or batch.max_timestamp < timestamp:
                continue
            for k, ts in enumerate(batch.timestamps_array().tolist()):
                if ts >= timestamp:
                    return entry.base + lo + k
        return self.end_offset

    def read_all(self, read_committed: bool) -> RecordBatch | None:
        """Every visible record from the log start to the reader's limit, in offset order."""
        return self.read(self.start_offset, self.end_offset - self.start_offset, read_committed)[0]
