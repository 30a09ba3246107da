"""The package's public surface is pinned, and the code passes ruff and mypy (part of every run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kstreams

ROOT = Path(__file__).resolve().parents[2]

PUBLIC = [
    # org.apache.kafka.streams
    "KafkaStreams", "KeyQueryMetadata", "KeyValue", "StoreQueryParameters", "StreamsBuilder", "StreamsConfig",
    "StreamsMetadata", "TestInputTopic", "TestOutputTopic", "ThreadMetadata", "Topology",
    "TopologyConfig", "TopologyDescription", "TopologyTestDriver",
    # org.apache.kafka.streams.kstream
    "Branched", "BranchedKStream", "BufferConfig", "CogroupedKStream", "Consumed", "EmitStrategy",
    "GlobalKTable", "Grouped", "JoinWindows", "Joined", "KGroupedStream", "KGroupedTable", "KStream",
    "KTable", "Materialized", "Named", "Printed", "Produced", "Repartitioned",
    "SessionWindowedCogroupedKStream", "SessionWindowedKStream", "SessionWindows", "SlidingWindows",
    "StreamJoined", "Suppressed", "TableJoined", "TimeWindowedCogroupedKStream", "TimeWindowedKStream",
    "TimeWindows", "ValueTransformerWithKey", "Window", "Windowed", "WindowedSerdes",
    # org.apache.kafka.streams.state (interactive queries, the RocksDB options hook, the DSL's stores)
    "HostInfo", "QueryableStoreTypes", "RocksDBConfigSetter", "BuiltInDslStoreSuppliers",
    "DslKeyValueParams", "DslSessionParams", "DslStoreSuppliers", "DslWindowParams",
    # kstreams' own, and names of other Kafka packages a DSL user needs at hand
    "InitParameters", "Serdes", "SlidingWindowedKStream", "StateRestoreListener", "Stores",
    "StreamsUncaughtExceptionResponse",
]  # fmt: skip


def test_public_api_is_exactly_the_documented_names() -> None:
    assert sorted(kstreams.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert getattr(kstreams, name) is not None


def test_every_public_name_imports_from_kstreams_in_a_fresh_process() -> None:
    # A fresh interpreter, so each name goes through the lazy module __getattr__ of a first import.
    code = f"from kstreams import ({', '.join(PUBLIC)}); print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ok"]


def test_public_names_are_the_classes_of_their_home_modules() -> None:
    from kstreams.queries import StoreQueryParameters
    from kstreams.state import WindowedKey
    from kstreams.topology import SessionWindows, Suppressed

    assert kstreams.StoreQueryParameters is StoreQueryParameters
    assert kstreams.Windowed is WindowedKey  # Kafka's Windowed: a key and its window
    assert kstreams.SessionWindows is SessionWindows
    assert kstreams.Suppressed is Suppressed


def test_importing_kstreams_does_not_import_pyspark_or_the_runtime() -> None:
    code = (
        "import kstreams, sys;"
        "print('pyspark' in sys.modules, 'kstreams.runtime.threads.polling_thread' in sys.modules)"
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
from kstreams import Consumed, JoinWindows, KafkaStreams, KeyValue, Materialized, Produced, Serdes
from kstreams import StreamsBuilder, TimeWindows
from kstreams.predicates import value
from kstreams.state import WindowedKey
from kstreams.topology import KGroupedStream, KGroupedTable, KStream, KTable

builder = StreamsBuilder()
lines = builder.stream("lines", Consumed.with_(Serdes.string(), Serdes.string()))
words: KStream[str, str] = lines.flat_map_values(lambda line: str(line).split()).select_key(lambda _k, w: w)
lengths: KStream[str, int] = words.map_values(len).filter(value().gt(2))
by_length: KStream[int, str] = words.map(lambda word, _w: KeyValue(len(word), word))
grouped: KGroupedStream[str, int] = lengths.group_by_key()
counts: KTable[str, int] = grouped.count(Materialized.as_("counts"))
totals: KTable[str, int] = grouped.reduce(lambda a, b: a + b)
minutes = grouped.windowed_by(TimeWindows.of_size_with_no_grace(60_000))
per_minute: KTable[WindowedKey[str], int] = minutes.count()
labels: KTable[str, str] = counts.map_values(lambda n: f"{n}x")
labelled: KStream[str, str] = lengths.left_join(labels, lambda n, label: label or str(n))
window = JoinWindows.of_time_difference_with_no_grace(1000)
pairs: KStream[str, tuple[int, str]] = lengths.join(words, lambda n, w: (n, w), window)
keyed: KStream[str, str] = lengths.join(labels, lambda word, n, label: f"{word}{n}{label}", with_key=True)
by_count: KGroupedTable[int, str] = counts.group_by(lambda word, n: (n, word))
words_per_count: KTable[int, int] = by_count.count()
counts.to_stream().to("counts", Produced.with_(Serdes.string(), Serdes.long()))
streams = KafkaStreams(builder.build(), {"application.id": "word-count"})
reveal_type(streams)
reveal_type(lines)
reveal_type(lengths.group_by_key().count())
streams.start(42)  # wrong on purpose: start() takes no argument
"""

# Each line marked "rejected" must be an error: with types that were Any, mypy would accept them all.
WRONG_PROGRAM = """
from kstreams import StreamsBuilder, TimeWindows
from kstreams.topology import KStream, KTable

lengths: KStream[str, int] = StreamsBuilder().stream("words").map_values(lambda w: len(str(w)))
minutes = lengths.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(60_000))
as_text: KTable[str, str] = lengths.group_by_key().count()  # rejected: counts are ints
swapped: KStream[int, int] = lengths.filter(lambda _k, n: n > 1)  # rejected: keys are str
unwindowed: KTable[str, int] = minutes.count()  # rejected: keys are WindowedKey[str]
lengths.map_values(lambda n: n.upper())  # rejected: values are int
lengths.left_join(lengths.to_table(), lambda n, other: n + other)  # rejected: other may be None
lengths.join(lengths.to_table(), lambda k, n, o: k + n, with_key=True)  # rejected: keys are str
"""


def _error_lines(out: str, program: Path) -> set[int]:
    errors = [line for line in out.splitlines() if line.startswith(f"{program}:") and ": error:" in line]
    return {int(line.split(":")[1]) for line in errors}


def _marked_lines(text: str, mark: str) -> set[int]:
    return {number for number, line in enumerate(text.splitlines(), 1) if mark in line}


def test_a_user_program_type_checks_against_the_real_public_types(tmp_path: Path) -> None:
    program = tmp_path / "word_count.py"
    program.write_text(USER_PROGRAM)
    wrong = tmp_path / "wrong_types.py"
    wrong.write_text(WRONG_PROGRAM)
    # One mypy run checks both programs; each error line names its file.
    cmd = ["mypy", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(program), str(wrong)]
    result = _run(cmd)
    out = result.stdout
    revealed = [line for line in out.splitlines() if "Revealed type" in line]
    assert len(revealed) == 3, out
    assert not any('"Any"' in line for line in revealed), out  # public names must not come back as Any
    assert "kstreams.client.KafkaStreams" in revealed[0], out
    assert "KStream[Any, Any]" in revealed[1], out
    assert "KTable[str, int]" in revealed[2].replace("builtins.", ""), out  # mypy < 2 prints builtins.
    assert 'Too many arguments for "start"' in out, out
    assert _error_lines(out, program) == _marked_lines(USER_PROGRAM, "wrong on purpose"), out
    assert _error_lines(out, wrong) == _marked_lines(WRONG_PROGRAM, "# rejected"), out
