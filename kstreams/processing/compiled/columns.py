"""Column decoding: a batch's key or value column as the Python objects the built-in serde of its
encoding would make, and ``Columns``, records held as Python objects column by column.

The kernels number a batch's columns ``KEYS`` and ``VALUES`` and name a column's bytes by an
encoding (``kernels.BYTES``, ``STRING``, ``LONG``, ...: the built-in serdes, ``encoding_of``).
Below a chain of Python functions the records are Python objects, not bytes: steps then take
``Columns`` (``Step.run_columns``). Decoding a column gives exactly what the per-record path's
deserializer gives for each record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kstreams._native import kernels
from kstreams._native.record_batch import RecordBatch
from kstreams.serdes import (
    BytesSerde,
    DoubleSerde,
    FloatSerde,
    IntegerSerde,
    JsonSerde,
    LongSerde,
    ShortSerde,
    StringSerde,
    json_loads,
)

if TYPE_CHECKING:
    pass

__all__ = [
    "KEYS",
    "VALUES",
    "Columns",
    "decode_column",
    "decode_whole_column",
    "encoding_of",
]

_SERDE_ENCODINGS: dict[type, int] = {
    BytesSerde: kernels.BYTES,
    StringSerde: kernels.STRING,
    LongSerde: kernels.LONG,
    IntegerSerde: kernels.INT,
    ShortSerde: kernels.SHORT,
    DoubleSerde: kernels.DOUBLE,
    FloatSerde: kernels.FLOAT,
    JsonSerde: kernels.JSON,
}

# How a column's bytes turn back into the Python objects the serde of its encoding would make.
_DECODERS: dict[int, Any] = {enc: serde() for serde, enc in _SERDE_ENCODINGS.items()}


# A batch's columns, as the kernels number them.
KEYS = 0
VALUES = 1

# The big-endian numbers of the fixed-width encodings, as numpy reads a column of them at once.
_NUMBER_DTYPES: dict[int, str] = {
    kernels.LONG: ">i8",
    kernels.INT: ">i4",
    kernels.SHORT: ">i2",
    kernels.DOUBLE: ">f8",
    kernels.FLOAT: ">f4",
}


def decode_column(enc: int, topic: str | None, raw: list[bytes | None]) -> list[Any]:
    """A column's bytes as the built-in serde of ``enc`` reads them, for a batch the source's
    compiled segment accepted (so every value decodes)."""
    if enc == kernels.BYTES:
        return raw
    if enc == kernels.STRING:
        return _map_present(bytes.decode, raw)
    if enc == kernels.JSON:
        return _map_present(json_loads, raw)
    dtype = _NUMBER_DTYPES.get(enc)
    if dtype is not None:
        try:
            joined = b"".join(raw)  # type: ignore[arg-type]  # a None raises: decoded one by one below
        except TypeError:
            pass
        else:
            # Every value has the encoding's width (the batch was validated), so the concatenation
            # is an array of big-endian numbers; tolist() makes the ints and floats unpack would.
            return np.frombuffer(joined, dtype=dtype).tolist()  # type: ignore[no-any-return]
    deserialize = _DECODERS[enc].deserialize
    return [deserialize(topic, b) for b in raw]


def decode_whole_column(deserializer: object, batch: RecordBatch, side: int) -> list[Any] | None:
    """The keys (``side`` KEYS) or values (VALUES) of a batch as ``deserializer`` reads each
    record, decoded at once when it is a built-in serde (in C, from the batch's memory, but for
    JSON); None when it is not, or when a record does not decode (wrong width, bad UTF-8 or
    JSON): the caller then deserializes record by record, so that record's error is raised, and
    handled, where it is."""
    enc = encoding_of(deserializer)
    if enc is None:
        return None
    if enc != kernels.JSON:
        return kernels.decode_objects(batch, side, enc)  # type: ignore[no-any-return]
    try:
        return decode_column(enc, None, batch.keys() if side == KEYS else batch.values())
    except Exception:
        return None


def _map_present(decode: Callable[[bytes], Any], raw: list[bytes | None]) -> list[Any]:
    """``decode`` over a column, None staying None. ``map`` iterates in C: without nulls (the usual
    column) there is no per-record Python bytecode at all."""
    try:
        return list(map(decode, raw))  # type: ignore[arg-type]  # a None raises, then handled below
    except (TypeError, AttributeError):
        if None not in raw:
            raise
        return [None if b is None else decode(b) for b in raw]


def encoding_of(serde: object) -> int | None:
    """The kernel encoding of a built-in serde (exact type: a subclass may behave differently)."""
    return _SERDE_ENCODINGS.get(type(serde))


@dataclass(slots=True)
class Columns:
    """Records as Python objects, column by column (keys and values as the serdes made them);
    ``raw_keys``: the bytes the keys were decoded from (in the key encoding of the batch these
    columns came from), when nothing on the way changed the keys."""

    keys: list[Any]
    values: list[Any]
    timestamps: list[int]
    offsets: list[int]
    raw_keys: list[bytes | None] | None = None
    # The timestamp and offset columns as the int64 arrays they came from, when known: batch steps
    # take them as they are instead of converting the lists back.
    timestamps_array: Any = None
    offsets_array: Any = None
    # Where the records' headers are, when some record has any (None: no record has): the batch
    # they came from and their indices in it (an int32 array; None: record i is the batch's
    # record i), so sinks give their records those headers without decoding them.
    headers_from: tuple[RecordBatch, Any] | None = None

    def record_headers(self) -> list[Any] | None:
        """Each record's headers as the per-record path gives them, or None when none has any."""
        if self.headers_from is None:
            return None
        batch, rows = self.headers_from
        picked = range(len(batch)) if rows is None else rows.tolist()
        return [batch.headers(i) for i in picked]

    def headers_of(self, i: int) -> Any:
        """Record ``i``'s headers as the per-record path gives them (None: none)."""
        if self.headers_from is None:
            return None
        batch, rows = self.headers_from
        return batch.headers(i if rows is None else int(rows[i]))

    def headers_at(self, indices: Any) -> tuple[RecordBatch, Any] | None:
        """``headers_from`` for records made from these columns' records at ``indices`` (an
        integer array), for a sink's ``send_batch``."""
        if self.headers_from is None:
            return None
        batch, rows = self.headers_from
        picked = np.asarray(indices, dtype=np.int32) if rows is None else rows[indices]
        return batch, picked

    def arrays(self) -> tuple[Any, Any]:
        """(timestamps, offsets) as int64 arrays."""
        timestamps, offsets = self.timestamps_array, self.offsets_array
        if timestamps is None:
            timestamps = np.asarray(self.timestamps, dtype=np.int64)
        if offsets is None:
            offsets = np.asarray(self.offsets, dtype=np.int64)
        return timestamps, offsets
