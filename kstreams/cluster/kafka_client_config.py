"""librdkafka settings for the clients of a ``KafkaCluster``, and building those clients.

A ``KafkaCluster`` holds one settings mapping. Unprefixed keys go to every client; keys prefixed
``consumer.``, ``producer.`` or ``admin.`` go only to that kind of client, so a consumer-only key
(``heartbeat.interval.ms``) does not make librdkafka warn in every producer. Settings passed to
``cluster.consumer(group, config)`` or ``cluster.producer(config)`` are merged last and win.

Which keys exist is librdkafka's to say, and only librdkafka's: ``unknown_client_key`` asks the
librdkafka that confluent-kafka loaded (``rd_kafka_conf_set`` on a scratch configuration, no client
made), so a KafkaCluster and a ``StreamsConfig`` (whichever adapter runs it) refuse at construction
the very keys a librdkafka client would refuse at ``start()``; there is no list of ours to drift.

Some settings are the adapter's, not the user's: consumers never auto-commit (the runtime commits),
and group members use the range assignor (co-partitioned topics land on one member; librdkafka's
cooperative-sticky assignor does not guarantee that).
"""

from __future__ import annotations

import ctypes
import difflib
import functools
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from confluent_kafka import KafkaException

from kstreams.errors import ConfigException

__all__ = [
    "ASSIGN_ONLY_GROUP_ID",
    "CLIENT_KINDS",
    "bootstrap_servers_problem",
    "build_client",
    "check_client_keys",
    "client_settings",
    "librdkafka_logger",
    "unknown_client_key",
]

logger = logging.getLogger(__name__)

# librdkafka's own log lines go through Python logging under this name, not to stderr.
librdkafka_logger = logging.getLogger("kstreams.cluster.librdkafka")

# How long a librdkafka line stays quiet once logged (see ``_RepeatFilter``).
REPEAT_WINDOW_S = 30.0
# librdkafka's security protocols, which it accepts as a bootstrap address's scheme.
_SECURITY_SCHEMES = ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")

CLIENT_KINDS = ("consumer", "producer", "admin")

# librdkafka refuses to create a consumer without group.id, even one that only ever uses manual
# assignment and never commits; such consumers get this id and never contact its coordinator.
ASSIGN_ONLY_GROUP_ID = "kstreams-assign-only"

# Settings the adapter decides: the runtime relies on them.
_FORCED_CONSUMER = {"enable.auto.commit": False, "enable.auto.offset.store": False}
_FORCED_GROUP_MEMBER = {"partition.assignment.strategy": "range"}

# Keys confluent-kafka takes itself (callbacks, its logger) and never hands to librdkafka.
_CONFLUENT_KAFKA_KEYS = frozenset(
    {
        "logger",
        "error_cb",
        "throttle_cb",
        "stats_cb",
        "oauth_cb",
        "on_delivery",
        "on_commit",
        "default.topic.config",
        "delivery.report.only.error",
    }
)
# rd_kafka_conf_res_t: the key is no librdkafka property (an invalid value is another code).
_CONF_UNKNOWN = -2

ClientT = TypeVar("ClientT")


def client_settings(
    kind: str,
    bootstrap_servers: str,
    cluster_config: Mapping[str, object],
    client_config: Mapping[str, object] | None = None,
    *,
    group_member: bool = False,
) -> dict[str, object]:
    """The settings of one client of the given kind ("consumer", "producer", "admin").

    Later sources win: bootstrap servers, unprefixed cluster settings, the kind's prefixed cluster
    settings, then client_config. For consumers the adapter's own settings are applied last.
    """
    if kind not in CLIENT_KINDS:
        raise ValueError(f"Unknown client kind {kind!r}: use one of {CLIENT_KINDS}")
    settings: dict[str, object] = {"bootstrap.servers": bootstrap_servers}
    prefixed: dict[str, object] = {}
    for key, value in cluster_config.items():
        head, dot, rest = key.partition(".")
        if dot and head in CLIENT_KINDS:
            if head == kind:
                prefixed[rest] = value
        else:
            settings[key] = value
    settings.update(prefixed)
    settings.update(client_config or {})
    if kind == "consumer":
        _force(settings, _FORCED_CONSUMER)
        if group_member:
            _force(settings, _FORCED_GROUP_MEMBER)
    settings["logger"] = librdkafka_logger
    return settings


def build_client(factory: Callable[[Any], ClientT], settings: dict[str, object], role: str) -> ClientT:
    """Create a confluent-kafka client; a setting librdkafka rejects becomes a ConfigException
    naming the client's role."""
    try:
        return factory(settings)
    except (KafkaException, ValueError, TypeError) as exc:
        # Callables (the logger, the delivery callback) are not settings a user can fix.
        shown = {k: v for k, v in settings.items() if not callable(v) and "password" not in k}
        raise ConfigException(
            f"Cannot create the {role}: librdkafka rejected its settings ({exc}). Settings were "
            f"{shown}; fix or remove the offending key (librdkafka names differ from the Java client's "
            "for some settings)."
        ) from exc


def bootstrap_servers_problem(value: str) -> str | None:
    """None when ``value`` is a list of Kafka addresses (``host:port,...``, optionally with a
    security-protocol scheme as librdkafka allows); else what is wrong, for a ConfigException."""
    entries = [entry.strip() for entry in str(value).split(",")]
    for entry in entries:
        if not entry:
            return "has an empty entry: write host:port,host:port"
        scheme, sep, address = entry.partition("://")
        if not sep:
            address = entry
        elif scheme.lower() not in _SECURITY_SCHEMES:
            return (
                f"has {entry!r}, a {scheme} URL: Kafka brokers are addressed as host:port (a scheme, when "
                "given, is a security protocol: PLAINTEXT://, SSL://, SASL_PLAINTEXT://, SASL_SSL://)"
            )
        host, colon, port = address.rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not colon or not host:
            return f"has {entry!r} without a port: write host:port, e.g. {address}:9092"
        if not port.isdigit() or not 0 < int(port) <= 65535:
            return f"has {entry!r}, whose port {port!r} is not a port number (1 to 65535)"
        if any(c in host for c in "/ @?#"):
            return f"has {entry!r}, whose host {host!r} is not a host name or address"
    return None


