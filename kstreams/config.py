"""StreamsConfig: every configuration key of kstreams, with its type, default, validation and doc.

Keys keep Kafka Streams' names. Client settings pass through to the Kafka clients with Kafka
Streams' prefixes (``main.consumer.``, ``restore.consumer.``, ``consumer.``, ``producer.``,
``admin.``) or unprefixed when the key is a known consumer or producer key; ``topic.`` prefixed
keys become configs of every internal topic.
"""

from __future__ import annotations

import importlib
import os
import re
import tempfile
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kstreams.config_catalog import (
    CLIENT_PREFIXES,
    CONSUMER_KEYS,
    JAVA_CLIENT_KEYS,
    PRODUCER_KEYS,
    SERDE_KEY_PREFIXES,
    TOPIC_PREFIX,
    UNSUPPORTED_KEYS,
    UNSUPPORTED_PREFIXES,
    closest_key,
)
from kstreams.errors import ConfigException

__all__ = ["ConfigKey", "StreamsConfig", "cache_max_bytes_of"]

AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE_V2 = "exactly_once_v2"
AUTOMATIC_SETUP = "automatic"
MANUAL_SETUP = "manual"


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One configuration key: its type, default, validator and one line of documentation."""

    name: str
    type: type | tuple[type, ...]
    default: Any
    doc: str
    validator: Callable[[Any], str | None] | None = None


def _at_least(minimum: int) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if value >= minimum else f"must be at least {minimum}"

    return check


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if value in choices else f"must be one of {', '.join(choices)}"

    return check


_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")


def _host_port(value: str) -> tuple[str, int] | None:
    """(host, port) of "host:port" ("[v6]:port" too), or None when it is not one (Kafka's
    ``Utils.getHost``/``getPort``, which application.server must pass)."""
    host, sep, port = value.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        return None
    return host, int(port)


def _application_id(value: Any) -> str | None:
    # Kafka requires a legal topic-name prefix; it also names the directory under state.dir, where
    # "." or ".." would put every store beside, or above, state.dir itself.
    if not value:
        return "must not be empty"
    if value in (".", ".."):
        return (
            "must not be '.' or '..', which would put the state of every task in state.dir itself or "
            "above it: use a name of ASCII letters, digits, '.', '_' and '-'"
        )
    if not _LEGAL_TOPIC_NAME.fullmatch(value):
        illegal = "".join(sorted({c for c in value if not _LEGAL_TOPIC_NAME.fullmatch(c)}))
        return (
            f"holds {illegal!r}, but may only contain ASCII letters, digits, '.', '_' and '-' (Kafka's "
            "legal topic-name characters: it prefixes internal topic names and names a directory "
            "under state.dir)"
        )
    return None


def _bootstrap_servers(value: str) -> str | None:
    # librdkafka takes a malformed address and retries it until a timeout: refuse it now instead.
    from kstreams.cluster.kafka_client_config import bootstrap_servers_problem

    return bootstrap_servers_problem(value)


_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(
        "application.id",
        str,
        None,
        "Identifies the application: group id, prefix of internal topics.",
        _application_id,
    ),
    ConfigKey(
        "bootstrap.servers",
        str,
        None,
        "Kafka brokers host:port,...; unset means the embedded in-process cluster.",
        lambda v: _bootstrap_servers(v),
    ),
    ConfigKey("client.id", str, "", "Prefix of thread and client names; default <application.id>-<uuid>."),
    ConfigKey("num.stream.threads", int, 1, "Stream (processing) threads started by start().", _at_least(0)),
    ConfigKey(
        "statestore.cache.max.bytes",
        int,
        None,
        "Record cache bytes across all stream threads (wins over cache.max.bytes.buffering).",
        _at_least(0),
    ),
    ConfigKey(
        "cache.max.bytes.buffering", int, None, "Deprecated name of statestore.cache.max.bytes.", _at_least(0)
    ),
    ConfigKey(
        "commit.interval.ms",
        int,
        None,
        "How often all tasks are committed; default 30000, or 100 with exactly_once_v2.",
        _at_least(0),
    ),
    ConfigKey(
        "processing.guarantee",
        str,
        AT_LEAST_ONCE,
        "at_least_once or exactly_once_v2.",
        _one_of(AT_LEAST_ONCE, EXACTLY_ONCE_V2),
    ),
    ConfigKey(
        "state.dir",
        str,
        os.path.join(tempfile.gettempdir(), "kstreams"),
        "Directory of persistent state stores and checkpoints.",
    ),
    ConfigKey("num.standby.replicas", int, 0, "Standby replicas kept for each stateful task.", _at_least(0)),
    ConfigKey(
        "acceptable.recovery.lag",
        int,
        10000,
        "Changelog records a client's state may lag and still count as caught up for a task's active.",
        _at_least(0),
    ),
    ConfigKey(
        "max.warmup.replicas",
        int,
        2,
        "Warm-up replicas (standby tasks that catch up before their task moves) at once in the group.",
        _at_least(1),
    ),
    ConfigKey(
        "probing.rebalance.interval.ms",
        int,
        600000,
        "How long warm-ups catch up before a probing rebalance checks them (Kafka: at least 60000; "
        "kstreams allows from 100 for tests).",
        _at_least(100),
    ),
    ConfigKey(
        "replication.factor",
        int,
        -1,
        "Replication factor of internal topics (-1: broker default).",
        lambda v: None if v == -1 or v >= 1 else "must be -1 or at least 1",
    ),
    ConfigKey(
        "internal.topics.setup",
        str,
        AUTOMATIC_SETUP,
        "automatic: rebalances create internal topics; manual: only init() does.",
        _one_of(AUTOMATIC_SETUP, MANUAL_SETUP),
    ),
    ConfigKey(
        "partition.autoscaling.enabled",
        bool,
        False,
        "Expand internal topics when source topics gain partitions (KIP-878).",
    ),
    ConfigKey(
        "partition.autoscaling.timeout.ms",
        int,
        900000,
        "How long failed internal topic expansions are retried without progress.",
        _at_least(0),
    ),
    ConfigKey(
        "windowstore.changelog.additional.retention.ms",
        int,
        86400000,
        "Extra retention of windowed changelogs beyond the store's retention.",
        _at_least(0),
    ),
    ConfigKey("default.key.serde", (str, type, object), None, "Serde of keys where none is given."),
    ConfigKey("default.value.serde", (str, type, object), None, "Serde of values where none is given."),
    ConfigKey(
        "deserialization.exception.handler",
        (str, type),
        None,
        "LogAndFailExceptionHandler (default) or LogAndContinueExceptionHandler: a class, a dotted path "
        "or Kafka's class name.",
    ),
    ConfigKey(
        "default.deserialization.exception.handler",
        (str, type),
        None,
        "Deprecated name of deserialization.exception.handler (which wins when both are set).",
    ),
    ConfigKey(
        "processing.exception.handler",
        (str, type),
        None,
        "LogAndFailProcessingExceptionHandler (default) or LogAndContinueProcessingExceptionHandler "
        "(a class, a dotted path or Kafka's class name): what happens when a processor raises on a record.",
    ),
    ConfigKey(
        "production.exception.handler",
        (str, type),
        None,
        "DefaultProductionExceptionHandler (fail) or your own (a class, a dotted path or Kafka's class "
        "name): what happens when a sink cannot serialize a record or the cluster rejects it.",
    ),
    ConfigKey(
        "default.production.exception.handler",
        (str, type),
        None,
        "Deprecated name of production.exception.handler (which wins when both are set).",
    ),
    ConfigKey(
        "default.dsl.store",
        str,
        None,
        'The DSL\'s store where an operation names none, "rocksDB" (Kafka\'s default) or "in_memory"; read '
        "from a TopologyConfig given to StreamsBuilder (the client's config alone is too late, as in Kafka).",
        lambda v: None if v in ("rocksDB", "in_memory") else 'must be "rocksDB" or "in_memory"',
    ),
    ConfigKey(
        "dsl.store.suppliers.class",
        (str, type),
        None,
        "A kstreams.DslStoreSuppliers class (or its dotted path, or Kafka's name of a built-in set) that "
        "makes the DSL's stores where an operation names no store type; from a TopologyConfig or the "
        "client's config.",
    ),
    ConfigKey(
        "rocksdb.config.setter",
        (str, type),
        None,
        "A kstreams.RocksDBConfigSetter subclass (the class or its dotted path) whose set_config(store_name, "
        "options, configs) changes the options of each RocksDB database a store opens.",
    ),
    ConfigKey(
        "errors.deadletterqueue.topic.name",
        str,
        None,
        "Topic the built-in exception handlers write failed records to, with headers naming the error.",
    ),
    ConfigKey(
        "max.task.idle.ms",
        int,
        0,
        "How long a task waits for data on all its inputs to order them.",
        lambda v: None if v >= -1 else "must be -1 or at least 0",
    ),
    ConfigKey(
        "buffered.records.per.partition",
        int,
        1000,
        "Records buffered per input partition before its fetching pauses.",
        _at_least(1),
    ),
    ConfigKey("max.poll.records", int, 1000, "Most records one poll returns.", _at_least(1)),
    ConfigKey("poll.ms", int, 100, "How long the polling thread blocks in one poll.", _at_least(0)),
    ConfigKey(
        "task.time.slice.ms",
        int,
        100,
        "Longest a stream thread keeps one task before letting the scheduler pick again.",
        _at_least(1),
    ),
    ConfigKey(
        "processing.batch.size", int, 2000, "Records a stream thread pops from a task at once.", _at_least(1)
    ),
    ConfigKey(
        "processing.compiled",
        bool,
        True,
        "Run DSL operations with compiled kernels over whole batches where they allow it.",
    ),
    ConfigKey("session.timeout.ms", int, 45000, "Group session timeout of the main consumer.", _at_least(1)),
    ConfigKey(
        "task.timeout.ms",
        int,
        300000,
        "How long a retriable cluster error is retried (with backoff) before it reaches the uncaught "
        "exception handler.",
        _at_least(0),
    ),
    ConfigKey(
        "default.api.timeout.ms",
        int,
        60000,
        "How long start() and init() wait for an unreachable or failing cluster (retrying its "
        "retriable errors) before a TimeoutError: Kafka's default.api.timeout.ms.",
        _at_least(0),
    ),
    ConfigKey(
        "retry.backoff.ms",
        int,
        100,
        "First wait before retrying a failed cluster call; it doubles up to 1 s.",
        _at_least(0),
    ),
    ConfigKey(
        "metadata.max.age.ms",
        int,
        300000,
        "How often a Kafka cluster's topic metadata is refreshed, so partition growth is noticed "
        "(the embedded cluster's metadata is always current).",
        _at_least(0),
    ),
    ConfigKey(
        "state.cleanup.delay.ms",
        int,
        600000,
        "How long the state directory of a task no client holds is kept before it is deleted.",
        _at_least(0),
    ),
    ConfigKey(
        "repartition.purge.interval.ms",
        int,
        30000,
        "How often, after a commit, records of repartition topics before the committed offsets are deleted.",
        _at_least(0),
    ),
    ConfigKey(
        "auto.offset.reset",
        str,
        "earliest",
        "Where to start without a committed offset.",
        _one_of("earliest", "latest", "none"),
    ),
    ConfigKey(
        "metrics.recording.level", str, "INFO", "INFO, DEBUG or TRACE.", _one_of("INFO", "DEBUG", "TRACE")
    ),
    ConfigKey(
        "metrics.http.port",
        int,
        None,
        "Port of an HTTP endpoint serving the metrics for Prometheus at /metrics while the client "
        "runs (0: any free port); unset: no endpoint.",
        lambda v: None if 0 <= v <= 65535 else "must be a port number from 0 to 65535",
    ),
    ConfigKey(
        "metrics.http.host",
        str,
        "127.0.0.1",
        "Address the metrics endpoint listens on (metrics.http.port); 0.0.0.0 for every interface.",
    ),
    ConfigKey(
        "application.server",
        str,
        "",
        "host:port where this client answers interactive queries (Kafka's application.server); "
        "published to the other clients so that query_metadata_for_key() can name it. Empty: none.",
        lambda v: None if v == "" or _host_port(v) is not None else "must be host:port (or empty)",
    ),
    ConfigKey(
        "query.http.port",
        int,
        None,
        "Port of an HTTP endpoint answering interactive queries at /stores/<store>/... while the "
        "client runs (0: any free port); unset: no endpoint. Usually application.server's port.",
        lambda v: None if 0 <= v <= 65535 else "must be a port number from 0 to 65535",
    ),
    ConfigKey(
        "query.http.host",
        str,
        "127.0.0.1",
        "Address the query endpoint listens on (query.http.port); 0.0.0.0 for every interface.",
    ),
)

_BY_NAME = {key.name: key for key in _KEYS}

# Connection and security settings every client of one cluster shares.
_SHARED_PREFIXES = ("security.", "sasl.", "ssl.", "client.dns.", "socket.")

DEFAULT_CACHE_MAX_BYTES = 10 * 1024 * 1024


def cache_max_bytes_of(props: Mapping[str, Any]) -> int:
    """Total record cache bytes of raw properties: statestore.cache.max.bytes wins over the
    deprecated cache.max.bytes.buffering; 10 MiB when neither is set."""
    for name in ("statestore.cache.max.bytes", "cache.max.bytes.buffering"):
        value = props.get(name)
        if value is not None:
            return int(value)
    return DEFAULT_CACHE_MAX_BYTES


class StreamsConfig(Mapping[str, Any]):
    """A validated view of the application's configuration.

    Construction checks every known key's type and range and raises ``ConfigException`` naming the
    key, the value and what is allowed. Client keys (prefixed, or the unprefixed names of
    ``config_catalog``) pass through to the Kafka clients, ``topic.*`` keys go to internal topics,
    schema registry keys stay for the serdes. A Kafka Streams key kstreams does not implement is
    rejected with the reason, and any other key (a typo) with the closest known key: a setting is
    never silently ignored.
    """

    KEYS = _BY_NAME

    def __init__(self, props: Mapping[str, Any] | None = None) -> None:
        given = dict(props or {})
        values: dict[str, Any] = {}
        for name, raw in given.items():
            if not isinstance(name, str):
                raise ConfigException(f"Config keys must be strings, got {name!r}.")
            key = _BY_NAME.get(name)
            if key is None:
                _check_unknown(name)
            values[name] = _coerce(key, raw) if key is not None else raw
        _check_client_keys(values)
        if not values.get("application.id"):
            raise ConfigException(
                "Missing required config 'application.id': set it to a name that identifies the "
                "application (it is the consumer group id and prefixes internal topic names)."
            )
        self._given = frozenset(given)
        self._values = values
        # Resolved now, so a handler that names no class, or the wrong kind, fails construction
        # rather than the first task (or the polling thread) that would use it.
        self._handler_classes = {
            name: _handler_class(name, values[name]) for name in _HANDLER_KEYS if values.get(name) is not None
        }
        for name in HOOK_KEYS:
            if values.get(name) is not None:
                hook_class(name, values[name])  # so that a bad one fails here, not in a task

    # Mapping interface: known keys read through their defaults.
    def __getitem__(self, name: str) -> Any:
        if name in self._values:
            return self._values[name]
        key = _BY_NAME.get(name)
        if key is None:
            raise KeyError(name)
        return key.default

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(set(self._values) | set(_BY_NAME))

    def __len__(self) -> int:
        return len(set(self._values) | set(_BY_NAME))

    def is_set(self, name: str) -> bool:
        return name in self._given

    def originals(self) -> dict[str, Any]:
        return dict(self._values)

    @property
    def application_id(self) -> str:
        return str(self["application.id"])

    @property
    def processing_guarantee(self) -> str:
        return str(self["processing.guarantee"])

    @property
    def exactly_once(self) -> bool:
        return self.processing_guarantee == EXACTLY_ONCE_V2

    @property
    def commit_interval_ms(self) -> int:
        value = self["commit.interval.ms"]
        if value is None:
            return 100 if self.exactly_once else 30000
        return int(value)

    @property
    def cache_max_bytes(self) -> int:
        """Total record cache bytes: statestore.cache.max.bytes wins over the deprecated name."""
        return cache_max_bytes_of(self._values)

    def client_id(self, process_id: uuid.UUID) -> str:
        return str(self["client.id"]) or f"{self.application_id}-{process_id}"

    def topic_configs(self) -> dict[str, str]:
        """Configs for every internal topic, from ``topic.*`` keys."""
        return {k[len(TOPIC_PREFIX) :]: str(v) for k, v in self._values.items() if k.startswith(TOPIC_PREFIX)}

    def client_configs(self, client: str) -> dict[str, Any]:
        """Settings for one client: "main.consumer", "restore.consumer", "producer" or "admin".

        Unprefixed known keys come first (Java names such as ``send.buffer.bytes`` as librdkafka's
        ``socket.send.buffer.bytes``), then ``consumer.`` (for consumers), then the client's own
        prefix, so the most specific setting wins.
        """
        is_consumer = client.endswith("consumer")
        plain = CONSUMER_KEYS if is_consumer else PRODUCER_KEYS if client == "producer" else frozenset()
        result = {k: v for k, v in self._values.items() if k in plain or k.startswith(_SHARED_PREFIXES)}
        # The Java clients' socket buffer names, as librdkafka names them (every client has them).
        result.update({JAVA_CLIENT_KEYS[k]: v for k, v in self._values.items() if k in JAVA_CLIENT_KEYS})
        if "bootstrap.servers" in self._values:
            result["bootstrap.servers"] = self._values["bootstrap.servers"]
        prefixes = (["consumer."] if is_consumer else []) + [client + "."]
        for prefix in prefixes:
            result.update({k[len(prefix) :]: v for k, v in self._values.items() if k.startswith(prefix)})
        return result

    def cluster_configs(self) -> dict[str, Any]:
        """Settings for a KafkaCluster: the shared connection and security keys unprefixed (every
        client needs them), and admin-only settings under ``admin.`` (the adapter's prefix for its
        admin client). Consumer and producer settings are passed when those clients are created."""
        shared = {k: v for k, v in self._values.items() if k.startswith(_SHARED_PREFIXES)}
        admin = {f"admin.{k[len('admin.') :]}": v for k, v in self._values.items() if k.startswith("admin.")}
        return {**shared, **admin}

    def deserialization_exception_handler(self) -> Any:
        """An instance of the configured deserialization exception handler, configured."""
        return self._handler(
            ("deserialization.exception.handler", "default.deserialization.exception.handler")
        )

    def processing_exception_handler(self) -> Any:
        """An instance of the configured processing exception handler (KIP-1033), configured."""
        return self._handler(("processing.exception.handler",))

    def production_exception_handler(self) -> Any:
        """An instance of the configured production exception handler, configured."""
        return self._handler(("production.exception.handler", "default.production.exception.handler"))

    @property
    def handles_errors(self) -> bool:
        """Whether a processing or production handler, or a dead-letter topic, is configured: the
        runtime then attributes every failure to one record (which costs the compiled path)."""
        return any(
            self[name] is not None
            for name in (
                "processing.exception.handler",
                "production.exception.handler",
                "default.production.exception.handler",
                "errors.deadletterqueue.topic.name",
            )
        )

    def _handler(self, names: tuple[str, ...]) -> Any:
        """The handler configured under the first of ``names`` that is set (else the default),
        instantiated and configured with the application's configs."""
        name = next((n for n in names if n in self._handler_classes), None)
        if name is not None:
            handler_class = self._handler_classes[name]
        else:
            handler_class = _handler_class(names[0], _HANDLER_KEYS[names[0]][0])
        handler: Any = handler_class()
        handler.configure(self.originals())
        return handler


