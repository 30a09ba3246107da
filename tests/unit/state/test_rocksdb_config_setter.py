"""``rocksdb.config.setter``: the application's RocksDBConfigSetter changes the options of every
RocksDB database its stores open, and is closed with each."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
from rocksdict import Options

from kstreams import Materialized, RocksDBConfigSetter, Stores, StreamsBuilder, StreamsConfig, TimeWindows
from kstreams.errors import ConfigException
from kstreams.serdes import Serdes
from kstreams.testing import TopologyTestDriver
from tests.unit.state.conftest import RecordingContext

SMALL_MEMTABLE = 1 << 20  # kstreams' own is 16 MB


class SmallMemtables(RocksDBConfigSetter):
    """Sets 1 MB memtables and records each call: (what, database name, options, configs)."""

    calls: ClassVar[list[tuple[str, str, Options, Any]]] = []

    def set_config(self, store_name: str, options: Options, configs: Mapping[str, Any]) -> None:
        options.set_write_buffer_size(SMALL_MEMTABLE)
        SmallMemtables.calls.append(("set", store_name, options, configs.get("application.id")))

    def close(self, store_name: str, options: Options) -> None:
        SmallMemtables.calls.append(("close", store_name, options, None))


@pytest.fixture(autouse=True)
def _no_calls_yet() -> Iterator[None]:
    SmallMemtables.calls.clear()
    yield
    SmallMemtables.calls.clear()


def _write_buffer_size(database_dir: Path) -> int:
    """The memtable size RocksDB opened the database with (its newest OPTIONS file)."""
    options_file = max(database_dir.glob("OPTIONS-*"), key=lambda p: int(p.name.split("-")[1]))
    found = re.search(r"^\s*write_buffer_size=(\d+)", options_file.read_text(), re.MULTILINE)
    assert found is not None
    return int(found.group(1))


def _context(make_context: Callable[..., RecordingContext], setter: Any) -> RecordingContext:
    context = make_context()
    context.app_configs = {"application.id": "app", "rocksdb.config.setter": setter}
    return context


def test_the_setter_changes_a_key_value_store_database_and_is_closed_with_it(
    make_context: Callable[..., RecordingContext],
) -> None:
    store: Any = Stores.key_value_store_builder(Stores.persistent_key_value_store("kv")).build()
    store.init(_context(make_context, SmallMemtables), store)
    store.put(b"k", b"v")
    assert [(what, name, app) for what, name, _, app in SmallMemtables.calls] == [("set", "kv", "app")]
    path = Path(store.wrapped.wrapped.path)
    assert _write_buffer_size(path) == SMALL_MEMTABLE
    store.close()
    (_, _, opened_with, _), (what, name, closed_with, _) = SmallMemtables.calls
    assert (what, name) == ("close", "kv") and closed_with is opened_with


def test_without_a_setter_the_store_keeps_kstreams_options(
    make_context: Callable[..., RecordingContext],
) -> None:
    store: Any = Stores.key_value_store_builder(Stores.persistent_key_value_store("kv")).build()
    store.init(make_context(), store)
    store.put(b"k", b"v")
    assert _write_buffer_size(Path(store.wrapped.wrapped.path)) == 16 * 1024 * 1024
    store.close()


def test_each_segment_of_a_window_store_gets_its_own_setter_under_the_segment_name(
    make_context: Callable[..., RecordingContext],
) -> None:
    supplier = Stores.persistent_window_store("w", retention_ms=200_000, window_size_ms=100)
    store: Any = Stores.window_store_builder(supplier).with_logging_disabled().build()
    store.init(_context(make_context, SmallMemtables), store)
    interval = supplier.segment_interval_ms
    store.put(b"k", b"one", 0)
    store.put(b"k", b"two", interval)
    opened = [name for what, name, _, _ in SmallMemtables.calls if what == "set"]
    assert opened == ["w.0", f"w.{interval}"]
    store.close()
    assert sorted(name for what, name, _, _ in SmallMemtables.calls if what == "close") == sorted(opened)


def test_a_setter_named_by_its_dotted_path_runs_for_the_stores_of_a_topology(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_rocksdb_setters.py").write_text(
        "from kstreams import RocksDBConfigSetter\n"
        "calls = []\n"
        "class Small(RocksDBConfigSetter):\n"
        "    def set_config(self, store_name, options, configs):\n"
        "        options.set_write_buffer_size(1 << 20)\n"
        "        calls.append(('set', store_name, configs['application.id']))\n"
        "    def close(self, store_name, options):\n"
        "        calls.append(('close', store_name))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import my_rocksdb_setters  # type: ignore[import-not-found]

    builder = StreamsBuilder()
    grouped = builder.stream("in").group_by_key()
    grouped.count(Materialized.as_("counts"))
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(1000)).count(Materialized.as_("windowed"))
    config = {
        "application.id": "setter-app",
        "state.dir": str(tmp_path / "state"),
        "default.key.serde": "string",
        "default.value.serde": "string",
        "rocksdb.config.setter": "my_rocksdb_setters.Small",
    }
    with TopologyTestDriver(builder.build(), config) as driver:
        driver.create_input_topic("in", Serdes.string(), Serdes.string()).pipe_input("a", "x", 5)
        assert driver.get_key_value_store("counts").get("a") == 1
        assert sorted(my_rocksdb_setters.calls) == [
            ("set", "counts", "setter-app"),
            ("set", "windowed.0", "setter-app"),
        ]
    assert sorted(call for call in my_rocksdb_setters.calls if call[0] == "close") == [
        ("close", "counts"),
        ("close", "windowed.0"),
    ]


class NotASetter:
    """Java's method name: not the hook kstreams calls."""

    def setConfig(self, store_name: str, options: Options, configs: Mapping[str, Any]) -> None:
        pass


class DuckSetter:
    """No subclass, but the method the hook needs (and no ``close``): enough."""

    calls: ClassVar[list[str]] = []

    def set_config(self, store_name: str, options: Options, configs: Mapping[str, Any]) -> None:
        DuckSetter.calls.append(store_name)


def test_a_class_with_set_config_is_a_setter_too(make_context: Callable[..., RecordingContext]) -> None:
    store: Any = Stores.key_value_store_builder(Stores.persistent_key_value_store("kv")).build()
    store.init(_context(make_context, DuckSetter), store)
    store.close()
    assert DuckSetter.calls == ["kv"]


@pytest.mark.parametrize(
    ("setter", "message"),
    [
        (
            NotASetter,
            "is not a kstreams.RocksDBConfigSetter: subclass it and implement set_config (set_config",
        ),
        ("no_such_module.Setter", "names no importable class"),
        ("org.apache.kafka.streams.state.BoundedMemoryRocksDBConfig", "is a Java class"),
        ("Setter", "is not a dotted path"),
        (5, "is not a kstreams.RocksDBConfigSetter"),
    ],
)
def test_a_bad_setter_fails_the_config(setter: Any, message: str) -> None:
    with pytest.raises(ConfigException, match=re.escape(message)):
        StreamsConfig({"application.id": "app", "rocksdb.config.setter": setter})
