"""The compiled kernels as Spark column functions: ``from kstreams.spark import functions as F``.

    from kstreams.predicates import json_field
    from kstreams.spark import functions as F

    edits = spark.read.format("kstreams").option("bootstrap.servers", bs).option("topic", "edits").load()
    human = edits.where(F.matches(json_field("bot").eq(False) & json_field("lang").eq("en")))
    users = human.select(F.json_field("value", "user").alias("user"), F.partition_for("key", 12))
    counts = df.select(F.decode_long("value"))

Predicates are the ones the DSL compiles (``kstreams.predicates``), given whole to ``matches``
rather than spelled with Spark's column operators: one vocabulary and one set of comparison rules
for a stream and a backfill of it, and a compound predicate is one pass over each Arrow batch in C
(``F.json_field("value", "bot") == False`` would parse every value once per field it names).

Every function is an Arrow UDF (Spark >= 4.1; a pandas UDF on Spark 4.0) over whole batches,
and gives what the Python path gives record by record (``column_kernels`` says how it falls
back). ``on_error``: "fail" raises on a record its serde rejects (malformed bytes), as the
runtime's default deserialization handler; "null" gives null for it instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as spark_functions

from kstreams.errors import ConfigException
from kstreams.predicates import Predicate
from kstreams.spark.column_kernels import (
    NUMERIC_SERDES,
    SERDES,
    decode_column,
    encode_column,
    json_field_column,
    partition_column,
    predicate_column,
)

__all__ = [
    "decode",
    "decode_double",
    "decode_int",
    "decode_long",
    "decode_string",
    "encode",
    "encode_double",
    "encode_int",
    "encode_long",
    "encode_string",
    "json_field",
    "matches",
    "partition_for",
]

ColumnOrName = Column | str

_SPARK_TYPES = {"long": "bigint", "int": "int", "short": "smallint", "double": "double", "float": "float"}


def _udf(fn: Callable[..., pa.Array], return_type: str, name: str) -> Callable[..., Column]:
    """``fn`` (Arrow arrays -> Arrow array) as a vectorized Spark UDF named ``name``."""
    # Spark names the result column after the function: name it after what it computes.
    fn.__name__ = name
    arrow_udf = getattr(spark_functions, "arrow_udf", None)
    if arrow_udf is not None:
        wrapped = arrow_udf(fn, return_type)
    else:  # pragma: no cover - Spark 4.0: pandas in and out, Arrow inside
        import pandas as pd

        def through_pandas(*series: pd.Series) -> pd.Series:
            arrays = [pa.Array.from_pandas(s) for s in series]
            return fn(*arrays).to_pandas()

        through_pandas.__name__ = name
        wrapped = spark_functions.pandas_udf(through_pandas, return_type)  # type: ignore[call-overload]
    return wrapped  # type: ignore[no-any-return]


def _column(col: ColumnOrName) -> Column:
    return spark_functions.col(col) if isinstance(col, str) else col


def _check_serde(name: str, allowed: Any) -> None:
    if name not in allowed:
        raise ConfigException(f"Serde {name!r} is not one of {sorted(allowed)}.")


def matches(
    predicate: Predicate,
    value: ColumnOrName = "value",
    key: ColumnOrName | None = None,
    *,
    value_serde: str = "json",
    key_serde: str = "bytes",
    on_error: str = "fail",
) -> Column:
    """Whether ``predicate`` (``kstreams.predicates``) holds for each record, reading the value
    (and key) columns (binary) with the named serdes: ``df.where(F.matches(pred))``."""
    if not isinstance(predicate, Predicate):
        raise TypeError(f"matches takes a kstreams.predicates Predicate, got {predicate!r}.")
    _check_serde(value_serde, SERDES)
    _check_serde(key_serde, SERDES)
    if key is None:

        def on_values(values: pa.Array) -> pa.Array:
            return predicate_column(predicate, None, values, key_serde, value_serde, on_error)

        return _udf(on_values, "boolean", f"matches({predicate!r})")(_column(value))

    def on_records(keys: pa.Array, values: pa.Array) -> pa.Array:
        return predicate_column(predicate, keys, values, key_serde, value_serde, on_error)

    return _udf(on_records, "boolean", f"matches({predicate!r})")(_column(key), _column(value))


def json_field(col: ColumnOrName, name: str, *, on_error: str = "fail") -> Column:
    """The top-level field ``name`` of each JSON value (binary or string column), as a string: a
    JSON string as itself, numbers, booleans, objects and arrays as compact JSON text; null when
    the value is null or not an object, or the field is missing or null (``get_json_object`` with
    ``$.name``, except for how numbers are written: as Python's json writes them)."""
    if not isinstance(name, str):
        raise TypeError(f"A JSON field name is a str, got {name!r}.")

    def extract(values: pa.Array) -> pa.Array:
        return json_field_column(values, name, on_error)

    return _udf(extract, "string", f"json_field({name})")(_column(col))


def decode(col: ColumnOrName, serde: str, *, on_error: str = "fail") -> Column:
    """Each value (binary) as the serde reads it: long, int, short, double, float or string."""
    _check_serde(serde, {*NUMERIC_SERDES, "string"})
    spark_type = _SPARK_TYPES.get(serde, "string")

    def run(values: pa.Array) -> pa.Array:
        return decode_column(values, serde, on_error)

    return _udf(run, spark_type, f"decode_{serde}")(_column(col))


def encode(col: ColumnOrName, serde: str, *, on_error: str = "fail") -> Column:
    """Each value in the bytes the serde writes (long, int, short, double, float or string)."""
    _check_serde(serde, {*NUMERIC_SERDES, "string"})

    def run(values: pa.Array) -> pa.Array:
        return encode_column(values, serde, on_error)

    return _udf(run, "binary", f"encode_{serde}")(_column(col))


def decode_long(col: ColumnOrName, *, on_error: str = "fail") -> Column:
    return decode(col, "long", on_error=on_error)


def decode_int(col: ColumnOrName, *, on_error: str = "fail") -> Column:
    return decode(col, "int", on_error=on_error)


def decode_double(col: ColumnOrName, *, on_error: str = "fail") -> Column:
    return decode(col, "double", on_error=on_error)


def decode_string(col: ColumnOrName, *, on_error: str = "fail") -> Column:
    return decode(col, "string", on_error=on_error)


def encode_long(col: ColumnOrName, *, on_error: str = "fail") -> Column:
    return encode(col, "long", on_error=on_error)


def encode_int(col: ColumnOrName, *, on_error: str = "fail") -> Column:
    return encode(col, "int", on_error=on_error)


def encode_double(col: ColumnOrName, *, on_error: str = "fail") -> Column:
    return encode(col, "double", on_error=on_error)


def encode_string(col: ColumnOrName, *, on_error: str = "fail") -> Column:
    return encode(col, "string", on_error=on_error)


def partition_for(col: ColumnOrName, num_partitions: int) -> Column:
    """Kafka's default partition of each key (murmur2 of the key bytes, as the runtime's and the
    Java producer's); null for a null key."""
    if not isinstance(num_partitions, int) or num_partitions < 1:
        raise ConfigException(f"num_partitions must be a positive int, got {num_partitions!r}.")

    def run(keys: pa.Array) -> pa.Array:
        return partition_column(keys, num_partitions)

    return _udf(run, "int", f"partition_for({num_partitions})")(_column(col))
