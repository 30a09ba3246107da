"""KafkaCluster: the port to a real Kafka cluster, through confluent-kafka (librdkafka).

    cluster = KafkaCluster("127.0.0.1:9092", {"producer.linger.ms": 5})
    cluster.create_topic("in", partitions=2)
    cluster.produce("in", b"key", b"value")
    cluster.read("in")  # [ConsumerRecord(topic="in", partition=..., offset=0, ...)]

``config`` holds librdkafka settings for every client of the cluster; keys prefixed ``consumer.``,
``producer.`` or ``admin.`` apply only to that kind of client, and the settings given to
``consumer(group_id, config)`` and ``producer(config)`` win over both (see
``kafka_client_config``). The clients behave as the EmbeddedCluster's do, with librdkafka's
differences documented in their modules: eager rebalances with the range assignor, or an
application's assignor with cooperative hand-over (``kafka_membership``, ``kafka_assignment``),
application-wide signals on the ``<group.id>-control`` topic (``kafka_control``), group metadata
for transactional offsets (``kafka_producer``).

The cluster never asks for a topic's metadata by name to learn whether it exists: some brokers
create a topic that is asked for by name. It lists all topics instead.

A second admin client, made only when a broker answers librdkafka's ConsumerGroupDescribe with no
members for a group that has some (Tansu 0.6; see ``kafka_membership``), lists a group's members with
DescribeGroups: it does not ask for the broker's API versions (``api.version.request=false``), so
librdkafka cannot pick ConsumerGroupDescribe. Those two settings are deprecated in librdkafka 2.x;
where a librdkafka refuses them, the member says so in its warning.

Threads: the admin and the helpers may be used from any thread; each consumer and producer by one
thread at a time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import cast

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from kstreams._native.record_batch import default_partition
from kstreams.cluster.kafka_admin import KafkaAdmin
from kstreams.cluster.kafka_assignment import assignment_give_up_s
from kstreams.cluster.kafka_client_config import (
    ASSIGN_ONLY_GROUP_ID,
    CLIENT_KINDS,
    bootstrap_servers_problem,
    build_client,
    check_client_keys,
    client_settings,
)
from kstreams.cluster.kafka_consumer import KafkaConsumer
from kstreams.cluster.kafka_control import ControlChannel
from kstreams.cluster.kafka_errors import cluster_error
from kstreams.cluster.kafka_fetching import DEFAULT_HOLD_BYTES, message_partition, native_fetcher
from kstreams.cluster.kafka_membership import GroupMembers
from kstreams.cluster.kafka_producer import DeliveryFailures, KafkaProducer, native_sender
from kstreams.cluster.port import (
    ClusterError,
    ConsumerRecord,
    TopicDescription,
    TopicNotFoundError,
    TopicPartition,
)
from kstreams.errors import ConfigException

__all__ = ["KafkaCluster"]

logger = logging.getLogger(__name__)

_ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
# librdkafka spells Kafka's auto.offset.reset=none "error".
_RESET_NAMES = {"none": "error"}
# Settings only a group member needs; a consumer derived from a member's settings drops them.
_GROUP_ONLY_KEYS = (
    "group.instance.id",
    "partition.assignment.strategy",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
)
# Settings a control sender takes over from the consumer it belongs to (how to reach the cluster).
_CONNECTION_PREFIXES = ("security.", "sasl.", "ssl.", "client.id", "bootstrap.servers")
# The admin client that lists a group's members with DescribeGroups: without the broker's API
# versions librdkafka uses the 0.9.0 protocol set, which has DescribeGroups v0 and no
# ConsumerGroupDescribe. log_level 3 keeps librdkafka's errors but not its warnings that these
# settings are deprecated (the member's own warning says why they are used).
_CLASSIC_DESCRIBE = {"api.version.request": False, "broker.version.fallback": "0.9.0", "log_level": 3}
# librdkafka's default max.poll.interval.ms.
_MAX_POLL_INTERVAL_MS = 300_000


class KafkaCluster:
    """A ``Cluster`` over a Kafka cluster reached at ``bootstrap_servers``.

    ``replication_factor`` is used by ``create_topic`` (-1: the broker's default); ``timeout`` (s)
    bounds each admin request, synchronous commit and flush.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        config: Mapping[str, object] | None = None,
        *,
        replication_factor: int = -1,
        timeout: float = 30.0,
    ) -> None:
        if not bootstrap_servers:
            raise ClusterError("KafkaCluster needs bootstrap servers, e.g. KafkaCluster('127.0.0.1:9092')")
        problem = bootstrap_servers_problem(bootstrap_servers)
        if problem is not None:
            raise ConfigException(f"Invalid bootstrap servers {bootstrap_servers!r}: the value {problem}.")
        self.bootstrap_servers = bootstrap_servers
        self._config = dict(config or {})
        # Every client's keys now, not only the admin's: a consumer or producer is made later.
        check_client_keys(self._config, (*(f"{kind}." for kind in CLIENT_KINDS), ""))
        self._replication_factor = replication_factor
        self._timeout = timeout

        def new_admin_client() -> AdminClient:
            return build_client(AdminClient, self._settings("admin"), "admin client")

        self._admin = KafkaAdmin(new_admin_client(), timeout=timeout, renew=new_admin_client)
        self._members = GroupMembers()
        self._lock = threading.Lock()
        # Guarded by _lock: the helpers' producer, null-key round robin, group-only metadata.
        self._helper_producer: Producer | None = None
        self._next_null_key_partition: dict[str, int] = {}
        self._group_only_metadata_cache: dict[str, object] = {}
        self._classic_admin: KafkaAdmin | None = None  # made on first use, under _lock

    # Clients

    def admin(self) -> KafkaAdmin:
        return self._admin

    def consumer(self, group_id: str | None, config: Mapping[str, object] | None = None) -> KafkaConsumer:
        settings = self._settings("consumer", config, group_member=group_id is not None)
        settings["group.id"] = group_id if group_id is not None else ASSIGN_ONLY_GROUP_ID
        reset = str(settings.get("auto.offset.reset", "latest"))
        settings["auto.offset.reset"] = _RESET_NAMES.get(reset, reset)
        role = f"consumer of group {group_id!r}" if group_id is not None else "manually assigned consumer"
        # A consumer outside any group only ever fetches what it assigns: the compiled fetcher
        # serves it. A group member's own fetcher is chosen when it subscribes (KafkaConsumer).
        client = build_client(native_fetcher, settings, role) if group_id is None else None
        if client is None:
            client = build_client(Consumer, settings, role)
        control = None
        if group_id is not None:
            reader = {k: v for k, v in settings.items() if k not in _GROUP_ONLY_KEYS}
            # A reader whose position fell out of the log (retention) goes on from the oldest left.
            reader.update(
                {
                    "group.id": ASSIGN_ONLY_GROUP_ID,
                    "isolation.level": "read_uncommitted",
                    "auto.offset.reset": "earliest",
                }
            )
            sender = self._settings("producer")
            sender.update({k: v for k, v in settings.items() if k.startswith(_CONNECTION_PREFIXES)})
            control = ControlChannel(
                group_id, self._admin, lambda: dict(reader), lambda: dict(sender), timeout=self._timeout
            )
        return KafkaConsumer(
            client,
            self._admin,
            group_id=group_id,
            control=control,
            members=self._members,
            auto_offset_reset=reset,
            timeout=self._timeout,
            hold_bytes=int(settings.get("queued.max.messages.kbytes", DEFAULT_HOLD_BYTES // 1024)) * 1024,  # type: ignore[call-overload]
            membership=(lambda: build_client(Consumer, dict(settings), f"group membership of {group_id!r}"))
            if group_id is not None
            else None,
            fetcher=(lambda: build_client(native_fetcher, dict(settings), f"fetcher of group {group_id!r}"))
            if group_id is not None
            else None,
            classic_members=self._classic_group_members if group_id is not None else None,
            assignment_timeout_s=assignment_give_up_s(
                int(settings.get("max.poll.interval.ms", _MAX_POLL_INTERVAL_MS))  # type: ignore[call-overload]
            ),
        )

    def producer(self, config: Mapping[str, object] | None = None) -> KafkaProducer:
        settings = self._settings("producer", config)
        settings.setdefault("enable.idempotence", True)
        # Delivery reports for failures only, to one callback: a Python call per delivered record
        # cost ~0.5 us, as much as producing it.
        settings.setdefault("delivery.report.only.error", True)
        delivery = DeliveryFailures()
        settings["on_delivery"] = delivery
        transactional_id = settings.get("transactional.id")
        role = f"producer {transactional_id!r}" if transactional_id else "producer"
        client = build_client(native_sender, settings, role) or build_client(Producer, settings, role)
        return KafkaProducer(
            client,
            self._admin,
            self._members,
            self._group_only_metadata,
            delivery=delivery,
            transactional_id=str(transactional_id) if transactional_id else None,
            timeout=self._timeout,
            transaction_timeout=float(str(settings.get("transaction.timeout.ms", 60000))) / 1000.0,
        )

    # Helpers for tests and tools (the same on every adapter)

    def create_topic(self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None) -> None:
        """Create a topic; TopicExistsError if it exists."""
        self._admin.create_topics({name: (partitions, dict(config or {}))}, self._replication_factor)

    def create_partitions(self, name: str, partitions: int) -> None:
        """Grow a topic to ``partitions``; ClusterError unless that is more than it has."""
        self._admin.create_partitions({name: partitions})

    def produce(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int | None = None,
        partition: int | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> None:
        """Append one record, outside any transaction, and wait for the broker's acknowledgement.
        Without a partition, a keyed record goes where Kafka's default partitioner puts it (murmur2
        of the key), a null key round-robin. TopicNotFoundError if the topic does not exist."""
        count = self._admin.partition_counts().get(topic)
        if count is None:
            raise TopicNotFoundError(f"Cannot produce to topic {topic!r}: it does not exist; create it first")
        with self._lock:
            if partition is None:
                if key is not None:
                    partition = default_partition(key, count)
                else:
                    partition = self._next_null_key_partition.get(topic, 0) % count
                    self._next_null_key_partition[topic] = partition + 1
            if not 0 <= partition < count:
                raise ClusterError(
                    f"Cannot produce to {topic}-{partition}: topic {topic!r} has {count} partitions"
                )
            producer = self._helper()
            failures: list[str] = []

            def on_delivery(err: object, _message: object) -> None:
                if err is not None:
                    failures.append(str(err))

            try:
                producer.produce(
                    topic,
                    value,
                    key,
                    partition=partition,
                    timestamp=int(time.time() * 1000) if timestamp is None else timestamp,
                    headers=cast(list, headers),
                    on_delivery=on_delivery,
                )
            except KafkaException as exc:
                raise cluster_error(f"Producing to {topic}-{partition}", exc) from exc
            remaining = producer.flush(self._timeout)
        if failures or remaining:
            reason = failures[0] if failures else f"not acknowledged within {self._timeout}s"
            raise ClusterError(f"Producing to {topic}-{partition} failed: {reason}", retriable=not failures)

    def read(self, topic: str, isolation: str = "read_committed") -> list[ConsumerRecord]:
        """Every record of a topic visible at that isolation, in partition then offset order: each
        partition is read from its start to the end offset it had when the read began."""
        if isolation not in _ISOLATION_LEVELS:
            raise ValueError(f"read: isolation must be one of {_ISOLATION_LEVELS}, got {isolation!r}")
        count = self._admin.partition_counts().get(topic)
        if count is None:
            raise TopicNotFoundError(f"Cannot read topic {topic!r}: it does not exist")
        partitions = [TopicPartition(topic, p) for p in range(count)]
        bounds = {
            tp: se for tp, se in self._admin.list_offsets(partitions, isolation).items() if se[1] > se[0]
        }
        if not bounds:
            return []
        settings = self._settings("consumer")
        settings.update(
            {"group.id": ASSIGN_ONLY_GROUP_ID, "isolation.level": isolation, "auto.offset.reset": "earliest"}
        )
        reader = build_client(Consumer, settings, f"reader of topic {topic!r}")
        try:
            return self._read_until(reader, bounds)
        finally:
            reader.close()

    def topics(self) -> dict[str, TopicDescription]:
        return self._admin.describe_topics()

    def delete_topic(self, name: str) -> None:
        """Delete a topic; TopicNotFoundError if it does not exist."""
        self._admin.delete_topics([name])

    def close(self) -> None:
        """Flush and drop the helpers' producer. Consumers and producers handed out are closed by
        their users."""
        with self._lock:
            producer, self._helper_producer = self._helper_producer, None
        if producer is not None:
            producer.flush(self._timeout)
        logger.debug("KafkaCluster %s closed", self.bootstrap_servers)

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KafkaCluster({self.bootstrap_servers!r})"

    # Internals

    def _settings(
        self, kind: str, client_config: Mapping[str, object] | None = None, *, group_member: bool = False
    ) -> dict[str, object]:
        return client_settings(
            kind, self.bootstrap_servers, self._config, client_config, group_member=group_member
        )

    def _helper(self) -> Producer:
        if self._helper_producer is None:
            settings = self._settings("producer")
            settings.setdefault("enable.idempotence", True)
            self._helper_producer = build_client(Producer, settings, "helper producer of KafkaCluster")
        return self._helper_producer

    def _classic_group_members(self, group_id: str, timeout: float) -> list[str]:
        """The group's members by DescribeGroups (API 15), never ConsumerGroupDescribe (see the
        module docstring). ConfigException if librdkafka refuses the settings that make sure of it;
        ClusterError if the request fails."""
        with self._lock:
            admin = self._classic_admin
            if admin is None:
                settings = self._settings("admin")
                settings.update(_CLASSIC_DESCRIBE)
                client = build_client(AdminClient, settings, "DescribeGroups admin client")
                admin = self._classic_admin = KafkaAdmin(client, timeout=self._timeout)
        return admin.group_members(group_id, timeout=timeout)

    def _group_only_metadata(self, group_id: str) -> object:
        """librdkafka group metadata naming only a group (no generation, no member)."""
        with self._lock:
            cached = self._group_only_metadata_cache.get(group_id)
            if cached is not None:
                return cached
        settings = self._settings("consumer")
        settings["group.id"] = group_id
        # A consumer that never subscribes has generation -1 and no member id.
        consumer = build_client(Consumer, settings, f"group metadata of {group_id!r}")
        try:
            metadata = consumer.consumer_group_metadata()
        finally:
            consumer.close()
        with self._lock:
            self._group_only_metadata_cache[group_id] = metadata
        return metadata

    def _read_until(
        self, reader: Consumer, bounds: dict[TopicPartition, tuple[int, int]]
    ) -> list[ConsumerRecord]:
        reader.assign(
            [KafkaTopicPartition(tp.topic, tp.partition, start) for tp, (start, _) in bounds.items()]
        )
        found: dict[TopicPartition, list[ConsumerRecord]] = {tp: [] for tp in bounds}
        pending = set(bounds)
        deadline = time.monotonic() + self._timeout
        while pending:
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"Reading {sorted(pending)} did not reach the end offsets "
                    f"{ {str(tp): bounds[tp][1] for tp in pending} } within {self._timeout}s",
                    retriable=True,
                )
            try:
                messages = reader.consume(1000, 0.1)
            except KafkaException as exc:
                raise cluster_error(f"Reading {sorted(pending)}", exc) from exc
            for m in messages:
                error = m.error()
                if error is not None:
                    if error.fatal():
                        raise cluster_error(f"Reading {m.topic()}-{m.partition()}", error)
                    logger.debug("Reading %s-%s: %s", m.topic(), m.partition(), error)
                    continue
                tp = message_partition(m)
                offset = cast(int, m.offset())
                if tp in bounds and offset < bounds[tp][1]:
                    found[tp].append(
                        ConsumerRecord(
                            tp.topic,
                            tp.partition,
                            offset,
                            cast(bytes | None, m.key()),
                            cast(bytes | None, m.value()),
                            m.timestamp()[1],
                            cast(list | None, m.headers()),
                        )
                    )
            # The position (not the last record) tells when a partition is done: in read_committed
            # transaction markers and aborted records occupy offsets that are never returned.
            for position in reader.position([KafkaTopicPartition(tp.topic, tp.partition) for tp in pending]):
                tp = TopicPartition(position.topic, position.partition)
                if position.offset is not None and position.offset >= bounds[tp][1]:
                    pending.discard(tp)
        return [record for tp in sorted(found) for record in found[tp]]
