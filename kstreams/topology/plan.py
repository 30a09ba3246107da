"""The resolved shape of a topology for one application: what the runtime reads.

``Topology.build(application_id)`` returns a ``TopologyPlan``: subtopologies with their resolved
source and sink topics and stores, and every internal topic the application needs. Internal topic
names are prefixed with the application id here, and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from kstreams.state.store import StoreBuilder
    from kstreams.topology.graph import ProcessorGraph

__all__ = ["InternalTopicSpec", "SubtopologyPlan", "TopologyPlan"]


@dataclass(frozen=True)
class InternalTopicSpec:
    """An internal topic: a repartition topic or a store's changelog.

    ``partitions`` is fixed for repartition topics given an explicit count (``repartition(n)``);
    otherwise None, and the internal topic manager computes it (reference §4). ``config`` holds the
    configs the topology asks for (store log configs, repartition configs); library defaults and
    ``topic.*`` configs are layered under it by the internal topic manager.
    """

    name: str
    kind: Literal["repartition", "changelog"]
    subtopology: int  # the subtopology that reads it (repartition) or owns its store (changelog)
    partitions: int | None = None
    config: dict[str, str] = field(default_factory=dict)
    store: str | None = None
    windowed: bool = False
    retention_ms: int = -1  # windowed changelogs: the store's retention


@dataclass(frozen=True)
class SubtopologyPlan:
    """One connected piece of the topology; each partition of it is one task."""

    id: int
    source_topics: tuple[str, ...]  # every topic it reads, external and repartition, resolved
    repartition_source_topics: tuple[str, ...]
    sink_topics: tuple[str, ...]  # statically known topics it writes, external and repartition
    repartition_sink_topics: tuple[str, ...]
    stores: tuple[str, ...]
    changelog_topics: dict[str, str]  # store name -> changelog topic, for logged stores
    graph_factory: object = field(repr=False, compare=False, default=None)

    @property
    def external_source_topics(self) -> tuple[str, ...]:
        return tuple(t for t in self.source_topics if t not in self.repartition_source_topics)

    @property
    def stateful(self) -> bool:
        return bool(self.stores)

    def create_graph(self) -> ProcessorGraph:
        """A fresh instance of this subtopology's processors and stores, for one task."""
        return self.graph_factory()  # type: ignore[operator,no-any-return]


@dataclass(frozen=True)
class TopologyPlan:
    """Every subtopology and internal topic of one application."""

    application_id: str
    subtopologies: tuple[SubtopologyPlan, ...]
    internal_topics: dict[str, InternalTopicSpec]
    copartition_groups: tuple[frozenset[str], ...]  # topics whose partitions must line up
    store_builders: dict[str, StoreBuilder] = field(default_factory=dict)
    # resolved source topic -> "earliest" | "latest", where a source overrides auto.offset.reset
    offset_resets: dict[str, str] = field(default_factory=dict)
    # The global stores' subtopologies: read in full by every client's global thread, no tasks.
    # Their ids are taken from the same sequence, so ``subtopologies`` may skip numbers.
    global_subtopologies: tuple[SubtopologyPlan, ...] = ()
    # pattern source node -> its regex; ``source_topics`` hold the topics it matched at build
    source_patterns: dict[str, str] = field(default_factory=dict)

    def subtopology(self, subtopology_id: int) -> SubtopologyPlan:
        # Ids equal positions unless a global store's subtopology took a number.
        if 0 <= subtopology_id < len(self.subtopologies):
            sub = self.subtopologies[subtopology_id]
            if sub.id == subtopology_id:
                return sub
        for sub in self.subtopologies:
            if sub.id == subtopology_id:
                return sub
        raise KeyError(subtopology_id)

    @property
    def global_source_topics(self) -> tuple[str, ...]:
        """Topics the global stores are read from, sorted."""
        return tuple(sorted({t for s in self.global_subtopologies for t in s.source_topics}))

    @property
    def global_store_names(self) -> tuple[str, ...]:
        return tuple(store for s in self.global_subtopologies for store in s.stores)

    @property
    def source_topics(self) -> tuple[str, ...]:
        """External source topics (the ones the user owns), sorted."""
        return tuple(sorted({t for s in self.subtopologies for t in s.external_source_topics}))

    @property
    def all_source_topics(self) -> tuple[str, ...]:
        return tuple(sorted({t for s in self.subtopologies for t in s.source_topics}))

    def subtopology_for_topic(self, topic: str) -> SubtopologyPlan:
        for sub in self.subtopologies:
            if topic in sub.source_topics:
                return sub
        raise KeyError(topic)
