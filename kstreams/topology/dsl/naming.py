"""Kafka's generated names for DSL processors and stores.

A generated name is a prefix and a 10-digit index from one counter per builder, shared by
processors and stores, so a topology built here describes with the same names Kafka Streams gives
the same program (for example ``KSTREAM-AGGREGATE-STATE-STORE-0000000003``).
"""

from __future__ import annotations

import logging
import re

__all__ = [
    "AGGREGATE",
    "BRANCH",
    "FILTER",
    "FLATMAP",
    "FLATMAPVALUES",
    "FOREACH",
    "JOIN",
    "JOINOTHER",
    "JOINTHIS",
    "KEY_SELECT",
    "KTABLE_FILTER",
    "KTABLE_JOINOTHER",
    "KTABLE_JOINTHIS",
    "KTABLE_MAPVALUES",
    "KTABLE_MERGE",
    "KTABLE_SOURCE",
    "KTABLE_TOSTREAM",
    "LEFTJOIN",
    "MAP",
    "MAPVALUES",
    "MERGE",
    "OUTERJOIN",
    "OUTEROTHER",
    "OUTERSHARED",
    "OUTERTHIS",
    "PEEK",
    "PROCESSOR",
    "REDUCE",
    "REPARTITION",
    "REPARTITION_SUFFIX",
    "SINK",
    "SOURCE",
    "STATE_STORE",
    "WINDOWED",
    "is_generated",
]

logger = logging.getLogger(__name__)

SOURCE = "KSTREAM-SOURCE-"
SINK = "KSTREAM-SINK-"
FILTER = "KSTREAM-FILTER-"
MAP = "KSTREAM-MAP-"
MAPVALUES = "KSTREAM-MAPVALUES-"
FLATMAP = "KSTREAM-FLATMAP-"
FLATMAPVALUES = "KSTREAM-FLATMAPVALUES-"
KEY_SELECT = "KSTREAM-KEY-SELECT-"
PEEK = "KSTREAM-PEEK-"
FOREACH = "KSTREAM-FOREACH-"
BRANCH = "KSTREAM-BRANCH-"
MERGE = "KSTREAM-MERGE-"
PROCESSOR = "KSTREAM-PROCESSOR-"
REPARTITION = "KSTREAM-REPARTITION-"
AGGREGATE = "KSTREAM-AGGREGATE-"
REDUCE = "KSTREAM-REDUCE-"
JOIN = "KSTREAM-JOIN-"
LEFTJOIN = "KSTREAM-LEFTJOIN-"
OUTERJOIN = "KSTREAM-OUTERJOIN-"
WINDOWED = "KSTREAM-WINDOWED-"
JOINTHIS = "KSTREAM-JOINTHIS-"
JOINOTHER = "KSTREAM-JOINOTHER-"
OUTERTHIS = "KSTREAM-OUTERTHIS-"
OUTEROTHER = "KSTREAM-OUTEROTHER-"
OUTERSHARED = "KSTREAM-OUTERSHARED-"
KTABLE_SOURCE = "KTABLE-SOURCE-"
KTABLE_FILTER = "KTABLE-FILTER-"
KTABLE_MAPVALUES = "KTABLE-MAPVALUES-"
KTABLE_TOSTREAM = "KTABLE-TOSTREAM-"
KTABLE_JOINTHIS = "KTABLE-JOINTHIS-"
KTABLE_JOINOTHER = "KTABLE-JOINOTHER-"
KTABLE_MERGE = "KTABLE-MERGE-"
STATE_STORE = "STATE-STORE-"
REPARTITION_SUFFIX = "-repartition"

_GENERATED = re.compile(r"KSTREAM.*-[0-9]{10}")


def is_generated(name: str) -> bool:
    """Whether a name came from the generator (Kafka names repartition nodes differently then)."""
    return _GENERATED.fullmatch(name) is not None
