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
            "driver-punctuation-after-repartition",
            frozenset({"process:rekeyed"}),
            "kstreams' test driver keeps a stream time per sub-topology, so a stream-time punctuation "
            "after a repartition fires once the repartitioned record is in; Kafka Streams' driver runs "
            "every sub-topology in one task with one stream time, and punctuates before it arrives",
        ),
    ]
}

EXCLUDED_FAMILIES: frozenset[str] = frozenset(f for d in DIFFERENCES.values() for f in d.families)
