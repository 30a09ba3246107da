"""StreamTask: one partition of one subtopology, running its processors and stores.

A task is used by one thread at a time: the stream thread holding its lock (``process``,
``maybe_punctuate_wall_clock``), the restore thread while it restores (``restore``), or the polling
thread under the commit barrier (``flush``, ``committable_offsets``, ``close``). It therefore keeps
no lock of its own.

Lifecycle (docs/internals.md, "The task"): ``initialize()`` builds the graph and opens the stores
(logged stores register their restore callbacks); the state updater restores each partition of
``changelog_partitions()`` through ``restore``; ``initialize_processors()`` then calls every
``Processor.init`` (after restoration, as in Kafka); ``process`` runs batches; ``flush`` and
``committable_offsets`` serve commits; ``close`` ends it.

Why one module over ~600 lines: it is one class whose state (stream time, the record context, the
stores, the punctuation schedules, the committable positions) every lifecycle step reads and
writes; the parts that stand alone are already beside it (contexts, record errors, offset
metadata, e2e latency, the compiled path).

Time: a partition's time is the largest timestamp of the records processed from it, and stream
time the largest of them (-1 before any). Both are committed with the input offsets and a task
that takes the partitions over starts from them (``initialize_metadata``, Kafka's
initializeTaskTime; the format is ``offset_metadata``'s). Stream-time punctuations are aligned to 0
and fire once stream time reaches their due time: after the record that moves it there, or, for a
stream time known from the last commit, before the task's first record
(``maybe_punctuate_stream_time``). Wall-clock punctuations first fire one interval after they are
scheduled. A punctuation that missed several intervals fires once, then keeps its alignment
(Kafka's PunctuationSchedule).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NoReturn

from kstreams._native.per_record import NEVER_DUE, BatchProgress, run_records
from kstreams._native.store_core import stamped_changes
from kstreams.cluster.port import TopicPartition
from kstreams.errors import ProcessorStateException, StreamsException
from kstreams.processing.compiled.columns import KEYS, VALUES, decode_whole_column
from kstreams.processing.compiled.compiler import CompiledSource, compiled_or_per_record
from kstreams.processing.e2e_latency import E2ELatencySensor, register_e2e_latency
from kstreams.processing.offset_metadata import TopicPartitionMetadata
from kstreams.processing.processor_context import ProcessorContextImpl, PunctuationSchedule
from kstreams.processing.record_context import RecordContext
from kstreams.processing.record_errors import RecordErrors, handler_decision
from kstreams.processor import PunctuationType, Punctuator, Record, TaskId
from kstreams.topology.graph import ProcessorGraph, ProcessorNode

if TYPE_CHECKING:
    from kstreams._native.per_record import NodeBase
    from kstreams._native.record_batch import RecordBatch
    from kstreams._native.record_cache import RecordCache
    from kstreams._native.record_collector import RecordCollector
    from kstreams.config import StreamsConfig
    from kstreams.metrics import MetricsRegistry
    from kstreams.state.store import RestoreCallback, StateStore
    from kstreams.topology.plan import SubtopologyPlan

# ProcessorContextImpl is re-exported: the task is the context's other half.
__all__ = ["ProcessorContextImpl", "StreamTask"]

logger = logging.getLogger(__name__)

_NEVER = NEVER_DUE  # a due time no stream time reaches


class StreamTask:
    """Runs one partition of one subtopology (see the module docstring for the lifecycle).

    ``state_dir`` is the application's state directory (``<state.dir>/<application.id>``); the
    task's own directory is ``<state_dir>/<task_id>``. ``clock`` gives wall-clock seconds.
    """

    def __init__(
        self,
        task_id: TaskId,
        subtopology: SubtopologyPlan,
        partitions: Sequence[TopicPartition],
        config: StreamsConfig,
        collector: RecordCollector,
        partition_count: Callable[[str], int],
        state_dir: str,
        clock: Callable[[], float] = time.time,
        metrics: MetricsRegistry | None = None,
        client_id: str | None = None,
        partitions_must_exist: bool = True,
    ) -> None:
        self.task_id = task_id
        self.subtopology = subtopology
        self.partitions = tuple(partitions)
        self.config = config
        self.collector = collector
        self.partition_count = partition_count
        # False in the test driver only: its sinks write to any partition a partitioner names,
        # as Kafka's TopologyTestDriver does (its topics have one partition, and none is refused).
        self.partitions_must_exist = partitions_must_exist
        self.application_id = str(config["application.id"])
        self._state_root = state_dir
        self._clock = clock
        # The client's registry and id, for its stores' metrics (None outside a client).
        self.metrics = metrics
        self.client_id = client_id
        self.stream_time = -1
        self.commit_requested = False
        # The client's global stores (name -> store), readable by every processor unconnected.
        self.global_stores: dict[str, StateStore] = {}
        self.graph: ProcessorGraph = ProcessorGraph(subtopology.id)
        self.context = ProcessorContextImpl(self)
        self._deserialization_handler = config.deserialization_exception_handler()
        self.record_errors = RecordErrors(self)
        self._consumed: dict[TopicPartition, int] = {}
        self._partition_times: dict[TopicPartition, int] = {}
        # The processors' metadata read from the last commit, committed again with every offset
        # (kstreams' own processors write none; a Kafka Streams application's may have).
        self._processor_metadata: dict[str, int] = {}
        # Each caching layer's headers of its dirty entries' last writes (see state/caching.py).
        self.header_notes: list[dict[bytes, Any]] = []
        self._stream_schedules: list[tuple[int, int, PunctuationSchedule]] = []
        self._wall_schedules: list[tuple[int, int, PunctuationSchedule]] = []
        self._schedule_seq = itertools.count()
        self._changelog_stores: dict[TopicPartition, StateStore] = {}
        self._restore_callbacks: dict[TopicPartition, RestoreCallback] = {}
        self._registered_changelogs: list[tuple[str, int]] = []
        self._store_owners: dict[str, ProcessorNode] = {}  # store -> node its flushes forward as
        self._segments: dict[str, CompiledSource] = {}  # source topic -> compiled segment
        # Whether processing a batch calls Python processors (the stream threads then run the
        # batch under their PythonGate); False only when every source has a GIL-free segment.
        self.runs_python = True
        self._initialized = False
        self._processors_initialized = False
        self._closed = False
        # KIP-613 record-e2e-latency of each source node, by source topic (None: no metrics)
        self._source_e2e: dict[str, E2ELatencySensor] | None = None

    def __repr__(self) -> str:
        return f"StreamTask({self.task_id}, partitions={[str(p) for p in self.partitions]})"

    # ------------------------------------------------------------------ lifecycle

    def initialize(self) -> None:
        """Build the graph and open its stores (logged stores register restore callbacks)."""
        if self._initialized:
            return
        graph = self.subtopology.create_graph()
        self._register_e2e_latency(graph)
        graph.bind(
            self.context,
            self.collector,
            self.partition_count,
            self.task_id.partition,
            self.partitions_must_exist,
        )
        self.graph = graph
        for node in graph.processor_nodes:
            for store_name in node.stores:
                self._store_owners.setdefault(store_name, node)
        opened: list[StateStore] = []
        try:
            for name, store in graph.stores.items():
                store.init(self.context, store)
                opened.append(store)
                topic = self.subtopology.changelog_topics.get(name)
                # A versioned store's changelog records are versions, not overwrites of a key:
                # none may be suppressed by a newer record of the same key.
                if topic is not None and not getattr(store, "keeps_every_changelog_record", False):
                    self.collector.register_changelog(topic, self.task_id.partition)
                    self._registered_changelogs.append((topic, self.task_id.partition))
        except Exception as exc:
            for store in opened:
                try:
                    store.close()
                except Exception:
                    logger.warning(
                        "Closing store %s of task %s failed", store.name, self.task_id, exc_info=True
                    )
            self._unregister_changelogs()
            if isinstance(exc, StreamsException):
                exc.task_id = exc.task_id or self.task_id
                raise
            raise ProcessorStateException(
                f"Task {self.task_id} could not open its state stores: {exc!r}", task_id=self.task_id
            ) from exc
        self._initialized = True
        logger.debug("Task %s initialized with stores %s", self.task_id, list(graph.stores))

    def reset_stores(self, wipe: Callable[[], None]) -> None:
        """Close every store, call ``wipe`` (which deletes their files), and open them again, empty.

        For a task whose processors have not started (it is restoring): they would hold views of
        the closed stores. The stores register their restore callbacks again as they open.
        """
        if self._processors_initialized or self._closed:
            raise ProcessorStateException(
                f"Task {self.task_id} cannot reset its stores once it processes or is closed.",
                task_id=self.task_id,
            )
        for store in self.graph.stores.values():
            if store.is_open:
                store.close()
        wipe()
        for store in self.graph.stores.values():
            store.init(self.context, store)
        logger.debug("Task %s reopened its stores empty", self.task_id)

    def changelog_partitions(self) -> dict[TopicPartition, StateStore]:
        """Changelog partition -> the store restored from it."""
        return dict(self._changelog_stores)

    def restore(self, changelog_tp: TopicPartition, batch: RecordBatch) -> None:
        """Apply a batch of changelog records to the store registered for that partition."""
        callback = self._restore_callbacks.get(changelog_tp)
        if callback is None:
            raise ProcessorStateException(
                f"Task {self.task_id} has no store restored from {changelog_tp}: it restores "
                f"{sorted(str(tp) for tp in self._restore_callbacks)}.",
                task_id=self.task_id,
            )
        # Interactive queries of stale stores (restoring and standby tasks) read under the store's
        # query lock: restoration takes it too, so a read never sees half a batch.
        lock = getattr(self._changelog_stores.get(changelog_tp), "query_lock", None)
        with lock if lock is not None else nullcontext():
            if getattr(callback, "with_timestamps", False):
                # Stores whose restore needs the changelog records' timestamps (versioned stores).
                timestamps = batch.timestamps_array().tolist()
                callback(list(zip(batch.keys(), batch.values(), timestamps, strict=True)))  # type: ignore[arg-type]
                return
            # A changelog record always has a key (a store writes none without one).
            callback(list(zip(batch.keys(), batch.values(), strict=True)))  # type: ignore[arg-type]

    def initialize_processors(self) -> None:
        """Call every processor's ``init`` (parents first), once the stores are restored."""
        if self._processors_initialized:
            return
        for node in self.graph.processor_nodes:
            failure = f"Failed to initialize processor {node.name} of task {self.task_id}"
            with self.running(node, failure=failure):
                node.processor.init(self.context)
        self._processors_initialized = True
        errors = self.record_errors
        if errors.enabled:
            # Each failure must name one record and one node: wrap the nodes (and the compiler
            # leaves every batch to the per-record path).
            for node in self.graph.processor_nodes:
                errors.guard(node)
            for sink in self.graph.sink_nodes:
                sink.on_serialization_error = errors.on_serialization_error
        self._segments = segments = compiled_or_per_record(self, records_guarded=errors.enabled)
        graph = self.graph
        self.runs_python = bool(graph.pattern_sources) or any(
            segments.get(topic) is None or segments[topic].calls_python for topic in graph.sources_by_topic
        )

    @property
    def compiled_segments(self) -> dict[str, CompiledSource]:
        """Source topic -> the compiled segment its batches run through (empty: all per record)."""
        return dict(self._segments)

    # ----------------------------------------------------------------- processing

    @contextmanager
    def running(
        self,
        node: NodeBase | None,
        record_context: RecordContext | None = None,
        failure: str | None = None,
        error: type[StreamsException] = StreamsException,
    ) -> Iterator[None]:
        """Run the block as ``node`` with ``record_context`` (None: keep the current one), and
        restore both after it. A failure leaves as a StreamsException naming this task: one the
        block raised keeps its message; any other is wrapped in ``error``, with the message
        ``"<failure>: <exception>"``, or without ``failure`` Kafka's message for a record a
        processor failed on (the node it came from and the record's position)."""
        context = self.context
        saved_node = context.node
        saved_record = context.record_context
        context.node = node
        if record_context is not None:
            context.record_context = record_context
        context.clear_failure()
        try:
            yield
        except StreamsException as exc:
            exc.task_id = exc.task_id or self.task_id
            if exc.failed_at is None:
                exc.failed_at = _failed_at(context.record_context)
            raise
        except Exception as exc:
            position = context.record_context
            if failure is None:
                failure = (
                    f"Exception caught in process. taskId={self.task_id}, "
                    f"processor={context.failed_node_name(exc)}, topic={position.topic}, "
                    f"partition={position.partition}, {_where(position)}"
                )
            wrapped = error(f"{failure}: {exc!r}", task_id=self.task_id)
            wrapped.failed_at = _failed_at(position)
            raise wrapped from exc
        finally:
            context.node = saved_node
            context.record_context = saved_record

    @property
    def record_cache(self) -> RecordCache | None:
        """The record cache of the stream thread running this task (None: none), set by that
        thread when it takes the task. Kept in the context, where C code reads it per record."""
        return self.context.task_cache

    @record_cache.setter
    def record_cache(self, cache: RecordCache | None) -> None:
        self.context.task_cache = cache

    @property
    def _next_stream_due(self) -> int:
        """The stream time at which the next stream-time punctuation falls due (kept in the
        context, where ``run_records`` reads it after every record)."""
        return self.context.next_stream_due

    @_next_stream_due.setter
    def _next_stream_due(self, due: int) -> None:
        self.context.next_stream_due = due

    def _register_e2e_latency(self, graph: ProcessorGraph) -> None:
        """KIP-613's record-e2e-latency sensors of the graph's terminal nodes: its sinks and its
        processors without children (Kafka's ``ProcessorTopology.terminalNodes``). The source
        nodes' are made when their first batch comes, as pattern sources' topics are known only
        then."""
        if self.metrics is None:
            return
        self._source_e2e = {}
        for sink in graph.sink_nodes:
            sink.e2e_latency = self._e2e_sensor(sink.name)
        for node in graph.processor_nodes:
            if not node.children:
                node.e2e_latency = self._e2e_sensor(node.name)

    def _e2e_sensor(self, node_name: str) -> E2ELatencySensor:
        assert self.metrics is not None
        tags = {
            "client-id": self.client_id or "",
            "task-id": str(self.task_id),
            "processor-node-id": node_name,
        }
        return register_e2e_latency(self.metrics, tags)

    def process(self, tp: TopicPartition, batch: RecordBatch) -> int:
        """Run a batch of one input partition through the graph; returns the records processed
        (records the deserialization handler skipped are consumed but not counted)."""
        n = len(batch)
        if n == 0:
            return 0
        sources = self._source_e2e
        if sources is not None:
            sensor = sources.get(tp.topic)
            if sensor is None:
                sensor = sources[tp.topic] = self._e2e_sensor(self.graph.source_for(tp.topic).name)
            sensor.record_timestamps(batch.timestamps_array())
        segment = self._segments.get(tp.topic)
        if (
            segment is not None
            # A segment that carries headers keeps the caches' header notes (the headers of the
            # record that last wrote each dirty entry) current. Any other writes entries without
            # their writers' headers: while a cache holds notes, its records go one by one.
            and (segment.carries_headers or not (batch.has_headers or any(self.header_notes)))
            and batch.max_timestamp < self._next_stream_due
            and self._process_compiled(segment, tp, batch)
        ):
            return n
        source = self.graph.source_for(tp.topic)
        topic = tp.topic
        position = RecordContext(topic, tp.partition)
        position.source = batch
        extractor = source.timestamp_extractor
        progress = BatchProgress(self._partition_times.get(tp, -1))
        try:
            with self.running(None, position):
                run_records(
                    self,
                    progress,
                    tp,
                    position,
                    self.context,
                    source.children,
                    batch,
                    # Built-in serdes decode the whole column at once; a column with a record they
                    # cannot read is deserialized record by record, where the handler sees that record.
                    decode_whole_column(source.key_deserializer, batch, KEYS),
                    decode_whole_column(source.value_deserializer, batch, VALUES),
                    source.key_deserializer.deserialize,
                    source.value_deserializer.deserialize,
                    batch.headers if batch.has_headers else None,
                    extractor,
                )
        finally:
            if progress.last_offset >= 0:
                self._consumed[tp] = progress.last_offset + 1
            self._partition_times[tp] = progress.partition_time
        return progress.processed

    def _process_compiled(self, segment: CompiledSource, tp: TopicPartition, batch: RecordBatch) -> bool:
        """Run a batch through its compiled segment; False (nothing done) when a record needs the
        per-record path from the source on. No stream-time punctuation falls due inside the batch
        (the caller checks), so stream time advances once, to the batch's largest timestamp."""
        if not segment.accepts(batch):
            return False
        if batch.max_timestamp > self.stream_time:
            self.stream_time = batch.max_timestamp
        if batch.max_timestamp > self._partition_times.get(tp, -1):
            self._partition_times[tp] = batch.max_timestamp
        position = RecordContext(tp.topic, tp.partition)
        position.source = batch  # no record is current: a failure names the batch's offsets
        with self.running(None, position):
            segment.run(self, batch)
        self._consumed[tp] = batch.last_offset + 1
        return True

    def _extract_timestamp(
        self,
        extractor: Callable[[Any, int], int],
        record: Record[Any, Any],
        partition_time: int,
        tp: TopicPartition,
        offset: int,
    ) -> int:
        timestamp = int(extractor(record, partition_time))
        if timestamp < 0:
            logger.warning(
                "Skipping the record at %s offset %d of task %s: its extracted timestamp %d is negative",
                tp,
                offset,
                self.task_id,
                timestamp,
            )
        return timestamp

    def _reject_negative_timestamp(self, tp: TopicPartition, offset: int, timestamp: int) -> NoReturn:
        raise StreamsException(
            f"Input record at {tp} offset {offset} has invalid (negative) timestamp {timestamp}: give "
            "the source a timestamp_extractor that returns a valid timestamp."
        )

    def _on_deserialization_error(
        self,
        tp: TopicPartition,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Any,
        exc: Exception,
    ) -> None:
        raw = Record(key, value, timestamp, headers)
        try:
            response = self._deserialization_handler.handle(self.context, raw, exc)
        except Exception as handler_exc:
            raise StreamsException(
                f"Fatal user code error in deserialization error callback for the record at {tp} offset "
                f"{offset} of task {self.task_id}: {handler_exc!r}",
                task_id=self.task_id,
            ) from handler_exc
        decision = handler_decision(response)
        self.record_errors.send_dead_letters(decision)
        if decision.continues:
            self.record_errors.record_dropped()
            return
        raise StreamsException(
            f"Deserialization exception handler is set to fail upon a deserialization error of the record "
            f"at topic {tp.topic} partition {tp.partition} offset {offset} (task {self.task_id}): {exc} "
            "To skip such records instead, set deserialization.exception.handler to "
            "LogAndContinueExceptionHandler.",
            task_id=self.task_id,
        ) from exc

    # ---------------------------------------------------------------- punctuation

    def wall_clock_ms(self) -> int:
        """The task's clock in milliseconds (the mock clock in the test driver)."""
        return round(self._clock() * 1000)

    def schedule_punctuation(
        self, node: NodeBase, interval_ms: int, punctuation_type: PunctuationType, callback: Punctuator
    ) -> PunctuationSchedule:
        """Schedule ``callback`` as ``node`` (what ``ProcessorContext.schedule`` does)."""
        seq = next(self._schedule_seq)
        if punctuation_type is PunctuationType.STREAM_TIME:
            # aligned to 0: fires as soon as there is data, then every interval of stream time
            schedule = PunctuationSchedule(node, interval_ms, punctuation_type, callback, 0, seq)
            heapq.heappush(self._stream_schedules, (0, seq, schedule))
            self._next_stream_due = self._stream_schedules[0][0]
        else:
            first_due = self.wall_clock_ms() + interval_ms
            schedule = PunctuationSchedule(node, interval_ms, punctuation_type, callback, first_due, seq)
            heapq.heappush(self._wall_schedules, (first_due, seq, schedule))
        return schedule

    def _live_schedules(self) -> list[PunctuationSchedule]:
        """Every punctuation not cancelled, in the order they were scheduled."""
        live = [s for heap in (self._stream_schedules, self._wall_schedules) for _, _, s in heap]
        return sorted((s for s in live if not s.cancelled), key=attrgetter("order"))

    def punctuation_dues(self) -> list[tuple[str, str, int, int]]:
        """(node, type, interval, next due) of every live punctuation, in scheduling order: what
        ``resume_punctuations`` needs to continue them in a rebuilt copy of this task."""
        return [(s.node.name, s.type.value, s.interval_ms, s.next_due) for s in self._live_schedules()]

    def resume_punctuations(self, dues: Sequence[tuple[str, str, int, int]]) -> None:
        """Give the punctuations scheduled so far (by ``init``) the due times an earlier copy of
        this task had reached (``punctuation_dues``), matched by node, type and interval in order.

        A task rebuilt from saved state then punctuates when its earlier copy would have, rather
        than one interval after it was rebuilt (which, rebuilt often enough, would be never)."""
        saved: dict[tuple[str, str, int], list[int]] = {}
        for node, kind, interval, due in dues:
            saved.setdefault((node, kind, int(interval)), []).append(int(due))
        for schedule in self._live_schedules():
            queue = saved.get((schedule.node.name, schedule.type.value, schedule.interval_ms))
            if queue:
                schedule.next_due = queue.pop(0)
        for heap in (self._stream_schedules, self._wall_schedules):
            heap[:] = [(s.next_due, seq, s) for _due, seq, s in heap]
            heapq.heapify(heap)
        self._next_stream_due = self._stream_schedules[0][0] if self._stream_schedules else _NEVER

    def maybe_punctuate_stream_time(self) -> bool:
        """Run the stream-time punctuations due at the current stream time; True if any ran.
        Records run them as they pass their due times; this serves a stream time that is known
        before any record, from the last commit (Kafka punctuates every task whose stream time
        is known, whether or not it has records)."""
        if self.stream_time < 0 or self.stream_time < self._next_stream_due:
            return False
        return self._punctuate_stream_time(self.stream_time)

    def _punctuate_stream_time(self, stream_time: int) -> bool:
        punctuated = self._run_due(self._stream_schedules, stream_time)
        self._next_stream_due = self._stream_schedules[0][0] if self._stream_schedules else _NEVER
        return punctuated

    def maybe_punctuate_wall_clock(self, now_ms: int) -> bool:
        """Run the wall-clock punctuations due at ``now_ms``; True if any ran."""
        if not self._wall_schedules or self._wall_schedules[0][0] > now_ms:
            return False
        return self._run_due(self._wall_schedules, now_ms)

    def next_wall_clock_punctuation_ms(self) -> int | None:
        """When the next wall-clock punctuation is due (None if none is scheduled)."""
        heap = self._wall_schedules
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def _run_due(self, heap: list[tuple[int, int, PunctuationSchedule]], now: int) -> bool:
        punctuated = False
        while heap and heap[0][0] <= now:
            _, _, schedule = heapq.heappop(heap)
            if schedule.cancelled:
                continue
            with self.running(
                schedule.node,
                RecordContext(timestamp=now),
                f"Exception caught while punctuating processor '{schedule.node.name}' of task "
                f"{self.task_id} ({schedule.type.value} at {now})",
            ):
                schedule.callback(now)
            punctuated = True
            if not schedule.cancelled:  # a punctuator may cancel itself
                schedule.advance(now)
                heapq.heappush(heap, (schedule.next_due, next(self._schedule_seq), schedule))
        return punctuated

    # --------------------------------------------------------------------- commit

    def flush(self) -> None:
        """Flush every store (caches forward what they hold; changelog writes go to the collector).

        A caching store forwards what it flushes through its flush listener with
        ``context.forward``; that runs as the first processor connected to the store (the one
        that materializes it, in DSL topologies), as Kafka's cache flush listeners run as the node
        that registered them.
        """
        owners = self._store_owners
        for name, store in self.graph.stores.items():
            with self.running(
                owners.get(name),
                failure=f"Task {self.task_id} failed to flush state store {name}",
                error=ProcessorStateException,
            ):
                store.flush()

    def committable_offsets(self) -> dict[TopicPartition, int]:
        """The next offset to read of each input partition, counting only processed (or skipped) records."""
        return dict(self._consumed)

    def committable_metadata(self) -> dict[TopicPartition, str]:
        """The metadata to commit with each offset of ``committable_offsets``: the partition's
        time and the processors' metadata, in Kafka Streams' format (``offset_metadata``)."""
        times, processors = self._partition_times, self._processor_metadata
        return {tp: TopicPartitionMetadata(times.get(tp, -1), processors).encode() for tp in self._consumed}

    def initialize_metadata(self, committed: Mapping[TopicPartition, str]) -> None:
        """Start from the metadata committed with the input offsets ({partition: metadata}; a
        partition without a committed offset is left out): each partition's time, stream time
        the largest of them, and the processors' metadata merged (the largest value of each
        key), as Kafka's initializeTaskTimeAndProcessorMetadata. Called before the processors'
        ``init``, so that they see the stream time too."""
        merged: dict[str, int] = {}
        for tp, text in committed.items():
            if tp not in self.partitions:
                continue
            decoded = TopicPartitionMetadata.decode(text)
            self._partition_times[tp] = decoded.partition_time
            if decoded.partition_time > self.stream_time:
                self.stream_time = decoded.partition_time
            for key, value in decoded.processor_metadata.items():
                if key not in merged or merged[key] < value:
                    merged[key] = value
        self._processor_metadata = merged
        if self.stream_time >= 0:
            logger.debug(
                "Task %s resumes at stream time %d (from the last commit)", self.task_id, self.stream_time
            )

    def close(self, clean: bool) -> None:
        """Close processors (parents first) then stores. A clean close raises the first failure;
        a dirty close drops the task's cached entries unflushed and logs failures."""
        if self._closed:
            return
        self._closed = True
        failures: list[BaseException] = []
        if self._processors_initialized:
            for node in self.graph.processor_nodes:
                try:
                    with self.running(
                        node, failure=f"Failed to close processor {node.name} of task {self.task_id}"
                    ):
                        node.processor.close()
                except StreamsException as exc:
                    failures.append(exc)
        if not clean and self.record_cache is not None:
            prefix = f"{self.task_id}-"
            for namespace in self.record_cache.namespaces():
                if namespace.startswith(prefix):
                    self.record_cache.remove_namespace(namespace)
        for name, store in self.graph.stores.items():
            try:
                if store.is_open:
                    store.close()
            except Exception as exc:
                failures.append(
                    ProcessorStateException(
                        f"Failed to close state store {name} of task {self.task_id}: {exc!r}"
                    )
                )
                failures[-1].__cause__ = exc
        self._unregister_changelogs()
        for failure in failures:
            if isinstance(failure, StreamsException):
                failure.task_id = self.task_id
            if not clean:
                logger.warning("Closing task %s dirty: %s", self.task_id, failure)
        if clean and failures:
            raise failures[0]
        logger.debug("Task %s closed (%s)", self.task_id, "clean" if clean else "dirty")

    def _unregister_changelogs(self) -> None:
        for topic, partition in self._registered_changelogs:
            self.collector.unregister_changelog(topic, partition)
        self._registered_changelogs.clear()

    # --------------------------------------------------------------------- stores

    def task_state_dir(self) -> str:
        """``<state.dir>/<application.id>/<task_id>``, created on first use."""
        path = os.path.join(self._state_root, str(self.task_id))
        os.makedirs(path, exist_ok=True)
        return path

    def register_store(self, store: StateStore, restore_callback: RestoreCallback) -> None:
        """Remember how to restore a logged store (``StateStoreContext.register``)."""
        topic = self.subtopology.changelog_topics.get(store.name)
        if topic is None:
            return  # not logged: nothing to restore from
        tp = TopicPartition(topic, self.task_id.partition)
        self._changelog_stores[tp] = store
        if getattr(store, "timestamped", False) and not getattr(restore_callback, "with_timestamps", False):
            restore_callback = _timestamps_restored(restore_callback)
        self._restore_callbacks[tp] = restore_callback

    def get_store(self, name: str) -> StateStore:
        """The task's store of that name (outermost layer)."""
        return self.graph.stores[name]

    def store_names(self) -> list[str]:
        return list(self.graph.stores)


