"""How DSL processors reach their stores: by name, with the application's default serdes filled in
where the DSL was given none (``Materialized`` without serdes, an inherited serde of None).

Kafka's metered stores take the default serdes from the processor context at init; here the DSL
binds them when its processor opens the store, so a store built with None serdes works however
the runtime initialised it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kstreams.processor import ProcessorContext
from kstreams.serdes import serde_from_config

__all__ = ["get_store", "record_access", "window_access"]

logger = logging.getLogger(__name__)


def get_store(context: ProcessorContext[Any, Any], name: str) -> Any:
    """The store connected under ``name``, with default serdes bound where it has none."""
    store = context.get_state_store(name)
    bind = getattr(store, "with_default_serdes", None)
    missing = getattr(store, "key_serde", None) is None or getattr(store, "value_serde", None) is None
    if bind is not None and missing:
        configs = context.app_configs
        bind(
            serde_from_config(configs, "default.key.serde"),
            serde_from_config(configs, "default.value.serde"),
        )
    return store


def record_access(store: Any) -> tuple[Callable[[Any], Any], Callable[[Any, Any], None]]:
    """The ``(get, put)`` to call per record on a key-value store: the store's ``record_access()``
    where it has one (the DSL's own stores: one C call each on a cache hit), else its methods."""
    access = getattr(store, "record_access", None)
    if access is not None:
        return access()  # type: ignore[no-any-return]
    return store.get, store.put


def window_access(store: Any) -> tuple[Callable[[Any, int], Any], Callable[[Any, Any, int], None]]:
    """The ``(fetch, put)`` to call per record and window on a window store: the store's
    ``record_access()`` where it has one, else its methods."""
    access = getattr(store, "record_access", None)
    if access is not None:
        return access()  # type: ignore[no-any-return]
    return store.fetch, store.put
