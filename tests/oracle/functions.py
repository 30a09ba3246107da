"""The fixed library of named functions a topology spec draws from, in Python.

jvm/src/main/java/io/kstreams/oracle/SpecFunctions.java is the same library for Kafka Streams: each
name means the same on both sides, null keys and values included. Values are strings ("s") or
longs ("l"); ``render`` is how any value becomes text ("null" for None, as Java's
``Objects.toString``). Each table below also says which value types a function takes and gives,
which the spec's type inference (spec.py) and the generator (generator.py) read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kstreams import KeyValue
from kstreams.processor import (
    FixedKeyProcessor,
    FixedKeyProcessorContext,
    FixedKeyRecord,
    Processor,
    ProcessorContext,
    PunctuationType,
    Record,
)

__all__ = [
    "AGGREGATORS",
    "FIXED_KEY_PROCESSORS",
    "FLAT_KEY_VALUE_MAPPERS",
    "FLAT_VALUE_MAPPERS",
    "FOREIGN_KEY_EXTRACTORS",
    "JOINERS",
    "KEY_MAPPERS",
    "KEY_VALUE_MAPPERS",
    "PREDICATES",
    "PROCESSORS",
    "REDUCERS",
    "TABLE_REDUCERS",
    "VALUE_MAPPERS",
    "render",
]

# (input value types accepted, output value type or None for "same as input")
Types = tuple[frozenset[str], str | None]
ANY = frozenset({"s", "l"})
S = frozenset({"s"})
L = frozenset({"l"})


def render(x: Any) -> str:
    """Text of a key or value: "null" for None, else str()."""
    return "null" if x is None else str(x)


def _weight(v: Any) -> int:
    if v is None:
        return 0
    return v if isinstance(v, int) else len(v)


def _head(s: str | None) -> str | None:
    return s[0] if s else None


def _len_letter(v: Any) -> str | None:
    """ "a" for a value of length 1, "b" for 2...: a key of the generator's from any value."""
    n = len(render(v))
    return chr(ord("a") + n - 1) if n else None


PREDICATES: dict[str, tuple[Callable[[Any, Any], bool], frozenset[str]]] = {
    "key_even": (lambda k, v: bool(k) and ord(k[0]) % 2 == 0, ANY),
    "key_null": (lambda k, v: k is None, ANY),
    "key_is_a": (lambda k, v: k == "a", ANY),
    "value_null": (lambda k, v: v is None, ANY),
    "value_short": (lambda k, v: v is not None and len(render(v)) <= 2, ANY),
}

VALUE_MAPPERS: dict[str, tuple[Callable[[Any], Any], Types]] = {
    "upper": (lambda v: None if v is None else v.upper(), (S, "s")),
    "exclaim": (lambda v: None if v is None else render(v) + "!", (ANY, "s")),
    "len": (lambda v: None if v is None else len(v), (S, "l")),
    "to_str": (lambda v: None if v is None else render(v), (ANY, "s")),
    "twice": (lambda v: None if v is None else v * 2, (L, "l")),
    "null_if_x": (lambda v: None if v is not None and "x" in v else v, (S, "s")),
}

KEY_MAPPERS: dict[str, tuple[Callable[[Any, Any], Any], frozenset[str]]] = {
    "value_head": (lambda k, v: None if v is None else _head(render(v)), ANY),
    "key_upper": (lambda k, v: None if k is None else k.upper(), ANY),
    "const_all": (lambda k, v: "all", ANY),
    "key_len": (lambda k, v: None if k is None else str(len(k)), ANY),
    "value_len_letter": (lambda k, v: None if v is None else _len_letter(v), ANY),
}

KEY_VALUE_MAPPERS: dict[str, tuple[Callable[[Any, Any], KeyValue[Any, Any]], Types]] = {
    "swap": (lambda k, v: KeyValue(v, k), (S, "s")),
    "head_tag": (lambda k, v: KeyValue(_head(k), render(k) + "=" + render(v)), (ANY, "s")),
}

FLAT_VALUE_MAPPERS: dict[str, tuple[Callable[[Any], list[Any]], Types]] = {
    "chars": (lambda v: [] if v is None else list(v), (S, "s")),
    "dup": (lambda v: [v, v], (ANY, None)),
}

FLAT_KEY_VALUE_MAPPERS: dict[str, tuple[Callable[[Any, Any], list[KeyValue[Any, Any]]], Types]] = {
    "explode": (lambda k, v: [] if v is None else [KeyValue(c, render(k)) for c in v], (S, "s")),
    "dup_kv": (lambda k, v: [KeyValue(k, v), KeyValue(k, v)], (ANY, None)),
}

