"""Serdes for Confluent Schema Registry payloads: Avro, JSON Schema and Protobuf.

Each serde wraps confluent-kafka's registry serializer and deserializer for one kind of payload, so
the bytes are Confluent's wire format (a magic byte, the schema id, then the payload) and
interoperate with Kafka Streams' ``GenericAvroSerde``, ``KafkaJsonSchemaSerde`` and
``KafkaProtobufSerde``. Subjects follow the registry's topic naming (``<topic>-key`` /
``<topic>-value``); a serde is a key serde when built with ``is_key=True`` or configured as the
application's ``default.key.serde``.

The registry is given as a client, a URL, or a client config (``{"url": ..., "basic.auth.user.info":
...}``); when it is not given, the serde takes ``schema.registry.url`` (and the registry's other
keys) from the application's config when it is configured as a default serde, as in Kafka Streams.
A ``mock://<scope>`` URL gives confluent-kafka's in-memory mock registry, shared by every serde of
this process that names the same scope (for tests, like Kafka's ``MockSchemaRegistry``).

Install with ``pip install 'kstreams[schema-registry]'``; ``import kstreams`` never imports the
registry client. The compiled batch path does not read these payloads: records with registry
serdes run through the per-record path (the schema id prefix and binary encodings are not the
built-in serdes' bytes the kernels read).
"""

from __future__ import annotations

import abc
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kstreams.errors import ConfigException, SerializationException
from kstreams.serdes.serde import Serde

__all__ = ["AvroSerde", "JsonSchemaSerde", "ProtobufSerde", "SchemaRegistrySerde", "registry_client"]

logger = logging.getLogger(__name__)

# Keys of the application config that belong to the registry client (Kafka's spelling).
_REGISTRY_PREFIXES = ("schema.registry.", "basic.auth.", "bearer.auth.")

_clients: dict[tuple[tuple[str, str], ...], Any] = {}
_clients_lock = threading.Lock()


def _sr() -> Any:
    try:
        import confluent_kafka.schema_registry as sr
    except ImportError as exc:
        raise ConfigException(
            f"Schema registry serdes need confluent-kafka's registry extras ({exc}): "
            "pip install 'kstreams[schema-registry]'."
        ) from None
    return sr


def registry_client(registry: Any) -> Any:
    """A registry client from a client (returned as is), a URL or a client config. Clients made
    here are shared per config, so a serializer and a deserializer of one ``mock://`` scope see
    the same schemas."""
    if registry is None:
        raise ConfigException(
            "A schema registry serde needs a registry: pass registry='http://host:8081' (or a client "
            "config dict, or a SchemaRegistryClient), or set schema.registry.url in the application "
            "config and use the serde as default.key.serde / default.value.serde."
        )
    if isinstance(registry, str):
        registry = {"url": registry}
    if not isinstance(registry, Mapping):
        return registry
    conf = {str(k): str(v) for k, v in registry.items()}
    if "url" not in conf:
        raise ConfigException(f"A schema registry client config needs a 'url', got keys {sorted(conf)}.")
    key = tuple(sorted(conf.items()))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = _sr().SchemaRegistryClient.new_client(dict(conf))
    return client


