"""The compiled kernels over Arrow columns: what ``kstreams.spark.functions`` runs inside Spark.

Each function takes whole Arrow arrays and returns one, equal record by record to the Python path
(the built-in serdes of ``kstreams.serdes`` and the predicates of ``kstreams.predicates``). The
kernels run first; where a kernel cannot take a chunk of records (malformed bytes, JSON numbers
outside int64, escapes it does not decode), that chunk goes through the Python path, record by
record. A record the serde rejects raises ``SerializationException`` (``on_error="fail"``) or
gives null (``on_error="null"``), the per-record choice of the runtime's deserialization handlers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kstreams._native import kernels
from kstreams._native.record_batch import RecordBatch, partitions_for_offsets
from kstreams.errors import ConfigException, SerializationException
from kstreams.predicates import Predicate
from kstreams.serdes import Serde, Serdes, json_loads

__all__ = [
    "NUMERIC_SERDES",
    "SERDES",
    "decode_column",
    "encode_column",
    "json_field_column",
    "partition_column",
    "predicate_column",
]

logger = logging.getLogger(__name__)

# Serde name -> (kernel encoding, the serde the Python path uses).
SERDES: dict[str, tuple[int, Serde]] = {
    "bytes": (kernels.BYTES, Serdes.bytes()),
    "string": (kernels.STRING, Serdes.string()),
    "long": (kernels.LONG, Serdes.long()),
    "int": (kernels.INT, Serdes.int()),
    "short": (kernels.SHORT, Serdes.short()),
    "double": (kernels.DOUBLE, Serdes.double()),
    "float": (kernels.FLOAT, Serdes.float()),
    "json": (kernels.JSON, Serdes.json()),
}
NUMERIC_SERDES = {
    "long": pa.int64(),
    "int": pa.int32(),
    "short": pa.int16(),
    "double": pa.float64(),
    "float": pa.float32(),
}
# Records a kernel retries at a time after it refused a whole batch: one bad record sends only
# its chunk through the Python path.
_CHUNK = 1024
_json_text = Serdes.json()


def _serde(name: str) -> tuple[int, Serde]:
    try:
        return SERDES[name]
    except KeyError:
        raise ConfigException(f"Unknown serde {name!r}: use one of {sorted(SERDES)}.") from None


def _check_on_error(on_error: str) -> None:
    if on_error not in ("fail", "null"):
        raise ConfigException(f"on_error is {on_error!r}: use 'fail' (raise) or 'null'.")


def _bytes_list(column: pa.Array | None, rows: int) -> list[bytes | None]:
    if column is None:
        return [None] * rows
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    return column.to_pylist()  # type: ignore[no-any-return]


def _batch(keys: Sequence[bytes | None], values: Sequence[bytes | None]) -> RecordBatch:
    return RecordBatch.from_columns(keys, values, np.zeros(len(values), dtype=np.int64))


def _chunked(
    rows: int,
    kernel: Callable[[int, int], Any],
    python: Callable[[int], Any],
    out: list[Any],
) -> None:
    """Fill ``out`` (one slot per row): the kernel over [0, rows), else per chunk, else per record.
    ``kernel(start, stop)`` returns a list of results or None when it cannot take the range."""
    whole = kernel(0, rows)
    if whole is not None:
        out[:] = whole
        return
    for start in range(0, rows, _CHUNK):
        stop = min(rows, start + _CHUNK)
        part = kernel(start, stop) if rows > _CHUNK else None
        if part is None:
            part = [python(i) for i in range(start, stop)]
        out[start:stop] = part


def _python_call(on_error: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``; with on_error="null", None where a serde rejects the record."""
    if on_error == "fail":
        return fn(*args)
    try:
        return fn(*args)
    except SerializationException:
        return None


