"""Build a spec (spec.py) with kstreams' StreamsBuilder DSL: the Python twin of SpecTopology.java.

Each op calls the DSL method Kafka's builder calls, with the same serdes, store names and window
parameters, so the two topologies differ only in the library that runs them.
"""

from __future__ import annotations

from typing import Any

from kstreams import (
    BufferConfig,
    Consumed,
    EmitStrategy,
    Grouped,
    Joined,
    JoinWindows,
    Materialized,
    Produced,
    Repartitioned,
    Serdes,
    SessionWindows,
    SlidingWindows,
    Stores,
    StreamJoined,
    StreamsBuilder,
    StreamsConfig,
    Suppressed,
    TimeWindows,
    TopologyConfig,
)
from kstreams.topology import Branched
from kstreams.topology.topology import Topology
from tests.oracle.functions import (
    AGGREGATORS,
    FIXED_KEY_PROCESSORS,
    FLAT_KEY_VALUE_MAPPERS,
    FLAT_VALUE_MAPPERS,
    FOREIGN_KEY_EXTRACTORS,
    JOINERS,
    KEY_MAPPERS,
    KEY_VALUE_MAPPERS,
    PREDICATES,
    PROCESSORS,
    REDUCERS,
    TABLE_REDUCERS,
    VALUE_MAPPERS,
)
from tests.oracle.spec import Spec, kinds

__all__ = ["build_topology", "serde"]


def serde(vtype: str | None) -> Any:
    """The serde of a value type: Long for "l", String otherwise."""
    return Serdes.long() if vtype == "l" else Serdes.string()


def _materialized(store: str | None, vtype: str, lru: int | None = None) -> Materialized:
    if lru is not None:
        assert store, "an lru store needs a name (spec.kinds checks it)"
        mat = Materialized.as_(Stores.lru_map(store, lru))
    else:
        mat = Materialized.as_(store) if store else Materialized.with_(Serdes.string(), serde(vtype))
    return mat.with_key_serde(Serdes.string()).with_value_serde(serde(vtype))


def _windows(w: dict[str, Any]) -> Any:
    kind = w["type"]
    if kind == "tumbling":
        return TimeWindows.of_size_and_grace(w["size"], w["grace"])
    if kind == "hopping":
        return TimeWindows.of_size_and_grace(w["size"], w["grace"]).advance_by(w["advance"])
    if kind == "sliding":
        return SlidingWindows.of_time_difference_and_grace(w["diff"], w["grace"])
    if kind == "session":
        return SessionWindows.of_inactivity_gap_and_grace(w["gap"], w["grace"])
    raise ValueError(f"unknown windows {w}")


def _render_windowed(wk: Any, _value: Any) -> str:
    return f"{wk.key}@{wk.start}/{wk.end}"


def _suppressed(node: dict[str, Any]) -> Suppressed:
    if node["mode"] == "close":
        return Suppressed.until_window_closes(BufferConfig.unbounded())
    max_records, max_bytes = node.get("max_records"), node.get("max_bytes")
    buffer = BufferConfig.unbounded()
    if max_records is not None:
        buffer = buffer.with_max_records(max_records)
    if max_bytes is not None:
        buffer = buffer.with_max_bytes(max_bytes)
    if max_records is not None or max_bytes is not None:
        buffer = buffer.emit_early_when_full()
    return Suppressed.until_time_limit(node["ms"], buffer)


