"""Run a case (spec.py) on KafkaStreams over Apache Kafka, and what Kafka Streams says it must give.

The test driver sees one partition; the runtime sees several, one task per partition, each with
its own stream time. So the expected answer is the oracle's, run once per input partition on
that partition's records alone: a task of the runtime is exactly such a run. What is compared:

- per output partition, the runtime's records are an interleaving of the per-task answers, each
  task's records in the oracle's order (several tasks may write to one output partition, and
  their relative order is the broker's, not a semantic one); records with a null key, which the
  producer spreads over the partitions, compare as a bag;
- the final contents of every named store, read by interactive queries, equal the union of the
  per-task stores.

Only cases where this holds by Kafka's semantics run here (``eligible``): no step that rekeys
(a repartition topic merges the tasks' outputs in broker order) or joins by foreign key, no
global table (its thread updates it in an order of its own), no wall-clock punctuation, no
suppress byte bound (it counts topic names, which differ here), and where a task reads two
topics, input whose pipe order is the order by timestamp that the runtime picks records in.
Timestamps are shifted near now (by a multiple of every window size the cases use) so the
broker's retention never deletes what a case wrote.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kstreams import KafkaStreams, Serdes
from kstreams._native.record_batch import default_partition
from kstreams.cluster.kafka import KafkaCluster
from kstreams.cluster.port import TopicPartition
from tests.oracle.compare import Oracle
from tests.oracle.spec import families, normalize, oracle_request, sinks, source_topics, stores
from tests.oracle.topology import build_topology, serde

__all__ = ["PARTITIONS", "eligible", "expected_on_kafka", "run_on_kafka", "shifted"]

PARTITIONS = 3
# lcm(1..16) * 1000: divisible by every window size, advance and gap the cases use, so windows
# keep their alignment when the case moves near now.
_ALIGNMENT_MS = 720_720_000
# Steps whose records reach a task from other tasks (a repartition or subscription topic) or
# from the global thread, in an order no single partition's input decides.
_CROSS_TASK_OPS = {
    "map",
    "select_key",
    "flat_map",
    "repartition",
    "group_by",
    "fk_join",
    "fk_left_join",
    "global_table",
}
_MAX_TS = 2**62

Answer = dict[str, Any]
# Per sink topic and output partition: the records the runtime wrote, or, expected, one list per task.
# Records with a null key are under NULL_KEYS: a producer spreads them over the partitions.
Outputs = dict[str, dict[int, list[Answer]]]
TaskOutputs = dict[str, dict[int, list[list[Answer]]]]
NULL_KEYS = -1


def eligible(case: dict[str, Any]) -> bool:
    """Whether the runtime's answer on several partitions is determined by the oracle's."""
    spec = normalize(case["spec"])
    if case.get("difference") or any("wall" in e for e in case["input"]):
        return False
    if any(n["op"] in _CROSS_TASK_OPS for n in spec["nodes"]):
        return False
    if any(n["op"] == "suppress" and n.get("max_bytes") for n in spec["nodes"]):
        return False
    if any(f.startswith("emit:close") for f in families(spec)):
        return False
    return all(_picked_in_pipe_order(records) for records in _by_partition(case["input"]).values())


def _partition(key: str | None) -> int:
    return 0 if key is None else default_partition(key.encode(), PARTITIONS)


def _by_partition(events: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for event in events:
        out.setdefault(_partition(event["key"]), []).append(event)
    return out


def _picked_in_pipe_order(records: list[dict[str, Any]]) -> bool:
    """Whether a task that holds all of ``records`` (one queue per topic, each in pipe order) and
    always picks the queue whose head has the smallest timestamp processes them in pipe order.
    A tie between two topics' heads is not determined, so it does not count as pipe order."""
    queues: dict[str, list[int]] = {}
    for r in records:
        queues.setdefault(r["topic"], []).append(r["ts"])
    heads = dict.fromkeys(queues, 0)
    for r in records:
        others = [q[heads[t]] for t, q in queues.items() if t != r["topic"] and heads[t] < len(q)]
        if any(ts <= r["ts"] for ts in others):
            return False
        heads[r["topic"]] += 1
    return True


