"""TopologyTestDriver: run a topology in a unit test, without threads or a cluster.

Kafka's ``TopologyTestDriver`` in Python spelling. Pipe records into input topics, read what
the topology wrote from output topics, move the mock wall clock to fire wall-clock punctuations,
and look into state stores::

    driver = TopologyTestDriver(topology, {"default.key.serde": "string"})
    words = driver.create_input_topic("words", Serdes.string(), Serdes.string())
    counts = driver.create_output_topic("counts", Serdes.string(), Serdes.long())
    words.pipe_input("k", "hello")
    assert counts.read_key_value() == ("hello", 1)

Piping follows Kafka's ``TestInputTopic.pipeInput`` overloads: ``pipe_input(value)`` (a null key),
``pipe_input(key, value)``, ``pipe_input(value, instant)`` (a ``datetime`` second argument),
``pipe_input(key, value, timestamp)`` and ``pipe_input(TestRecord(...))``.

How it runs: one ``StreamTask`` per subtopology, all on partition 0 (every topic has one partition;
as in Kafka's driver, a record a partitioner sends to another partition is written all the same and
read back from that one), sharing a real ``RecordCollector``. Each piped record is processed, then
its task is committed the way Kafka's driver commits after every record: stores are flushed (caches
forward what they hold) and the collector is drained. Every record written waits in its topic's
queue for ``TestOutputTopic`` readers (internal topics too, under their prefixed names, as in
Kafka's driver); records written to a topic the topology reads (its repartition topics, or a user
topic it writes and reads back) are also fed, one by one, to the subtopology that reads them before
``pipe_input`` returns.

Time: the mock wall clock starts at the current time (Kafka's ``System.currentTimeMillis()``)
unless the driver is given ``initial_wall_clock_time_ms``. Input topics stamp records with their
own clock (starting at the driver's wall-clock time when the topic is created, advancing by
``auto_advance`` per record) unless a timestamp is given; ``advance_wall_clock_time`` moves the
mock wall clock and runs due wall-clock punctuations.

Stores: the DSL's tables and aggregations are timestamped stores. ``get_key_value_store`` and
``get_window_store`` show them with plain values (Kafka's facades);
``get_timestamped_key_value_store`` and ``get_timestamped_window_store`` with ``ValueAndTimestamp``.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from kstreams._native.record_batch import RecordBatch
from kstreams._native.record_collector import RecordCollector
from kstreams.cluster.port import TopicPartition
from kstreams.config import StreamsConfig
from kstreams.processing.global_task import GlobalStateTask
from kstreams.processing.record_cache import single_thread_cache
from kstreams.processing.task import StreamTask
from kstreams.processor import TaskId
from kstreams.state.store import KeyValueStore, StateStore, WindowStore
from kstreams.state.timestamped import is_timestamped, plain_value_view
from kstreams.topology.dsl.records import KeyValue

if TYPE_CHECKING:
    from kstreams.topology.topology import Topology

__all__ = ["TestInputTopic", "TestOutputTopic", "TestRecord", "TopologyTestDriver"]

logger = logging.getLogger(__name__)

Headers = list[tuple[str, bytes | None]]

_MISSING: Any = object()  # an argument not given (None is a value: a null key or value)


def _to_ms(value: int | float | timedelta | datetime, what: str) -> int:
    if isinstance(value, timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be milliseconds (int), a timedelta or a datetime, got {value!r}.")
    return int(value)


@dataclass(frozen=True)
class TestRecord:
    """A record piped into or read from a test topic. A timestamp of None, when piped, means the
    input topic's current time."""

    __test__ = False  # not a pytest test class

    key: Any = None
    value: Any = None
    timestamp: int | None = None
    headers: Headers | None = None


