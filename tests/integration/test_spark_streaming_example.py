"""examples/spark_streaming.py runs as one command on Apache Kafka: it streams a topic through a
topology on Spark into another topic across a query restart, and checks the per-user counts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the Spark example needs pip install 'kstreams[spark]'")

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_streaming.py"
# Two Spark query runs of one micro-batch each, plus starting Spark.
EXAMPLE_TIMEOUT_S = 280


def test_spark_streaming_example_counts_every_page_view_across_a_restart(
    tmp_path: Path, kafka_broker: str
) -> None:
    # A topic name of the example's own on a shared broker: the example creates what is missing.
    args = ["--records", "40", "--batch-records", "100", "--bootstrap-servers", kafka_broker]
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT_S,
        cwd=tmp_path,
    )
    assert result.returncode == 0, f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
    assert "OK: 40 page views counted per user" in result.stdout
