"""A stateful stage's StreamTask across micro-batches, its state in Spark (transformWithStateInPandas).

This is the executor side of ``run_topology_stream`` for a stage with stores. Spark groups each
micro-batch's records by *task* (the Kafka partition of the record's key, ``murmur2 % partitions``)
and calls ``TaskStateProcessor.handleInputRows`` once per task with its records. The processor
runs them through the same ``StreamTask`` the streaming runtime uses, with in-memory stores that
are change-logged: the changelog records the task writes are appended to the task's Spark state
(``task_state``), and a task is rebuilt from that state whenever this Python worker does not hold
the task as of Spark's last committed state. A query restarted from its checkpoint therefore
resumes every task exactly where its last committed micro-batch left it.

Per task, Spark's state holds:

- ``meta`` (value state): a generation token (fresh on every save), the partition count the query
  started with, the task's stream time, the next output sequence number, the number of changelog
  chunks, and the stream time each processor keeps of its own (windowed aggregations and
  suppression drop late records by it, so it must survive a restart as it would survive on an
  uninterrupted run);
- ``changelog`` (list state): the changelog chunks (``task_state``).

A Python worker keeps the tasks it ran (``_TASK_CACHE``, per query run, least recently used first
out); a cached task is used only when its generation equals the one in Spark's state, so a retried
micro-batch, a task that moved to another worker, or a restart all rebuild it from the state.

Records of one micro-batch are processed as the streaming runtime's task would pick them from its
partitions: each input (topic, source partition) in offset order, the input whose next record has
the smallest timestamp first. A record older than the task's stream time is therefore late, as on
the streaming runtime, and windowed operations drop it after their grace period.

Time: stream time advances with records only, as in Kafka Streams, so windows close (and
emit-on-close, suppression and stream-time punctuation fire) when a later record reaches the task,
never on a timer: that keeps the results equal to the streaming runtime's. Wall-clock punctuation
runs at the end of every micro-batch that gives the task records and, when the query runs in
processing-time mode, on a Spark timer registered for the task's next due punctuation.
"""

from __future__ import annotations

import collections
import heapq
import json
import logging
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from kstreams._native.record_batch import RecordBatch
from kstreams.cluster.port import TopicPartition
from kstreams.errors import ConfigException, TopologyException
from kstreams.spark.partition_task import (
    OFFSET_SEQUENCE_BITS,
    build_stage_task,
    freeze_worker_heap,
    use_in_memory_stores,
)
from kstreams.spark.task_state import (
    COMPACT_AFTER_CHUNKS,
    ChangelogFold,
    StoreRetention,
    decode_chunk,
    encode_chunk,
)

__all__ = [
    "META_SCHEMA",
    "OUTPUT_COLUMNS",
    "StreamingStageSpec",
    "StreamingStageTask",
    "TaskStateProcessor",
]

logger = logging.getLogger(__name__)

META_SCHEMA = (
    "generation string, partitions int, stream_time long, sequence long, chunks int, processor_times string, "
    "punctuations string"
)
CHUNK_STATE_SCHEMA = "chunk binary"
# The columns a stage writes (as ``partition_task.OUTPUT_SCHEMA``): the records its sinks wrote.
OUTPUT_COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp")
# Tasks a Python worker keeps between micro-batches; more are rebuilt from Spark's state.
_CACHE_SIZE = 64


@dataclass
class StreamingStageSpec:
    """What an executor needs to run one stateful stage's tasks: shipped with the processor.

    ``run_token`` is new for every ``run_topology_stream`` call: a worker never reuses a task
    cached by another query run, so a restart always restores from Spark's state.
    """

    topology: Any
    config: Mapping[str, Any]
    subtopology: int
    partitions: int
    run_token: str


