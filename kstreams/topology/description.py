"""TopologyDescription: what ``Topology.describe()`` returns, printed in Kafka's text format.

The text matches Kafka's ``TopologyDescription.toString()`` character for character, so a
description can be compared with one printed by a Java application:

    Topologies:
       Sub-topology: 0
        Source: KSTREAM-SOURCE-0000000000 (topics: [in])
          --> KSTREAM-FILTER-0000000001
        Processor: KSTREAM-FILTER-0000000001 (stores: [])
          --> KSTREAM-SINK-0000000002
          <-- KSTREAM-SOURCE-0000000000
        Sink: KSTREAM-SINK-0000000002 (topic: out)
          <-- KSTREAM-FILTER-0000000001

Nodes are ordered as Kafka orders them: by the size of the sub-tree below them, largest first,
then by name; each node's neighbours in the order Kafka's sets of them keep (see
``_link_as_kafka``). Topic and store sets print in the iteration order of a Java ``HashSet``.

Processors whose DSL operation has a batch kernel carry its name in ``compiled`` (e.g. "filter",
"count", "windowed-sum"); ``to_string(show_compiled=True)`` marks them (``str()`` keeps Kafka's
text exactly). The runtime still checks serdes and stores per task and falls back to the
per-record path where they do not fit a kernel.

A pattern source prints its regex where a topic set would be (``Source: s (topics: orders-.*)``,
Kafka's ``topicPattern.toString()``). A global store's subtopology prints as
``Sub-topology: N for global store (will not generate tasks)`` with its source and processor,
numbered in the same sequence as the other subtopologies (Kafka's ``GlobalStore``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kstreams.topology.grouping import node_groups
from kstreams.topology.nodes import ProcessorNodeSpec, SinkNodeSpec, SourceNodeSpec

if TYPE_CHECKING:
    from kstreams.topology.topology import Topology

__all__ = [
    "GlobalStoreDescription",
    "NodeDescription",
    "ProcessorDescription",
    "SinkDescription",
    "SourceDescription",
    "SubtopologyDescription",
    "TopologyDescription",
    "describe_topology",
    "java_hash_map_order",
    "java_hash_set_order",
]

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class NodeDescription:
    """A node of a subtopology with its neighbours (ordered as Kafka orders them)."""

    name: str
    predecessors: list[NodeDescription] = field(default_factory=list)
    successors: list[NodeDescription] = field(default_factory=list)
    size: int = 1  # nodes in the sub-tree rooted here, counted per path, as Kafka counts them

    def _neighbours(self) -> str:
        return f"\n      --> {_names(self.successors)}\n      <-- {_names(self.predecessors)}"


@dataclass(eq=False)
class SourceDescription(NodeDescription):
    topic_set: list[str] = field(default_factory=list)
    topic_pattern: str | None = None

    @property
    def topics(self) -> str:
        if self.topic_pattern is not None and not self.topic_set:
            return self.topic_pattern
        return _java_set(self.topic_set)

    def __str__(self) -> str:
        return f"Source: {self.name} (topics: {self.topics})\n      --> {_names(self.successors)}"


@dataclass(eq=False)
class ProcessorDescription(NodeDescription):
    stores: list[str] = field(default_factory=list)
    compiled: str | None = None  # the batch kernel of its DSL operation, if it has one

    def __str__(self) -> str:
        return f"Processor: {self.name} (stores: {_java_set(self.stores)}){self._neighbours()}"

    def marked(self) -> str:
        """The Kafka line, with ``[compiled: <kernel>]`` after the stores when it has a kernel."""
        mark = f" [compiled: {self.compiled}]" if self.compiled else ""
        return f"Processor: {self.name} (stores: {_java_set(self.stores)}){mark}{self._neighbours()}"


@dataclass(eq=False)
class SinkDescription(NodeDescription):
    topic: str | None = None
    topic_name_extractor: Any = None

    def __str__(self) -> str:
        if self.topic is not None:
            target = f"topic: {self.topic}"
        else:
            target = f"extractor class: {_callable_name(self.topic_name_extractor)}"
        return f"Sink: {self.name} ({target})\n      <-- {_names(self.predecessors)}"


@dataclass(eq=False)
class SubtopologyDescription:
    """One subtopology: its id and its nodes in Kafka's order."""

    id: int
    nodes: list[NodeDescription]

    def __str__(self) -> str:
        return self.to_string()

    def to_string(self, show_compiled: bool = False) -> str:
        lines = (
            node.marked() if show_compiled and isinstance(node, ProcessorDescription) else str(node)
            for node in self.nodes
        )
        body = "".join(f"    {line}\n" for line in lines)
        return f"Sub-topology: {self.id}\n{body}\n"


