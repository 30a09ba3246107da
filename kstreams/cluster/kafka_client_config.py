"""librdkafka settings for the clients of a ``KafkaCluster``, and building those clients.

A ``KafkaCluster`` holds one settings mapping. Unprefixed keys go to every client; keys prefixed
``consumer.``, ``producer.`` or ``admin.`` go only to that kind of client, so a consumer-only key
(``heartbeat.interval.ms``) does not make librdkafka warn in every producer. Settings passed to
``cluster.consumer(group, config)`` or ``cluster.producer(config)`` are merged last and win.

Some settings are the adapter's, not the user's: consumers never auto-commit (the runtime commits),
and group members use the range assignor (co-partitioned topics land on one member; librdkafka's
cooperative-sticky assignor does not guarantee that).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from confluent_kafka import KafkaException

from kstreams.errors import ConfigException

__all__ = [
    "ASSIGN_ONLY_GROUP_ID",
    "CLIENT_KINDS",
    "build_client",
    "client_settings",
    "librdkafka_logger",
]

logger = logging.getLogger(__name__)

# librdkafka's own log lines go through Python logging under this name, not to stderr.
librdkafka_logger = logging.getLogger("kstreams.cluster.librdkafka")

CLIENT_KINDS = ("consumer", "producer", "admin")

# librdkafka refuses to create a consumer without group.id, even one that only ever uses manual
# assignment and never commits; such consumers get this id and never contact its coordinator.
ASSIGN_ONLY_GROUP_ID = "kstreams-assign-only"

# Settings the adapter decides: the runtime relies on them.
_FORCED_CONSUMER = {"enable.auto.commit": False, "enable.auto.offset.store": False}
_FORCED_GROUP_MEMBER = {"partition.assignment.strategy": "range"}

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


def _force(settings: dict[str, Any], forced: Mapping[str, object]) -> None:
    for key, value in forced.items():
        given = settings.get(key)
        if given is not None and str(given).lower() != str(value).lower():
            logger.warning(
                "Ignoring %s=%r: kstreams requires %s=%r for its consumers", key, given, key, value
            )
        settings[key] = value
