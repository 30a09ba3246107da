"""The ``kstreams`` Spark data source: a topic's records as a DataFrame, batch or streaming, and
DataFrames written to a topic (``df.write``/``df.writeStream``: see ``data_sink``).

    register_data_source(spark)
    df = (spark.read.format("kstreams")
          .option("bootstrap.servers", "127.0.0.1:9092").option("topic", "words").load())
    stream = spark.readStream.format("kstreams").option("bootstrap.servers", bs).option("topic", "t").load()

Schema: key binary, value binary, timestamp long (epoch ms), partition int, offset long, topic
string. Options: ``bootstrap.servers``, ``topic`` (comma-separated for several),
``startingOffsets`` and ``endingOffsets`` ("earliest", "latest", or JSON offsets per partition
as in Spark's Kafka source), ``isolation.level`` (read_uncommitted | read_committed),
``maxOffsetsPerTrigger`` (streaming: records per micro-batch at most, shared across partitions by
backlog), ``timeout.ms`` (how long a read may wait for a record it expects), and ``kafka.*``
settings passed to the consumer.

A batch read has one input partition per topic partition covering [start, end) from the
partition's watermarks when the read is planned. A streaming read keeps the next offset of every
partition as its offset ({"topic": {"partition": offset}}); each micro-batch reads from there to
the partitions' ends at planning time. Partitions added to a topic while a query runs are read
from the start. Workers read with confluent-kafka directly, never joining a consumer group.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

try:  # Spark 4.2+: read limits, and availableNow reads up to offsets fixed when the query starts
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - older Spark: no read limits, availableNow runs one batch
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

from kstreams.spark.topic_reader import (
    TopicOffsets,
    TopicReaderOptions,
    offset_range,
    read_range,
    resolve_offsets,
)

__all__ = [
    "KStreamsDataSource",
    "TopicBatchReader",
    "TopicPartitionRange",
    "TopicStreamReader",
    "register_data_source",
]

logger = logging.getLogger(__name__)

SCHEMA_DDL = "key binary, value binary, timestamp long, partition int, offset long, topic string"


class TopicPartitionRange(InputPartition):
    """Offsets [start, end) of one topic partition: what one Spark task reads."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"TopicPartitionRange({self.topic}-{self.partition}, [{self.start}, {self.end}))"


class KStreamsDataSource(DataSource):
    """Reads the records of Kafka topics (any Kafka-protocol cluster) into Spark, and writes
    DataFrames to a topic."""

    @classmethod
    def name(cls) -> str:
        return "kstreams"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return TopicBatchReader(TopicReaderOptions.from_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return TopicStreamReader(TopicReaderOptions.from_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        # Imported here: the sink's module is only needed by queries that write.
        from kstreams.spark.data_sink import TopicBatchWriter, sink_writer_options

        return TopicBatchWriter(sink_writer_options(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from kstreams.spark.data_sink import TopicStreamWriter, sink_writer_options

        return TopicStreamWriter(sink_writer_options(self.options, schema))


def _read(options: TopicReaderOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    assert isinstance(partition, TopicPartitionRange)
    yield from read_range(options, partition.topic, partition.partition, partition.start, partition.end)


class TopicBatchReader(DataSourceReader):
    """A batch read: the offset ranges are fixed when Spark plans the read."""

    def __init__(self, options: TopicReaderOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        ranges = offset_range(self.options)
        logger.info(
            "Batch read of %s: %d records in %d partitions",
            ",".join(self.options.topics),
            sum(end - start for start, end in ranges.values()),
            len(ranges),
        )
        return [TopicPartitionRange(t, p, start, end) for (t, p), (start, end) in sorted(ranges.items())]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return _read(self.options, partition)


class TopicStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming read; offsets are {topic: {str(partition): next offset}}.

    With ``trigger(availableNow=True)`` the query reads up to the partitions' ends when it starts
    and then stops, even if records keep arriving.
    """

    def __init__(self, options: TopicReaderOptions) -> None:
        self.options = options
        self._offsets = TopicOffsets(options)
        self._target: dict[tuple[str, int], int] | None = None

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: high for tp, (_low, high) in self._marks().items()}
        logger.info("availableNow read of %s up to %s", ",".join(self.options.topics), _to_json(self._target))

    def _marks(self) -> dict[tuple[str, int], tuple[int, int]]:
        return self._offsets.watermarks()

    def initialOffset(self) -> dict:
        starts = resolve_offsets(self.options.starting, self._marks())
        return _to_json(starts)

    def getDefaultReadLimit(self) -> Any:
        cap = self.options.max_offsets_per_trigger
        if cap is not None and ReadMaxRows is not None:
            return ReadMaxRows(cap)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        # Spark 4.2+ passes the start offset and the read limit (ours from getDefaultReadLimit, or
        # "all available" when the trigger needs it); earlier Spark passes nothing, and the
        # maxOffsetsPerTrigger option is applied here directly.
        if self._target is not None:
            ends = dict(self._target)
        else:
            ends = {tp: high for tp, (_low, high) in self._marks().items()}
        begins = _from_json(start) if start else {}
        for tp, offset in begins.items():
            # Never move backwards (a partition whose log was truncated below our position).
            if tp in ends and offset > ends[tp]:
                ends[tp] = offset
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            cap: int | None = limit.max_rows
        elif limit is None:
            cap = self.options.max_offsets_per_trigger
        else:
            cap = None
        if cap is not None and start:
            ends = self._capped(begins, ends, cap)
        return _to_json(ends)

    def _capped(
        self, begins: dict[tuple[str, int], int], ends: dict[tuple[str, int], int], cap: int
    ) -> dict[tuple[str, int], int]:
        """Ends that advance at most ``cap`` offsets in all, shared out in proportion to each
        partition's backlog (as Spark's Kafka source does)."""
        froms = {tp: begins[tp] if tp in begins else self._low_of(tp) for tp in ends}
        backlog = {tp: max(0, ends[tp] - froms[tp]) for tp in ends}
        total = sum(backlog.values())
        if total <= cap:
            return ends
        take = {tp: lag * cap // total for tp, lag in backlog.items()}
        # Hand the rounding remainder to the largest backlogs, so every batch makes progress.
        for tp in sorted(backlog, key=lambda t: backlog[t] - take[t], reverse=True)[
            : cap - sum(take.values())
        ]:
            take[tp] += 1
        return {tp: froms[tp] + take[tp] for tp in ends}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        starts = _from_json(start)
        ranges = []
        for tp, stop in sorted(_from_json(end).items()):
            # A partition that appeared after the query started is read from its beginning.
            begin = starts[tp] if tp in starts else self._low_of(tp)
            if stop > begin:
                ranges.append(TopicPartitionRange(tp[0], tp[1], begin, stop))
        return ranges

    def _low_of(self, tp: tuple[str, int]) -> int:
        return self._offsets.watermarks([tp])[tp][0]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return _read(self.options, partition)

    def commit(self, end: dict) -> None:
        # Progress lives in Spark's checkpoint: nothing to commit to the cluster.
        logger.debug("Micro-batch of %s done up to %s", ",".join(self.options.topics), end)

    def stop(self) -> None:
        self._offsets.close()


def _to_json(offsets: dict[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    result: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = int(offset)
    return result


def _from_json(offsets: dict) -> dict[tuple[str, int], int]:
    return {(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}


def register_data_source(spark: SparkSession) -> None:
    """Register the ``kstreams`` data source with ``spark`` (``spark.read.format("kstreams")``)."""
    spark.dataSource.register(KStreamsDataSource)
