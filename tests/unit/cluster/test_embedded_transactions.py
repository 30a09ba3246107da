"""EmbeddedCluster transactions: read_committed visibility, the last stable offset, fencing and
offsets committed with the transaction."""

from __future__ import annotations

import pytest

from kstreams._native.record_batch import RecordBatch
from kstreams.cluster import ClusterError, ProducerFencedError, TopicPartition


def batch_of(*values: bytes) -> RecordBatch:
    return RecordBatch.from_columns([None] * len(values), list(values), [1] * len(values))


def values(cluster, topic: str = "t", isolation: str = "read_committed") -> list[bytes | None]:
    return [r.value for r in cluster.read(topic, isolation)]


def transactional(cluster, tid: str = "tx"):
    producer = cluster.producer({"transactional.id": tid})
    producer.init_transactions()
    return producer


@pytest.fixture
def topic(embedded_cluster) -> str:
    embedded_cluster.create_topic("t")
    return "t"


def test_committed_transaction_becomes_visible(embedded_cluster, topic):
    producer = transactional(embedded_cluster)
    producer.begin_transaction()
    producer.send(topic, 0, batch_of(b"a", b"b"))
    assert values(embedded_cluster) == []
    producer.commit_transaction()
    assert values(embedded_cluster) == [b"a", b"b"]


