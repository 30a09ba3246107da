"""A streaming task's stores as Spark keeps them: their changelog, in chunks, folded on restore.

On Spark Structured Streaming (``run_topology_stream``) a task's stores live in Spark's state
store, not in a local state directory. What Spark keeps is what Kafka keeps for a task: the
stores' changelog. Each micro-batch appends one *chunk* (the changelog records the task wrote in
that micro-batch, newest per key only, as the record collector's changelog suppression leaves
them) to the task's list state; restoring folds the chunks in order (a later record of a key
replaces an earlier one, a null value deletes it: a compacted changelog topic) and hands the
result to the stores' restore callbacks, as the state updater does from changelog topics.

Appending costs one call and the size of what changed; the list is compacted (rewritten as one
chunk of the fold) every ``COMPACT_AFTER_CHUNKS`` chunks, so restoring reads at most that many
chunks besides the fold. Compaction also drops the entries of windowed stores that fell out of
their retention (Kafka's changelogs of window stores are compacted and time-retained for the
same reason): without it, the state of a windowed aggregation would grow with every window.

A chunk is an Arrow IPC stream of (topic, key, value, timestamp) rows; ``topic`` is the
changelog topic (one per store).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pyarrow as pa

from kstreams.state.window_key_schema import SEQ_SIZE, SESSION_SUFFIX, TIMESTAMP_SIZE

__all__ = [
    "CHUNK_SCHEMA",
    "COMPACT_AFTER_CHUNKS",
    "ChangelogFold",
    "StoreRetention",
    "decode_chunk",
    "encode_chunk",
]

logger = logging.getLogger(__name__)

CHUNK_SCHEMA = pa.schema(
    [("topic", pa.string()), ("key", pa.binary()), ("value", pa.binary()), ("timestamp", pa.int64())]
)
# Chunks a task's list state may hold before it is rewritten as one: bounds what a restore reads
# besides the fold, and how long expired windows stay in Spark's state.
COMPACT_AFTER_CHUNKS = 16

_TS = struct.Struct(">q")

ChangelogRecord = tuple[str, bytes, bytes | None, int]


@dataclass(frozen=True)
class StoreRetention:
    """How long a windowed store keeps an entry, and where its changelog keys hold the time the
    retention applies to: a window's start (window stores) or a session's end (session stores)."""

    store_type: str  # "window" or "session"
    retention_ms: int

    def entry_time(self, key: bytes) -> int:
        """The time of a changelog key: the window start (key + start + seq) or the session end
        (key + end + start)."""
        if self.store_type == "window":
            return int(_TS.unpack_from(key, len(key) - TIMESTAMP_SIZE - SEQ_SIZE)[0])
        return int(_TS.unpack_from(key, len(key) - SESSION_SUFFIX)[0])


def encode_chunk(records: Iterable[ChangelogRecord]) -> bytes:
    """The Arrow IPC stream of ``records`` (topic, key, value, timestamp)."""
    topics: list[str] = []
    keys: list[bytes] = []
    values: list[bytes | None] = []
    timestamps: list[int] = []
    for topic, key, value, timestamp in records:
        topics.append(topic)
        keys.append(key)
        values.append(value)
        timestamps.append(timestamp)
    table = pa.table(
        [
            pa.array(topics, pa.string()),
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array(timestamps, pa.int64()),
        ],
        schema=CHUNK_SCHEMA,
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, CHUNK_SCHEMA) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def decode_chunk(chunk: bytes) -> list[ChangelogRecord]:
    """The records of a chunk ``encode_chunk`` made, in their order."""
    table = pa.ipc.open_stream(pa.BufferReader(chunk)).read_all()
    return list(
        zip(
            table.column("topic").to_pylist(),
            table.column("key").to_pylist(),
            table.column("value").to_pylist(),
            table.column("timestamp").to_pylist(),
            strict=True,
        )
    )


class ChangelogFold:
    """The latest record of every (changelog topic, key): a compacted changelog, built from chunks.

    ``retentions`` (changelog topic -> StoreRetention) names the windowed stores whose expired
    entries ``prune`` drops.
    """

    def __init__(self, retentions: Mapping[str, StoreRetention] | None = None) -> None:
        self._retentions = dict(retentions or {})
        self._latest: dict[tuple[str, bytes], tuple[bytes, int]] = {}

    def __len__(self) -> int:
        return len(self._latest)

    def apply(self, records: Iterable[ChangelogRecord]) -> None:
        """Apply changelog records in order: a value replaces the key's entry, a null deletes it."""
        latest = self._latest
        for topic, key, value, timestamp in records:
            if value is None:
                latest.pop((topic, key), None)
            else:
                latest[(topic, key)] = (value, timestamp)

    def prune(self) -> int:
        """Drop the entries of windowed stores that their store no longer keeps; returns how many.

        A windowed store's stream time is the latest window start (session end) written to it,
        and it keeps entries no older than that minus its retention. The newest entry in the fold
        is at most that stream time, so pruning by it drops nothing the store still holds.
        """
        if not self._retentions:
            return 0
        newest: dict[str, int] = {}
        for topic, key in self._latest:
            retention = self._retentions.get(topic)
            if retention is not None:
                time = retention.entry_time(key)
                if time > newest.get(topic, time - 1):
                    newest[topic] = time
        expired = [
            (topic, key)
            for (topic, key) in self._latest
            if topic in newest
            and self._retentions[topic].entry_time(key)
            < newest[topic] - self._retentions[topic].retention_ms + 1
        ]
        for entry in expired:
            del self._latest[entry]
        return len(expired)

    def records(self) -> list[ChangelogRecord]:
        """Every live entry as a changelog record, grouped by topic."""
        return sorted(
            ((topic, key, value, timestamp) for (topic, key), (value, timestamp) in self._latest.items()),
            key=lambda record: record[0],
        )

    def by_topic(self) -> dict[str, list[tuple[bytes, bytes, int]]]:
        """Changelog topic -> its live (key, value, timestamp) entries."""
        grouped: dict[str, list[tuple[bytes, bytes, int]]] = {}
        for (topic, key), (value, timestamp) in self._latest.items():
            grouped.setdefault(topic, []).append((key, value, timestamp))
        return grouped
