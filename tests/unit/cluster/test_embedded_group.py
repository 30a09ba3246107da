"""EmbeddedCluster consumer groups: range assignment, cooperative rebalances, session expiry,
metadata-triggered rebalances and the application error code."""

from __future__ import annotations

import threading
import time

import pytest

from kstreams._native.record_batch import RecordBatch
from kstreams.cluster import ERROR_SHUTDOWN_REQUESTED, CommitFailedError, TopicPartition


def tps(topic: str, *partitions: int) -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in partitions}


def member(cluster, listener, name: str, topics=("t",), **config):
    consumer = cluster.consumer("g", {"client.id": name, "auto.offset.reset": "earliest", **config})
    recorder = listener()
    consumer.subscribe(list(topics), recorder)
    return consumer, recorder


def settle(*members, rounds: int = 20) -> None:
    """Poll every member in turn until a whole round runs no callback."""
    for _ in range(rounds):
        before = [len(recorder.events) for _, recorder in members]
        for consumer, _ in members:
            consumer.poll(0.0)
        if [len(recorder.events) for _, recorder in members] == before:
            return
    raise AssertionError("the group did not settle")


def test_two_members_split_partitions_by_range(embedded_cluster, listener):
    embedded_cluster.create_topic("t", partitions=4)
    a, ra = member(embedded_cluster, listener, "a")
    b, rb = member(embedded_cluster, listener, "b")
    settle((a, ra), (b, rb))
    # Members are sorted by member id ("<client.id>-<uuid>"): a takes the first range.
    assert set(a.assignment()) == ra.owned == tps("t", 0, 1)
    assert set(b.assignment()) == rb.owned == tps("t", 2, 3)
    assert a.member_id.startswith("a-") and b.member_id.startswith("b-")
    assert a.group_generation == b.group_generation > 0


def test_an_uneven_split_gives_the_first_members_one_more(embedded_cluster, listener):
    embedded_cluster.create_topic("t", partitions=5)
    members = [member(embedded_cluster, listener, name) for name in ("a", "b", "c")]
    settle(*members)
    assert [set(c.assignment()) for c, _ in members] == [tps("t", 0, 1), tps("t", 2, 3), tps("t", 4)]


def test_co_partitioned_topics_land_on_the_same_member(embedded_cluster, listener):
    embedded_cluster.create_topic("left", partitions=4)
    embedded_cluster.create_topic("right", partitions=4)
    a, ra = member(embedded_cluster, listener, "a", topics=("left", "right"))
    b, rb = member(embedded_cluster, listener, "b", topics=("left", "right"))
    settle((a, ra), (b, rb))
    assert ra.owned == tps("left", 0, 1) | tps("right", 0, 1)
    assert rb.owned == tps("left", 2, 3) | tps("right", 2, 3)


def test_revoke_runs_before_the_new_owner_is_assigned(embedded_cluster, listener):
    embedded_cluster.create_topic("t", partitions=2)
    a, ra = member(embedded_cluster, listener, "a")
    a.poll(0.0)
    assert ra.owned == tps("t", 0, 1)
    b, rb = member(embedded_cluster, listener, "b")
    b.poll(0.0)
    # a still owns t-1 until it revokes it in its next poll: b gets nothing yet.
    assert rb.events == [("assigned", [])]
    assert b.assignment() == []
    a.poll(0.0)
    assert ra.events[-2:] == [("revoked", [TopicPartition("t", 1)]), ("assigned", [])]
    b.poll(0.0)
    assert rb.events[-1] == ("assigned", [TopicPartition("t", 1)])


def test_the_new_owner_starts_at_the_offset_committed_on_revoke(embedded_cluster, listener):
    embedded_cluster.create_topic("t", partitions=2)
    producer = embedded_cluster.producer()
    producer.send("t", 1, RecordBatch.from_columns([None] * 3, [b"0", b"1", b"2"], [1, 2, 3]))
    tp = TopicPartition("t", 1)
    a = embedded_cluster.consumer("g", {"client.id": "a", "auto.offset.reset": "earliest"})
    ra = listener(on_revoked=lambda parts: a.commit({p: a.position(p) for p in parts}))
    a.subscribe(["t"], ra)
    got = a.poll(0.0, max_records=2)
    assert [b.values() for _, b in got] == [[b"0", b"1"]]
    b, rb = member(embedded_cluster, listener, "b")
    a.poll(0.0)
    assert embedded_cluster.admin().committed_offsets("g", [tp]) == {tp: 2}
    # b's next poll takes t-1 over and fetches from the committed offset.
    assert [batch.values() for _, batch in b.poll(0.0)] == [[b"2"]]
    assert rb.owned == {tp}


def test_leaving_member_hands_its_partitions_to_the_others(embedded_cluster, listener):
    embedded_cluster.create_topic("t", partitions=4)
    a, ra = member(embedded_cluster, listener, "a")
    b, rb = member(embedded_cluster, listener, "b")
    settle((a, ra), (b, rb))
    generation = a.group_generation
    b.close()
    settle((a, ra))
    assert ra.owned == tps("t", 0, 1, 2, 3)
    assert a.group_generation > generation


