"""Window: the time span of a windowed key (Kafka's ``Window``), as ``WindowedKey.window()`` returns.

A window runs from ``start()`` to ``end()``, epoch milliseconds; for time windows the end is
exclusive, for session windows both ends are inclusive (the kind of window decides, as in Kafka).
``start_time()`` and ``end_time()`` give the same instants as UTC datetimes (Kafka's Instants).

A leaf (it imports nothing of kstreams) below the compiled core, whose ``WindowedKey`` makes one;
public as ``kstreams.Window`` and ``kstreams.state.Window``.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone

__all__ = ["Window"]

logger = logging.getLogger(__name__)


class Window:
    """A span of time ``[start, end]`` in epoch ms; immutable, ordered and hashable."""

    __slots__ = ("_end", "_start")

    def __init__(self, start_ms: int, end_ms: int) -> None:
        if start_ms < 0:
            raise ValueError(f"A window's start cannot be negative, got {start_ms}.")
        if end_ms < start_ms:
            raise ValueError(f"A window's end ({end_ms}) cannot be smaller than its start ({start_ms}).")
        self._start = start_ms
        self._end = end_ms

    def start(self) -> int:
        return self._start

    def end(self) -> int:
        return self._end

    def start_time(self) -> datetime:
        return datetime.fromtimestamp(self._start / 1000, tz=timezone.utc)

    def end_time(self) -> datetime:
        return datetime.fromtimestamp(self._end / 1000, tz=timezone.utc)

    def overlap(self, other: Window) -> bool:
        """Whether the two windows share some time (Kafka's TimeWindow rule: ends exclusive)."""
        return self._start < other._end and other._start < self._end

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Window) and (self._start, self._end) == (other._start, other._end)

    def __lt__(self, other: Window) -> bool:
        return (self._start, self._end) < (other._start, other._end)

    def __hash__(self) -> int:
        return hash((self._start, self._end))

    def __repr__(self) -> str:
        return f"Window{{startMs={self._start}, endMs={self._end}}}"