@dataclass(eq=False)
class GlobalStoreDescription:
    """A global store's subtopology: the source reading its topic and the processor updating it."""

    id: int
    source: SourceDescription
    processor: ProcessorDescription

    def __str__(self) -> str:
        return self.to_string()

    def to_string(self, show_compiled: bool = False) -> str:
        # Unlike a subtopology, Kafka's GlobalStore.toString ends without a blank line.
        return (
            f"Sub-topology: {self.id} for global store (will not generate tasks)\n"
            f"    {self.source}\n    {self.processor}\n"
        )


@dataclass(eq=False)
class TopologyDescription:
    """Every subtopology of a topology, and its global stores' subtopologies."""

    subtopologies: list[SubtopologyDescription]
    global_stores: list[GlobalStoreDescription] = field(default_factory=list)

    def __str__(self) -> str:
        return self.to_string()

    def to_string(self, show_compiled: bool = False) -> str:
        """Kafka's text; with ``show_compiled``, processors with a batch kernel are marked."""
        # Kafka's format: one space after the header, then two before every subtopology; global
        # stores' subtopologies go in their place in the id order.
        parts: list[SubtopologyDescription | GlobalStoreDescription] = [
            *self.subtopologies,
            *self.global_stores,
        ]
        parts.sort(key=lambda part: part.id)
        return "Topologies:\n " + "".join(f"  {part.to_string(show_compiled)}" for part in parts)

    def compiled_nodes(self) -> dict[str, str]:
        """Processor name -> the batch kernel its DSL operation compiles to."""
        return {
            node.name: node.compiled
            for sub in self.subtopologies
            for node in sub.nodes
            if isinstance(node, ProcessorDescription) and node.compiled
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TopologyDescription) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


def describe_topology(topology: Topology) -> TopologyDescription:
    """Describe every subtopology of ``topology``, numbered as ``build`` numbers them."""
    specs = topology.nodes
    groups = node_groups({n: s.predecessors for n, s in specs.items()}, topology.store_users)
    subtopologies = []
    global_stores = []
    global_nodes = topology.global_node_names
    for group_id, names in groups.items():
        described: dict[str, NodeDescription] = {}
        for name in names:
            spec = specs[name]
            if isinstance(spec, SourceNodeSpec):
                described[name] = SourceDescription(
                    name,
                    topic_set=java_hash_set_order(spec.topics),
                    topic_pattern=spec.pattern.pattern if spec.pattern is not None else None,
                )
            elif isinstance(spec, ProcessorNodeSpec):
                described[name] = ProcessorDescription(
                    name, stores=java_hash_set_order(spec.stores), compiled=_kernel_label(spec.supplier)
                )
            elif isinstance(spec, SinkNodeSpec):
                described[name] = SinkDescription(
                    name, topic=spec.topic, topic_name_extractor=spec.topic_extractor
                )
        _link_as_kafka(described, [(name, specs[name].predecessors) for name in names])
        if names and all(name in global_nodes for name in names):
            source, processor = (described[name] for name in names)
            assert isinstance(source, SourceDescription) and isinstance(processor, ProcessorDescription)
            global_stores.append(GlobalStoreDescription(group_id, source, processor))
            continue
        subtopologies.append(SubtopologyDescription(group_id, sorted(described.values(), key=_node_order)))
    return TopologyDescription(subtopologies, global_stores)