# Each exception-handler key: its default class, the class a handler must subclass (both in
# kstreams.errors), and the built-in choices an error message offers.
_DESERIALIZATION_HANDLER = (
    "LogAndFailExceptionHandler",
    "DeserializationExceptionHandler",
    "LogAndFailExceptionHandler or LogAndContinueExceptionHandler",
)
_PRODUCTION_HANDLER = (
    "DefaultProductionExceptionHandler",
    "ProductionExceptionHandler",
    "DefaultProductionExceptionHandler or a subclass of ProductionExceptionHandler",
)
_HANDLER_KEYS: dict[str, tuple[str, str, str]] = {
    "deserialization.exception.handler": _DESERIALIZATION_HANDLER,
    "default.deserialization.exception.handler": _DESERIALIZATION_HANDLER,
    "processing.exception.handler": (
        "LogAndFailProcessingExceptionHandler",
        "ProcessingExceptionHandler",
        "LogAndFailProcessingExceptionHandler or LogAndContinueProcessingExceptionHandler",
    ),
    "production.exception.handler": _PRODUCTION_HANDLER,
    "default.production.exception.handler": _PRODUCTION_HANDLER,
}

# Kafka's class names of its built-in handlers, as a properties file ported from a Java application
# spells them: each is kstreams' class of the same name and behaviour.
KAFKA_HANDLER_CLASSES = {
    f"org.apache.kafka.streams.errors.{name}": f"kstreams.errors.{name}"
    for name in (
        "LogAndFailExceptionHandler",
        "LogAndContinueExceptionHandler",
        "LogAndFailProcessingExceptionHandler",
        "LogAndContinueProcessingExceptionHandler",
        "DefaultProductionExceptionHandler",
    )
}


