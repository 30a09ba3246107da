"""Batches whose records carry headers run through compiled stateless segments (filters,
projections, chains of Python filters and mappers, sinks, and the per-record path past a
boundary) and aggregations, and come out as the per-record path sends them: every output record
with the headers of the input record it came from, an aggregate's update with those of the record
that made it (with a record cache: of the entry's last writer), session counts included."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from kstreams import Consumed, Materialized, Produced, Serdes, StreamsBuilder, TimeWindows, WindowedSerdes
from kstreams._native import kernels
from kstreams._native.record_batch import RecordBatch, default_partition
from kstreams.client import KafkaStreams
from kstreams.predicates import json_field
from kstreams.processor import Processor, ProcessorContext, Record
from kstreams.testing import TopologyTestDriver
from kstreams.topology import SessionWindows
from tests.support.waiting import wait_until

from .test_compiler import WAIT_S, counts, python_chain, stateless

STRING, JSON, LONG_SERDE = Serdes.string(), Serdes.json(), Serdes.long()
PER_RECORD = {"processing.compiled": False}


class _Tagging(Processor[Any, Any, Any, Any]):
    """A Python processor past the compiled filter: forwards each record with its headers and
    the header count it saw in its value."""

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context

    def process(self, record: Record[Any, Any]) -> None:
        seen = len(record.headers or [])
        self.context.forward(record.with_value(f"{record.value['user']}/{seen}"))


def chain_into_processor() -> Any:
    """A chain of Python functions, then a Python processor (the per-record path below it)."""
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(STRING, JSON)).filter(lambda k, doc: not doc["bot"]).process(
        _Tagging
    ).to("out", Produced.with_(STRING, STRING))
    return builder.build()


def boundary() -> Any:
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(STRING, JSON)).filter(json_field("bot").eq(False)).process(
        _Tagging
    ).to("out", Produced.with_(STRING, STRING))
    return builder.build()


def inputs(n: int) -> list[tuple[str, dict[str, Any], int, list[tuple[str, bytes | None]] | None]]:
    return [
        (
            f"k{i % 7}",
            {"user": f"u{i}", "bot": i % 3 == 0},
            1_000 + i,
            None if i % 4 == 0 else [("trace", f"t{i}".encode()), ("empty", None)],
        )
        for i in range(n)
    ]


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records each compiled segment's validation was given, from now on."""
    sizes: list[int] = []
    validate = kernels.validate

    def counted(batch: Any, *args: Any) -> Any:
        sizes.append(len(batch))
        return validate(batch, *args)

    monkeypatch.setattr(kernels, "validate", counted)
    return sizes


def _driven(make: Callable[[], Any], config: dict[str, Any]) -> list[tuple[Any, ...]]:
    driver = TopologyTestDriver(
        make(), {"default.key.serde": "string", "default.value.serde": "string", **config}
    )
    try:
        topic = driver.create_input_topic("in", STRING, JSON)
        for key, doc, ts, headers in inputs(40):
            topic.pipe_input(key, doc, ts, headers)
        out = driver.create_output_topic("out", STRING, Serdes.long() if make is counts else STRING)
        return [(r.key, r.value, r.timestamp, r.headers) for r in out.read_records_to_list()]
    finally:
        driver.close()


@pytest.mark.parametrize("make", [stateless, boundary, python_chain, chain_into_processor])
def test_stateless_segments_run_batches_with_headers_as_the_per_record_path(
    make: Callable[[], Any], validations: list[int]
) -> None:
    compiled = _driven(make, {})
    assert len(validations) == 40  # every record went through the compiled segment
    per_record = _driven(make, PER_RECORD)
    assert len(validations) == 40
    assert compiled == per_record
    kept = [(k, d, ts, h) for k, d, ts, h in inputs(40) if not d["bot"]]
    if make is python_chain:  # it also drops users starting with u1
        kept = [(k, d, ts, h) for k, d, ts, h in kept if not d["user"].startswith("u1")]
    assert [r[3] for r in compiled] == [h for *_, h in kept]
    if make in (boundary, chain_into_processor):
        assert [r[1] for r in compiled] == [f"{d['user']}/{len(h or [])}" for _, d, _, h in kept]


WINDOWS = TimeWindows.of_size_and_grace(100, 20).advance_by(50)


