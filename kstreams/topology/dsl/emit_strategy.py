"""EmitStrategy: when a windowed aggregation forwards its results (Kafka's ``EmitStrategy``, KIP-825).

``on_window_update()`` (the default) forwards every update of a window's aggregate, as it happens
(through the store's cache when it caches). ``on_window_close()`` forwards each window's final
aggregate once, when the window closes: when stream time reaches the window's end plus grace (a
session's: passes its end plus gap plus grace). Set it with ``emit_strategy(...)`` on a
time-windowed, sliding-windowed or session-windowed stream. Emitting on close keeps how far it got
in a store beside the window (or session) store (see ``processors/emit_position``), so a restart
neither repeats nor loses a final result.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

__all__ = ["EmitStrategy", "require_emit_strategy"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmitStrategy:
    """When a windowed aggregation emits; build one with ``on_window_close()`` or ``on_window_update()``."""

    class StrategyType(enum.Enum):
        ON_WINDOW_UPDATE = "on_window_update"
        ON_WINDOW_CLOSE = "on_window_close"

    type: EmitStrategy.StrategyType

    @staticmethod
    def on_window_close() -> EmitStrategy:
        """Forward each window's final result once, when the window closes (end + grace)."""
        return EmitStrategy(EmitStrategy.StrategyType.ON_WINDOW_CLOSE)

    @staticmethod
    def on_window_update() -> EmitStrategy:
        """Forward every update of a window's result (the default)."""
        return EmitStrategy(EmitStrategy.StrategyType.ON_WINDOW_UPDATE)

    @property
    def on_close(self) -> bool:
        return self.type is EmitStrategy.StrategyType.ON_WINDOW_CLOSE


def require_emit_strategy(emit_strategy: object) -> EmitStrategy:
    """``emit_strategy`` if it is an EmitStrategy; a TypeError saying what to pass otherwise."""
    if not isinstance(emit_strategy, EmitStrategy):
        raise TypeError(
            "emit_strategy() takes EmitStrategy.on_window_close() or EmitStrategy.on_window_update(), "
            f"got {emit_strategy!r}."
        )
    return emit_strategy
