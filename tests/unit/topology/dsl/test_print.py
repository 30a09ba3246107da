"""KStream.print: Kafka's ``[label]: key, value`` lines on standard output or in a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from kstreams.errors import TopologyException
from kstreams.serdes import Serdes
from kstreams.testing import TopologyTestDriver
from kstreams.topology import Printed, StreamsBuilder, TimeWindows

S = Serdes.string()


def test_print_to_sys_out_labels_lines_with_the_processor_name(
    drive, capsys: pytest.CaptureFixture[str]
) -> None:
    builder = StreamsBuilder()
    builder.stream("in").print(Printed.to_sys_out())
    driver = drive(builder.build())
    source = driver.create_input_topic("in", S, S)
    source.pipe_input("a", "1", 1)
    source.pipe_input(None, "2", 2)
    assert (
        capsys.readouterr().out
        == "[KSTREAM-PRINTER-0000000001]: a, 1\n[KSTREAM-PRINTER-0000000001]: null, 2\n"
    )


def test_print_with_label_and_mapper(drive, capsys: pytest.CaptureFixture[str]) -> None:
    builder = StreamsBuilder()
    builder.stream("in").print(
        Printed.to_sys_out().with_label("orders").with_key_value_mapper(lambda k, v: f"{k}={v}")
    )
    driver = drive(builder.build())
    driver.create_input_topic("in", S, S).pipe_input("a", "1", 1)
    assert capsys.readouterr().out == "[orders]: a=1\n"


def test_print_to_file_writes_every_line_and_closes_with_the_driver(tmp_path: Path) -> None:
    path = tmp_path / "printed.txt"
    builder = StreamsBuilder()
    builder.stream("in").print(Printed.to_file(path).with_label("x"))
    with TopologyTestDriver(
        builder.build(), {"default.key.serde": "string", "default.value.serde": "string"}
    ) as driver:
        source = driver.create_input_topic("in", S, S)
        source.pipe_input("a", "1", 1)
        source.pipe_input("b", None, 2)
    assert path.read_text(encoding="utf-8") == "[x]: a, 1\n[x]: b, null\n"


def test_print_shows_windowed_keys_as_kafka_does(drive, capsys: pytest.CaptureFixture[str]) -> None:
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().windowed_by(
        TimeWindows.of_size_with_no_grace(10)
    ).count().to_stream().print(Printed.to_sys_out().with_label("w"))
    driver = drive(builder.build())
    driver.create_input_topic("in", S, S).pipe_input("a", "1", 12)
    assert capsys.readouterr().out == "[w]: [a@10/20], 1\n"


def test_printed_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(TopologyException, match="empty"):
        Printed.to_file("")
    with pytest.raises(TopologyException, match="directory"):
        Printed.to_file(tmp_path)
    with pytest.raises(TypeError, match="Printed"):
        StreamsBuilder().stream("in").print("stdout")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        Printed.to_sys_out().with_key_value_mapper("k")  # type: ignore[arg-type]