class TopologyTestDriver:
    """Runs ``topology`` synchronously (see the module docstring).

    ``config`` defaults ``application.id`` to "test-driver" and ``state.dir`` to a fresh temporary
    directory that ``close()`` removes. The wall clock starts at ``initial_wall_clock_time_ms``
    (milliseconds, a timedelta since the epoch or a datetime), else at the current time.
    """

    def __init__(
        self,
        topology: Topology,
        config: Mapping[str, Any] | None = None,
        initial_wall_clock_time_ms: int | datetime | None = None,
    ) -> None:
        props = config.originals() if isinstance(config, StreamsConfig) else dict(config or {})
        props.setdefault("application.id", "test-driver")
        self._temp_dir: str | None = None
        if not props.get("state.dir"):
            self._temp_dir = tempfile.mkdtemp(prefix="kstreams-test-driver-")
            props["state.dir"] = self._temp_dir
        self.config = StreamsConfig(props)
        application_id = self.config.application_id
        self._plan = topology.build(application_id, self.config)
        self._wall_clock_ms = (
            int(time.time() * 1000)
            if initial_wall_clock_time_ms is None
            else _to_ms(initial_wall_clock_time_ms, "initial_wall_clock_time_ms")
        )
        self._collector = RecordCollector()
        self._offsets: dict[str, int] = {}
        self._outputs: dict[str, deque[tuple[bytes | None, bytes | None, int, Headers | None]]] = {}
        self._produced: set[str] = set()
        self._internal_sources = {t for s in self._plan.subtopologies for t in s.repartition_source_topics}
        cache = single_thread_cache(self.config, self._plan.store_builders, self._plan.store_builders)
        self._tasks: dict[int, StreamTask] = {}
        self._task_for_topic: dict[str, StreamTask] = {}
        app_state_dir = f"{self.config['state.dir']}/{application_id}"
        # Global stores: one task per global subtopology; a record piped into a global topic
        # updates its store at once, and every task reads the stores without being connected.
        self._global_tasks: dict[str, StreamTask] = {}
        global_stores: dict[str, StateStore] = {}
        try:
            for sub in self._plan.global_subtopologies:
                global_task = GlobalStateTask(
                    TaskId(sub.id, -1),
                    sub,
                    [TopicPartition(t, 0) for t in sub.source_topics],
                    self.config,
                    self._collector,
                    _one_partition,
                    app_state_dir,
                    clock=self._clock,
                )
                for topic in sub.source_topics:
                    self._global_tasks[topic] = global_task
                global_task.initialize()
                global_task.initialize_processors()
                global_stores.update(global_task.graph.stores)
            for sub in self._plan.subtopologies:
                task = StreamTask(
                    TaskId(sub.id, 0),
                    sub,
                    [TopicPartition(t, 0) for t in sub.source_topics],
                    self.config,
                    self._collector,
                    _one_partition,
                    app_state_dir,
                    clock=self._clock,
                    partitions_must_exist=False,
                )
                task.record_cache = cache
                task.global_stores = global_stores
                self._tasks[sub.id] = task
                for topic in sub.source_topics:
                    self._task_for_topic[topic] = task
                task.initialize()
            for task in self._tasks.values():
                task.initialize_processors()
        except BaseException:
            for task in [*self._tasks.values(), *self._global_tasks.values()]:
                task.close(clean=False)
            self._remove_temp_dir()
            raise
        self._closed = False
        # Wall-clock punctuations scheduled in init are due relative to the initial time; output
        # produced during init (rare) is captured now.
        self._run_queue(self._capture())

    # ----------------------------------------------------------------- topics

    def create_input_topic(
        self,
        name: str,
        key_serializer: Any,
        value_serializer: Any,
        start_timestamp: int | datetime | None = None,
        auto_advance: int | timedelta = 0,
    ) -> TestInputTopic:
        """An input topic writer; records without a timestamp get the topic's current time, which
        starts at ``start_timestamp`` (default: the driver's wall-clock time) and advances by
        ``auto_advance`` after each record."""
        start = self._wall_clock_ms if start_timestamp is None else _to_ms(start_timestamp, "start_timestamp")
        return TestInputTopic(
            self, name, key_serializer, value_serializer, start, _to_ms(auto_advance, "auto_advance")
        )

    def create_output_topic(
        self, name: str, key_deserializer: Any, value_deserializer: Any
    ) -> TestOutputTopic:
        """A reader of what the topology wrote to topic ``name``."""
        return TestOutputTopic(self, name, key_deserializer, value_deserializer)

    def produced_topic_names(self) -> set[str]:
        """Every topic the topology wrote to so far, internal topics included (as Kafka's driver)."""
        return set(self._produced)

    # ------------------------------------------------------------------ time

    def advance_wall_clock_time(self, advance: int | timedelta) -> None:
        """Move the mock wall clock forward and run the wall-clock punctuations now due."""
        ms = _to_ms(advance, "advance")
        if ms < 0:
            raise ValueError(f"The wall clock only moves forward: advance must be >= 0, got {advance!r}.")
        self._check_open()
        self._wall_clock_ms += ms
        for task in self._tasks.values():
            task.maybe_punctuate_wall_clock(self._wall_clock_ms)
            task.flush()
            self._run_queue(self._capture())

    @property
    def wall_clock_time_ms(self) -> int:
        return self._wall_clock_ms

    def _clock(self) -> float:
        return self._wall_clock_ms / 1000.0

    # ----------------------------------------------------------------- stores

    def get_all_state_stores(self) -> dict[str, StateStore]:
        tasks = [*self._tasks.values(), *self._global_tasks.values()]
        return {name: store for task in tasks for name, store in task.graph.stores.items()}

    def get_state_store(self, name: str) -> StateStore | None:
        """The store called ``name`` (its outermost layer, global stores included), or None if the
        topology has none."""
        for task in [*self._tasks.values(), *self._global_tasks.values()]:
            store = task.graph.stores.get(name)
            if store is not None:
                return store
        return None

    def get_key_value_store(self, name: str) -> Any:
        """The key-value store called ``name``, with plain values even when it is timestamped (the
        DSL's tables and aggregations); None if there is none or it is not a key-value store."""
        return plain_value_view(self._typed_store(name, "keyvalue", KeyValueStore))

    def get_timestamped_key_value_store(self, name: str) -> Any:
        """The timestamped key-value store called ``name`` (values are ``ValueAndTimestamp``); None
        if there is none or it is not a timestamped key-value store."""
        store = self._typed_store(name, "keyvalue", KeyValueStore)
        return store if is_timestamped(store) else None

    def get_window_store(self, name: str) -> Any:
        """The window store called ``name``, with plain values even when it is timestamped (the
        DSL's windowed aggregations); None if there is none or it is not a window store."""
        return plain_value_view(self._typed_store(name, "window", WindowStore))

    def get_timestamped_window_store(self, name: str) -> Any:
        """The timestamped window store called ``name`` (values are ``ValueAndTimestamp``); None if
        there is none or it is not a timestamped window store."""
        store = self._typed_store(name, "window", WindowStore)
        return store if is_timestamped(store) else None

    def get_session_store(self, name: str) -> Any:
        """The session store called ``name``; None if there is none or it is not a session store."""
        store = self.get_state_store(name)
        builder = self._plan.store_builders.get(name)
        return store if builder is not None and builder.store_type == "session" else None

    def _typed_store(self, name: str, store_type: str, kind: type) -> Any:
        store = self.get_state_store(name)
        if store is None:
            return None
        builder = self._plan.store_builders.get(name)
        if builder is not None:
            return store if builder.store_type == store_type else None
        return store if isinstance(store, kind) else None

    # ------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Flush and close every task, then remove the temporary state directory."""
        if self._closed:
            return
        self._closed = True
        failure: BaseException | None = None
        for task in [*self._tasks.values(), *dict.fromkeys(self._global_tasks.values())]:
            try:
                task.flush()
                task.close(clean=True)
            except BaseException as exc:
                failure = failure or exc
                task.close(clean=False)
        self._collector.drain()
        self._remove_temp_dir()
        if failure is not None:
            raise failure

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _remove_temp_dir(self) -> None:
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("The TopologyTestDriver is closed.")

    # ------------------------------------------------------------- processing

    def _pipe(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers | None
    ) -> None:
        self._check_open()
        global_task = self._global_tasks.get(topic)
        if global_task is not None:
            if timestamp < 0:
                raise ValueError(f"Timestamp must not be negative, got {timestamp} for topic {topic}.")
            offset = self._next_offset(topic, 1)
            batch = RecordBatch.from_records([(key, value, timestamp, 0, offset, headers)])
            global_task.process(TopicPartition(topic, 0), batch)
            global_task.flush()
            return
        task = self._task_for_topic.get(topic) or self._pattern_task(topic)
        if task is None or topic in self._internal_sources:
            raise ValueError(
                f"Unknown topic: {topic}. The topology reads {sorted(self._plan.source_topics)}; pipe "
                "records into one of those."
            )
        if timestamp < 0:
            raise ValueError(f"Timestamp must not be negative, got {timestamp} for topic {topic}.")
        batch = RecordBatch.from_records([(key, value, timestamp, 0, self._next_offset(topic, 1), headers)])
        self._run_queue(deque([(task, topic, batch)]))

    def _pattern_task(self, topic: str) -> StreamTask | None:
        """The task of the pattern source matching ``topic``, which then reads it for good."""
        for task in self._tasks.values():
            if any(pattern.fullmatch(topic) for pattern, _ in task.graph.pattern_sources):
                self._task_for_topic[topic] = task
                return task
        return None

    def _next_offset(self, topic: str, count: int) -> int:
        offset = self._offsets.get(topic, 0)
        self._offsets[topic] = offset + count
        return offset

    def _run_queue(self, queue: deque[tuple[StreamTask, str, Any]]) -> None:
        """Process queued records one at a time, committing after each like Kafka's driver; records
        for repartition topics join the queue."""
        while queue:
            task, topic, batch = queue.popleft()
            try:
                task.process(TopicPartition(topic, 0), batch)
            except BaseException:
                # What was sent before the failure was sent (a dead letter, say), as with Kafka's
                # driver, whose producer keeps the records a failing record's processing produced.
                self._capture()
                raise
            task.flush()
            task.commit_requested = False
            queue.extend(self._capture())

    def _capture(self) -> deque[tuple[StreamTask, str, Any]]:
        """Drain the collector into the per-topic output queues; records for a topic the topology
        reads (a repartition topic, or a user topic written and read back) also become work."""
        work: deque[tuple[StreamTask, str, Any]] = deque()
        for topic, _partition, batch in self._collector.drain():
            self._produced.add(topic)
            queue = self._outputs.setdefault(topic, deque())
            for key, value, timestamp, _p, _o, headers in batch:
                queue.append((key, value, timestamp, headers))
            task = self._task_for_topic.get(topic)
            if task is not None:
                # read back from the topic's one partition, whichever a partitioner named
                batch = batch.with_partition(0).with_offsets(self._next_offset(topic, len(batch)))
                for i in range(len(batch)):
                    work.append((task, topic, batch.slice(i, i + 1)))
        return work

    def _output_queue(self, topic: str) -> deque[tuple[bytes | None, bytes | None, int, Headers | None]]:
        return self._outputs.setdefault(topic, deque())


