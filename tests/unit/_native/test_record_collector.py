"""RecordCollector: per-partition order, changelog suppression, counters, concurrent senders."""

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kstreams._native.record_batch import RecordBatch
from kstreams._native.record_collector import RecordCollector


def drained(collector: RecordCollector) -> dict[tuple[str, int], list[tuple]]:
    return {(t, p): batch.to_list() for t, p, batch in collector.drain()}


def test_sink_partition_keeps_every_record_in_send_order() -> None:
    c = RecordCollector()
    c.send("out", 0, b"a", b"1", 10)
    c.send("out", 0, b"a", b"2", 11)
    c.send("out", 1, b"b", b"3", 12)
    c.send("out", 0, None, None, 13)
    assert drained(c) == {
        ("out", 0): [
            (b"a", b"1", 10, 0, -1, None),
            (b"a", b"2", 11, 0, -1, None),
            (None, None, 13, 0, -1, None),
        ],
        ("out", 1): [(b"b", b"3", 12, 1, -1, None)],
    }
    assert c.suppressed_total == 0


def test_changelog_keeps_newest_per_key_in_order_of_newest_writes() -> None:
    c = RecordCollector()
    c.register_changelog("app-store-changelog", 2)
    for i, key in enumerate([b"x", b"y", b"x", b"z", b"y", b"x"]):
        c.send("app-store-changelog", 2, key, f"v{i}".encode(), i)
    assert len(c) == 3
    assert c.suppressed_total == 3
    assert c.sent_total == 6
    assert drained(c) == {
        ("app-store-changelog", 2): [
            (b"z", b"v3", 3, 2, -1, None),
            (b"y", b"v4", 4, 2, -1, None),
            (b"x", b"v5", 5, 2, -1, None),
        ]
    }


def test_changelog_tombstone_supersedes_and_is_kept() -> None:
    c = RecordCollector()
    c.register_changelog("cl", 0)
    c.send("cl", 0, b"k", b"v", 1)
    c.send("cl", 0, b"k", None, 2)
    assert drained(c) == {("cl", 0): [(b"k", None, 2, 0, -1, None)]}


def test_null_keys_are_never_suppressed() -> None:
    c = RecordCollector()
    c.register_changelog("cl", 0)
    c.send("cl", 0, None, b"1", 1)
    c.send("cl", 0, None, b"2", 2)
    assert len(c) == 2
    assert c.suppressed_total == 0


def test_suppression_only_within_one_drain_interval() -> None:
    c = RecordCollector()
    c.register_changelog("cl", 0)
    c.send("cl", 0, b"k", b"1", 1)
    assert drained(c) == {("cl", 0): [(b"k", b"1", 1, 0, -1, None)]}
    c.send("cl", 0, b"k", b"2", 2)
    assert drained(c) == {("cl", 0): [(b"k", b"2", 2, 0, -1, None)]}
    assert c.suppressed_total == 0


def test_sink_partitions_untouched_by_changelog_registration() -> None:
    c = RecordCollector()
    c.register_changelog("cl", 0)
    c.send("cl", 1, b"k", b"1", 1)
    c.send("cl", 1, b"k", b"2", 2)
    c.send("sink", 0, b"k", b"1", 1)
    c.send("sink", 0, b"k", b"2", 2)
    assert c.is_changelog("cl", 0)
    assert not c.is_changelog("cl", 1)
    assert not c.is_changelog("sink", 0)
    result = drained(c)
    assert len(result[("cl", 1)]) == 2
    assert len(result[("sink", 0)]) == 2


def test_unregister_stops_suppression() -> None:
    c = RecordCollector()
    c.register_changelog("cl", 0)
    c.unregister_changelog("cl", 0)
    assert not c.is_changelog("cl", 0)
    c.send("cl", 0, b"k", b"1", 1)
    c.send("cl", 0, b"k", b"2", 2)
    assert len(c) == 2


def test_registering_after_records_suppresses_them_on_the_next_write() -> None:
    c = RecordCollector()
    c.send("cl", 0, b"k", b"1", 1)
    c.register_changelog("cl", 0)
    c.send("cl", 0, b"k", b"2", 2)
    assert drained(c) == {("cl", 0): [(b"k", b"2", 2, 0, -1, None)]}


