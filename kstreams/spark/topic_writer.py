"""Producing rows of a Spark write to a topic, for the ``kstreams`` data source's sink.

``TopicWriterOptions`` parses the sink's options; ``records_of`` turns Arrow batches of rows
(key, value, timestamp, partition, headers) into one ``RecordBatch`` per topic partition;
``produce_rows`` sends them with an idempotent producer and flushes (a batch write's task);
``produce_exactly_once`` sends one task's rows of one streaming micro-batch in a transaction,
unless that (query, micro-batch, Spark partition) was committed before.

How a micro-batch is written once: the task's transactional id is
``<prefix>-<batch id>-<partition id>``, so a retried or replayed attempt of the same task fences
any earlier one (``init_transactions`` aborts the transaction such an attempt left open). The
transaction that carries the rows also commits offset ``batch id + 1`` on partition 0 of the
target topic for the group ``<prefix>-p<partition id>`` (the marker). The marker becomes visible
exactly when the rows do, so a replayed task that finds its marker at or past its batch knows
its rows are already in the topic and writes nothing. Clients go through the cluster port
(``kstreams.cluster``), so the same code runs on a ``KafkaCluster`` (Spark workers) and on an
``EmbeddedCluster`` (tests).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from kstreams._native.record_batch import RecordBatch, default_partition
from kstreams.cluster.port import Cluster, TopicPartition
from kstreams.errors import ConfigException, StreamsException

__all__ = [
    "SINK_COLUMNS",
    "TaskWrite",
    "TopicWriterOptions",
    "check_sink_schema",
    "committed_batch",
    "fence",
    "marker_group",
    "produce_exactly_once",
    "produce_rows",
    "records_of",
    "transactional_id",
]

logger = logging.getLogger(__name__)

# Columns the sink reads; any other column (a read's offset and topic, say) is ignored.
SINK_COLUMNS = ("key", "value", "timestamp", "partition", "headers")
# Settings that say how to reach the cluster, which every client needs (not just the producer).
_CONNECTION_PREFIXES = ("security.", "sasl.", "ssl.", "client.id")


@dataclass(frozen=True)
class TopicWriterOptions:
    """The sink's options, validated. Options prefixed ``kafka.`` pass through to the producer."""

    bootstrap_servers: str
    topic: str
    producer_config: dict[str, str] = field(default_factory=dict)
    transactional_id_prefix: str | None = None
    timeout_s: float = 60.0

    @staticmethod
    def from_options(options: Mapping[str, str]) -> TopicWriterOptions:
        # Spark passes options with case-insensitive keys; normalise to lower case.
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        bootstrap = opts.get("bootstrap.servers") or opts.get("kafka.bootstrap.servers")
        if not bootstrap:
            raise ConfigException(
                "The kstreams sink needs the option bootstrap.servers: "
                '.option("bootstrap.servers", "host:9092").'
            )
        topic = opts.get("topic", "").strip()
        if not topic or "," in topic:
            raise ConfigException(
                f"The kstreams sink needs the option topic, naming one topic (got {topic!r}): "
                '.option("topic", "my-topic").'
            )
        try:
            timeout_s = float(opts.get("timeout.ms", "60000")) / 1000.0
        except ValueError:
            raise ConfigException(
                f"Option timeout.ms must be milliseconds, got {opts['timeout.ms']!r}."
            ) from None
        producer = {
            k[len("kafka.") :]: v
            for k, v in opts.items()
            if k.startswith("kafka.") and k != "kafka.bootstrap.servers"
        }
        if "transactional.id" in producer:
            raise ConfigException(
                "Option kafka.transactional.id cannot be set: a streaming write derives one id per task "
                "and micro-batch; set transactional.id.prefix to choose their prefix."
            )
        return TopicWriterOptions(bootstrap, topic, producer, opts.get("transactional.id.prefix"), timeout_s)

    def cluster(self) -> Cluster:
        """A KafkaCluster on the sink's servers. Every client (the admin client reads markers too)
        gets the ``kafka.*`` settings that say how to reach the cluster; producers get them all."""
        from kstreams.cluster.kafka import KafkaCluster

        connection = {k: v for k, v in self.producer_config.items() if k.startswith(_CONNECTION_PREFIXES)}
        return KafkaCluster(self.bootstrap_servers, connection, timeout=self.timeout_s)


