"""RecordBuffer: FIFO order across batches, pop limits, byte accounting, two-thread safety."""

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kstreams._native.record_batch import RecordBatch
from kstreams._native.record_buffer import RecordBuffer


def batch_of(offsets: range, timestamps: list[int] | None = None) -> RecordBatch:
    keys = [f"k{o}".encode() for o in offsets]
    values = [f"value-{o}".encode() for o in offsets]
    ts = timestamps if timestamps is not None else [o * 10 for o in offsets]
    return RecordBatch.from_columns(keys, values, ts, partitions=0, offsets=list(offsets))


def test_empty_buffer() -> None:
    buf = RecordBuffer()
    assert len(buf) == 0
    assert buf.bytes_held == 0
    assert buf.head_timestamp == -1
    assert buf.head_offset == -1
    assert len(buf.pop(10)) == 0
    assert buf.clear() == 0


def test_pop_is_fifo_across_batches() -> None:
    buf = RecordBuffer()
    buf.push(batch_of(range(0, 3)))
    buf.push(RecordBatch.empty())
    buf.push(batch_of(range(3, 5)))
    buf.push(batch_of(range(5, 9)))
    assert len(buf) == 9
    popped: list[int] = []
    while len(buf):
        popped.extend(buf.pop(2).offsets_array().tolist())
    assert popped == list(range(9))


def test_pop_within_one_batch_and_across_batches_returns_the_records() -> None:
    buf = RecordBuffer()
    first = batch_of(range(0, 4))
    buf.push(first)
    buf.push(batch_of(range(4, 6)))
    assert buf.pop(3).to_list() == first.slice(0, 3).to_list()
    across = buf.pop(10)
    assert across.offsets_array().tolist() == [3, 4, 5]
    assert across.keys() == [b"k3", b"k4", b"k5"]


def test_pop_respects_max_records() -> None:
    buf = RecordBuffer()
    buf.push(batch_of(range(0, 10)))
    assert len(buf.pop(4)) == 4
    assert len(buf) == 6
    assert len(buf.pop(0)) == 0
    assert len(buf) == 6


def test_max_timestamp_stops_before_a_later_record() -> None:
    buf = RecordBuffer()
    buf.push(batch_of(range(0, 3), [10, 20, 30]))
    buf.push(batch_of(range(3, 5), [25, 40]))
    assert buf.pop(100, max_timestamp=20).timestamps_array().tolist() == [10, 20]
    assert buf.head_timestamp == 30
    assert buf.pop(100, max_timestamp=35).timestamps_array().tolist() == [30, 25]
    assert buf.pop(100, max_timestamp=-1).timestamps_array().tolist() == [40]


def test_max_timestamp_always_returns_one_record_when_buffered() -> None:
    buf = RecordBuffer()
    buf.push(batch_of(range(0, 2), [100, 200]))
    assert buf.pop(10, max_timestamp=5).timestamps_array().tolist() == [100]
    assert buf.pop(10, max_timestamp=5).timestamps_array().tolist() == [200]


def test_head_timestamp_and_offset_follow_pops() -> None:
    buf = RecordBuffer()
    buf.push(batch_of(range(7, 10)))
    assert (buf.head_offset, buf.head_timestamp) == (7, 70)
    buf.pop(2)
    assert (buf.head_offset, buf.head_timestamp) == (9, 90)


def test_bytes_held_tracks_push_and_pop() -> None:
    buf = RecordBuffer()
    a = batch_of(range(0, 3))
    b = batch_of(range(3, 6))
    buf.push(a)
    buf.push(b)
    assert buf.bytes_held == a.nbytes + b.nbytes
    popped = buf.pop(4)
    assert buf.bytes_held == a.nbytes + b.nbytes - popped.nbytes
    buf.pop(10)
    assert buf.bytes_held == 0