REDUCERS: dict[str, tuple[Callable[[Any, Any], Any], frozenset[str]]] = {
    # Java's string concatenation renders null as "null": render() does the same here.
    "concat": (lambda agg, v: f"{render(agg)},{render(v)}", S),
    # Null-safe (a windowed reduce gets null values): the library keeps clear of error paths.
    "max": (lambda agg, v: agg if v is None or (agg is not None and agg >= v) else v, S),
    "sum": (lambda agg, v: agg if v is None else agg + v, L),
}

# A table reduction's (adder, subtractor).
TABLE_REDUCERS: dict[str, tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any], frozenset[str]]] = {
    "concat": (lambda agg, v: f"{render(agg)}+{render(v)}", lambda agg, v: f"{render(agg)}-{render(v)}", S),
    "sum": (lambda agg, v: agg + v, lambda agg, v: agg - v, L),
}


class Aggregation:
    """A named aggregation: its initializer, its stream aggregator ``(key, value, agg)``, its
    table adder and subtractor, its session merger ``(key, agg1, agg2)``, its result type."""

    def __init__(
        self,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        adder: Callable[[Any, Any, Any], Any],
        subtractor: Callable[[Any, Any, Any], Any],
        merger: Callable[[Any, Any, Any], Any],
        vtype: str,
    ) -> None:
        self.initializer = initializer
        self.aggregator = aggregator
        self.adder = adder
        self.subtractor = subtractor
        self.merger = merger
        self.vtype = vtype


AGGREGATORS: dict[str, Aggregation] = {
    "collect": Aggregation(
        lambda: "",
        lambda k, v, agg: agg + render(v) + ";",
        lambda k, v, agg: agg + "+" + render(v),
        lambda k, v, agg: agg + "-" + render(v),
        lambda k, a, b: f"{a}|{b}",
        "s",
    ),
    "sum_len": Aggregation(
        lambda: 0,
        lambda k, v, agg: agg + _weight(v),
        lambda k, v, agg: agg + _weight(v),
        lambda k, v, agg: agg - _weight(v),
        lambda k, a, b: a + b,
        "l",
    ),
}

JOINERS: dict[str, Callable[[Any, Any], str]] = {
    "pair": lambda left, right: render(left) + "|" + render(right),
}

# A foreign-key join's extractor: the other table's key from this table's value.
FOREIGN_KEY_EXTRACTORS: dict[str, Callable[[Any], Any]] = {
    "value_head": lambda v: None if v is None else _head(render(v)),
    "before_dash": lambda v: None if v is None else render(v).split("-")[0],
    "len_letter": lambda v: None if v is None else _len_letter(v),
}


class RunningCount(FixedKeyProcessor[str, Any, int]):
    """process_values "running_count": counts each key's records in its store (key -> long) and
    forwards the count; a null key is forwarded with count 0 and not stored (a store takes no
    null key)."""

    def __init__(self, store: str) -> None:
        self._store_name = store

    def init(self, context: FixedKeyProcessorContext[str, int]) -> None:
        self._context = context
        self._store = context.get_state_store(self._store_name)

    def process(self, record: FixedKeyRecord[str, Any]) -> None:
        if record.key is None:
            self._context.forward(record.with_value(0))
            return
        count = (self._store.get(record.key) or 0) + 1
        self._store.put(record.key, count)
        self._context.forward(record.with_value(count))


class FlushOnStreamTime(Processor[str, Any, str, str]):
    """process "flush_every_10": keeps each key's latest value (rendered) in its store (key ->
    string), and every 10 ms of stream time forwards every stored row in key order, stamped
    with the punctuation's time, then empties the store. A null key is dropped; a null value
    deletes the key's row."""

    INTERVAL_MS = 10

    def __init__(self, store: str) -> None:
        self._store_name = store

    def init(self, context: ProcessorContext[str, str]) -> None:
        self._context = context
        self._store = context.get_state_store(self._store_name)
        context.schedule(self.INTERVAL_MS, PunctuationType.STREAM_TIME, self._flush)

    def process(self, record: Record[str, Any]) -> None:
        if record.key is None:
            return
        self._store.put(record.key, None if record.value is None else render(record.value))

    def _flush(self, timestamp: int) -> None:
        rows = list(self._store.all())
        for key, value in rows:
            self._context.forward(Record(key, value, timestamp))
        for key, _value in rows:
            self._store.delete(key)


# A processor's supplier from its store name, and the type of the values it forwards and stores.
FIXED_KEY_PROCESSORS: dict[str, tuple[Callable[[str], Callable[[], Any]], str]] = {
    "running_count": (lambda store: lambda: RunningCount(store), "l"),
}
PROCESSORS: dict[str, tuple[Callable[[str], Callable[[], Any]], str]] = {
    "flush_every_10": (lambda store: lambda: FlushOnStreamTime(store), "s"),
}