def _one_partition(topic: str) -> int:
    return 1


class TestInputTopic:
    """Pipes records into one input topic of a ``TopologyTestDriver``."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        driver: TopologyTestDriver,
        name: str,
        key_serializer: Any,
        value_serializer: Any,
        start_timestamp: int,
        auto_advance_ms: int,
    ) -> None:
        if auto_advance_ms < 0:
            raise ValueError(f"auto_advance must be >= 0, got {auto_advance_ms}.")
        self.name = name
        self._driver = driver
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._current_time = start_timestamp
        self._advance = auto_advance_ms

    def advance_time(self, advance: int | timedelta) -> None:
        """Move this topic's clock (the timestamp of records piped without one) forward."""
        ms = _to_ms(advance, "advance")
        if ms < 0:
            raise ValueError(f"advance must be >= 0, got {advance!r}.")
        self._current_time += ms

    def pipe_input(
        self,
        key_or_value: Any = _MISSING,
        value: Any = _MISSING,
        timestamp: int | datetime | None = None,
        headers: Headers | None = None,
        *,
        key: Any = _MISSING,
    ) -> None:
        """Send one record, as Kafka's ``pipeInput`` overloads: ``pipe_input(value)`` sends a value
        with a null key; ``pipe_input(key, value)``; ``pipe_input(value, instant)`` when the second
        argument is a ``datetime``; ``pipe_input(key, value, timestamp)`` (milliseconds or a
        datetime); ``pipe_input(TestRecord(...))`` a prepared record. Keywords: ``key=``,
        ``value=``, ``timestamp=``, ``headers=``."""
        if isinstance(key_or_value, TestRecord):
            if value is not _MISSING or key is not _MISSING or timestamp is not None or headers is not None:
                raise TypeError("pipe_input(TestRecord) takes no other argument: put them in the TestRecord.")
            record = key_or_value
            key, value, timestamp, headers = record.key, record.value, record.timestamp, record.headers
        elif key is not _MISSING:
            if value is not _MISSING and key_or_value is not _MISSING:
                raise TypeError("pipe_input() got the key twice: pass it by position or as key=, not both.")
            if value is _MISSING:
                value = None if key_or_value is _MISSING else key_or_value
        elif value is _MISSING:
            if key_or_value is _MISSING:
                raise TypeError("pipe_input() needs a value: pipe_input(value) or pipe_input(key, value).")
            key, value = None, key_or_value  # Kafka's pipeInput(V): a null key
        elif isinstance(value, datetime) and timestamp is None and key_or_value is not _MISSING:
            key, value, timestamp = None, key_or_value, value  # Kafka's pipeInput(V, Instant)
        else:
            key = None if key_or_value is _MISSING else key_or_value
        if timestamp is None:
            ts = self._current_time
            self._current_time += self._advance
        else:
            ts = _to_ms(timestamp, "timestamp")
        self._driver._pipe(
            self.name,
            self._key_serializer.serialize(self.name, key),
            self._value_serializer.serialize(self.name, value),
            ts,
            list(headers) if headers is not None else None,
        )

    def pipe_value_list(self, values: Iterable[Any]) -> None:
        """Send records with null keys."""
        for value in values:
            self.pipe_input(None, value)

    def pipe_key_value_list(
        self,
        pairs: Iterable[tuple[Any, Any]],
        start_timestamp: int | datetime | None = None,
        advance: int | timedelta | None = None,
    ) -> None:
        """Send (key, value) pairs (KeyValue works); with ``start_timestamp`` and ``advance`` the
        records get start, start+advance, ... instead of the topic's clock."""
        if start_timestamp is None:
            for key, value in pairs:
                self.pipe_input(key, value)
            return
        ts = _to_ms(start_timestamp, "start_timestamp")
        step = _to_ms(advance or 0, "advance")
        for key, value in pairs:
            self.pipe_input(key, value, ts)
            ts += step

    def pipe_record_list(self, records: Iterable[Any]) -> None:
        """Send records with key, value, timestamp and headers attributes (TestRecord, Record)."""
        for record in records:
            self.pipe_input(
                record.key,
                record.value,
                getattr(record, "timestamp", None),
                getattr(record, "headers", None),
            )

    def __repr__(self) -> str:
        return f"TestInputTopic({self.name!r}, current_time={self._current_time})"