def aggregations(style: str, windows_out: bool) -> Callable[[], Any]:
    """A count and a windowed count per key: by the count kernel from the source ("kernel") or
    below a Python mapper ("chain"), or as aggregations with Python functions ("python"); the
    windowed counts go to "out-windowed" as "key@start" when ``windows_out``, else only to their
    store (a Python mapper below them would keep a batch without a cache per record)."""

    def make() -> Any:
        builder = StreamsBuilder()
        stream = builder.stream("in", Consumed.with_(STRING, JSON))
        if style != "kernel":
            stream = stream.map_values(lambda doc: doc["user"])
        grouped = stream.group_by_key()
        windowed = grouped.windowed_by(WINDOWS)
        if style == "python":
            count = grouped.aggregate(
                lambda: 0, lambda k, v, n: n + 1, Materialized.as_("counts").with_value_serde(LONG_SERDE)
            )
            window_counts = windowed.aggregate(
                lambda: 0, lambda k, v, n: n + 1, Materialized.as_("windowed").with_value_serde(LONG_SERDE)
            )
        else:
            count = grouped.count(Materialized.as_("counts"))
            window_counts = windowed.count(Materialized.as_("windowed"))
        count.to_stream().to("out", Produced.with_(STRING, LONG_SERDE))
        if windows_out:
            window_counts.to_stream().map(lambda wk, c: (f"{wk.key}@{wk.start}", c)).to(
                "out-windowed", Produced.with_(STRING, LONG_SERDE)
            )
        return builder.build()

    return make


def writers(data: list[tuple[str, Any, int, Any]]) -> dict[tuple[str, int], Any]:
    """The headers each aggregate update must carry: for (key, n) and ("key@start", n), those of
    the n-th record of the key (in that window), the record whose update made the count n."""
    made: dict[tuple[str, int], Any] = {}
    seen: dict[str, int] = {}
    for key, _, ts, headers in data:
        seen[key] = seen.get(key, 0) + 1
        made[(key, seen[key])] = headers
        for start in range(max(0, (ts - 100) // 50 * 50 + 50), ts + 1, 50):
            slot = f"{key}@{start}"
            seen[slot] = seen.get(slot, 0) + 1
            made[(slot, seen[slot])] = headers
    return made


CACHE_OFF = {"statestore.cache.max.bytes": 0}


@pytest.mark.parametrize("cache_off", [False, True], ids=["cache", "no-cache"])
@pytest.mark.parametrize("style", ["kernel", "chain", "python"])
def test_aggregations_run_batches_with_headers_as_the_per_record_path(
    style: str, cache_off: bool, validations: list[int]
) -> None:
    make = aggregations(style, windows_out=not cache_off)

    def driven(config: dict[str, Any]) -> list[tuple[Any, ...]]:
        driver = TopologyTestDriver(make(), {"default.key.serde": "string", **config})
        try:
            topic = driver.create_input_topic("in", STRING, JSON)
            for key, doc, ts, headers in inputs(40):
                topic.pipe_input(key, doc, ts, headers)
            return [
                (name, r.key, r.value, r.timestamp, r.headers)
                for name in ("out", "out-windowed")
                for r in driver.create_output_topic(name, STRING, LONG_SERDE).read_records_to_list()
            ]
        finally:
            driver.close()

    cache = CACHE_OFF if cache_off else {}
    compiled = driven(cache)
    assert len(validations) == 40  # every record went through the compiled segment
    assert compiled == driven({**cache, **PER_RECORD})
    assert len(validations) == 40
    made = writers(inputs(40))
    assert [headers for *_, headers in compiled] == [made[(key, count)] for _, key, count, *_ in compiled]
    assert any(headers is None for *_, headers in compiled) and any(headers for *_, headers in compiled)


def sessions() -> Any:
    """A session count per key (records of a key 7 ms apart, a 10 ms gap: every record merges the
    key's session, so each update comes with tombstones), its updates to "out"."""
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(STRING, JSON)).group_by_key().windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(10)
    ).count(Materialized.as_("sessions")).to_stream().to(
        "out", Produced.with_(WindowedSerdes.session_windowed_serde_from(STRING), LONG_SERDE)
    )
    return builder.build()


@pytest.mark.parametrize("cache_off", [False, True], ids=["cache", "no-cache"])
def test_a_session_count_runs_batches_with_headers_as_the_per_record_path(
    cache_off: bool, validations: list[int]
) -> None:
    def driven(config: dict[str, Any]) -> list[tuple[Any, ...]]:
        driver = TopologyTestDriver(sessions(), {"default.key.serde": "string", **config})
        try:
            topic = driver.create_input_topic("in", STRING, JSON)
            for key, doc, ts, headers in inputs(40):
                topic.pipe_input(key, doc, ts, headers)
            serde = WindowedSerdes.session_windowed_serde_from(STRING)
            out = driver.create_output_topic("out", serde, LONG_SERDE).read_records_to_list()
            return [(r.key.key, r.key.start, r.key.end, r.value, r.timestamp, r.headers) for r in out]
        finally:
            driver.close()

    cache = CACHE_OFF if cache_off else {}
    compiled = driven(cache)
    assert len(validations) == 40  # every record went through the compiled segment
    assert compiled == driven({**cache, **PER_RECORD})
    assert len(validations) == 40
    if cache_off:
        # Kafka's session aggregation forwards records it makes anew: no headers without a cache
        assert compiled and all(not row[5] for row in compiled)
        return
    # through the cache, each update (and each tombstone of a session it merged) carries the
    # headers of its entry's last writer, its record (the driver flushes after every record)
    by_end = {(key, ts): headers for key, _, ts, headers in inputs(40)}
    updates = [row for row in compiled if row[3] is not None]
    assert [row[5] for row in updates] == [by_end[(row[0], row[2])] for row in updates]
    assert any(row[3] is None and row[5] for row in compiled)  # tombstones with headers
    assert any(row[5] is None for row in compiled) and any(row[5] for row in compiled)


