"""Stub of csrc/kstreams/_native/store_access.pyx."""

from types import TracebackType
from typing import Any

from kstreams._native.per_record import AggregateAccess

class StoreLock:
    """A reentrant lock (``threading.RLock``'s behaviour) that C code takes without Python
    calls: a metered store's ``query_lock``."""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool: ...
    def release(self) -> None: ...
    def __enter__(self) -> bool: ...
    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

class _CachedAccess(AggregateAccess):
    """The metered layer (``store``) whose results an accessor gives, the caching layer below
    it, and how to reach the running thread's cache; or, without a caching layer (``caching``
    None), ``direct``: the change-logging layer below the metered one, read and written directly."""

    def __init__(
        self,
        store: Any,
        caching: Any,
        holder: Any,
        context: Any,
        namespace: str,
        string_keys: bool,
        bytes_keys: bool,
        stamped_longs: bool,
        direct: Any = None,
        direct_read: Any = None,
        plain_longs: bool = False,
    ) -> None: ...

class CachedKeyValueAccess(_CachedAccess):
    """``get(key)`` and ``put(key, value)`` of a metered key-value store whose next layer is a
    caching layer (or a change-logging one: the direct form), with the results of the metered
    layer's own ``get`` and ``put``."""

    def get(self, key: Any) -> Any: ...
    def put(self, key: Any, value: Any) -> None: ...
    def update(self, key: Any, value: Any, timestamp: int, apply: Any) -> tuple[Any, Any, int]: ...

class CachedWindowAccess(_CachedAccess):
    """``fetch(key, window_start)`` and ``put(key, value, window_start)`` of a metered window
    store whose next layer is a caching layer, with the results of the metered layer's own."""

    def fetch(self, key: Any, window_start: int) -> Any: ...
    def put(self, key: Any, value: Any, window_start: int) -> None: ...
    def update(
        self, key: Any, value: Any, timestamp: int, window_start: int, apply: Any
    ) -> tuple[Any, Any, int]: ...