def test_session_timeout_expels_a_silent_member(embedded_cluster, listener):
    embedded_cluster.create_topic("t", partitions=2)
    a, ra = member(embedded_cluster, listener, "a", **{"session.timeout.ms": 300})
    b, rb = member(embedded_cluster, listener, "b", **{"session.timeout.ms": 300})
    settle((a, ra), (b, rb))
    silent_id = b.member_id
    assert rb.owned == tps("t", 1)
    # Only a polls; its blocked poll wakes when b's session expires and takes over t-1.
    deadline = time.monotonic() + 10
    while ra.owned != tps("t", 0, 1):
        assert time.monotonic() < deadline, "the silent member was not expelled"
        a.poll(0.5)
    # The expelled member cannot commit, learns of the loss in its next poll and rejoins.
    with pytest.raises(CommitFailedError):
        b.commit({TopicPartition("t", 1): 0})
    b.poll(0.0)
    assert rb.events[-2:] == [("lost", [TopicPartition("t", 1)]), ("assigned", [])]
    assert b.member_id != silent_id
    settle((a, ra), (b, rb))
    assert rb.owned == tps("t", 1)


def test_a_member_blocked_in_poll_is_not_expelled(embedded_cluster, listener):
    embedded_cluster.create_topic("t", partitions=2)
    a, ra = member(embedded_cluster, listener, "a", **{"session.timeout.ms": 400})
    b, rb = member(embedded_cluster, listener, "b", **{"session.timeout.ms": 400})
    settle((a, ra), (b, rb))
    member_id = a.member_id
    # a waits in one poll for longer than its session timeout while b polls and would expel it.
    waiter = threading.Thread(target=a.poll, args=(1.0,))
    waiter.start()
    deadline = time.monotonic() + 0.9
    while time.monotonic() < deadline:
        b.poll(0.05)
    waiter.join()
    a.poll(0.0)
    assert "lost" not in ra.kinds()
    assert a.member_id == member_id
    assert rb.owned == tps("t", 1)


def test_partition_growth_assigns_the_new_partitions(embedded_cluster, listener):
    embedded_cluster.create_topic("t", partitions=2)
    a, ra = member(embedded_cluster, listener, "a")
    settle((a, ra))
    embedded_cluster.create_partitions("t", 4)
    settle((a, ra))
    assert ra.events[-1] == ("assigned", sorted(tps("t", 2, 3)))
    assert ra.owned == tps("t", 0, 1, 2, 3)


def test_subscribing_to_a_missing_topic_assigns_it_once_created(embedded_cluster, listener):
    a, ra = member(embedded_cluster, listener, "a", topics=("later",))
    settle((a, ra))
    assert ra.events == [("assigned", [])]
    assert "later" not in embedded_cluster.topics()
    embedded_cluster.create_topic("later", partitions=2)
    settle((a, ra))
    assert ra.owned == tps("later", 0, 1)


def test_deleting_a_subscribed_topic_revokes_its_partitions(embedded_cluster, listener):
    embedded_cluster.create_topic("t", partitions=2)
    embedded_cluster.create_topic("u", partitions=1)
    a, ra = member(embedded_cluster, listener, "a", topics=("t", "u"))
    settle((a, ra))
    embedded_cluster.delete_topic("u")
    settle((a, ra))
    assert ("revoked", [TopicPartition("u", 0)]) in ra.events
    assert ra.owned == tps("t", 0, 1)


def test_request_rejoin_starts_a_new_generation(embedded_cluster, listener):
    embedded_cluster.create_topic("t", partitions=2)
    a, ra = member(embedded_cluster, listener, "a")
    settle((a, ra))
    generation = a.group_generation
    a.request_rejoin()
    settle((a, ra))
    assert a.group_generation == generation + 1
    assert ra.events[-1] == ("assigned", [])
    assert ra.owned == tps("t", 0, 1)


def test_a_poll_wakes_on_a_group_change(embedded_cluster, listener):
    embedded_cluster.create_topic("t", partitions=2)
    a, ra = member(embedded_cluster, listener, "a")
    settle((a, ra))
    returned = threading.Event()

    def blocked_poll() -> None:
        a.poll(30.0)
        returned.set()

    waiter = threading.Thread(target=blocked_poll)
    waiter.start()
    member(embedded_cluster, listener, "b")
    assert returned.wait(10.0), "a blocked poll did not wake for the rebalance"
    waiter.join()
    assert ("revoked", [TopicPartition("t", 1)]) in ra.events


def test_revoked_partitions_forget_their_pause(embedded_cluster, listener):
    embedded_cluster.create_topic("t", partitions=2)
    a, ra = member(embedded_cluster, listener, "a")
    settle((a, ra))
    a.pause(a.assignment())
    b, rb = member(embedded_cluster, listener, "b")
    settle((a, ra), (b, rb))
    assert a.paused() == [TopicPartition("t", 0)]
    assert b.paused() == []


