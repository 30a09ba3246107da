"""Forwarding of table updates from stateful processors, with or without a record cache.

When the processor's store caches, the store forwards the updates it flushes (at commit or on
eviction) through the flush listener, and the processor must not forward them itself: that is how
caching collapses many updates of a key into one downstream record. Without a cache, every update
is forwarded at once.

The DSL's stores are timestamped: a cache flushes ``ValueAndTimestamp`` values, and the forwarder
sends the plain values at the new value's stored timestamp (Kafka's ``TimestampedCacheFlushListener``),
the largest timestamp of the records that made it, whichever record last touched the entry.

Headers are Kafka's too: an update forwarded at once carries the headers of the record that made
it; one a cache flushes carries those of the record that last wrote the entry (the caching layer
remembers them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kstreams.processor import ProcessorContext, Record
from kstreams.state.value_and_timestamp import ValueAndTimestamp
from kstreams.topology.dsl.records import Change

__all__ = ["ChangeForwarder"]

logger = logging.getLogger(__name__)


class ChangeForwarder:
    """Forwards ``Change(new, old)`` records of one processor's store (Kafka's tuple forwarder).

    ``key_mapper`` turns the key the cache reports into the key to forward (windowed stores
    report the window, which the processor may need to complete with its end). Without
    ``flushes`` (an aggregation emitting on window close: Kafka's tuple forwarder without a flush
    listener) the store's cache, if any, forwards nothing and every update is forwarded at once.
    Without ``send_old_values`` every change goes out with no old value (Kafka's tuple forwarder
    and cache flush listener of a processor no downstream asked for old values).
    """

    def __init__(
        self,
        store: Any,
        context: ProcessorContext[Any, Any],
        key_mapper: Callable[[Any], Any] | None = None,
        flushes: bool = True,
        *,
        send_old_values: bool = True,
    ) -> None:
        self._context = context
        self._key_mapper = key_mapper
        self._send_old_values = send_old_values
        # A cache flushes at commit or on eviction, outside this processor's process(); the
        # context then has to be told which node forwards (created in init, so it is this one).
        self._node_name: str | None = getattr(context, "current_node_name", None)
        self._forward_from = getattr(context, "forward_from", None)
        # A processor with nothing downstream forwards nothing: its cache then only writes what it
        # flushes, without reading each entry's old value or building a record for it.
        node = getattr(context, "node", None)
        leaf = node is not None and not getattr(node, "children", True)
        set_listener = getattr(store, "set_flush_listener", None) if flushes else None
        listener = None if leaf else self._on_flush
        self.cached = bool(set_listener(listener)) if set_listener is not None else False

    def _on_flush(self, key: Any, new: Any, old: Any, timestamp: int, headers: Any = None) -> None:
        if self._key_mapper is not None:
            key = self._key_mapper(key)
        if isinstance(new, ValueAndTimestamp):
            timestamp = new.timestamp
            new = new.value
        if not self._send_old_values:
            old = None
        elif isinstance(old, ValueAndTimestamp):
            old = old.value
        record = Record(key, Change(new, old), timestamp, headers)
        if self._forward_from is not None and self._node_name is not None:
            self._forward_from(self._node_name, record)
        else:
            self._context.forward(record)

    def maybe_forward(self, key: Any, new: Any, old: Any, timestamp: int, headers: Any = None) -> None:
        """Forward the update now, with ``headers`` (those of the record that made it), unless the
        store's cache will forward it when it flushes."""
        if not self.cached:
            old = old if self._send_old_values else None
            self._context.forward(Record(key, Change(new, old), timestamp, headers))
