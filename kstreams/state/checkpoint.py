"""Offset checkpoint files: up to which changelog offset a task's local state is current.

The format is Kafka's ``OffsetCheckpoint``: a version line (``0``), a line with the entry count,
then one ``<topic> <partition> <offset>`` line per changelog partition. A write goes to a temporary
file that is fsynced and renamed over the old one (and the directory fsynced), so a crash leaves
either the old checkpoint or the new one, never a torn file. A missing file reads as empty.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from kstreams.cluster.port import TopicPartition
from kstreams.errors import ProcessorStateException

__all__ = ["OffsetCheckpoint"]

logger = logging.getLogger(__name__)

_VERSION = 0


class OffsetCheckpoint:
    """One checkpoint file of changelog offsets."""

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Replace the file's content with these offsets, atomically. Negative offsets are skipped
        (they mean "unknown"), as Kafka does."""
        lines = [str(_VERSION), ""]
        count = 0
        for tp in sorted(offsets, key=lambda tp: (tp.topic, tp.partition)):
            offset = offsets[tp]
            if offset < 0:
                logger.debug("Not checkpointing %s: its offset %d is unknown.", tp, offset)
                continue
            if not tp.topic or any(ch.isspace() for ch in tp.topic):
                raise ProcessorStateException(
                    f"Cannot checkpoint topic {tp.topic!r}: a topic name is not empty and holds no "
                    "whitespace."
                )
            lines.append(f"{tp.topic} {tp.partition} {offset}")
            count += 1
        lines[1] = str(count)
        data = ("\n".join(lines) + "\n").encode("utf-8")
        directory = os.path.dirname(self.path) or "."
        temp = self.path + ".tmp"
        try:
            os.makedirs(directory, exist_ok=True)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, self.path)
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as exc:
            raise ProcessorStateException(
                f"Could not write the checkpoint file {self.path}: {exc}. Check the state directory's free "
                "space and permissions."
            ) from exc

    def read(self) -> dict[TopicPartition, int]:
        """The offsets in the file; empty when there is no file."""
        try:
            with open(self.path, encoding="utf-8") as file:
                text = file.read()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ProcessorStateException(f"Could not read the checkpoint file {self.path}: {exc}") from exc
        lines = text.splitlines()
        try:
            version = int(lines[0])
            if version != _VERSION:
                raise ValueError(f"unknown version {version} (expected {_VERSION})")
            expected = int(lines[1])
            offsets: dict[TopicPartition, int] = {}
            for line in lines[2:]:
                if not line.strip():
                    continue
                topic, partition, offset = line.split()
                offsets[TopicPartition(topic, int(partition))] = int(offset)
            if len(offsets) != expected:
                raise ValueError(f"{len(offsets)} entries where the header promises {expected}")
        except (IndexError, ValueError) as exc:
            raise ProcessorStateException(
                f"The checkpoint file {self.path} is corrupt: {exc}. Delete it; the task then restores its "
                "stores from the changelog's start."
            ) from exc
        return offsets

    def delete(self) -> None:
        """Remove the file (nothing happens when it does not exist)."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ProcessorStateException(f"Could not delete the checkpoint file {self.path}: {exc}") from exc
