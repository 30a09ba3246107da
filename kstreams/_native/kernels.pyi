"""Batch kernels of the compiled processors: whole-batch loops that run without the GIL.

Each kernel gives exactly the per-record Python result (the built-in serdes, the DSL processors,
``kstreams.predicates``) or reports that it cannot: it returns None (``validate``: an index >= 0)
and has done nothing, so the caller runs that batch through the per-record path. Column encodings
are the module constants below; a JSON column holds JSON text.
"""

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from kstreams._native.record_batch import RecordBatch
from kstreams._native.record_cache import RecordCache

BYTES: int
STRING: int
LONG: int
INT: int
SHORT: int
DOUBLE: int
FLOAT: int
JSON: int

COUNT: int
SUM: int
MIN: int
MAX: int
REDUCE: int

def validate(batch: RecordBatch, key_enc: int, value_enc: int, fields: Sequence[tuple[int, str]] = ()) -> int:
    """Index of the first record whose key or value its serde would reject, or whose timestamp is
    negative; -1 when every record is fine. ``fields`` (side 0 key / 1 value, name): top-level
    JSON fields to capture while parsing; a valid batch then carries them to ``Predicate`` and
    ``project`` (``indexed_fields``)."""

def indexed_fields(batch: RecordBatch) -> list[tuple[int, str]] | None:
    """The (side, name) fields whose positions the batch carries, or None."""

class Predicate:
    """A compiled predicate (``kstreams.predicates.Predicate.nodes()``) over a batch."""

    def __init__(self, nodes: list[tuple[Any, ...]], root: int, key_enc: int, value_enc: int) -> None: ...
    def select(self, batch: RecordBatch, validated: bool = False) -> np.ndarray | None:
        """int32 indices of the records it holds for; None when some record needs Python.
        ``validated``: the batch's JSON columns passed ``validate`` (fields found without
        parsing the rest of each document)."""

def carry_headers(out: RecordBatch, src: RecordBatch, rows: Any = None) -> RecordBatch: ...
def take(batch: RecordBatch, indices: np.ndarray) -> RecordBatch:
    """The records at ``indices`` (int32), in that order, with their captured fields (headers
    are not carried)."""

def project(
    batch: RecordBatch, src_side: int, field: str | None, dst_side: int, validated: bool = False
) -> RecordBatch | None:
    """Key (dst_side 0) or value (1) replaced by the JSON text of a top-level field of the JSON key
    (src_side 0) or value (1); missing, null or non-object -> None. None: needs Python.
    ``validated``: the documents passed ``validate`` (a field is found without parsing the rest)."""

def convertible(src: int, dst: int) -> bool:
    """Whether ``convert`` can ever re-encode from src to dst."""

def convert(
    batch: RecordBatch, key_src: int, key_dst: int, value_src: int, value_dst: int
) -> RecordBatch | None:
    """Keys and values re-encoded as the dst serdes would write what the src serdes read (the
    same batch when nothing changes); None when some record needs Python."""

def split_partitions(
    batch: RecordBatch, num_partitions: int, round_robin: int
) -> tuple[list[tuple[int, RecordBatch]], int]:
    """Per output partition (Kafka's default partitioner; null keys round robin from
    ``round_robin``) the batch of its records in input order, and the next round-robin slot."""

def aggregate(
    cache: RecordCache,
    namespace: str,
    batch: RecordBatch,
    op: int,
    value_enc: int,
    store_enc: int,
    load: Callable[[bytes], bytes | None],
    windowed: bool = False,
    size_ms: int = 0,
    advance_ms: int = 0,
    grace_ms: int = 0,
    observed_time: int = -1,
    reducer: Callable[[Any, Any], Any] | None = None,
    timestamped: bool = False,
    notes: dict[bytes, Any] | None = None,
) -> tuple[int, int] | None:
    """COUNT/SUM/MIN/MAX/REDUCE per key (per window) of a batch into a record-cache namespace, as
    the DSL's aggregate processors would record by record; old aggregates from the cache, else from
    ``load(cache_key)``. REDUCE calls ``reducer(aggregate, value)`` per record with the GIL. Each
    key's newest aggregate is put once, in last-update order, with its last record's timestamp;
    ``timestamped``: the store's bytes are ValueAndTimestamp's (8-byte timestamp first) and each
    aggregate carries the largest timestamp of the records that made it. ``notes`` (a caching
    layer's header notes) then hold each written entry's last record's headers (none: no note).
    Returns (observed_time, dropped) or None (nothing written: a record needs the Python path)."""

def aggregate_uncached(
    batch: RecordBatch,
    op: int,
    value_enc: int,
    store_enc: int,
    load_many: Callable[[list[bytes]], list[bytes | None]],
    windowed: bool = False,
    size_ms: int = 0,
    advance_ms: int = 0,
    grace_ms: int = 0,
    observed_time: int = -1,
    reducer: Callable[[Any, Any], Any] | None = None,
    timestamped: bool = False,
    forward: bool = False,
) -> tuple[int, int, RecordBatch, RecordBatch | None] | None:
    """``aggregate`` for a store without a cache: old aggregates from one ``load_many(cache_keys)``;
    returns (observed_time, dropped, changes, updates): ``changes`` each slot's newest aggregate
    once, in last-update order, as changelog records (windowed keys in the changelog's layout)
    with the timestamp and offset of the slot's last record; ``updates`` (with ``forward``, not
    windowed) every update in record order as the per-record path forwards it (record key, the
    aggregate without timestamp, the aggregate's timestamp, the record's headers). None: a record
    needs the Python path."""

def decode_numbers(batch: RecordBatch, side: int, enc: int) -> tuple[np.ndarray, np.ndarray]:
    """Keys (side 0) or values (1) of a numeric encoding as int64 or float64, and a null mask."""

def decode_objects(batch: RecordBatch, side: int, enc: int) -> list[Any] | None:
    """Keys (side 0) or values (1) as the built-in serde of ``enc`` reads each (None: a null); None
    when a record does not read that way, and for JSON."""

def encode_numbers(values: Sequence[Any] | np.ndarray, enc: int) -> list[bytes]:
    """Each value in LONG, INT or DOUBLE big-endian bytes, as the built-in serdes write them."""

def window_key_runs(keys: Iterable[bytes], start_from_end: int) -> list[tuple[int, list[bytes]]]:
    """Consecutive runs of keys with the same window start (the big-endian long
    ``start_from_end`` bytes before a key's end): ``[(start, [key, ...])]``."""

def window_change_runs(
    changes: Iterable[tuple[bytes, bytes | None]], start_from_end: int, strip: int = 0
) -> list[tuple[int, dict[bytes, bytes | None]]]:
    """Consecutive runs of (key, value) changes with the same window start:
    ``[(start, {key: value})]`` (a later change of a key in a run wins); ``strip`` bytes are cut
    from the end of each key."""
