"""EmbeddedCluster topics, logs, produce/fetch, admin requests and fault injection."""

from __future__ import annotations

import pytest

from kstreams._native.record_batch import RecordBatch, default_partition
from kstreams.cluster import (
    ClusterError,
    EmbeddedCluster,
    TopicExistsError,
    TopicNotFoundError,
    TopicPartition,
)


def batch_of(*values: bytes, key: bytes | None = None, ts: int = 1) -> RecordBatch:
    return RecordBatch.from_columns([key] * len(values), list(values), [ts] * len(values))


def fetch_all(consumer, tp: TopicPartition) -> list[tuple]:
    """Records of one partition through a manually assigned consumer, as (offset, value)."""
    out = []
    while True:
        got = consumer.poll(0.0)
        if not got:
            return out
        for got_tp, batch in got:
            assert got_tp == tp
            out.extend((batch.offset(i), batch.value(i)) for i in range(len(batch)))


def test_send_assigns_consecutive_offsets_and_fetch_returns_them_in_order(embedded_cluster):
    embedded_cluster.create_topic("t", partitions=2)
    producer = embedded_cluster.producer()
    producer.send("t", 1, batch_of(b"a", b"b"))
    producer.send("t", 1, batch_of(b"c"))
    producer.send("t", 0, batch_of(b"x"))
    tp = TopicPartition("t", 1)
    consumer = embedded_cluster.consumer(None, {"auto.offset.reset": "earliest"})
    consumer.assign([tp])
    assert fetch_all(consumer, tp) == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert consumer.position(tp) == 3


