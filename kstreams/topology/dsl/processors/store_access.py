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
from kstreams.state.value_and_timestamp import ValueAndTimestamp

__all__ = [
    "get_store",
    "record_access",
    "record_update",
    "updated_timestamp",
    "window_access",
    "window_update",
]

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


def record_update(
    store: Any,
) -> Callable[[Any, Any, int, Callable[[Any, Any, Any], Any]], tuple[Any, Any, int]]:
    """The ``update(key, value, timestamp, apply)`` an aggregation calls per record on its
    timestamped key-value store: read the key's aggregate, write ``apply(key, value, old)``
    stamped with the larger of ``timestamp`` and the old one's (None deletes), and return
    ``(new, old, new timestamp)``. One C call on a cached DSL store's hit, else ``get`` and
    ``put`` (``record_access``)."""
    fused = getattr(store, "record_update", None)
    update = fused() if fused is not None else None
    if update is not None:
        return update  # type: ignore[no-any-return]
    get, put = record_access(store)

    def update_with(key: Any, value: Any, timestamp: int, apply: Callable[[Any, Any, Any], Any]) -> Any:
        stored = get(key)
        old, stamp = _stepped(stored, timestamp)
        new = apply(key, value, old)
        put(key, ValueAndTimestamp.make(new, stamp))
        return new, old, stamp

    return update_with


def window_update(
    store: Any,
) -> Callable[[Any, Any, int, int, Callable[[Any, Any, Any], Any]], tuple[Any, Any, int]]:
    """As ``record_update``, per window: ``update(key, value, timestamp, window_start, apply)``."""
    fused = getattr(store, "record_update", None)
    update = fused() if fused is not None else None
    if update is not None:
        return update  # type: ignore[no-any-return]
    fetch, put = window_access(store)

    def update_with(
        key: Any, value: Any, timestamp: int, window_start: int, apply: Callable[[Any, Any, Any], Any]
    ) -> Any:
        stored = fetch(key, window_start)
        old, stamp = _stepped(stored, timestamp)
        new = apply(key, value, old)
        put(key, ValueAndTimestamp.make(new, stamp), window_start)
        return new, old, stamp

    return update_with


def updated_timestamp(timestamp: int, old: ValueAndTimestamp[Any] | None) -> int:
    """The timestamp of an aggregate that a record at ``timestamp`` updates: the record's own for a
    new aggregate, else the larger of it and the old aggregate's (Kafka's rule)."""
    return timestamp if old is None else max(timestamp, old.timestamp)


def _stepped(stored: ValueAndTimestamp[Any] | None, timestamp: int) -> tuple[Any, int]:
    """The old aggregate in ``stored`` and the new one's timestamp (``updated_timestamp``)."""
    return (None if stored is None else stored.value), updated_timestamp(timestamp, stored)
