"""Seeded random cases: valid specs (spec.py) and inputs that probe the DSL's edges.

``generate_case(rng, exclude)`` draws a topology from one of a few templates (a stateless chain,
an aggregation with optional windows and suppression, a table pipeline, the three join kinds,
foreign-key and global-table joins, a cogroup, a stream turned table, a processor with a store;
a source table with a store is sometimes versioned, and a stream joined with a versioned table
sometimes waits a grace period), with functions chosen to fit the value types, and an input
with out-of-order timestamps, duplicates, null keys and values, tombstones, records late past
grace, bursts on one key, headers and wall-clock advances. ``exclude`` names step families
(``spec.families``) to leave out, so the cases test everything but the known differences; a
family ``headers:<family>`` keeps specs of that family but pipes no headers into them,.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from typing import Any

from tests.oracle.functions import (
    AGGREGATORS,
    FIXED_KEY_PROCESSORS,
    FLAT_KEY_VALUE_MAPPERS,
    FLAT_VALUE_MAPPERS,
    FOREIGN_KEY_EXTRACTORS,
    KEY_MAPPERS,
    KEY_VALUE_MAPPERS,
    PREDICATES,
    PROCESSORS,
    REDUCERS,
    TABLE_REDUCERS,
    VALUE_MAPPERS,
)
from tests.oracle.spec import families, normalize

__all__ = ["generate_case", "generate_cases"]

KEYS = ["a", "b", "c", "d", "ab", "ba"]
VALUES = ["x", "yy", "z", "ab", "xz", "q", "zzz"]
MAX_ATTEMPTS = 1000


class _SpecBuilder:
    """Nodes appended in build order, with the value type of each stream so far."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.nodes: list[dict[str, Any]] = []
        self.types: dict[str, str] = {}
        self.stores = 0
        # Variations added after the templates (versioned tables, their grace periods) draw from
        # a generator seeded by the main one's state without advancing it, so that adding them
        # left every other drawn case as it was.
        # (The state's integers only: the hash of its None is an address on Python 3.11.)
        self.variation = random.Random(hash(rng.getstate()[1]))

    def add(self, op: str, vtype: str | None = None, **params: Any) -> str:
        nid = f"n{len(self.nodes)}"
        self.nodes.append({"id": nid, "op": op, **params})
        if vtype is not None:
            self.types[nid] = vtype
        return nid

    def store(self) -> str | None:
        # Most stateful steps get a named store, whose final contents both drivers compare.
        if self.rng.random() < 0.2:
            return None
        self.stores += 1
        return f"store-{self.stores}"

    def table(self, topic: str, store: str | None) -> str:
        """A source table of ``topic``: with a named store, sometimes a versioned one (a history
        retention in ms), whose out-of-order updates go downstream marked not latest."""
        params: dict[str, Any] = {"topic": topic}
        if store:
            params["store"] = store
            if self.variation.random() < 0.25:
                params["versioned"] = self.variation.choice([5, 20, 100])
        return self.add("table", "s", **params)

    def pick(self, table: dict[str, Any], vtype: str) -> str | None:
        """A function of ``table`` taking values of ``vtype`` (None if there is none)."""
        names = [name for name, entry in table.items() if vtype in _accepts(entry)]
        return self.rng.choice(names) if names else None


def _accepts(entry: Any) -> Collection[str]:
    if isinstance(entry, tuple):
        last = entry[-1]
        return last[0] if isinstance(last, tuple) else last
    return {entry.vtype} if hasattr(entry, "vtype") else {"s", "l"}


def _out(table: dict[str, Any], fn: str, vtype: str) -> str:
    result = table[fn][1][1]
    return result or vtype


