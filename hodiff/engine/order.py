"""Walking a graph: the nodes some variables depend on, inputs before consumers.

A node is always numbered after the nodes its inputs come from (``Function.seq``,
read from the clock), so sorting by number orders a graph. Both walks are
iterative: no recursion limit applies to graph depth.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from hodiff.engine.function import Function
from hodiff.engine.variable import Variable

__all__ = ["nodes_since", "topological_order"]

_by_seq = attrgetter("seq")


def topological_order(roots: Sequence[Variable]) -> list[Function]:
    """Every node the roots depend on, inputs before consumers (iterative DFS)."""
    stack = list(dict.fromkeys([v.parent for v in roots if v.parent is not None]))
    seen: set[Function] = set(stack)  # marked when pushed: each node is pushed once
    nodes: list[Function] = []
    append, push, mark = nodes.append, stack.append, seen.add
    while stack:
        f = stack.pop()
        append(f)
        for x in f.inputs:
            p = x.parent
            if p is not None and p not in seen:
                mark(p)
                push(p)
    nodes.sort(key=_by_seq)  # a node is always created after the parents of its inputs
    return nodes


def nodes_since(roots: Sequence[Variable], start: int) -> list[Function]:
    """The nodes made after the clock read ``start`` (``Function.seq > start``) that the
    roots depend on, inputs before consumers: the graph of one call, without walking what
    it reads from older nodes (a node reads only variables made before it, so what an older
    node depends on is older still). Its cost is that of the new nodes, however large the
    older graph. (``topological_order`` is this walk without the bound: ``nodes_since(r, 0)``
    gives the same nodes, but the bound's test on every edge would cost the plan of every
    reverse pass about 10% of its walk.)
    """
    stack: list[Function] = []
    seen: set[Function] = set()
    for v in roots:
        p = v.parent
        if p is not None and p.seq > start and p not in seen:
            seen.add(p)
            stack.append(p)
    nodes: list[Function] = []
    append, push, mark = nodes.append, stack.append, seen.add
    while stack:
        f = stack.pop()
        append(f)
        for x in f.inputs:
            p = x.parent
            if p is not None and p.seq > start and p not in seen:
                mark(p)
                push(p)
    nodes.sort(key=_by_seq)
    return nodes
