"""The executor side of run_topology, without Spark: one stage's StreamTask over Arrow batches."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyspark import cloudpickle

from kstreams import Consumed, Materialized, Produced, Serdes, StreamsBuilder, Topology
from kstreams.spark.partition_task import (
    OFFSET_SEQUENCE_BITS,
    OUTPUT_SCHEMA,
    StagePartitionTask,
    StageTaskSpec,
    run_stage_partition,
)
from kstreams.state.stores import Stores

pytestmark = pytest.mark.spark

STRING = Serdes.string()
LONG = Serdes.long()


def _count_per_key(persistent: bool = False) -> Topology:
    builder = StreamsBuilder()
    grouped = builder.stream("events", Consumed.with_(STRING, STRING)).group_by_key()
    counts = (
        grouped.count(Materialized.as_(Stores.persistent_key_value_store("counts")))
        if persistent
        else grouped.count()
    )
    counts.to_stream().to("counts", Produced.with_(STRING, LONG))
    return builder.build()


def _arrow(
    keys: list[bytes | None], topics: list[str] | None = None, start_ts: int = 1_000
) -> pa.RecordBatch:
    n = len(keys)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(topics or ["events"] * n, pa.string()),
            pa.array(keys, pa.binary()),
            pa.array([b"x"] * n, pa.binary()),
            pa.array(np.arange(n, dtype=np.int64) + start_ts),
            pa.array(np.zeros(n, dtype=np.int32)),
            pa.array(np.arange(n, dtype=np.int64)),
        ],
        names=["topic", "key", "value", "timestamp", "partition", "offset"],
    )


def _spec(topology: Topology, config: dict[str, Any] | None = None) -> StageTaskSpec:
    # As Spark ships it: the executor gets its own copy of the topology.
    return StageTaskSpec(
        cloudpickle.loads(cloudpickle.dumps(topology)), {"application.id": "stage", **(config or {})}, 0, 4
    )


def test_a_partition_writes_every_final_count_with_offsets_unique_to_the_partition() -> None:
    keys = [f"k{i % 5}".encode() for i in range(1_000)]
    batches = [_arrow(keys[:600]), _arrow(keys[600:], start_ts=5_000)]

    output = pa.Table.from_batches(list(run_stage_partition(_spec(_count_per_key()), 3, batches)))

    assert output.schema == OUTPUT_SCHEMA
    final = dict(zip(output.column("key").to_pylist(), output.column("value").to_pylist(), strict=True))
    assert {k.decode(): LONG.deserialize("counts", v) for k, v in final.items()} == {
        f"k{i}": 200 for i in range(5)
    }
    assert set(output.column("topic").to_pylist()) == {"counts"}
    offsets = output.column("offset").to_pylist()
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    assert all(o >> OFFSET_SEQUENCE_BITS == 3 for o in offsets)  # the Spark partition id on top


def test_with_caching_off_every_update_is_written_in_order() -> None:
    keys = [b"a", b"b", b"a", b"a"]

    output = pa.Table.from_batches(
        list(
            run_stage_partition(_spec(_count_per_key(), {"statestore.cache.max.bytes": 0}), 0, [_arrow(keys)])
        )
    )

    written = [
        (k, LONG.deserialize("counts", v))
        for k, v in zip(output.column("key").to_pylist(), output.column("value").to_pylist(), strict=True)
    ]
    assert written == [(b"a", 1), (b"b", 1), (b"a", 2), (b"a", 3)]


def test_stores_are_in_memory_and_not_change_logged() -> None:
    spec = _spec(_count_per_key(persistent=True))

    task = StagePartitionTask(spec, 0)
    try:
        assert not task.task.subtopology.changelog_topics
        (builder,) = spec.topology.store_builders.values()
        assert not builder.logging_enabled
        assert not builder.supplier.persistent
    finally:
        task.finish()


def test_the_task_runs_compiled_kernels_when_the_topology_has_them() -> None:
    pytest.importorskip("kstreams._native.kernels", reason="compiled kernels are not built")
    task = StagePartitionTask(_spec(_count_per_key()), 0)
    try:
        # Spark feeds the task through its batch API, so compiled segments engage by themselves.
        assert "events" in task.task.compiled_segments
    finally:
        task.finish()


def test_a_null_timestamp_is_rejected_with_the_column_named() -> None:
    batch = _arrow([b"a"]).set_column(3, "timestamp", pa.array([None], pa.int64()))
    task = StagePartitionTask(_spec(_count_per_key()), 0)
    try:
        with pytest.raises(ValueError, match="timestamp"):
            task.process(batch)
    finally:
        task.abort()


def test_stores_a_spark_task_puts_in_memory_stay_there_whatever_the_dsl_store_suppliers() -> None:
    """A Spark task keeps its state outside the stores, so its in-memory stores are settled: the
    client's dsl.store.suppliers.class (applied when the plan is built) does not move them back."""
    from kstreams import Materialized, StreamsBuilder
    from kstreams.spark.partition_task import use_in_memory_stores

    builder = StreamsBuilder()
    builder.stream("in").group_by_key().count(Materialized.as_("counts"))
    topology = builder.build()
    use_in_memory_stores(topology, logged=False)
    rocksdb = "org.apache.kafka.streams.state.BuiltInDslStoreSuppliers$RocksDBDslStoreSuppliers"
    topology.build("app", {"application.id": "app", "dsl.store.suppliers.class": rocksdb})
    assert not topology.store_builders["counts"].supplier.persistent
