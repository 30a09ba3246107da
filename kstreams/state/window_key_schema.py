"""The byte layout of windowed keys, shared by the window stores, their layers and their changelogs.

A windowed store key is the serialized record key, then the window start as an 8-byte big-endian
signed long, then (changelog records, and stores that retain duplicates) a 4-byte big-endian
sequence number. Keys of one record key therefore sort by window start, so one byte-order range
scan from ``key + start(from)`` to ``key + start(to)`` finds a key's windows. This is Kafka's
``WindowKeySchema`` layout, so changelog topics hold the same bytes Kafka Streams writes.

Record keys have no length prefix, so a scan can also meet a longer key that happens to begin with
the same bytes; readers keep only entries whose length is ``len(key) + suffix``, which (together with
the range bounds) means the leading bytes are exactly ``key``.
"""

from __future__ import annotations

import logging
import struct

__all__ = [
    "SEQ_SIZE",
    "TIMESTAMP_SIZE",
    "changelog_key",
    "from_changelog_key",
    "key_and_start",
    "window_key",
]

logger = logging.getLogger(__name__)

TIMESTAMP_SIZE = 8
SEQ_SIZE = 4

_TS = struct.Struct(">q")
_TS_SEQ = struct.Struct(">qi")


def window_key(key: bytes, start: int) -> bytes:
    """``key`` followed by the window start: the key of a window in caches and unique stores."""
    return key + _TS.pack(start)


def key_and_start(store_key: bytes) -> tuple[bytes, int]:
    """Split a ``window_key`` back into the record key and the window start."""
    return store_key[:-TIMESTAMP_SIZE], _TS.unpack_from(store_key, len(store_key) - TIMESTAMP_SIZE)[0]


def changelog_key(key: bytes, start: int, seq: int) -> bytes:
    """The changelog (and duplicate-retaining store) key: record key, window start, sequence number."""
    return key + _TS_SEQ.pack(start, seq)


def from_changelog_key(store_key: bytes) -> tuple[bytes, int, int]:
    """Split a ``changelog_key`` into (record key, window start, sequence number)."""
    split = len(store_key) - TIMESTAMP_SIZE - SEQ_SIZE
    start, seq = _TS_SEQ.unpack_from(store_key, split)
    return store_key[:split], start, seq