def _timestamps_restored(restore_callback: RestoreCallback) -> RestoreCallback:
    """The restore callback of a timestamped store, whose changelog holds plain values stamped
    with their timestamps (Kafka's format, ``kstreams.state.changelogging``): each value gets its
    record's timestamp back in front, as Kafka's ``RecordConverters.rawValueToTimestampedValue``
    puts it, before the store below takes it."""

    def restore(records: list[tuple[bytes, bytes | None, int]]) -> None:
        restore_callback(stamped_changes(records))  # type: ignore[arg-type]

    restore.with_timestamps = True  # type: ignore[attr-defined]
    return restore  # type: ignore[return-value]


def _failed_at(position: RecordContext | None) -> tuple[str, int, int] | None:
    """The input record a failure happened at (a compiled batch: its first offset), or None
    outside record processing (a punctuation, a processor's init)."""
    if position is None or position.topic is None:
        return None
    batch = position.source
    if position.offset < 0 and batch is not None and len(batch):
        return (position.topic, position.partition, batch.first_offset)
    return (position.topic, position.partition, position.offset)


def _where(position: RecordContext) -> str:
    """A failure's position: the record's offset, or the offsets of the batch compiled
    processors were running (they fail for a batch, not for one of its records)."""
    batch = position.source
    if position.offset < 0 and batch is not None and len(batch):
        return f"offsets={batch.first_offset}-{batch.last_offset} (a batch run by compiled processors)"
    return f"offset={position.offset}"
