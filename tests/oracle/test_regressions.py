"""Every saved shrunk case (regressions/*.json) answers as on Kafka Streams; those of a known
difference (differences.py) are strict xfails until kstreams is fixed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.oracle.compare import run_case
from tests.oracle.differences import DIFFERENCES
from tests.oracle.shrink import REGRESSIONS
from tests.support.oracle import KafkaStreamsOracle


def _params() -> list[Any]:
    params = []
    for path in sorted(REGRESSIONS.glob("*.json")):
        saved = json.loads(path.read_text())
        marks = []
        known = DIFFERENCES.get(saved.get("known", ""))
        if known is not None:
            marks.append(pytest.mark.xfail(strict=True, reason=f"{known.id}: {known.reason}"))
        params.append(pytest.param(saved["case"], id=path.stem, marks=marks))
    return params


@pytest.mark.parametrize("case", _params())
def test_saved_case_matches_kafka_streams(oracle: KafkaStreamsOracle, case: dict[str, Any]) -> None:
    outcome = run_case(oracle, case)
    assert outcome, outcome.difference
