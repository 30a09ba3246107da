"""StreamTask: routing, stores and changelogs, punctuation, error handling, offsets."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from kstreams._native.per_record import FilterCore, OutputPartitionCounts
from kstreams._native.record_batch import RecordBatch, default_partition
from kstreams._native.record_collector import RecordCollector
from kstreams.cluster.port import TopicPartition
from kstreams.config import StreamsConfig
from kstreams.errors import StreamsException, TopologyException
from kstreams.processing.task import StreamTask
from kstreams.processor import Processor, ProcessorContext, PunctuationType, Record, TaskId, To
from kstreams.serdes import Serdes
from kstreams.state.store import StateStore, StoreBuilder
from kstreams.topology import Consumed, Produced, StreamsBuilder
from kstreams.topology.topology import Topology

S = Serdes.string()
IN = TopicPartition("in", 1)


class DictStore(StateStore):
    """A tiny key-value store of strings: logs changes and restores through the task's context."""

    def __init__(self, name: str, logged: bool) -> None:
        self._name = name
        self._logged = logged
        self.data: dict[str, str | None] = {}
        self.context: Any = None
        self.closed = False

    @property
    def name(self) -> str:
        return self._name

    def init(self, context: Any, root: StateStore) -> None:
        self.context = context
        context.register(root, self._restore)

    def _restore(self, records: list[tuple[bytes, bytes | None]]) -> None:
        for key, value in records:
            self.data[key.decode()] = value.decode() if value is not None else None

    def put(self, key: str, value: str) -> None:
        self.data[key] = value
        if self._logged:
            self.context.log_change(
                self._name, key.encode(), value.encode(), self.context.current_timestamp()
            )

    def get(self, key: str) -> str | None:
        return self.data.get(key)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    @property
    def is_open(self) -> bool:
        return self.context is not None and not self.closed


class DictBuilder(StoreBuilder):
    store_type = "keyvalue"  # type: ignore[assignment]

    def build(self) -> StateStore:
        return DictStore(self.name, self.logging_enabled)


class Lambda(Processor):
    """A processor from functions: on_init(ctx), on_record(ctx, record)."""

    def __init__(
        self,
        on_record: Callable[[ProcessorContext[Any, Any], Record[Any, Any]], None],
        on_init: Callable[[ProcessorContext[Any, Any]], None] | None = None,
    ) -> None:
        self.on_record = on_record
        self.on_init = on_init
        self.closed = False

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        if self.on_init:
            self.on_init(context)

    def process(self, record: Record[Any, Any]) -> None:
        self.on_record(self.context, record)

    def close(self) -> None:
        self.closed = True


def forward_all(ctx: ProcessorContext[Any, Any], record: Record[Any, Any]) -> None:
    ctx.forward(record)


def make_task(
    topology: Topology,
    tmp_path: Any,
    *,
    config: dict[str, Any] | None = None,
    partition_count: Callable[[str], int] = lambda topic: 4,
    clock: Callable[[], float] = lambda: 1.0,
) -> tuple[StreamTask, RecordCollector]:
    props = {"application.id": "app", "state.dir": str(tmp_path)} | (config or {})
    streams_config = StreamsConfig(props)
    plan = topology.build("app", streams_config)
    collector = RecordCollector()
    sub = plan.subtopology_for_topic("in")
    task = StreamTask(
        TaskId(sub.id, IN.partition),
        sub,
        [TopicPartition(t, IN.partition) for t in sub.source_topics],
        streams_config,
        collector,
        partition_count,
        os.path.join(str(tmp_path), "app"),
        clock=clock,
    )
    task.initialize()
    task.initialize_processors()
    return task, collector


def batch(*records: tuple[str | None, str | None, int], first_offset: int = 0) -> RecordBatch:
    return RecordBatch.from_columns(
        [k.encode() if k is not None else None for k, _, _ in records],
        [v.encode() if v is not None else None for _, v, _ in records],
        [ts for _, _, ts in records],
        partitions=IN.partition,
        offsets=list(range(first_offset, first_offset + len(records))),
    )


def drained(collector: RecordCollector) -> dict[tuple[str, int], list[tuple[Any, ...]]]:
    return {(topic, p): [r[:3] for r in b] for topic, p, b in collector.drain()}


def source(topology: Topology | None = None) -> Topology:
    return (topology or Topology()).add_source("src", "in", key_deserializer=S, value_deserializer=S)