class _RepeatFilter(logging.Filter):
    """Lets one librdkafka line through per ``REPEAT_WINDOW_S`` among lines that differ only in
    numbers (a client retrying an unreachable broker says the same thing many times a second);
    the next one let through says how many were held back. DEBUG lines (librdkafka's ``debug``
    setting, asked for on purpose) all pass. Any thread may log: ``_lock`` guards the table."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._seen: dict[tuple[int, str], tuple[float, int]] = {}  # -> (let through at, held back)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.INFO:
            return True
        key = (record.levelno, re.sub(r"\d+", "#", record.getMessage()))
        now = time.monotonic()
        with self._lock:
            last = self._seen.get(key)
            if last is not None and now - last[0] < REPEAT_WINDOW_S:
                self._seen[key] = (last[0], last[1] + 1)
                return False
            held = last[1] if last is not None else 0
            self._seen[key] = (now, 0)
            if len(self._seen) > 1000:  # lines once seen are forgotten, not kept for ever
                self._seen = {k: v for k, v in self._seen.items() if now - v[0] < REPEAT_WINDOW_S}
        if held:
            record.msg = f"{record.getMessage()} ({held} similar librdkafka lines held back)"
            record.args = None
        return True


librdkafka_logger.addFilter(_RepeatFilter())


def _force(settings: dict[str, Any], forced: Mapping[str, object]) -> None:
    for key, value in forced.items():
        given = settings.get(key)
        if given is not None and str(given).lower() != str(value).lower():
            logger.warning(
                "Ignoring %s=%r: kstreams requires %s=%r for its consumers", key, given, key, value
            )
        settings[key] = value


class _Librdkafka:
    """The configuration calls of the librdkafka confluent-kafka loaded (through its extension
    module, whose dependencies ``dlsym`` searches), with a scratch global configuration."""

    def __init__(self) -> None:
        import confluent_kafka.cimpl

        lib = ctypes.CDLL(confluent_kafka.cimpl.__file__)
        lib.rd_kafka_conf_new.restype = ctypes.c_void_p
        lib.rd_kafka_conf_set.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_size_t,
        ]
        lib.rd_kafka_conf_set.restype = ctypes.c_int
        lib.rd_kafka_conf_dump.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
        lib.rd_kafka_conf_dump.restype = ctypes.POINTER(ctypes.c_char_p)
        lib.rd_kafka_conf_dump_free.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t]
        lib.rd_kafka_conf_destroy.argtypes = [ctypes.c_void_p]
        self._lib = lib

    def is_property(self, key: str) -> bool:
        """Whether librdkafka knows ``key`` (a global or a default-topic property)."""
        lib = self._lib
        conf = lib.rd_kafka_conf_new()
        errors = ctypes.create_string_buffer(512)
        try:
            # An empty value is invalid for most properties but never makes a known key unknown.
            result = lib.rd_kafka_conf_set(conf, key.encode(), b"", errors, len(errors))
        finally:
            lib.rd_kafka_conf_destroy(conf)
        return bool(result != _CONF_UNKNOWN)

    @functools.cached_property
    def property_names(self) -> tuple[str, ...]:
        """The names of librdkafka's properties that have a default (for suggestions)."""
        lib = self._lib
        conf = lib.rd_kafka_conf_new()
        count = ctypes.c_size_t()
        try:
            dump = lib.rd_kafka_conf_dump(conf, ctypes.byref(count))
            names = tuple(dump[i].decode() for i in range(0, count.value, 2))
            lib.rd_kafka_conf_dump_free(dump, count)
        finally:
            lib.rd_kafka_conf_destroy(conf)
        return names


@functools.cache
def _librdkafka() -> _Librdkafka:
    return _Librdkafka()


def unknown_client_key(key: str) -> str | None:
    """None when ``key`` is a setting a librdkafka client takes; else why not, with the closest
    property librdkafka has when one is close."""
    if key in _CONFLUENT_KAFKA_KEYS:
        return None
    librdkafka = _librdkafka()
    if librdkafka.is_property(key):
        return None
    matches = difflib.get_close_matches(key, librdkafka.property_names, n=1, cutoff=0.75)
    hint = f" Did you mean {matches[0]!r}?" if matches else ""
    return f"librdkafka (the Kafka client kstreams uses) has no property {key!r}.{hint}"


def check_client_keys(config: Mapping[str, object], prefixes: tuple[str, ...]) -> None:
    """Raise ConfigException for the first key of ``config`` under one of ``prefixes`` ("" for
    unprefixed keys) that no librdkafka client takes, naming the key and its prefix."""
    for name in config:
        prefix = next((p for p in prefixes if name.startswith(p)), None)
        if prefix is None:
            continue
        problem = unknown_client_key(name[len(prefix) :])
        if problem is not None:
            where = f" (given with prefix {prefix!r})" if prefix else ""
            raise ConfigException(
                f"Unknown client config {name!r}{where}: {problem} A Kafka cluster refuses it when "
                "the client starts; fix or remove it (librdkafka's names differ from the Java "
                "client's for some settings)."
            )
