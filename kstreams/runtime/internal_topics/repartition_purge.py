"""Purging repartition topics: records the application has committed past are deleted.

A repartition topic is the application's own hand-off between two sub-topologies: once the reading
task has committed an offset, nothing needs the records before it, so Kafka Streams deletes them
(``TaskManager.maybePurgeCommittedRecords``) rather than keep them for the topic's retention (which
it sets to forever, precisely because it purges). kstreams does the same: at most every
``repartition.purge.interval.ms``, after a successful commit, an Admin DeleteRecords request
advances each committed repartition partition's log start to its committed offset.

The request runs on a worker thread of its own, so a slow or absent broker never holds the polling
thread; as in Kafka, a new request is made only once the previous one has finished, and a failed one
is logged and made again at the next interval (with the offsets committed by then). Only offsets of
committed data are used, so under either guarantee no record is deleted before its task has committed
the work that read it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor

from kstreams.cluster.port import Admin, TopicPartition

__all__ = ["RepartitionPurger"]

logger = logging.getLogger(__name__)


class RepartitionPurger:
    """Deletes committed records of the application's repartition topics; owned by the polling
    thread (``after_commit`` is called by it only)."""

    def __init__(
        self, admin: Admin, repartition_topics: Iterable[str], interval_ms: int, thread_name: str
    ) -> None:
        self._admin = admin
        self._topics = frozenset(repartition_topics)
        self._interval_s = interval_ms / 1000.0
        self._last = time.monotonic()
        self._executor: ThreadPoolExecutor | None = None
        self._thread_name = thread_name
        self._pending: Future[None] | None = None
        # Per partition, the offset records were last deleted before: nothing to ask for again.
        self._purged: dict[TopicPartition, int] = {}

    def after_commit(self, committed: Mapping[TopicPartition, int]) -> None:
        """Called after each successful commit with the committed offsets of the running tasks;
        starts a purge once the interval has passed and the previous purge has finished."""
        if not self._topics:
            return
        now = time.monotonic()
        if now - self._last < self._interval_s:
            return
        if self._pending is not None and not self._pending.done():
            return  # Kafka makes no new DeleteRecords request while one is in flight
        before = {
            tp: offset
            for tp, offset in committed.items()
            if tp.topic in self._topics and offset > self._purged.get(tp, 0)
        }
        self._last = now
        if not before:
            return
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._thread_name)
        self._pending = self._executor.submit(self._purge, before)

    def _purge(self, before: dict[TopicPartition, int]) -> None:
        try:
            self._admin.delete_records(before)
        except Exception as exc:  # a purge only frees space: the next interval asks again
            logger.warning("Could not purge committed repartition records (%s); retrying later", exc)
            return
        self._purged.update(before)
        logger.debug("Purged repartition records before %s", before)

    def close(self) -> None:
        """Stop the worker; a request in flight is left to finish on its own (it deletes only
        committed records, so it is harmless whenever it lands)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