def test_forward_to_a_child_by_name_reaches_only_that_child(tmp_path: Any) -> None:
    def route(ctx: ProcessorContext[Any, Any], record: Record[Any, Any]) -> None:
        ctx.forward(record, "left" if record.value.startswith("l") else "right")

    topology = source().add_processor("route", lambda: Lambda(route), "src")
    topology.add_sink("left", "out-left", "route", key_serializer=S, value_serializer=S)
    topology.add_sink("right", "out-right", "route", key_serializer=S, value_serializer=S)
    task, collector = make_task(topology, tmp_path)
    assert task.process(IN, batch(("k", "lx", 1), ("k", "rx", 2))) == 2
    out = drained(collector)
    partition = default_partition(b"k", 4)
    assert out == {("out-left", partition): [(b"k", b"lx", 1)], ("out-right", partition): [(b"k", b"rx", 2)]}


def test_forward_to_an_unknown_child_names_it(tmp_path: Any) -> None:
    topology = source().add_processor("p", lambda: Lambda(lambda ctx, r: ctx.forward(r, "ghost")), "src")
    task, _ = make_task(topology, tmp_path)
    with pytest.raises(StreamsException, match="Unknown downstream node: ghost") as info:
        task.process(IN, batch(("k", "v", 1)))
    assert info.value.task_id == TaskId(0, 1)


def test_processors_reach_connected_stores_only(tmp_path: Any) -> None:
    seen: list[Any] = []
    topology = source().add_processor(
        "p", lambda: Lambda(lambda ctx, r: seen.append(ctx.get_state_store("s"))), "src"
    )
    topology.add_processor("q", lambda: Lambda(lambda ctx, r: ctx.get_state_store("s")), "src")
    topology.add_state_store(DictBuilder("s"), "p")
    task, _ = make_task(topology, tmp_path)
    with pytest.raises(TopologyException, match="Processor q has no access to StateStore s") as info:
        task.process(IN, batch(("k", "v", 1)))
    assert info.value.task_id == TaskId(0, 1)
    assert seen == [task.get_store("s")]
    assert task.store_names() == ["s"]


def test_logged_store_writes_go_to_the_changelog_partition_of_the_task(tmp_path: Any) -> None:
    def count(ctx: ProcessorContext[Any, Any], record: Record[Any, Any]) -> None:
        store = ctx.get_state_store("counts")
        store.put(record.key, str(int(store.get(record.key) or 0) + 1))

    topology = (
        source()
        .add_processor("count", lambda: Lambda(count), "src")
        .add_state_store(DictBuilder("counts"), "count")
    )
    task, collector = make_task(topology, tmp_path)
    changelog = TopicPartition("app-counts-changelog", 1)
    assert list(task.changelog_partitions()) == [changelog]
    assert collector.is_changelog("app-counts-changelog", 1)
    task.process(IN, batch(("a", "x", 5), ("a", "y", 6)))
    # the collector keeps only the newest record per key of a changelog
    assert drained(collector) == {("app-counts-changelog", 1): [(b"a", b"2", 6)]}
    task.close(clean=True)
    assert not collector.is_changelog("app-counts-changelog", 1)


def test_restore_applies_changelog_records_before_processors_start(tmp_path: Any) -> None:
    topology = (
        source().add_processor("p", lambda: Lambda(forward_all), "src").add_state_store(DictBuilder("s"), "p")
    )
    plan = topology.build("app", StreamsConfig({"application.id": "app"}))
    config = StreamsConfig({"application.id": "app", "state.dir": str(tmp_path)})
    task = StreamTask(
        TaskId(0, 1), plan.subtopologies[0], [IN], config, RecordCollector(), lambda t: 1, str(tmp_path)
    )
    task.initialize()
    ((changelog, store),) = task.changelog_partitions().items()
    task.restore(changelog, RecordBatch.from_columns([b"a", b"b"], [b"1", None], [0, 0]))
    assert store.data == {"a": "1", "b": None}  # type: ignore[attr-defined]
    with pytest.raises(StreamsException, match="no store restored from"):
        task.restore(TopicPartition("other", 1), RecordBatch.empty())