def predicate_column(
    predicate: Predicate,
    keys: pa.Array | None,
    values: pa.Array | None,
    key_serde: str = "bytes",
    value_serde: str = "json",
    on_error: str = "fail",
) -> pa.Array:
    """Whether ``predicate(key, value)`` holds for each record (boolean; null where on_error="null"
    dropped a record its serde rejects)."""
    _check_on_error(on_error)
    key_enc, key_de = _serde(key_serde)
    value_enc, value_de = _serde(value_serde)
    rows = len(values) if values is not None else len(keys) if keys is not None else 0
    ks = _bytes_list(keys, rows)
    vs = _bytes_list(values, rows)
    nodes, root = predicate.nodes()
    try:
        compiled = kernels.Predicate(list(nodes), root, key_enc, value_enc)
    except (OverflowError, TypeError, ValueError):
        # A constant the kernel cannot hold (an integer outside int64): Python for every record.
        compiled = None

    def kernel(start: int, stop: int) -> list[Any] | None:
        if compiled is None:
            return None
        selected = compiled.select(_batch(ks[start:stop], vs[start:stop]))
        if selected is None:
            return None
        mask = np.zeros(stop - start, dtype=bool)
        mask[selected] = True
        return mask.tolist()  # type: ignore[no-any-return]

    def holds(i: int) -> bool:
        return predicate(key_de.deserialize(None, ks[i]), value_de.deserialize(None, vs[i]))

    def python(i: int) -> Any:
        return _python_call(on_error, holds, i)

    out: list[Any] = [None] * rows
    _chunked(rows, kernel, python, out)
    return pa.array(out, pa.bool_())


def _field_text(field: Any) -> str | None:
    """What json_field gives for a field's Python value: a JSON string as itself, other values as
    compact JSON text (the JSON serde's), null for a missing or null field."""
    if field is None:
        return None
    if isinstance(field, str):
        return field
    return _json_text.serialize(None, field).decode("utf-8")  # type: ignore[union-attr]


def _utf8(text: str | None) -> bytes | None:
    if text is None:
        return None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate (JSON "\\ud800"): no Spark string holds it
        raise SerializationException(
            f"The json field {text!r} holds a lone surrogate, which a Spark string cannot hold."
        ) from exc


def _reencode(text: bytes) -> bytes | None:
    return _utf8(_field_text(json_loads(text)))


def json_field_column(values: pa.Array, name: str, on_error: str = "fail") -> pa.Array:
    """The top-level field ``name`` of each JSON value, as a string (see ``_field_text``); null
    when the value is null or not an object, or the field is missing or null."""
    _check_on_error(on_error)
    vs = _bytes_list(values, len(values))

    def kernel(start: int, stop: int) -> list[Any] | None:
        projected = kernels.project(_batch([None] * (stop - start), vs[start:stop]), 1, name, 1)
        return None if projected is None else projected.values()

    def python(i: int) -> Any:
        def field() -> Any:
            decoded = _json_text.deserialize(None, vs[i])
            return decoded.get(name) if isinstance(decoded, dict) else None

        found = _python_call(on_error, field)
        # The kernel's form of a field: its JSON text, normalised below like the kernel's.
        return None if found is None else _json_text.serialize(None, found)

    texts: list[Any] = [None] * len(vs)
    _chunked(len(vs), kernel, python, texts)
    return _normalise_field_texts(pa.array(texts, pa.binary()), on_error)


def _normalise_field_texts(texts: pa.Array, on_error: str) -> pa.Array:
    """JSON texts of fields -> json_field's strings. The kernel hands out the field's source
    text; strings without escapes, integers, true and false are unquoted or kept in Arrow, and
    only the rest (escapes, floats, objects, arrays, spacing) is re-read and re-written in Python."""
    plain_string = pc.and_(pc.starts_with(texts, b'"'), pc.invert(pc.match_substring(texts, b"\\")))
    literal = pc.match_substring_regex(texts, rb"^(0|-?[1-9][0-9]*|true|false)$")
    simple = pc.or_(plain_string, literal)
    unquoted = pc.if_else(plain_string, pc.binary_slice(texts, 1, -1), texts)
    rest = pc.and_(pc.invert(pc.fill_null(simple, True)), pc.is_valid(texts))
    if pc.any(rest).as_py():
        values = unquoted.to_pylist()
        for i in np.flatnonzero(rest.to_numpy(zero_copy_only=False)).tolist():
            values[i] = _python_call(on_error, _reencode, values[i])
        unquoted = pa.array(values, pa.binary())
    return unquoted.cast(pa.string())


