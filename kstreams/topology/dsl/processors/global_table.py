"""Processors of global tables: the update processor that fills a GlobalKTable's store, and the
stream-GlobalKTable join (Kafka's KTableSource on a global store and KStreamGlobalKTableJoin).

The update processor runs on the global thread only: it writes each record of the table's topic
into the store (a tombstone deletes the key; records with a null key are skipped) with the
record's timestamp, and forwards nothing.

The join runs in stream tasks and reads the global store, which holds every partition of the
table's topic, so the stream needs no repartition and no co-partitioning: ``key_selector(key,
value)`` maps each stream record to the table key to look up, and ``joiner(stream_value,
table_value)`` makes the result, which keeps the stream record's key and timestamp. As in Kafka's
KStreamKTableJoinProcessor (KIP-962, as Kafka Streams 4.1 answers): a record with a null value
is dropped; so is one whose selected key is null in an inner join, while a left join joins it
with None (whatever its stream key). An inner join drops records without a table row; a left
join joins them with None. Table updates never produce output.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kstreams.processor import Processor, ProcessorContext, Record
from kstreams.state.value_and_timestamp import ValueAndTimestamp
from kstreams.topology.dsl.processors.store_access import get_store

__all__ = ["GlobalTableSourceSupplier", "StreamGlobalTableJoinSupplier"]

logger = logging.getLogger(__name__)


class GlobalTableSourceSupplier:
    """Makes the processor that writes a global table's topic into its store ``store_name``."""

    kind = "global_table_source"

    def __init__(self, topic: str, store_name: str) -> None:
        self.topic = topic
        self.store_name = store_name

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _GlobalTableSource(self)


class _GlobalTableSource(Processor[Any, Any, Any, Any]):
    def __init__(self, spec: GlobalTableSourceSupplier) -> None:
        self.spec = spec

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.store = get_store(context, self.spec.store_name)

    def process(self, record: Record[Any, Any]) -> None:
        if record.key is None:
            logger.debug("Skipping a record with a null key of global table topic %s.", self.spec.topic)
            return
        if record.value is None:
            self.store.delete(record.key)
        else:
            self.store.put(record.key, ValueAndTimestamp.make(record.value, record.timestamp))


class StreamGlobalTableJoinSupplier:
    """Makes the processor joining a stream with the global table in store ``store_name``:
    ``joiner(stream_value, table_value)``, or ``joiner(stream_key, stream_value, table_value)``
    when ``with_key`` (Kafka's ValueJoinerWithKey: the stream record's key, not the table's)."""

    kind = "stream_global_table_join"

    def __init__(
        self,
        store_name: str,
        key_selector: Callable[[Any, Any], Any],
        joiner: Callable[..., Any],
        left: bool,
        with_key: bool = False,
    ) -> None:
        self.store_name = store_name
        self.key_selector = key_selector
        self.joiner = joiner
        self.left = left
        self.with_key = with_key

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _StreamGlobalTableJoin(self)


class _StreamGlobalTableJoin(Processor[Any, Any, Any, Any]):
    def __init__(self, spec: StreamGlobalTableJoinSupplier) -> None:
        self.spec = spec

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        # A global store is reachable from every processor without being connected to it.
        self.table = get_store(context, self.spec.store_name)

    def process(self, record: Record[Any, Any]) -> None:
        spec = self.spec
        if record.value is None:
            logger.debug("Skipping a record with a null value in a stream-global table join.")
            return
        table_key = spec.key_selector(record.key, record.value)
        if table_key is None and not spec.left:
            logger.debug("Skipping a record whose key selector returned None in a stream-global table join.")
            return
        stored = None if table_key is None else self.table.get(table_key)
        table_value = ValueAndTimestamp.get_value_or_null(stored)
        if table_value is None and not spec.left:
            return
        result = (
            spec.joiner(record.key, record.value, table_value)
            if spec.with_key
            else spec.joiner(record.value, table_value)
        )
        self.context.forward(record.with_value(result))
