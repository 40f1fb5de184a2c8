"""Walking a linked graph: its nodes in order, the leaves' names, a node's static arguments."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from hodiff.engine import api
from hodiff.engine.function import Function
from hodiff.engine.variable import Variable
from hodiff.training.parameter import get_parameters

__all__ = ["as_list", "graph_nodes", "output_index", "parameter_names", "static_arguments"]


def as_list(outputs: Variable | Sequence[Variable], what: str, caller: str) -> list[Variable]:
    items = [outputs] if isinstance(outputs, Variable) else list(outputs)
    for i, v in enumerate(items):
        if not isinstance(v, Variable):
            raise TypeError(f"{caller}: {what}[{i}] must be a Variable, got {type(v).__name__}")
    return items


def graph_nodes(outputs: Sequence[Variable], stop: Iterable[Variable] = ()) -> list[Function]:
    """Every node the outputs depend on, not looking past ``stop``; inputs before consumers."""
    cut = {id(v) for v in stop}
    seen: set[int] = set()
    nodes: list[Function] = []
    stack = [v.parent for v in outputs if v.parent is not None and id(v) not in cut]
    while stack:
        f = stack.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        nodes.append(f)
        for x in f.inputs:
            if x.parent is not None and id(x) not in cut and id(x.parent) not in seen:
                stack.append(x.parent)
    nodes.sort(key=lambda f: f.seq)  # a node is created after the nodes its inputs come from
    return nodes


def output_index(node: Function, v: Variable) -> int:
    j = api.output_index(node, v)
    if j is not None:
        return j
    raise RuntimeError(f"{node.name}: a Variable whose parent does not list it as an output")


def parameter_names() -> dict[int, str]:
    """id -> name of the parameters of ``hd.get_parameters`` (all of them, any ``need_grad``)."""
    return {id(v): name for name, v in get_parameters(grad_only=False).items()}


def static_arguments(node: Function) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return node.static_arguments or ((), {})