def _stateless(
    b: _SpecBuilder, ref: str, vtype: str, count: int, allow_rekey: bool = True
) -> tuple[str, str]:
    """Up to ``count`` random stateless steps after ``ref``; the last node and its value type."""
    rng = b.rng
    for _ in range(count):
        choice = rng.choice(
            [
                "filter",
                "filter_not",
                "map_values",
                "map",
                "select_key",
                "flat_map_values",
                "flat_map",
                "repartition",
                "split",
            ]
        )
        if choice in ("map", "select_key", "flat_map", "repartition") and not allow_rekey:
            choice = "filter"
        if choice in ("filter", "filter_not"):
            ref = b.add(choice, vtype, **{"in": ref, "fn": rng.choice(list(PREDICATES))})
        elif choice == "split":
            preds = rng.sample(list(PREDICATES), rng.randint(1, 2))
            default = rng.random() < 0.6
            split = b.add("split", None, **{"in": ref, "preds": preds, "default": default})
            branches = [f"{split}:{i}" for i in range(1, len(preds) + 1)] + (
                [f"{split}:0"] if default else []
            )
            ref = rng.choice(branches)
            if len(branches) > 1 and rng.random() < 0.5:
                # Send another branch to a topic of its own: every branch's records are compared.
                other = rng.choice([x for x in branches if x != ref])
                b.add("to", None, **{"in": other, "topic": f"branch-{split}"})
        elif choice == "repartition":
            ref = b.add("repartition", vtype, **{"in": ref})
        else:
            tables: dict[str, dict[str, Any]] = {
                "map_values": VALUE_MAPPERS,
                "map": KEY_VALUE_MAPPERS,
                "select_key": KEY_MAPPERS,
                "flat_map_values": FLAT_VALUE_MAPPERS,
                "flat_map": FLAT_KEY_VALUE_MAPPERS,
            }
            table = tables[choice]
            fn = b.pick(table, vtype)
            if fn is None:
                continue
            vtype = vtype if choice == "select_key" else _out(table, fn, vtype)
            ref = b.add(choice, vtype, **{"in": ref, "fn": fn})
    return ref, vtype


def _windows(rng: random.Random, kinds: list[str]) -> dict[str, Any]:
    kind = rng.choice(kinds)
    grace = rng.choice([0, 0, 2, 5, 20])
    if kind == "tumbling":
        return {"type": kind, "size": rng.choice([5, 10, 20]), "grace": grace}
    if kind == "hopping":
        size = rng.choice([10, 20])
        return {
            "type": kind,
            "size": size,
            "advance": rng.choice([d for d in (2, 5, 10) if d < size]),
            "grace": grace,
        }
    if kind == "sliding":
        return {"type": kind, "diff": rng.choice([3, 5, 10]), "grace": grace}
    return {"type": kind, "gap": rng.choice([2, 5, 10]), "grace": grace}


def _aggregation(
    b: _SpecBuilder, grouped: str, vtype: str, on_table: bool, windows: dict[str, Any] | None
) -> str:
    rng = b.rng
    ops = ["count", "aggregate"]
    reducers = TABLE_REDUCERS if on_table else REDUCERS
    if b.pick(reducers, vtype):
        ops.append("reduce")
    op = rng.choice(ops)
    store = b.store()
    params: dict[str, Any] = {"in": grouped}
    if store:
        params["store"] = store
    if op == "count":
        return b.add("count", "l", **params)
    if op == "reduce":
        return b.add("reduce", vtype, fn=b.pick(reducers, vtype), **params)
    fn = rng.choice(list(AGGREGATORS))
    return b.add("aggregate", AGGREGATORS[fn].vtype, fn=fn, **params)


def _sink(b: _SpecBuilder, ref: str, vtype: str, topic: str = "out") -> None:
    ref, _ = _stateless(b, ref, vtype, b.rng.choice([0, 0, 1]))
    b.add("to", None, **{"in": ref, "topic": topic})


