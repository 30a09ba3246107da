"""The reference cases on KafkaStreams over Apache Kafka, three partitions, cache off, answer as
Kafka Streams' TopologyTestDriver does task by task (on_kafka.py says what is compared, and why
only the cases ``eligible`` names run here).

The default run takes one case of each family the runtime adds something to (tasks per partition,
changelogs, stream time per task, two-topic tasks); the slow run takes every eligible case, and
generated ones (generator.py) as well.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kstreams.cluster.kafka import KafkaCluster
from tests.oracle.catalogue import CATALOGUE
from tests.oracle.differences import EXCLUDED_FAMILIES
from tests.oracle.generator import generate_cases
from tests.oracle.on_kafka import base_near_now, eligible, interleaving_mismatch, run_on_kafka, shifted
from tests.support.oracle import KafkaStreamsOracle

pytestmark = pytest.mark.integration

ELIGIBLE = [c for c in CATALOGUE if eligible(c)]
DEFAULT = {
    "count-by-key",
    "tumbling-count-grace-late",
    "session-count-merging",
    "tumbling-suppress-until-window-closes",
    "stream-stream-outer-join-late-headers",
    "table-table-outer-join",
}
GENERATED_SEED = 7
GENERATED = [c for c in generate_cases(GENERATED_SEED, 400, EXCLUDED_FAMILIES) if eligible(c)][:20]


def _param(case: dict[str, Any]) -> Any:
    marks = [] if case["name"] in DEFAULT else [pytest.mark.slow]
    return pytest.param(case, id=case["name"], marks=marks)


def test_the_default_cases_are_eligible() -> None:
    assert DEFAULT <= {c["name"] for c in ELIGIBLE}


def test_an_interleaving_keeps_each_tasks_order_and_every_record() -> None:
    a, b, c = {"key": "a"}, {"key": "b"}, {"key": "c"}
    assert interleaving_mismatch([a, c, b], [[a, b], [c]]) is None
    assert "not next of any task" in (interleaving_mismatch([b, a, c], [[a, b], [c]]) or "")
    assert "missing 1 records" in (interleaving_mismatch([a, b], [[a, b], [c]]) or "")
    assert "not next of any task" in (interleaving_mismatch([a, b, c, c], [[a, b], [c]]) or "")


def compare_on_kafka(
    oracle: KafkaStreamsOracle, cluster: KafkaCluster, app_id: str, tmp_path: Path, case: dict[str, Any]
) -> None:
    prefix = f"{app_id}-{re.sub('[^a-z0-9]+', '-', case['name'])}"
    difference = run_on_kafka(oracle, cluster, shifted(case, prefix, base_near_now()), prefix, tmp_path)
    assert difference is None, difference


@pytest.mark.parametrize("case", [_param(c) for c in ELIGIBLE])
def test_reference_case_on_kafka_matches_kafka_streams(
    oracle: KafkaStreamsOracle, kafka_cluster: KafkaCluster, app_id: str, tmp_path: Path, case: dict[str, Any]
) -> None:
    compare_on_kafka(oracle, kafka_cluster, app_id, tmp_path, case)


@pytest.mark.slow
@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in GENERATED])
def test_generated_case_on_kafka_matches_kafka_streams(
    oracle: KafkaStreamsOracle, kafka_cluster: KafkaCluster, app_id: str, tmp_path: Path, case: dict[str, Any]
) -> None:
    compare_on_kafka(oracle, kafka_cluster, app_id, tmp_path, case)