def test_application_error_reaches_every_member_once(embedded_cluster, listener):
    embedded_cluster.create_topic("t", partitions=2)
    a, ra = member(embedded_cluster, listener, "a")
    b, rb = member(embedded_cluster, listener, "b")
    settle((a, ra), (b, rb))
    a.signal_application_error(ERROR_SHUTDOWN_REQUESTED)
    settle((a, ra), (b, rb))
    assert ra.errors == rb.errors == [ERROR_SHUTDOWN_REQUESTED]
    # A member joining while the group lives receives it too.
    c, rc = member(embedded_cluster, listener, "c")
    settle((a, ra), (b, rb), (c, rc))
    assert rc.errors == [ERROR_SHUTDOWN_REQUESTED]
    assert ra.errors == [ERROR_SHUTDOWN_REQUESTED]


def test_application_error_is_cleared_when_the_group_empties(embedded_cluster, listener):
    embedded_cluster.create_topic("t")
    a, ra = member(embedded_cluster, listener, "a")
    a.signal_application_error(ERROR_SHUTDOWN_REQUESTED)
    settle((a, ra))
    a.close()
    d, rd = member(embedded_cluster, listener, "d")
    settle((d, rd))
    assert rd.errors == []


def test_members_on_threads_never_fetch_one_partition_at_once(embedded_cluster, listener):
    """Members join and leave while records flow; every record is consumed exactly once because
    ownership moves only after the old owner revoked (and committed) it."""
    partitions = 4
    embedded_cluster.create_topic("t", partitions=partitions)
    owners: dict[TopicPartition, str] = {}
    violations: list[str] = []
    consumed: list[tuple[int, int]] = []
    guard = threading.Lock()
    produced = [0]
    stop_producing = threading.Event()

    def produce() -> None:
        producer = embedded_cluster.producer()
        i = 0
        while not stop_producing.is_set() or i < 40:
            for p in range(partitions):
                producer.send("t", p, RecordBatch.from_columns([None] * 5, [b"v"] * 5, [i] * 5))
            produced[0] += 5 * partitions
            i += 1
            stop_producing.wait(0.002)

    class Member:
        def __init__(self, name: str) -> None:
            self.name = name
            self.stop = threading.Event()
            self.consumer = embedded_cluster.consumer(
                "g", {"client.id": name, "auto.offset.reset": "earliest"}
            )
            self.recorder = listener(on_revoked=self.revoked)
            self.recorder.on_partitions_assigned = self.assigned
            self.thread = threading.Thread(target=self.run, name=name)

        def assigned(self, parts: list[TopicPartition]) -> None:
            with guard:
                for tp in parts:
                    if tp in owners:
                        violations.append(f"{self.name} got {tp} still owned by {owners[tp]}")
                    owners[tp] = self.name

        def revoked(self, parts: list[TopicPartition]) -> None:
            self.consumer.commit({tp: self.consumer.position(tp) for tp in parts})
            with guard:
                for tp in parts:
                    owners.pop(tp, None)

        def run(self) -> None:
            self.consumer.subscribe(["t"], self.recorder)
            while not self.stop.is_set():
                for tp, batch in self.consumer.poll(0.02):
                    with guard:
                        if owners.get(tp) != self.name:
                            violations.append(f"{self.name} fetched {tp} owned by {owners.get(tp)}")
                        consumed.extend((tp.partition, o) for o in batch.offsets_array().tolist())
            owned = self.consumer.assignment()
            self.revoked(owned)
            self.consumer.close()

    def wait_for(condition, what: str) -> None:
        deadline = time.monotonic() + 20
        while not condition():
            assert time.monotonic() < deadline, what
            time.sleep(0.01)

    producer_thread = threading.Thread(target=produce)
    producer_thread.start()
    a, b, c = Member("a"), Member("b"), Member("c")
    try:
        a.thread.start()
        wait_for(lambda: len(consumed) > 0, "a consumed nothing")
        b.thread.start()
        wait_for(lambda: "b" in owners.values(), "b was never assigned a partition")
        c.thread.start()
        wait_for(lambda: "c" in owners.values(), "c was never assigned a partition")
        b.stop.set()
        b.thread.join(10)
        wait_for(lambda: set(owners.values()) == {"a", "c"} and len(owners) == partitions, "b's share moved")
    finally:
        stop_producing.set()
        producer_thread.join(10)
    try:
        wait_for(lambda: len(consumed) >= produced[0], "not every record was consumed")
    finally:
        for m in (a, b, c):
            m.stop.set()
            m.thread.join(10)
    assert violations == []
    assert len(consumed) == len(set(consumed)) == produced[0]


def test_resubscribing_revokes_the_dropped_topic(embedded_cluster, listener):
    embedded_cluster.create_topic("t", partitions=1)
    embedded_cluster.create_topic("u", partitions=1)
    a, ra = member(embedded_cluster, listener, "a", topics=("t", "u"))
    settle((a, ra))
    a.subscribe(["t"], ra)
    settle((a, ra))
    assert ra.owned == tps("t", 0)
    assert ("revoked", [TopicPartition("u", 0)]) in ra.events
