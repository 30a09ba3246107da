"""``RocksDBConfigSetter`` (Kafka's): the application's hook into the options of every RocksDB
database its stores open, set with ``rocksdb.config.setter``.

Each database a store opens (a key-value store's, each segment of a window or session store) gets
a new instance of the configured class: ``set_config(name, options, configs)`` runs on kstreams'
options (Kafka Streams' defaults: 16 MB memtables, a 50 MB block cache, bloom filters) before the
database opens, and ``close(name, options)`` after it closed, so a setter that made an object for
that database can release it. ``options`` is rocksdict's ``Options``; a segment's name is
``<store>.<segment start>``, as in Kafka Streams. A setter sharing one ``Cache`` and one
``WriteBufferManager`` among every store bounds the memory of all of them (Kafka's
``BoundedMemoryRocksDBConfig``).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any

from rocksdict import Options

from kstreams.config import hook_class

__all__ = ["ROCKSDB_CONFIG_SETTER", "RocksDBConfigSetter", "config_setter", "config_setter_class"]

ROCKSDB_CONFIG_SETTER = "rocksdb.config.setter"


class RocksDBConfigSetter(abc.ABC):
    """Changes the options of one RocksDB database before it opens. Subclass it (any class with
    ``set_config`` will do) and name the class (or its dotted path) in ``rocksdb.config.setter``;
    it is made with no arguments."""

    @abc.abstractmethod
    def set_config(self, store_name: str, options: Options, configs: Mapping[str, Any]) -> None:
        """Change ``options`` (rocksdict's) for the database of ``store_name``; ``configs`` are the
        application's."""

    def close(self, store_name: str, options: Options) -> None:  # noqa: B027  # optional, as in Kafka
        """Release what ``set_config`` made for this database only (not objects shared by many);
        called once the database is closed."""


def config_setter_class(spec: Any) -> type[RocksDBConfigSetter]:
    """The class ``rocksdb.config.setter`` names (a class or a dotted path; any class with
    ``set_config`` will do); a ConfigException when it names none."""
    return hook_class(ROCKSDB_CONFIG_SETTER, spec)  # type: ignore[no-any-return]


def config_setter(configs: Mapping[str, Any] | None) -> RocksDBConfigSetter | None:
    """A new instance of the application's setter, or None when it has none."""
    spec = configs.get(ROCKSDB_CONFIG_SETTER) if configs is not None else None
    return None if spec is None else config_setter_class(spec)()
