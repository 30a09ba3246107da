"""Topologies the tools' tests name as module:attr."""

from __future__ import annotations

from kstreams import Consumed, Grouped, Materialized, Produced, Serdes, StreamsBuilder

__all__ = ["build", "builder", "needs_argument", "not_a_topology", "topology"]


def builder() -> StreamsBuilder:
    b = StreamsBuilder()
    (
        b.stream("words", Consumed.with_(Serdes.string(), Serdes.string()))
        .select_key(lambda _k, v: v)
        .group_by_key(Grouped.with_(Serdes.string(), Serdes.string()))
        .count(Materialized.as_("word-counts"))
        .to_stream()
        .to("word-counts-out", Produced.with_(Serdes.string(), Serdes.long()))
    )
    return b


def build():  # type: ignore[no-untyped-def]
    return builder().build()


topology = build()
not_a_topology = 42


def needs_argument(name):  # type: ignore[no-untyped-def]
    return build()
