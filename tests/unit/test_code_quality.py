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


USER_PROGRAM = """
from kstreams import Consumed, KafkaStreams, Materialized, Produced, Serdes, StreamsBuilder

builder = StreamsBuilder()
lines = builder.stream("lines", Consumed.with_(Serdes.string(), Serdes.string()))
counts = lines.flat_map_values(lambda line: line.split()).group_by(lambda _k, w: w).count(
    Materialized.as_("counts")
)
counts.to_stream().to("counts", Produced.with_(Serdes.string(), Serdes.long()))
streams = KafkaStreams(builder.build(), {"application.id": "word-count"})
reveal_type(streams)
reveal_type(lines)
reveal_type(counts)
streams.start(42)  # wrong on purpose: start() takes no argument
"""


def test_a_user_program_type_checks_against_the_real_public_types(tmp_path: Path) -> None:
    program = tmp_path / "word_count.py"
    program.write_text(USER_PROGRAM)
    result = _run(["mypy", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(program)])
    out = result.stdout
    revealed = [line for line in out.splitlines() if "Revealed type" in line]
    assert len(revealed) == 3, out
    assert not any('"Any"' in line for line in revealed), out  # public names must not come back as Any
    assert "kstreams.client.KafkaStreams" in revealed[0], out
    assert "KStream" in revealed[1] and "KTable" in revealed[2], out
    assert 'Too many arguments for "start"' in out, out
