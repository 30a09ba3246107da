"""EmitStrategy: when a windowed aggregation forwards its results (Kafka's ``EmitStrategy``, KIP-825).

``on_window_update()`` (the default) forwards every update of a window's aggregate, as it happens
(through the store's cache when it caches). ``on_window_close()`` forwards each window's final
aggregate once, when the window closes: when stream time reaches the window's end plus grace. Set
it with ``TimeWindowedKStream.emit_strategy(...)``.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

__all__ = ["EmitStrategy"]

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
