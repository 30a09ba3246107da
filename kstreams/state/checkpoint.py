"""Offset checkpoint files: up to which changelog offset a task's local state is current.

The format is Kafka's ``OffsetCheckpoint``: a version line (``0``), a line with the entry count,
then one ``<topic> <partition> <offset>`` line per changelog partition; an offset is a number, or
``-4`` (``OFFSET_UNKNOWN``: a store whose position nobody knows, restored from the beginning). A
write goes to a temporary file that is fsynced and renamed over the old one (and the directory
fsynced), so a crash leaves either the old checkpoint or the new one, never a torn file. A missing
file reads as empty.

What the offsets mean depends on the file, as in Kafka: a task's checkpoint holds, per changelog,
the offset of the last record its stores reflect (``TaskOffsetCheckpoint`` turns them into the
next offsets the runtime counts in, and back); the global stores' checkpoint holds next offsets.
So a task directory a Kafka Streams application wrote reads as Kafka Streams would read it, and
the reverse.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from kstreams.cluster.port import TopicPartition
from kstreams.errors import ProcessorStateException

__all__ = ["OFFSET_UNKNOWN", "OffsetCheckpoint", "TaskOffsetCheckpoint"]

logger = logging.getLogger(__name__)

_VERSION = 0
OFFSET_UNKNOWN = -4  # Kafka's OffsetCheckpoint.OFFSET_UNKNOWN


class OffsetCheckpoint:
    """One checkpoint file of changelog offsets."""

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Replace the file's content with these offsets, atomically. Negative offsets other than
        ``OFFSET_UNKNOWN`` are skipped (they mean "unknown" too)."""
        lines = [str(_VERSION), ""]
        count = 0
        for tp in sorted(offsets, key=lambda tp: (tp.topic, tp.partition)):
            offset = offsets[tp]
            if offset < 0 and offset != OFFSET_UNKNOWN:
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
        checkpoint (binary content, a bad number, a negative partition, a partition twice, fewer or
        more entries than its header promises): then it vouches for no state. A negative offset other
        than ``OFFSET_UNKNOWN`` (which no writer writes) is skipped with a warning and counts as no
        entry, as Kafka's reader does.
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
            seen: set[TopicPartition] = set()
            for line in entries:
                topic, partition, offset_text = line.split()
                tp = TopicPartition(topic, _number(partition))
                if tp in seen:
                    raise ValueError(f"{tp} appears twice")
                seen.add(tp)
                offset = -_number(offset_text[1:]) if offset_text.startswith("-") else _number(offset_text)
                if offset < 0 and offset != OFFSET_UNKNOWN:
                    logger.warning(
                        "The checkpoint file %s has offset %d for %s: skipped.", self.path, offset, tp
                    )
                    continue
                offsets[tp] = offset
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


class TaskOffsetCheckpoint(OffsetCheckpoint):
    """A task's checkpoint file, in next offsets: the file holds the offset of the last record the
    task's stores reflect (Kafka's ProcessorStateManager writes it, and StoreChangelogReader
    restores from the offset after it), or ``OFFSET_UNKNOWN`` for a store that reflects no
    record; ``read`` gives and ``write`` takes the offset after that, where restoration resumes
    (0 for ``OFFSET_UNKNOWN``: from the beginning)."""

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        super().write({tp: (offset - 1 if offset > 0 else OFFSET_UNKNOWN) if offset >= 0 else offset
                       for tp, offset in offsets.items()})  # fmt: skip

    def read(self) -> dict[TopicPartition, int]:
        return {tp: 0 if offset == OFFSET_UNKNOWN else offset + 1 for tp, offset in super().read().items()}


def _number(text: str) -> int:
    """A non-negative decimal number as the file spells it: ``int`` alone would also take signs,
    underscores and non-ASCII digits, none of which a checkpoint writer produces."""
    if not (text.isascii() and text.isdigit()):
        raise ValueError(f"{text!r} is not a non-negative number")
    return int(text)