def _template_stateless(b: _SpecBuilder) -> None:
    ref = b.add("stream", "s", topic="in-a")
    ref, vtype = _stateless(b, ref, "s", b.rng.randint(1, 4))
    if b.rng.random() < 0.3:
        other = b.add("stream", "s", topic="in-b")
        other, other_type = _stateless(b, other, "s", b.rng.randint(0, 1))
        if other_type == vtype:
            ref = b.add("merge", vtype, **{"in": ref, "other": other})
    b.add("to", None, **{"in": ref, "topic": "out"})


def _template_aggregation(b: _SpecBuilder) -> None:
    rng = b.rng
    ref = b.add("stream", "s", topic="in-a")
    ref, vtype = _stateless(b, ref, "s", rng.choice([0, 0, 1, 2]))
    if rng.random() < 0.5:
        grouped = b.add("group_by_key", vtype, **{"in": ref})
    else:
        grouped = b.add("group_by", vtype, **{"in": ref, "fn": rng.choice(list(KEY_MAPPERS))})
    windows = None
    if rng.random() < 0.65:
        windows = _windows(rng, ["tumbling", "hopping", "sliding", "session"])
        params: dict[str, Any] = {"in": grouped, "windows": windows}
        if rng.random() < 0.25:
            params["emit"] = "close"
        grouped = b.add("windowed_by", vtype, **params)
    table = _aggregation(b, grouped, vtype, False, windows)
    out_type = b.types[table]
    if rng.random() < 0.3:
        if windows is not None and rng.random() < 0.7:
            table = b.add("suppress", out_type, **{"in": table, "mode": "close"})
        else:
            params = {"in": table, "mode": "limit", "ms": rng.choice([0, 3, 10])}
            if rng.random() < 0.3:
                params["max_records"] = rng.choice([1, 2])
            table = b.add("suppress", out_type, **params)
    stream = b.add("to_stream", out_type, **{"in": table})
    _sink(b, stream, out_type)


def _template_table(b: _SpecBuilder) -> None:
    rng = b.rng
    ref = b.table("in-t", b.store())
    vtype = "s"
    for _ in range(rng.randint(0, 2)):
        op = rng.choice(["filter", "filter_not", "map_values"])
        if op == "map_values":
            fn = b.pick(VALUE_MAPPERS, vtype)
            assert fn is not None
            vtype = _out(VALUE_MAPPERS, fn, vtype)
            ref = b.add(op, vtype, **{"in": ref, "fn": fn})
        else:
            ref = b.add(op, vtype, **{"in": ref, "fn": rng.choice(list(PREDICATES))})
    if rng.random() < 0.6:
        fn = b.pick(KEY_VALUE_MAPPERS, vtype)
        if fn is not None:
            vtype = _out(KEY_VALUE_MAPPERS, fn, vtype)
            grouped = b.add("group_by", vtype, **{"in": ref, "fn": fn})
            ref = _aggregation(b, grouped, vtype, True, None)
            vtype = b.types[ref]
    stream = b.add("to_stream", vtype, **{"in": ref})
    _sink(b, stream, vtype)


def _template_stream_table_join(b: _SpecBuilder) -> None:
    rng = b.rng
    ref = b.add("stream", "s", topic="in-a")
    ref, _ = _stateless(b, ref, "s", rng.choice([0, 1]))
    table = b.table("in-t", b.store())
    params: dict[str, Any] = {"in": ref, "other": table, "fn": "pair"}
    history = b.nodes[-1].get("versioned")
    if history is not None and b.variation.random() < 0.5:
        params["grace"] = b.variation.choice([0, 2, history])  # within the history retention
    joined = b.add(rng.choice(["join", "left_join"]), "s", **params)
    _sink(b, joined, "s")


