"""The port to a Kafka cluster and its two adapters.

``EmbeddedCluster`` is an in-process broker (the default when no ``bootstrap.servers`` is set);
``KafkaCluster`` talks to a real cluster through confluent-kafka. It is imported on first use, so
importing this package never needs confluent-kafka.
"""

from __future__ import annotations

import importlib
from typing import Any

from kstreams.cluster.embedded import EmbeddedCluster
from kstreams.cluster.port import (
    ERROR_ASSIGNMENT,
    ERROR_INCOMPLETE_SOURCE_TOPIC_METADATA,
    ERROR_NONE,
    ERROR_SHUTDOWN_REQUESTED,
    AbortableTransactionError,
    Admin,
    Cluster,
    ClusterError,
    CommitFailedError,
    Consumer,
    ConsumerRecord,
    FatalClientError,
    GroupListener,
    GroupNotEmptyError,
    OffsetAndMetadata,
    Producer,
    ProducerFencedError,
    TopicDescription,
    TopicExistsError,
    TopicNotFoundError,
    TopicPartition,
)

__all__ = [
    "ERROR_ASSIGNMENT",
    "ERROR_INCOMPLETE_SOURCE_TOPIC_METADATA",
    "ERROR_NONE",
    "ERROR_SHUTDOWN_REQUESTED",
    "AbortableTransactionError",
    "Admin",
    "Cluster",
    "ClusterError",
    "CommitFailedError",
    "Consumer",
    "ConsumerRecord",
    "EmbeddedCluster",
    "FatalClientError",
    "GroupListener",
    "GroupNotEmptyError",
    "KafkaCluster",
    "OffsetAndMetadata",
    "Producer",
    "ProducerFencedError",
    "TopicDescription",
    "TopicExistsError",
    "TopicNotFoundError",
    "TopicPartition",
]


def __getattr__(name: str) -> Any:
    # KafkaCluster needs confluent-kafka; import it only when asked for.
    if name == "KafkaCluster":
        value = importlib.import_module("kstreams.cluster.kafka").KafkaCluster
        globals()[name] = value
        return value
    raise AttributeError(f"module 'kstreams.cluster' has no attribute {name!r}")
