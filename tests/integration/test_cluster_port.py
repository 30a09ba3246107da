"""The cluster port's contract, written once and run on both adapters (the ``cluster`` fixture):
the EmbeddedCluster, and a KafkaCluster on Apache Kafka."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import pytest

from kstreams._native.record_batch import RecordBatch, default_partition
from kstreams.cluster.port import (
    ERROR_SHUTDOWN_REQUESTED,
    Admin,
    Cluster,
    ClusterError,
    CommitFailedError,
    Consumer,
    OffsetAndMetadata,
    Producer,
    ProducerFencedError,
    TopicExistsError,
    TopicNotFoundError,
    TopicPartition,
)

# Group joins and rebalances on a real broker take up to a few seconds.
WAIT = 30.0
# Record timestamps near now: within the topics' retention.ms (7 days by default).
NOW = int(time.time() * 1000)


class RecordingListener:
    """A GroupListener that records every callback in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []
        self.owned: set[TopicPartition] = set()

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.events.append(("revoked", sorted(partitions)))
        self.owned.difference_update(partitions)

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.events.append(("assigned", sorted(partitions)))
        self.owned.update(partitions)

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self.events.append(("lost", sorted(partitions)))
        self.owned.difference_update(partitions)

    def on_assignment_error(self, code: int) -> None:
        self.events.append(("error", code))

    def error_codes(self) -> list[object]:
        return [arg for kind, arg in self.events if kind == "error"]


def poll_until(
    consumers: Sequence[Consumer],
    done: Callable[[], bool],
    timeout: float = WAIT,
    what: str = "condition",
    kept: Consumer | None = None,
) -> dict[TopicPartition, list[tuple]]:
    """Poll every consumer (which runs their callbacks) until ``done()``; return what was fetched
    (by ``kept`` alone, if given)."""
    fetched: dict[TopicPartition, list[tuple]] = {}
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s")
        for consumer in consumers:
            for tp, batch in consumer.poll(0.05):
                assert isinstance(batch, RecordBatch)
                if kept is None or consumer is kept:
                    fetched.setdefault(tp, []).extend(batch.to_list())
    return fetched


def partitions(topic: str, count: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(count)]


def test_the_cluster_and_its_clients_implement_the_port(cluster):
    assert isinstance(cluster, Cluster)
    assert isinstance(cluster.admin(), Admin)
    consumer, producer = cluster.consumer(None), cluster.producer()
    try:
        assert isinstance(consumer, Consumer)
        assert isinstance(producer, Producer)
    finally:
        consumer.close()
        producer.close()


# Topics


def test_create_describe_and_delete_topics(cluster, app_id):
    name = f"{app_id}-topic"
    cluster.create_topic(name, partitions=3, config={"cleanup.policy": "compact"})

    described = cluster.topics()[name]
    assert described.partitions == 3
    assert described.config.get("cleanup.policy") == "compact"
    admin = cluster.admin()
    assert set(admin.describe_topics([name, f"{app_id}-missing"])) == {name}
    # Describing a missing topic never creates it.
    assert f"{app_id}-missing" not in cluster.topics()

    with pytest.raises(TopicExistsError, match=name):
        cluster.create_topic(name, partitions=1)

    cluster.delete_topic(name)
    assert name not in cluster.topics()
    with pytest.raises(TopicNotFoundError):
        cluster.delete_topic(name)


def test_create_topics_reports_the_existing_one_and_creates_the_rest(cluster, app_id):
    cluster.create_topic(f"{app_id}-a")
    with pytest.raises(TopicExistsError, match=f"{app_id}-a"):
        cluster.admin().create_topics({f"{app_id}-a": (1, {}), f"{app_id}-b": (2, {})})
    assert cluster.topics()[f"{app_id}-b"].partitions == 2


def test_alter_topic_config_changes_only_the_given_keys(cluster, app_id):
    name = f"{app_id}-cfg"
    cluster.create_topic(name, config={"cleanup.policy": "compact"})
    cluster.admin().alter_topic_config(name, {"retention.ms": "3600000"})
    config = cluster.topics()[name].config
    assert config.get("retention.ms") == "3600000"
    assert config.get("cleanup.policy") == "compact"


