"""The emit position of a windowed aggregation that emits on window close, kept so that a restart
neither repeats nor loses a final result.

The position is the window-close time up to which the aggregation has forwarded its windows' final
results. Kafka (KIP-825) commits it with the task's input offsets, as ``ProcessorMetadata`` keyed by
the window store's name. Here it lives in a small key-value store that the DSL adds beside the
window store and connects to the same processor, named ``<window store>-emit-position`` (one entry:
the window store's name -> the close time). It is restored like any store, from local state or
else from its changelog, on the test driver, on both cluster adapters and in Spark (in memory there,
for one pass, like every store).

Guarantees: under exactly_once_v2 the position's changelog record commits in the same transaction
as the results it marks and the input offsets, so a restart resumes exactly where the last commit
left. Under at_least_once a clean stop commits all three too; after a crash the changelog may be
ahead of the committed offsets, as every store's changelog may (Kafka's suppression buffer has the
same exposure), and the final results of the windows closed by the re-processed records are not
forwarded again.

Writes: only when final results were forwarded, never per record. A close time that advanced past
no stored window needs no write: a window that was not in the store when stream time closed it can
never be created later (its records are dropped as late), so resuming from the older position
forwards the same windows.
"""

from __future__ import annotations

import logging
from typing import Any

from kstreams.processor import ProcessorContext
from kstreams.serdes import Serdes
from kstreams.topology.dsl.processors.store_access import get_store

__all__ = ["EMIT_POSITION_SUFFIX", "EmitPosition", "emit_position_store_builder", "emit_position_store_name"]

logger = logging.getLogger(__name__)

EMIT_POSITION_SUFFIX = "-emit-position"
NO_POSITION = -1


def emit_position_store_name(store_name: str) -> str:
    """The emit-position store of the aggregation whose window (or session) store is ``store_name``."""
    return store_name + EMIT_POSITION_SUFFIX


def emit_position_store_builder(window_store_builder: Any) -> Any:
    """The builder of the emit-position store beside ``window_store_builder``'s store: a key-value
    store, persistent when the window store is (a user's supplier without ``persistent`` counts as
    persistent) and logged when it is, with its log config; never cached, so a restart finds every
    position that was forwarded with its results."""
    # Imported on use, as materialize.py does: describing a topology needs no compiled core.
    from kstreams.state.stores import Stores

    name = emit_position_store_name(window_store_builder.name)
    window_supplier = getattr(window_store_builder, "supplier", None)
    if getattr(window_supplier, "persistent", True):
        supplier = Stores.persistent_key_value_store(name)
    else:
        supplier = Stores.in_memory_key_value_store(name)
    builder: Any = Stores.key_value_store_builder(supplier, Serdes.string(), Serdes.long())
    builder.with_caching_disabled()
    if getattr(window_store_builder, "dsl_params", None) is not None:
        # The window store's kind is not settled yet (DSL store suppliers may replace it): so the
        # position store's is not either, and the same suppliers make both.
        from kstreams.state.dsl_store_suppliers import DslKeyValueParams

        builder.dsl_params = DslKeyValueParams(name, is_timestamped=False)
    if window_store_builder.logging_enabled:
        return builder.with_logging_enabled(dict(window_store_builder.log_config))
    return builder.with_logging_disabled()


class EmitPosition:
    """One task's emit position for the window store ``store_name``: ``close_time`` is where the
    last run left off (-1: nothing forwarded yet), read at init; ``advance`` moves it on."""

    def __init__(self, context: ProcessorContext[Any, Any], store_name: str) -> None:
        self._key = store_name
        self._store = get_store(context, emit_position_store_name(store_name))
        stored = self._store.get(store_name)
        self.close_time: int = NO_POSITION if stored is None else int(stored)
        if stored is not None:
            logger.info(
                "Windowed aggregation of store %s (task %s) resumes emitting final results after close "
                "time %d.",
                store_name,
                context.task_id,
                self.close_time,
            )

    @property
    def started(self) -> bool:
        """Whether any final result was forwarded (by this run or an earlier one)."""
        return self.close_time != NO_POSITION

    def advance(self, close_time: int, forwarded: bool) -> None:
        """Stream time has closed every window up to ``close_time``; ``forwarded``: some final
        results went out for it, so the position is written (else only remembered)."""
        self.close_time = close_time
        if forwarded:
            self._store.put(self._key, close_time)
