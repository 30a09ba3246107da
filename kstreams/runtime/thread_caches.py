"""The record cache budget: ``statestore.cache.max.bytes`` split over the threads that process.

Every processing thread owns one ``RecordCache`` with an equal share of the budget (Kafka's
ThreadCache). The streaming runtime redivides the budget when a stream thread is added or
removed; the test driver and a Spark task process on one thread and take the whole budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kstreams._native.record_cache import RecordCache
from kstreams.config import StreamsConfig

__all__ = ["single_thread_cache", "thread_share"]


def thread_share(total_bytes: int, threads: int) -> int:
    """One thread's share of the budget (the whole budget when no thread runs yet)."""
    return total_bytes // threads if threads > 0 else total_bytes


def single_thread_cache(
    config: StreamsConfig, store_builders: Mapping[str, Any], store_names: Iterable[str]
) -> RecordCache | None:
    """The cache of a runtime with one processing thread, or None when the budget is 0 or none of
    these stores caches (no cache then costs nothing on the way to the store)."""
    if config.cache_max_bytes <= 0:
        return None
    if not any(store_builders[name].caching_enabled for name in store_names):
        return None
    return RecordCache(thread_share(config.cache_max_bytes, 1))