def test_aborted_records_are_never_visible_to_read_committed(embedded_cluster, topic):
    producer = transactional(embedded_cluster)
    producer.begin_transaction()
    producer.send(topic, 0, batch_of(b"aborted"))
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send(topic, 0, batch_of(b"kept"))
    producer.commit_transaction()
    assert values(embedded_cluster) == [b"kept"]
    assert values(embedded_cluster, isolation="read_uncommitted") == [b"aborted", b"kept"]
    consumer = embedded_cluster.consumer(
        None, {"isolation.level": "read_committed", "auto.offset.reset": "earliest"}
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    assert [b.values() for _, b in consumer.poll(0.0)] == [[b"kept"]]
    # Markers take offsets, as in Kafka: aborted batch 0, its marker 1, kept 2, marker 3.
    assert consumer.position(tp) == 4


def test_open_transaction_holds_read_committed_at_the_last_stable_offset(embedded_cluster, topic):
    tp = TopicPartition(topic, 0)
    embedded_cluster.produce(topic, None, b"before")
    producer = transactional(embedded_cluster)
    producer.begin_transaction()
    producer.send(topic, 0, batch_of(b"open"))
    embedded_cluster.produce(topic, None, b"after")
    admin = embedded_cluster.admin()
    assert admin.list_offsets([tp], "read_committed") == {tp: (0, 1)}
    assert admin.list_offsets([tp], "read_uncommitted") == {tp: (0, 3)}
    committed = embedded_cluster.consumer(
        None, {"isolation.level": "read_committed", "auto.offset.reset": "earliest"}
    )
    uncommitted = embedded_cluster.consumer(None, {"auto.offset.reset": "earliest"})
    for consumer in (committed, uncommitted):
        consumer.assign([tp])
    assert [b.values() for _, b in committed.poll(0.0)] == [[b"before"]]
    assert committed.end_offsets([tp]) == {tp: 1}
    assert [b.values() for _, b in uncommitted.poll(0.0)] == [[b"before", b"open", b"after"]]
    producer.commit_transaction()
    assert [b.values() for _, b in committed.poll(0.0)] == [[b"open", b"after"]]
    assert values(embedded_cluster) == [b"before", b"open", b"after"]


def test_init_transactions_fences_the_older_producer_and_aborts_its_transaction(embedded_cluster, topic):
    old = transactional(embedded_cluster)
    old.begin_transaction()
    old.send(topic, 0, batch_of(b"zombie"))
    new = transactional(embedded_cluster)
    with pytest.raises(ProducerFencedError):
        old.send(topic, 0, batch_of(b"late"))
    with pytest.raises(ProducerFencedError):
        old.commit_transaction()
    new.begin_transaction()
    new.send(topic, 0, batch_of(b"fresh"))
    new.commit_transaction()
    assert values(embedded_cluster) == [b"fresh"]


def test_offsets_are_committed_with_the_transaction(embedded_cluster, topic):
    source = TopicPartition("in", 0)
    embedded_cluster.create_topic("in")
    admin = embedded_cluster.admin()
    producer = transactional(embedded_cluster)
    producer.begin_transaction()
    producer.send(topic, 0, batch_of(b"out"))
    producer.send_offsets_to_transaction({source: 5}, "g")
    assert admin.committed_offsets("g", [source]) == {}
    producer.abort_transaction()
    assert admin.committed_offsets("g", [source]) == {}
    producer.begin_transaction()
    producer.send_offsets_to_transaction({source: 7}, "g")
    producer.commit_transaction()
    assert admin.committed_offsets("g", [source]) == {source: 7}


def test_transactional_producer_needs_init_and_begin(embedded_cluster, topic):
    producer = embedded_cluster.producer({"transactional.id": "tx"})
    with pytest.raises(ClusterError, match="init_transactions"):
        producer.begin_transaction()
    producer.init_transactions()
    with pytest.raises(ClusterError, match="begin_transaction"):
        producer.send(topic, 0, batch_of(b"a"))
    with pytest.raises(ClusterError, match="no open transaction"):
        producer.commit_transaction()
    with pytest.raises(ClusterError, match=r"transactional\.id"):
        embedded_cluster.producer().init_transactions()


def test_closing_a_producer_aborts_its_open_transaction(embedded_cluster, topic):
    producer = transactional(embedded_cluster)
    producer.begin_transaction()
    producer.send(topic, 0, batch_of(b"a"))
    producer.close()
    tp = TopicPartition(topic, 0)
    # The marker moved the last stable offset past the aborted batch.
    assert embedded_cluster.admin().list_offsets([tp], "read_committed") == {tp: (0, 2)}
    assert values(embedded_cluster) == []


def test_failed_commit_leaves_the_transaction_open_for_a_retry(embedded_cluster, topic):
    producer = transactional(embedded_cluster)
    producer.begin_transaction()
    producer.send(topic, 0, batch_of(b"a"))
    embedded_cluster.fail_next("commit_transaction")
    with pytest.raises(ClusterError) as failure:
        producer.commit_transaction()
    assert failure.value.retriable
    assert values(embedded_cluster) == []
    producer.commit_transaction()
    assert values(embedded_cluster) == [b"a"]


def test_transactions_of_two_producers_interleave_in_one_partition(embedded_cluster, topic):
    first = transactional(embedded_cluster, "tx-1")
    second = transactional(embedded_cluster, "tx-2")
    first.begin_transaction()
    second.begin_transaction()
    first.send(topic, 0, batch_of(b"1a"))
    second.send(topic, 0, batch_of(b"2a"))
    first.send(topic, 0, batch_of(b"1b"))
    second.commit_transaction()
    # first is still open and wrote first: nothing is stable yet.
    assert values(embedded_cluster) == []
    first.abort_transaction()
    assert values(embedded_cluster) == [b"2a"]


def test_a_transaction_left_open_times_out_and_unblocks_read_committed(embedded_cluster, topic):
    producer = embedded_cluster.producer({"transactional.id": "tx", "transaction.timeout.ms": 200})
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, 0, batch_of(b"abandoned"))
    embedded_cluster.produce(topic, None, b"after")
    consumer = embedded_cluster.consumer(
        None, {"isolation.level": "read_committed", "auto.offset.reset": "earliest"}
    )
    consumer.assign([TopicPartition(topic, 0)])
    # The blocked poll wakes when the transaction times out and is aborted.
    got = consumer.poll(10.0)
    assert [b.values() for _, b in got] == [[b"after"]]
    with pytest.raises(ProducerFencedError):
        producer.commit_transaction()
