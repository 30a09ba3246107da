"""The admin requests the reset tool needs, on both adapters (the ``cluster`` fixture): setting a
group's offsets from outside it, listing its active members, and offsets by timestamp."""

from __future__ import annotations

import time

import pytest

from kstreams.cluster.port import ClusterError, GroupNotEmptyError, TopicPartition

WAIT = 30.0
# Timestamps near now: within the topics' retention.
NOW = int(time.time() * 1000)


class NoopListener:
    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        pass

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        pass

    def on_assignment_error(self, code: int) -> None:
        pass


def test_alter_committed_offsets_sets_the_offsets_of_an_empty_group(cluster, app_id):
    topic = f"{app_id}-in"
    cluster.create_topic(topic, 2)
    for i in range(5):
        cluster.produce(topic, None, b"v", NOW + i, partition=i % 2)
    admin = cluster.admin()
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    admin.alter_committed_offsets(app_id, {tp0: 1, tp1: 2})

    assert admin.committed_offsets(app_id, [tp0, tp1]) == {tp0: 1, tp1: 2}
    admin.alter_committed_offsets(app_id, {tp0: 0})
    assert admin.committed_offsets(app_id, [tp0, tp1]) == {tp0: 0, tp1: 2}


def test_alter_committed_offsets_refuses_a_group_with_active_members(cluster, app_id):
    topic = f"{app_id}-in"
    cluster.create_topic(topic, 1)
    cluster.produce(topic, None, b"v", NOW, partition=0)
    admin = cluster.admin()
    consumer = cluster.consumer(app_id, {"auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic], NoopListener())
        deadline = time.monotonic() + WAIT
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the consumer never got its partition"
            consumer.poll(0.1)
        members = admin.group_members(app_id)
        assert members == [consumer.member_id]
        with pytest.raises(GroupNotEmptyError, match=app_id):
            admin.alter_committed_offsets(app_id, {TopicPartition(topic, 0): 0})
    finally:
        consumer.close()
    deadline = time.monotonic() + WAIT
    while admin.group_members(app_id):
        assert time.monotonic() < deadline, "the closed consumer never left the group"
        time.sleep(0.1)  # polling the broker's view of the group; no condition to wait on
    admin.alter_committed_offsets(app_id, {TopicPartition(topic, 0): 1})
    assert admin.committed_offsets(app_id, [TopicPartition(topic, 0)]) == {TopicPartition(topic, 0): 1}


def test_group_members_of_an_unknown_group_is_empty(cluster, app_id):
    assert cluster.admin().group_members(f"{app_id}-nobody") == []


def test_negative_offsets_are_refused(cluster, app_id):
    topic = f"{app_id}-in"
    cluster.create_topic(topic, 1)
    with pytest.raises(ClusterError, match="-3"):
        cluster.admin().alter_committed_offsets(app_id, {TopicPartition(topic, 0): -3})


def test_offsets_for_times_finds_the_first_record_at_or_after_a_timestamp(cluster, app_id):
    topic = f"{app_id}-in"
    cluster.create_topic(topic, 2)
    for i in range(6):
        cluster.produce(topic, None, b"v", NOW + i * 1000, partition=0)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    admin = cluster.admin()

    found = admin.offsets_for_times({tp0: NOW + 2500, tp1: NOW})

    assert found == {tp0: 3, tp1: 0}  # tp1 is empty: its end offset
    assert admin.offsets_for_times({tp0: NOW - 10_000}) == {tp0: 0}
    assert admin.offsets_for_times({tp0: NOW + 60_000}) == {tp0: 6}  # none that recent: the end