def build_topology(spec: Spec, dsl_store: str | None = None) -> Topology:
    """The kstreams topology of a normalized spec (``spec.normalize``); ``dsl_store``, the
    builder's ``default.dsl.store`` (a TopologyConfig), when given."""
    if dsl_store is None:
        builder = StreamsBuilder()
    else:
        props = {"application.id": "oracle", "default.dsl.store": dsl_store}
        builder = StreamsBuilder(TopologyConfig(StreamsConfig(props)))
    shapes = kinds(spec)
    nodes: dict[str, Any] = {}
    types: dict[str, str] = {}
    string = Serdes.string()
    for node in spec["nodes"]:
        op, nid, fn = node["op"], node["id"], node.get("fn")
        vtype = node.get("vtype", "s")
        store = node.get("store")
        src: Any = nodes.get(node.get("in", ""))
        src_type = types.get(node.get("in", ""), "s")
        shape = shapes[node["in"]].shape if "in" in node else None
        out: Any = None
        if op == "stream":
            out = builder.stream(node["topic"], Consumed.with_(string, string))
        elif op == "table":
            mat = _materialized(store, "s", node.get("lru"))
            if node.get("versioned") is not None:
                supplier = Stores.persistent_versioned_key_value_store(store, node["versioned"])
                mat = Materialized.as_(supplier).with_key_serde(string).with_value_serde(string)
            out = builder.table(node["topic"], Consumed.with_(string, string), mat)
        elif op == "global_table":
            consumed = Consumed.with_(string, string)
            out = (
                builder.global_table(node["topic"], consumed, _materialized(store, "s"))
                if store
                else builder.global_table(node["topic"], consumed)
            )
        elif op in ("fk_join", "fk_left_join"):
            extractor, joiner = FOREIGN_KEY_EXTRACTORS[node["extractor"]], JOINERS[fn]
            call = src.join if op == "fk_join" else src.left_join
            other = nodes[node["other"]]
            out = (
                call(other, extractor, joiner, _materialized(store, vtype))
                if store
                else call(other, extractor, joiner)
            )
        elif op in ("process_values", "process"):
            supplier, _ = (FIXED_KEY_PROCESSORS if op == "process_values" else PROCESSORS)[fn]
            builder.add_state_store(
                Stores.key_value_store_builder(Stores.in_memory_key_value_store(store), string, serde(vtype))
            )
            out = (src.process_values if op == "process_values" else src.process)(supplier(store), store)
        elif op in ("filter", "filter_not"):
            predicate = PREDICATES[fn][0]
            out = src.filter(predicate) if op == "filter" else src.filter_not(predicate)
        elif op == "map_values":
            out = src.map_values(VALUE_MAPPERS[fn][0])
        elif op == "map":
            out = src.map(KEY_VALUE_MAPPERS[fn][0])
        elif op == "select_key":
            out = src.select_key(KEY_MAPPERS[fn][0])
        elif op == "flat_map_values":
            out = src.flat_map_values(FLAT_VALUE_MAPPERS[fn][0])
        elif op == "flat_map":
            out = src.flat_map(FLAT_KEY_VALUE_MAPPERS[fn][0])
        elif op == "merge":
            out = src.merge(nodes[node["other"]])
        elif op == "split":
            branched = src.split(f"{nid}-")
            for i, pred in enumerate(node["preds"], start=1):
                branched = branched.branch(PREDICATES[pred][0], Branched.as_(str(i)))
            branches = (
                branched.default_branch(Branched.as_("0"))
                if node.get("default")
                else branched.no_default_branch()
            )
            for name, branch in branches.items():
                ref = f"{nid}:{name[len(nid) + 1 :]}"
                nodes[ref] = branch
                types[ref] = vtype
        elif op == "repartition":
            out = src.repartition(Repartitioned.with_(string, serde(vtype)))
        elif op == "to_table":
            out = src.to_table(_materialized(store, vtype, node.get("lru")))
        elif op == "group_by_key":
            out = src.group_by_key(Grouped.with_(string, serde(vtype)))
        elif op == "group_by":
            if shape == "stream":
                out = src.group_by(KEY_MAPPERS[fn][0], Grouped.with_(string, serde(vtype)))
            else:
                out = src.group_by(KEY_VALUE_MAPPERS[fn][0], Grouped.with_(string, serde(vtype)))
        elif op == "windowed_by":
            out = src.windowed_by(_windows(node["windows"]))
            if node.get("emit") == "close":
                out = out.emit_strategy(EmitStrategy.on_window_close())
        elif op in ("count", "reduce", "aggregate"):
            mat = _materialized(store, vtype, node.get("lru"))
            out = _aggregate(op, src, shape, shapes[node["in"]].windows, fn, mat)
        elif op == "cogroup":
            aggs = [AGGREGATORS[f] for f in node["fns"]]
            cogrouped = nodes[node["ins"][0]].cogroup(aggs[0].aggregator)
            for ref, agg in zip(node["ins"][1:], aggs[1:], strict=True):
                cogrouped = cogrouped.cogroup(nodes[ref], agg.aggregator)
            mat = _materialized(store, vtype)
            windows = node.get("windows")
            if not windows:
                out = cogrouped.aggregate(aggs[0].initializer, mat)
            elif windows["type"] == "session":
                out = cogrouped.windowed_by(_windows(windows)).aggregate(
                    aggs[0].initializer, aggs[0].merger, mat
                )
            else:
                out = cogrouped.windowed_by(_windows(windows)).aggregate(aggs[0].initializer, mat)
        elif op == "suppress":
            out = src.suppress(_suppressed(node))
        elif op == "to_stream":
            out = src.to_stream(_render_windowed) if shape == "wtable" else src.to_stream()
        elif op in ("join", "left_join", "outer_join"):
            out = _join(op, node, src, nodes[node["other"]], shapes, src_type, types[node["other"]], vtype)
        elif op == "to":
            src.to(node["topic"], Produced.with_(string, serde(src_type)))
        else:
            raise ValueError(f"unknown op {op}")
        if out is not None:
            nodes[nid] = out
            types[nid] = vtype
    return builder.build()