class TestOutputTopic:
    """Reads, in order, what the topology wrote to one topic of a ``TopologyTestDriver``."""

    __test__ = False  # not a pytest test class

    def __init__(
        self, driver: TopologyTestDriver, name: str, key_deserializer: Any, value_deserializer: Any
    ) -> None:
        self.name = name
        self._driver = driver
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer

    def _pop(self) -> tuple[bytes | None, bytes | None, int, Headers | None]:
        queue = self._driver._output_queue(self.name)
        if not queue:
            raise IndexError(f"Empty topic: {self.name}")
        return queue.popleft()

    def read_record(self) -> TestRecord:
        key, value, timestamp, headers = self._pop()
        return TestRecord(
            self._key_deserializer.deserialize(self.name, key),
            self._value_deserializer.deserialize(self.name, value),
            timestamp,
            headers,
        )

    def read_value(self) -> Any:
        return self.read_record().value

    def read_key_value(self) -> KeyValue:
        record = self.read_record()
        return KeyValue(record.key, record.value)

    def read_records_to_list(self) -> list[TestRecord]:
        return [self.read_record() for _ in range(self.get_queue_size())]

    def read_values_to_list(self) -> list[Any]:
        return [record.value for record in self.read_records_to_list()]

    def read_key_values_to_list(self) -> list[KeyValue]:
        return [KeyValue(record.key, record.value) for record in self.read_records_to_list()]

    def read_key_values_to_map(self) -> dict[Any, Any]:
        """The latest value per key (a None value is kept as None, as in Kafka)."""
        result: dict[Any, Any] = {}
        for record in self.read_records_to_list():
            if record.key is None:
                raise ValueError(f"Null keys not allowed with read_key_values_to_map (topic {self.name}).")
            result[record.key] = record.value
        return result

    def get_queue_size(self) -> int:
        return len(self._driver._output_queue(self.name))

    def is_empty(self) -> bool:
        return not self._driver._output_queue(self.name)

    def __repr__(self) -> str:
        return f"TestOutputTopic({self.name!r}, size={self.get_queue_size()})"
