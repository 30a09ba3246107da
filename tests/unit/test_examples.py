"""Every application in examples/ runs as a user runs it, on the embedded cluster, and checks its
own results (each ``main()`` returns 1 when its output differs from a count made in plain Python).
The Spark streaming example needs a broker: tests/integration/test_spark_streaming_example.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["word_count", "page_views", "enrichment_join", "interactive_queries"])
def test_example_runs_on_the_embedded_cluster_and_its_check_passes(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert load(name).main([]) == 0, capsys.readouterr().err
    assert "OK:" in capsys.readouterr().out


def test_every_example_is_run_by_a_test() -> None:
    tested = {"word_count", "page_views", "enrichment_join", "interactive_queries", "spark_backfill"}
    tested.add("spark_streaming")  # tests/integration/test_spark_streaming_example.py
    assert {p.stem for p in EXAMPLES.glob("*.py")} == tested


@pytest.mark.spark
@pytest.mark.slow
def test_spark_backfill_example_counts_made_up_words(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pyspark", reason="the Spark example needs pip install 'kstreams[spark]'")
    assert load("spark_backfill").main(["--demo", "--demo-records", "200", "--partitions", "2"]) == 0