def _handler_class(name: str, spec: Any) -> type:
    """The handler class ``spec`` names for the key ``name``: a class, kstreams' class for one of
    Kafka's built-in class names, a bare name in kstreams.errors, or a dotted path. A ConfigException
    when it names no class or one that is not the key's kind of handler."""
    from kstreams import errors

    _, base_name, choices = _HANDLER_KEYS[name]
    if isinstance(spec, str):
        if spec.startswith("org.apache.kafka.") and spec not in KAFKA_HANDLER_CLASSES:
            raise ConfigException(
                f"{name}={spec!r} is a Java class, which kstreams cannot run: use {choices} (or Kafka's "
                "name of one of them), or the dotted path of your own Python handler class."
            )
        spec = KAFKA_HANDLER_CLASSES.get(spec, spec)
    handler_class = resolve_class(spec, name)
    base = getattr(errors, base_name)
    if not (isinstance(handler_class, type) and issubclass(handler_class, base)):
        raise ConfigException(f"{name}={spec!r} is not a {base_name}; use {choices}.")
    return handler_class


def _check_unknown(name: str) -> None:
    """Accept a key outside kstreams' table that goes somewhere; reject it with a reason otherwise."""
    if name.startswith((*CLIENT_PREFIXES, TOPIC_PREFIX, *SERDE_KEY_PREFIXES)):
        return
    if name in CONSUMER_KEYS or name in PRODUCER_KEYS or name in JAVA_CLIENT_KEYS:
        return
    if name.startswith(_SHARED_PREFIXES):
        return
    reason = UNSUPPORTED_KEYS.get(name)
    if reason is None:
        reason = next((r for p, r in UNSUPPORTED_PREFIXES.items() if name.startswith(p)), None)
    if reason is not None:
        raise ConfigException(
            f"Config '{name}' is a Kafka Streams setting kstreams does not support: {reason}."
        )
    known = [*_BY_NAME, *CONSUMER_KEYS, *PRODUCER_KEYS, *UNSUPPORTED_KEYS]
    guess = closest_key(name, known)
    hint = f"Did you mean '{guess}'? " if guess else ""
    raise ConfigException(
        f"Unknown config '{name}'. {hint}kstreams accepts its own keys (StreamsConfig.KEYS), client "
        f"keys with a client prefix ({', '.join(CLIENT_PREFIXES)}), topic.* keys for internal topics "
        "and schema registry keys for serdes. Settings of your own processors belong in their "
        "constructors, not in the streams config."
    )