def _template_stream_stream_join(b: _SpecBuilder) -> None:
    rng = b.rng
    left = b.add("stream", "s", topic="in-a")
    left, _ = _stateless(b, left, "s", rng.choice([0, 1]), allow_rekey=False)
    right = b.add("stream", "s", topic="in-b")
    windows: dict[str, Any] = {"diff": rng.choice([0, 2, 5, 10]), "grace": rng.choice([0, 0, 3, 10])}
    if rng.random() < 0.2:
        windows["after"] = rng.choice([0, 1, 3])
    if rng.random() < 0.2:
        windows["before"] = rng.choice([0, 1, 3])
    op = rng.choice(["join", "left_join", "outer_join"])
    joined = b.add(op, "s", **{"in": left, "other": right, "fn": "pair", "windows": windows})
    _sink(b, joined, "s")


def _template_table_table_join(b: _SpecBuilder) -> None:
    rng = b.rng
    left = b.table("in-t", b.store())
    if rng.random() < 0.5:
        right = b.table("in-u", b.store())
    else:
        stream = b.add("stream", "s", topic="in-a")
        store = b.store()
        right = b.add("to_table", "s", **{"in": stream, **({"store": store} if store else {})})
    params: dict[str, Any] = {"in": left, "other": right, "fn": "pair"}
    store = b.store()
    if store and rng.random() < 0.5:
        params["store"] = store
    joined = b.add(rng.choice(["join", "left_join", "outer_join"]), "s", **params)
    stream = b.add("to_stream", "s", **{"in": joined})
    _sink(b, stream, "s")


def _template_cogroup(b: _SpecBuilder) -> None:
    rng = b.rng
    fn = rng.choice(list(AGGREGATORS))
    ins = []
    for topic in ("in-a", "in-b"):
        ref = b.add("stream", "s", topic=topic)
        ins.append(b.add("group_by_key", "s", **{"in": ref}))
    params: dict[str, Any] = {"ins": ins, "fns": [fn, fn]}
    if rng.random() < 0.5:
        params["windows"] = _windows(rng, ["tumbling", "hopping", "sliding", "session"])
    store = b.store()
    if store:
        params["store"] = store
    table = b.add("cogroup", AGGREGATORS[fn].vtype, **params)
    stream = b.add("to_stream", AGGREGATORS[fn].vtype, **{"in": table})
    _sink(b, stream, AGGREGATORS[fn].vtype)


def _template_to_table(b: _SpecBuilder) -> None:
    ref = b.add("stream", "s", topic="in-a")
    ref, vtype = _stateless(b, ref, "s", b.rng.choice([0, 1]))
    store = b.store()
    table = b.add("to_table", vtype, **{"in": ref, **({"store": store} if store else {})})
    stream = b.add("to_stream", vtype, **{"in": table})
    _sink(b, stream, vtype)


def _template_foreign_key_join(b: _SpecBuilder) -> None:
    rng = b.rng
    left = b.table("in-t", b.store() if rng.random() < 0.5 else None)
    right = b.table("in-u", b.store() if rng.random() < 0.5 else None)
    params: dict[str, Any] = {
        "in": left,
        "other": right,
        "extractor": rng.choice(list(FOREIGN_KEY_EXTRACTORS)),
        "fn": "pair",
    }
    store = b.store()
    if store and rng.random() < 0.5:
        params["store"] = store
    joined = b.add(rng.choice(["fk_join", "fk_left_join"]), "s", **params)
    stream = b.add("to_stream", "s", **{"in": joined})
    _sink(b, stream, "s")


def _template_global_table_join(b: _SpecBuilder) -> None:
    rng = b.rng
    ref = b.add("stream", "s", topic="in-a")
    ref, vtype = _stateless(b, ref, "s", rng.choice([0, 1]))
    store = b.store()
    table = b.add("global_table", "s", topic="in-g", **({"store": store} if store else {}))
    key_fn = b.pick(KEY_MAPPERS, vtype) or "const_all"
    params = {"in": ref, "other": table, "key_fn": key_fn, "fn": "pair"}
    joined = b.add(rng.choice(["join", "left_join"]), "s", **params)
    _sink(b, joined, "s")


