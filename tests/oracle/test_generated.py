"""Random cases (generator.py) answer exactly as on Kafka Streams.

The default run compares 500 cases of a fixed seed, leaving out the step families of the known
differences (differences.py); the slow run compares 5000 cases of other seeds. A failing case
is shrunk and saved under regressions/ (replayed by test_regressions.py) before the test fails.
Longer runs: ``python -m tests.oracle.run --cases 20000 --seed N``.
"""

from __future__ import annotations

import pytest

from tests.oracle.compare import run_case, run_cases
from tests.oracle.differences import EXCLUDED_FAMILIES
from tests.oracle.generator import generate_cases
from tests.oracle.shrink import save_regression, shrink
from tests.support.oracle import KafkaStreamsOracle

DEFAULT_SEED = 20260
DEFAULT_CASES = 500


def compare_generated(oracle: KafkaStreamsOracle, seed: int, count: int) -> None:
    """Run ``count`` cases of ``seed``; shrink and save the first failing one, then fail."""
    for outcome in run_cases(oracle, generate_cases(seed, count, EXCLUDED_FAMILIES), stop_at=1):
        small = shrink(outcome.case, lambda c: not run_case(oracle, c))
        difference = run_case(oracle, small).difference or outcome.difference or ""
        path = save_regression(small, difference, f"new-{outcome.case['name']}")
        pytest.fail(f"{outcome.case['name']} differs from Kafka Streams; shrunk to {path}:\n{difference}")


def test_generated_cases_match_kafka_streams(oracle: KafkaStreamsOracle) -> None:
    compare_generated(oracle, DEFAULT_SEED, DEFAULT_CASES)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_many_more_generated_cases_match_kafka_streams(oracle: KafkaStreamsOracle, seed: int) -> None:
    compare_generated(oracle, seed, 1000)
