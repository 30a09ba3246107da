"""The declarative topology spec both drivers build from, and the case (spec plus input) they run.

A spec is ``{"nodes": [...]}``, a list of DSL steps in build order; each node is a dict with an
``id``, an ``op`` and the op's parameters, which name functions of the library in functions.py
(``fn``). Ops, with what they read and give (S stream, T table, WT windowed table, G grouped
stream, GT grouped table, WG windowed grouped stream):

    stream {topic} -> S                 table {topic, store?, versioned?, lru?} -> T (versioned: the
        history retention in ms of a versioned store named ``store``, which it then needs)
    global_table {topic, store?} -> GKT
    filter / filter_not {in, fn} S->S, T->T
    map_values {in, fn} S->S, T->T      map {in, fn} S->S          select_key {in, fn} S->S
    flat_map_values {in, fn} S->S       flat_map {in, fn} S->S     merge {in, other} S,S->S
    split {in, preds, default} S -> branches "<id>:1".. ("<id>:0" the default branch)
    repartition {in} S->S               to_table {in, store?, lru?} S->T
    group_by_key {in} S->G              group_by {in, fn} S->G (key mapper), T->GT (key-value mapper)
    windowed_by {in, windows, emit?} G->WG; windows {type: tumbling|hopping|sliding|session, size,
        advance, diff, gap, grace}; emit "close" is EmitStrategy.onWindowClose
    count / reduce / aggregate {in, fn, store?, lru?} G->T, GT->T, WG->WT
    (lru: the store is ``Stores.lru_map(store, lru)``, at most that many keys; a named key-value
    store of a table, to_table or an aggregation that is not windowed)
    cogroup {ins, fns, windows?, store?} G,G..->T or WT
    suppress {in, mode: close | limit, ms, max_records?, max_bytes?} WT->WT (close), T->T or WT->WT
        (limit; a bounded buffer emits early when full)
    to_stream {in} T->S, WT->S (the key rendered "key@start/end")
    join / left_join {in, other, fn, windows?} S,T->S; S,S->S (windows {diff, grace, before?,
        after?}); T,T->T (store?); WT,WT->WT      outer_join: S,S->S, T,T->T and WT,WT->WT
    fk_join / fk_left_join {in, other, extractor, fn, store?} T,T->T (foreign-key join; the
        extractor from FOREIGN_KEY_EXTRACTORS)
    join / left_join {in, other, key_fn, fn} S,GKT->S (key_fn a KEY_MAPPERS entry); a join of a
        stream with a versioned table may have a "grace" (ms, Joined.withGracePeriod)
    process_values {in, fn, store} S->S (FIXED_KEY_PROCESSORS; the store is the processor's own
        key-value store)                process {in, fn, store} S->S (PROCESSORS, likewise)
    to {in, topic} S

Keys are strings, values strings ("s") or longs ("l"); ``normalize`` fills each node's value
type ``vtype``, which both builders need for their serdes. A case is ``{"spec", "input",
"config"?, "name"?}``; input events are records ``{"topic", "key", "value", "ts", "headers"?}``
or wall-clock advances ``{"wall": ms}``.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.oracle.functions import (
    AGGREGATORS,
    FIXED_KEY_PROCESSORS,
    FLAT_KEY_VALUE_MAPPERS,
    FLAT_VALUE_MAPPERS,
    KEY_VALUE_MAPPERS,
    PROCESSORS,
    VALUE_MAPPERS,
)

__all__ = [
    "WALL_CLOCK_START_MS",
    "families",
    "kinds",
    "normalize",
    "oracle_request",
    "sinks",
    "source_topics",
    "stores",
]

# Both drivers start their mock wall clock here (a fixed time, so emit-on-close timing repeats).
WALL_CLOCK_START_MS = 1_000_000

Node = dict[str, Any]
Spec = dict[str, Any]
# Steps after which a join repartitions its stream (a key change, or an explicit repartition).
_REKEYING = ("map", "select_key", "flat_map", "repartition")


class Kind:
    """What a node gives: its shape and, for windowed ones, the window type."""

    def __init__(self, shape: str, windows: str | None = None) -> None:
        self.shape = shape  # stream | table | wtable | grouped | gtable | wgrouped | global
        self.windows = windows  # tumbling | hopping | sliding | session

    def __repr__(self) -> str:
        return f"Kind({self.shape!r}, {self.windows!r})"


def kinds(spec: Spec) -> dict[str, Kind]:
    """The kind of every node (split branches under "<id>:<n>"); raises ValueError for a spec whose
    ops do not fit together."""
    out: dict[str, Kind] = {}

    def of(node: Node, field: str = "in") -> Kind:
        ref = node[field]
        if ref not in out:
            raise ValueError(f"node {node['id']} reads {ref}, which is not (yet) defined")
        return out[ref]

    for node in spec["nodes"]:
        op, nid = node["op"], node["id"]
        if node.get("lru") is not None:
            windowed = op in ("count", "reduce", "aggregate") and of(node).shape == "wgrouped"
            if op not in ("table", "to_table", "count", "reduce", "aggregate") or windowed:
                raise ValueError(f"{op} {nid}: lru is for the key-value store of a table or an aggregation")
            if not node.get("store") or node.get("versioned") is not None:
                raise ValueError(f"{op} {nid}: an lru store needs a store name and is not versioned")
        if op == "stream":
            out[nid] = Kind("stream")
        elif op == "table":
            if node.get("versioned") is not None and not node.get("store"):
                raise ValueError("a versioned table needs a store name")
            out[nid] = Kind("table")
        elif op == "global_table":
            out[nid] = Kind("global")
        elif op in ("fk_join", "fk_left_join"):
            if (of(node).shape, of(node, "other").shape) != ("table", "table"):
                raise ValueError(f"{op} needs two tables")
            out[nid] = Kind("table")
        elif op in ("process_values", "process"):
            if of(node).shape != "stream" or not node.get("store"):
                raise ValueError(f"{op} needs a stream and a store")
            out[nid] = Kind("stream")
        elif op in ("filter", "filter_not", "map_values"):
            kind = of(node)
            if kind.shape not in ("stream", "table"):
                raise ValueError(f"{op} on {kind}")
            out[nid] = kind
        elif op in ("map", "select_key", "flat_map_values", "flat_map", "repartition", "merge"):
            if of(node).shape != "stream" or (op == "merge" and of(node, "other").shape != "stream"):
                raise ValueError(f"{op} needs streams")
            out[nid] = Kind("stream")
        elif op == "split":
            if of(node).shape != "stream":
                raise ValueError("split needs a stream")
            for i in range(1, len(node["preds"]) + 1):
                out[f"{nid}:{i}"] = Kind("stream")
            if node.get("default"):
                out[f"{nid}:0"] = Kind("stream")
        elif op == "to_table":
            if of(node).shape != "stream":
                raise ValueError("to_table needs a stream")
            out[nid] = Kind("table")
        elif op == "group_by_key":
            if of(node).shape != "stream":
                raise ValueError("group_by_key needs a stream")
            out[nid] = Kind("grouped")
        elif op == "group_by":
            shape = of(node).shape
            if shape not in ("stream", "table"):
                raise ValueError("group_by needs a stream or a table")
            out[nid] = Kind("grouped" if shape == "stream" else "gtable")
        elif op == "windowed_by":
            if of(node).shape != "grouped":
                raise ValueError("windowed_by needs a grouped stream")
            out[nid] = Kind("wgrouped", node["windows"]["type"])
        elif op in ("count", "reduce", "aggregate"):
            kind = of(node)
            if kind.shape == "wgrouped":
                out[nid] = Kind("wtable", kind.windows)
            elif kind.shape in ("grouped", "gtable"):
                out[nid] = Kind("table")
            else:
                raise ValueError(f"{op} on {kind}")
        elif op == "cogroup":
            for ref in node["ins"]:
                if out[ref].shape != "grouped":
                    raise ValueError("cogroup needs grouped streams")
            windows = node.get("windows")
            out[nid] = Kind("wtable", windows["type"]) if windows else Kind("table")
        elif op == "suppress":
            kind = of(node)
            if kind.shape not in ("table", "wtable") or (node["mode"] == "close" and kind.shape != "wtable"):
                raise ValueError(f"suppress {node['mode']} on {kind}")
            out[nid] = kind
        elif op == "to_stream":
            if of(node).shape not in ("table", "wtable"):
                raise ValueError("to_stream needs a table")
            out[nid] = Kind("stream")
        elif op in ("join", "left_join", "outer_join"):
            left, right = of(node).shape, of(node, "other").shape
            if (left, right) in (("stream", "table"), ("stream", "global")) and op != "outer_join":
                out[nid] = Kind("stream")
            elif (left, right) == ("stream", "stream"):
                out[nid] = Kind("stream")
            elif (left, right) == ("table", "table"):
                out[nid] = Kind("table")
            elif (left, right) == ("wtable", "wtable") and not node.get("store"):
                out[nid] = Kind("wtable")
            else:
                raise ValueError(f"{op} of {left} and {right}")
        elif op == "to":
            if of(node).shape != "stream":
                raise ValueError("to needs a stream")
        else:
            raise ValueError(f"unknown op {op}")
    return out


def _vtype(node: Node, types: dict[str, str]) -> str | None:
    op = node["op"]
    fn: str = node.get("fn") or ""
    if op in ("stream", "table", "global_table"):
        return "s"
    if op == "process_values":
        return FIXED_KEY_PROCESSORS[fn][1]
    if op == "process":
        return PROCESSORS[fn][1]
    if op == "to":
        return None
    if op == "count":
        return "l"
    if op in ("join", "left_join", "outer_join", "fk_join", "fk_left_join"):
        return "s"
    if op == "aggregate":
        return AGGREGATORS[fn].vtype
    if op == "cogroup":
        return AGGREGATORS[node["fns"][0]].vtype
    source = types[node["in"]]
    tables: dict[str, dict[str, Any]] = {
        "map_values": VALUE_MAPPERS,
        "map": KEY_VALUE_MAPPERS,
        "flat_map_values": FLAT_VALUE_MAPPERS,
        "flat_map": FLAT_KEY_VALUE_MAPPERS,
    }
    table = tables.get(op)
    if op == "group_by" and node.get("_on_table"):
        table = KEY_VALUE_MAPPERS
    if table is None:
        return source
    accepted, result = table[fn][1]
    if source not in accepted:
        raise ValueError(f"node {node['id']}: {op} {fn} does not take values of type {source}")
    return result or source


def normalize(spec: Spec) -> Spec:
    """A copy of ``spec`` with every node's ``vtype`` filled in (checked to fit together)."""
    spec = copy.deepcopy(spec)
    shapes = kinds(spec)
    types: dict[str, str] = {}
    for node in spec["nodes"]:
        if node["op"] == "group_by":
            node["_on_table"] = shapes[node["in"]].shape == "table"
        vtype = _vtype(node, types)
        node.pop("_on_table", None)
        if vtype is not None:
            node["vtype"] = vtype
            types[node["id"]] = vtype
            if node["op"] == "split":
                for branch in shapes:
                    if branch.startswith(node["id"] + ":"):
                        types[branch] = vtype
    return spec


