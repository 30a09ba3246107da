"""A task's FIFO of input records.

Safe between one pushing thread (the polling thread) and one popping thread (the stream thread
that holds the task's lock): push and pop take an internal C mutex without the GIL.
"""

from kstreams._native.record_batch import RecordBatch

class RecordBuffer:
    def __init__(self) -> None: ...
    def push(self, batch: RecordBatch) -> None:
        """Append a batch (O(1): the batch is referenced, not copied)."""
    def pop(self, max_records: int, max_timestamp: int = -1) -> RecordBatch:
        """Remove and return up to max_records from the head as one batch (empty when empty).
        With max_timestamp >= 0, stop before the first record whose timestamp exceeds it, but
        always return at least one record when any is buffered (timestamp-ordered merging of a
        task's partitions). A pop within one pushed batch is a slice; across batches the records
        are copied once."""
    def __len__(self) -> int: ...
    @property
    def bytes_held(self) -> int:
        """Key and value bytes (RecordBatch.nbytes) of the buffered records."""
    @property
    def head_timestamp(self) -> int:
        """Timestamp of the oldest buffered record, or -1 when empty."""
    @property
    def head_offset(self) -> int:
        """Offset of the oldest buffered record, or -1 when empty."""
    def clear(self) -> int:
        """Drop every buffered record; returns how many were dropped."""