def test_create_partitions_grows_a_topic_and_refuses_to_shrink_it(cluster, app_id):
    name = f"{app_id}-grow"
    cluster.create_topic(name, partitions=2)
    cluster.create_partitions(name, 5)
    assert cluster.topics()[name].partitions == 5
    assert cluster.producer().partitions_for(name) == 5
    with pytest.raises(ClusterError):
        cluster.create_partitions(name, 3)
    with pytest.raises(TopicNotFoundError):
        cluster.producer().partitions_for(f"{app_id}-missing")


# Produce and read


def test_produce_and_read_round_trip(cluster, app_id):
    name = f"{app_id}-rt"
    cluster.create_topic(name, partitions=3)
    keys = [f"key-{i}".encode() for i in range(12)]
    for i, key in enumerate(keys):
        cluster.produce(name, key, f"value-{i}".encode(), timestamp=NOW + i, headers=[("h", b"x")])
    cluster.produce(name, None, None, timestamp=NOW + 50, partition=1)

    records = cluster.read(name)
    assert len(records) == 13
    assert [(r.partition, r.offset) for r in records] == sorted((r.partition, r.offset) for r in records)
    for record in records:
        if record.key is None:
            assert (record.partition, record.value, record.timestamp) == (1, None, NOW + 50)
            continue
        i = keys.index(record.key)
        # Kafka's default partitioner: murmur2 of the key.
        assert record.partition == default_partition(record.key, 3)
        assert record.value == f"value-{i}".encode()
        assert record.timestamp == NOW + i
        assert record.headers == [("h", b"x")]


