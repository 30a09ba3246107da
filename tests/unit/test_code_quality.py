"""The package's public surface is pinned, and the code passes ruff and mypy (part of every run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kstreams

ROOT = Path(__file__).resolve().parents[2]

PUBLIC = [
    "Branched", "Consumed", "Grouped", "InitParameters", "JoinWindows", "Joined", "KafkaStreams", "KeyValue",
    "Materialized", "Named", "Produced", "Repartitioned", "Serdes", "StateRestoreListener", "StreamJoined",
    "Stores", "StreamsBuilder", "StreamsConfig", "StreamsUncaughtExceptionResponse", "TimeWindows",
    "Topology", "WindowedSerdes",
]  # fmt: skip


def test_public_api_is_exactly_the_documented_names() -> None:
    assert sorted(kstreams.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert getattr(kstreams, name) is not None


def test_importing_kstreams_does_not_import_pyspark_or_the_runtime() -> None:
    code = (
        "import kstreams, sys;"
        "print('pyspark' in sys.modules, 'kstreams.runtime.polling_thread' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["False", "False"]


def _run(tool: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *tool], capture_output=True, text=True, cwd=ROOT)


def test_ruff_lint_and_format_are_clean() -> None:
    paths = ["kstreams", "tests", "bench", "examples"]
    paths = [p for p in paths if (ROOT / p).exists()]
    lint = _run(["ruff", "check", *paths])
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = _run(["ruff", "format", "--check", *paths])
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_mypy_is_clean() -> None:
    result = _run(["mypy", "kstreams"])
    assert result.returncode == 0, result.stdout + result.stderr