def shifted(case: dict[str, Any], prefix: str, base_ms: int) -> dict[str, Any]:
    """``case`` with its topics named ``<prefix>-<topic>`` and its timestamps moved by ``base_ms``."""
    out = copy.deepcopy(case)
    for node in out["spec"]["nodes"]:
        if "topic" in node:
            node["topic"] = f"{prefix}-{node['topic']}"
    for event in out["input"]:
        event["topic"] = f"{prefix}-{event['topic']}"
        event["ts"] += base_ms
    out.setdefault("config", {})["cache_bytes"] = 0
    return out


def base_near_now() -> int:
    """A timestamp offset near now that keeps every window's alignment."""
    return int(time.time() * 1000) // _ALIGNMENT_MS * _ALIGNMENT_MS


def expected_on_kafka(oracle: Oracle, case: dict[str, Any]) -> tuple[TaskOutputs, Answer]:
    """What the runtime must give: per sink topic and output partition, one record list per task
    (in the oracle's order), and the union of the tasks' stores."""
    parts = _by_partition(case["input"])
    per_task = {p: {**case, "input": events} for p, events in sorted(parts.items())}
    answers = list(oracle.run_many(oracle_request(c) for c in per_task.values()))
    outputs: TaskOutputs = {t: {} for t in sinks(normalize(case["spec"]))}
    union: Answer = {}
    for answer in answers:
        if answer.get("error"):
            raise AssertionError(f"the oracle failed on a partition of an eligible case: {answer['error']}")
        for topic, records in answer["outputs"].items():
            split: dict[int, list[Answer]] = {}
            for r in records:
                split.setdefault(NULL_KEYS if r["key"] is None else _partition(r["key"]), []).append(r)
            for q, rs in split.items():
                outputs[topic].setdefault(q, []).append(rs)
        for name, rows in answer["stores"].items():
            union.setdefault(name, []).extend(rows)
    return outputs, union


def produce_input(cluster: KafkaCluster, case: dict[str, Any]) -> None:
    """Create the case's source and sink topics with PARTITIONS partitions and append its input,
    each record to the partition its key hashes to (a null key to partition 0)."""
    spec = normalize(case["spec"])
    for topic in [*source_topics(spec), *sinks(spec)]:
        cluster.create_topic(topic, PARTITIONS)
    for e in case["input"]:
        headers = [(k, None if v is None else v.encode()) for k, v in e.get("headers") or []]
        key = None if e["key"] is None else e["key"].encode()
        value = None if e["value"] is None else e["value"].encode()
        partition = _partition(e["key"])
        cluster.produce(e["topic"], key, value, timestamp=e["ts"], partition=partition, headers=headers)


def start_on_kafka(cluster: KafkaCluster, case: dict[str, Any], app_id: str, state_dir: Path) -> KafkaStreams:
    config = {
        "application.id": app_id,
        "default.key.serde": "string",
        "default.value.serde": "string",
        "statestore.cache.max.bytes": 0,
        "commit.interval.ms": 100,
        "num.stream.threads": 2,
        # The input is all on the broker before the start: a task waits for every partition's
        # data instead of running ahead on the partition fetched first.
        "max.task.idle.ms": 1000,
        "state.dir": str(state_dir),
    }
    streams = KafkaStreams(build_topology(normalize(case["spec"])), config, cluster=cluster)
    streams.start()
    return streams


def read_outputs(cluster: KafkaCluster, case: dict[str, Any]) -> Outputs:
    string = Serdes.string()
    out: Outputs = {}
    for topic, vtype in sinks(normalize(case["spec"])).items():
        values = serde(vtype)
        by_partition: dict[int, list[Answer]] = {}
        for r in cluster.read(topic):
            by_partition.setdefault(NULL_KEYS if r.key is None else r.partition, []).append(
                {
                    "key": None if r.key is None else string.deserialize(topic, r.key),
                    "value": None if r.value is None else values.deserialize(topic, r.value),
                    "ts": r.timestamp,
                    "headers": [[k, None if v is None else v.decode()] for k, v in r.headers or []],
                }
            )
        out[topic] = by_partition
    return out


