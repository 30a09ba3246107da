"""Offset checkpoint files in Kafka's format, written atomically."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kstreams.cluster.port import TopicPartition
from kstreams.errors import ProcessorStateException
from kstreams.state.checkpoint import OFFSET_UNKNOWN, OffsetCheckpoint, TaskOffsetCheckpoint


def test_round_trip_in_kafkas_format(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpoint(str(tmp_path / ".checkpoint"))
    offsets = {TopicPartition("app-b-changelog", 1): 7, TopicPartition("app-a-changelog", 0): 42}
    checkpoint.write(offsets)
    assert Path(checkpoint.path).read_text() == "0\n2\napp-a-changelog 0 42\napp-b-changelog 1 7\n"
    assert checkpoint.read() == offsets


def test_missing_file_reads_empty_and_delete_is_idempotent(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpoint(str(tmp_path / "none" / ".checkpoint"))
    assert checkpoint.read() == {}
    checkpoint.delete()
    checkpoint.write({TopicPartition("t", 0): 1})
    checkpoint.delete()
    assert checkpoint.read() == {}


def test_write_replaces_atomically_and_leaves_no_temp_file(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpoint(str(tmp_path / ".checkpoint"))
    checkpoint.write({TopicPartition("t", 0): 1})
    inode_before = os.stat(checkpoint.path).st_ino
    checkpoint.write({TopicPartition("t", 0): 2, TopicPartition("t", 1): -1})  # -1: unknown, skipped
    assert checkpoint.read() == {TopicPartition("t", 0): 2}
    assert os.stat(checkpoint.path).st_ino != inode_before  # a new file renamed over the old one
    assert sorted(os.listdir(tmp_path)) == [".checkpoint"]


def test_a_corrupt_file_names_itself_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / ".checkpoint"
    path.write_text("0\n3\nt 0 1\n")
    with pytest.raises(ProcessorStateException, match=r"\.checkpoint is corrupt.*wiped and restored"):
        OffsetCheckpoint(str(path)).read()
    path.write_text("1\n0\n")
    with pytest.raises(ProcessorStateException, match="version"):
        OffsetCheckpoint(str(path)).read()


@pytest.mark.parametrize(
    "content",
    [
        b"\x00\xff\xfe\x89PNG\r\n\x1a\n",  # binary: not UTF-8
        b"",  # empty
        b"0\n",  # truncated after the version
        b"0\n2\nt 0 5\n",  # truncated after an entry
        b"0\n1\nt 0 five\n",
        b"0\n1\nt -1 3\n",
        b"0\n1\nt 0 \xd9\xa3\n",  # a non-ASCII digit that int() would take
        b"0\n1\nt 0 1 2\n",
        b"0\n1\nt 0 1\nt 0 2\n",  # one entry twice
    ],
)
def test_any_unreadable_content_is_reported_as_corrupt(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / ".checkpoint"
    path.write_bytes(content)
    with pytest.raises(ProcessorStateException, match=r"\.checkpoint is corrupt"):
        OffsetCheckpoint(str(path)).read()


def test_unknown_offsets_are_kept_and_other_negative_ones_skipped_as_kafka_reads_them(tmp_path: Path) -> None:
    """Kafka's ProcessorStateManager writes -4 (OFFSET_UNKNOWN) for a logged persistent store with
    no known offset; its reader keeps it, and skips any other negative offset with a warning."""
    path = tmp_path / ".checkpoint"
    path.write_text("0\n3\napp-a-changelog 0 -4\napp-b-changelog 0 -3\napp-c-changelog 1 9\n")
    assert OffsetCheckpoint(str(path)).read() == {
        TopicPartition("app-a-changelog", 0): OFFSET_UNKNOWN,
        TopicPartition("app-c-changelog", 1): 9,
    }


def test_a_task_checkpoint_holds_last_record_offsets_as_kafka_streams_writes_them(tmp_path: Path) -> None:
    """A task's checkpoint holds, per changelog, the offset of the last record its stores reflect
    (Kafka's ProcessorStateManager; StoreChangelogReader restores from the offset after it). This
    file is what a Kafka Streams 4.1 application left in its task directory after a clean close
    (tests/integration/test_java_handover.py reads real ones): kstreams resumes after each offset,
    and from the beginning for an unknown one."""
    path = tmp_path / "0_0" / ".checkpoint"
    path.parent.mkdir()
    path.write_text(
        "0\n3\napp-orders-changelog 0 3\napp-orders-per-product-changelog 0 -4\napp-products-changelog 0 0\n"
    )
    assert TaskOffsetCheckpoint(str(path)).read() == {
        TopicPartition("app-orders-changelog", 0): 4,
        TopicPartition("app-orders-per-product-changelog", 0): 0,
        TopicPartition("app-products-changelog", 0): 1,
    }
    # kstreams writes what Kafka Streams would: next offset 0 (no record) is unknown.
    TaskOffsetCheckpoint(str(path)).write(
        {TopicPartition("app-orders-changelog", 0): 4, TopicPartition("app-products-changelog", 0): 0}
    )
    assert path.read_text() == "0\n2\napp-orders-changelog 0 3\napp-products-changelog 0 -4\n"
