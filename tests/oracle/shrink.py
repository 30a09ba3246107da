"""Shrink a failing case to a small one that still fails, and save it as a regression.

Greedy and deterministic: drop chunks of input events (halves, quarters, ... single events),
drop headers and the cache setting, then drop spec nodes that only pass records through (their
readers read their input instead) and sinks beyond the first, and repeat while anything helps.
A saved regression (regressions/<name>.json) is replayed by test_regressions.py.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.oracle.spec import normalize

__all__ = ["REGRESSIONS", "save_regression", "shrink"]

REGRESSIONS = Path(__file__).parent / "regressions"
# Steps whose removal leaves a valid spec when their readers read their input instead.
_PASS_THROUGH = {
    "filter",
    "filter_not",
    "map_values",
    "map",
    "select_key",
    "flat_map_values",
    "flat_map",
    "repartition",
    "suppress",
}

Case = dict[str, Any]


def _valid(case: Case) -> bool:
    try:
        normalize(case["spec"])
    except (ValueError, KeyError):
        return False
    return any(n["op"] == "to" for n in case["spec"]["nodes"])


def _without_node(case: Case, index: int) -> Case | None:
    nodes = case["spec"]["nodes"]
    node = nodes[index]
    if node["op"] not in _PASS_THROUGH:
        if node["op"] == "to" and sum(n["op"] == "to" for n in nodes) > 1:
            smaller = copy.deepcopy(case)
            del smaller["spec"]["nodes"][index]
            return smaller
        return None
    smaller = copy.deepcopy(case)
    del smaller["spec"]["nodes"][index]
    for other in smaller["spec"]["nodes"]:
        for field in ("in", "other"):
            if other.get(field) == node["id"]:
                other[field] = node["in"]
    return smaller


def _candidates(case: Case) -> list[Case]:
    out: list[Case] = []
    events = case["input"]
    size = len(events) // 2
    while size >= 1:
        for start in range(0, len(events), size):
            smaller = copy.deepcopy(case)
            smaller["input"] = events[:start] + events[start + size :]
            out.append(smaller)
        size //= 2
    for i, event in enumerate(events):
        if event.get("headers"):
            smaller = copy.deepcopy(case)
            del smaller["input"][i]["headers"]
            out.append(smaller)
    if "config" in case:
        smaller = copy.deepcopy(case)
        del smaller["config"]
        out.append(smaller)
    for i in range(len(case["spec"]["nodes"])):
        without = _without_node(case, i)
        if without is not None:
            out.append(without)
    return [c for c in out if _valid(c)]


def shrink(case: Case, fails: Callable[[Case], bool], budget: int = 400) -> Case:
    """The smallest case found, within ``budget`` runs, for which ``fails`` still holds."""
    runs = 0
    progress = True
    while progress and runs < budget:
        progress = False
        for candidate in _candidates(case):
            runs += 1
            if fails(candidate):
                case = candidate
                progress = True
                break
            if runs >= budget:
                break
    return case


def save_regression(case: Case, difference: str, name: str | None = None) -> Path:
    """Write ``case`` to regressions/<name>.json with the difference it showed."""
    REGRESSIONS.mkdir(exist_ok=True)
    name = name or case.get("name") or "case"
    saved = {k: v for k, v in case.items() if k != "name"}
    path = REGRESSIONS / f"{name}.json"
    path.write_text(json.dumps({"name": name, "difference": difference, "case": saved}, indent=1) + "\n")
    return path