class StreamingStageTask:
    """One task of a stateful stage (``task`` is its partition), built fresh or restored from the
    changelog records of Spark's state; ``process`` runs one micro-batch's records."""

    def __init__(self, spec: StreamingStageSpec, task: int) -> None:
        self.partition = task
        self.sequence = 0
        self.generation = ""
        self.chunks = 0
        use_in_memory_stores(spec.topology, logged=True)
        # In-memory stores need no directory; the task still names one (never created).
        state_dir = str(spec.config.get("state.dir", "/nonexistent/kstreams-spark-streaming"))
        built = build_stage_task(
            spec.topology, spec.config, spec.subtopology, spec.partitions, task, state_dir
        )
        self.task, self.collector, plan, sub = built.task, built.collector, built.plan, built.subtopology
        # Changelog topic -> store, and the retention of windowed stores (compaction prunes them).
        self.changelog_topics = {topic: name for name, topic in sub.changelog_topics.items()}
        self.retentions = {
            topic: StoreRetention(
                plan.store_builders[name].store_type, plan.store_builders[name].retention_ms
            )
            for name, topic in sub.changelog_topics.items()
            if plan.store_builders[name].store_type in ("window", "session")
        }
        self.task.initialize()
        versioned = sorted(
            name
            for name, store in self.task.graph.stores.items()
            if getattr(store, "keeps_every_changelog_record", False)
        )
        if versioned:
            self.task.close(clean=False)
            raise TopologyException(
                f"run_topology_stream cannot keep the versioned stores {versioned} in Spark's state: their "
                "changelog holds every version of a key, and Spark keeps the latest record per key. Use a "
                "plain KTable for the Spark run, or run the topology with KafkaStreams."
            )

    def restore(self, fold: ChangelogFold, stream_time: int, processor_times: Mapping[str, int]) -> None:
        """Load the stores from ``fold`` (what Spark's state holds), then start the processors with
        the stream times the task and its processors had reached."""
        for topic, entries in fold.by_topic().items():
            keys = [key for key, _value, _ts in entries]
            values = [value for _key, value, _ts in entries]
            timestamps = np.array([ts for _key, _value, ts in entries], dtype=np.int64)
            batch = RecordBatch.from_columns(keys, values, timestamps, self.partition, 0)
            self.task.restore(TopicPartition(topic, self.partition), batch)
        self.task.stream_time = stream_time
        self.task.initialize_processors()
        for node in self.task.graph.processor_nodes:
            saved = processor_times.get(node.name)
            processor = node.processor
            if saved is not None and isinstance(getattr(processor, "observed_stream_time", None), int):
                processor.observed_stream_time = max(processor.observed_stream_time, saved)

    def processor_times(self) -> dict[str, int]:
        """The stream time every processor that keeps its own has reached (node name -> time)."""
        times: dict[str, int] = {}
        for node in self.task.graph.processor_nodes:
            observed = getattr(node.processor, "observed_stream_time", None)
            if isinstance(observed, int) and observed >= 0:
                times[node.name] = observed
        return times

    def process(self, rows: pd.DataFrame, now_ms: int) -> None:
        """Run one micro-batch's records (columns topic, key, value, timestamp, partition, offset) in
        the order the streaming runtime's task would pick them, then the wall-clock punctuations
        due at ``now_ms``, then flush the stores (a micro-batch is a commit)."""
        if len(rows):
            for topic, index in _runs_in_pick_order(rows):
                records = RecordBatch.from_columns(
                    rows["key"].take(index).tolist(),
                    rows["value"].take(index).tolist(),
                    np.ascontiguousarray(rows["timestamp"].to_numpy(dtype=np.int64)[index]),
                    self.partition,
                    np.ascontiguousarray(rows["offset"].to_numpy(dtype=np.int64)[index]),
                )
                self.task.process(TopicPartition(topic, self.partition), records)
        self.task.maybe_punctuate_wall_clock(now_ms)
        self.task.flush()

    def drain(self) -> tuple[pd.DataFrame, list[tuple[str, bytes, bytes | None, int]]]:
        """What the task wrote since the last drain: its sink records (as a stage's output rows,
        offsets continuing the task's sequence) and its changelog records."""
        topics: list[str] = []
        keys: list[bytes | None] = []
        values: list[bytes | None] = []
        timestamps: list[int] = []
        partitions: list[int] = []
        changelog: list[tuple[str, bytes, bytes | None, int]] = []
        for topic, partition, records in self.collector.drain():
            if topic in self.changelog_topics:
                # Stores never log a null key (a changelog record is an entry of a store).
                changelog.extend(
                    (topic, key, value, ts)
                    for key, value, ts in zip(
                        records.keys(), records.values(), records.timestamps_array().tolist(), strict=True
                    )
                    if key is not None
                )
                continue
            count = len(records)
            topics.extend([topic] * count)
            partitions.extend([partition] * count)
            keys.extend(records.keys())
            values.extend(records.values())
            timestamps.extend(records.timestamps_array().tolist())
        base = (self.partition << OFFSET_SEQUENCE_BITS) + self.sequence
        self.sequence += len(keys)
        output = pd.DataFrame(
            {
                "topic": pd.Series(topics, dtype=object),
                "partition": pd.Series(partitions, dtype=np.int32),
                "offset": pd.Series(np.arange(base, base + len(keys), dtype=np.int64)),
                "key": pd.Series(keys, dtype=object),
                "value": pd.Series(values, dtype=object),
                "timestamp": pd.Series(timestamps, dtype=np.int64),
            }
        )
        return output, changelog

    def close(self) -> None:
        self.task.close(clean=False)


