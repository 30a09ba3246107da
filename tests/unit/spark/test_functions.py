"""kstreams.spark.functions run the column kernels inside Spark and give, row by row, what the
Python path (kstreams.predicates and the built-in serdes) gives on the driver."""

from __future__ import annotations

import json
import random
import struct
from typing import Any

import pytest

from kstreams.predicates import json_field
from kstreams.serdes import Serdes

pytestmark = pytest.mark.spark

_JSON = Serdes.json()


def _records(count: int, seed: int) -> list[tuple[bytes | None, bytes | None, bytes | None, int | None]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        key = None if rng.random() < 0.1 else f"user-{rng.randrange(50)}".encode()
        doc: dict[str, Any] = {"user": rng.choice(['al"ice', "bob", "é\\x", "😀"]), "bot": rng.random() < 0.3}
        if rng.random() < 0.5:
            doc["n"] = rng.choice([1, 2**70, -3.5, "7"])
        value: bytes | None = json.dumps(doc, ensure_ascii=rng.random() < 0.5).encode()
        if rng.random() < 0.05:
            value = None
        elif rng.random() < 0.05:
            value = b'{"user": "truncated'
        number = None if rng.random() < 0.1 else rng.randint(-(2**63), 2**63 - 1)
        encoded = None if number is None else struct.pack(">q", number)
        rows.append((key, value, encoded, number))
    return rows


def test_the_functions_in_spark_equal_the_python_path_row_by_row(spark: Any) -> None:
    from kstreams.spark import functions as F

    rows = _records(3000, seed=11)
    df = spark.createDataFrame(
        rows, "key binary, value binary, number_bytes binary, number long"
    ).repartition(3)
    predicate = json_field("bot").eq(False) & json_field("n").gt(0)

    out = df.select(
        "key",
        "value",
        "number",
        F.matches(predicate, on_error="null").alias("human"),
        F.json_field("value", "user", on_error="null").alias("user"),
        F.decode_long("number_bytes").alias("decoded"),
        F.encode_long("number").alias("encoded"),
        F.partition_for("key", 12).alias("partition"),
    ).collect()

    from kstreams._native.record_batch import default_partition
    from kstreams.errors import SerializationException

    assert len(out) == len(rows)
    for row in out:
        try:
            decoded = _JSON.deserialize(None, row.value)
            expected_human: bool | None = predicate(None, decoded)
            user = decoded.get("user") if isinstance(decoded, dict) else None
        except SerializationException:
            expected_human = user = None
        assert row.human == expected_human
        assert row.user == user
        assert row.decoded == row.number
        assert row.encoded == Serdes.long().serialize(None, row.number)
        assert row.partition == (None if row.key is None else default_partition(row.key, 12))


def test_a_malformed_value_fails_the_query_naming_the_serde_unless_on_error_is_null(spark: Any) -> None:
    from kstreams.spark import functions as F

    df = spark.createDataFrame([(b'{"bot":false}',), (b"{not json",)], "value binary")

    assert [
        r.bot for r in df.select(F.json_field("value", "bot", on_error="null").alias("bot")).collect()
    ] == [
        "false",
        None,
    ]
    with pytest.raises(Exception, match="json serde cannot deserialize"):
        df.where(F.matches(json_field("bot").eq(False))).collect()
