"""The known differences between kstreams and Kafka Streams, each found by the oracle.

Each entry names the step families (``spec.families``) it touches, which the default generated
run leaves out (``EXCLUDED_FAMILIES``), and the reason the xfail marks of its regression and
catalogue tests give. docs/differences.md describes each with its minimal example; the
regression cases are in regressions/<id>.json. When kstreams is fixed, the strict xfail turns
into a failure: delete the entry, its families come back into the generated cases.
A family prefixed ``headers:`` keeps its spec in the cases but pipes no headers into them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DIFFERENCES", "EXCLUDED_FAMILIES", "Difference"]


@dataclass(frozen=True)
class Difference:
    id: str
    families: frozenset[str]
    reason: str


DIFFERENCES: dict[str, Difference] = {
    d.id: d
    for d in [
        Difference(
            "table-join-absent-tombstone",
            frozenset({"left_join:table-table", "outer_join:table-table"}),
            "with caching disabled, a table-table left/outer join forwards a tombstone when a key "
            "absent on both sides is deleted; Kafka Streams forwards nothing",
        ),
        Difference(
            "emit-close-first-emission",
            frozenset({"emit:close"}),
            "an aggregation emitting on window close emits every window a jump of stream time closes; "
            "Kafka Streams' first emission covers only windows starting at or after stream time - "
            "grace - size, and the earlier closed windows are never emitted",
        ),
        Difference(
            "session-aggregate-headers",
            frozenset({"headers:aggregate:session"}),
            "with caching disabled, a session-windowed aggregation's results carry the input record's "
            "headers; Kafka Streams' carry none",
        ),
        Difference(
            "emit-close-store-retention",
            frozenset({"store:emit:close"}),
            "the window store of a windowed aggregation emitting on window close drops windows "
            "past retention at once; Kafka Streams' store still returns them until their segment "
            "is dropped",
        ),
        Difference(
            "rekeyed-left-join-null-key",
            frozenset({"left_join:stream-table:rekeyed", "left_join:stream-global:rekeyed"}),
            "a stream-table left join after a repartition (a key change or repartition()) drops a "
            "record whose key is null; Kafka Streams (KIP-962) repartitions it and joins it with null",
        ),
        Difference(
            "versioned-table-out-of-order",
            frozenset({"table:versioned"}),
            "a table in a versioned store forwards nothing for a record older than its row's latest "
            "version; Kafka Streams forwards it marked not-latest, and to_stream writes it",
        ),
        Difference(
            "driver-punctuation-after-repartition",
            frozenset({"process:rekeyed"}),
            "kstreams' test driver keeps a stream time per sub-topology, so a stream-time punctuation "
            "after a repartition fires once the repartitioned record is in; Kafka Streams' driver runs "
            "every sub-topology in one task with one stream time, and punctuates before it arrives",
        ),
    ]
}

EXCLUDED_FAMILIES: frozenset[str] = frozenset(f for d in DIFFERENCES.values() for f in d.families)