def test_send_batch_appends_in_order_with_headers_and_target_partition() -> None:
    c = RecordCollector()
    batch = RecordBatch.from_records(
        [(b"a", b"1", 5, 9, 100, [("h", b"x")]), (None, b"2", 6, 9, 101, None), (b"c", None, 7, 9, 102, None)]
    )
    c.send("out", 0, b"first", b"0", 4)
    c.send_batch("out", 3, batch)
    c.send_batch("out", 0, batch.slice(1, 3))
    assert drained(c) == {
        ("out", 0): [
            (b"first", b"0", 4, 0, -1, None),
            (None, b"2", 6, 0, -1, None),
            (b"c", None, 7, 0, -1, None),
        ],
        ("out", 3): [
            (b"a", b"1", 5, 3, -1, [("h", b"x")]),
            (None, b"2", 6, 3, -1, None),
            (b"c", None, 7, 3, -1, None),
        ],
    }
    assert c.sent_total == 6


def test_send_batch_to_changelog_suppresses_within_the_batch() -> None:
    c = RecordCollector()
    c.register_changelog("cl", 0)
    c.send("cl", 0, b"b", b"old", 1)
    batch = RecordBatch.from_columns([b"a", b"b", b"a", None], [b"1", b"2", b"3", b"4"], [2, 3, 4, 5])
    c.send_batch("cl", 0, batch)
    assert c.suppressed_total == 2
    assert drained(c) == {
        ("cl", 0): [(b"b", b"2", 3, 0, -1, None), (b"a", b"3", 4, 0, -1, None), (None, b"4", 5, 0, -1, None)]
    }


def test_len_and_bytes_held_count_live_records() -> None:
    c = RecordCollector()
    c.register_changelog("cl", 0)
    c.send("cl", 0, b"k", b"12345", 1)
    c.send("cl", 0, b"k", b"12", 2)
    c.send("out", 0, b"kk", None, 3)
    assert len(c) == 2
    assert c.bytes_held == 3 + 2
    c.drain()
    assert len(c) == 0
    assert c.bytes_held == 0
    assert c.drain() == []


def test_hot_key_on_changelog_stays_bounded_and_keeps_headers() -> None:
    c = RecordCollector()
    c.register_changelog("cl", 0)
    c.send("cl", 0, b"cold", b"c", 0, [("h", b"cold")])
    for i in range(20_000):
        c.send("cl", 0, b"hot", str(i).encode(), i)
    assert len(c) == 2
    assert c.suppressed_total == 19_999
    assert drained(c) == {
        ("cl", 0): [(b"cold", b"c", 0, 0, -1, [("h", b"cold")]), (b"hot", b"19999", 19_999, 0, -1, None)]
    }


def test_send_rejects_non_bytes_key() -> None:
    with pytest.raises(TypeError):
        RecordCollector().send("t", 0, "not-bytes", b"v", 1)  # type: ignore[arg-type]


