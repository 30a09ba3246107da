"""The nodes of a topology as the user declared them: sources, processors and sinks.

These are definitions, not running nodes: ``topology/graph.py`` instantiates them once per task.
Topic names here are as the user gave them; internal topics are still unprefixed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "InternalTopicProperties",
    "NodeSpec",
    "ProcessorNodeSpec",
    "SinkNodeSpec",
    "SourceNodeSpec",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class InternalTopicProperties:
    """An internal (repartition) topic the topology declared: optional fixed partition count and
    the topic configs it asks for."""

    partitions: int | None = None
    config: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class SourceNodeSpec:
    """Reads topics; deserializers of None mean the default serdes of the application's config.

    A pattern source has no ``topics``: it reads every topic whose whole name matches ``pattern``.
    """

    name: str
    topics: tuple[str, ...]
    key_deserializer: Any = None
    value_deserializer: Any = None
    offset_reset: str | None = None
    timestamp_extractor: Any = None
    pattern: re.Pattern[str] | None = None

    @property
    def predecessors(self) -> tuple[str, ...]:
        return ()


@dataclass(slots=True)
class ProcessorNodeSpec:
    """Runs a ``Processor`` made by ``supplier`` (one per task) on what its parents forward."""

    name: str
    supplier: Callable[[], Any]
    predecessors: tuple[str, ...]
    # insertion-ordered set of connected store names
    stores: dict[str, None] = field(default_factory=dict)


@dataclass(slots=True)
class SinkNodeSpec:
    """Writes to a fixed topic, or to the topic a ``topic_extractor`` picks per record."""

    name: str
    predecessors: tuple[str, ...]
    topic: str | None = None
    topic_extractor: Any = None
    key_serializer: Any = None
    value_serializer: Any = None
    partitioner: Any = None


NodeSpec = SourceNodeSpec | ProcessorNodeSpec | SinkNodeSpec
