"""Each hand-written reference case (catalogue.py) answers exactly as on Kafka Streams."""

from __future__ import annotations

from typing import Any

import pytest

from tests.oracle.catalogue import CATALOGUE
from tests.oracle.compare import run_case
from tests.oracle.differences import DIFFERENCES
from tests.support.oracle import KafkaStreamsOracle


def _param(case: dict[str, Any]) -> Any:
    marks = []
    if case.get("difference"):
        reason = f"{case['difference']}: {DIFFERENCES[case['difference']].reason}"
        marks.append(pytest.mark.xfail(strict=True, reason=reason))
    return pytest.param(case, id=case["name"], marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CATALOGUE])
def test_reference_case_matches_kafka_streams(oracle: KafkaStreamsOracle, case: dict[str, Any]) -> None:
    outcome = run_case(oracle, case)
    assert outcome, outcome.difference