def test_stream_time_punctuation_is_aligned_to_zero_and_skips_missed_intervals(tmp_path: Any) -> None:
    fired: list[tuple[int, int]] = []

    def init(ctx: ProcessorContext[Any, Any]) -> None:
        ctx.schedule(
            10, PunctuationType.STREAM_TIME, lambda ts: fired.append((ts, ctx.current_stream_time_ms()))
        )

    topology = source().add_processor("p", lambda: Lambda(lambda ctx, r: None, init), "src")
    task, _ = make_task(topology, tmp_path)
    assert task.stream_time == -1
    task.process(IN, batch(("k", "v", 5), ("k", "v", 12), ("k", "v", 13), ("k", "v", 3), ("k", "v", 35)))
    assert fired == [(5, 5), (12, 12), (35, 35)]
    task.process(IN, batch(("k", "v", 39), ("k", "v", 40), first_offset=5))
    assert fired[-1] == (40, 40)
    assert task.stream_time == 40


def test_wall_clock_punctuation_fires_when_due_and_stops_when_cancelled(tmp_path: Any) -> None:
    now = [1.0]
    fired: list[int] = []
    handles: list[Any] = []

    def init(ctx: ProcessorContext[Any, Any]) -> None:
        handles.append(ctx.schedule(100, PunctuationType.WALL_CLOCK_TIME, fired.append))

    topology = source().add_processor("p", lambda: Lambda(lambda ctx, r: None, init), "src")
    task, _ = make_task(topology, tmp_path, clock=lambda: now[0])
    assert task.next_wall_clock_punctuation_ms() == 1100
    assert not task.maybe_punctuate_wall_clock(1099)
    assert task.maybe_punctuate_wall_clock(1100)
    assert task.maybe_punctuate_wall_clock(1350)  # missed 1200 and 1300: fires once
    assert fired == [1100, 1350]
    assert task.next_wall_clock_punctuation_ms() == 1400
    handles[0].cancel()
    assert not task.maybe_punctuate_wall_clock(5000)
    assert task.next_wall_clock_punctuation_ms() is None


def test_a_rebuilt_task_resumes_the_punctuations_of_its_earlier_copy(tmp_path: Any) -> None:
    # What the Spark streaming run relies on: a task rebuilt from saved state in another worker
    # punctuates when its earlier copy would have, not one interval after every rebuild.
    fired: list[tuple[str, int]] = []

    def init(ctx: ProcessorContext[Any, Any]) -> None:
        ctx.schedule(100, PunctuationType.WALL_CLOCK_TIME, lambda ts: fired.append(("wall", ts)))
        ctx.schedule(10, PunctuationType.STREAM_TIME, lambda ts: fired.append(("stream", ts)))

    topology = source().add_processor("p", lambda: Lambda(lambda ctx, r: None, init), "src")
    first, _ = make_task(topology, tmp_path, clock=lambda: 1.0)
    first.process(IN, batch(("k", "v", 5)))
    assert first.maybe_punctuate_wall_clock(1100)
    assert fired == [("stream", 5), ("wall", 1100)]
    dues = first.punctuation_dues()
    assert dues == [("p", "WALL_CLOCK_TIME", 100, 1200), ("p", "STREAM_TIME", 10, 10)]

    fired.clear()
    rebuilt, _ = make_task(topology, tmp_path / "rebuilt", clock=lambda: 1.15)  # would be due at 1250
    rebuilt.stream_time = first.stream_time
    rebuilt.resume_punctuations(dues)
    assert rebuilt.next_wall_clock_punctuation_ms() == 1200
    assert rebuilt.maybe_punctuate_wall_clock(1200)
    rebuilt.process(IN, batch(("k", "v", 7), ("k", "v", 12), first_offset=1))
    # stream time 7 is still inside the interval the first copy punctuated for
    assert fired == [("wall", 1200), ("stream", 12)]


def test_punctuators_forward_as_their_node_without_record_metadata(tmp_path: Any) -> None:
    metadata: list[Any] = []

    def init(ctx: ProcessorContext[Any, Any]) -> None:
        def punctuate(ts: int) -> None:
            metadata.append(ctx.record_metadata())
            ctx.forward(Record("tick", str(ts), ts))

        ctx.schedule(50, PunctuationType.WALL_CLOCK_TIME, punctuate)

    topology = source().add_processor(
        "p", lambda: Lambda(lambda ctx, r: metadata.append(ctx.record_metadata()), init), "src"
    )
    topology.add_sink("out", "out", "p", key_serializer=S, value_serializer=S)
    task, collector = make_task(topology, tmp_path, clock=lambda: 0.0)
    task.process(IN, batch(("k", "v", 1), first_offset=7))
    task.maybe_punctuate_wall_clock(50)
    assert [m.offset if m else None for m in metadata] == [7, None]
    assert drained(collector) == {("out", default_partition(b"tick", 4)): [(b"tick", b"50", 50)]}