def _aggregate(op: str, src: Any, shape: str | None, windows: str | None, fn: str | None, mat: Any) -> Any:
    if op == "count":
        return src.count(mat)
    assert fn is not None
    if shape == "gtable":
        if op == "reduce":
            adder, subtractor, _ = TABLE_REDUCERS[fn]
            return src.reduce(adder, subtractor, mat)
        agg = AGGREGATORS[fn]
        return src.aggregate(agg.initializer, agg.adder, agg.subtractor, mat)
    if op == "reduce":
        return src.reduce(REDUCERS[fn][0], mat)
    agg = AGGREGATORS[fn]
    if windows == "session":
        return src.aggregate(agg.initializer, agg.aggregator, agg.merger, mat)
    return src.aggregate(agg.initializer, agg.aggregator, mat)


def _join(
    op: str,
    node: dict[str, Any],
    left: Any,
    right: Any,
    shapes: dict[str, Any],
    left_type: str,
    right_type: str,
    vtype: str,
) -> Any:
    joiner = JOINERS[node["fn"]]
    string = Serdes.string()
    left_shape, right_shape = shapes[node["in"]].shape, shapes[node["other"]].shape
    if right_shape == "global":
        key_fn = KEY_MAPPERS[node["key_fn"]][0]
        return left.join(right, key_fn, joiner) if op == "join" else left.left_join(right, key_fn, joiner)
    if left_shape == "stream" and right_shape == "table":
        joined = Joined.with_(string, serde(left_type), serde(right_type))
        if node.get("grace") is not None:
            joined = joined.with_grace_period(node["grace"])
        return left.join(right, joiner, joined) if op == "join" else left.left_join(right, joiner, joined)
    if left_shape == "stream":
        w = node["windows"]
        windows = JoinWindows.of_time_difference_and_grace(w["diff"], w["grace"])
        if w.get("before") is not None:
            windows = windows.before(w["before"])
        if w.get("after") is not None:
            windows = windows.after(w["after"])
        stream_joined = StreamJoined.with_(string, serde(left_type), serde(right_type))
        return getattr(left, op)(right, joiner, windows, stream_joined)
    store = node.get("store")
    if store:
        return getattr(left, op)(right, joiner, _materialized(store, vtype))
    return getattr(left, op)(right, joiner)