def _check_client_keys(values: Mapping[str, Any]) -> None:
    """Client keys (prefixed, or the unprefixed names of the catalog) must be keys a librdkafka
    client takes: a ConfigException now, on either adapter, rather than on Kafka only when the
    client starts (the embedded cluster ignores most client settings)."""
    client_keys = {
        k: v
        for k, v in values.items()
        if k.startswith(CLIENT_PREFIXES) or k in CONSUMER_KEYS or k in PRODUCER_KEYS
    }
    if not client_keys:
        return
    # librdkafka (through confluent-kafka) is asked only when there is a client key to check.
    from kstreams.cluster.kafka_client_config import check_client_keys

    check_client_keys(client_keys, (*CLIENT_PREFIXES, ""))


def resolve_class(spec: Any, key: str) -> Any:
    """A class given as itself or as a dotted path ("package.module.Class")."""
    if not isinstance(spec, str):
        return spec
    module_name, _, attr = spec.rpartition(".")
    if not module_name:
        # A bare class name refers to kstreams' own errors module, like Kafka's short names.
        module_name = "kstreams.errors"
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigException(f"{key}={spec!r} names no importable class: {exc}.") from None


# Keys naming a class of the application's that the stores call: what it is (the kstreams base
# class it would subclass) and the methods it must have. Checked by the methods, so that the
# config needs no import of the layers that call them.
HOOK_KEYS: dict[str, tuple[str, tuple[str, ...]]] = {
    "rocksdb.config.setter": ("RocksDBConfigSetter", ("set_config",)),
    "dsl.store.suppliers.class": ("DslStoreSuppliers", ("key_value_store", "window_store", "session_store")),
}
# Kafka's names of its built-in DSL store suppliers, which kstreams.state resolves to its own.
KAFKA_DSL_STORE_SUPPLIERS = frozenset(
    f"org.apache.kafka.streams.state.BuiltInDslStoreSuppliers${name}"
    for name in ("InMemoryDslStoreSuppliers", "RocksDBDslStoreSuppliers")
)