def test_clear_drops_everything_and_reports_count() -> None:
    buf = RecordBuffer()
    buf.push(batch_of(range(0, 3)))
    buf.pop(1)
    buf.push(batch_of(range(3, 5)))
    assert buf.clear() == 4
    assert len(buf) == 0
    assert buf.bytes_held == 0
    assert buf.head_offset == -1


def test_popped_slice_outlives_buffer() -> None:
    buf = RecordBuffer()
    buf.push(batch_of(range(0, 3)))
    part = buf.pop(2)
    del buf
    assert part.offsets_array().tolist() == [0, 1]


def test_headers_survive_a_pop_across_batches() -> None:
    buf = RecordBuffer()
    buf.push(RecordBatch.from_records([(b"a", b"1", 1, 0, 0, [("h", b"x")])]))
    buf.push(RecordBatch.from_records([(b"b", b"2", 2, 0, 1, None)]))
    assert buf.pop(2).to_list() == [(b"a", b"1", 1, 0, 0, [("h", b"x")]), (b"b", b"2", 2, 0, 1, None)]


def test_push_rejects_none() -> None:
    with pytest.raises(TypeError):
        RecordBuffer().push(None)  # type: ignore[arg-type]


@pytest.mark.timeout(60)
def test_one_pusher_one_popper_every_record_once_in_order() -> None:
    total = 100_000
    per_batch = 97
    buf = RecordBuffer()
    pushed_all = threading.Event()
    errors: list[BaseException] = []

    def push() -> None:
        try:
            for start in range(0, total, per_batch):
                stop = min(start + per_batch, total)
                n = stop - start
                buf.push(
                    RecordBatch.from_columns(
                        [b"k"] * n, [b"v"] * n, np.arange(start, stop), offsets=np.arange(start, stop)
                    )
                )
        except BaseException as e:  # reported by the main thread
            errors.append(e)
        finally:
            pushed_all.set()

    popped: list[np.ndarray] = []
    count = 0

    def pop() -> None:
        nonlocal count
        try:
            while count < total:
                batch = buf.pop(251)
                if len(batch):
                    popped.append(batch.offsets_array().copy())
                    count += len(batch)
                elif pushed_all.is_set() and len(buf) == 0:
                    break
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=push), threading.Thread(target=pop)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=50)
    assert not any(t.is_alive() for t in threads)
    assert not errors
    offsets = np.concatenate(popped)
    assert offsets.tolist() == list(range(total))
    assert len(buf) == 0
    assert buf.bytes_held == 0


record_strategy = st.tuples(
    st.one_of(st.none(), st.binary(max_size=8)),
    st.one_of(st.none(), st.binary(max_size=8)),
    st.integers(0, 100),
    st.integers(0, 3),
    st.integers(0, 1000),
    st.one_of(
        st.none(), st.lists(st.tuples(st.text(max_size=3), st.one_of(st.none(), st.binary(max_size=3))))
    ),
)
operation = st.one_of(
    st.tuples(st.just("push"), st.lists(record_strategy, max_size=6)),
    st.tuples(st.just("pop"), st.integers(0, 8), st.integers(-1, 100)),
)


@settings(max_examples=50, deadline=None)
@given(st.lists(operation, max_size=30))
def test_buffer_behaves_like_a_list_fifo(ops: list[tuple]) -> None:
    buf = RecordBuffer()
    model: list[tuple] = []
    for op in ops:
        if op[0] == "push":
            buf.push(RecordBatch.from_records(op[1]))
            model.extend(op[1])
        else:
            _, max_records, max_ts = op
            n = 0
            while n < min(max_records, len(model)):
                if max_ts >= 0 and n > 0 and model[n][2] > max_ts:
                    break
                n += 1
            assert buf.pop(max_records, max_ts).to_list() == model[:n]
            del model[:n]
        assert len(buf) == len(model)
        assert buf.bytes_held == sum(len(r[0] or b"") + len(r[1] or b"") for r in model)
        assert buf.head_timestamp == (model[0][2] if model else -1)
        assert buf.head_offset == (model[0][4] if model else -1)
