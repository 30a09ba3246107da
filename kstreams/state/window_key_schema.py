"""The byte layout of windowed keys, shared by the window stores, their layers and their changelogs.

A windowed store key is the serialized record key, then the window start as an 8-byte big-endian
signed long, then (changelog records, and stores that retain duplicates) a 4-byte big-endian
sequence number. Keys of one record key therefore sort by window start, so one byte-order range
scan from ``key + start(from)`` to ``key + start(to)`` finds a key's windows. This is Kafka's
``WindowKeySchema`` layout, so changelog topics hold the same bytes Kafka Streams writes.

A session key is the record key, then the session's end, then its start (both 8-byte big-endian):
Kafka's ``SessionKeySchema``, so one key's sessions sort by end time.

Record keys have no length prefix, so a scan can also meet a longer key that happens to begin with
the same bytes; readers keep only entries whose length is ``len(key) + suffix``, which (together with
the range bounds) means the leading bytes are exactly ``key``.
"""

from __future__ import annotations

import logging
import struct

__all__ = [
    "MAX_LONG",
    "MIN_LONG",
    "SEQ_SIZE",
    "SESSION_SUFFIX",
    "TIMESTAMP_SIZE",
    "changelog_key",
    "from_changelog_key",
    "from_session_key",
    "key_and_start",
    "session_key",
    "window_key",
]

logger = logging.getLogger(__name__)

TIMESTAMP_SIZE = 8
SEQ_SIZE = 4
# The bounds of an 8-byte signed long: the widest time range a reader can ask for.
MIN_LONG = -(2**63)
MAX_LONG = 2**63 - 1

_TS = struct.Struct(">q")
_TS_SEQ = struct.Struct(">qi")
_END_START = struct.Struct(">qq")
SESSION_SUFFIX = 2 * TIMESTAMP_SIZE


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


def session_key(key: bytes, start: int, end: int) -> bytes:
    """The store and changelog key of a session: record key, session end, session start."""
    return key + _END_START.pack(end, start)


def from_session_key(store_key: bytes) -> tuple[bytes, int, int]:
    """Split a ``session_key`` into (record key, session start, session end)."""
    split = len(store_key) - SESSION_SUFFIX
    end, start = _END_START.unpack_from(store_key, split)
    return store_key[:split], start, end
