"""Columnar, immutable batches of records held in C memory.

A RecordBatch is the unit in which records move between the cluster, the input buffers, the
compiled processors and the record collector. Keys and values are byte strings or None (a null
key, or a tombstone value). Every column lives in C memory; slicing shares the memory of the
parent batch, so it is O(1). Batches pickle (as their records). Compiled modules use the C-level
accessors and the RecordBatchBuilder declared in csrc/kstreams/_native/record_batch.pxd.
"""

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

Header = tuple[str, bytes | None]
# (key, value, timestamp ms, partition, offset, headers or None)
RecordTuple = tuple[bytes | None, bytes | None, int, int, int, list[Header] | None]

class RecordBatch:
    @staticmethod
    def from_records(records: Iterable[RecordTuple]) -> RecordBatch: ...
    @staticmethod
    def from_columns(
        keys: Sequence[bytes | None],
        values: Sequence[bytes | None],
        timestamps: Sequence[int] | np.ndarray,
        partitions: Sequence[int] | np.ndarray | int = 0,
        offsets: Sequence[int] | np.ndarray | int = -1,
        headers: Sequence[list[Header] | None] | None = None,
    ) -> RecordBatch:
        """Build from parallel columns. A scalar partition or offset fills the column; offsets of -1
        mean "not yet assigned" (a producer's batch before the log appends it)."""
    @staticmethod
    def concat(batches: Sequence[RecordBatch]) -> RecordBatch: ...
    @staticmethod
    def empty() -> RecordBatch: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[RecordTuple]: ...
    def __getitem__(self, i: int) -> RecordTuple: ...
    def key(self, i: int) -> bytes | None: ...
    def value(self, i: int) -> bytes | None: ...
    def timestamp(self, i: int) -> int: ...
    def partition(self, i: int) -> int: ...
    def offset(self, i: int) -> int: ...
    def headers(self, i: int) -> list[Header] | None: ...
    def slice(self, start: int, stop: int) -> RecordBatch:
        """Records [start, stop) sharing this batch's memory (bounds are clamped)."""
    def with_offsets(self, base_offset: int) -> RecordBatch:
        """A copy whose offsets are base_offset, base_offset+1, ... (keys and values shared)."""
    def with_partition(self, partition: int) -> RecordBatch: ...
    def to_list(self) -> list[RecordTuple]: ...
    def keys(self) -> list[bytes | None]: ...
    def values(self) -> list[bytes | None]: ...
    @property
    def nbytes(self) -> int:
        """Bytes of key and value data (the measure RecordBuffer.bytes_held sums)."""
    @property
    def has_headers(self) -> bool:
        """True when some record of this batch carries headers (headers() returns copies)."""
    def timestamps_array(self) -> np.ndarray:
        """int64 numpy view (read-only) of the timestamp column."""
    def offsets_array(self) -> np.ndarray: ...
    def partitions_array(self) -> np.ndarray: ...
    @property
    def first_offset(self) -> int:
        """Offset of the first record, or -1 when empty."""
    @property
    def last_offset(self) -> int:
        """Offset of the last record, or -1 when empty."""
    @property
    def max_timestamp(self) -> int:
        """Largest timestamp, or -1 when empty."""

def copy_headers(headers: Any) -> list[tuple[str, bytes | None]] | None:
    """A record's headers as a batch stores them (None, a list, or raw bytes) as a new list."""

def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash (the Java client's, seed 0x9747b28c), as a signed 32-bit int."""

def murmur3_hash128(data: bytes, seed: int = 104729) -> bytes:
    """Kafka's ``Murmur3.hash128`` as 16 bytes: the two 64-bit halves, big-endian."""

def default_partition(key: bytes, num_partitions: int) -> int:
    """Kafka's default partitioner for a non-null key: (murmur2(key) & 0x7fffffff) % num_partitions."""

def partitions_for_keys(batch: RecordBatch, num_partitions: int) -> np.ndarray:
    """int32 array of default_partition for every key of a batch (null keys get -1)."""

def partitions_for_offsets(offsets: np.ndarray, data: Any, num_partitions: int) -> np.ndarray:
    """int32 array of default_partition for each of the ``len(offsets) - 1`` keys held end to end
    in ``data`` (a buffer; key i is ``data[offsets[i]:offsets[i + 1]]``, offsets int64): an Arrow
    binary column read in place. The caller masks null keys."""
