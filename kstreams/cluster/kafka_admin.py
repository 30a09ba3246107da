"""The ``Admin`` of a ``KafkaCluster``: confluent-kafka's AdminClient behind the port.

Whether a topic exists is learned only from a full metadata listing (``list_topics()`` without a
topic), never by asking for one topic by name: some Kafka-compatible brokers create a topic that a
client asks for by name. Internal topics (``__consumer_offsets``, ``__transaction_state``) are left out of
listings, as Kafka's ``listTopics`` leaves them out by default.

Threads: confluent-kafka's AdminClient is thread-safe, so an admin may be used from any thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from kstreams.cluster.kafka_errors import cluster_error, is_transient, kafka_error_of
from kstreams.cluster.port import (
    ClusterError,
    GroupNotEmptyError,
    TopicDescription,
    TopicExistsError,
    TopicNotFoundError,
    TopicPartition,
)

__all__ = ["KafkaAdmin"]

logger = logging.getLogger(__name__)

# The least time between two replacements of an admin client that stopped answering.
RENEW_INTERVAL_S = 10.0
# Errors of a request that reached no broker, or no leader: the cluster is away (or a topic has
# no leader yet, which renews the client at most once a RENEW_INTERVAL_S, harmlessly).
_UNREACHABLE = frozenset(
    {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT, KafkaError._NOENT}
)
# The first pause before asking again for partitions without a known leader (it doubles, to 1 s).
_LEADER_BACKOFF_S = 0.05

_ISOLATION = {
    "read_uncommitted": IsolationLevel.READ_UNCOMMITTED,
    "read_committed": IsolationLevel.READ_COMMITTED,
}


class KafkaAdmin:
    """An ``Admin`` over one confluent-kafka AdminClient. ``timeout`` bounds each request (s).

    An AdminClient whose broker connection went away during a broker restart can stop answering
    for good (every DescribeGroups times out, while a new client is answered at once: librdkafka
    #5511, it keeps a group coordinator it no longer connects to). So when ``renew`` is given, a
    request that gets no answer in time, or one that finds the cluster unreachable (the client
    then may be keeping such a coordinator), makes the next request go to a new client made by
    ``renew``, at most one every ``RENEW_INTERVAL_S`` so that an outage does not churn: a client
    made during an outage knows no coordinator yet and looks them up afresh once it is over."""

    def __init__(
        self, client: AdminClient, timeout: float = 30.0, renew: Callable[[], AdminClient] | None = None
    ) -> None:
        self._client = client
        self._timeout = timeout
        self._renew = renew
        self._renewed_at = time.monotonic()
        # Set (from any thread, also librdkafka's) when a request found the cluster unreachable.
        self._stale = False
        # Guards the swap of _client: requests come from the polling thread and helper callers.
        self._lock = threading.Lock()

    def _no_answer(self) -> None:
        """A request timed out: replace the client, if a new one may be made now."""
        self._replace("The admin client got no answer in time", logging.WARNING)

    def _replace(self, why: str, level: int) -> None:
        if self._renew is None:
            return
        with self._lock:
            now = time.monotonic()
            if now - self._renewed_at < RENEW_INTERVAL_S:
                return
            self._renewed_at = now
            self._stale = False
            old, self._client = self._client, self._renew()
        logger.log(level, "%s: continuing with a new admin client", why)
        # Destroying a wedged librdkafka handle can block: let the last reference go elsewhere.
        threading.Thread(target=_release, args=(old,), name="kstreams-admin-release", daemon=True).start()

    def _use(self) -> AdminClient:
        """The client for the next request: a new one after the cluster was found unreachable."""
        if self._stale:
            self._replace("The cluster was unreachable", logging.INFO)
        return self._client

    def _observe(self, exc: BaseException | None) -> None:
        """Note a failed request: one that found no broker or leader makes the client suspect."""
        code = getattr(kafka_error_of(exc), "code", lambda: None)() if exc is not None else None
        if code in _UNREACHABLE:
            self._stale = True

    def _result(self, future: Future, timeout: float) -> Any:
        """A request's answer; no answer in time is librdkafka's own timeout error (retriable), so
        the callers' handling of KafkaException covers it (and the client is renewed)."""
        try:
            return future.result(timeout)
        except FutureTimeoutError:
            self._no_answer()
            raise KafkaException(
                KafkaError(KafkaError._TIMED_OUT, f"no answer within {timeout:g}s")
            ) from None
        except KafkaException as exc:
            self._observe(exc)
            raise

    # Topics

    def create_topics(
        self, topics: Mapping[str, tuple[int, Mapping[str, str]]], replication_factor: int = -1
    ) -> None:
        if not topics:
            return
        new = [
            NewTopic(name, partitions, replication_factor, config={k: str(v) for k, v in config.items()})
            for name, (partitions, config) in topics.items()
        ]
        futures = self._use().create_topics(
            new, operation_timeout=self._timeout, request_timeout=self._timeout
        )
        existing: str | None = None
        failure: ClusterError | None = None
        created: dict[str, int] = {}
        for name, future in futures.items():
            try:
                self._result(future, self._timeout)
                created[name] = topics[name][0]
                logger.info("Created topic %s with %d partition(s)", name, topics[name][0])
            except KafkaException as exc:
                err = cluster_error(f"Creating topic {name!r}", exc)
                if isinstance(err, TopicExistsError):
                    existing = existing or name
                else:
                    failure = failure or err
        self._await_metadata(created)
        if failure is not None:
            raise failure
        if existing is not None:
            raise TopicExistsError(f"Topic {existing!r} already exists")

    def _await_metadata(self, expected: Mapping[str, int]) -> None:
        """Return once a listing shows each topic with at least its expected partitions, or warn
        when the timeout passes first. A broker answers CreateTopics and CreatePartitions once its
        controller committed them, and its metadata follows a moment later (KRaft): without this
        wait a listing just after a creation may not show the topic (Kafka Streams, too, checks
        that the topics it created are there before it goes on)."""
        self._await_listing(
            lambda counts: [name for name, n in expected.items() if counts.get(name, 0) < n],
            "Created topics are not in the cluster's metadata yet",
        )

    def _await_deleted(self, names: Sequence[str]) -> None:
        """Return once a listing no longer shows these topics, or warn when the timeout passes
        first: the broker's metadata follows a deletion a moment later too, and a topic created
        again at once (an application reset) would still exist."""
        self._await_listing(
            lambda counts: [name for name in names if name in counts], "Deleted topics are still listed"
        )

    def _await_listing(self, pending: Callable[[dict[str, int]], list[str]], late: str) -> None:
        """List the topics until ``pending`` (of the partition counts) is empty; past the timeout,
        log ``late`` with what is still pending and return."""
        deadline = time.monotonic() + self._timeout
        backoff = _LEADER_BACKOFF_S
        while left := pending(self.partition_counts()):
            if time.monotonic() > deadline:
                logger.warning("%s: %s", late, sorted(left))
                return
            time.sleep(backoff)  # a bounded backoff between listings, not a wait for a condition
            backoff = min(backoff * 2, 1.0)

    def describe_topics(self, names: Sequence[str] | None = None) -> dict[str, TopicDescription]:
        counts = self.partition_counts()
        wanted = list(counts) if names is None else [n for n in names if n in counts]
        configs = self._topic_configs(wanted)
        return {name: TopicDescription(name, counts[name], configs.get(name, {})) for name in wanted}

    def partition_counts(self) -> dict[str, int]:
        """{topic: partition count} of every non-internal topic, from one full metadata listing."""
        try:
            metadata = self._use().list_topics(timeout=self._timeout)
        except KafkaException as exc:
            if getattr(kafka_error_of(exc), "code", lambda: None)() == KafkaError._TIMED_OUT:
                self._no_answer()
            self._observe(exc)
            raise cluster_error("Listing the cluster's topics", exc) from exc
        return {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if not name.startswith("__") and topic.error is None
        }

    def _refresh_metadata(self) -> None:
        """A full metadata listing, for what it updates in librdkafka's metadata cache; a failure
        is left to the request that follows."""
        try:
            self._use().list_topics(timeout=self._timeout)
        except KafkaException as exc:
            logger.debug("Refreshing the cluster's metadata failed: %s", exc)

    def delete_topics(self, names: Sequence[str]) -> None:
        if not names:
            return
        futures = self._use().delete_topics(
            list(names), operation_timeout=self._timeout, request_timeout=self._timeout
        )
        missing: str | None = None
        failure: ClusterError | None = None
        deleted: list[str] = []
        for name, future in futures.items():
            try:
                self._result(future, self._timeout)
                deleted.append(name)
                logger.info("Deleted topic %s", name)
            except KafkaException as exc:
                err = cluster_error(f"Deleting topic {name!r}", exc)
                if isinstance(err, TopicNotFoundError):
                    missing = missing or name
                else:
                    failure = failure or err
        self._await_deleted(deleted)
        if failure is not None:
            raise failure
        if missing is not None:
            raise TopicNotFoundError(f"Cannot delete topic {missing!r}: it does not exist")

    def alter_topic_config(self, name: str, config: Mapping[str, str]) -> None:
        """Set the given configs of a topic (a None value restores the default), leaving the others."""
        if not config:
            return
        self._require_topics([name])
        entries = [
            ConfigEntry(
                key,
                None if value is None else str(value),
                incremental_operation=AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET,
            )
            for key, value in config.items()
        ]
        resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=entries)
        futures = self._use().incremental_alter_configs([resource], request_timeout=self._timeout)
        self._wait_all(futures, f"Altering the configs {dict(config)} of topic {name!r}")

    def create_partitions(self, counts: Mapping[str, int]) -> None:
        if not counts:
            return
        current = self._require_topics(list(counts))
        for name, count in counts.items():
            if count <= current[name]:
                raise ClusterError(
                    f"Cannot set the partition count of topic {name!r} to {count}: it has {current[name]} "
                    "and partitions can only be added"
                )
        futures = self._use().create_partitions(
            [NewPartitions(name, count) for name, count in counts.items()],
            operation_timeout=self._timeout,
            request_timeout=self._timeout,
        )
        self._wait_all(futures, f"Growing topics to {dict(counts)} partitions")
        for name, count in counts.items():
            logger.info("Topic %s grows from %d to %d partitions", name, current[name], count)
        self._await_metadata(dict(counts))

    # Offsets

    def list_offsets(
        self, partitions: Sequence[TopicPartition], isolation: str = "read_uncommitted"
    ) -> dict[TopicPartition, tuple[int, int]]:
        if isolation not in _ISOLATION:
            raise ValueError(f"list_offsets: isolation must be one of {tuple(_ISOLATION)}, got {isolation!r}")
        if not partitions:
            return {}
        level = _ISOLATION[isolation]
        starts = self._list(partitions, OffsetSpec.earliest(), level)
        ends = self._list(partitions, OffsetSpec.latest(), level)
        return {tp: (starts[tp], ends[tp]) for tp in partitions}

    def end_offset_later(self, partition: TopicPartition) -> Future:
        """Ask for the end offset of one partition without waiting: a future of the
        ListOffsets result, whose ``.offset`` is the end (read_uncommitted)."""
        level = _ISOLATION["read_uncommitted"]
        future = next(iter(self._offset_futures([partition], OffsetSpec.latest(), level).values()))
        future.add_done_callback(lambda done: self._observe(done.exception()))
        return future

    def delete_records(self, before: Mapping[TopicPartition, int]) -> None:
        """Advance log start offsets; -1 means "up to the end", as in Kafka's DeleteRecords."""
        if not before:
            return
        request = [KafkaTopicPartition(tp.topic, tp.partition, offset) for tp, offset in before.items()]
        futures = self._use().delete_records(
            request, request_timeout=self._timeout, operation_timeout=self._timeout
        )
        self._wait_all(futures, f"Deleting records before {_offsets_text(before)}")

    def committed_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int]:
        if not partitions:
            return {}
        request = ConsumerGroupTopicPartitions(
            group_id, [KafkaTopicPartition(tp.topic, tp.partition) for tp in partitions]
        )
        deadline = time.monotonic() + self._timeout
        backoff = _LEADER_BACKOFF_S
        while True:
            # Stable offsets (KIP-447's requireStable): an offset a committed transaction wrote is
            # returned once its markers are written, never the offset before it (a transaction's
            # commit returns before its markers are). Until then the broker answers
            # UNSTABLE_OFFSET_COMMIT, and a coordinator still loading answers
            # COORDINATOR_LOAD_IN_PROGRESS: both pass, so both are retried, as Kafka's clients do.
            futures = self._use().list_consumer_group_offsets(
                [request], require_stable=True, request_timeout=self._timeout
            )
            try:
                result = self._result(futures[group_id], self._timeout)
            except KafkaException as exc:
                err = kafka_error_of(exc)
                if err is not None and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
                    return {}
                if err is None or not is_transient(err) or time.monotonic() > deadline:
                    raise cluster_error(f"Fetching the committed offsets of group {group_id!r}", exc) from exc
            else:
                unstable = [
                    p for p in result.topic_partitions
                    if p.error is not None and p.error.code() == KafkaError.UNSTABLE_OFFSET_COMMIT
                ]  # fmt: skip
                if not unstable or time.monotonic() > deadline:
                    # Partitions without a committed offset come back with a negative (logical) offset.
                    return {
                        TopicPartition(p.topic, p.partition): p.offset
                        for p in result.topic_partitions
                        if p.offset >= 0 and p.error is None
                    }
            time.sleep(backoff)  # a bounded backoff between requests, not a wait for a condition
            backoff = min(backoff * 2, 0.5)

    def alter_committed_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        members = self.group_members(group_id)
        if members:
            raise GroupNotEmptyError(
                f"Cannot set the committed offsets of group {group_id!r}: it has {len(members)} active "
                f"member(s) ({', '.join(members)}). Stop every consumer of the group first."
            )
        if not offsets:
            return
        for tp, offset in offsets.items():
            if offset < 0:
                raise ClusterError(f"Cannot commit offset {offset} of {tp} for group {group_id!r}")
        request = ConsumerGroupTopicPartitions(
            group_id, [KafkaTopicPartition(tp.topic, tp.partition, offset) for tp, offset in offsets.items()]
        )
        futures = self._use().alter_consumer_group_offsets([request], request_timeout=self._timeout)
        try:
            result = self._result(futures[group_id], self._timeout)
        except KafkaException as exc:
            err = kafka_error_of(exc)
            # A broker refuses offsets from outside a group that has members with UNKNOWN_MEMBER_ID.
            if err is not None and err.code() == KafkaError.UNKNOWN_MEMBER_ID:
                raise GroupNotEmptyError(
                    f"Cannot set the committed offsets of group {group_id!r}: a member joined it meanwhile. "
                    "Stop every consumer of the group first."
                ) from exc
            raise cluster_error(f"Setting the committed offsets of group {group_id!r}", exc) from exc
        for p in result.topic_partitions:
            if p.error is not None:
                raise cluster_error(
                    f"Setting the committed offset of {p.topic}-{p.partition} for group {group_id!r}",
                    p.error,
                )
        logger.info("Set the committed offsets of group %s: %s", group_id, _offsets_text(offsets))

    def group_members(self, group_id: str, timeout: float | None = None) -> list[str]:
        return sorted(self.group_assignment(group_id, timeout))

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        if not timestamps:
            return {}
        level = _ISOLATION["read_uncommitted"]
        request = {
            KafkaTopicPartition(tp.topic, tp.partition): OffsetSpec.for_timestamp(ts)
            for tp, ts in timestamps.items()
        }
        futures = self._use().list_offsets(request, isolation_level=level, request_timeout=self._timeout)
        result: dict[TopicPartition, int] = {}
        missing: list[TopicPartition] = []
        for ktp, future in futures.items():
            tp = TopicPartition(ktp.topic, ktp.partition)
            try:
                offset = self._result(future, self._timeout).offset
            except KafkaException as exc:
                what = f"Looking up the offset of {tp} at timestamp {timestamps[tp]}"
                raise cluster_error(what, exc) from exc
            # No record that recent: the broker answers -1; the tools then take the end offset.
            if offset is None or offset < 0:
                missing.append(tp)
            else:
                result[tp] = offset
        if missing:
            result.update(self._list(missing, OffsetSpec.latest(), level))
        return result

    def group_assignment(
        self, group_id: str, timeout: float | None = None
    ) -> dict[str, list[TopicPartition]]:
        """{member id: partitions} of the group's current generation, as the group coordinator
        holds it (members of a rebalance in progress have none yet); {} for an unknown group.
        ``timeout`` bounds the wait (default: the admin's)."""
        wait = self._timeout if timeout is None else timeout
        futures = self._use().describe_consumer_groups([group_id], request_timeout=wait)
        try:
            description = self._result(futures[group_id], wait)
        except KafkaException as exc:
            err = kafka_error_of(exc)
            if err is not None and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
                return {}
            raise cluster_error(f"Describing group {group_id!r}", exc) from exc
        result: dict[str, list[TopicPartition]] = {}
        for member in description.members:
            assigned = member.assignment.topic_partitions if member.assignment is not None else []
            result[member.member_id] = sorted(TopicPartition(p.topic, p.partition) for p in assigned)
        return result

    # Internals

    def _offset_futures(
        self, partitions: Sequence[TopicPartition], spec: OffsetSpec, level: IsolationLevel
    ) -> dict[KafkaTopicPartition, Future]:
        request = {KafkaTopicPartition(tp.topic, tp.partition): spec for tp in partitions}
        return self._use().list_offsets(  # type: ignore[no-any-return]
            request, isolation_level=level, request_timeout=self._timeout
        )

    def _list(
        self, partitions: Sequence[TopicPartition], spec: OffsetSpec, level: IsolationLevel
    ) -> dict[TopicPartition, int]:
        """Offsets of ``partitions``. Partitions whose leader is not known yet are asked again
        within the admin's timeout, as Kafka's Admin retries until default.api.timeout.ms: a
        topic created a moment ago has no leader in librdkafka's metadata ("No leaders found").
        Before each retry a full listing refreshes that metadata: librdkafka remembers a topic it
        was asked about before it existed as missing, for minutes, until its metadata is
        refreshed (seen on Apache Kafka: a member listing the control topic another member was
        creating waited past any timeout)."""
        result: dict[TopicPartition, int] = {}
        deadline = time.monotonic() + self._timeout
        backoff = _LEADER_BACKOFF_S
        pending = list(partitions)
        while pending:
            waiting: list[TopicPartition] = []
            for ktp, future in self._offset_futures(pending, spec, level).items():
                tp = TopicPartition(ktp.topic, ktp.partition)
                try:
                    result[tp] = self._result(future, self._timeout).offset
                except KafkaException as exc:
                    error = cluster_error(f"Listing the offsets of {tp}", exc)
                    code = getattr(kafka_error_of(exc), "code", lambda: None)()
                    if not (error.retriable or code == KafkaError._NOENT) or time.monotonic() > deadline:
                        raise error from exc
                    waiting.append(tp)
            if waiting:
                time.sleep(backoff)  # a bounded backoff between requests, not a wait for a condition
                backoff = min(backoff * 2, 1.0)
                self._refresh_metadata()
            pending = waiting
        return result

    def _topic_configs(self, names: Sequence[str]) -> dict[str, dict[str, str]]:
        """The configs set on each topic itself (not broker or built-in defaults)."""
        if not names:
            return {}
        resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in names]
        futures = self._use().describe_configs(resources, request_timeout=self._timeout)
        result: dict[str, dict[str, str]] = {}
        for resource, future in futures.items():
            try:
                entries = self._result(future, self._timeout)
            except KafkaException as exc:
                err = cluster_error(f"Describing the configs of topic {resource.name!r}", exc)
                if isinstance(err, TopicNotFoundError):
                    # Deleted between the listing and this request.
                    continue
                raise err from exc
            result[resource.name] = {
                name: entry.value
                for name, entry in entries.items()
                if _set_on_topic(entry) and entry.value is not None
            }
        return result

    def _require_topics(self, names: Sequence[str]) -> dict[str, int]:
        counts = self.partition_counts()
        for name in names:
            if name not in counts:
                raise TopicNotFoundError(f"Topic {name!r} does not exist: create it first")
        return {name: counts[name] for name in names}

    def _wait_all(self, futures: Mapping[Any, Future], what: str) -> None:
        for key, future in futures.items():
            try:
                self._result(future, self._timeout)
            except KafkaException as exc:
                raise cluster_error(f"{what} ({key})", exc) from exc


def _release(client: AdminClient) -> None:
    """Runs on a thread of its own, which drops the last reference to a replaced client."""


def _set_on_topic(entry: ConfigEntry) -> bool:
    # Brokers that report sources mark a topic's own settings DYNAMIC_TOPIC_CONFIG; is_default
    # alone would also show broker-wide settings, which the embedded cluster does not report.
    source = entry.source
    if source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value or source == ConfigSource.DYNAMIC_TOPIC_CONFIG:
        return True
    if source in (ConfigSource.UNKNOWN_CONFIG.value, ConfigSource.UNKNOWN_CONFIG):
        return not entry.is_default
    return False


def _offsets_text(offsets: Mapping[TopicPartition, int]) -> str:
    return ", ".join(f"{tp}@{offset}" for tp, offset in offsets.items())
