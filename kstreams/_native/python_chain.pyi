"""Stub of csrc/kstreams/_native/python_chain.pyx."""

from typing import Any

FILTER: int
VALUES: int
VALUES_WITH_KEY: int
KEY: int
MAP: int

def run_chain(
    ops: list[tuple[int, Any, bool]], keys: list[Any], values: list[Any], failed: list[int]
) -> tuple[list[Any], list[Any], list[int] | None]:
    """Run every record (``keys[i]``, ``values[i]``) through ``ops``, a list of (kind, function,
    negate); returns (keys, values, kept) of the records that passed every filter, ``kept`` their
    positions in the input (None when all passed). When a function raises, ``failed`` (a list of
    two) is set to its operation's and its record's positions before the exception propagates."""
