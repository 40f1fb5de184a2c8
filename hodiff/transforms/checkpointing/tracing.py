"""Tracing: ``f``'s first run, which tells a checkpoint its outputs and its externals.

Above :mod:`.jet`; below only :mod:`.node`. ``f`` runs once on fresh leaves sharing the
arguments' values; its graph is walked to learn what it reached of the enclosing graph
(the node's externals), and is then dropped, or kept without its values when it can
compute them again (:class:`.kept.Kept`).
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from hodiff.engine import api
from hodiff.engine.function import Function
from hodiff.engine.variable import Variable
from hodiff.transforms.checkpointing.kept import Kept
from hodiff.transforms.checkpointing.replay import Vjp, call_f
from hodiff.transforms.checkpointing.segment import Spec, alive, as_outputs, reached
from hodiff.transforms.vectorize import BatchedVariable

__all__ = ["trace"]


def trace(
    node: Any, xs: list[Variable]
) -> tuple[type | None, list[Spec], list[Any] | None, list[Variable], Kept | None]:
    """Runs ``node.f`` once on fresh leaves sharing the arguments' values.

    Returns the container type of its result (None for one Variable), the outputs' specs,
    their values (None in a static graph, where only shapes are known) and the externals:
    the variables ``f``'s graph reached that are not the fresh leaves and were made before
    ``f`` ran, or that outlive its graph (a leaf ``f`` made and dropped, a constant, is
    made again by the next run). The graph is dropped when this returns, or kept without
    its values when it can compute them again (:class:`Kept`).
    """
    leaves = [x.unlinked() for x in xs]
    start = api.clock()
    vjp = node.f if isinstance(node.f, Vjp) else None
    kind, outs, traced = traced_call(node, leaves, vjp)
    specs = specs_of(node, outs)
    values = [api.value_of(o) for o in outs]
    if any(a is None for a in values):
        values = None  # type: ignore[assignment]
    made: list[Function] = []  # f's graph: the nodes the walk goes through
    found = reached(outs, leaves, start, made)
    kept = None
    if values is not None and (vjp is None or traced):
        made.sort(key=attrgetter("seq"))
        fouts, linked = traced or ([], -1)
        kept = Kept.of(leaves, outs, start, xs, fouts, linked, None if vjp else made)
        del fouts
    del outs, leaves, made, traced  # they would keep f's graph alive
    externals = alive(found)
    check_externals(node, externals, xs)
    return kind, specs, values, externals, kept


def traced_call(
    node: Any, leaves: list[Variable], vjp: Vjp | None
) -> tuple[type | None, list[Variable], Any]:
    """``node.f`` run on ``leaves``: the container type of its result, its outputs, and,
    for a recorded gradient (``vjp``), what its run traced (``Vjp.traced``).
    """
    if vjp is not None:
        vjp.traced = []
    try:
        kind, outs = as_outputs(node.name, call_f(node, leaves))
        traced = vjp.traced if vjp is not None else None
    finally:
        if vjp is not None:
            vjp.traced = None
    return kind, outs, traced


def specs_of(node: Any, outs: list[Variable]) -> list[Spec]:
    """Each output's shape and dtype; raises TypeError for one that is not float."""
    specs: list[Spec] = []
    for k, o in enumerate(outs):
        if o.dtype.kind not in "fc":
            raise TypeError(
                f"{node.name}: output {k} of f has dtype {o.dtype} (shape {o.shape}); a "
                "checkpointed function returns float or complex Variables (compute integer results "
                "outside it)"
            )
        specs.append((o.shape, o.dtype))
    return specs


def check_externals(node: Any, externals: list[Any], xs: list[Variable]) -> None:
    """Raises NotImplementedError for a mapped variable (``hd.vmap``) that ``f`` reached
    without being given it.
    """
    for v in externals:
        if type(v) is BatchedVariable and not any(v is x for x in xs):
            raise NotImplementedError(
                f"{node.name}: inside hd.vmap, f uses a mapped variable it was not given "
                f"(shape {v.shape}, dtype {v.dtype}); pass it to hd.checkpoint as an argument"
            )
