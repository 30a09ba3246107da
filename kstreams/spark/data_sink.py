"""The writing side of the ``kstreams`` Spark data source: DataFrames to a topic, batch or streaming.

    df.write.format("kstreams").mode("append").option("bootstrap.servers", bs).option("topic", "t").save()
    (df.writeStream.format("kstreams").option("bootstrap.servers", bs).option("topic", "t")
       .option("checkpointLocation", path).start())

Columns: value (binary or string, required); key (binary or string), timestamp (bigint epoch ms,
or timestamp), partition (int) and headers (array<struct<key:string,value:binary>>) where
present; other columns are ignored. A null key goes round robin, a null partition to Kafka's
default partition of the key, a null timestamp to the time of producing. Options:
``bootstrap.servers``, ``topic``, ``kafka.*`` producer settings, ``timeout.ms`` (how long a
flush or transaction call may take), ``transactional.id.prefix`` (streaming).

Batch writes (append or overwrite: a topic cannot be overwritten, so both append) are
at-least-once: each task sends its rows with an idempotent producer and flushes before it
reports success. The job's commit only logs; an aborted job leaves the rows its finished tasks
wrote, and a retried task writes its rows again.

Streaming writes are exactly-once per row for read_committed readers, across task retries and
query restarts from the checkpoint (``topic_writer`` says how): each task writes its share of
the micro-batch in its own transaction, with a marker that a replay of the micro-batch finds.
A micro-batch is not atomic across tasks: a read_committed reader can see one task's rows before
another's (and before Spark's commit of the batch). Exactly-once holds when a replayed
micro-batch gives each task the same rows, as Spark's replay of a deterministic query from replayable sources
(this data source, files) does. read_uncommitted readers can also see rows of attempts that
were aborted.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from kstreams.errors import StreamsException
from kstreams.spark.topic_writer import (
    TaskWrite,
    TopicWriterOptions,
    check_sink_schema,
    fence,
    produce_exactly_once,
    produce_rows,
    transactional_id,
)

__all__ = ["TaskWriteMessage", "TopicBatchWriter", "TopicStreamWriter", "sink_writer_options"]

logger = logging.getLogger(__name__)

# The local properties Spark's micro-batch execution sets on every task of a batch.
_BATCH_ID_PROPERTY = "streaming.sql.batchId"
_QUERY_ID_PROPERTY = "sql.streaming.queryId"


@dataclass(frozen=True)
class TaskWriteMessage(WriterCommitMessage):
    """A task's report to the driver: rows written (or skipped, for a replay), where."""

    partition_id: int
    rows: int
    write: TaskWrite | None = None


def sink_writer_options(options: Mapping[str, str], schema: StructType) -> TopicWriterOptions:
    """The sink's options, after checking that the DataFrame's columns can be written."""
    check_sink_schema({f.name: f.dataType.simpleString() for f in schema.fields})
    return TopicWriterOptions.from_options(options)


def _close(cluster: object) -> None:
    close = getattr(cluster, "close", None)
    if close is not None:
        close()


class TopicBatchWriter(DataSourceArrowWriter):
    """``df.write``: each task produces its rows and flushes (at-least-once)."""

    def __init__(self, options: TopicWriterOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskWriteMessage:  # type: ignore[override]
        context = TaskContext.get()
        partition_id = context.partitionId() if context is not None else 0
        cluster = self.options.cluster()
        try:
            rows = produce_rows(cluster, self.options, iterator, partition_id)
        finally:
            _close(cluster)
        return TaskWriteMessage(partition_id, rows)

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        rows = sum(m.rows for m in messages if isinstance(m, TaskWriteMessage))
        logger.info("Wrote %d rows to %s in %d tasks", rows, self.options.topic, len(messages))

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        written = sum(m.rows for m in messages if isinstance(m, TaskWriteMessage))
        # Kafka cannot take records back: what finished tasks wrote stays in the topic.
        logger.warning(
            "Write to %s failed; %d rows of the tasks that finished remain in the topic",
            self.options.topic,
            written,
        )


class TopicStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream``: each task writes its share of a micro-batch in a transaction of its own,
    skipped when a replay finds the task's marker (exactly-once per row).

    The transactional-id prefix is the option ``transactional.id.prefix``, else derived from the
    query's id, which Spark keeps in the checkpoint (a restart from the same checkpoint has the same
    id, wherever the checkpoint was moved).
    """

    def __init__(self, options: TopicWriterOptions) -> None:
        self.options = options

    def _prefix(self, query_id: str | None) -> str:
        if self.options.transactional_id_prefix:
            return self.options.transactional_id_prefix
        if not query_id:
            raise StreamsException(
                "The kstreams streaming sink found no streaming query id on its task: it runs only in "
                "a micro-batch query (writeStream ... start()), not in continuous mode."
            )
        # Short and stable; the topic is part of it so that two sinks of one query never share ids.
        digest = hashlib.sha1(f"{query_id}/{self.options.topic}".encode()).hexdigest()[:16]
        return f"kstreams-spark-{digest}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskWriteMessage:  # type: ignore[override]
        context = TaskContext.get()
        if context is None:
            raise StreamsException("The kstreams streaming sink writes only inside a Spark task.")
        batch_id = int(context.getLocalProperty(_BATCH_ID_PROPERTY) or -1)
        if batch_id < 0:
            raise StreamsException(
                "The kstreams streaming sink found no micro-batch id on its task: it runs only in a "
                "micro-batch query (writeStream ... start()), not in continuous mode."
            )
        prefix = self._prefix(context.getLocalProperty(_QUERY_ID_PROPERTY))
        cluster = self.options.cluster()
        try:
            done = produce_exactly_once(
                cluster, self.options, prefix, batch_id, context.partitionId(), iterator
            )
        finally:
            _close(cluster)
        return TaskWriteMessage(done.partition_id, done.rows, done)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        # Every task committed its own transaction; Spark's commit log now records the batch.
        writes = _writes(messages)
        logger.info(
            "Micro-batch %d to %s: %d rows written, %d tasks skipped as replays",
            batchId,
            self.options.topic,
            sum(w.rows for w in writes),
            sum(w.skipped for w in writes),
        )

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        # A task that failed may have left its transaction open, holding back read_committed
        # readers of the topic until it times out: fence it now. Finished tasks' rows stay, and a
        # replay of the batch skips them. The prefix comes from a finished task's report: this
        # driver-side writer does not see the query's id.
        writes = _writes(messages)
        failed = [partition_id for partition_id, message in enumerate(messages) if message is None]
        prefixes = {w.transactional_id.rsplit("-", 2)[0] for w in writes}
        fenced = 0
        if failed and len(prefixes) == 1:
            prefix = prefixes.pop()
            cluster = self.options.cluster()
            try:
                for partition_id in failed:
                    fence(cluster, self.options, transactional_id(prefix, batchId, partition_id))
                    fenced += 1
            finally:
                _close(cluster)
        logger.warning(
            "Micro-batch %d to %s aborted: %d rows of %d finished tasks stay in the topic (a replay skips "
            "them); %d of %d failed tasks' transactions aborted here, the rest by their next attempt",
            batchId,
            self.options.topic,
            sum(w.rows for w in writes),
            len(writes),
            fenced,
            len(failed),
        )


def _writes(messages: Sequence[WriterCommitMessage | None]) -> list[TaskWrite]:
    return [m.write for m in messages if isinstance(m, TaskWriteMessage) and m.write is not None]