def interleaving_mismatch(actual: list[Answer], tasks: list[list[Answer]]) -> str | None:
    """None if ``actual`` interleaves the ``tasks``' lists keeping each one's order, else why not."""
    queues = [list(t) for t in tasks]
    for i, record in enumerate(actual):
        queue = next((q for q in queues if q and q[0] == record), None)
        if queue is None:
            heads = [q[0] for q in queues if q]
            return f"record {i} {record} is not next of any task; next expected: {heads}"
        queue.pop(0)
    left = [r for q in queues for r in q]
    return f"missing {len(left)} records: {left}" if left else None


def output_mismatch(expected: TaskOutputs, actual: Outputs) -> str | None:
    for topic, partitions in expected.items():
        got = actual.get(topic, {})
        for q in sorted(set(partitions) | set(got)):
            if q == NULL_KEYS:
                # Which partition, and so which order, is the producer's choice: compared as a bag.
                want = sorted((r for task in partitions.get(q, []) for r in task), key=repr)
                if sorted(got.get(q, []), key=repr) != want:
                    return f"{topic}, null keys: Kafka Streams {want}, kstreams {got.get(q, [])}"
                continue
            why = interleaving_mismatch(got.get(q, []), partitions.get(q, []))
            if why:
                return f"{topic}-{q}: {why}"
    return None


def store_rows(streams: KafkaStreams, case: dict[str, Any]) -> Answer:
    """Every named store's rows, in the oracle's row format, read by interactive queries."""
    rows: Answer = {}
    for s in stores(normalize(case["spec"])):
        name, kind = s["name"], s["kind"]
        if kind == "plain":
            rows[name] = [[k, v] for k, v in streams.store(name).all()]
        elif kind == "kv":
            view = streams.store(name, timestamped=True)
            rows[name] = [[k, vt.value, vt.timestamp] for k, vt in view.all()]
        elif kind == "window":
            view = streams.store(name, timestamped=True)
            rows[name] = [[[wk.key, wk.start, wk.end], vt.value, vt.timestamp] for wk, vt in view.all()]
        else:
            view = streams.store(name)
            rows[name] = [[[wk.key, wk.start, wk.end], v] for wk, v in view.find_sessions_by_end(0, _MAX_TS)]
    return rows


def run_on_kafka(
    oracle: Oracle,
    cluster: KafkaCluster,
    case: dict[str, Any],
    app_id: str,
    state_dir: Path,
    timeout: float = 60.0,
) -> str | None:
    """Run ``case`` (already ``shifted``) on the broker; None if the runtime answers as Kafka
    Streams does, else the first difference."""
    expected_outputs, expected_stores = expected_on_kafka(oracle, case)
    produce_input(cluster, case)
    streams = start_on_kafka(cluster, case, app_id, state_dir)
    try:
        deadline = time.monotonic() + timeout
        # Compared once every input record is processed and committed (at_least_once flushes the
        # outputs first), so an extra record cannot slip in after a comparison that passed.
        while not _all_committed(cluster, case, app_id):
            if time.monotonic() > deadline:
                return f"the input was not processed within {timeout}s"
            time.sleep(0.2)
        why = output_mismatch(expected_outputs, read_outputs(cluster, case))
        if why is not None:
            return f"outputs: {why}"
        return _stores_mismatch(lambda: store_rows(streams, case), expected_stores, deadline)
    finally:
        streams.close(timeout=30)


def _all_committed(cluster: KafkaCluster, case: dict[str, Any], group: str) -> bool:
    admin = cluster.admin()
    topics = source_topics(normalize(case["spec"]))
    partitions = [TopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
    ends = {tp: end for tp, (_start, end) in admin.list_offsets(partitions).items() if end > 0}
    committed = admin.committed_offsets(group, list(ends))
    return all(committed.get(tp) == end for tp, end in ends.items())


def _stores_mismatch(read: Callable[[], Answer], expected: Answer, deadline: float) -> str | None:
    want = {name: sorted(rows, key=repr) for name, rows in expected.items()}
    while True:
        try:
            got = {name: sorted(rows, key=repr) for name, rows in read().items()}
        except Exception as exc:  # a store not queryable yet (the client still rebalancing)
            got, error = None, f"{type(exc).__name__}: {exc}"
        else:
            error = ""
            if got == want:
                return None
        if time.monotonic() > deadline:
            return f"stores: Kafka Streams {want}, kstreams {got} {error}".strip()
        time.sleep(0.2)