def hook_class(key: str, spec: Any) -> Any:
    """The class ``spec`` names for the hook key ``key`` (a class or a dotted path), or the
    string itself for Kafka's name of a built-in DSL store suppliers set. A ConfigException when
    it names a Java class, no class, or a class without the hook's methods."""
    base, methods = HOOK_KEYS[key]
    if isinstance(spec, str):
        if spec in KAFKA_DSL_STORE_SUPPLIERS and key == "dsl.store.suppliers.class":
            return spec
        if spec.startswith("org.apache.kafka."):
            raise ConfigException(
                f"{key}={spec!r} is a Java class, which kstreams cannot run: write a kstreams.{base} "
                "subclass and give its dotted path (or the class)."
            )
        if "." not in spec:
            raise ConfigException(
                f"{key}={spec!r} is not a dotted path: give 'package.module.ClassName' or the class itself."
            )
    chosen = resolve_class(spec, key)
    missing = [m for m in methods if not callable(getattr(chosen, m, None))]
    if not isinstance(chosen, type) or missing:
        raise ConfigException(
            f"{key}={spec!r} is not a kstreams.{base}: subclass it and implement {', '.join(methods)}"
            + (f" ({', '.join(missing)} missing)." if isinstance(chosen, type) else ".")
        )
    return chosen