def check_sink_schema(fields: Mapping[str, str]) -> None:
    """Raise ConfigException unless the columns (name -> Spark simple type string) can be written:
    value binary or string; key binary or string; timestamp bigint or timestamp; partition int;
    headers array<struct<key:string,value:binary>>."""
    allowed = {
        "key": ("binary", "string"),
        "value": ("binary", "string"),
        "timestamp": ("bigint", "timestamp", "timestamp_ntz"),
        "partition": ("int",),
        "headers": ("array<struct<key:string,value:binary>>",),
    }
    if "value" not in fields:
        raise ConfigException(
            f"The kstreams sink writes a column value (binary or string); the DataFrame has {list(fields)}."
        )
    for name, types in allowed.items():
        if name in fields and fields[name] not in types:
            raise ConfigException(
                f"The kstreams sink's column {name} is {fields[name]}: it must be one of {list(types)} "
                "(cast it first)."
            )


def _binary(column: pa.ChunkedArray | pa.Array | None, rows: int) -> list[bytes | None]:
    if column is None:
        return [None] * rows
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    return column.to_pylist()  # type: ignore[no-any-return]


def _timestamps(column: pa.Array | None, rows: int) -> np.ndarray:
    """Epoch milliseconds; -1 (the producer then stamps the record) where there is none."""
    if column is None:
        return np.full(rows, -1, dtype=np.int64)
    if pa.types.is_timestamp(column.type):
        column = column.cast(pa.timestamp("ms", column.type.tz)).cast(pa.int64())
    return np.asarray(column.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


def records_of(
    batch: pa.RecordBatch, num_partitions: int, topic: str, round_robin: int = 0
) -> tuple[dict[int, RecordBatch], int]:
    """One RecordBatch per target partition of ``topic`` (``num_partitions``), rows in input
    order, and the next round-robin slot.

    A row goes to its partition column where that is set (it must be below ``num_partitions``),
    else to Kafka's default partition of its key (murmur2, as the runtime's producer), else (a
    null key) round robin from ``round_robin``.
    """
    rows = batch.num_rows
    names = batch.schema.names
    keys = _binary(batch.column("key") if "key" in names else None, rows)
    values = _binary(batch.column("value"), rows)
    timestamps = _timestamps(batch.column("timestamp") if "timestamp" in names else None, rows)
    headers: list[list[tuple[str, bytes | None]] | None] | None = None
    if "headers" in names:
        headers = [
            None if hs is None else [(h["key"], h["value"]) for h in hs]
            for hs in batch.column("headers").to_pylist()
        ]
    explicit = batch.column("partition").to_pylist() if "partition" in names else [None] * rows
    targets = np.empty(rows, dtype=np.int64)
    for i in range(rows):
        chosen = explicit[i]
        if chosen is None:
            key = keys[i]
            if key is not None:
                chosen = default_partition(key, num_partitions)
            else:
                chosen = round_robin % num_partitions
                round_robin += 1
        elif not 0 <= chosen < num_partitions:
            raise StreamsException(
                f"A row names partition {chosen} of topic {topic}, which has {num_partitions} partitions: "
                "fix the partition column, or leave it null for the default partitioner."
            )
        targets[i] = chosen
    out: dict[int, RecordBatch] = {}
    for partition in np.unique(targets).tolist():
        idx = np.flatnonzero(targets == partition).tolist()
        out[int(partition)] = RecordBatch.from_columns(
            [keys[i] for i in idx],
            [values[i] for i in idx],
            timestamps[idx],
            int(partition),
            -1,
            None if headers is None else [headers[i] for i in idx],
        )
    return out, round_robin


def _send_all(producer: Any, topic: str, batches: Iterable[pa.RecordBatch], start_slot: int) -> int:
    """Send every row; returns the number of rows sent."""
    num_partitions = producer.partitions_for(topic)
    slot = start_slot
    sent = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        per_partition, slot = records_of(batch, num_partitions, topic, slot)
        for partition, records in per_partition.items():
            producer.send(topic, partition, records)
        sent += batch.num_rows
    return sent


def produce_rows(
    cluster: Cluster, options: TopicWriterOptions, batches: Iterable[pa.RecordBatch], partition_id: int = 0
) -> int:
    """Send the rows with an idempotent producer and wait until every one is acknowledged
    (raises ClusterError otherwise). Returns the number of rows."""
    producer = cluster.producer(options.producer_config)
    try:
        sent = _send_all(producer, options.topic, batches, partition_id)
        producer.flush(options.timeout_s)
    finally:
        producer.close()
    return sent


@dataclass(frozen=True)
class TaskWrite:
    """What one task of a micro-batch did: ``rows`` written in the transaction
    ``transactional_id``, or ``skipped`` because an earlier attempt had committed them."""

    partition_id: int
    batch_id: int
    rows: int
    skipped: bool
    transactional_id: str


def transactional_id(prefix: str, batch_id: int, partition_id: int) -> str:
    return f"{prefix}-{batch_id}-{partition_id}"


def marker_group(prefix: str, partition_id: int) -> str:
    """The group whose committed offset records the last micro-batch a Spark partition wrote."""
    return f"{prefix}-p{partition_id}"


def committed_batch(cluster: Cluster, prefix: str, topic: str, partition_id: int) -> int:
    """The last micro-batch id whose rows this Spark partition committed, or -1."""
    marker = TopicPartition(topic, 0)
    offsets = cluster.admin().committed_offsets(marker_group(prefix, partition_id), [marker])
    return offsets.get(marker, 0) - 1


def produce_exactly_once(
    cluster: Cluster,
    options: TopicWriterOptions,
    prefix: str,
    batch_id: int,
    partition_id: int,
    batches: Iterator[pa.RecordBatch],
) -> TaskWrite:
    """Write one task's rows of micro-batch ``batch_id`` in one transaction, or nothing if this
    (prefix, batch, partition) was committed before (see the module docstring)."""
    txid = transactional_id(prefix, batch_id, partition_id)
    config = dict(options.producer_config)
    config["transactional.id"] = txid
    producer = cluster.producer(config)
    try:
        # Fences every earlier attempt of this task and aborts a transaction it left open: from
        # here on no other attempt can commit, so the marker read next is final.
        producer.init_transactions()
        done = committed_batch(cluster, prefix, options.topic, partition_id)
        if done >= batch_id:
            skipped = sum(b.num_rows for b in batches)
            logger.info(
                "Micro-batch %d, partition %d of %s was committed before (marker at %d): skipping %d rows",
                batch_id,
                partition_id,
                options.topic,
                done,
                skipped,
            )
            return TaskWrite(partition_id, batch_id, 0, True, txid)
        producer.begin_transaction()
        try:
            sent = _send_all(producer, options.topic, batches, partition_id)
            producer.send_offsets_to_transaction(
                {TopicPartition(options.topic, 0): batch_id + 1}, marker_group(prefix, partition_id)
            )
            producer.commit_transaction()
        except BaseException:
            _abort_quietly(producer, txid)
            raise
        logger.debug(
            "Micro-batch %d, partition %d: %d rows to %s", batch_id, partition_id, sent, options.topic
        )
        return TaskWrite(partition_id, batch_id, sent, False, txid)
    finally:
        producer.close()


def _abort_quietly(producer: Any, txid: str) -> None:
    try:
        producer.abort_transaction()
    except Exception:
        # The original failure is what the task reports; a fenced or broken producer cannot
        # abort, and the next attempt's init_transactions aborts the transaction instead.
        logger.warning("Could not abort transaction %s; the next attempt of the task aborts it", txid)


def fence(cluster: Cluster, options: TopicWriterOptions, txid: str) -> None:
    """Abort the transaction ``txid`` left open (a task that died mid-write), so read_committed
    readers of the topic are not held back until the transaction times out."""
    config = dict(options.producer_config)
    config["transactional.id"] = txid
    producer = cluster.producer(config)
    try:
        producer.init_transactions()
    finally:
        producer.close()
