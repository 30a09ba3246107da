"""How DSL processors reach their stores: by name, with the application's default serdes filled in
where the DSL was given none (``Materialized`` without serdes, an inherited serde of None).

Kafka's metered stores take the default serdes from the processor context at init; here the DSL
binds them when its processor opens the store, so a store built with None serdes works however
the runtime initialised it.
"""

from __future__ import annotations

import logging
from typing import Any

from kstreams.processor import ProcessorContext
from kstreams.serdes import serde_from_config

__all__ = ["get_store"]

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
