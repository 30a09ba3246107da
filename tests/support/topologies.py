"""Topologies the integration tests share, written once."""

from __future__ import annotations

from kstreams.processor import Processor, Record
from kstreams.serdes import Serdes
from kstreams.state import Stores
from kstreams.topology.topology import Topology

__all__ = ["CountPerKey", "count_topology"]

STRING = Serdes.string()
LONG = Serdes.long()


class CountPerKey(Processor):
    """Counts records per key in the logged store ``counts`` and forwards every running count."""

    def init(self, context):  # type: ignore[no-untyped-def]
        self.context = context
        self.store = context.get_state_store("counts")

    def process(self, record: Record) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(record.with_value(count))


def count_topology(source: str, sink: str) -> Topology:
    """String keys and values from ``source``; each key's running count (a long) to ``sink``."""
    topology = Topology()
    topology.add_source("src", source, key_deserializer=STRING, value_deserializer=STRING)
    topology.add_processor("count", CountPerKey, "src")
    topology.add_state_store(
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("counts"), STRING, LONG), "count"
    )
    topology.add_sink("sink", sink, "count", key_serializer=STRING, value_serializer=LONG)
    return topology
