"""``DslStoreSuppliers`` (Kafka's KIP-954): which store suppliers the DSL uses where a program
names no store type, and Kafka's two built-in sets, RocksDB (the default) and in-memory.

The DSL asks for a store with the parameters of its operation (``DslKeyValueParams``,
``DslWindowParams``, ``DslSessionParams``). Which set answers, in Kafka's order: the one given to
the operation (``Materialized.as_`` / ``with_store_type``, ``StreamJoined.with_dsl_store_suppliers``),
else the builder's (``StreamsBuilder(TopologyConfig(...))``: its ``dsl.store.suppliers.class`` or
``default.dsl.store``), else the client's ``dsl.store.suppliers.class``, else RocksDB. As in Kafka,
``default.dsl.store`` in the client's config alone changes nothing: the topology is built by then.

``apply_dsl_store_suppliers`` gives a store builder that the DSL made with the default its
supplier from a set; ``DslParams`` is what the builder keeps for that (``dsl_params``).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from kstreams.config import KAFKA_DSL_STORE_SUPPLIERS, hook_class
from kstreams.errors import TopologyException
from kstreams.state.suppliers import (
    KeyValueBytesStoreSupplier,
    SessionBytesStoreSupplier,
    WindowBytesStoreSupplier,
)

__all__ = [
    "DEFAULT_DSL_STORE",
    "DSL_STORE_SUPPLIERS_CLASS",
    "BuiltInDslStoreSuppliers",
    "DslKeyValueParams",
    "DslParams",
    "DslSessionParams",
    "DslStoreSuppliers",
    "DslWindowParams",
    "apply_dsl_store_suppliers",
    "dsl_store_suppliers",
    "dsl_store_suppliers_class",
]

DSL_STORE_SUPPLIERS_CLASS = "dsl.store.suppliers.class"
DEFAULT_DSL_STORE = "default.dsl.store"
# Kafka's values of default.dsl.store (StreamsConfig.ROCKS_DB, StreamsConfig.IN_MEMORY).
ROCKS_DB, IN_MEMORY = "rocksDB", "in_memory"


class EmitStrategy(Protocol):
    """What the parameters tell of the DSL's ``kstreams.EmitStrategy``: whether it emits on close."""

    @property
    def on_close(self) -> bool: ...


@dataclass(frozen=True)
class DslKeyValueParams:
    """A key-value store the DSL needs: its name, and whether it keeps timestamped values."""

    store_name: str
    is_timestamped: bool = True


@dataclass(frozen=True)
class DslWindowParams:
    """A window store the DSL needs (a windowed aggregation's or a stream-stream join side's)."""

    store_name: str
    retention_period: timedelta
    window_size: timedelta
    retain_duplicates: bool
    emit_strategy: EmitStrategy | None
    is_sliding_window: bool
    is_timestamped: bool


@dataclass(frozen=True)
class DslSessionParams:
    """A session store the DSL needs (a session-windowed aggregation's)."""

    store_name: str
    retention_period: timedelta
    emit_strategy: EmitStrategy | None


DslParams = DslKeyValueParams | DslWindowParams | DslSessionParams


def _ms(period: timedelta) -> int:
    return period // timedelta(milliseconds=1)  # exact: no float seconds in between


def _emits_on_close(strategy: EmitStrategy | None) -> bool:
    return bool(strategy is not None and strategy.on_close)


def _window_supplier(params: DslWindowParams, persistent: bool) -> WindowBytesStoreSupplier:
    """A built-in window store: in RocksDB Kafka's time-ordered one when it emits on close."""
    return WindowBytesStoreSupplier(
        params.store_name,
        _ms(params.retention_period),
        _ms(params.window_size),
        params.retain_duplicates,
        persistent,
        time_ordered=persistent and _emits_on_close(params.emit_strategy),
    )


class DslStoreSuppliers(abc.ABC):
    """The store suppliers the DSL uses where a program names none. Made with no arguments, then
    ``configure(configs)`` with the application's configs."""

    def configure(self, configs: Mapping[str, Any]) -> None:  # noqa: B027  # optional, as in Kafka
        """Read what the suppliers need from the application's configs."""

    @abc.abstractmethod
    def key_value_store(self, params: DslKeyValueParams) -> KeyValueBytesStoreSupplier: ...

    @abc.abstractmethod
    def window_store(self, params: DslWindowParams) -> WindowBytesStoreSupplier: ...

    @abc.abstractmethod
    def session_store(self, params: DslSessionParams) -> SessionBytesStoreSupplier: ...


