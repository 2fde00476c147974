"""Graph algorithms the schema analyses share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ("strongly_connected_components",)


def strongly_connected_components(
    roots: Sequence[int],
    edges: Sequence[Sequence[Any]],
    within: Sequence[int] | None = None,
) -> list[int]:
    """Strongly connected components (Tarjan, iterative): node -> component id.

    Nodes are ``0 .. len(edges) - 1``; ``edges[node]`` lists the node's
    edges, each a tuple leading to its first item. Components are numbered in
    the order Tarjan finishes them, so a component's id is lower than that of
    every component leading to it (sinks first). With ``within`` (components
    of a coarser graph), an edge leaving one of those is not followed. A node
    not reached from ``roots`` gets -1.
    """
    size = len(edges)
    number = [-1] * size
    low = [0] * size
    component = [-1] * size
    on_stack = [False] * size
    stack: list[int] = []
    count = 0
    finished = 0
    for root in roots:
        if number[root] >= 0:
            continue
        number[root] = low[root] = count
        count += 1
        stack.append(root)
        on_stack[root] = True
        work = [(root, iter(edges[root]))]
        while work:
            node, children = work[-1]
            for edge in children:
                child = edge[0]
                if within is not None and within[child] != within[node]:
                    continue
                if number[child] < 0 and not edges[child]:
                    # A leaf: a component of its own, finished at once.
                    number[child] = low[child] = count
                    count += 1
                    component[child] = finished
                    finished += 1
                    continue
                if number[child] < 0:
                    number[child] = low[child] = count
                    count += 1
                    stack.append(child)
                    on_stack[child] = True
                    work.append((child, iter(edges[child])))
                    break
                if on_stack[child] and number[child] < low[node]:
                    low[node] = number[child]
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    if low[node] < low[parent]:
                        low[parent] = low[node]
                if low[node] == number[node]:
                    while True:
                        member = stack.pop()
                        on_stack[member] = False
                        component[member] = finished
                        if member == node:
                            break
                    finished += 1
    return component
