"""What every store layer (metered, caching, change-logging) shares: it wraps the store below.

A layer answers for the store it wraps by name, persistence and openness, and passes ``init``,
``flush`` and ``close`` down; window and session layers also pass on their retention (and window
size). Layers that do more at those points override them and call down themselves.
"""

from __future__ import annotations

import logging

from kstreams.state.store import SessionStore, StateStore, StateStoreContext, WindowStore

__all__ = ["SessionLayer", "StoreLayer", "WindowLayer"]

logger = logging.getLogger(__name__)


class StoreLayer:
    """A layer over the store ``wrapped`` (the next layer down, or the inner store)."""

    def __init__(self, wrapped: StateStore) -> None:
        self.wrapped = wrapped

    @property
    def name(self) -> str:
        return self.wrapped.name

    @property
    def persistent(self) -> bool:
        return self.wrapped.persistent

    @property
    def is_open(self) -> bool:
        return self.wrapped.is_open

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self.wrapped.init(context, root)

    def flush(self) -> None:
        self.wrapped.flush()

    def close(self) -> None:
        self.wrapped.close()


class WindowLayer(StoreLayer):
    """A layer over a window store."""

    wrapped: WindowStore[bytes, bytes]

    @property
    def retention_ms(self) -> int:
        return self.wrapped.retention_ms

    @property
    def window_size_ms(self) -> int:
        return self.wrapped.window_size_ms


class SessionLayer(StoreLayer):
    """A layer over a session store."""

    wrapped: SessionStore[bytes, bytes]

    @property
    def retention_ms(self) -> int:
        return self.wrapped.retention_ms
