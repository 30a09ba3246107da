"""Kafka's fixture of KStreamGlobalKTableJoinTest and KStreamGlobalKTableLeftJoinTest, shared by
their two ports: a stream joined with a global table through a key mapper."""

from __future__ import annotations

from typing import Any

from kstreams import Consumed, Serdes, StreamsBuilder

__all__ = ["GlobalTableJoin"]

S = Serdes.string()
I = Serdes.integer()  # noqa: E741 - Kafka's Serdes.Integer(), beside S
KEYS = (0, 1, 2, 3)


def _joiner(value1: Any, value2: Any) -> str:
    return f"{value1}+{value2}"


def _key_mapper(key: Any, value: str) -> str | None:
    """Kafka's mapper: the value is comma-delimited; its second token, if any, is the key to the
    global table; without one, None (no match)."""
    tokens = value.split(",")
    return tokens[1] if len(tokens) > 1 else None


class GlobalTableJoin:
    """Kafka's fixture: ``streamTopic`` (Integer keys) inner-joined (or, ``left``, left-joined)
    with the global table of ``globalTableTopic`` (String keys ``FKey<i>``) through
    ``_key_mapper``, every result kept by ``captured``. Stream record ``i`` is piped at time
    ``i``."""

    def __init__(self, drive: Any, captured: Any, left: bool = False) -> None:
        builder = StreamsBuilder()
        stream = builder.stream("streamTopic", Consumed.with_(I, S))
        table = builder.global_table("globalTableTopic", Consumed.with_(S, S))
        join = stream.left_join if left else stream.join
        join(table, _key_mapper, _joiner).process(captured.supplier)
        self.builder = builder
        self.driver = drive(builder.build())
        self.stream = self.driver.create_input_topic("streamTopic", I, S)
        self.table = self.driver.create_input_topic("globalTableTopic", S, S)
        self.captured = captured

    def push_to_stream(self, count: int, prefix: str, include_foreign_key: bool = True) -> None:
        for i in range(count):
            value = f"{prefix}{KEYS[i]}" + (f",FKey{KEYS[i]}" if include_foreign_key else "")
            self.stream.pipe_input(KEYS[i], value, i)

    def push_to_global_table(self, count: int, prefix: str) -> None:
        for i in range(count):
            self.table.pipe_input(f"FKey{KEYS[i]}", f"{prefix}{KEYS[i]}", 0)

    def push_null_values_to_global_table(self, count: int) -> None:
        for i in range(count):
            self.table.pipe_input(f"FKey{KEYS[i]}", None, 0)

    def take(self) -> list[tuple[Any, Any, int]]:
        return self.captured.take()
