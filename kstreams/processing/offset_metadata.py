"""The metadata a task commits with each input offset (Kafka's ``TopicPartitionMetadata``).

Kafka Streams stores, in the metadata string of every offset it commits, the partition's time
(the largest timestamp of the records processed from it) and the processors' metadata (named
longs, such as where an emit-on-window-close aggregation left off), and a task that takes the
partition over starts its stream time there. kstreams writes and reads the same format, so
either library resumes the other's stream time (a hand-over between them included):

    base64( version (1 byte) | partition time (8 bytes, big-endian) | processor metadata )

Version 2 is the one Kafka 4.1 writes: the processor metadata follows as a 4-byte entry count,
then per entry a 4-byte key length, the key's UTF-8 and an 8-byte value (nothing when there are no
entries). Version 1 has the partition time only. Anything else decodes as an unknown time, with a
warning, as Kafka's ``decode`` does.
"""

from __future__ import annotations

import base64
import binascii
import logging
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["LATEST_MAGIC_BYTE", "UNKNOWN_TIME", "TopicPartitionMetadata"]

logger = logging.getLogger(__name__)

LATEST_MAGIC_BYTE = 2
UNKNOWN_TIME = -1  # Kafka's RecordQueue.UNKNOWN: no record processed yet

_HEADER = struct.Struct(">bq")
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")


@dataclass(frozen=True)
class TopicPartitionMetadata:
    """A partition's time and the processors' metadata, as committed with its offset."""

    partition_time: int
    processor_metadata: Mapping[str, int] = field(default_factory=dict)

    def encode(self) -> str:
        """The committed string (version ``LATEST_MAGIC_BYTE``)."""
        parts = [_HEADER.pack(LATEST_MAGIC_BYTE, self.partition_time)]
        if self.processor_metadata:
            parts.append(_INT.pack(len(self.processor_metadata)))
            for key, value in self.processor_metadata.items():
                name = key.encode()
                parts += [_INT.pack(len(name)), name, _LONG.pack(value)]
        return base64.b64encode(b"".join(parts)).decode("ascii")

    @staticmethod
    def decode(text: str | None) -> TopicPartitionMetadata:
        """What a committed string says; an unknown time and no processor metadata for an
        empty string (an offset committed without metadata) or one in no known format."""
        if not text:
            return TopicPartitionMetadata(UNKNOWN_TIME)
        try:
            data = base64.b64decode(text, validate=True)
            version = data[0]
            if version not in (1, LATEST_MAGIC_BYTE):
                logger.warning(
                    "Unsupported offset metadata version found. Supported version <= %d. Found version %d.",
                    LATEST_MAGIC_BYTE,
                    version,
                )
                return TopicPartitionMetadata(UNKNOWN_TIME)
            (partition_time,) = _LONG.unpack_from(data, 1)
            metadata: dict[str, int] = {}
            if version == LATEST_MAGIC_BYTE and len(data) > _HEADER.size:
                metadata = _processor_metadata(data, _HEADER.size)
            return TopicPartitionMetadata(partition_time, metadata)
        except (binascii.Error, IndexError, struct.error, UnicodeDecodeError, ValueError):
            logger.warning("Unsupported offset metadata found: %r", text)
            return TopicPartitionMetadata(UNKNOWN_TIME)


def _processor_metadata(data: bytes, at: int) -> dict[str, int]:
    (entries,) = _INT.unpack_from(data, at)
    at += _INT.size
    metadata: dict[str, int] = {}
    for _ in range(entries):
        (size,) = _INT.unpack_from(data, at)
        at += _INT.size
        if size < 0 or at + size > len(data):
            raise ValueError("a processor metadata key runs past the end")
        key = data[at : at + size].decode()
        at += size
        (metadata[key],) = _LONG.unpack_from(data, at)
        at += _LONG.size
    return metadata