def test_deserialization_errors_fail_by_default_naming_the_position(tmp_path: Any) -> None:
    topology = Topology().add_source("src", "in", key_deserializer=S, value_deserializer=Serdes.long())
    topology.add_processor("p", lambda: Lambda(forward_all), "src")
    task, _ = make_task(topology, tmp_path)
    with pytest.raises(StreamsException, match="topic in partition 1 offset 3") as info:
        task.process(IN, batch(("k", "not-a-long", 1), first_offset=3))
    assert info.value.task_id == TaskId(0, 1)
    assert task.committable_offsets() == {}


def test_log_and_continue_skips_bad_records_and_moves_past_them(tmp_path: Any) -> None:
    seen: list[int] = []
    topology = Topology().add_source("src", "in", key_deserializer=S, value_deserializer=Serdes.long())
    topology.add_processor("p", lambda: Lambda(lambda ctx, r: seen.append(r.value)), "src")
    config = {"default.deserialization.exception.handler": "LogAndContinueExceptionHandler"}
    task, _ = make_task(topology, tmp_path, config=config)
    good = Serdes.long().serialize("in", 7)
    records = RecordBatch.from_columns([b"k", b"k"], [b"bad", good], [1, 2], partitions=1, offsets=[10, 11])
    assert task.process(IN, records) == 1
    assert seen == [7]
    assert task.committable_offsets() == {IN: 12}
    # the skipped record is the last one: its offset is still consumed
    assert task.process(IN, RecordBatch.from_columns([b"k"], [b"bad"], [3], partitions=1, offsets=[12])) == 0
    assert task.committable_offsets() == {IN: 13}


def test_user_errors_are_wrapped_with_task_node_and_position_keeping_the_cause(tmp_path: Any) -> None:
    def fail_on_boom(ctx: ProcessorContext[Any, Any], record: Record[Any, Any]) -> None:
        if record.value == "boom":
            raise ValueError("bad value")
        ctx.forward(record)

    topology = source().add_processor("first", lambda: Lambda(forward_all), "src")
    topology.add_processor("second", lambda: Lambda(fail_on_boom), "first")
    task, _ = make_task(topology, tmp_path)
    with pytest.raises(StreamsException) as info:
        task.process(IN, batch(("k", "ok", 1), ("k", "boom", 2), ("k", "never", 3), first_offset=20))
    message = str(info.value)
    assert "taskId=0_1" in message and "processor=second" in message and "offset=21" in message
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.task_id == TaskId(0, 1)
    assert task.committable_offsets() == {IN: 21}  # only the processed record


def test_sinks_partition_by_key_hash_round_robin_null_keys_and_honour_partitioners(tmp_path: Any) -> None:
    topology = source().add_sink("hashed", "h", "src", key_serializer=S, value_serializer=S)
    topology.add_sink(
        "custom", "c", "src", key_serializer=S, value_serializer=S, partitioner=lambda topic, k, v, n: n - 1
    )
    task, collector = make_task(topology, tmp_path, partition_count=lambda topic: 3)
    task.process(IN, batch(("key", "1", 1), (None, "2", 2), (None, "3", 3)))
    out = drained(collector)
    assert out[("h", default_partition(b"key", 3))][0] == (b"key", b"1", 1)
    # null keys go round robin, starting at the task's partition (1)
    assert out[("h", 1)][-1] == (None, b"2", 2)
    assert out[("h", 2)] == [(None, b"3", 3)]
    assert out[("c", 2)] == [(b"key", b"1", 1), (None, b"2", 2), (None, b"3", 3)]


def test_sink_serialization_errors_name_the_sink_and_topic(tmp_path: Any) -> None:
    topology = source().add_processor("p", lambda: Lambda(lambda ctx, r: ctx.forward(r.with_value(5))), "src")
    topology.add_sink("out", "out-topic", "p", key_serializer=S, value_serializer=S)
    task, _ = make_task(topology, tmp_path)
    with pytest.raises(
        StreamsException, match="Sink out could not serialize the value of a record for topic out-topic"
    ):
        task.process(IN, batch(("k", "v", 1)))


def test_commit_requests_and_state_dir(tmp_path: Any) -> None:
    topology = source().add_processor("p", lambda: Lambda(lambda ctx, r: ctx.commit()), "src")
    task, _ = make_task(topology, tmp_path)
    assert task.commit_requested is False
    task.process(IN, batch(("k", "v", 1)))
    assert task.commit_requested is True
    assert task.context.state_dir() == os.path.join(str(tmp_path), "app", "0_1")
    assert os.path.isdir(task.context.state_dir())