def _link_as_kafka(described: dict[str, NodeDescription], nodes: list[tuple[str, Iterable[str]]]) -> None:
    """Connect each node to its neighbours and count sub-tree sizes as Kafka's
    ``InternalTopologyBuilder.describeSubtopology`` does, so neighbours print in its order.

    Kafka walks the nodes in the iteration order of a ``HashMap`` of their names; for each edge
    it puts the predecessor into the node's predecessors and the node into the predecessor's
    successors, both ``TreeSet``s ordered by sub-tree size (largest first) then name, and then
    adds the node's size to the predecessor and, recursively, to the predecessors known so far.
    A set is ordered by the sizes its members had when each was put in: a size that grows later
    does not move a member. So the sets are red-black trees here too, built as Java's ``TreeMap``
    builds them, and printed in their order."""
    predecessors = dict(nodes)
    ordered_names = java_hash_map_order([name for name, _ in nodes])
    predecessor_sets = {name: _JavaTreeSet() for name in described}
    successor_sets = {name: _JavaTreeSet() for name in described}
    for node in described.values():
        node.size = 1

    def update_size(node: NodeDescription, delta: int) -> None:
        node.size += delta
        for predecessor in predecessor_sets[node.name]:
            update_size(predecessor, delta)

    for name in ordered_names:
        node = described[name]
        for predecessor_name in predecessors[name]:
            predecessor = described[predecessor_name]
            predecessor_sets[name].add(predecessor)
            successor_sets[predecessor_name].add(node)
            update_size(predecessor, node.size)
    for name, node in described.items():
        node.predecessors = list(predecessor_sets[name])
        node.successors = list(successor_sets[name])


class _TreeEntry:
    __slots__ = ("black", "key", "left", "parent", "right")

    def __init__(self, key: NodeDescription, parent: _TreeEntry | None) -> None:
        self.key = key
        self.parent = parent
        self.left: _TreeEntry | None = None
        self.right: _TreeEntry | None = None
        self.black = True


class _JavaTreeSet:
    """Java's ``TreeSet`` of description nodes under Kafka's ``NodeComparator`` (sub-tree size,
    largest first, then name), compared with the sizes nodes have when another is put in: the
    insertions and rebalancing of ``java.util.TreeMap`` (a red-black tree, as in CLR)."""

    def __init__(self) -> None:
        self._root: _TreeEntry | None = None

    @staticmethod
    def _compare(a: NodeDescription, b: NodeDescription) -> int:
        if a is b:
            return 0
        if a.size != b.size:
            return b.size - a.size
        return (a.name > b.name) - (a.name < b.name)

    def add(self, key: NodeDescription) -> None:
        entry = self._root
        if entry is None:
            self._root = _TreeEntry(key, None)
            return
        while True:
            parent = entry
            cmp = self._compare(key, entry.key)
            if cmp == 0:
                return
            entry = entry.left if cmp < 0 else entry.right
            if entry is None:
                break
        added = _TreeEntry(key, parent)
        if cmp < 0:
            parent.left = added
        else:
            parent.right = added
        self._fix_after_insertion(added)

    def __iter__(self) -> Iterator[NodeDescription]:
        stack: list[_TreeEntry] = []
        entry = self._root
        while stack or entry is not None:
            while entry is not None:
                stack.append(entry)
                entry = entry.left
            entry = stack.pop()
            yield entry.key
            entry = entry.right

    def _fix_after_insertion(self, x: _TreeEntry | None) -> None:
        assert x is not None
        x.black = False
        while x is not None and x is not self._root and not _is_black(x.parent):
            parent = _parent(x)
            grand = _parent(parent)
            if parent is _left(grand):
                uncle = _right(grand)
                if not _is_black(uncle):
                    _set_black(parent, True)
                    _set_black(uncle, True)
                    _set_black(grand, False)
                    x = grand
                else:
                    if x is _right(parent):
                        x = parent
                        self._rotate_left(x)
                    _set_black(_parent(x), True)
                    _set_black(_parent(_parent(x)), False)
                    self._rotate_right(_parent(_parent(x)))
            else:
                uncle = _left(grand)
                if not _is_black(uncle):
                    _set_black(parent, True)
                    _set_black(uncle, True)
                    _set_black(grand, False)
                    x = grand
                else:
                    if x is _left(parent):
                        x = parent
                        self._rotate_right(x)
                    _set_black(_parent(x), True)
                    _set_black(_parent(_parent(x)), False)
                    self._rotate_left(_parent(_parent(x)))
        assert self._root is not None
        self._root.black = True

    def _rotate_left(self, p: _TreeEntry | None) -> None:
        if p is None or p.right is None:
            return
        r = p.right
        p.right = r.left
        if r.left is not None:
            r.left.parent = p
        r.parent = p.parent
        if p.parent is None:
            self._root = r
        elif p.parent.left is p:
            p.parent.left = r
        else:
            p.parent.right = r
        r.left = p
        p.parent = r

    def _rotate_right(self, p: _TreeEntry | None) -> None:
        if p is None or p.left is None:
            return
        left = p.left
        p.left = left.right
        if left.right is not None:
            left.right.parent = p
        left.parent = p.parent
        if p.parent is None:
            self._root = left
        elif p.parent.right is p:
            p.parent.right = left
        else:
            p.parent.left = left
        left.right = p
        p.parent = left