def decode_column(values: pa.Array, serde: str, on_error: str = "fail") -> pa.Array:
    """Each value as the serde reads it: a number column for long/int/short/double/float, a
    string column for string."""
    _check_on_error(on_error)
    enc, de = _serde(serde)
    if serde == "string":
        binary = values.cast(pa.binary()) if not pa.types.is_binary(values.type) else values
        try:
            return binary.cast(pa.string())  # Arrow validates UTF-8 as the serde does
        except pa.ArrowInvalid:
            vs = binary.to_pylist()
            return pa.array([_python_call(on_error, de.deserialize, None, b) for b in vs], pa.string())
    if serde not in NUMERIC_SERDES:
        raise ConfigException(f"decode_column decodes numbers or strings, not {serde!r}.")
    arrow_type = NUMERIC_SERDES[serde]
    vs = _bytes_list(values, len(values))

    try:
        # The common case stays in numpy/Arrow, without a Python object per record.
        numbers, nulls = kernels.decode_numbers(_batch([None] * len(vs), vs), 1, enc)
        return pa.array(numbers, mask=nulls).cast(arrow_type)
    except ValueError:  # a record of the wrong width: the serde says what is wrong with it
        pass

    def kernel(start: int, stop: int) -> list[Any] | None:
        try:
            numbers, nulls = kernels.decode_numbers(_batch([None] * (stop - start), vs[start:stop]), 1, enc)
        except ValueError:
            return None
        return pa.array(numbers, mask=nulls).cast(arrow_type).to_pylist()  # type: ignore[no-any-return]

    def python(i: int) -> Any:
        return _python_call(on_error, de.deserialize, None, vs[i])

    out: list[Any] = [None] * len(vs)
    _chunked(len(vs), kernel, python, out)
    return pa.array(out, arrow_type)


def encode_column(values: pa.Array, serde: str, on_error: str = "fail") -> pa.Array:
    """Each value in the bytes the serde writes (binary; null stays null)."""
    _check_on_error(on_error)
    enc, ser = _serde(serde)
    if serde == "string":
        return values.cast(pa.string()).cast(pa.binary())
    if serde not in NUMERIC_SERDES:
        raise ConfigException(f"encode_column encodes numbers or strings, not {serde!r}.")
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    present = values.filter(values.is_valid()).to_numpy(zero_copy_only=False)
    try:
        encoded = kernels.encode_numbers(present, enc)
    except (OverflowError, TypeError, ValueError):
        # Out of the serde's range: the serde raises (or nulls) record by record.
        return pa.array(
            [_python_call(on_error, ser.serialize, None, v) for v in values.to_pylist()],
            pa.binary(),
        )
    if len(encoded) == len(values):
        return pa.array(encoded, pa.binary())
    out: list[bytes | None] = [None] * len(values)
    for slot, data in zip(np.flatnonzero(valid).tolist(), encoded, strict=True):
        out[slot] = data
    return pa.array(out, pa.binary())


def partition_column(keys: pa.Array, num_partitions: int) -> pa.Array:
    """Kafka's default partition of each key (murmur2, as the runtime's producer); null for a
    null key, which the producer sends round robin instead."""
    if num_partitions < 1:
        raise ConfigException(f"num_partitions must be at least 1, got {num_partitions}.")
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type):
        # The same buffers: a string column's data is its UTF-8 bytes, what the serde writes.
        keys = keys.view(pa.large_binary() if pa.types.is_large_string(keys.type) else pa.binary())
    if not (pa.types.is_binary(keys.type) or pa.types.is_large_binary(keys.type)):
        raise ConfigException(f"Keys to partition are bytes or strings, got a column of {keys.type}.")
    if len(keys) == 0:
        return pa.array([], pa.int32())
    # Hashed where Arrow holds them (offsets and data buffers), no Python bytes per key.
    _validity, offsets_buffer, data = keys.buffers()
    width = np.int64 if pa.types.is_large_binary(keys.type) else np.int32
    offsets = np.frombuffer(offsets_buffer, dtype=width, count=keys.offset + len(keys) + 1)[keys.offset :]
    data_bytes = None if data is None else np.frombuffer(data, dtype=np.uint8)
    partitions = partitions_for_offsets(offsets.astype(np.int64), data_bytes, num_partitions)
    if keys.null_count:
        return pa.array(partitions, mask=keys.is_null().to_numpy(zero_copy_only=False))
    return pa.array(partitions)