def test_producer_sends_a_batch_to_one_partition(cluster, app_id):
    name = f"{app_id}-send"
    cluster.create_topic(name, partitions=2)
    producer = cluster.producer()
    batch = RecordBatch.from_columns([b"a", b"b", None], [b"1", None, b"3"], [NOW, NOW + 1, NOW + 2], 0)
    producer.send(name, 1, batch)
    producer.flush()
    producer.close()

    records = cluster.read(name)
    assert [(r.partition, r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (1, 0, b"a", b"1", NOW),
        (1, 1, b"b", None, NOW + 1),
        (1, 2, None, b"3", NOW + 2),
    ]


def test_read_of_a_missing_topic_raises(cluster, app_id):
    with pytest.raises(TopicNotFoundError):
        cluster.read(f"{app_id}-missing")
    with pytest.raises(TopicNotFoundError):
        cluster.produce(f"{app_id}-missing", b"k", b"v")
    assert f"{app_id}-missing" not in cluster.topics()


# Offsets


def test_list_offsets_and_delete_records(cluster, app_id):
    name = f"{app_id}-offsets"
    cluster.create_topic(name, partitions=2)
    for i in range(5):
        cluster.produce(name, None, b"v", partition=0, timestamp=NOW + i)
    admin = cluster.admin()
    tp0, tp1 = partitions(name, 2)
    assert admin.list_offsets([tp0, tp1]) == {tp0: (0, 5), tp1: (0, 0)}

    admin.delete_records({tp0: 3})
    assert admin.list_offsets([tp0])[tp0] == (3, 5)
    assert [r.offset for r in cluster.read(name)] == [3, 4]


# Consumers


def test_manually_assigned_consumer_polls_seeks_and_pauses(cluster, app_id):
    name = f"{app_id}-manual"
    cluster.create_topic(name, partitions=2)
    for i in range(4):
        cluster.produce(name, None, f"p0-{i}".encode(), partition=0, timestamp=NOW + i)
        cluster.produce(name, None, f"p1-{i}".encode(), partition=1, timestamp=NOW + i)
    tp0, tp1 = partitions(name, 2)
    consumer = cluster.consumer(None, {"auto.offset.reset": "earliest"})
    try:
        consumer.assign([tp0, tp1])
        assert consumer.assignment() == [tp0, tp1]
        assert consumer.position(tp0) == 0
        consumer.seek(tp1, 2)
        assert consumer.position(tp1) == 2

        at_end = lambda: consumer.position(tp0) == 4 and consumer.position(tp1) == 4  # noqa: E731
        fetched = poll_until([consumer], at_end, what="end of both partitions")
        assert [r[1] for r in fetched[tp0]] == [f"p0-{i}".encode() for i in range(4)]
        assert [(r[1], r[4]) for r in fetched[tp1]] == [(b"p1-2", 2), (b"p1-3", 3)]
        assert all(r[3] == 1 for r in fetched[tp1])

        consumer.pause([tp0])
        assert consumer.paused() == [tp0]
        cluster.produce(name, None, b"late-0", partition=0)
        cluster.produce(name, None, b"late-1", partition=1)
        fetched = poll_until([consumer], lambda: consumer.position(tp1) == 5, what="late record of p1")
        assert tp0 not in fetched
        consumer.resume([tp0])
        assert consumer.paused() == []
        fetched = poll_until([consumer], lambda: consumer.position(tp0) == 5, what="late record of p0")
        assert [r[1] for r in fetched[tp0]] == [b"late-0"]

        consumer.seek_to_beginning([tp0])
        assert consumer.position(tp0) == 0
        assert consumer.end_offsets([tp0, tp1]) == {tp0: 5, tp1: 5}

        # A new assignment keeps the position of a partition that stays assigned.
        consumer.assign([tp1])
        assert consumer.assignment() == [tp1]
        assert consumer.position(tp1) == 5
    finally:
        consumer.close()


def test_pausing_and_resuming_mid_stream_delivers_every_record_once_in_order(cluster, app_id):
    # The runtime pauses a partition whenever its task's buffer is full, many times a second.
    pause_and_resume_every_poll(cluster, app_id, {})


def test_pausing_once_librdkafka_is_paused_too_delivers_every_record_once_in_order(kafka_cluster, app_id):
    # The Kafka adapter holds a paused partition's records and pauses librdkafka once
    # queued.max.messages.kbytes are held: with 1 KB, almost at once.
    pause_and_resume_every_poll(kafka_cluster, app_id, {"queued.max.messages.kbytes": 1})


def pause_and_resume_every_poll(cluster, app_id: str, config: dict[str, object]) -> None:  # type: ignore[no-untyped-def]
    name = f"{app_id}-paused"
    cluster.create_topic(name, partitions=2)
    producer = cluster.producer()
    for partition in (0, 1):
        rows = [(None, f"p{partition}-{i}".encode(), NOW + i, partition, i, None) for i in range(3000)]
        producer.send(name, partition, RecordBatch.from_records(rows))
    producer.flush()
    tp0, tp1 = partitions(name, 2)
    consumer = cluster.consumer(None, {"auto.offset.reset": "earliest", **config})
    seen: dict[TopicPartition, list[int]] = {tp0: [], tp1: []}
    try:
        consumer.assign([tp0, tp1])
        deadline = time.monotonic() + WAIT
        turn = 0
        while len(seen[tp0]) < 3000 or len(seen[tp1]) < 3000:
            assert time.monotonic() < deadline, f"got {len(seen[tp0])} and {len(seen[tp1])} of 3000 each"
            paused = set(consumer.paused())
            for tp, batch in consumer.poll(0.05, 100):
                assert tp not in paused, f"a poll returned records of paused {tp}"
                seen[tp].extend(batch.offsets_array().tolist())
            turn += 1
            # Pause p0 for two polls in every three, p1 for one poll in every two.
            consumer.resume([tp for tp in (tp0, tp1) if tp in paused])
            consumer.pause([tp for tp, now in ((tp0, turn % 3 != 0), (tp1, turn % 2 == 0)) if now])
            for tp in (tp0, tp1):
                # The position is the next record this consumer returns, paused or not.
                assert consumer.position(tp) == len(seen[tp])
        assert seen == {tp0: list(range(3000)), tp1: list(range(3000))}

        # A seek while paused starts the partition over from the seek offset on resume.
        consumer.pause([tp0])
        consumer.seek(tp0, 2990)
        consumer.resume([tp0])
        again = poll_until([consumer], lambda: consumer.position(tp0) == 3000, what="records after the seek")
        assert [r[4] for r in again[tp0]] == list(range(2990, 3000))
    finally:
        consumer.close()
        producer.close()


def test_group_assignment_and_rebalance_on_join_and_leave(cluster, app_id):
    a, b = f"{app_id}-a", f"{app_id}-b"
    cluster.create_topic(a, partitions=4)
    cluster.create_topic(b, partitions=4)
    group = f"{app_id}-group"
    everything = set(partitions(a, 4) + partitions(b, 4))

    first, first_listener = cluster.consumer(group), RecordingListener()
    second, second_listener = cluster.consumer(group), RecordingListener()
    try:
        first.subscribe([a, b], first_listener)
        poll_until([first], lambda: first_listener.owned == everything, what="first member owns all")
        assert set(first.assignment()) == everything
        assert first.member_id
        generation = first.group_generation
        assert generation >= 1

        second.subscribe([a, b], second_listener)
        poll_until(
            [first, second],
            lambda: (
                first_listener.owned | second_listener.owned == everything
                and len(first_listener.owned) == 4
                and len(second_listener.owned) == 4
            ),
            what="two members share the partitions",
        )
        assert first.group_generation > generation
        # Range assignment: co-partitioned topics land together on one member.
        for listener in (first_listener, second_listener):
            assert {tp.partition for tp in listener.owned if tp.topic == a} == {
                tp.partition for tp in listener.owned if tp.topic == b
            }
        # The first member gave up partitions through an orderly revocation.
        assert any(kind == "revoked" for kind, _ in first_listener.events)

        second.close()
        poll_until([first], lambda: first_listener.owned == everything, what="first member owns all again")
    finally:
        first.close()
        second.close()


def test_commit_and_committed_offsets(cluster, app_id):
    name = f"{app_id}-commit"
    cluster.create_topic(name, partitions=2)
    group = f"{app_id}-group"
    tp0, tp1 = partitions(name, 2)
    consumer, listener = cluster.consumer(group), RecordingListener()
    try:
        consumer.subscribe([name], listener)
        poll_until([consumer], lambda: listener.owned == {tp0, tp1}, what="assignment")
        consumer.commit({tp0: 7})
        assert consumer.committed([tp0, tp1]) == {tp0: 7}
        assert cluster.admin().committed_offsets(group, [tp0, tp1]) == {tp0: 7}
    finally:
        consumer.close()
    assert cluster.admin().committed_offsets(f"{app_id}-no-such-group", [tp0]) == {}


def test_committed_offsets_carry_the_metadata_committed_with_them(cluster, app_id):
    name = f"{app_id}-metadata"
    cluster.create_topic(name, partitions=2)
    group = f"{app_id}-group"
    tp0, tp1 = partitions(name, 2)
    consumer, listener = cluster.consumer(group), RecordingListener()
    try:
        consumer.subscribe([name], listener)
        poll_until([consumer], lambda: listener.owned == {tp0, tp1}, what="assignment")
        consumer.commit({tp0: 7, tp1: 3}, {tp0: "AgAAAAAAAABk"})
        assert consumer.committed_with_metadata([tp0, tp1]) == {
            tp0: OffsetAndMetadata(7, "AgAAAAAAAABk"),
            tp1: OffsetAndMetadata(3, ""),
        }
        # A commit without metadata replaces what the last one stored, as on a broker.
        consumer.commit({tp0: 8})
        assert consumer.committed_with_metadata([tp0]) == {tp0: OffsetAndMetadata(8, "")}
    finally:
        consumer.close()


def test_offsets_sent_to_a_transaction_carry_their_metadata(cluster, app_id):
    source = f"{app_id}-source"
    cluster.create_topic(source)
    group = f"{app_id}-group"
    tp = TopicPartition(source, 0)
    producer = cluster.producer({"transactional.id": f"{app_id}-txn"})
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send_offsets_to_transaction({tp: 42}, group, {tp: "AgAAAAAAAABk"})
        producer.commit_transaction()
    finally:
        producer.close()
    reader = cluster.consumer(group)
    try:
        assert reader.committed_with_metadata([tp]) == {tp: OffsetAndMetadata(42, "AgAAAAAAAABk")}
    finally:
        reader.close()


def test_a_new_member_starts_at_the_committed_offset(cluster, app_id):
    name = f"{app_id}-resume"
    cluster.create_topic(name)
    for i in range(5):
        cluster.produce(name, None, str(i).encode(), partition=0)
    group = f"{app_id}-group"
    tp = TopicPartition(name, 0)
    first, listener = cluster.consumer(group, {"auto.offset.reset": "earliest"}), RecordingListener()
    try:
        first.subscribe([name], listener)
        poll_until([first], lambda: tp in listener.owned, what="assignment")
        first.commit({tp: 3})
    finally:
        first.close()
    second, listener = cluster.consumer(group, {"auto.offset.reset": "earliest"}), RecordingListener()
    try:
        second.subscribe([name], listener)
        fetched: dict = {}

        def got_rest() -> bool:
            for tp_, batch in second.poll(0.05):
                fetched.setdefault(tp_, []).extend(batch.to_list())
            return len(fetched.get(tp, [])) >= 2

        poll_until([], got_rest, what="records after the committed offset")
        assert [r[4] for r in fetched[tp]] == [3, 4]
    finally:
        second.close()


def test_signal_application_error_reaches_every_member(cluster, app_id):
    name = f"{app_id}-signal"
    cluster.create_topic(name, partitions=2)
    group = f"{app_id}-group"
    first, first_listener = cluster.consumer(group), RecordingListener()
    second, second_listener = cluster.consumer(group), RecordingListener()
    try:
        first.subscribe([name], first_listener)
        second.subscribe([name], second_listener)
        poll_until(
            [first, second],
            lambda: (
                len(first_listener.owned) + len(second_listener.owned) == 2
                and bool(first_listener.owned)
                and bool(second_listener.owned)
            ),
            what="both members assigned",
        )
        first.signal_application_error(ERROR_SHUTDOWN_REQUESTED)
        poll_until(
            [first, second],
            lambda: bool(first_listener.error_codes()) and bool(second_listener.error_codes()),
            what="both members received the error code",
        )
        assert first_listener.error_codes() == [ERROR_SHUTDOWN_REQUESTED]
        assert second_listener.error_codes() == [ERROR_SHUTDOWN_REQUESTED]
    finally:
        first.close()
        second.close()


# Transactions


def test_transactions_commit_is_visible_and_abort_is_not_to_read_committed(cluster, app_id, wait_until):
    name = f"{app_id}-txn"
    source = f"{app_id}-source"
    cluster.create_topic(name)
    cluster.create_topic(source)
    group = f"{app_id}-group"
    tp = TopicPartition(name, 0)
    producer = cluster.producer({"transactional.id": f"{app_id}-txn"})
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(name, 0, RecordBatch.from_columns([b"k"], [b"committed"], [NOW], 0))
        producer.send_offsets_to_transaction({TopicPartition(source, 0): 42}, group)
        producer.commit_transaction()

        producer.begin_transaction()
        producer.send(name, 0, RecordBatch.from_columns([b"k"], [b"aborted"], [NOW], 0))
        producer.flush()
        producer.abort_transaction()

        producer.begin_transaction()
        producer.send(name, 0, RecordBatch.from_columns([b"k"], [b"open"], [NOW], 0))
        producer.flush()
        # The open transaction is invisible to read_committed, visible to read_uncommitted.
        assert [r.value for r in cluster.read(name, "read_committed")] == [b"committed"]
        everything = [b"committed", b"aborted", b"open"]
        assert [r.value for r in cluster.read(name, "read_uncommitted")] == everything
        _start, stable = cluster.admin().list_offsets([tp], "read_committed")[tp]
        assert cluster.admin().list_offsets([tp], "read_uncommitted")[tp][1] > stable

        producer.commit_transaction()
        # Kafka's coordinator answers the commit once it has logged it, and writes the partition's
        # commit marker a moment later: read_committed sees the records once the marker is in.
        wait_until(
            lambda: [r.value for r in cluster.read(name)] == [b"committed", b"open"],
            15,
            "the committed transaction's records visible to read_committed",
        )
        assert cluster.admin().committed_offsets(group, [TopicPartition(source, 0)]) == {
            TopicPartition(source, 0): 42
        }
    finally:
        producer.close()


def test_a_newer_transactional_producer_fences_the_older_one(cluster, app_id):
    name = f"{app_id}-fence"
    cluster.create_topic(name)
    old = cluster.producer({"transactional.id": f"{app_id}-txn"})
    new = cluster.producer({"transactional.id": f"{app_id}-txn"})
    try:
        old.init_transactions()
        new.init_transactions()
        with pytest.raises(ProducerFencedError):
            old.begin_transaction()
            old.send(name, 0, RecordBatch.from_columns([b"k"], [b"zombie"], [NOW], 0))
            old.commit_transaction()
        new.begin_transaction()
        new.send(name, 0, RecordBatch.from_columns([b"k"], [b"live"], [NOW], 0))
        new.commit_transaction()
        assert [r.value for r in cluster.read(name)] == [b"live"]
    finally:
        new.close()
        old.close()


def test_read_committed_position_moves_past_transaction_markers(cluster, app_id):
    name = f"{app_id}-markers"
    cluster.create_topic(name)
    tp = TopicPartition(name, 0)
    producer = cluster.producer({"transactional.id": f"{app_id}-txn"})
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(name, 0, RecordBatch.from_columns([b"a", b"b"], [b"1", b"2"], [NOW, NOW], 0))
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(name, 0, RecordBatch.from_columns([b"c"], [b"3"], [NOW], 0))
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close()
    consumer = cluster.consumer(None, {"isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        assert end == cluster.admin().list_offsets([tp], "read_committed")[tp][1]
        # The restore thread's loop: poll until the position reaches the end offset.
        fetched = poll_until([consumer], lambda: consumer.position(tp) >= end, what="end of the log")
        assert [r[1] for r in fetched[tp]] == [b"1", b"2"]
    finally:
        consumer.close()


def test_auto_offset_reset_decides_where_a_partition_without_offsets_starts(cluster, app_id):
    name = f"{app_id}-reset"
    cluster.create_topic(name)
    for i in range(3):
        cluster.produce(name, None, str(i).encode(), partition=0)
    tp = TopicPartition(name, 0)
    for reset, expected in (("earliest", 0), ("latest", 3)):
        consumer = cluster.consumer(None, {"auto.offset.reset": reset})
        try:
            consumer.assign([tp])
            assert consumer.position(tp) == expected
        finally:
            consumer.close()
    consumer = cluster.consumer(None, {"auto.offset.reset": "none"})
    try:
        consumer.assign([tp])
        with pytest.raises(ClusterError):
            consumer.position(tp)
    finally:
        consumer.close()


class SeekingListener(RecordingListener):
    """Seeks every assigned partition, from inside the callback, as the runtime does for tasks
    with checkpointed or committed positions."""

    def __init__(self, consumer: Consumer, offset: int) -> None:
        super().__init__()
        self.consumer = consumer
        self.offset = offset

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        super().on_partitions_assigned(partitions)
        for tp in partitions:
            self.consumer.seek(tp, self.offset)


def test_seek_inside_on_partitions_assigned_sets_where_fetching_starts(cluster, app_id):
    name = f"{app_id}-seek"
    cluster.create_topic(name)
    for i in range(4):
        cluster.produce(name, None, str(i).encode(), partition=0)
    tp = TopicPartition(name, 0)
    consumer = cluster.consumer(f"{app_id}-group", {"auto.offset.reset": "earliest"})
    listener = SeekingListener(consumer, 2)
    try:
        consumer.subscribe([name], listener)
        fetched = poll_until([consumer], lambda: consumer.assignment() == [tp] and consumer.position(tp) >= 4)
        assert [r[4] for r in fetched[tp]] == [2, 3]
    finally:
        consumer.close()


class CommittingListener(RecordingListener):
    """Commits a fixed offset for every revoked partition, inside the callback, as the runtime
    does; records a refused commit."""

    def __init__(self, consumer: Consumer, offset: int) -> None:
        super().__init__()
        self.consumer = consumer
        self.offset = offset
        self.refused: CommitFailedError | None = None

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        try:
            self.consumer.commit({tp: self.offset for tp in partitions})
        except CommitFailedError as exc:
            self.refused = exc
        super().on_partitions_revoked(partitions)


def test_offsets_committed_on_revocation_are_where_the_next_owner_starts(cluster, app_id):
    name = f"{app_id}-handover"
    cluster.create_topic(name, partitions=2)
    for p in range(2):
        for i in range(5):
            cluster.produce(name, None, str(i).encode(), partition=p)
    group = f"{app_id}-group"
    first = cluster.consumer(group, {"auto.offset.reset": "earliest"})
    first_listener = CommittingListener(first, 3)
    second, second_listener = cluster.consumer(group, {"auto.offset.reset": "earliest"}), RecordingListener()
    try:
        first.subscribe([name], first_listener)
        poll_until([first], lambda: len(first_listener.owned) == 2, what="first member owns both")
        second.subscribe([name], second_listener)
        fetched = poll_until(
            [first, second],
            lambda: (
                len(second_listener.owned) == 1
                and all(second.position(tp) >= 5 for tp in second_listener.owned)
            ),
            what="second member took over a partition and read it",
            # The first member may read the moved partition before its revocation: only what the
            # second one reads shows where it started.
            kept=second,
        )
        (moved,) = second_listener.owned
        # Kafka accepts a commit of the old generation while a rebalance is being prepared (an
        # eager member commits in its revocation callback before it rejoins).
        assert first_listener.refused is None
        assert [r[4] for r in fetched[moved]][:2] == [3, 4]
    finally:
        first.close()
        second.close()


def test_request_rejoin_rebalances_and_picks_up_new_partitions(cluster, app_id):
    name = f"{app_id}-rejoin"
    cluster.create_topic(name, partitions=2)
    consumer, listener = cluster.consumer(f"{app_id}-group"), RecordingListener()
    try:
        consumer.subscribe([name], listener)
        poll_until([consumer], lambda: listener.owned == set(partitions(name, 2)), what="assignment")
        generation = consumer.group_generation

        consumer.request_rejoin()
        poll_until(
            [consumer],
            lambda: consumer.group_generation > generation and listener.owned == set(partitions(name, 2)),
            what="a new generation",
        )

        cluster.create_partitions(name, 4)
        consumer.request_rejoin()
        poll_until([consumer], lambda: listener.owned == set(partitions(name, 4)), what="the new partitions")
    finally:
        consumer.close()


def test_closing_a_producer_aborts_its_open_transaction(cluster, app_id, wait_until):
    name = f"{app_id}-close"
    cluster.create_topic(name)
    tp = TopicPartition(name, 0)
    producer = cluster.producer({"transactional.id": f"{app_id}-txn"})
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(name, 0, RecordBatch.from_columns([b"k"], [b"never"], [NOW], 0))
    producer.flush()
    producer.close()
    # The last stable offset is the end again: read_committed readers do not stall. Kafka's
    # coordinator answers the abort before it writes the partitions' abort markers, so the offset
    # moves a moment after close(); without the abort it would wait out the 60 s transaction timeout.
    admin = cluster.admin()

    def stable_again() -> bool:
        stable = admin.list_offsets([tp], "read_committed")[tp]
        return bool(stable == admin.list_offsets([tp], "read_uncommitted")[tp])

    wait_until(stable_again, 15, "the last stable offset back at the end of the partition")
    assert cluster.read(name) == []


def test_every_member_reads_the_same_group_assignment(cluster, app_id):
    name = f"{app_id}-members"
    cluster.create_topic(name, partitions=4)
    group = f"{app_id}-group"
    first, first_listener = cluster.consumer(group), RecordingListener()
    second, second_listener = cluster.consumer(group), RecordingListener()
    outsider = cluster.consumer(None)
    try:
        first.subscribe([name], first_listener)
        second.subscribe([name], second_listener)

        def settled() -> bool:
            if len(first_listener.owned) != 2 or len(second_listener.owned) != 2:
                return False
            expected = {first.member_id: first.assignment(), second.member_id: second.assignment()}
            return first.group_assignment() == second.group_assignment() == expected

        # Standby placement relies on this: every member computes from the same answer.
        poll_until([first, second], settled, what="one group assignment seen by both members")
        assert outsider.group_assignment() == {}
    finally:
        first.close()
        second.close()
        outsider.close()