@pytest.mark.timeout(60)
def test_concurrent_senders_lose_nothing() -> None:
    c = RecordCollector()
    c.register_changelog("cl", 0)
    per_thread = 5_000
    start = threading.Barrier(4, timeout=10)
    errors: list[BaseException] = []

    def sender(tid: int) -> None:
        try:
            start.wait()
            for i in range(per_thread):
                c.send("out", i % 2, f"{tid}".encode(), f"{tid}-{i}".encode(), i)
                # Distinct keys per thread on the changelog: nothing may be suppressed.
                c.send("cl", 0, f"{tid}-{i}".encode(), b"v", i)
            batch = RecordBatch.from_columns([b"b"] * 100, [f"{tid}".encode()] * 100, list(range(100)))
            c.send_batch("batched", tid % 2, batch)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    drains: list[list[tuple[str, int, RecordBatch]]] = []
    threads = [threading.Thread(target=sender, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    # Drain concurrently with the senders, as the polling thread does.
    while any(t.is_alive() for t in threads):
        drains.append(c.drain())
    for t in threads:
        t.join(timeout=30)
    drains.append(c.drain())
    assert not errors

    records: dict[tuple[str, int], list[tuple]] = {}
    for d in drains:
        for topic, partition, batch in d:
            records.setdefault((topic, partition), []).extend(batch.to_list())
    out = records[("out", 0)] + records[("out", 1)]
    assert len(out) == 4 * per_thread
    # Per sending thread, each partition sees that thread's records in send order.
    for p in (0, 1):
        for tid in range(4):
            seq = [int(v.split(b"-")[1]) for k, v, *_ in records[("out", p)] if k == f"{tid}".encode()]
            assert seq == list(range(p, per_thread, 2))
    assert len(records[("cl", 0)]) == 4 * per_thread
    assert len(records[("batched", 0)]) + len(records[("batched", 1)]) == 400
    assert c.sent_total == 4 * (2 * per_thread + 100)
    assert c.suppressed_total == 0
    assert len(c) == 0


def test_large_records_round_trip() -> None:
    c = RecordCollector()
    big = bytes(range(256)) * 1024
    c.send("out", 0, b"k", big, 1)
    c.send_batch("out", 0, RecordBatch.from_records([(big[:5000], big, 2, 0, 0, None)]))
    assert drained(c) == {("out", 0): [(b"k", big, 1, 0, -1, None), (big[:5000], big, 2, 0, -1, None)]}


def test_registering_over_duplicate_keys_counts_them_as_suppressed() -> None:
    c = RecordCollector()
    c.send("cl", 0, b"k", b"1", 1)
    c.send("cl", 0, b"k", b"2", 2)
    c.register_changelog("cl", 0)
    assert len(c) == 1
    assert c.suppressed_total == 1
    assert c.bytes_held == 2
    assert drained(c) == {("cl", 0): [(b"k", b"2", 2, 0, -1, None)]}


small_key = st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c", b""]))
send_op = st.tuples(
    st.just("send"),
    st.sampled_from([("cl", 0), ("out", 0), ("out", 1)]),
    st.lists(
        st.tuples(
            small_key,
            st.one_of(st.none(), st.binary(max_size=6)),
            st.integers(0, 50),
            st.one_of(st.none(), st.just([("h", b"1")])),
        ),
        min_size=1,
        max_size=5,
    ),
    st.booleans(),
)
collector_ops = st.lists(st.one_of(send_op, st.just(("drain",))), max_size=25)


@settings(max_examples=100, deadline=None)
@given(collector_ops)
def test_collector_matches_a_dict_of_lists_model(ops: list[tuple]) -> None:
    c = RecordCollector()
    c.register_changelog("cl", 0)
    model: dict[tuple[str, int], list[tuple]] = {}
    suppressed = sent = 0
    for op in ops:
        if op[0] == "drain":
            expected = {tp: recs for tp, recs in model.items() if recs}
            assert drained(c) == expected
            model = {}
            continue
        _, (topic, partition), records, as_batch = op
        sent += len(records)
        if as_batch:
            c.send_batch(
                topic, partition, RecordBatch.from_records([(k, v, t, 7, 7, h) for k, v, t, h in records])
            )
        else:
            for k, v, t, h in records:
                c.send(topic, partition, k, v, t, h)
        out = model.setdefault((topic, partition), [])
        for k, v, t, h in records:
            if topic == "cl" and k is not None:
                before = len(out)
                out[:] = [r for r in out if r[0] != k]
                suppressed += before - len(out)
            out.append((k, v, t, partition, -1, h))
        assert len(c) == sum(len(r) for r in model.values())
        assert c.bytes_held == sum(len(r[0] or b"") + len(r[1] or b"") for rs in model.values() for r in rs)
        assert c.suppressed_total == suppressed
        assert c.sent_total == sent


def test_suppression_stays_exact_across_compactions() -> None:
    c = RecordCollector()
    c.register_changelog("cl", 0)
    keys = [b"key-%d" % i for i in range(3000)]
    for round_ in range(4):
        c.send_batch(
            "cl", 0, RecordBatch.from_columns(keys, [b"%d" % round_] * len(keys), [round_] * len(keys))
        )
        for i in range(0, 3000, 7):
            c.send("cl", 0, keys[i], b"hot-%d" % round_, 10 + round_)
    assert len(c) == 3000
    assert c.suppressed_total == c.sent_total - 3000
    (topic, partition, batch), *rest = c.drain()
    assert not rest
    assert (topic, partition) == ("cl", 0)
    hot = set(range(0, 3000, 7))
    expected = [(keys[i], b"3", 3) for i in range(3000) if i not in hot] + [
        (keys[i], b"hot-3", 13) for i in sorted(hot)
    ]
    assert [(k, v, t) for k, v, t, *_ in batch.to_list()] == expected