def _runs_in_pick_order(rows: pd.DataFrame) -> Iterator[tuple[str, np.ndarray]]:
    """(topic, row positions) runs in the order a task picks records: each (topic, partition)
    input in offset order, the input whose next record has the smallest timestamp first (ties:
    the input that sorts first). Consecutive records of one topic form one run."""
    codes, names = pd.factorize(rows["topic"], sort=True)
    partitions = rows["partition"].to_numpy(dtype=np.int64)
    timestamps = rows["timestamp"].to_numpy(dtype=np.int64)
    order = np.lexsort((rows["offset"].to_numpy(dtype=np.int64), partitions, codes))
    input_codes = codes[order]
    input_partitions = partitions[order]
    cuts = np.flatnonzero((np.diff(input_codes) != 0) | (np.diff(input_partitions) != 0)) + 1
    inputs = np.split(order, cuts)
    if len(inputs) == 1:
        yield str(names[input_codes[0]]), order
        return
    topics = [str(names[codes[positions[0]]]) for positions in inputs]
    tagged = [_tagged(timestamps, n, positions) for n, positions in enumerate(inputs)]
    run_topic = ""
    run: list[int] = []
    for _ts, n, i in heapq.merge(*tagged):
        if topics[n] != run_topic and run:
            yield run_topic, np.array(run, dtype=np.int64)
            run = []
        run_topic = topics[n]
        run.append(i)
    if run:
        yield run_topic, np.array(run, dtype=np.int64)


def _tagged(timestamps: np.ndarray, n: int, positions: np.ndarray) -> Iterator[tuple[int, int, int]]:
    """(timestamp, input, position) of each record of input ``n``, in its offset order."""
    for i in positions.tolist():
        yield int(timestamps[i]), n, i


# (run token, subtopology, task) -> the task as of its last save in this worker.
_TASK_CACHE: collections.OrderedDict[tuple[str, int, int], StreamingStageTask] = collections.OrderedDict()