def test_close_closes_processors_and_stores(tmp_path: Any) -> None:
    topology = (
        source().add_processor("p", lambda: Lambda(forward_all), "src").add_state_store(DictBuilder("s"), "p")
    )
    task, _ = make_task(topology, tmp_path)
    processor = task.graph.nodes["p"].processor
    store = task.get_store("s")
    task.close(clean=True)
    assert processor.closed and store.closed  # type: ignore[attr-defined]


def test_timestamp_extractor_sets_record_time_and_negative_results_skip(tmp_path: Any) -> None:
    seen: list[int] = []
    topology = Topology().add_source(
        "src", "in", key_deserializer=S, value_deserializer=S, timestamp_extractor=lambda r, pt: int(r.value)
    )
    topology.add_processor("p", lambda: Lambda(lambda ctx, r: seen.append(r.timestamp)), "src")
    task, _ = make_task(topology, tmp_path)
    assert task.process(IN, batch(("k", "100", 1), ("k", "-1", 2), ("k", "50", 3))) == 2
    assert seen == [100, 50]
    assert task.stream_time == 100
    assert task.committable_offsets() == {IN: 3}


@pytest.mark.parametrize("with_headers", [True, False])
def test_cache_flushes_at_commit_forward_as_the_processor_owning_the_store(
    tmp_path: Any, with_headers: bool
) -> None:
    from kstreams._native.record_cache import RecordCache
    from kstreams.state.stores import Stores

    class Latest(Processor):
        def init(self, context: ProcessorContext[Any, Any]) -> None:
            self.store = context.get_state_store("latest")
            # A listener may take the headers of the entry's last write, or (written before
            # flushes carried them) only (key, new, old, timestamp).
            self.store.set_flush_listener(
                (lambda k, new, old, ts, headers: context.forward(Record(k, new, ts, headers)))
                if with_headers
                else (lambda k, new, old, ts: context.forward(Record(k, new, ts)))
            )

        def process(self, record: Record[Any, Any]) -> None:
            self.store.put(record.key, record.value)

    builder = Stores.key_value_store_builder(Stores.in_memory_key_value_store("latest"), S, S)
    topology = (
        source()
        .add_processor("latest", Latest, "src")
        .add_state_store(builder.with_caching_enabled(), "latest")
    )
    topology.add_sink("out", "out", "latest", key_serializer=S, value_serializer=S)
    config = StreamsConfig({"application.id": "app", "state.dir": str(tmp_path)})
    plan = topology.build("app", config)
    collector = RecordCollector()
    task = StreamTask(
        TaskId(0, 1), plan.subtopologies[0], [IN], config, collector, lambda t: 1, str(tmp_path)
    )
    task.record_cache = RecordCache(1 << 20)
    task.initialize()
    task.initialize_processors()
    task.process(IN, batch(("k", "a", 1), ("k", "b", 2)))
    assert ("out", 0) not in drained(collector)  # held in the cache until the commit
    task.flush()
    assert drained(collector)[("out", 0)] == [(b"k", b"b", 2)]


def test_partitioners_may_multicast_to_several_partitions_or_drop(tmp_path: Any) -> None:
    topology = source().add_sink(
        "multi",
        "m",
        "src",
        key_serializer=S,
        value_serializer=S,
        partitioner=lambda topic, key, value, n: {0, 2} if value == "both" else set(),
    )
    task, collector = make_task(topology, tmp_path, partition_count=lambda topic: 3)
    task.process(IN, batch(("k", "both", 1), ("k", "none", 2)))
    assert drained(collector) == {("m", 0): [(b"k", b"both", 1)], ("m", 2): [(b"k", b"both", 1)]}
    bad = source().add_sink("bad", "b", "src", key_serializer=S, value_serializer=S, partitioner=lambda *a: 7)
    task, _ = make_task(bad, tmp_path, partition_count=lambda topic: 3)
    with pytest.raises(StreamsException, match="chose partition 7 of topic b, which has 3 partitions"):
        task.process(IN, batch(("k", "v", 1)))