def sinks(spec: Spec) -> dict[str, str]:
    """Each sink topic and the value type written to it."""
    types = {n["id"]: n.get("vtype") for n in spec["nodes"]}
    out: dict[str, str] = {}
    for node in spec["nodes"]:
        if node["op"] == "to":
            vtype = types[node["in"].split(":")[0]]  # a split branch has its splitter's type
            if node["topic"] in out and out[node["topic"]] != vtype:
                raise ValueError(f"topic {node['topic']} gets values of two types")
            out[node["topic"]] = vtype or "s"
    return out


def stores(spec: Spec) -> list[dict[str, str]]:
    """The named stores of the spec: name, kind (kv, window or session: the DSL's timestamped
    stores; plain: a processor's own key-value store) and value type. Versioned stores are left
    out."""
    shapes = kinds(spec)
    out = []
    for node in spec["nodes"]:
        name = node.get("store")
        if not name:
            continue
        kind = shapes[node["id"]]
        if node["op"] == "table" and node.get("versioned") is not None:
            continue  # a versioned store has no range query to read it whole with
        store_kind = "plain" if node["op"] in ("process", "process_values") else "kv"
        if kind.shape == "wtable":
            store_kind = "session" if kind.windows == "session" else "window"
        out.append({"name": name, "kind": store_kind, "vtype": node["vtype"]})
    return out


