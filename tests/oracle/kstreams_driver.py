"""Run a case (spec.py) on kstreams' TopologyTestDriver and answer in the oracle's format.

The answer has the shape OracleMain.java writes: ``{"outputs": {topic: [{"key", "value", "ts",
"headers"}]}, "stores": {name: rows}, "error": text?}``, so the two compare with ``==``.
"""

from __future__ import annotations

from typing import Any

from kstreams import Serdes, TopologyTestDriver
from kstreams.testing import TestRecord
from tests.oracle.spec import WALL_CLOCK_START_MS, normalize, sinks, stores
from tests.oracle.topology import build_topology, serde

# A case's "client_dsl_store": the client's dsl.store.suppliers.class, as Kafka names its sets.
DSL_SUPPLIERS = {
    "in_memory": "org.apache.kafka.streams.state.BuiltInDslStoreSuppliers$InMemoryDslStoreSuppliers",
    "rocksDB": "org.apache.kafka.streams.state.BuiltInDslStoreSuppliers$RocksDBDslStoreSuppliers",
}

__all__ = ["run_on_kstreams"]

_MAX_TS = 2**62


def _headers(headers: list[tuple[str, bytes | None]] | None) -> list[list[str | None]]:
    return [[k, None if v is None else v.decode()] for k, v in headers or []]


def _store_rows(driver: TopologyTestDriver, store: dict[str, str]) -> list[list[Any]]:
    name, kind = store["name"], store["kind"]
    if kind == "kv":
        kv = driver.get_timestamped_key_value_store(name)
        return [[k, vt.value, vt.timestamp] for k, vt in kv.all()]
    if kind == "plain":
        return [[k, v] for k, v in driver.get_key_value_store(name).all()]
    if kind == "window":
        ws = driver.get_timestamped_window_store(name)
        return [[[wk.key, wk.start, wk.end], vt.value, vt.timestamp] for wk, vt in ws.all()]
    ss = driver.get_session_store(name)
    # Every session the store's key reads still return (Kafka's side reads fetch(null, null)): a
    # time-ordered store lists expired sessions by end until their segment is dropped, but its
    # key reads apply the retention.
    return [
        [[wk.key, wk.start, wk.end], v]
        for wk, v in ss.find_sessions_by_end(0, _MAX_TS)
        if ss.fetch_session(wk.key, wk.start, wk.end) is not None
    ]


def run_on_kstreams(case: dict[str, Any]) -> dict[str, Any]:
    """The outputs and final store contents of ``case`` on kstreams."""
    spec = normalize(case["spec"])
    # The oracle's application id: internal topic names, which a suppress buffer's byte bound
    # counts, are then the same on both sides.
    config: dict[str, Any] = {
        "application.id": "oracle",
        "default.key.serde": "string",
        "default.value.serde": "string",
    }
    if "cache_bytes" in case.get("config", {}):
        config["statestore.cache.max.bytes"] = case["config"]["cache_bytes"]
    # The DSL's store choice, where a store's type is not given: built in (a TopologyConfig's
    # default.dsl.store) or the client's (dsl.store.suppliers.class).
    topology_store = case.get("config", {}).get("dsl_store")
    if case.get("config", {}).get("client_dsl_store") is not None:
        config["dsl.store.suppliers.class"] = DSL_SUPPLIERS[case["config"]["client_dsl_store"]]
    answer: dict[str, Any] = {"outputs": {}}
    try:
        topology = build_topology(spec, topology_store)
    except Exception as exc:  # an answer, as the oracle answers a spec it cannot build
        return {"error": f"{type(exc).__name__}: {exc}", "fatal": True}
    string = Serdes.string()
    with TopologyTestDriver(topology, config, initial_wall_clock_time_ms=WALL_CLOCK_START_MS) as driver:
        readers = {t: driver.create_output_topic(t, string, serde(v)) for t, v in sinks(spec).items()}
        inputs: dict[str, Any] = {}
        try:
            for event in case["input"]:
                if "wall" in event:
                    driver.advance_wall_clock_time(event["wall"])
                    continue
                topic = event["topic"]
                if topic not in inputs:
                    inputs[topic] = driver.create_input_topic(topic, string, string)
                headers = [(k, None if v is None else v.encode()) for k, v in event.get("headers") or []]
                inputs[topic].pipe_input(TestRecord(event["key"], event["value"], event["ts"], headers))
        except Exception as exc:
            answer["error"] = f"{type(exc).__name__}: {exc}"
        for topic, reader in readers.items():
            answer["outputs"][topic] = [
                {"key": r.key, "value": r.value, "ts": r.timestamp, "headers": _headers(r.headers)}
                for r in reader.read_records_to_list()
            ]
        if "error" not in answer:
            answer["stores"] = {s["name"]: _store_rows(driver, s) for s in stores(spec)}
    return answer