def test_fetched_batches_carry_their_partition(embedded_cluster):
    embedded_cluster.create_topic("t", partitions=3)
    embedded_cluster.producer().send("t", 2, batch_of(b"a"))
    consumer = embedded_cluster.consumer(None, {"auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("t", 2)])
    [(tp, batch)] = consumer.poll(0.0)
    assert tp == TopicPartition("t", 2)
    assert batch.partition(0) == 2


def test_fetch_resumes_mid_batch_and_respects_max_records(embedded_cluster):
    embedded_cluster.create_topic("t")
    embedded_cluster.producer().send("t", 0, batch_of(*[b"%d" % i for i in range(10)]))
    tp = TopicPartition("t", 0)
    consumer = embedded_cluster.consumer(None, {"auto.offset.reset": "earliest"})
    consumer.assign([tp])
    [(_, first)] = consumer.poll(0.0, max_records=4)
    [(_, second)] = consumer.poll(0.0, max_records=4)
    assert first.values() == [b"0", b"1", b"2", b"3"]
    assert second.values() == [b"4", b"5", b"6", b"7"]
    consumer.seek(tp, 1)
    [(_, again)] = consumer.poll(0.0, max_records=2)
    assert again.offsets_array().tolist() == [1, 2]


def test_poll_shares_max_records_fairly_across_partitions(embedded_cluster):
    embedded_cluster.create_topic("t", partitions=2)
    producer = embedded_cluster.producer()
    for p in range(2):
        producer.send("t", p, batch_of(*[b"v"] * 100))
    consumer = embedded_cluster.consumer(None, {"auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
    served = {0: 0, 1: 0}
    for _ in range(10):
        got = consumer.poll(0.0, max_records=10)
        assert sum(len(b) for _, b in got) == 10
        for tp, batch in got:
            served[tp.partition] += len(batch)
    assert served == {0: 50, 1: 50}


def test_poll_wakes_when_a_record_arrives(embedded_cluster):
    import threading

    embedded_cluster.create_topic("t")
    consumer = embedded_cluster.consumer(None, {"auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("t", 0)])
    timer = threading.Timer(0.05, lambda: embedded_cluster.produce("t", None, b"late"))
    timer.start()
    try:
        got = consumer.poll(10.0)
    finally:
        timer.join()
    assert [b.values() for _, b in got] == [[b"late"]]


def test_a_wakeup_ends_a_waiting_poll_and_one_before_a_poll_is_not_lost(embedded_cluster):
    import threading
    import time

    embedded_cluster.create_topic("t")
    consumer = embedded_cluster.consumer(None, {"auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("t", 0)])
    timer = threading.Timer(0.05, consumer.wakeup)
    timer.start()
    began = time.monotonic()
    try:
        assert consumer.poll(20.0) == []
    finally:
        timer.join()
    assert time.monotonic() - began < 10.0
    consumer.wakeup()
    began = time.monotonic()
    assert consumer.poll(20.0) == []
    assert time.monotonic() - began < 10.0
    # Used up: the next poll waits again (for a record, here).
    threading.Timer(0.05, lambda: embedded_cluster.produce("t", None, b"late")).start()
    assert [b.values() for _, b in consumer.poll(20.0)] == [[b"late"]]


def test_auto_offset_reset_latest_skips_existing_records(embedded_cluster):
    embedded_cluster.create_topic("t")
    embedded_cluster.produce("t", None, b"old")
    consumer = embedded_cluster.consumer(None, {"auto.offset.reset": "latest"})
    consumer.assign([TopicPartition("t", 0)])
    assert consumer.poll(0.0) == []
    embedded_cluster.produce("t", None, b"new")
    assert [b.values() for _, b in consumer.poll(0.0)] == [[b"new"]]


def test_auto_offset_reset_none_refuses_a_partition_without_committed_offset(embedded_cluster):
    embedded_cluster.create_topic("t")
    consumer = embedded_cluster.consumer("g", {"auto.offset.reset": "none"})
    consumer.assign([TopicPartition("t", 0)])
    with pytest.raises(ClusterError, match=r"auto\.offset\.reset"):
        consumer.poll(0.0)


def test_read_returns_records_in_partition_then_offset_order(embedded_cluster):
    embedded_cluster.create_topic("t", partitions=2)
    embedded_cluster.produce("t", b"k", b"1", timestamp=10, partition=1)
    embedded_cluster.produce("t", b"k", b"2", timestamp=11, partition=0, headers=[("h", b"v")])
    embedded_cluster.produce("t", None, b"3", timestamp=12, partition=1)
    records = embedded_cluster.read("t")
    assert [(r.partition, r.offset, r.value) for r in records] == [(0, 0, b"2"), (1, 0, b"1"), (1, 1, b"3")]
    assert records[0].headers == [("h", b"v")]
    assert records[0].timestamp == 11
    assert records[0].topic == "t"


def test_produce_places_a_key_by_the_default_partitioner(embedded_cluster):
    embedded_cluster.create_topic("t", partitions=4)
    for key in (b"alpha", b"beta", b"gamma", b"alpha"):
        embedded_cluster.produce("t", key, b"v")
    placed = {(r.key, r.partition) for r in embedded_cluster.read("t")}
    assert placed == {(key, default_partition(key, 4)) for key in (b"alpha", b"beta", b"gamma")}


def test_produce_spreads_null_keys_round_robin(embedded_cluster):
    embedded_cluster.create_topic("t", partitions=3)
    for _ in range(6):
        embedded_cluster.produce("t", None, b"v")
    assert sorted(r.partition for r in embedded_cluster.read("t")) == [0, 0, 1, 1, 2, 2]


def test_send_to_unknown_topic_or_partition_fails(embedded_cluster):
    embedded_cluster.create_topic("t", partitions=2)
    producer = embedded_cluster.producer()
    with pytest.raises(TopicNotFoundError):
        producer.send("missing", 0, batch_of(b"a"))
    with pytest.raises(ClusterError, match="2 partitions"):
        producer.send("t", 2, batch_of(b"a"))
    assert producer.partitions_for("t") == 2


def test_create_topic_twice_raises_topic_exists(embedded_cluster):
    embedded_cluster.create_topic("t", partitions=2, config={"cleanup.policy": "compact"})
    with pytest.raises(TopicExistsError, match="'t'"):
        embedded_cluster.create_topic("t")
    assert embedded_cluster.topics()["t"].partitions == 2


def test_admin_create_topics_creates_the_others_when_one_exists(embedded_cluster):
    embedded_cluster.create_topic("a")
    admin = embedded_cluster.admin()
    with pytest.raises(TopicExistsError, match="'a'"):
        admin.create_topics({"a": (1, {}), "b": (3, {"retention.ms": "-1"})})
    assert admin.describe_topics(["b"])["b"].config == {"retention.ms": "-1"}


def test_invalid_topic_requests_are_refused(embedded_cluster):
    with pytest.raises(ClusterError):
        embedded_cluster.create_topic("bad name")
    with pytest.raises(ClusterError):
        embedded_cluster.create_topic("t", partitions=0)


def test_describe_never_creates_a_topic(embedded_cluster):
    admin = embedded_cluster.admin()
    assert admin.describe_topics(["ghost"]) == {}
    assert "ghost" not in embedded_cluster.topics()


def test_topics_lists_partitions_and_configs(embedded_cluster):
    embedded_cluster.create_topic("t", partitions=3, config={"cleanup.policy": "delete"})
    description = embedded_cluster.topics()["t"]
    assert (description.name, description.partitions, dict(description.config)) == (
        "t",
        3,
        {"cleanup.policy": "delete"},
    )


def test_alter_topic_config_sets_only_the_given_keys(embedded_cluster):
    embedded_cluster.create_topic("t", config={"cleanup.policy": "compact"})
    admin = embedded_cluster.admin()
    admin.alter_topic_config("t", {"retention.ms": "1000"})
    assert embedded_cluster.topics()["t"].config == {"cleanup.policy": "compact", "retention.ms": "1000"}
    with pytest.raises(TopicNotFoundError):
        admin.alter_topic_config("ghost", {"retention.ms": "1"})


def test_create_partitions_grows_a_topic_and_keeps_its_records(embedded_cluster):
    embedded_cluster.create_topic("t", partitions=2)
    embedded_cluster.produce("t", None, b"v", partition=1)
    embedded_cluster.create_partitions("t", 5)
    assert embedded_cluster.topics()["t"].partitions == 5
    embedded_cluster.produce("t", None, b"w", partition=4)
    assert [(r.partition, r.value) for r in embedded_cluster.read("t")] == [(1, b"v"), (4, b"w")]


def test_create_partitions_never_shrinks(embedded_cluster):
    embedded_cluster.create_topic("t", partitions=3)
    with pytest.raises(ClusterError, match="only be added"):
        embedded_cluster.create_partitions("t", 3)
    with pytest.raises(ClusterError):
        embedded_cluster.admin().create_partitions({"t": 2})
    with pytest.raises(TopicNotFoundError):
        embedded_cluster.create_partitions("ghost", 2)


def test_delete_topic_removes_it_and_its_records(embedded_cluster):
    embedded_cluster.create_topic("t")
    embedded_cluster.produce("t", None, b"v")
    embedded_cluster.delete_topic("t")
    assert "t" not in embedded_cluster.topics()
    with pytest.raises(TopicNotFoundError):
        embedded_cluster.read("t")
    with pytest.raises(TopicNotFoundError):
        embedded_cluster.delete_topic("t")
    embedded_cluster.create_topic("t")
    assert embedded_cluster.read("t") == []


def test_list_offsets_and_delete_records(embedded_cluster):
    embedded_cluster.create_topic("t")
    embedded_cluster.producer().send("t", 0, batch_of(*[b"v"] * 5))
    admin = embedded_cluster.admin()
    tp = TopicPartition("t", 0)
    assert admin.list_offsets([tp]) == {tp: (0, 5)}
    admin.delete_records({tp: 3})
    assert admin.list_offsets([tp]) == {tp: (3, 5)}
    assert [r.offset for r in embedded_cluster.read("t")] == [3, 4]
    with pytest.raises(ClusterError):
        admin.delete_records({tp: 6})
    with pytest.raises(ClusterError):
        admin.list_offsets([TopicPartition("t", 1)])


def test_a_position_before_the_log_start_is_reset(embedded_cluster):
    embedded_cluster.create_topic("t")
    embedded_cluster.producer().send("t", 0, batch_of(*[b"%d" % i for i in range(5)]))
    tp = TopicPartition("t", 0)
    consumer = embedded_cluster.consumer(None, {"auto.offset.reset": "earliest"})
    consumer.assign([tp])
    consumer.seek(tp, 1)
    embedded_cluster.admin().delete_records({tp: 4})
    assert fetch_all(consumer, tp) == [(4, b"4")]


def test_committed_offsets_are_kept_per_group(embedded_cluster):
    embedded_cluster.create_topic("t", partitions=2)
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    consumer = embedded_cluster.consumer("g1")
    consumer.commit({tp0: 7})
    assert consumer.committed([tp0, tp1]) == {tp0: 7}
    admin = embedded_cluster.admin()
    assert admin.committed_offsets("g1", [tp0, tp1]) == {tp0: 7}
    assert admin.committed_offsets("g2", [tp0]) == {}


def test_a_consumer_starts_at_the_committed_offset(embedded_cluster):
    embedded_cluster.create_topic("t")
    embedded_cluster.producer().send("t", 0, batch_of(b"0", b"1", b"2"))
    tp = TopicPartition("t", 0)
    embedded_cluster.consumer("g").commit({tp: 2})
    consumer = embedded_cluster.consumer("g", {"auto.offset.reset": "earliest"})
    consumer.assign([tp])
    assert consumer.position(tp) == 2
    assert fetch_all(consumer, tp) == [(2, b"2")]


def test_end_offsets_of_a_consumer(embedded_cluster):
    embedded_cluster.create_topic("t")
    embedded_cluster.producer().send("t", 0, batch_of(b"0", b"1"))
    tp = TopicPartition("t", 0)
    assert embedded_cluster.consumer(None).end_offsets([tp]) == {tp: 2}


def test_pause_stops_fetching_a_partition_until_resume(embedded_cluster):
    embedded_cluster.create_topic("t", partitions=2)
    producer = embedded_cluster.producer()
    producer.send("t", 0, batch_of(b"a"))
    producer.send("t", 1, batch_of(b"b"))
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    consumer = embedded_cluster.consumer(None, {"auto.offset.reset": "earliest"})
    consumer.assign([tp0, tp1])
    consumer.pause([tp0])
    assert consumer.paused() == [tp0]
    assert [tp for tp, _ in consumer.poll(0.0)] == [tp1]
    assert consumer.poll(0.0) == []
    consumer.resume([tp0])
    assert consumer.paused() == []
    assert [tp for tp, _ in consumer.poll(0.0)] == [tp0]


def test_fail_next_fails_the_next_calls_then_recovers(embedded_cluster):
    embedded_cluster.create_topic("t")
    producer = embedded_cluster.producer()
    embedded_cluster.fail_next("send", times=2)
    for _ in range(2):
        with pytest.raises(ClusterError) as failure:
            producer.send("t", 0, batch_of(b"a"))
        assert failure.value.retriable
    producer.send("t", 0, batch_of(b"b"))
    assert [r.value for r in embedded_cluster.read("t")] == [b"b"]


def test_fail_next_raises_the_given_error_before_doing_anything(embedded_cluster):
    admin = embedded_cluster.admin()
    embedded_cluster.fail_next("create_topics", error=TopicExistsError("boom"))
    with pytest.raises(TopicExistsError, match="boom"):
        admin.create_topics({"t": (1, {})})
    assert embedded_cluster.topics() == {}
    admin.create_topics({"t": (1, {})})
    assert "t" in embedded_cluster.topics()


def test_fail_next_rejects_an_unknown_operation(embedded_cluster):
    with pytest.raises(ValueError, match="unknown operation"):
        embedded_cluster.fail_next("explode")


def test_a_closed_cluster_refuses_requests():
    cluster = EmbeddedCluster()
    cluster.create_topic("t")
    consumer = cluster.consumer(None)
    cluster.close()
    with pytest.raises(ClusterError, match="closed"):
        cluster.produce("t", None, b"v")
    with pytest.raises(ClusterError, match="closed"):
        consumer.poll(0.0)


def test_clients_implement_the_cluster_port(embedded_cluster):
    from kstreams.cluster import Admin, Cluster, Consumer, Producer

    assert isinstance(embedded_cluster, Cluster)
    assert isinstance(embedded_cluster.admin(), Admin)
    assert isinstance(embedded_cluster.consumer("g"), Consumer)
    assert isinstance(embedded_cluster.producer(), Producer)


def test_delete_records_up_to_the_end(embedded_cluster):
    embedded_cluster.create_topic("t")
    embedded_cluster.producer().send("t", 0, batch_of(b"a", b"b"))
    tp = TopicPartition("t", 0)
    admin = embedded_cluster.admin()
    admin.delete_records({tp: -1})
    assert admin.list_offsets([tp]) == {tp: (2, 2)}
    assert embedded_cluster.read("t") == []