def source_topics(spec: Spec) -> dict[str, str]:
    """Each source topic and whether a stream or a table reads it."""
    return {n["topic"]: n["op"] for n in spec["nodes"] if n["op"] in ("stream", "table", "global_table")}


def families(spec: Spec) -> set[str]:
    """The step families a spec uses, the names the generator's exclusions and the catalogue's
    coverage count use: the op, refined by what it applies to (``count:wgrouped:session``,
    ``join:stream-stream``, ``suppress:close``, ``emit:close``...)."""
    shapes = kinds(spec)
    out = set()
    for node in spec["nodes"]:
        op = node["op"]
        out.add(op)
        if node.get("lru") is not None:
            out.add("store:lru")
        if op in ("count", "reduce", "aggregate"):
            kind = shapes[node["in"]]
            out.add(f"{op}:{kind.shape}" + (f":{kind.windows}" if kind.windows else ""))
            if kind.windows == "session":
                out.add("aggregate:session")
        elif op == "table" and node.get("versioned") is not None:
            out.add("table:versioned")
        elif op == "process" and any(n["op"] in _REKEYING for n in spec["nodes"]):
            out.add("process:rekeyed")  # a stream-time punctuation after a repartition
        elif op in ("join", "left_join", "outer_join"):
            pair = f"{shapes[node['in']].shape}-{shapes[node['other']].shape}"
            out.add(f"{op}:{pair}")
            if pair in ("stream-table", "stream-global") and any(n["op"] in _REKEYING for n in spec["nodes"]):
                out.add(f"{op}:{pair}:rekeyed")  # a repartition upstream (over-approximated)
            windows = node.get("windows") or {}
            if windows.get("before") is not None or windows.get("after") is not None:
                out.add(f"{op}:{pair}:asymmetric")
        elif op == "suppress":
            out.add(f"suppress:{node['mode']}")
            windows = shapes[node["in"]].windows
            if windows:
                out.add(f"suppress:{node['mode']}:{windows}")
        elif op == "windowed_by":
            out.add(f"windowed_by:{node['windows']['type']}")
            if node.get("emit") == "close":
                out.add("emit:close")
                out.add(f"emit:close:{node['windows']['type']}")
        elif op in ("filter", "filter_not", "map_values", "group_by", "to_stream"):
            out.add(f"{op}:{shapes[node['in']].shape}")
        elif op == "cogroup" and node.get("windows"):
            out.add(f"cogroup:{node['windows']['type']}")
            if node["windows"]["type"] == "session":
                out.add("aggregate:session")
        if op in ("count", "reduce", "aggregate") and node.get("store") and kind_emits_on_close(spec, node):
            out.add("store:emit:close")
    return out


def kind_emits_on_close(spec: Spec, node: Node) -> bool:
    """Whether an aggregation ``node`` reads a windowed stream that emits on window close."""
    source = next((n for n in spec["nodes"] if n["id"] == node["in"]), None)
    return source is not None and source["op"] == "windowed_by" and source.get("emit") == "close"


def oracle_request(case: dict[str, Any]) -> dict[str, Any]:
    """The request of ``case`` to the oracle program (see OracleMain.java)."""
    spec = normalize(case["spec"])
    return {
        "spec": spec,
        "config": case.get("config", {}),
        "wall_clock_start": WALL_CLOCK_START_MS,
        "input": case["input"],
        "sinks": sinks(spec),
        "stores": stores(spec),
    }
