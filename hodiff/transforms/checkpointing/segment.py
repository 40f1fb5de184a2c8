"""A checkpoint's segment: the graph one run of ``f`` makes, walked and checked.

The bottom of the package (see ``__init__``): walks over a recomputed segment (what it
reaches of the enclosing graph, its reverse pass bounded to its own nodes) and the checks
that a recomputation made the same segment as the first run. It reads a checkpoint node
(``name``, ``positions``, ``inputs``) but imports none of the modules above it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

from hodiff.engine import api
from hodiff.engine import random as _random
from hodiff.engine.arguments import array_module_of
from hodiff.engine.function import Function
from hodiff.engine.variable import Variable
from hodiff.functions import state as _state

__all__ = [
    "Spec",
    "alive",
    "as_outputs",
    "as_variable",
    "check_same_externals",
    "describe",
    "grad",
    "reached",
    "run_in",
    "run_needed",
    "segment_plan",
]

#: an output's ``(shape, dtype)``
Spec = tuple[tuple[int, ...], Any]


def as_outputs(name: str, out: Any) -> tuple[type | None, list[Variable]]:
    """``f``'s result as a list of Variables, and its container type (None: one Variable)."""
    if isinstance(out, Variable):
        return None, [out]
    if isinstance(out, tuple | list):
        if not out:
            raise ValueError(f"{name}: f returned an empty {type(out).__name__}")
        for k, o in enumerate(out):
            if not isinstance(o, Variable):
                raise TypeError(
                    f"{name}: output {k} of f is a {type(o).__name__}, not a hodiff.Variable"
                )
        return (list if isinstance(out, list) else tuple), list(out)
    raise TypeError(
        f"{name}: f must return a Variable or a tuple/list of Variables, got {type(out).__name__}"
    )


def reached(
    outs: Sequence[Variable],
    leaves: Sequence[Variable],
    start: int,
    made: list[Function] | None = None,
) -> list[Any]:
    """What the graph of ``outs`` reaches that it did not make from ``leaves``.

    The walk stops at the ``leaves`` (skipped), at other leaves and at variables made by
    nodes older than ``start`` (the enclosing graph). Returns the variables made by old
    nodes (alive: the enclosing graph holds them) and weak references to the leaves (a
    leaf only the segment's graph held dies with it; see :func:`alive`), in first-seen
    order; appends to ``made`` the nodes it went through (those made since ``start``).
    """
    fresh = {id(v) for v in leaves}
    found: dict[int, Any] = {}
    seen: set[int] = set()
    stack = list(reversed(outs))
    while stack:
        v = stack.pop()
        k = id(v)
        if k in fresh or k in found:
            continue
        p = v.parent
        if p is None:
            found[k] = weakref.ref(v)
        elif p.seq < start:
            found[k] = v
        elif id(p) not in seen:
            seen.add(id(p))
            if made is not None:
                made.append(p)
            stack.extend(reversed(p.inputs))
    return list(found.values())


def alive(found: list[Any]) -> list[Variable]:
    """The variables of :func:`reached`'s result that are still alive."""
    out = []
    for r in found:
        v = r() if isinstance(r, weakref.ref) else r
        if v is not None:
            out.append(v)
    return out


def check_same_externals(node: Any, used: Sequence[Variable]) -> None:
    """Raises when a recomputation used a variable (alive after it) the first run did not."""
    n = len(node.positions)
    known = {id(v) for v in node.inputs}
    for v in used:
        if id(v) not in known and (v.need_grad or v.parent is not None):
            kind = "a leaf" if v.parent is None else f"the output of {v.parent.name}"
            raise RuntimeError(
                f"{node.name}: recomputed, f used a variable its first run did not ({kind}, "
                f"shape {v.shape}, dtype {v.dtype}), so its gradient would be missing; a "
                f"checkpointed function must use the same variables every time (it has {n} "
                "argument(s); pass the variable as one)"
            )


def describe(specs: Sequence[tuple[Any, Any]]) -> str:
    return ", ".join(f"{tuple(s)} {d}" for s, d in specs) or "nothing"


def as_variable(c: Any) -> Variable:
    """A coefficient as a Variable (an array one is a constant: it depends on nothing)."""
    return c if isinstance(c, Variable) else Variable.from_array(c)


def segment_plan(
    outs: Sequence[Variable],
    wrt: Sequence[Variable],
    start: int,
    nodes: list[Function] | None = None,
) -> Any:
    """The reverse pass from a recomputed segment's ``outs`` to ``wrt`` through the nodes the
    recomputation made (numbered after ``start``; ``nodes``, when the caller has them) only.

    So the gradient with respect to an external that is a value of the enclosing graph is
    the segment's partial derivative: when ``f`` uses two such values, one computed from the
    other, the enclosing graph's own pass carries the gradient between them (through the
    whole graph it would be counted twice). The enclosing graph is not walked: a visit
    costs what the segment's nodes do, however large the graph around it.
    """
    if nodes is None:
        nodes = api.nodes_since(outs, start)
    return api.plan(list(outs), list(wrt), nodes)


def grad(
    outs: list[Variable], wrt: list[Variable], gys: list[Variable], start: int
) -> list[Variable]:
    """``hd.grad(outs, wrt, gys, allow_unused=True)`` through the segment's nodes only."""
    gs = api.grad_graph(outs, wrt, gys, segment_plan(outs, wrt, start))
    out = []
    for x, g in zip(wrt, gs, strict=True):
        if g is None:  # not used by the outputs: zeros
            zeros = array_module_of(x).zeros(x.shape, dtype=api.grad_dtype(x))
            g = Variable.from_array(zeros)
        out.append(g)
    return out


def run_needed(outs: Sequence[Variable], start: int) -> None:
    """Computes the values, in the graph of ``outs``, of the nodes linked (in static mode,
    without computing) since ``start`` that a reverse pass or another of them reads.

    A value is needed when a rule reads it (``need_inputs`` of its consumers,
    ``need_outputs`` of its producer) or a needed node computes from it; the others (the
    gradient's result itself, a sum only added to it) are never computed.
    """
    nodes = api.nodes_since(outs, start)
    needed: set[int] = set()
    run = []
    for f in reversed(nodes):
        go = f.need_outputs
        if not go:
            for o in api.outputs_of(f):
                if o is not None and id(o) in needed:
                    go = True
                    break
        if go:
            run.append(f)
        for i, x in enumerate(f.inputs):
            if go or (f.differentiable and f.needs_input(i)):
                needed.add(id(x))
    run.reverse()
    api.run(run)


def run_in(
    f: Callable[..., Any], call: list[Any], modes: int, tapes: Any, replaying: bool = False
) -> Any:
    """``f(*call)`` with the modes ``modes`` and the random tapes ``tapes`` (in a copied
    context, where the checkpoint was made); with ``replaying``, as a recomputation that
    updates no state (:mod:`hodiff.functions.state`).
    """
    _random.restore(tapes)
    if replaying:
        with api.in_modes(modes), _state.replaying():
            return f(*call)
    with api.in_modes(modes):
        return f(*call)
