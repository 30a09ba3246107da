"""``TopologyConfig`` (Kafka's): the settings a topology takes while it is built, given to
``StreamsBuilder(TopologyConfig(StreamsConfig(props)))``.

kstreams reads the DSL's store choice from it: ``dsl.store.suppliers.class`` (a DslStoreSuppliers
class), else ``default.dsl.store`` ("rocksDB" or "in_memory"), which the DSL uses for every store
an operation makes without a store type. Either may come from the application's configs or from
``topology_overrides``. Other settings (task idling, timeouts, caches) apply per client in
kstreams, which runs one topology per client: set them in the client's config.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kstreams.config import StreamsConfig
from kstreams.errors import ConfigException

__all__ = ["TopologyConfig"]

_DSL_KEYS = ("dsl.store.suppliers.class", "default.dsl.store")


class TopologyConfig:
    """A topology's build-time settings: the application's configs with ``topology_overrides``
    (only the DSL store keys) on top. Bad values fail here, with StreamsConfig's messages."""

    def __init__(
        self,
        global_app_configs: StreamsConfig | Mapping[str, Any],
        topology_overrides: Mapping[str, Any] | None = None,
    ) -> None:
        overrides = dict(topology_overrides or {})
        others = sorted(key for key in overrides if key not in _DSL_KEYS)
        if others:
            raise ConfigException(
                f"TopologyConfig overrides only {' and '.join(_DSL_KEYS)}; {', '.join(others)} apply to the "
                "whole client in kstreams (one topology per client): set them in the client's config."
            )
        app = global_app_configs
        if not isinstance(app, StreamsConfig):
            app = StreamsConfig(app)
        self.application_configs = app
        # Validated as StreamsConfig validates the keys.
        merged = StreamsConfig({**app.originals(), **overrides}) if overrides else app
        self._configs = merged
        self.store_type: str | None = merged["default.dsl.store"]
        self.dsl_store_suppliers: Any = merged["dsl.store.suppliers.class"]

    def resolve_dsl_store_suppliers(self) -> Any:
        """The DslStoreSuppliers these settings choose, configured with the application's configs;
        None when they choose none (the client's ``dsl.store.suppliers.class`` decides, else RocksDB)."""
        from kstreams.state.dsl_store_suppliers import dsl_store_suppliers

        return dsl_store_suppliers(self._configs, read_store_type=True)

    def __repr__(self) -> str:
        return (
            f"TopologyConfig(store_type={self.store_type!r}, "
            f"dsl_store_suppliers={self.dsl_store_suppliers!r})"
        )
