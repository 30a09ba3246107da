"""KStream-KTable join: each stream record looks up the table's current value for its key.

The table side never triggers output: a table update only changes what later stream records
see. Inner join: a stream record whose key has no table row is dropped. Left join: it is joined
with None. Records with a null value are dropped; a null key drops the record in an inner join
and joins with None in a left join (KIP-962).
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
    """Joins stream records with ``joiner(stream_value, table_value)``."""

    kind = "stream_table_join"

    def __init__(self, table: ValueGetterSupplier, joiner: Callable[[Any, Any], Any], left: bool) -> None:
        self.table = table
        self.joiner = joiner
        self.left = left

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _StreamTableJoin(self)


class _StreamTableJoin(Processor[Any, Any, Any, Any]):
    def __init__(self, spec: StreamTableJoinSupplier) -> None:
        self.spec = spec

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.table = self.spec.table.get(context)

    def process(self, record: Record[Any, Any]) -> None:
        if record.value is None or (record.key is None and not self.spec.left):
            logger.debug("Skipping a record with a null key or value in a stream-table join.")
            return
        table_value = None if record.key is None else self.table(record.key)
        if table_value is None and not self.spec.left:
            return
        self.context.forward(record.with_value(self.spec.joiner(record.value, table_value)))
