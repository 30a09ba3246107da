"""The data source's options, and how a bounded micro-batch shares its records across partitions
(no broker needed)."""

from __future__ import annotations

import pytest

from kstreams.errors import ConfigException
from kstreams.spark.data_source import TopicStreamReader
from kstreams.spark.topic_reader import EARLIEST, LATEST, TopicReaderOptions, resolve_offsets

pytestmark = pytest.mark.spark

BASE = {"bootstrap.servers": "127.0.0.1:9092", "topic": "t"}


def test_options_are_read_case_insensitively_with_kafka_settings_passed_through() -> None:
    options = TopicReaderOptions.from_options(
        {**BASE, "topic": "a, b", "STARTINGOFFSETS": "latest", "kafka.fetch.max.bytes": "1024"},
        streaming=True,
    )

    assert options.topics == ("a", "b")
    assert options.starting == "latest"
    assert options.consumer_settings()["fetch.max.bytes"] == "1024"
    assert options.consumer_settings()["enable.auto.commit"] is False


@pytest.mark.parametrize(
    ("given", "streaming", "message"),
    [
        ({"topic": "t"}, False, "bootstrap.servers"),
        ({"bootstrap.servers": "b"}, False, "option topic"),
        ({**BASE, "isolation.level": "committed"}, False, "read_committed"),
        ({**BASE, "startingOffsets": "{not json"}, False, "startingOffsets"),
        ({**BASE, "startingOffsets": '{"other": {"0": 1}}'}, False, "other"),
        ({**BASE, "endingOffsets": "latest"}, True, "batch reads"),
        ({**BASE, "maxOffsetsPerTrigger": "0"}, True, "maxOffsetsPerTrigger"),
    ],
)
def test_invalid_options_are_rejected_saying_what_to_set(given: dict, streaming: bool, message: str) -> None:
    with pytest.raises(ConfigException, match=message):
        TopicReaderOptions.from_options(given, streaming=streaming)


def test_offsets_resolve_against_watermarks_and_are_clamped_into_them() -> None:
    marks = {("t", 0): (5, 50), ("t", 1): (0, 10), ("t", 2): (0, 7)}
    spec = {"t": {0: 2, 1: LATEST, 2: 99}}

    assert resolve_offsets(spec, marks) == {("t", 0): 5, ("t", 1): 10, ("t", 2): 7}
    assert resolve_offsets("earliest", marks) == {("t", 0): 5, ("t", 1): 0, ("t", 2): 0}
    # EARLIEST by name, and partitions the option does not name, start at the log start.
    assert resolve_offsets({"t": {0: EARLIEST}}, marks) == {("t", 0): 5, ("t", 1): 0, ("t", 2): 0}


def test_a_bounded_micro_batch_shares_its_records_by_backlog_and_always_progresses() -> None:
    reader = TopicStreamReader(TopicReaderOptions.from_options(BASE, streaming=True))
    begins = {("t", 0): 0, ("t", 1): 100, ("t", 2): 0}
    ends = {("t", 0): 300, ("t", 1): 200, ("t", 2): 0}

    capped = reader._capped(begins, ends, 100)

    assert capped == {("t", 0): 75, ("t", 1): 125, ("t", 2): 0}
    assert reader._capped(begins, ends, 1000) == ends
    tiny = reader._capped(begins, ends, 1)
    assert sum(tiny[tp] - begins[tp] for tp in tiny) == 1