@pytest.mark.parametrize("cache_off", [False, True], ids=["cache", "no-cache"])
@pytest.mark.parametrize("style", ["kernel", "python"])
def test_kafka_streams_sends_aggregate_updates_with_their_writers_headers(
    style: str, cache_off: bool, tmp_path: Any, validations: list[int]
) -> None:
    make = aggregations(style, windows_out=not cache_off)
    data = inputs(3000)
    made = {
        (slot, n): headers for (slot, n), headers in writers(data).items() if "@" not in slot or not cache_off
    }
    finals: dict[str, int] = {}
    for slot, n in made:
        finals[slot] = max(n, finals.get(slot, 0))

    def outputs(cluster: Any) -> list[tuple[str, int, Any]]:
        return [
            (r.key.decode(), LONG_SERDE.deserializer().deserialize("", r.value), r.headers)
            for name in ("out", "out-windowed")
            for r in cluster.read(name)
        ]

    def done(written: list[tuple[str, int, Any]]) -> bool:
        return {(k, n) for k, n, _ in written} >= set(finals.items())

    for compiled in (True, False):
        app_id = f"agg-headers-{style}-{cache_off}-{compiled}"
        config = {**(CACHE_OFF if cache_off else {}), **({} if compiled else PER_RECORD)}
        written = _streamed(make(), data, app_id, config, tmp_path / f"{compiled}", outputs, done)
        if compiled:
            assert sum(validations) >= len(data)  # the batches ran compiled
            validations.clear()
        else:
            assert validations == []
        if cache_off:  # every update goes downstream
            assert len(written) == len(made)
        # Each output record (every update, or with a cache the flushed ones) carries the headers
        # of the record that made its count: a note kept for a key whose last record had none
        # would show here.
        assert [headers for *_, headers in written] == [made[(k, n)] for k, n, _ in written]
        assert any(headers is None for *_, headers in written)
        assert sum(1 for *_, headers in written if headers) > len(written) // 2


