"""Time segments of a persistent windowed store: one RocksDB database per span of time.

Records are grouped by a timestamp (a window's start, a session's end) into segments of
``segment_interval_ms``; segment ``i`` covers ``[i * interval, (i + 1) * interval)`` and lives in
``<store directory>/<store>.<i * interval>``, Kafka's naming. Stream time is the largest timestamp
written; once a segment ends more than the retention before it, the whole segment is closed and
deleted, so expiry costs one directory removal rather than a scan. Writes older than the retention
are refused, and readers ask ``min_live()`` for the oldest timestamp they may return.

``SegmentedLifecycle`` is how the segmented stores (window and session) open, flush and close.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from kstreams._native.store_core import SegmentIndex
from kstreams.errors import ProcessorStateException
from kstreams.state.rocksdb import RocksDBDatabase, rocksdb_path
from kstreams.state.store import StateStore, StateStoreContext

__all__ = ["SegmentedLifecycle", "Segments", "default_segment_interval"]

logger = logging.getLogger(__name__)


def default_segment_interval(retention_ms: int) -> int:
    """Kafka's default segment interval: half the retention, at least one minute."""
    return max(retention_ms // 2, 60_000)


class Segments(SegmentIndex):
    """The open segments of one store, and its observed stream time. Which segment a record is
    written to or read from (``for_write``, ``for_read``) is C (``SegmentIndex``); this class
    opens, creates and drops the segments' databases."""

    def __init__(self, store_name: str, retention_ms: int, segment_interval_ms: int) -> None:
        super().__init__(retention_ms, segment_interval_ms)
        self.store_name = store_name
        self._configs: Mapping[str, Any] | None = None

    @property
    def is_open(self) -> bool:
        return self._directory is not None

    def open(self, directory: str, configs: Mapping[str, Any] | None = None) -> None:
        """Open the segments already in ``directory`` (created if missing); ``configs`` (the
        application's) go to each segment's database (its ``rocksdb.config.setter``)."""
        os.makedirs(directory, exist_ok=True)
        self._directory = directory
        self._configs = configs
        self._live_known = False
        prefix = self.store_name + "."
        for entry in sorted(os.listdir(directory)):
            if not entry.startswith(prefix):
                continue
            try:
                segment_start = int(entry[len(prefix) :])
            except ValueError:
                logger.warning(
                    "Store %s: ignoring %s, which is not a segment directory.", self.store_name, entry
                )
                continue
            self._segments[segment_start // self.interval] = self._database(entry)

    def ids(self) -> list[int]:
        """The ids of the open segments, ascending."""
        return sorted(self._segments)

    def _closed(self) -> None:
        raise ProcessorStateException(f"Store {self.store_name} is not open; init() it first.")

    def _drop_expired(self, min_live_segment: int) -> None:
        """Close and delete every segment older than ``min_live_segment``."""
        for segment_id in [i for i in self._segments if i < min_live_segment]:
            logger.debug("Store %s: dropping expired segment %d.", self.store_name, segment_id)
            self._segments.pop(segment_id).destroy()

    def _create(self, segment_id: int) -> RocksDBDatabase:
        """Open a new segment's database."""
        segment = self._database(f"{self.store_name}.{segment_id * self.interval}")
        self._segments[segment_id] = segment
        return segment

    def _database(self, segment_name: str) -> RocksDBDatabase:
        assert self._directory is not None
        path = os.path.join(self._directory, segment_name)
        return RocksDBDatabase(self.store_name, path, self._configs, segment_name)

    def for_live_segment_write(self, timestamp: int, create: bool) -> RocksDBDatabase | None:
        """As ``for_write`` (advancing stream time, dropping expired segments), but a timestamp past
        the retention still goes to its segment while the segment is live (created when
        ``create``): Kafka's time-ordered stores write so, and only their reads apply the
        retention."""
        segment = self.for_write(timestamp)
        if segment is not None:
            return segment  # type: ignore[no-any-return]
        segment_id = timestamp // self.interval
        if segment_id < (self.observed_stream_time - self.retention_ms) // self.interval:
            return None
        segment = self._segments.get(segment_id)
        if segment is None and create:
            segment = self._create(segment_id)
        return segment  # type: ignore[no-any-return]

    def holding(self, timestamp: int) -> RocksDBDatabase | None:
        """The open segment of ``timestamp``, whether or not the timestamp is past the retention
        (Kafka's time-ordered session store reads sessions so until their segment is dropped)."""
        return self._segments.get(timestamp // self.interval)  # type: ignore[no-any-return]

    def between(self, time_from: int, time_to: int) -> list[RocksDBDatabase]:
        """The open segments overlapping [time_from, time_to], oldest first."""
        first = time_from // self.interval
        last = time_to // self.interval
        return [self._segments[i] for i in sorted(self._segments) if first <= i <= last]

    def flush(self) -> None:
        for segment in self._segments.values():
            segment.write_pending()

    def close(self) -> None:
        segments = list(self._segments.values())
        self._segments.clear()
        self._directory = None
        for segment in segments:
            segment.close()


class SegmentedLifecycle:
    """Opening and closing of a persistent store kept in ``Segments`` under
    ``<task state dir>/rocksdb/<store>/``: ``init`` opens the segments already there and registers
    the store's restore callback; ``flush`` and ``close`` reach every segment."""

    _name: str
    _segments: Segments
    # What the store is, for the log: "window" or "session".
    _kind: str
    restore_batch: Callable[[list[tuple[bytes, bytes | None]]], None]

    @property
    def persistent(self) -> bool:
        return True

    @property
    def is_open(self) -> bool:
        return self._segments.is_open

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._segments.open(rocksdb_path(context, self._name), context.app_configs)
        context.register(root, self.restore_batch)
        logger.debug(
            "Opened RocksDB %s store %s (%d segments)", self._kind, self._name, len(self._segments.ids())
        )

    def flush(self) -> None:
        self._segments.flush()

    def close(self) -> None:
        self._segments.close()