@pytest.mark.parametrize(
    ("serde", "values", "bad"),
    [
        (Serdes.string(), ["a", "", "ünï", None, "z"], [b"\xff\xfe"]),
        # two bad widths adding up to whole numbers: the column must not be read as one array
        (Serdes.long(), [0, -1, 2**63 - 1, None, 42], [b"\x00" * 7, b"\x00" * 9]),
        (Serdes.integer(), [0, -5, 2**31 - 1, None, 9], [b"\x00" * 5, b"\x00" * 3]),
        (Serdes.double(), [0.5, -1e300, float("inf"), None, 2.0], [b"\x00" * 4, b"\x00" * 12]),
        (Serdes.json(), [{"a": [1, None]}, "s", 3, None, [True]], [b"{not json"]),
        (Serdes.bytes(), [b"x", b"", b"\x00\xff", None, b"y"], []),
    ],
)
def test_built_in_serdes_read_a_batch_as_record_by_record_and_a_bad_record_alone_is_handled(
    tmp_path: Any, serde: Any, values: list[Any], bad: list[bytes]
) -> None:
    # The per-record path decodes a built-in serde's column at once; what processors see must be
    # what the serde reads record by record, and a record it cannot read must reach the handler
    # alone, the records around it processed.
    seen: list[tuple[Any, Any, int]] = []
    topology = Topology().add_source("src", "in", key_deserializer=S, value_deserializer=serde)
    topology.add_processor(
        "p", lambda: Lambda(lambda ctx, r: seen.append((r.key, r.value, r.timestamp))), "src"
    )
    config = {"default.deserialization.exception.handler": "LogAndContinueExceptionHandler"}
    task, _ = make_task(topology, tmp_path, config=config)
    raw = [serde.serialize("in", v) for v in values]
    keys = [f"k{i}".encode() for i in range(len(raw))]
    assert task.process(IN, RecordBatch.from_columns(keys, raw, list(range(len(raw))), partitions=1)) == len(
        raw
    )
    assert seen == [(f"k{i}", serde.deserialize("in", b), i) for i, b in enumerate(raw)]
    if not bad:
        return
    seen.clear()
    good = [b for b in raw if b is not None]  # a null would keep numbers from being read as one array
    with_bad = [*good[:2], *bad, *good[2:]]
    keys = [f"k{i}".encode() for i in range(len(with_bad))]
    offsets = list(range(100, 100 + len(with_bad)))
    records = RecordBatch.from_columns(
        keys, with_bad, list(range(len(with_bad))), partitions=1, offsets=offsets
    )
    assert task.process(IN, records) == len(good)
    assert [value for _, value, _ in seen] == [serde.deserialize("in", b) for b in good]
    assert [key for key, _, _ in seen] == [f"k{i}" for i in range(len(with_bad)) if not 2 <= i < 2 + len(bad)]
    assert task.committable_offsets() == {IN: 100 + len(with_bad)}


def test_a_negative_input_timestamp_fails_naming_the_record_and_keeps_what_came_before(tmp_path: Any) -> None:
    seen: list[str] = []
    topology = source().add_processor("p", lambda: Lambda(lambda ctx, r: seen.append(r.value)), "src")
    task, _ = make_task(topology, tmp_path)
    with pytest.raises(StreamsException, match="offset 31 has invalid \\(negative\\) timestamp -5"):
        task.process(IN, batch(("k", "a", 1), ("k", "b", -5), ("k", "c", 2), first_offset=30))
    assert seen == ["a"]
    assert task.committable_offsets() == {IN: 31}
    assert task.stream_time == 1


def test_forward_with_a_timestamp_restores_the_node_and_timestamp_after_its_children(tmp_path: Any) -> None:
    seen: list[tuple[str, str | None, int]] = []

    def parent(ctx: ProcessorContext[Any, Any], record: Record[Any, Any]) -> None:
        ctx.forward(record, To.all().with_timestamp(99))
        seen.append(("parent", ctx.current_node_name, ctx.current_timestamp()))  # type: ignore[attr-defined]

    def child(ctx: ProcessorContext[Any, Any], record: Record[Any, Any]) -> None:
        seen.append(("child", ctx.current_node_name, ctx.current_timestamp()))  # type: ignore[attr-defined]
        if record.value == "boom":
            raise ValueError("boom")

    topology = source().add_processor("parent", lambda: Lambda(parent), "src")
    topology.add_processor("child", lambda: Lambda(child), "parent")
    task, _ = make_task(topology, tmp_path)
    task.process(IN, batch(("k", "v", 5)))
    assert seen == [("child", "child", 99), ("parent", "parent", 5)]
    with pytest.raises(StreamsException, match="processor=child"):
        task.process(IN, batch(("k", "boom", 6)))
    context = task.context
    assert context.node is None and context.record_context.timestamp == 0  # the idle context again


