"""Subtopologies: the connected groups of a topology's nodes, numbered as Kafka numbers them.

Two nodes are in one subtopology when one is the parent of the other, or when both are processors
connected to one state store (a store lives in exactly one task). Groups are numbered in the order
their first node was added to the topology (Kafka's ``InternalTopologyBuilder.makeNodeGroups``): the
DSL adds nodes upstream first, so upstream subtopologies get the lower numbers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

__all__ = ["node_groups"]

logger = logging.getLogger(__name__)


def node_groups(
    nodes: Mapping[str, Iterable[str]], store_users: Mapping[str, Iterable[str]]
) -> dict[int, list[str]]:
    """Subtopology id -> node names (in the order they were added).

    ``nodes`` maps every node name, in insertion order, to its predecessors' names;
    ``store_users`` maps every store to the processors connected to it.
    """
    parent: dict[str, str] = {name: name for name in nodes}

    def root(name: str) -> str:
        while parent[name] != name:
            # path halving keeps the trees flat
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    def unite(a: str, b: str) -> None:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[rb] = ra

    for name, predecessors in nodes.items():
        for predecessor in predecessors:
            unite(predecessor, name)
    for users in store_users.values():
        users = list(users)
        for user in users[1:]:
            unite(users[0], user)

    groups: dict[int, list[str]] = {}
    group_of_root: dict[str, int] = {}
    for name in nodes:
        r = root(name)
        group_id = group_of_root.get(r)
        if group_id is None:
            group_id = group_of_root[r] = len(groups)
            groups[group_id] = []
        groups[group_id].append(name)
    return groups