def _coerce(key: ConfigKey, raw: Any) -> Any:
    if raw is None:
        return None
    value = raw
    try:
        if key.type is bool and isinstance(raw, str):
            if raw.lower() not in ("true", "false"):
                raise ValueError(raw)
            value = raw.lower() == "true"
        elif key.type is int and isinstance(raw, str | float) and not isinstance(raw, bool):
            value = int(raw)
            if isinstance(raw, float) and raw != value:
                raise ValueError(raw)
    except ValueError:
        raise ConfigException(
            f"Invalid value {raw!r} for config '{key.name}': expected {_type_name(key.type)}. {key.doc}"
        ) from None
    if key.type is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigException(
            f"Invalid value {raw!r} for config '{key.name}': expected an integer. {key.doc}"
        )
    if key.type is bool and not isinstance(value, bool):
        raise ConfigException(
            f"Invalid value {raw!r} for config '{key.name}': expected true or false. {key.doc}"
        )
    if key.type is str and not isinstance(value, str):
        raise ConfigException(f"Invalid value {raw!r} for config '{key.name}': expected a string. {key.doc}")
    if key.validator is not None:
        problem = key.validator(value)
        if problem:
            raise ConfigException(f"Invalid value {raw!r} for config '{key.name}': {problem}. {key.doc}")
    return value


def _type_name(t: type | tuple[type, ...]) -> str:
    names: dict[object, str] = {int: "an integer", bool: "true or false", str: "a string"}
    return names.get(t, str(t))