def test_the_innermost_failing_processor_is_named_through_nested_forwards(tmp_path: Any) -> None:
    def fail(ctx: ProcessorContext[Any, Any], record: Record[Any, Any]) -> None:
        raise KeyError("missing")

    topology = source().add_processor("first", lambda: Lambda(forward_all), "src")
    topology.add_processor("second", lambda: Lambda(forward_all), "first")
    topology.add_processor("third", lambda: Lambda(fail), "second")
    task, _ = make_task(topology, tmp_path)
    with pytest.raises(StreamsException, match="processor=third"):
        task.process(IN, batch(("k", "v", 1)))


class _PythonString(type(Serdes.string())):  # type: ignore[misc]
    """The string serde as a subclass: sinks serialize with it in Python, not in C."""


class _PythonLong(type(Serdes.long())):  # type: ignore[misc]
    """The long serde as a subclass (Python path)."""


class _PythonBytes(type(Serdes.bytes())):  # type: ignore[misc]
    """The bytes serde as a subclass (Python path)."""


def test_sinks_with_built_in_serializers_send_exactly_what_the_serializers_would(tmp_path: Any) -> None:
    # Sinks with built-in serdes send from C; the same sinks with subclassed serdes take the
    # Python path. Both must give the same bytes, partitions, timestamps and headers, including
    # the records C hands back (null keys, values of another type, big ints).
    outputs = [
        ("text", "ünïcode", 5, None),
        ("text", None, 6, [("h", b"1")]),
        ("n", 2**62, 7, None),
        ("n", -3, 8, None),
        ("raw", b"\x00\x01", 9, None),
        (None, "no key", 10, None),
    ]

    def emit(ctx: ProcessorContext[Any, Any], record: Record[Any, Any]) -> None:
        for key, value, timestamp, headers in outputs:
            ctx.forward(Record(key, value, timestamp, headers), "strings" if key != "n" else "longs")
            if key == "raw":
                ctx.forward(Record(b"raw", value, timestamp, headers), "bytes")

    def run(string: Any, long: Any, raw: Any) -> dict[tuple[str, int], list[tuple[Any, ...]]]:
        topology = source().add_processor("p", lambda: Lambda(emit), "src")
        topology.add_sink("strings", "s", "p", key_serializer=string, value_serializer=string)
        topology.add_sink("longs", "l", "p", key_serializer=string, value_serializer=long)
        topology.add_sink("bytes", "b", "p", key_serializer=raw, value_serializer=raw)
        task, collector = make_task(topology, tmp_path / type(string).__name__, partition_count=lambda t: 5)
        senders.append(type(task.graph.nodes["strings"].process.__self__).__name__)
        with pytest.raises(StreamsException, match="could not serialize the value"):
            task.process(IN, batch(("k", "v", 1)))  # b"\x00\x01" is not a str: the "s" sink refuses it
        return {key: [(r[0], r[1], r[2], r[5]) for r in records] for key, records in _drain_all(collector)}

    senders: list[str] = []
    fast = run(Serdes.string(), Serdes.long(), Serdes.bytes())
    python = run(_PythonString(), _PythonLong(), _PythonBytes())
    assert senders == ["SinkSender", "SinkNode"]
    assert fast == python
    assert fast[("s", default_partition(b"text", 5))][0] == (b"text", "ünïcode".encode(), 5, None)
    assert fast[("l", default_partition(b"n", 5))] == [
        (b"n", (2**62).to_bytes(8, "big"), 7, None),
        (b"n", (-3).to_bytes(8, "big", signed=True), 8, None),
    ]


def test_c_sinks_partition_by_the_count_the_client_knows_now(tmp_path: Any) -> None:
    # The C send reads the client's cached partition counts itself. The count is described once;
    # once the cache is cleared (a new assignment, e.g. after autoscaling added partitions), the
    # next record is partitioned by the new count.
    partitions = {"out": 2}
    described: list[str] = []

    def describe(topic: str) -> int:
        described.append(topic)
        return partitions[topic]

    counts = OutputPartitionCounts(describe)
    topology = source().add_sink("sink", "out", "src", key_serializer=S, value_serializer=S)
    task, collector = make_task(topology, tmp_path, partition_count=counts)
    assert type(task.graph.nodes["sink"].process.__self__).__name__ == "SinkSender"
    keys = [f"key-{i}" for i in range(40)]
    task.process(IN, batch(*((key, "a", 1) for key in keys)))
    partitions["out"] = 5
    task.process(IN, batch(*((key, "b", 2) for key in keys), first_offset=40))
    counts.clear()
    task.process(IN, batch(*((key, "c", 3) for key in keys), first_offset=80))

    assert described == ["out", "out"]
    sent = {
        (topic, p): [(r[0].decode(), r[1].decode()) for r in records]
        for (topic, p), records in _drain_all(collector)
    }
    expected: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for value, count in (("a", 2), ("b", 2), ("c", 5)):
        for key in keys:
            expected.setdefault(("out", default_partition(key.encode(), count)), []).append((key, value))
    assert sent == expected


