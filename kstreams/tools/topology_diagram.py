"""Diagrams of a topology as text: a Mermaid flowchart or a Graphviz DOT digraph.

Both show the same graph, read from ``Topology.describe()``: one subgraph per subtopology holding
its sources, processors, sinks and state stores; topics outside every subgraph, so a repartition
topic visibly links the subtopology that writes it to the one that reads it. Records flow along
solid arrows (topic -> source -> processors -> sink -> topic); a dashed line joins a processor to
each store it uses. Render with any Mermaid viewer (GitHub, mermaid.live) or ``dot -Tsvg``; no
service is needed to write them.

Guarantee: node ids are derived from names with every character outside ``[A-Za-z0-9_]``
replaced and a prefix per kind, so names with dashes, dots or quotes never break the syntax, and
the same topology always gives the same text.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from kstreams.topology.description import (
    NodeDescription,
    ProcessorDescription,
    SinkDescription,
    SourceDescription,
    TopologyDescription,
)

__all__ = ["FORMATS", "DiagramGraph", "diagram", "to_dot", "to_mermaid"]

logger = logging.getLogger(__name__)

FORMATS = ("mermaid", "dot")
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


@dataclass
class _Subtopology:
    id: int
    nodes: list[tuple[str, str, str]] = field(default_factory=list)  # (id, kind, name)
    stores: list[str] = field(default_factory=list)


@dataclass
class DiagramGraph:
    """The diagram's content, independent of the output syntax."""

    subtopologies: list[_Subtopology]
    topics: list[str]  # topic names (and "pattern: ..."/"extractor: ..." labels) in first-seen order
    flows: list[tuple[str, str]]  # (from id, to id), records flow along them
    uses: list[tuple[str, str]]  # (processor id, store id)

    @classmethod
    def of(cls, description: TopologyDescription) -> DiagramGraph:
        subtopologies: list[_Subtopology] = []
        topics: list[str] = []
        flows: list[tuple[str, str]] = []
        uses: list[tuple[str, str]] = []

        def topic(label: str) -> str:
            if label not in topics:
                topics.append(label)
            return _id("topic", label)

        for sub in description.subtopologies:
            entry = _Subtopology(sub.id)
            subtopologies.append(entry)
            for node in sub.nodes:
                node_id = _node_id(node)
                entry.nodes.append((node_id, _kind(node), node.name))
                if isinstance(node, SourceDescription):
                    labels = list(node.topic_set) or (
                        [f"pattern: {node.topic_pattern}"] if node.topic_pattern else []
                    )
                    flows.extend((topic(label), node_id) for label in labels)
                elif isinstance(node, SinkDescription):
                    target = node.topic if node.topic is not None else f"extractor: {_callable(node)}"
                    flows.append((node_id, topic(target)))
                elif isinstance(node, ProcessorDescription):
                    for store in node.stores:
                        if store not in entry.stores:
                            entry.stores.append(store)
                        uses.append((node_id, _id("store", store)))
                # Kafka's description lists both directions; successors alone give each edge once.
                flows.extend((node_id, _node_id(child)) for child in node.successors)
        return cls(subtopologies, topics, flows, uses)


def diagram(description: TopologyDescription, fmt: str) -> str:
    """The diagram in ``fmt`` ("mermaid" or "dot"); ValueError names the formats otherwise."""
    if fmt == "mermaid":
        return to_mermaid(description)
    if fmt == "dot":
        return to_dot(description)
    raise ValueError(f"Unknown diagram format {fmt!r}: use one of {', '.join(FORMATS)}")


def to_mermaid(description: TopologyDescription) -> str:
    """A Mermaid flowchart (``flowchart LR``)."""
    graph = DiagramGraph.of(description)
    shapes = {"source": ('(["', '"])'), "processor": ('["', '"]'), "sink": ('(["', '"])')}
    lines = ["flowchart LR"]
    for label in graph.topics:
        lines.append(f'    {_id("topic", label)}[/"{_mermaid_text(label)}"/]')
    for sub in graph.subtopologies:
        lines.append(f'    subgraph sub_{sub.id}["Sub-topology: {sub.id}"]')
        for node_id, kind, name in sub.nodes:
            left, right = shapes[kind]
            lines.append(f"        {node_id}{left}{kind.capitalize()}: {_mermaid_text(name)}{right}")
        for store in sub.stores:
            lines.append(f'        {_id("store", store)}[("Store: {_mermaid_text(store)}")]')
        lines.append("    end")
    lines.extend(f"    {a} --> {b}" for a, b in graph.flows)
    lines.extend(f"    {a} -.- {b}" for a, b in graph.uses)
    return "\n".join(lines) + "\n"


def to_dot(description: TopologyDescription) -> str:
    """A Graphviz digraph; subtopologies are ``cluster_<id>`` subgraphs so dot draws them boxed."""
    graph = DiagramGraph.of(description)
    shapes = {"source": "invhouse", "processor": "box", "sink": "house"}
    lines = [
        "digraph topology {",
        "    rankdir=LR;",
        '    node [fontname="Helvetica", fontsize=10];',
    ]
    for label in graph.topics:
        lines.append(f'    {_id("topic", label)} [shape=parallelogram, label="{_dot_text(label)}"];')
    for sub in graph.subtopologies:
        lines.append(f"    subgraph cluster_{sub.id} {{")
        lines.append(f'        label="Sub-topology: {sub.id}";')
        for node_id, kind, name in sub.nodes:
            text = _dot_text(f"{kind.capitalize()}: {name}")
            lines.append(f'        {node_id} [shape={shapes[kind]}, label="{text}"];')
        for store in sub.stores:
            lines.append(
                f'        {_id("store", store)} [shape=cylinder, label="{_dot_text("Store: " + store)}"];'
            )
        lines.append("    }")
    lines.extend(f"    {a} -> {b};" for a, b in graph.flows)
    lines.extend(f"    {a} -> {b} [style=dashed, arrowhead=none];" for a, b in graph.uses)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _kind(node: NodeDescription) -> str:
    if isinstance(node, SourceDescription):
        return "source"
    if isinstance(node, SinkDescription):
        return "sink"
    return "processor"


def _node_id(node: NodeDescription) -> str:
    return _id("node", node.name)


def _id(prefix: str, name: str) -> str:
    # Every unsafe character becomes its code point between underscores and '_' itself is
    # doubled, so two distinct names never share an id ("a-b" and "a.b" would, with one '_').
    return f"{prefix}_" + _UNSAFE.sub(lambda m: f"_{ord(m.group()):x}_", name.replace("_", "__"))


def _callable(node: SinkDescription) -> str:
    extractor = node.topic_name_extractor
    return str(getattr(extractor, "__qualname__", None) or type(extractor).__name__)


def _mermaid_text(text: str) -> str:
    # Mermaid labels in quotes take entity codes for characters that would end them.
    return text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
