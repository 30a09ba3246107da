"""The parts a ``KafkaStreams`` client holds from its construction to its close, built here.

``build_client_parts`` is the first half of the runtime's one composition root (the second is
``StreamsRuntime``, which ``start()`` builds from these parts): the topology plan, the process id
(claimed in ``state.dir``, with its lock), the client id, the cluster, the metrics registry, the
admin client, the internal topic manager and the interactive queries' access. They exist before
``start()`` because a client in CREATED answers ``init()``, ``metrics()`` and the metadata queries.
``kstreams/client.py`` keeps only the public client: its state machine, handlers and lifecycle.

Threads: built and read by the thread that makes the client; each part documents its own locks.
"""

from __future__ import annotations

import os
import uuid
import weakref
from dataclasses import dataclass

from kstreams.cluster.port import Admin, Cluster
from kstreams.config import StreamsConfig
from kstreams.errors import ConfigException, ProcessorStateException
from kstreams.metrics import MetricsRegistry
from kstreams.runtime.internal_topics.manager import InternalTopicManager
from kstreams.runtime.queries.query_access import QueryAccess
from kstreams.state.directory import StateDirectory
from kstreams.topology.plan import TopologyPlan
from kstreams.topology.topology import Topology

__all__ = ["ClientParts", "build_client_parts"]


@dataclass
class ClientParts:
    """What one client holds for its whole life (see the module docstring).

    ``release_process_id`` gives the process id back (closes its lock file) once called or once
    the owning client is collected; None when state.dir keeps no lock."""

    plan: TopologyPlan
    process_id: uuid.UUID
    release_process_id: weakref.finalize | None  # type: ignore[type-arg]
    client_id: str
    cluster: Cluster
    metrics: MetricsRegistry
    admin: Admin
    internal_topics: InternalTopicManager
    queries: QueryAccess


def build_client_parts(
    owner: object, topology: Topology, config: StreamsConfig, cluster: Cluster | None
) -> ClientParts:
    """Build the parts of the client ``owner`` (its process id lives as long as ``owner``)."""
    plan = topology.build(config.application_id, config)
    process_id, process_lock = _claim_process_id(config)
    # The id stays this client's until it closes (or is collected, or its process dies).
    release = weakref.finalize(owner, os.close, process_lock) if process_lock is not None else None
    client_id = config.client_id(process_id)
    cluster = cluster if cluster is not None else _default_cluster(config)
    metrics = MetricsRegistry(recording_level=str(config["metrics.recording.level"]))
    admin = cluster.admin()  # one admin client for internal topics and partition counts
    if topology.has_pattern_sources:
        # Pattern sources read the topics that exist and match when the client is made; a
        # topic created later is read by clients made after it (the plan is fixed per client).
        plan = topology.build(config.application_id, config, topics=admin.describe_topics())
    internal_topics = InternalTopicManager(admin, config, plan)
    # Interactive queries across clients: application.server, the metadata channel and the
    # query endpoint (kstreams/runtime/queries/query_access.py).
    queries = QueryAccess(config, plan, cluster, admin, internal_topics, process_id, client_id)
    internal_topics.register_metrics(metrics, {"client-id": client_id})
    return ClientParts(
        plan, process_id, release, client_id, cluster, metrics, admin, internal_topics, queries
    )


def _claim_process_id(config: StreamsConfig) -> tuple[uuid.UUID, int | None]:
    """The process id kept in state.dir, with its lock (``StateDirectory.claim_process_id``).

    Raises ConfigException naming the directory and the OS error when state.dir cannot be created
    or written, so that the client fails at construction rather than in the background after
    ``start()``, when its first stateful task opens.
    """
    try:
        return StateDirectory(str(config["state.dir"]), config.application_id).claim_process_id()
    except ProcessorStateException as exc:
        raise ConfigException(f"Invalid value {config['state.dir']!r} for config 'state.dir': {exc}") from exc


def _default_cluster(config: StreamsConfig) -> Cluster:
    if config["bootstrap.servers"]:
        from kstreams.cluster import KafkaCluster

        # A request never outwaits the whole call it serves (Kafka clamps request.timeout.ms to
        # default.api.timeout.ms the same way): 30 s, or less when default.api.timeout.ms is less.
        request_timeout_s = min(30.0, int(config["default.api.timeout.ms"]) / 1000.0)
        return KafkaCluster(  # type: ignore[no-any-return]
            str(config["bootstrap.servers"]), config.cluster_configs(), timeout=request_timeout_s
        )
    from kstreams.cluster import EmbeddedCluster

    return EmbeddedCluster()  # type: ignore[no-any-return]
