"""The record cache budget: ``statestore.cache.max.bytes`` split over the threads that process.

The record cache (Kafka's ThreadCache, ``statestore.cache.max.bytes``) is three parts, found here:

- the cache itself: ``kstreams._native.record_cache`` (``RecordCache``, compiled from
  ``csrc/kstreams/_native/record_cache.pyx``; its ``.pyi`` says the semantics), a byte-bounded LRU
  of named caches, one namespace per ``<task>-<store>``, that hands dirty entries to a listener when
  it flushes or evicts;
- the store layers that write through it: ``kstreams/state/caching.py`` (caching key-value,
  window and session stores), which find the cache of the thread processing the task on every
  access, and flush it on commit;
- the budget, this module: every processing thread owns one ``RecordCache`` with an equal share of
  the budget. The streaming runtime redivides it when a stream thread is added or removed
  (``kstreams/runtime/threads/stream_threads.py``); the test driver and a Spark task process on one
  thread and take the whole budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from kstreams._native.record_cache import RecordCache
from kstreams.config import StreamsConfig

if TYPE_CHECKING:
    from kstreams.state.store import StoreBuilder

__all__ = ["single_thread_cache", "thread_share"]


def thread_share(total_bytes: int, threads: int) -> int:
    """One thread's share of the budget (the whole budget when no thread runs yet)."""
    return total_bytes // threads if threads > 0 else total_bytes


def single_thread_cache(
    config: StreamsConfig, store_builders: Mapping[str, StoreBuilder], store_names: Iterable[str]
) -> RecordCache | None:
    """The cache of a runtime with one processing thread, or None when the budget is 0 or none of
    these stores caches (no cache then costs nothing on the way to the store)."""
    if config.cache_max_bytes <= 0:
        return None
    if not any(store_builders[name].caching_enabled for name in store_names):
        return None
    return RecordCache(thread_share(config.cache_max_bytes, 1))
