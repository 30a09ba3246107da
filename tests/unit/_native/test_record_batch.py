"""RecordBatch: construction, access, derived batches, numpy views and Kafka's partitioner."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kstreams._native.record_batch import (
    RecordBatch,
    default_partition,
    murmur2,
    partitions_for_keys,
    partitions_for_offsets,
)

RECORDS = [
    (b"k1", b"v1", 10, 0, 100, None),
    (None, b"v2", 30, 1, 101, [("trace", b"abc"), ("empty", None)]),
    (b"k3", None, 20, 2, 102, None),
    (b"", b"", 40, 0, 103, None),
]


def make_batch() -> RecordBatch:
    return RecordBatch.from_records(RECORDS)


def test_from_records_round_trips_every_field() -> None:
    batch = make_batch()
    assert len(batch) == 4
    assert batch.to_list() == RECORDS
    assert list(batch) == RECORDS
    assert batch[1] == RECORDS[1]
    assert batch[-1] == RECORDS[-1]


def test_none_and_empty_keys_and_values_are_distinct() -> None:
    batch = make_batch()
    assert batch.key(1) is None
    assert batch.value(2) is None
    assert batch.key(3) == b""
    assert batch.value(3) == b""
    assert batch.keys() == [b"k1", None, b"k3", b""]
    assert batch.values() == [b"v1", b"v2", None, b""]


def test_accessors() -> None:
    batch = make_batch()
    assert batch.timestamp(1) == 30
    assert batch.partition(2) == 2
    assert batch.offset(0) == 100
    assert batch.headers(1) == [("trace", b"abc"), ("empty", None)]
    assert batch.headers(0) is None
    assert batch.has_headers


def test_index_out_of_range_raises() -> None:
    batch = make_batch()
    with pytest.raises(IndexError):
        batch[4]
    with pytest.raises(IndexError):
        batch.key(-5)


def test_headers_returned_are_copies() -> None:
    batch = make_batch()
    h = batch.headers(1)
    assert h is not None
    h.append(("x", b"y"))
    assert batch.headers(1) == [("trace", b"abc"), ("empty", None)]


def test_batch_without_headers_reports_none() -> None:
    batch = RecordBatch.from_records([(b"a", b"b", 1, 0, 0, None)])
    assert not batch.has_headers
    assert batch.headers(0) is None


def test_from_columns_with_scalar_fill() -> None:
    batch = RecordBatch.from_columns([b"a", None], [b"x", b"y"], [5, 6])
    assert batch.to_list() == [(b"a", b"x", 5, 0, -1, None), (None, b"y", 6, 0, -1, None)]
    batch = RecordBatch.from_columns([b"a"], [b"x"], np.array([7]), partitions=3, offsets=9)
    assert batch[0] == (b"a", b"x", 7, 3, 9, None)
    batch = RecordBatch.from_columns([b"a"], [b"x"], [7], partitions=np.int32(2), offsets=np.int64(5))
    assert batch[0] == (b"a", b"x", 7, 2, 5, None)


def test_from_columns_with_column_partitions_offsets_and_headers() -> None:
    batch = RecordBatch.from_columns(
        [b"a", b"b"],
        [b"x", None],
        [1, 2],
        partitions=[4, 5],
        offsets=np.array([10, 11]),
        headers=[None, [("h", b"v")]],
    )
    assert batch.to_list() == [(b"a", b"x", 1, 4, 10, None), (b"b", None, 2, 5, 11, [("h", b"v")])]


def test_from_columns_rejects_mismatched_lengths() -> None:
    with pytest.raises(ValueError):
        RecordBatch.from_columns([b"a"], [b"x", b"y"], [1, 2])
    with pytest.raises(ValueError):
        RecordBatch.from_columns([b"a"], [b"x"], [1], partitions=[1, 2])


def test_empty_batch() -> None:
    batch = RecordBatch.empty()
    assert len(batch) == 0
    assert batch.to_list() == []
    assert batch.nbytes == 0
    assert batch.first_offset == -1
    assert batch.last_offset == -1
    assert batch.max_timestamp == -1
    assert batch.timestamps_array().shape == (0,)


def test_direct_construction_is_refused() -> None:
    with pytest.raises(TypeError):
        RecordBatch()


def test_slice_shares_records_and_clamps_bounds() -> None:
    batch = make_batch()
    assert batch.slice(1, 3).to_list() == RECORDS[1:3]
    assert batch.slice(-4, 99).to_list() == RECORDS
    assert len(batch.slice(3, 1)) == 0
    inner = batch.slice(1, 4).slice(1, 2)
    assert inner.to_list() == [RECORDS[2]]
    assert batch.slice(1, 2).headers(0) == RECORDS[1][5]


def test_slice_outlives_parent() -> None:
    batch = make_batch()
    part = batch.slice(2, 4)
    del batch
    assert part.to_list() == RECORDS[2:]


def test_concat_keeps_order_and_headers() -> None:
    batch = make_batch()
    joined = RecordBatch.concat([batch.slice(2, 4), RecordBatch.empty(), batch.slice(0, 2)])
    assert joined.to_list() == RECORDS[2:] + RECORDS[:2]
    assert RecordBatch.concat([]).to_list() == []


def test_with_offsets_and_with_partition_copy_only_that_column() -> None:
    batch = make_batch()
    renumbered = batch.with_offsets(1000)
    assert renumbered.offsets_array().tolist() == [1000, 1001, 1002, 1003]
    assert renumbered.keys() == batch.keys()
    assert batch.offsets_array().tolist() == [100, 101, 102, 103]
    moved = batch.slice(1, 3).with_partition(7)
    assert moved.partitions_array().tolist() == [7, 7]
    assert moved.to_list() == [(*r[:3], 7, *r[4:]) for r in RECORDS[1:3]]
    assert batch.partitions_array().tolist() == [0, 1, 2, 0]


def test_nbytes_counts_key_and_value_bytes() -> None:
    batch = make_batch()
    assert batch.nbytes == 4 + 2 + 2 + 0
    assert batch.slice(1, 3).nbytes == 4


def test_numpy_views_are_read_only_and_typed() -> None:
    batch = make_batch().slice(1, 4)
    ts = batch.timestamps_array()
    assert ts.dtype == np.int64
    assert ts.tolist() == [30, 20, 40]
    assert batch.offsets_array().dtype == np.int64
    assert batch.partitions_array().dtype == np.int32
    with pytest.raises(ValueError):
        ts[0] = 1


def test_numpy_view_outlives_batch() -> None:
    ts = make_batch().timestamps_array()
    assert ts.tolist() == [10, 30, 20, 40]


def test_first_last_offset_and_max_timestamp() -> None:
    batch = make_batch()
    assert batch.first_offset == 100
    assert batch.last_offset == 103
    assert batch.max_timestamp == 40
    assert batch.slice(0, 3).max_timestamp == 30


def test_pickle_round_trip() -> None:
    batch = make_batch()
    assert pickle.loads(pickle.dumps(batch)).to_list() == RECORDS


def test_large_batch_round_trip() -> None:
    n = 10_000
    keys = [str(i).encode() for i in range(n)]
    values = [b"v" * (i % 50) for i in range(n)]
    batch = RecordBatch.from_columns(keys, values, np.arange(n), offsets=np.arange(n))
    assert batch.keys() == keys
    assert batch.values() == values
    assert batch.nbytes == sum(map(len, keys)) + sum(map(len, values))


# Values from Kafka's UtilsTest.testMurmur2 (org.apache.kafka.common.utils).
KAFKA_MURMUR2 = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "expected"), KAFKA_MURMUR2)
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_of_empty_input_is_defined() -> None:
    assert isinstance(murmur2(b""), int)


@pytest.mark.parametrize(("data", "expected"), KAFKA_MURMUR2)
def test_default_partition_is_positive_murmur_mod_n(data: bytes, expected: int) -> None:
    assert default_partition(data, 7) == (expected & 0x7FFFFFFF) % 7


def test_default_partition_rejects_non_positive_count() -> None:
    with pytest.raises(ValueError):
        default_partition(b"a", 0)


def test_partitions_for_keys_matches_default_partition_and_marks_null_keys() -> None:
    keys = [data for data, _ in KAFKA_MURMUR2] + [None]
    batch = RecordBatch.from_columns(keys, [b"v"] * len(keys), [0] * len(keys))
    parts = partitions_for_keys(batch.slice(0, len(keys)), 5)
    assert parts.dtype == np.int32
    assert parts.tolist() == [default_partition(k, 5) for k in keys[:-1]] + [-1]


def test_partitions_for_offsets_hashes_keys_held_end_to_end_like_default_partition() -> None:
    keys = [data for data, _ in KAFKA_MURMUR2] + [b""]
    offsets = np.cumsum([0] + [len(k) for k in keys], dtype=np.int64)
    parts = partitions_for_offsets(offsets, b"".join(keys), 5)
    assert parts.dtype == np.int32
    assert parts.tolist() == [default_partition(k, 5) for k in keys]
    assert partitions_for_offsets(np.zeros(1, dtype=np.int64), None, 5).tolist() == []


def test_partitions_for_offsets_refuses_offsets_outside_the_data() -> None:
    with pytest.raises(ValueError, match="outside a data buffer"):
        partitions_for_offsets(np.array([0, 4], dtype=np.int64), b"abc", 5)
    with pytest.raises(ValueError):
        partitions_for_offsets(np.array([0, 1], dtype=np.int64), b"a", 0)


batch_records = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=10)),
        st.one_of(st.none(), st.binary(max_size=10)),
        st.integers(-(2**40), 2**40),
        st.integers(0, 2**31 - 1),
        st.integers(-1, 2**62),
        st.one_of(
            st.none(), st.lists(st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=4))))
        ),
    ),
    max_size=12,
)


@settings(max_examples=50, deadline=None)
@given(batch_records, batch_records, st.integers(-3, 15), st.integers(-3, 15))
def test_slices_and_concat_behave_like_list_slices(a: list, b: list, start: int, stop: int) -> None:
    ba = RecordBatch.from_records(a)
    bb = RecordBatch.from_records(b)
    lo, hi = max(start, 0), max(min(stop, len(a)), max(start, 0))
    sliced = ba.slice(start, stop)
    assert sliced.to_list() == a[lo:hi]
    assert sliced.nbytes == sum(len(r[0] or b"") + len(r[1] or b"") for r in a[lo:hi])
    joined = RecordBatch.concat([sliced, bb, sliced])
    assert joined.to_list() == a[lo:hi] + b + a[lo:hi]
    assert joined.timestamps_array().tolist() == [r[2] for r in a[lo:hi] + b + a[lo:hi]]
    assert partitions_for_keys(joined, 3).tolist() == [
        -1 if r[0] is None else default_partition(r[0], 3) for r in a[lo:hi] + b + a[lo:hi]
    ]


def test_from_columns_accepts_read_only_arrays() -> None:
    """Arrow hands out read-only numpy views; building a batch must not need a copy of them."""
    import numpy as np

    timestamps = np.arange(3, dtype=np.int64)
    partitions = np.zeros(3, dtype=np.int32)
    for array in (timestamps, partitions):
        array.setflags(write=False)
    batch = RecordBatch.from_columns(
        [b"a", b"b", None], [b"1", None, b"3"], timestamps, partitions, timestamps
    )
    assert batch.to_list() == [
        (b"a", b"1", 0, 0, 0, None),
        (b"b", None, 1, 0, 1, None),
        (None, b"3", 2, 0, 2, None),
    ]
