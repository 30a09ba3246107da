"""KStream-KTable join: each stream record looks up the table's current value for its key.

The table side never triggers output: a table update only changes what later stream records
see. Inner join: a stream record whose key has no table row is dropped. Left join: it is joined
with None. Records with a null value are dropped; a null key drops the record in an inner join
and joins with None in a left join (KIP-962). The result keeps the stream record's timestamp,
whatever the timestamp of the table row (Kafka's KStreamKTableJoinProcessor).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kstreams.processor import Processor, ProcessorContext, Record
from kstreams.topology.dsl.processors.table import ValueGetterSupplier

__all__ = ["StreamTableJoinSupplier"]

logger = logging.getLogger(__name__)


class StreamTableJoinSupplier:
    """Joins stream records with ``joiner(stream_value, table_value)``, or with
    ``joiner(key, stream_value, table_value)`` when ``with_key`` (Kafka's ValueJoinerWithKey)."""

    kind = "stream_table_join"

    def __init__(
        self, table: ValueGetterSupplier, joiner: Callable[..., Any], left: bool, with_key: bool = False
    ) -> None:
        self.table = table
        self.joiner = joiner
        self.left = left
        self.with_key = with_key

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _StreamTableJoin(self)


class _StreamTableJoin(Processor[Any, Any, Any, Any]):
    def __init__(self, spec: StreamTableJoinSupplier) -> None:
        self.spec = spec

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.table = self.spec.table.get(context)
        # A versioned table (KIP-914) is looked up as of each stream record's timestamp.
        get_as_of = getattr(self.spec.table, "get_as_of", None)
        self.table_as_of = get_as_of(context) if get_as_of is not None else None

    def process(self, record: Record[Any, Any]) -> None:
        if record.value is None or (record.key is None and not self.spec.left):
            logger.debug("Skipping a record with a null key or value in a stream-table join.")
            return
        if record.key is None:
            stored = None
        elif self.table_as_of is not None:
            stored = self.table_as_of(record.key, record.timestamp)
        else:
            stored = self.table(record.key)
        table_value = None if stored is None else stored.value
        if table_value is None and not self.spec.left:
            return
        spec = self.spec
        result = (
            spec.joiner(record.key, record.value, table_value)
            if spec.with_key
            else spec.joiner(record.value, table_value)
        )
        self.context.forward(record.with_value(result))
