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
        """The offsets in the file; empty when there is no file.

        Raises ProcessorStateException naming the file when it cannot be read or is not a valid
        checkpoint (binary content, a bad number, a negative partition or offset, a partition twice,
        fewer or more entries than its header promises): then it vouches for no state.
        """
        try:
            with open(self.path, "rb") as file:
                data = file.read()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ProcessorStateException(f"Could not read the checkpoint file {self.path}: {exc}") from exc
        try:
            lines = data.decode("utf-8").splitlines()
            version = _number(lines[0])
            if version != _VERSION:
                raise ValueError(f"unknown version {version} (expected {_VERSION})")
            expected = _number(lines[1])
            entries = [line for line in lines[2:] if line.strip()]
            if len(entries) != expected:
                raise ValueError(f"{len(entries)} entries where the header promises {expected}")
            offsets: dict[TopicPartition, int] = {}
            for line in entries:
                topic, partition, offset = line.split()
                tp = TopicPartition(topic, _number(partition))
                if tp in offsets:
                    raise ValueError(f"{tp} appears twice")
                offsets[tp] = _number(offset)
        except (IndexError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
            raise ProcessorStateException(
                f"The checkpoint file {self.path} is corrupt: {exc}. It vouches for nothing: the state "
                "beside it must be wiped and restored from the changelogs' beginning."
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


def _number(text: str) -> int:
    """A non-negative decimal number as the file spells it: ``int`` alone would also take signs,
    underscores and non-ASCII digits, none of which a checkpoint writer produces."""
    if not (text.isascii() and text.isdigit()):
        raise ValueError(f"{text!r} is not a non-negative number")
    return int(text)