def _template_processor(b: _SpecBuilder) -> None:
    rng = b.rng
    ref = b.add("stream", "s", topic="in-a")
    ref, vtype = _stateless(b, ref, "s", rng.choice([0, 1]))
    b.stores += 1
    store = f"store-{b.stores}"
    if rng.random() < 0.5:
        fn = rng.choice(list(FIXED_KEY_PROCESSORS))
        ref = b.add("process_values", FIXED_KEY_PROCESSORS[fn][1], **{"in": ref, "fn": fn, "store": store})
        vtype = FIXED_KEY_PROCESSORS[fn][1]
    else:
        fn = rng.choice(list(PROCESSORS))
        ref = b.add("process", PROCESSORS[fn][1], **{"in": ref, "fn": fn, "store": store})
        vtype = PROCESSORS[fn][1]
    _sink(b, ref, vtype)


TEMPLATES = [
    (_template_stateless, 3),
    (_template_aggregation, 6),
    (_template_table, 2),
    (_template_stream_table_join, 2),
    (_template_stream_stream_join, 3),
    (_template_table_table_join, 2),
    (_template_cogroup, 1),
    (_template_to_table, 1),
    (_template_foreign_key_join, 1),
    (_template_global_table_join, 1),
    (_template_processor, 1),
]


def _input(rng: random.Random, topics: list[str]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    ts = rng.randint(0, 20)
    burst_key = rng.choice(KEYS)
    for _ in range(rng.randint(1, 24)):
        roll = rng.random()
        if roll < 0.05:
            events.append({"wall": rng.choice([100, 999, 1000, 5000])})
            continue
        # Time mostly moves forward, sometimes jumps, sometimes goes back (out of order or late).
        step = rng.random()
        if step < 0.55:
            ts += rng.randint(0, 4)
        elif step < 0.7:
            ts += rng.randint(5, 30)
        elif step < 0.9:
            ts = max(0, ts - rng.randint(1, 8))
        record_ts = ts if step < 0.9 else max(0, ts - rng.randint(10, 40))  # late, stream time stays
        key = burst_key if rng.random() < 0.3 else rng.choice([*KEYS, None])
        value = None if rng.random() < 0.12 else rng.choice(VALUES)
        record: dict[str, Any] = {"topic": rng.choice(topics), "key": key, "value": value, "ts": record_ts}
        if rng.random() < 0.15:
            record["headers"] = [["h", rng.choice(["1", "2", None])]]
        events.append(record)
        if rng.random() < 0.08:
            events.append(dict(record))  # an exact duplicate
    return events


def generate_case(rng: random.Random, exclude: Collection[str] = ()) -> dict[str, Any]:
    """One random valid case whose spec uses no family in ``exclude``."""
    weights = [w for _, w in TEMPLATES]
    for _ in range(MAX_ATTEMPTS):
        b = _SpecBuilder(rng)
        template = rng.choices([t for t, _ in TEMPLATES], weights)[0]
        template(b)
        spec = {"nodes": b.nodes}
        normalize(spec)  # a generator bug fails here, not on a driver
        used = families(spec)
        if used & set(exclude):
            continue
        topics = sorted({n["topic"] for n in b.nodes if n["op"] in ("stream", "table", "global_table")})
        case: dict[str, Any] = {"spec": spec, "input": _input(rng, topics)}
        if {f"headers:{f}" for f in used} & set(exclude):
            for event in case["input"]:
                event.pop("headers", None)
        if rng.random() < 0.4:
            case["config"] = {"cache_bytes": 0}
        return case
    raise RuntimeError(
        f"no spec without {sorted(exclude)} in {MAX_ATTEMPTS} attempts: exclude fewer families"
    )


def generate_cases(seed: int, count: int, exclude: Collection[str] = ()) -> list[dict[str, Any]]:
    """``count`` cases from ``seed``, each named by its seed and index so a failure can be rerun."""
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        case = generate_case(rng, exclude)
        case["name"] = f"seed{seed}-{i}"
        cases.append(case)
    return cases
