"""The configuration keys kstreams knows besides its own table (``config.py``), and what each does.

Every key an application passes is one of: a kstreams key (``config.py``'s table); a client key
that passes through to the Kafka clients, prefixed (``main.consumer.``, ``producer.``, ...) or, for
the names below, unprefixed as Kafka Streams allows; a ``topic.`` key for internal topics; a serde
setting (the schema registry's keys); or a Kafka Streams key kstreams does not support, which is
rejected with the reason and what to use instead. Anything else is a typo until proven otherwise:
``StreamsConfig`` rejects it and names the closest known key.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "CLIENT_PREFIXES",
    "CONSUMER_KEYS",
    "JAVA_CLIENT_KEYS",
    "PRODUCER_KEYS",
    "SERDE_KEY_PREFIXES",
    "TOPIC_PREFIX",
    "UNSUPPORTED_KEYS",
    "UNSUPPORTED_PREFIXES",
    "closest_key",
]

CLIENT_PREFIXES = (
    "main.consumer.",
    "restore.consumer.",
    "global.consumer.",
    "consumer.",
    "producer.",
    "admin.",
)
TOPIC_PREFIX = "topic."

# Settings the serdes read (Kafka Streams hands every key to Serde.configure): the schema
# registry's client and serializer settings.
SERDE_KEY_PREFIXES = (
    "schema.registry.",
    "basic.auth.",
    "bearer.auth.",
    "auto.register.schemas",
    "use.latest.version",
    "use.schema.id",
    "normalize.schemas",
    "latest.compatibility.strict",
    "key.subject.name.strategy",
    "value.subject.name.strategy",
    "specific.avro.reader",
    "avro.",
    "json.",
    "protobuf.",
)

# Unprefixed client keys that pass through (the Java clients' names that librdkafka shares).
_COMMON_CLIENT_KEYS = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "sasl.oauthbearer.config",
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
        "request.timeout.ms",
        "socket.timeout.ms",
        "socket.keepalive.enable",
        "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "connections.max.idle.ms",
        "client.rack",
        "client.dns.lookup",
        "statistics.interval.ms",
        "debug",
        # librdkafka's other global settings (its CONFIGURATION.md), passed as they are.
        "message.max.bytes",
        "message.copy.max.bytes",
        "receive.message.max.bytes",
        "max.in.flight",
        "topic.metadata.refresh.fast.interval.ms",
        "topic.metadata.refresh.sparse",
        "topic.metadata.propagation.max.ms",
        "socket.nagle.disable",
        "socket.max.fails",
        "socket.connection.setup.timeout.ms",
        "broker.address.ttl",
        "broker.address.family",
        "log_level",
        "log.connection.close",
        "log.thread.name",
        "enable.random.seed",
        "api.version.request",
        "api.version.request.timeout.ms",
        "api.version.fallback.ms",
        "broker.version.fallback",
        "allow.auto.create.topics",
        "retry.backoff.max.ms",
        "client.software.name",
        "client.software.version",
        "plugin.library.paths",
        "metadata.recovery.strategy",
    }
)
CONSUMER_KEYS = _COMMON_CLIENT_KEYS | frozenset(
    {
        "fetch.min.bytes",
        "fetch.max.bytes",
        "fetch.wait.max.ms",
        "max.partition.fetch.bytes",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "isolation.level",
        "group.instance.id",
        "check.crcs",
        "queued.min.messages",
        "queued.max.messages.kbytes",
        "fetch.message.max.bytes",
        "fetch.queue.backoff.ms",
        "fetch.error.backoff.ms",
        "coordinator.query.interval.ms",
        "enable.partition.eof",
        "auto.commit.interval.ms",
    }
)
PRODUCER_KEYS = _COMMON_CLIENT_KEYS | frozenset(
    {
        "acks",
        "linger.ms",
        "batch.size",
        "batch.num.messages",
        "compression.type",
        "compression.codec",
        "enable.idempotence",
        "retries",
        "delivery.timeout.ms",
        "transaction.timeout.ms",
        "queue.buffering.max.messages",
        "queue.buffering.max.kbytes",
        "queue.buffering.max.ms",
        "message.max.bytes",
        "max.in.flight.requests.per.connection",
        "message.timeout.ms",
        "message.send.max.retries",
        "request.required.acks",
        "compression.level",
        "queue.buffering.backpressure.threshold",
        "sticky.partitioning.linger.ms",
        "partitioner",
        "enable.gapless.guarantee",
    }
)

_ASSIGNMENT = (
    "kstreams has one task assignor (Kafka's high-availability assignor: state-aware, with warm-up "
    "replicas and probing rebalances) and no rack awareness"
)
_METRICS = (
    "kstreams keeps its metrics in the client (metrics(), metrics_prometheus()); it has no metric "
    "reporters or sampling windows"
)

# Kafka Streams keys kstreams does not implement: setting one is an error naming the reason, so an
# application never believes it has a behaviour it does not get.
UNSUPPORTED_KEYS: dict[str, str] = {
    "task.assignor.class": _ASSIGNMENT,
    "rack.aware.assignment.strategy": _ASSIGNMENT,
    "rack.aware.assignment.tags": _ASSIGNMENT,
    "rack.aware.assignment.traffic_cost": _ASSIGNMENT,
    "rack.aware.assignment.non_overlap_cost": _ASSIGNMENT,
    "group.protocol": "kstreams uses the classic consumer group protocol",
    "metric.reporters": _METRICS,
    "metrics.num.samples": _METRICS,
    "metrics.sample.window.ms": _METRICS,
    "built.in.metrics.version": _METRICS,
    "enable.metrics.push": _METRICS,
    "default.timestamp.extractor": (
        "set a timestamp extractor per source with Consumed.with_timestamp_extractor(...)"
    ),
    "default.client.supplier": "kstreams creates its clients through the cluster adapter you pass",
    "upgrade.from": "kstreams has no rolling upgrade between releases: CHANGELOG.md says which need a reset",
    "topology.optimization": (
        "kstreams builds the topology as written (Kafka's 'none'); it does not merge repartition "
        "topics or reuse source topics as changelogs"
    ),
    "log.summary.interval.ms": "kstreams logs lifecycle events as they happen, with no periodic summary",
    "input.buffer.max.bytes": "bound the input buffers with buffered.records.per.partition",
    "window.size.ms": "pass the window size to WindowedSerdes' constructors",
    "windowed.inner.class.serde": "pass the inner serde to WindowedSerdes' constructors",
    "default.windowed.key.serde.inner": "pass the inner serde to WindowedSerdes' constructors",
    "default.windowed.value.serde.inner": "pass the inner serde to WindowedSerdes' constructors",
    "default.list.key.serde.inner": "give list serdes their inner serde in code",
    "default.list.key.serde.type": "give list serdes their inner serde in code",
    "default.list.value.serde.inner": "give list serdes their inner serde in code",
    "default.list.value.serde.type": "give list serdes their inner serde in code",
    "enable.auto.commit": "the runtime commits offsets itself, with its tasks' state",
    "group.id": "application.id is the consumer group id",
    "transactional.id": "processing.guarantee=exactly_once_v2 makes the transactional producer",
    "partition.assignment.strategy": "kstreams assigns partitions to tasks itself",
    "auto.include.jmx.reporter": _METRICS,
    "ensure.explicit.internal.resource.naming": (
        "kstreams names internal topics and stores as Kafka does, and does not check that you named them"
    ),
}

# Kafka Streams' client settings under the Java clients' names, and librdkafka's names for them.
JAVA_CLIENT_KEYS = {
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
}
UNSUPPORTED_PREFIXES: dict[str, str] = {"client.tag.": _ASSIGNMENT}


def closest_key(name: str, known: Iterable[str]) -> str | None:
    """The known key most like ``name`` (a typo's intended key), or None when none is close."""
    matches = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return matches[0] if matches else None