def _registry_from_app_config(configs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The registry client config in an application config (Kafka's schema.registry.url and
    basic.auth.* keys), or None when it names no registry."""
    url = configs.get("schema.registry.url")
    if not url:
        return None
    conf: dict[str, Any] = {"url": url}
    for name, value in configs.items():
        if name.startswith(_REGISTRY_PREFIXES) and name != "schema.registry.url":
            conf[name.removeprefix("schema.registry.")] = value
    return conf


class SchemaRegistrySerde(Serde):
    """A serde of registry payloads: ``_make_serializer``/``_make_deserializer`` build confluent-kafka's
    pair once the registry is known; None stays None (a tombstone), as in Kafka's serdes."""

    name = "schema-registry"

    def __init__(self, registry: Any = None, *, is_key: bool = False, conf: Mapping[str, Any] | None = None):
        self._registry = registry
        self.is_key = is_key
        self._conf = dict(conf or {})
        self._serializer: Callable[[Any, Any], bytes | None] | None = None
        self._deserializer: Callable[[bytes, Any], Any] | None = None
        self._lock = threading.Lock()

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        """As a default serde: the key/value role, and the registry from ``schema.registry.url``
        unless the serde was given one."""
        with self._lock:
            self.is_key = is_key
            if self._registry is None:
                self._registry = _registry_from_app_config(configs)
            self._serializer = self._deserializer = None

    def _context(self, topic: str | None) -> Any:
        sr = _sr()
        field = sr.MessageField.KEY if self.is_key else sr.MessageField.VALUE
        return sr.SerializationContext(topic or "", field)

    def _pair(self) -> tuple[Callable[[Any, Any], bytes | None], Callable[[bytes, Any], Any]]:
        serializer, deserializer = self._serializer, self._deserializer
        if serializer is None or deserializer is None:
            with self._lock:
                if self._serializer is None or self._deserializer is None:
                    client = registry_client(self._registry)
                    self._serializer = self._make_serializer(client)
                    self._deserializer = self._make_deserializer(client)
                serializer, deserializer = self._serializer, self._deserializer
        return serializer, deserializer  # type: ignore[return-value]

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        serializer, _ = self._pair()
        try:
            return serializer(data, self._context(topic))
        except ConfigException:
            raise
        except Exception as exc:
            raise SerializationException(
                f"{type(self).__name__} could not serialize a {'key' if self.is_key else 'value'} for "
                f"topic {topic}: {exc}. Check that the data matches the serde's schema."
            ) from exc

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        _, deserializer = self._pair()
        try:
            return deserializer(data, self._context(topic))
        except Exception as exc:
            raise SerializationException(
                f"{type(self).__name__} could not deserialize {len(data)} bytes of a "
                f"{'key' if self.is_key else 'value'} from topic {topic}: {exc}. The bytes must be in "
                "Confluent's wire format (magic byte 0, schema id, payload) of a schema the registry holds."
            ) from exc

    @abc.abstractmethod
    def _make_serializer(self, client: Any) -> Callable[[Any, Any], bytes | None]:
        """confluent-kafka's serializer of this payload kind, on ``client``."""

    @abc.abstractmethod
    def _make_deserializer(self, client: Any) -> Callable[[bytes, Any], Any]:
        """confluent-kafka's deserializer of this payload kind, on ``client``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(is_key={self.is_key})"


class AvroSerde(SchemaRegistrySerde):
    """Avro records as dicts (Kafka's ``GenericAvroSerde``). ``schema`` (Avro JSON) is the writer
    schema; without it, serializing needs ``conf={"use.latest.version": True}`` (the subject's
    latest schema). Deserializing uses the writer's schema from the registry, or ``schema`` as
    the reader schema when given."""

    name = "avro"

    def __init__(
        self,
        schema: str | None = None,
        registry: Any = None,
        *,
        is_key: bool = False,
        conf: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(registry, is_key=is_key, conf=conf)
        self.schema = schema

    def _make_serializer(self, client: Any) -> Callable[[Any, Any], bytes | None]:
        from confluent_kafka.schema_registry.avro import AvroSerializer

        if self.schema is None and not self._conf.get("use.latest.version"):

            def refuse(data: Any, ctx: Any) -> bytes | None:
                raise ConfigException(
                    "AvroSerde needs a schema to serialize: AvroSerde(schema=...), or "
                    "conf={'use.latest.version': True} to use the subject's latest registered schema."
                )

            return refuse
        conf = {"auto.register.schemas": self.schema is not None, **self._conf}
        return AvroSerializer(client, self.schema, conf=conf)  # type: ignore[no-any-return]

    def _make_deserializer(self, client: Any) -> Callable[[bytes, Any], Any]:
        from confluent_kafka.schema_registry.avro import AvroDeserializer

        return AvroDeserializer(client, self.schema)  # type: ignore[no-any-return]


class JsonSchemaSerde(SchemaRegistrySerde):
    """JSON documents validated against a JSON Schema (Kafka's ``KafkaJsonSchemaSerde``)."""

    name = "json-schema"

    def __init__(
        self,
        schema: str,
        registry: Any = None,
        *,
        is_key: bool = False,
        conf: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(registry, is_key=is_key, conf=conf)
        self.schema = schema

    def _make_serializer(self, client: Any) -> Callable[[Any, Any], bytes | None]:
        from confluent_kafka.schema_registry.json_schema import JSONSerializer

        return JSONSerializer(self.schema, client, conf=self._conf or None)  # type: ignore[no-any-return]

    def _make_deserializer(self, client: Any) -> Callable[[bytes, Any], Any]:
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer

        return JSONDeserializer(self.schema, schema_registry_client=client)  # type: ignore[no-any-return]


class ProtobufSerde(SchemaRegistrySerde):
    """Protobuf messages of one generated message class (Kafka's ``KafkaProtobufSerde``)."""

    name = "protobuf"

    def __init__(
        self,
        message_type: type,
        registry: Any = None,
        *,
        is_key: bool = False,
        conf: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(registry, is_key=is_key, conf=conf)
        self.message_type = message_type

    def _make_serializer(self, client: Any) -> Callable[[Any, Any], bytes | None]:
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

        # use.deprecated.format=False is the current wire format (message indexes as varints).
        conf = {"use.deprecated.format": False, **self._conf}
        return ProtobufSerializer(self.message_type, client, conf=conf)  # type: ignore[no-any-return]

    def _make_deserializer(self, client: Any) -> Callable[[bytes, Any], Any]:
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

        return ProtobufDeserializer(  # type: ignore[no-any-return]
            self.message_type, {"use.deprecated.format": False}, schema_registry_client=client
        )
