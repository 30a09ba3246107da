"""Compare kstreams' answer to a case with Kafka Streams' answer, and say where they part.

Both answers have the oracle's shape (OracleMain.java). They must be equal: per sink topic the
same records (key, value, timestamp, headers) in the same order, and the same rows of each named
store (in any order). An error counts only as "an error happened" (the two libraries word
their exceptions differently), and what was written before it still compares.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from tests.oracle.kstreams_driver import run_on_kstreams
from tests.oracle.spec import oracle_request

__all__ = ["Oracle", "Outcome", "comparable", "describe_difference", "run_case", "run_cases"]


class Oracle(Protocol):
    def run(self, request: dict[str, Any]) -> dict[str, Any]: ...

    def run_many(self, requests: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]: ...


def comparable(answer: dict[str, Any]) -> dict[str, Any]:
    """What of an answer must match: outputs, store contents, and whether it failed. Store rows
    compare as sets: a window or session store iterates in an order of its own layout (Kafka's
    RocksDB segments), which no API promises."""
    return {
        "outputs": answer.get("outputs", {}),
        "stores": {name: sorted(rows, key=repr) for name, rows in answer.get("stores", {}).items()},
        "error": bool(answer.get("error")),
    }


def describe_difference(expected: dict[str, Any], actual: dict[str, Any]) -> str | None:
    """None when the answers match, else the first difference in a few lines."""
    want, got = comparable(expected), comparable(actual)
    if want == got:
        return None
    if want["error"] != got["error"]:
        return f"error: Kafka Streams {expected.get('error')!r}, kstreams {actual.get('error')!r}"
    for topic in sorted(set(want["outputs"]) | set(got["outputs"])):
        w, g = want["outputs"].get(topic, []), got["outputs"].get(topic, [])
        if w != g:
            for i, (a, b) in enumerate(zip(w, g, strict=False)):
                if a != b:
                    both = f"\n  Kafka: {w}\n  kstreams: {g}"
                    return f"topic {topic}, record {i}: Kafka Streams {a}, kstreams {b}{both}"
            both = f"\n  Kafka: {w}\n  kstreams: {g}"
            return f"topic {topic}: Kafka Streams wrote {len(w)} records, kstreams {len(g)}{both}"
    for store in sorted(set(want["stores"]) | set(got["stores"])):
        w, g = want["stores"].get(store), got["stores"].get(store)
        if w != g:
            return f"store {store}:\n  Kafka: {w}\n  kstreams: {g}"
    return f"answers differ: Kafka {want}, kstreams {got}"


class Outcome:
    """Both answers to one case and their first difference (None when they match)."""

    def __init__(self, case: dict[str, Any], expected: dict[str, Any], actual: dict[str, Any]) -> None:
        self.case = case
        self.expected = expected
        self.actual = actual
        self.difference = describe_difference(expected, actual)
        if expected.get("fatal"):
            # The oracle could not build the spec: a bug of the spec language, never a pass.
            self.difference = f"the oracle cannot run this spec: {expected['error']}"

    def __bool__(self) -> bool:
        return self.difference is None


def run_case(oracle: Oracle, case: dict[str, Any]) -> Outcome:
    """Run ``case`` on Kafka Streams and on kstreams."""
    return Outcome(case, oracle.run(oracle_request(case)), run_on_kstreams(case))


def run_cases(oracle: Oracle, cases: Iterable[dict[str, Any]], stop_at: int | None = None) -> list[Outcome]:
    """Run ``cases`` on both, Kafka Streams working on the next cases while kstreams runs one;
    the failing outcomes, at most ``stop_at`` of them. When this returns, the oracle is idle
    again (no answer left in flight), so the caller may shrink a failure with ``run_case``."""
    cases = list(cases)
    failures: list[Outcome] = []
    answers = oracle.run_many(oracle_request(c) for c in cases)
    try:
        for case, expected in zip(cases, answers, strict=False):
            outcome = Outcome(case, expected, run_on_kstreams(case))
            if not outcome:
                failures.append(outcome)
                if stop_at is not None and len(failures) >= stop_at:
                    break
    finally:
        close = getattr(answers, "close", None)
        if close is not None:
            close()  # reads the answers still in flight
    return failures