class BuiltInDslStoreSuppliers:
    """Kafka's built-in sets: ``RocksDBDslStoreSuppliers`` (the default) and
    ``InMemoryDslStoreSuppliers``."""

    class RocksDBDslStoreSuppliers(DslStoreSuppliers):
        """RocksDB stores; an aggregation emitting on window close gets Kafka's time-ordered one."""

        def key_value_store(self, params: DslKeyValueParams) -> KeyValueBytesStoreSupplier:
            return KeyValueBytesStoreSupplier(params.store_name, persistent=True)

        def window_store(self, params: DslWindowParams) -> WindowBytesStoreSupplier:
            return _window_supplier(params, persistent=True)

        def session_store(self, params: DslSessionParams) -> SessionBytesStoreSupplier:
            return SessionBytesStoreSupplier(
                params.store_name,
                _ms(params.retention_period),
                True,
                time_ordered=_emits_on_close(params.emit_strategy),
            )

    class InMemoryDslStoreSuppliers(DslStoreSuppliers):
        """In-memory stores, rebuilt from their changelogs when a task starts."""

        def key_value_store(self, params: DslKeyValueParams) -> KeyValueBytesStoreSupplier:
            return KeyValueBytesStoreSupplier(params.store_name, persistent=False)

        def window_store(self, params: DslWindowParams) -> WindowBytesStoreSupplier:
            return _window_supplier(params, persistent=False)

        def session_store(self, params: DslSessionParams) -> SessionBytesStoreSupplier:
            return SessionBytesStoreSupplier(params.store_name, _ms(params.retention_period), False)


# Kafka's class names of its built-in sets (config.KAFKA_DSL_STORE_SUPPLIERS), each kstreams' set of
# the same name.
_KAFKA_CLASSES: dict[str, type[DslStoreSuppliers]] = {
    name: getattr(BuiltInDslStoreSuppliers, name.rpartition("$")[2]) for name in KAFKA_DSL_STORE_SUPPLIERS
}
_BY_STORE_TYPE: dict[str, type[DslStoreSuppliers]] = {
    ROCKS_DB: BuiltInDslStoreSuppliers.RocksDBDslStoreSuppliers,
    IN_MEMORY: BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers,
}


def dsl_store_suppliers_class(spec: Any) -> type[DslStoreSuppliers]:
    """The class ``dsl.store.suppliers.class`` names: a class or a dotted path (any class with
    the three store methods will do), or Kafka's name of a built-in set. A ConfigException when
    it names none."""
    chosen = hook_class(DSL_STORE_SUPPLIERS_CLASS, spec)
    return _KAFKA_CLASSES[chosen] if isinstance(chosen, str) else chosen  # type: ignore[no-any-return]


def dsl_store_suppliers(configs: Mapping[str, Any], *, read_store_type: bool) -> DslStoreSuppliers | None:
    """The set ``configs`` choose, configured with them; None when they choose none.
    ``dsl.store.suppliers.class`` wins; ``default.dsl.store`` counts where ``read_store_type``
    (a TopologyConfig's configs, not a client's)."""
    spec = configs.get(DSL_STORE_SUPPLIERS_CLASS)
    if spec is not None:
        chosen = dsl_store_suppliers_class(spec)
    elif read_store_type and configs.get(DEFAULT_DSL_STORE) is not None:
        chosen = _BY_STORE_TYPE[configs[DEFAULT_DSL_STORE]]
    else:
        return None
    suppliers = chosen()
    configure = getattr(suppliers, "configure", None)  # optional for a class that does not subclass
    if configure is not None:
        configure(configs)
    return suppliers


def apply_dsl_store_suppliers(store_builder: Any, suppliers: DslStoreSuppliers) -> None:
    """Give a store builder the DSL made with the default (its ``dsl_params``) the supplier
    ``suppliers`` make for it; any other builder stays as it is."""
    params: DslParams | None = getattr(store_builder, "dsl_params", None)
    if params is None:
        return
    if isinstance(params, DslKeyValueParams):
        supplier: Any = suppliers.key_value_store(params)
        expected: type = KeyValueBytesStoreSupplier
    elif isinstance(params, DslWindowParams):
        supplier, expected = suppliers.window_store(params), WindowBytesStoreSupplier
    else:
        supplier, expected = suppliers.session_store(params), SessionBytesStoreSupplier
    if not isinstance(supplier, expected) or getattr(supplier, "name", None) != params.store_name:
        raise TopologyException(
            f"{type(suppliers).__name__} made {supplier!r} for store {params.store_name}: a "
            f"DslStoreSuppliers must return a {expected.__name__} of the store name it is given (from "
            "kstreams.Stores)."
        )
    store_builder.supplier = supplier
    store_builder.dsl_params = None