class TaskStateProcessor(StatefulProcessor):
    """The ``transformWithStateInPandas`` processor of one stateful stage: grouping key = task.

    ``timers``: register a processing-time timer for each task's next wall-clock punctuation (the
    query must then run in processing-time mode).
    """

    def __init__(self, spec: StreamingStageSpec, timers: bool) -> None:
        self.spec = spec
        self.timers = timers

    def init(self, handle: StatefulProcessorHandle) -> None:
        freeze_worker_heap()
        self.handle = handle
        self.meta = handle.getValueState("meta", META_SCHEMA)
        self.changelog = handle.getListState("changelog", CHUNK_STATE_SCHEMA)

    def handleInputRows(  # Spark's name
        self,
        key: Any,
        rows: Iterator[pd.DataFrame],
        timerValues: TimerValues,
    ) -> Iterator[pd.DataFrame]:
        task = int(key[0])
        frames = [frame for frame in rows if len(frame)]
        records = (
            pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(OUTPUT_COLUMNS))
        )
        output = self._run(task, records, timerValues.getCurrentProcessingTimeInMs())
        if len(output):
            yield output

    def handleExpiredTimer(  # Spark's name
        self,
        key: Any,
        timerValues: TimerValues,
        expiredTimerInfo: ExpiredTimerInfo,
    ) -> Iterator[pd.DataFrame]:
        # A wall-clock punctuation is due: run the task with no records.
        empty = pd.DataFrame(columns=list(OUTPUT_COLUMNS))
        output = self._run(int(key[0]), empty, timerValues.getCurrentProcessingTimeInMs())
        if len(output):
            yield output

    def close(self) -> None:
        pass

    def _run(self, partition: int, records: pd.DataFrame, now_ms: int) -> pd.DataFrame:
        cache_key = (self.spec.run_token, self.spec.subtopology, partition)
        meta = self.meta.get() if self.meta.exists() else None
        if meta is not None and int(meta[1]) != self.spec.partitions:
            raise ConfigException(
                f"Task {self.spec.subtopology}_{partition} of this query was started with {meta[1]} "
                f"partitions and is now run with {self.spec.partitions}: a task's state belongs to the keys "
                f"of its partition. Restart with partitions={meta[1]}, or start from a new checkpoint."
            )
        task = _TASK_CACHE.pop(cache_key, None)
        if task is not None and (meta is None or task.generation != meta[0]):
            task.close()
            task = None
        if task is None:
            task = self._restore(partition, meta)
        try:
            task.process(records, now_ms)
            output, changelog = task.drain()
            self._save(task, changelog)
        except BaseException:
            task.close()
            raise
        _TASK_CACHE[cache_key] = task
        while len(_TASK_CACHE) > _CACHE_SIZE:
            _TASK_CACHE.popitem(last=False)[1].close()
        if self.timers:
            self._schedule_punctuation(task, now_ms)
        return output

    def _restore(self, partition: int, meta: tuple[Any, ...] | None) -> StreamingStageTask:
        task = StreamingStageTask(self.spec, partition)
        fold = ChangelogFold(task.retentions)
        if meta is None:
            task.restore(fold, -1, {})
            return task
        chunks = 0
        for (chunk,) in self.changelog.get():
            fold.apply(decode_chunk(chunk))
            chunks += 1
        task.restore(fold, int(meta[2]), json.loads(meta[5]))
        task.task.resume_punctuations(json.loads(meta[6]))
        task.sequence = int(meta[3])
        task.generation = str(meta[0])
        task.chunks = chunks
        logger.debug(
            "Restored task %s_%d from %d changelog chunks (%d entries)",
            self.spec.subtopology,
            partition,
            chunks,
            len(fold),
        )
        return task

    def _save(self, task: StreamingStageTask, changelog: list[tuple[str, bytes, bytes | None, int]]) -> None:
        if changelog:
            if task.chunks + 1 > COMPACT_AFTER_CHUNKS:
                self._compact(task, changelog)
            else:
                self.changelog.appendValue((encode_chunk(changelog),))
                task.chunks += 1
        task.generation = uuid.uuid4().hex
        self.meta.update(
            (
                task.generation,
                self.spec.partitions,
                task.task.stream_time,
                task.sequence,
                task.chunks,
                json.dumps(task.processor_times()),
                json.dumps(task.task.punctuation_dues()),
            )
        )

    def _compact(
        self, task: StreamingStageTask, changelog: list[tuple[str, bytes, bytes | None, int]]
    ) -> None:
        """Rewrite the task's changelog chunks (and this micro-batch's records) as one."""
        fold = ChangelogFold(task.retentions)
        for (chunk,) in self.changelog.get():
            fold.apply(decode_chunk(chunk))
        fold.apply(changelog)
        pruned = fold.prune()
        self.changelog.put([(encode_chunk(fold.records()),)])
        task.chunks = 1
        logger.debug(
            "Compacted the changelog of task %s_%d: %d entries (%d expired dropped)",
            self.spec.subtopology,
            task.partition,
            len(fold),
            pruned,
        )

    def _schedule_punctuation(self, task: StreamingStageTask, now_ms: int) -> None:
        due = task.task.next_wall_clock_punctuation_ms()
        for registered in list(self.handle.listTimers()):
            # Timers at or before now have expired: Spark removes those itself.
            if registered != due and registered > now_ms:
                self.handle.deleteTimer(registered)
        if due is not None:
            self.handle.registerTimer(due)
