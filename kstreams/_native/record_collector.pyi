"""Output buffers per output partition, with changelog suppression.

Sink partitions keep every record in send order. Partitions registered as changelogs keep only
the newest record per key since the last drain (older ones are suppressed and counted). Thread
safe: many stream threads send while the polling thread drains; the internal mutex is a leaf.
"""

from kstreams._native.record_batch import Header, RecordBatch

class RecordCollector:
    def __init__(self) -> None: ...
    def register_changelog(self, topic: str, partition: int) -> None: ...
    def unregister_changelog(self, topic: str, partition: int) -> None: ...
    def is_changelog(self, topic: str, partition: int) -> bool: ...
    def send(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: list[Header] | None = None,
    ) -> None: ...
    def send_batch(self, topic: str, partition: int, batch: RecordBatch) -> None:
        """Append a whole batch to one partition's buffer (suppressed per key if a changelog)."""
    def drain(self) -> list[tuple[str, int, RecordBatch]]:
        """Remove and return every buffered record as (topic, partition, batch), each batch in the
        partition's send order (for changelogs: the order of each key's newest write). Records
        carry the partition they were sent to and offset -1 (the log assigns offsets); partitions
        with nothing buffered are left out."""
    def __len__(self) -> int:
        """Records buffered now."""
    @property
    def bytes_held(self) -> int:
        """Key and value bytes of the records buffered now."""
    @property
    def suppressed_total(self) -> int:
        """Changelog records dropped because a newer record for the same key superseded them."""
    @property
    def sent_total(self) -> int:
        """Records ever passed to send or send_batch, suppressed ones included."""