def _parent(entry: _TreeEntry | None) -> _TreeEntry | None:
    return None if entry is None else entry.parent


def _left(entry: _TreeEntry | None) -> _TreeEntry | None:
    return None if entry is None else entry.left


def _right(entry: _TreeEntry | None) -> _TreeEntry | None:
    return None if entry is None else entry.right


def _is_black(entry: _TreeEntry | None) -> bool:
    return True if entry is None else entry.black


def _set_black(entry: _TreeEntry | None, black: bool) -> None:
    if entry is not None:
        entry.black = black


def _kernel_label(supplier: Any) -> str | None:
    # Imported here: the DSL imports this module's package, so a top-level import would be circular.
    from kstreams.topology.compiled_ops import kernel_for_supplier

    kernel = kernel_for_supplier(supplier)
    return kernel.label if kernel is not None and kernel.native else None


def _node_order(node: NodeDescription) -> tuple[int, str]:
    return (-node.size, node.name)


def _names(nodes: list[NodeDescription]) -> str:
    return ", ".join(node.name for node in nodes) if nodes else "none"


def _java_set(items: Iterable[str]) -> str:
    return "[" + ", ".join(items) + "]"


def _callable_name(target: Any) -> str:
    kind = target if hasattr(target, "__qualname__") else type(target)
    return f"{getattr(kind, '__module__', '')}.{getattr(kind, '__qualname__', repr(kind))}"


def _java_string_hash(text: str) -> int:
    data = text.encode("utf-16-be")  # Java hashes UTF-16 code units
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_set_order(items: Iterable[str]) -> list[str]:
    """``items`` in the order Java's ``new HashSet<>(items)`` iterates them (duplicates dropped).

    Kafka prints topic and store sets through ``HashSet.toString()``; matching its order keeps
    ``describe()`` output identical to Kafka's for multi-topic sources and multi-store processors.
    """
    unique = list(dict.fromkeys(items))
    # HashSet(Collection): capacity max(n / 0.75 + 1, 16), rounded up to a power of two.
    wanted = max(int(len(unique) / 0.75) + 1, 16)
    capacity = 1 << (wanted - 1).bit_length()
    buckets: dict[int, list[str]] = {}
    for item in unique:
        h = _java_string_hash(item)
        spread = h ^ (h >> 16)
        buckets.setdefault(spread & (capacity - 1), []).append(item)
    return [item for index in sorted(buckets) for item in buckets[index]]


def java_hash_map_order(items: list[str]) -> list[str]:
    """``items`` (distinct) in the order a Java ``HashMap`` filled by ``put`` in that order
    iterates its keys: by bucket of the table it grew to (16, doubled past 3/4 full), and in
    put order within a bucket."""
    capacity = 16
    while len(items) > capacity * 3 // 4:
        capacity *= 2
    buckets: dict[int, list[str]] = {}
    for item in items:
        h = _java_string_hash(item)
        buckets.setdefault((h ^ (h >> 16)) & (capacity - 1), []).append(item)
    return [item for index in sorted(buckets) for item in buckets[index]]