@pytest.mark.parametrize("paired", [False, True], ids=["distinct", "paired"])
@pytest.mark.parametrize("cache_off", [False, True], ids=["cache", "no-cache"])
def test_kafka_streams_sends_session_updates_with_their_writers_headers(
    cache_off: bool, paired: bool, tmp_path: Any, validations: list[int]
) -> None:
    data = inputs(3000)
    if paired:  # each key's records two by two at the same timestamp: one rewrites the other's session
        data = [(k, doc, 1_000 + (i // 14) * 7 + i % 7, h) for i, (k, doc, _, h) in enumerate(data)]
    nth: dict[tuple[str, int], Any] = {}  # (key, n) -> headers of the key's n-th record
    records_of: dict[str, int] = {}
    for key, _, _, headers in data:
        records_of[key] = records_of.get(key, 0) + 1
        nth[(key, records_of[key])] = headers
    # Sessions a record merges away (Kafka's rule): its key's session, unless the merged session
    # is the record's own [ts, ts].
    starts: dict[str, int] = {}
    merged_away = 0
    for key, _, ts, _ in data:
        merged_away += key in starts and starts[key] != ts
        starts.setdefault(key, ts)
    serde = WindowedSerdes.session_windowed_serde_from(STRING)

    def outputs(cluster: Any) -> list[tuple[Any, int | None, Any]]:
        deserialize_key, deserialize_value = (
            serde.deserializer().deserialize,
            LONG_SERDE.deserializer().deserialize,
        )
        return [
            (deserialize_key("out", r.key), deserialize_value("out", r.value), r.headers)
            for r in cluster.read("out")
        ]

    def done(written: list[tuple[Any, int | None, Any]]) -> bool:
        return {(w.key, n) for w, n, _ in written} >= set(records_of.items())

    for compiled in (True, False):
        app_id = f"session-headers-{cache_off}-{paired}-{compiled}"
        config = {**(CACHE_OFF if cache_off else {}), **({} if compiled else PER_RECORD)}
        written = _streamed(sessions(), data, app_id, config, tmp_path / f"{compiled}", outputs, done)
        if compiled:
            assert sum(validations) >= len(data)  # the batches ran compiled
            validations.clear()
        else:
            assert validations == []
        if cache_off:  # every record's update, and a tombstone for every session it merged away
            assert len(written) == len(data) + merged_away
            # Kafka's session aggregation forwards records it makes anew: without a cache, no
            # update and no tombstone carries headers.
            assert not any(headers for *_, headers in written)
            continue
        # Through the cache, an update of count n carries the headers of its key's n-th record
        # (the entry's last writer). A tombstone carries those of the entry's last writer, the
        # key's first record past the session's end.
        by_key: dict[str, list[tuple[Any, int | None, Any]]] = {}
        for row in written:
            by_key.setdefault(row[0].key, []).append(row)
        for key, rows in by_key.items():
            for window, count, headers in rows:
                if count is not None:
                    assert headers == nth[(key, count)], (window, count)
                else:
                    past = next(h for k, _, ts, h in data if k == key and ts > window.end)
                    assert headers == past, (window, count)
        assert any(headers is None for *_, headers in written)
        assert sum(1 for *_, headers in written if headers) > len(written) // 2


def _streamed(
    topology: Any,
    data: list[tuple[str, Any, int, Any]],
    app_id: str,
    config: dict[str, Any],
    state_dir: Any,
    outputs: Callable[[Any], list[Any]],
    done: Callable[[list[Any]], bool],
) -> list[Any]:
    """Run ``topology`` with KafkaStreams over ``data`` in "in" (2 partitions) on an embedded
    cluster until ``done(outputs(cluster))``; what ``outputs`` read then."""
    from kstreams.cluster import EmbeddedCluster

    cluster = EmbeddedCluster()
    try:
        for topic in ("in", "out", "out-windowed"):
            cluster.create_topic(topic, 2)
        _produce(cluster, data)
        streams = KafkaStreams(
            topology,
            {
                "application.id": app_id,
                "state.dir": str(state_dir),
                "default.key.serde": "string",
                "commit.interval.ms": 100,
                **config,
            },
            cluster=cluster,
        )
        streams.start()
        try:
            wait_until(lambda: done(outputs(cluster)), WAIT_S, "every expected output")
        finally:
            streams.close(timeout=30)
        return outputs(cluster)
    finally:
        cluster.close()


def _produce(cluster: Any, data: list[tuple[str, Any, int, Any]]) -> None:
    """The records into "in", by Kafka's default partitioner, in batches of 500 per partition."""
    by_partition: dict[int, list[tuple[Any, ...]]] = {}
    for key, doc, ts, headers in data:
        k = key.encode()
        p = default_partition(k, 2)
        by_partition.setdefault(p, []).append((k, json.dumps(doc).encode(), ts, p, 0, headers))
    producer = cluster.producer()
    for p, rows in by_partition.items():
        for i in range(0, len(rows), 500):
            producer.send("in", p, RecordBatch.from_records(rows[i : i + 500]))
    producer.flush()


@pytest.mark.parametrize("make", [stateless, python_chain])
def test_kafka_streams_sends_the_headers_of_compiled_stateless_records(
    make: Callable[[], Any], tmp_path: Any, validations: list[int]
) -> None:
    from kstreams.cluster import EmbeddedCluster

    data = inputs(3000)
    kept = [doc for _, doc, _, _ in data if not doc["bot"]]
    expected = len(kept) if make is stateless else sum(1 for doc in kept if not doc["user"].startswith("u1"))
    outputs = []
    for compiled in (True, False):
        cluster = EmbeddedCluster()
        try:
            cluster.create_topic("in", 2)
            cluster.create_topic("out", 2)
            _produce(cluster, data)
            streams = KafkaStreams(
                make(),
                {
                    "application.id": f"headers-{make.__name__}-{compiled}",
                    "state.dir": str(tmp_path / f"{make.__name__}-{compiled}"),
                    "commit.interval.ms": 100,
                    **({} if compiled else PER_RECORD),
                },
                cluster=cluster,
            )
            streams.start()
            try:
                wait_until(lambda c=cluster: len(c.read("out")) >= expected, WAIT_S, "every output record")
            finally:
                streams.close(timeout=30)
            outputs.append(
                # Keys the chain makes send both tasks' records to one partition, interleaved as
                # the tasks ran: compare without offsets (values are unique).
                sorted((r.partition, r.key, r.value, r.headers) for r in cluster.read("out"))
            )
        finally:
            cluster.close()
        if compiled:
            assert sum(validations) >= len(data)  # the batches ran compiled
            validations.clear()
    assert validations == []
    assert outputs[0] == outputs[1]
    assert len(outputs[0]) == expected
    assert sum(1 for *_, headers in outputs[0] if headers) > expected // 2
