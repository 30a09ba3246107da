"""Hand-written reference cases, one or more per DSL family the spec language covers.

Each is a case (spec.py) with an input chosen to exercise its family's edges (late records past
grace, tombstones, null keys, bursts, equal timestamps, wall-clock advances), and the id of a
known difference (differences.py) when kstreams is known to answer it differently.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CATALOGUE", "records"]

Case = dict[str, Any]


def records(topic: str, text: str) -> list[dict[str, Any]]:
    """Input events from ``"key:value@ts ..."`` ("-" is null; ``+ms`` advances the wall clock;
    ``key:value@ts#h=1`` adds a header)."""
    events: list[dict[str, Any]] = []
    for token in text.split():
        if token.startswith("+"):
            events.append({"wall": int(token[1:])})
            continue
        token, _, header = token.partition("#")
        kv, _, ts = token.rpartition("@")
        key, _, value = kv.partition(":")
        event: dict[str, Any] = {
            "topic": topic,
            "key": None if key == "-" else key,
            "value": None if value == "-" else value,
            "ts": int(ts),
        }
        if header:
            name, _, hv = header.partition("=")
            event["headers"] = [[name, hv]]
        events.append(event)
    return events


def _merge_by_ts(*streams: list[dict[str, Any]]) -> list[dict[str, Any]]:
    merged = [e for s in streams for e in s]
    return sorted(merged, key=lambda e: e.get("ts", 0))


def chain(source: dict[str, Any], *steps: tuple[str, dict[str, Any]], topic: str = "out") -> dict[str, Any]:
    """A spec: ``source`` then each (op, params) reading the one before, then a sink."""
    nodes = [{"id": "n0", **source}]
    for i, (op, params) in enumerate(steps, start=1):
        nodes.append({"id": f"n{i}", "op": op, "in": f"n{i - 1}", **params})
    nodes.append({"id": "sink", "op": "to", "in": nodes[-1]["id"], "topic": topic})
    return {"nodes": nodes}


STREAM = {"op": "stream", "topic": "in-a"}
TABLE = {"op": "table", "topic": "in-t", "store": "source"}
# Out of order, a null key, a null value, a burst on "a", late records after the jump to 40.
EVENTS = records(
    "in-a", "a:x@1 b:yy@2 a:zzz@3 -:q@4 c:-@5 b:ab@7 a:x@12 c:xz@11 a:q@12 b:q@25 a:yy@3 d:z@40 a:x@2"
)
TABLE_EVENTS = records("in-t", "a:x@1 b:yy@2 a:zzz@3 -:q@4 c:-@5 b:-@7 a:ab@9 c:xz@11 d:q@12 a:-@13 d:z@14")
WINDOW_EVENTS = records(
    "in-a", "a:x@0 a:yy@4 b:z@5 a:q@9 a:x@10 b:ab@14 a:z@3 a:zzz@22 b:x@23 a:q@8 b:yy@21 a:x@50 b:q@12"
)
SESSION_EVENTS = records("in-a", "a:x@0 a:yy@3 b:z@4 a:q@10 a:x@6 b:ab@9 a:z@30 b:x@31 a:q@2 b:yy@50")
COUNT = ("count", {"store": "counts"})


def _count_windowed(windows: dict[str, Any], emit: str | None = None, store: str = "counts") -> list[Any]:
    windowed: dict[str, Any] = {"windows": windows}
    if emit:
        windowed["emit"] = emit
    count = {"store": store} if store else {}
    return [("group_by_key", {}), ("windowed_by", windowed), ("count", count), ("to_stream", {})]


def _join_spec(op: str, left: dict[str, Any], right: dict[str, Any], **params: Any) -> dict[str, Any]:
    nodes = [
        {"id": "l", **left},
        {"id": "r", **right},
        {"id": "j", "op": op, "in": "l", "other": "r", "fn": "pair", **params},
    ]
    last = "j"
    if left["op"] == "table":
        nodes.append({"id": "s", "op": "to_stream", "in": "j"})
        last = "s"
    nodes.append({"id": "sink", "op": "to", "in": last, "topic": "out"})
    return {"nodes": nodes}


def _windowed_join_spec(op: str, windows: dict[str, Any], *, left_agg: str = "reduce") -> dict[str, Any]:
    """Two windowed aggregations, of in-a and of in-b, joined on their windowed keys."""
    nodes: list[dict[str, Any]] = []
    for side, topic, agg in (("l", "in-a", left_agg), ("r", "in-b", "count")):
        nodes += [
            {"id": f"{side}0", "op": "stream", "topic": topic},
            {"id": f"{side}1", "op": "group_by_key", "in": f"{side}0"},
            {"id": f"{side}2", "op": "windowed_by", "in": f"{side}1", "windows": windows},
            {"id": side, "op": agg, "in": f"{side}2", **({"fn": "concat"} if agg == "reduce" else {})},
        ]
    nodes += [
        {"id": "j", "op": op, "in": "l", "other": "r", "fn": "pair"},
        {"id": "s", "op": "to_stream", "in": "j"},
        {"id": "sink", "op": "to", "in": "s", "topic": "out"},
    ]
    return {"nodes": nodes}


LEFT = records("in-a", "a:l1@1 b:l2@3 a:l3@8 c:l4@9 -:l5@10 a:l6@20 b:l7@40")
RIGHT = records("in-b", "a:r1@2 a:r2@6 b:r3@12 c:-@9 a:r4@22 d:r5@30 b:r6@41")
TABLE_RIGHT = records("in-t", "a:t1@0 b:t2@5 a:-@15 a:t3@21 c:t4@8")
TABLE_U = records("in-u", "a:u1@1 c:u2@4 a:u3@6 b:u4@10 c:-@12")


def _cogroup(windows: dict[str, Any] | None, fn: str = "collect") -> dict[str, Any]:
    cogroup: dict[str, Any] = {
        "id": "c",
        "op": "cogroup",
        "ins": ["ga", "gb"],
        "fns": [fn, fn],
        "store": "co",
    }
    if windows:
        cogroup["windows"] = windows
    return {
        "nodes": [
            {"id": "a", "op": "stream", "topic": "in-a"},
            {"id": "ga", "op": "group_by_key", "in": "a"},
            {"id": "b", "op": "stream", "topic": "in-b"},
            {"id": "gb", "op": "group_by_key", "in": "b"},
            cogroup,
            {"id": "s", "op": "to_stream", "in": "c"},
            {"id": "sink", "op": "to", "in": "s", "topic": "out"},
        ]
    }


def _split(default: bool) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = [
        {"id": "n0", **STREAM},
        {"id": "sp", "op": "split", "in": "n0", "preds": ["key_even", "value_short"], "default": default},
        {"id": "t1", "op": "to", "in": "sp:1", "topic": "even"},
        {"id": "t2", "op": "to", "in": "sp:2", "topic": "short"},
    ]
    if default:
        nodes.append({"id": "t0", "op": "to", "in": "sp:0", "topic": "rest"})
    return {"nodes": nodes}


def _case(name: str, spec: dict[str, Any], events: list[dict[str, Any]], **extra: Any) -> Case:
    return {"name": name, "spec": spec, "input": events, **extra}


CATALOGUE: list[Case] = [
    # --- stateless
    _case("filter-key-even", chain(STREAM, ("filter", {"fn": "key_even"})), EVENTS),
    _case("filter-not-value-null", chain(STREAM, ("filter_not", {"fn": "value_null"})), EVENTS),
    _case("map-values-upper", chain(STREAM, ("map_values", {"fn": "upper"})), EVENTS),
    _case(
        "map-values-to-long",
        chain(STREAM, ("map_values", {"fn": "len"}), ("map_values", {"fn": "twice"})),
        EVENTS,
    ),
    _case("map-swap", chain(STREAM, ("filter_not", {"fn": "value_null"}), ("map", {"fn": "swap"})), EVENTS),
    _case("select-key-value-head", chain(STREAM, ("select_key", {"fn": "value_head"})), EVENTS),
    _case("flat-map-values-chars", chain(STREAM, ("flat_map_values", {"fn": "chars"})), EVENTS),
    _case("flat-map-explode", chain(STREAM, ("flat_map", {"fn": "explode"})), EVENTS),
    _case(
        "merge-two-streams",
        {
            "nodes": [
                {"id": "a", "op": "stream", "topic": "in-a"},
                {"id": "b", "op": "stream", "topic": "in-b"},
                {"id": "bu", "op": "map_values", "in": "b", "fn": "upper"},
                {"id": "m", "op": "merge", "in": "a", "other": "bu"},
                {"id": "sink", "op": "to", "in": "m", "topic": "out"},
            ]
        },
        _merge_by_ts(LEFT, RIGHT),
    ),
    _case("split-with-default", _split(True), EVENTS),
    _case("split-without-default", _split(False), EVENTS),
    _case(
        "repartition-after-rekey",
        chain(STREAM, ("select_key", {"fn": "key_upper"}), ("repartition", {})),
        EVENTS,
    ),
    _case(
        "headers-pass-through",
        chain(STREAM, ("map_values", {"fn": "exclaim"})),
        records("in-a", "a:x@1#h=1 b:y@2#h=2 a:-@3#k=v"),
    ),
    # --- aggregations over all time
    _case("count-by-key", chain(STREAM, ("group_by_key", {}), COUNT, ("to_stream", {})), EVENTS),
    _case(
        "count-after-select-key",
        chain(STREAM, ("select_key", {"fn": "value_head"}), ("group_by_key", {}), COUNT, ("to_stream", {})),
        EVENTS,
    ),
    _case(
        "reduce-concat",
        chain(STREAM, ("group_by_key", {}), ("reduce", {"fn": "concat", "store": "r"}), ("to_stream", {})),
        EVENTS,
    ),
    _case(
        "aggregate-collect",
        chain(
            STREAM, ("group_by_key", {}), ("aggregate", {"fn": "collect", "store": "agg"}), ("to_stream", {})
        ),
        EVENTS,
    ),
    _case(
        "aggregate-sum-len-group-by",
        chain(
            STREAM,
            ("group_by", {"fn": "key_len"}),
            ("aggregate", {"fn": "sum_len", "store": "agg"}),
            ("to_stream", {}),
        ),
        EVENTS,
    ),
    _case(
        "count-without-cache",
        chain(STREAM, ("flat_map", {"fn": "dup_kv"}), ("group_by_key", {}), COUNT, ("to_stream", {})),
        EVENTS,
        config={"cache_bytes": 0},
    ),
    _case(
        "count-with-cache-collapses-updates",
        chain(STREAM, ("flat_map", {"fn": "dup_kv"}), ("group_by_key", {}), COUNT, ("to_stream", {})),
        EVENTS,
    ),
    # --- windowed aggregations
    _case(
        "tumbling-count-grace-late",
        chain(STREAM, *_count_windowed({"type": "tumbling", "size": 10, "grace": 5})),
        WINDOW_EVENTS,
    ),
    _case(
        "hopping-count",
        chain(STREAM, *_count_windowed({"type": "hopping", "size": 10, "advance": 5, "grace": 2})),
        WINDOW_EVENTS,
    ),
    _case(
        "sliding-count",
        chain(STREAM, *_count_windowed({"type": "sliding", "diff": 5, "grace": 3})),
        WINDOW_EVENTS,
    ),
    _case(
        "session-count-merging",
        chain(STREAM, *_count_windowed({"type": "session", "gap": 3, "grace": 4})),
        SESSION_EVENTS,
    ),
    _case(
        "session-reduce",
        chain(
            STREAM,
            ("group_by_key", {}),
            ("windowed_by", {"windows": {"type": "session", "gap": 3, "grace": 4}}),
            ("reduce", {"fn": "concat", "store": "sr"}),
            ("to_stream", {}),
        ),
        SESSION_EVENTS,
    ),
    _case(
        "session-aggregate-collect",
        chain(
            STREAM,
            ("group_by_key", {}),
            ("windowed_by", {"windows": {"type": "session", "gap": 3, "grace": 0}}),
            ("aggregate", {"fn": "collect", "store": "sa"}),
            ("to_stream", {}),
        ),
        SESSION_EVENTS,
    ),
    _case(
        "tumbling-suppress-until-window-closes",
        chain(
            STREAM,
            ("group_by_key", {}),
            ("windowed_by", {"windows": {"type": "tumbling", "size": 10, "grace": 2}}),
            ("count", {"store": "counts"}),
            ("suppress", {"mode": "close"}),
            ("to_stream", {}),
        ),
        WINDOW_EVENTS,
    ),
    _case(
        "session-suppress-until-window-closes",
        chain(
            STREAM,
            ("group_by_key", {}),
            ("windowed_by", {"windows": {"type": "session", "gap": 3, "grace": 2}}),
            ("count", {"store": "counts"}),
            ("suppress", {"mode": "close"}),
            ("to_stream", {}),
        ),
        SESSION_EVENTS,
    ),
    _case(
        "tumbling-emit-on-window-close",
        chain(STREAM, *_count_windowed({"type": "tumbling", "size": 10, "grace": 2}, emit="close", store="")),
        records("in-a", "a:x@0 a:y@4 b:z@5 a:q@12 +1000 b:x@14 a:z@23 +1000 a:q@31 b:x@45"),
    ),
    _case(
        "sliding-emit-on-window-close",
        chain(STREAM, *_count_windowed({"type": "sliding", "diff": 3, "grace": 0}, emit="close", store="")),
        records("in-a", "c:zzz@43 d:zzz@60"),
    ),
    _case(
        "hopping-emit-on-window-close-store",
        chain(
            STREAM,
            *_count_windowed(
                {"type": "hopping", "size": 10, "advance": 2, "grace": 2}, emit="close", store="counts"
            ),
        ),
        records("in-a", "a:zzz@23 b:q@28"),
    ),
    _case(
        "suppress-time-limit-distinct-times",
        chain(
            STREAM,
            ("group_by_key", {}),
            ("count", {"store": "counts"}),
            ("suppress", {"mode": "limit", "ms": 5}),
            ("to_stream", {}),
        ),
        records("in-a", "a:x@1 a:y@2 b:z@4 a:q@7 b:x@9 a:z@20 b:q@30"),
    ),
    _case(
        "suppress-time-limit-equal-times",
        chain(
            STREAM,
            ("group_by_key", {}),
            ("count", {"store": "counts"}),
            ("suppress", {"mode": "limit", "ms": 5}),
            ("to_stream", {}),
        ),
        records("in-a", "d:x@1 a:y@1 d:z@20"),
    ),
    _case(
        "session-suppress-time-limit-equal-times",
        chain(
            STREAM,
            ("group_by_key", {}),
            ("windowed_by", {"windows": {"type": "session", "gap": 2, "grace": 20}}),
            ("count", {}),
            ("suppress", {"mode": "limit", "ms": 10}),
            ("to_stream", {}),
        ),
        records("in-a", "d:-@0 d:q@2 ab:z@2 d:-@22"),
    ),
    # Kafka's SuppressScenarioTest.shouldSuppressIntermediateEventsWithBytesLimit: two entries
    # (keys, values, the repartition topic's name, overheads) pass 200 bytes.
    _case(
        "suppress-bytes-limit-emits-early",
        chain(
            TABLE,
            ("group_by", {"fn": "swap"}),
            ("count", {}),
            ("suppress", {"mode": "limit", "ms": 1 << 40, "max_bytes": 200}),
            ("to_stream", {}),
        ),
        records("in-t", "k1:v1@0 k1:v2@1 k2:v1@2 x:x@3"),
    ),
    _case(
        "tumbling-suppress-bytes-limit-emits-early",
        chain(
            STREAM,
            ("group_by_key", {}),
            ("windowed_by", {"windows": {"type": "tumbling", "size": 10, "grace": 100}}),
            ("count", {}),
            # 99: one byte more per entry than Kafka counts and the buffer fills a record sooner.
            ("suppress", {"mode": "limit", "ms": 50, "max_bytes": 99}),
            ("to_stream", {}),
        ),
        records("in-a", "a:x@1 b:y@2 a:z@3 c:x@4 a:q@12 d:z@13 b:x@14 e:y@20 a:x@90"),
    ),
    _case(
        "session-suppress-bytes-limit-emits-early",
        chain(
            STREAM,
            ("group_by_key", {}),
            ("windowed_by", {"windows": {"type": "session", "gap": 3, "grace": 100}}),
            ("count", {}),
            ("suppress", {"mode": "limit", "ms": 50, "max_bytes": 115, "max_records": 3}),
            ("to_stream", {}),
        ),
        records("in-a", "a:x@1 b:y@2 a:z@3 c:x@4#h=abc a:q@12 d:z@13 b:x@14 e:y@20 a:x@90"),
    ),
    # --- tables
    _case("table-to-stream", chain(TABLE, ("to_stream", {})), TABLE_EVENTS),
    _case("table-map-values", chain(TABLE, ("map_values", {"fn": "len"}), ("to_stream", {})), TABLE_EVENTS),
    _case(
        "table-filter",
        chain(TABLE, ("filter", {"fn": "key_is_a"}), ("to_stream", {})),
        TABLE_EVENTS,
    ),
    _case(
        "table-group-by-count",
        chain(TABLE, ("group_by", {"fn": "head_tag"}), ("count", {"store": "tc"}), ("to_stream", {})),
        TABLE_EVENTS,
    ),
    _case(
        "table-group-by-reduce",
        chain(
            TABLE,
            ("group_by", {"fn": "swap"}),
            ("reduce", {"fn": "concat", "store": "tr"}),
            ("to_stream", {}),
        ),
        TABLE_EVENTS,
    ),
    _case(
        "table-group-by-aggregate",
        chain(
            TABLE,
            ("group_by", {"fn": "head_tag"}),
            ("aggregate", {"fn": "sum_len", "store": "ta"}),
            ("to_stream", {}),
        ),
        TABLE_EVENTS,
    ),
    _case("stream-to-table", chain(STREAM, ("to_table", {"store": "tt"}), ("to_stream", {})), EVENTS),
    # --- joins
    _case("stream-table-join", _join_spec("join", STREAM, TABLE), _merge_by_ts(LEFT, TABLE_RIGHT)),
    _case("stream-table-left-join", _join_spec("left_join", STREAM, TABLE), _merge_by_ts(LEFT, TABLE_RIGHT)),
    _case(
        "stream-stream-inner-join",
        _join_spec("join", STREAM, {"op": "stream", "topic": "in-b"}, windows={"diff": 5, "grace": 3}),
        _merge_by_ts(LEFT, RIGHT),
    ),
    _case(
        "stream-stream-left-join",
        _join_spec("left_join", STREAM, {"op": "stream", "topic": "in-b"}, windows={"diff": 5, "grace": 3}),
        _merge_by_ts(LEFT, RIGHT),
    ),
    _case(
        "stream-stream-outer-join",
        _join_spec("outer_join", STREAM, {"op": "stream", "topic": "in-b"}, windows={"diff": 5, "grace": 3}),
        _merge_by_ts(LEFT, RIGHT),
    ),
    _case(
        "stream-stream-asymmetric-join",
        _join_spec(
            "join",
            STREAM,
            {"op": "stream", "topic": "in-b"},
            windows={"diff": 5, "grace": 0, "before": 0, "after": 4},
        ),
        _merge_by_ts(LEFT, RIGHT),
    ),
    _case(
        "stream-stream-outer-join-late-headers",
        _join_spec("outer_join", STREAM, {"op": "stream", "topic": "in-b"}, windows={"diff": 5, "grace": 10}),
        records("in-a", "d:xz@23") + records("in-b", "a:q@41#h=2"),
    ),
    # Kafka's KStreamWindowAggregateTest.testJoin (hopping windows of 10 advancing by 5), and
    # the other joins and window types: windowed tables join on their windowed keys.
    _case(
        "hopping-windowed-table-join",
        _windowed_join_spec("join", {"type": "hopping", "size": 10, "advance": 5, "grace": 100}),
        records("in-a", "A:1@0 B:2@1 C:3@2 D:4@3 A:1@9 A:1@5 B:2@6 D:4@7 B:2@8 C:3@9")
        + records("in-b", "A:a@0 B:b@1 C:c@2 D:d@20 A:a@20 A:a@5 B:b@6 D:d@7 D:d@18 A:a@21"),
    ),
    _case(
        "tumbling-windowed-table-left-join",
        _windowed_join_spec("left_join", {"type": "tumbling", "size": 10, "grace": 5}),
        _merge_by_ts(LEFT, RIGHT),
    ),
    _case(
        "sliding-windowed-table-outer-join",
        _windowed_join_spec("outer_join", {"type": "sliding", "diff": 5, "grace": 10}),
        _merge_by_ts(LEFT, RIGHT),
    ),
    _case(
        "session-windowed-table-outer-join",
        _windowed_join_spec("outer_join", {"type": "session", "gap": 3, "grace": 10}, left_agg="count"),
        _merge_by_ts(LEFT, RIGHT),
    ),
    _case(
        "table-table-inner-join",
        _join_spec("join", TABLE, {"op": "table", "topic": "in-u", "store": "u"}, store="joined"),
        _merge_by_ts(TABLE_RIGHT, TABLE_U),
    ),
    _case(
        "table-table-left-join",
        _join_spec("left_join", TABLE, {"op": "table", "topic": "in-u", "store": "u"}),
        _merge_by_ts(TABLE_RIGHT, TABLE_U),
    ),
    _case(
        "table-table-outer-join",
        _join_spec("outer_join", TABLE, {"op": "table", "topic": "in-u", "store": "u"}, store="joined"),
        _merge_by_ts(TABLE_RIGHT, TABLE_U),
    ),
    _case(
        "table-table-outer-join-absent-key-deleted",
        _join_spec("outer_join", TABLE, {"op": "table", "topic": "in-u", "store": "u"}),
        records("in-t", "c:-@23"),
        config={"cache_bytes": 0},
    ),
    # --- cogroup
    _case("cogroup-two-streams", _cogroup(None), _merge_by_ts(LEFT, RIGHT)),
    _case(
        "cogroup-tumbling",
        _cogroup({"type": "tumbling", "size": 10, "grace": 5}, "sum_len"),
        _merge_by_ts(LEFT, RIGHT),
    ),
    _case("cogroup-session", _cogroup({"type": "session", "gap": 4, "grace": 2}), _merge_by_ts(LEFT, RIGHT)),
]
CATALOGUE.append(
    _case(
        "session-count-without-cache-headers",
        chain(STREAM, *_count_windowed({"type": "session", "gap": 5, "grace": 5}, store="")),
        records("in-a", "ab:x@7#h=1 ab:y@9#h=2"),
        config={"cache_bytes": 0},
    )
)

# --- foreign-key joins, global tables, versioned tables, processors with stores
FK_LEFT = records(
    "in-t", "a:x-1@1 b:y-2@2 c:x-3@3 a:y-4@5 b:-@6 d:z-5@7 e:@9 c:-@12 f:w-6@13 d:x-7@15 a:x-8@17"
)
FK_RIGHT = records("in-u", "x:X1@0 y:Y1@4 x:X2@8 y:-@10 z:Z1@11 w:W1@14 x:-@16 y:Y2@18")
GLOBAL_EVENTS = _merge_by_ts(
    records("in-g", "x:G1@0 y:G2@3 x:-@5 z:G3@9"),
    records("in-a", "a:xa@1 b:yb@2 c:yc@4 d:xd@6 -:ze@7 e:-@8 f:zf@10 g:@11"),
)
VERSIONED_EVENTS = _merge_by_ts(
    records("in-t", "a:t1@10 b:u1@11 a:t2@20 a:-@30 b:u2@34"),
    records("in-a", "a:s1@12 b:s2@13 a:s3@15 a:s4@25 a:s5@31 b:s6@35 c:s7@36"),
)
# Out of order on the versioned table: older versions than the latest reach the store only.
VERSIONED_LATE = records("in-t", "a:t0@5 a:t3@14 b:u0@2 a:t4@22")
STREAM_AFTER_LATE = records("in-a", "a:s8@6 a:s9@15 a:s10@23 b:s11@12")


def _fk_spec(op: str, extractor: str, store: str | None = None) -> dict[str, Any]:
    join: dict[str, Any] = {
        "id": "j",
        "op": op,
        "in": "l",
        "other": "r",
        "extractor": extractor,
        "fn": "pair",
    }
    if store:
        join["store"] = store
    return {
        "nodes": [
            {"id": "l", "op": "table", "topic": "in-t", "store": "left"},
            {"id": "r", "op": "table", "topic": "in-u", "store": "right"},
            join,
            {"id": "s", "op": "to_stream", "in": "j"},
            {"id": "sink", "op": "to", "in": "s", "topic": "out"},
        ]
    }


def _global_spec(op: str) -> dict[str, Any]:
    return {
        "nodes": [
            {"id": "a", "op": "stream", "topic": "in-a"},
            {"id": "g", "op": "global_table", "topic": "in-g", "store": "global"},
            {"id": "j", "op": op, "in": "a", "other": "g", "key_fn": "value_head", "fn": "pair"},
            {"id": "sink", "op": "to", "in": "j", "topic": "out"},
        ]
    }


VERSIONED_TABLE = {"op": "table", "topic": "in-t", "store": "versions", "versioned": 100}
# In arrival order: out-of-order versions (t0, b's tombstones, y and zzz of c, d's) reach the
# versioned table's children marked not latest, which the table-table joins and re-groupings drop.
VERSIONED_OUT_OF_ORDER = records(
    "in-t",
    "a:t1@10 b:u1@11 a:t0@5 a:t2@20 b:-@3 a:-@30 a:t3@25 b:u2@34 c:xx@40 c:y@38 c:zzz@39 b:-@1 "
    "d:long@2 d:longer@1",
)
OTHER_TABLE = {"op": "table", "topic": "in-u", "store": "other"}
OTHER_TABLE_EVENTS = records("in-u", "a:U1@0 b:U2@12 c:U3@35 a:U4@26 t:T1@0 u:U2@2 x:X@3")


def _versioned_table_join_spec(op: str, versioned_side: str, **params: Any) -> dict[str, Any]:
    """A table-table join (``op``: join, left_join, outer_join, fk_join, fk_left_join) of the
    versioned table, on the ``versioned_side`` ("left" or "right"), with an unversioned one."""
    left, right = (
        (VERSIONED_TABLE, OTHER_TABLE) if versioned_side == "left" else (OTHER_TABLE, VERSIONED_TABLE)
    )
    return {
        "nodes": [
            {"id": "l", **left},
            {"id": "r", **right},
            {"id": "j", "op": op, "in": "l", "other": "r", "fn": "pair", **params},
            {"id": "s", "op": "to_stream", "in": "j"},
            {"id": "sink", "op": "to", "in": "s", "topic": "out"},
        ]
    }


def _inherited_versioned_join_spec(op: str, step: str, fn: str, **params: Any) -> dict[str, Any]:
    """A stream joined with a filter or map_values of the versioned table: the derived table
    keeps no store of its own and reads through to the versioned one, so the join looks it up as
    of each stream record's time (and may have a grace period)."""
    return {
        "nodes": [
            {"id": "l", **STREAM},
            {"id": "t", **VERSIONED_TABLE},
            {"id": "f", "op": step, "in": "t", "fn": fn},
            {"id": "j", "op": op, "in": "l", "other": "f", "fn": "pair", **params},
            {"id": "sink", "op": "to", "in": "j", "topic": "out"},
        ]
    }


CATALOGUE.extend(
    [
        _case(
            "fk-inner-join", _fk_spec("fk_join", "before_dash", store="fk"), _merge_by_ts(FK_LEFT, FK_RIGHT)
        ),
        _case("fk-left-join", _fk_spec("fk_left_join", "before_dash"), _merge_by_ts(FK_LEFT, FK_RIGHT)),
        # value_head of "" is a null foreign key: the inner join drops the row, the left join keeps it.
        _case(
            "fk-inner-join-null-foreign-key",
            _fk_spec("fk_join", "value_head"),
            _merge_by_ts(FK_LEFT, FK_RIGHT),
        ),
        _case(
            "fk-left-join-null-foreign-key",
            _fk_spec("fk_left_join", "value_head", store="fk"),
            _merge_by_ts(FK_LEFT, FK_RIGHT),
        ),
        _case(
            "fk-left-join-without-cache",
            _fk_spec("fk_left_join", "before_dash"),
            _merge_by_ts(FK_LEFT, FK_RIGHT),
            config={"cache_bytes": 0},
        ),
        _case("global-table-join", _global_spec("join"), GLOBAL_EVENTS),
        _case("global-table-left-join", _global_spec("left_join"), GLOBAL_EVENTS),
        _case(
            "versioned-stream-table-join",
            _join_spec("join", STREAM, VERSIONED_TABLE),
            VERSIONED_EVENTS + VERSIONED_LATE + STREAM_AFTER_LATE,
        ),
        _case(
            "versioned-stream-table-left-join",
            _join_spec("left_join", STREAM, VERSIONED_TABLE),
            VERSIONED_EVENTS + VERSIONED_LATE + STREAM_AFTER_LATE,
        ),
        # With a grace period, stream records wait until stream time passes them by the grace
        # period, so a late table version still reaches the stream records it precedes.
        _case(
            "versioned-stream-table-join-with-grace",
            _join_spec("join", STREAM, VERSIONED_TABLE, grace=10),
            VERSIONED_EVENTS + VERSIONED_LATE + STREAM_AFTER_LATE,
        ),
        _case(
            "versioned-stream-table-left-join-with-grace",
            _join_spec("left_join", STREAM, VERSIONED_TABLE, grace=5),
            _merge_by_ts(VERSIONED_EVENTS, VERSIONED_LATE) + STREAM_AFTER_LATE,
        ),
        _case(
            "versioned-filtered-stream-table-join",
            _inherited_versioned_join_spec("join", "filter_not", "value_null"),
            VERSIONED_EVENTS + VERSIONED_LATE + STREAM_AFTER_LATE,
        ),
        _case(
            "versioned-mapped-stream-table-left-join-with-grace",
            _inherited_versioned_join_spec("left_join", "map_values", "upper", grace=6),
            VERSIONED_EVENTS + VERSIONED_LATE + STREAM_AFTER_LATE,
        ),
        _case(
            "versioned-table-to-stream",
            chain(VERSIONED_TABLE, ("to_stream", {})),
            records("in-t", "a:t1@10 b:u1@11 a:t0@5 a:t2@20 b:-@3 a:-@30 a:t3@25 b:u2@34"),
        ),
        # A filter and a value mapping pass the out-of-order versions on; with versioned
        # semantics the filter forwards a deletion for every row it drops (d's, never held).
        _case(
            "versioned-table-filter-to-stream",
            chain(VERSIONED_TABLE, ("filter", {"fn": "value_short"}), ("to_stream", {})),
            VERSIONED_OUT_OF_ORDER,
        ),
        _case(
            "versioned-table-map-values-filter-to-stream",
            chain(
                VERSIONED_TABLE,
                ("map_values", {"fn": "upper"}),
                ("filter", {"fn": "value_short"}),
                ("to_stream", {}),
            ),
            VERSIONED_OUT_OF_ORDER,
        ),
        # The re-grouping makes the filter send old values; versioned semantics still forward
        # a deletion for each dropped row to the stream beside it.
        _case(
            "versioned-table-filter-beside-regrouped-count",
            {
                "nodes": [
                    {"id": "t", **VERSIONED_TABLE},
                    {"id": "f", "op": "filter", "in": "t", "fn": "value_short"},
                    {"id": "s", "op": "to_stream", "in": "f"},
                    {"id": "sink", "op": "to", "in": "s", "topic": "out"},
                    {"id": "g", "op": "group_by", "in": "f", "fn": "head_tag"},
                    {"id": "c", "op": "count", "in": "g"},
                    {"id": "s2", "op": "to_stream", "in": "c"},
                    {"id": "sink2", "op": "to", "in": "s2", "topic": "out2"},
                ]
            },
            VERSIONED_OUT_OF_ORDER,
            config={"cache_bytes": 0},
        ),
        _case(
            "versioned-table-regrouped-count",
            chain(VERSIONED_TABLE, ("group_by", {"fn": "head_tag"}), ("count", {}), ("to_stream", {})),
            VERSIONED_OUT_OF_ORDER,
        ),
        _case(
            "versioned-table-left-join-table",
            _versioned_table_join_spec("left_join", "left"),
            OTHER_TABLE_EVENTS + VERSIONED_OUT_OF_ORDER,
            config={"cache_bytes": 0},
        ),
        _case(
            "versioned-table-outer-join-table-right",
            _versioned_table_join_spec("outer_join", "right"),
            OTHER_TABLE_EVENTS + VERSIONED_OUT_OF_ORDER,
        ),
        _case(
            "versioned-table-fk-left-join",
            _versioned_table_join_spec("fk_left_join", "left", extractor="value_head"),
            OTHER_TABLE_EVENTS + VERSIONED_OUT_OF_ORDER,
        ),
        _case(
            "versioned-table-fk-join-right",
            _versioned_table_join_spec("fk_join", "right", extractor="value_head"),
            records("in-u", "p:a1@0 q:b2@1 r:c3@2 s:d@3") + VERSIONED_OUT_OF_ORDER,
        ),
        _case(
            "process-values-running-count",
            chain(STREAM, ("process_values", {"fn": "running_count", "store": "running"})),
            EVENTS,
        ),
        _case(
            "process-stream-time-punctuation",
            chain(STREAM, ("process", {"fn": "flush_every_10", "store": "buffer"})),
            EVENTS,
        ),
        _case(
            "process-values-then-count",
            chain(
                STREAM,
                ("process_values", {"fn": "running_count", "store": "running"}),
                ("group_by_key", {}),
                ("reduce", {"fn": "sum", "store": "sums"}),
                ("to_stream", {}),
            ),
            EVENTS,
        ),
    ]
)

# --- Stores.lru_map: a key-value store that forgets its least recently used key. Without a cache
# the map alone decides what a count or a join sees; with one, the cache still holds what the map
# forgot (Kafka's rule too).
LRU_EVENTS = records("in-a", "a:v@0 b:v@1 a:v@2 c:v@3 b:v@4 a:v@5 a:v@6 d:v@7 a:v@8 -:v@9 c:-@10")
# Keys of three lengths, for a map of fewer keys after a group_by of the key's length.
LRU_LENGTH_EVENTS = records("in-a", "a:p@0 bb:q@1 a:r@2 ccc:s@3 bb:t@4 dd:u@5 e:v@6 bb:-@7 fff:w@8")
LRU_JOIN_EVENTS = (
    records("in-t", "k1:x1@0 k2:x2@1")
    + records("in-a", "k1:a@2")
    + records("in-t", "k3:x3@3")
    + records("in-a", "k1:b@4 k2:c@5")
    + records("in-t", "k2:-@6 k4:x4@7")
    + records("in-a", "k1:d@8 k3:e@9 k4:f@10")
)


def _lru_join_spec() -> dict[str, Any]:
    spec = _join_spec("left_join", STREAM, {"op": "table", "topic": "in-t", "store": "lru", "lru": 2})
    # The table's own updates too: what the map forgets is not an update of the table.
    spec["nodes"] += [
        {"id": "t", "op": "to_stream", "in": "r"},
        {"id": "tsink", "op": "to", "in": "t", "topic": "out-t"},
    ]
    return spec


for _cache in (0, None):
    _config = {"config": {"cache_bytes": 0}} if _cache == 0 else {}
    _suffix = "without-cache" if _cache == 0 else "with-cache"
    CATALOGUE.extend(
        [
            _case(
                f"lru-map-count-{_suffix}",
                chain(STREAM, ("group_by_key", {}), ("count", {"store": "lru", "lru": 2}), ("to_stream", {})),
                LRU_EVENTS,
                **_config,
            ),
            _case(
                f"lru-map-reduce-group-by-{_suffix}",
                chain(
                    STREAM,
                    ("group_by", {"fn": "key_len"}),
                    ("reduce", {"fn": "concat", "store": "lru", "lru": 2}),
                    ("to_stream", {}),
                ),
                LRU_LENGTH_EVENTS,
                **_config,
            ),
            _case(f"lru-map-table-join-{_suffix}", _lru_join_spec(), LRU_JOIN_EVENTS, **_config),
            _case(
                f"lru-map-to-table-size-zero-{_suffix}",
                chain(STREAM, ("to_table", {"store": "lru", "lru": 0}), ("to_stream", {})),
                LRU_EVENTS,
                **_config,
            ),
        ]
    )

# --- The DSL's store choice (KIP-591, KIP-954): the same cases with every store the DSL makes
# without a store type in memory, chosen by the builder's TopologyConfig (default.dsl.store) or
# by the client's dsl.store.suppliers.class. In-memory window and session stores keep and drop
# windows by their own rules, so the windowed cases answer by them.
_IN_MEMORY_CASES = (
    "count-by-key",
    "tumbling-count-grace-late",
    "hopping-count",
    "sliding-count",
    "session-count-merging",
    "tumbling-emit-on-window-close",
    "sliding-emit-on-window-close",
    "hopping-emit-on-window-close-store",
    "stream-stream-left-join",
    "stream-stream-outer-join",
    "session-windowed-table-outer-join",
    "table-table-outer-join",
    "fk-left-join",
    "global-table-left-join",
    "cogroup-session",
)
_BY_NAME = {case["name"]: case for case in CATALOGUE}
for _name in _IN_MEMORY_CASES:
    _base = _BY_NAME[_name]
    for _key, _label in (("dsl_store", "topology-config"), ("client_dsl_store", "client-config")):
        CATALOGUE.append(
            {
                **_base,
                "name": f"{_name}-in-memory-by-{_label}",
                "config": {**_base.get("config", {}), _key: "in_memory"},
            }
        )