def test_records_crossing_c_processors_reach_python_processors_and_sinks_whole(tmp_path: Any) -> None:
    # Between C processors a record travels as its fields; a Python processor or a sink gets a
    # Record with every field (headers and timestamp included), and siblings share one.
    seen: list[Record[Any, Any]] = []

    class Capture(Processor):  # type: ignore[type-arg]
        def process(self, record: Record[Any, Any]) -> None:
            seen.append(record)

    builder = StreamsBuilder()
    upper = builder.stream("in", Consumed.with_(S, S)).filter(lambda k, v: v != "drop").map_values(str.upper)
    upper.process(Capture)
    upper.process(Capture)
    upper.to("out", Produced.with_(S, S))
    task, collector = make_task(
        builder.build(), tmp_path, config={"processing.compiled": False}, partition_count=lambda t: 1
    )
    headers = [[("h", b"1")], None, [("h", b"3")]]
    task.process(
        IN,
        RecordBatch.from_columns(
            [b"a", b"b", b"c"], [b"x", b"drop", b"z"], [5, 6, 7], IN.partition, [0, 1, 2], headers
        ),
    )

    assert [(r.key, r.value, r.timestamp, r.headers) for r in seen] == [
        ("a", "X", 5, [("h", b"1")]),
        ("a", "X", 5, [("h", b"1")]),
        ("c", "Z", 7, [("h", b"3")]),
        ("c", "Z", 7, [("h", b"3")]),
    ]
    assert seen[0] is seen[1] and seen[2] is seen[3]
    sent = [(r[0], r[1], r[2], r[5]) for _, records in _drain_all(collector) for r in records]
    assert sent == [(b"a", b"X", 5, [("h", b"1")]), (b"c", b"Z", 7, [("h", b"3")])]


def _drain_all(collector: RecordCollector) -> list[tuple[tuple[str, int], list[tuple[Any, ...]]]]:
    return sorted(((topic, p), list(records)) for topic, p, records in collector.drain())


class _CountingFilter(FilterCore):
    """The C filter with ``process`` overridden in Python: the override must run for every record."""

    def __init__(self) -> None:
        super().__init__(lambda key, value: value != "drop", False)
        self.seen: list[str] = []

    def process(self, record: Record[Any, Any]) -> None:
        self.seen.append(record.value)
        super().process(record)


def test_c_processors_run_as_python_overrides_and_wrappers_say(tmp_path: Any) -> None:
    # A node whose processor's ``process`` is C's own runs it without a Python call; a Python
    # override of it, or a wrapper set on the node afterwards, must still be what runs.
    made: list[_CountingFilter] = []

    def counting() -> _CountingFilter:
        made.append(_CountingFilter())
        return made[-1]

    topology = source().add_processor("plain", lambda: FilterCore(lambda k, v: v != "drop", True), "src")
    topology.add_processor("counting", counting, "src")
    topology.add_sink("kept", "kept", "counting", key_serializer=S, value_serializer=S)
    topology.add_sink("dropped", "dropped", "plain", key_serializer=S, value_serializer=S)
    task, collector = make_task(topology, tmp_path, partition_count=lambda t: 1)
    wrapped: list[str] = []
    node = task.graph.nodes["plain"]
    inner = node.process
    node.process = lambda record: (wrapped.append(record.value), inner(record))
    task.process(IN, batch(("a", "keep", 1), ("b", "drop", 2), ("c", "more", 3)))
    assert made[0].seen == ["keep", "drop", "more"]
    assert wrapped == ["keep", "drop", "more"]
    assert drained(collector) == {
        ("kept", 0): [(b"a", b"keep", 1), (b"c", b"more", 3)],
        ("dropped", 0): [(b"b", b"drop", 2)],
    }
