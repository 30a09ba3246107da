"""The admin client of the embedded broker.

Every request is applied before the call returns, with a Kafka broker's validation and errors:
``TopicExistsError``, ``TopicNotFoundError``, and ``ClusterError`` for invalid requests (a partition
count that does not grow, an offset beyond the log end, ...). ``describe_topics`` never creates a
topic.

Threads: an admin may be used from any thread; each request runs under the broker lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from kstreams.cluster.embedded_broker import EmbeddedBroker
from kstreams.cluster.port import ClusterError, GroupNotEmptyError, TopicDescription, TopicPartition

__all__ = ["EmbeddedAdmin"]

logger = logging.getLogger(__name__)

_ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


class EmbeddedAdmin:
    """An ``Admin`` of an ``EmbeddedCluster``."""

    def __init__(self, broker: EmbeddedBroker) -> None:
        self._broker = broker

    def create_topics(
        self, topics: Mapping[str, tuple[int, Mapping[str, str]]], replication_factor: int = -1
    ) -> None:
        # One in-process broker: every replication factor is satisfied by its single replica.
        self._broker.faults.check("create_topics")
        with self._broker.lock:
            self._broker.check_open()
            self._broker.create_topics(topics)

    def describe_topics(self, names: Sequence[str] | None = None) -> dict[str, TopicDescription]:
        self._broker.faults.check("describe_topics")
        with self._broker.lock:
            self._broker.check_open()
            return self._broker.describe_topics(names)

    def delete_topics(self, names: Sequence[str]) -> None:
        self._broker.faults.check("delete_topics")
        with self._broker.lock:
            self._broker.check_open()
            self._broker.delete_topics(names)

    def alter_topic_config(self, name: str, config: Mapping[str, str]) -> None:
        self._broker.faults.check("alter_topic_config")
        with self._broker.lock:
            self._broker.check_open()
            self._broker.alter_topic_config(name, config)

    def create_partitions(self, counts: Mapping[str, int]) -> None:
        self._broker.faults.check("create_partitions")
        with self._broker.lock:
            self._broker.check_open()
            self._broker.create_partitions(counts)

    def list_offsets(
        self, partitions: Sequence[TopicPartition], isolation: str = "read_uncommitted"
    ) -> dict[TopicPartition, tuple[int, int]]:
        if isolation not in _ISOLATION_LEVELS:
            raise ValueError(f"list_offsets: isolation must be one of {_ISOLATION_LEVELS}, got {isolation!r}")
        self._broker.faults.check("list_offsets")
        with self._broker.lock:
            self._broker.check_open()
            return self._broker.list_offsets(partitions, isolation == "read_committed")

    def delete_records(self, before: Mapping[TopicPartition, int]) -> None:
        self._broker.faults.check("delete_records")
        with self._broker.lock:
            self._broker.check_open()
            self._broker.delete_records(before)

    def committed_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int]:
        self._broker.faults.check("committed_offsets")
        with self._broker.lock:
            self._broker.check_open()
            group = self._broker.groups.get(group_id)
            if group is None:
                return {}
            return {tp: group.offsets[tp] for tp in partitions if tp in group.offsets}

    def alter_committed_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        self._broker.faults.check("alter_committed_offsets")
        with self._broker.lock:
            self._broker.check_open()
            members = self._active_members(group_id)
            if members:
                raise GroupNotEmptyError(
                    f"Cannot set the committed offsets of group {group_id!r}: it has {len(members)} active "
                    f"member(s) ({', '.join(members)}). Stop every consumer of the group first."
                )
            # Validate the whole request before changing anything, as the broker does.
            for tp, offset in offsets.items():
                self._broker.require_log(tp)
                if offset < 0:
                    raise ClusterError(f"Cannot commit offset {offset} of {tp} for group {group_id!r}")
            self._broker.commit_offsets(group_id, offsets)
            self._broker.notify()

    def group_members(self, group_id: str) -> list[str]:
        self._broker.faults.check("group_members")
        with self._broker.lock:
            self._broker.check_open()
            return self._active_members(group_id)

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        self._broker.faults.check("offsets_for_times")
        with self._broker.lock:
            self._broker.check_open()
            return {tp: self._broker.require_log(tp).offset_for_time(ts) for tp, ts in timestamps.items()}

    def _active_members(self, group_id: str) -> list[str]:
        """The group's members once those whose session ran out are expelled (a broker expels
        them on a timer; here whoever asks does it first). Caller holds the broker lock."""
        group = self._broker.groups.get(group_id)
        if group is None:
            return []
        if group.expire(time.monotonic(), self._broker.partition_counts()):
            self._broker.notify()
        return sorted(group.members)
