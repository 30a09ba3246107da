"""QueryAccess: the parts of one client that serve interactive queries across clients.

It holds the client's ``application.server`` (``this_host``), the ``StreamsMetadataState`` that
answers the metadata queries, the ``MetadataChannel`` (started only with an application.server:
without one there is nothing to tell the other clients, as in Kafka, where such a client appears in
no metadata) and the optional ``QueryEndpoint`` (``query.http.port``). ``StreamsRuntime`` starts it
after its threads and stops it before they stop (and on a simulated crash), so the channel
never reports tasks that are being closed as if they were still served.

Without an application.server the metadata lists are empty and a key's metadata names no host but
does give its partition once the client joined the group (Kafka's behaviour).

Threads: ``start``/``stop`` on the client's lifecycle threads; everything else from any thread.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from kstreams.cluster.port import TopicPartition
from kstreams.queries import HostInfo, StoreQueryParameters
from kstreams.runtime.queries.metadata_channel import MemberMetadata, MetadataChannel, local_assignment
from kstreams.runtime.queries.query_endpoint import QueryEndpoint, StoreQueries
from kstreams.runtime.queries.store_query import local_store_instances
from kstreams.runtime.queries.streams_metadata import StreamsMetadataState

if TYPE_CHECKING:
    from kstreams.cluster.port import Admin, Cluster, Consumer
    from kstreams.config import StreamsConfig
    from kstreams.runtime.internal_topics.manager import InternalTopicManager
    from kstreams.runtime.restoration.state_updater import StateUpdater
    from kstreams.runtime.tasks.task_manager import TaskManager
    from kstreams.topology.plan import TopologyPlan

__all__ = ["QueryAccess"]

logger = logging.getLogger(__name__)


class QueryAccess:
    """See the module docstring."""

    def __init__(
        self,
        config: StreamsConfig,
        plan: TopologyPlan,
        cluster: Cluster,
        admin: Admin,
        internal_topics: InternalTopicManager,
        process_id: Any,
        client_id: str,
    ) -> None:
        self._config = config
        self._plan = plan
        self._cluster = cluster
        self._admin = admin
        self._internal_topics = internal_topics
        self._process_id = str(process_id)
        self._client_id = client_id
        self.this_host = HostInfo.parse(str(config["application.server"]))
        # The started runtime's parts that the queries read (None before start()).
        self._consumer: Consumer | None = None
        self._tasks: TaskManager | None = None
        self._state_updater: StateUpdater | None = None
        self._channel: MetadataChannel | None = None
        self._endpoint: QueryEndpoint | None = None
        self.metadata = StreamsMetadataState(plan, self.this_host, self._members, self._partition_counts)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(
        self, consumer: Consumer, tasks: TaskManager, state_updater: StateUpdater, queries: StoreQueries
    ) -> None:
        """Start the metadata channel (with an application.server) and the endpoint (with a port);
        the main consumer, the task manager and the state updater tell what this client holds."""
        self._consumer, self._tasks, self._state_updater = consumer, tasks, state_updater
        if self.this_host is not None:
            self._channel = self._new_channel(consumer, tasks, state_updater)
            self._channel.start()
        port = self._config["query.http.port"]
        if port is not None:
            self._endpoint = QueryEndpoint(
                queries,
                self.this_host,
                str(self._config["query.http.host"]),
                int(port),
                f"{self._client_id}-QueryEndpoint",
            )
            self._endpoint.start()

    def stop(self) -> None:
        """Stop the endpoint and the channel (idempotent)."""
        endpoint, self._endpoint = self._endpoint, None
        if endpoint is not None:
            endpoint.stop()
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.shutdown()

    @property
    def url(self) -> str | None:
        """The query endpoint's base URL while it serves, else None."""
        endpoint = self._endpoint
        return endpoint.url if endpoint is not None else None

    def _new_channel(
        self, consumer: Consumer, tasks: TaskManager, state_updater: StateUpdater
    ) -> MetadataChannel:
        topic = self._internal_topics.control_topic
        if topic is None:
            raise ValueError("The application has no control topic to carry its metadata.")
        self._internal_topics.ensure_control_topic()
        reader_config = dict(self._config.client_configs("restore.consumer"))
        reader_config["client.id"] = f"{self._client_id}-metadata-reader"
        producer_config = dict(self._config.client_configs("producer"))
        producer_config.pop("transactional.id", None)  # plain, acknowledged sends
        producer_config["client.id"] = f"{self._client_id}-metadata-producer"
        plan = self._plan

        def standby_partitions() -> list[TopicPartition]:
            return [
                TopicPartition(source, task.partition)
                for task in state_updater.standby_ids()
                for source in plan.subtopology(task.subtopology).source_topics
            ]

        return MetadataChannel(
            f"{self._client_id}-MetadataChannel",
            self._config.application_id,
            topic,
            self._process_id,
            self.this_host,
            self._admin,
            self._cluster.consumer(None, reader_config),
            self._cluster.producer(producer_config),
            lambda: local_assignment(
                consumer,
                lambda: [tp for entry in tasks.entries() for tp in entry.buffers],
                standby_partitions,
            ),
        )

    # -- queries --------------------------------------------------------------------------------

    def _members(self) -> list[MemberMetadata] | None:
        if self._channel is not None:
            return self._channel.members()
        consumer = self._consumer
        if self.this_host is None and consumer is not None and consumer.member_id:
            return []  # joined, but no client can be named without application.server
        return None

    def _partition_counts(self, topics: Collection[str]) -> dict[str, int]:
        return {name: d.partitions for name, d in self._admin.describe_topics(sorted(topics)).items()}

    def store_instances(self, params: StoreQueryParameters, view: Any) -> list[Any]:
        """The local instances of a store that ``params`` allows (see ``store_query``)."""
        tasks, state_updater = self._tasks, self._state_updater
        if tasks is None or state_updater is None:
            return []
        return local_store_instances(params, tasks.entries, state_updater.standby_tasks, view)
