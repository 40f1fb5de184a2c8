"""The hand-over policy: what a recorded gradient's plain pass leaves to the forward
checkpoint of the same segment, within a byte budget it owns.

Above :mod:`.replay`. :class:`Handed`: the frontier's gradients (and the values that
computed them) that a recorded gradient's segment leaves, in the pass's scope, to the
forward checkpoint of the same segment (:func:`vjp_values`). The engine's pass scope only
holds them (a dict keyed by the node that takes them, blind to what is in it); the budget
is counted here, from what the scope holds (:func:`held`) and what the pass freed.
(:mod:`.kept`, above, is the other way to compute less again.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from hodiff.engine import api
from hodiff.engine.function import Function
from hodiff.engine.variable import Variable
from hodiff.transforms.checkpointing.replay import Vjp
from hodiff.transforms.checkpointing.segment import segment_plan

__all__ = ["Handed", "held", "vjp_values"]


class Handed:
    """F's part of a recorded gradient's plain pass, left to the forward checkpoint of the
    same segment (see :func:`vjp_values`), in the pass's scope (``PassScope.handoff``,
    which drops it with the pass): the gradients of the frontier, each located by its
    node's place in the recomputed graph of ``f`` (in creation order) and its output
    index, that graph's shape (each node's type and output shapes, to check that the
    forward checkpoint's recomputation made the same graph), and the node's inputs'
    versions when the gradient recomputed it.
    """

    __slots__ = ("giver", "grads", "nbytes", "places", "shape", "values", "versions")

    def __init__(
        self,
        giver: Function,
        node: Function,
        shape: list[tuple[type, int, int]],
        places: list[tuple[int, int]],
        grads: list[Any],
        values: list[tuple[int, int, Any]] | None = None,
    ) -> None:
        self.giver = giver.name
        self.shape, self.places, self.grads = shape, places, grads
        #: the values of ``f``'s graph its rules read, as the gradient's pass computed them
        #: (see :func:`read_values`), or None
        self.values = values
        #: the bytes it holds (counted by :func:`held` while it is in the pass's scope)
        self.nbytes = sum(g.nbytes for g in grads) + sum(a.nbytes for *_, a in values or ())
        self.versions = [api.version_of(x) for x in node.inputs]

    def check(self, node: Function) -> None:
        """Raises when an input of ``node`` was set through ``.d`` since the gradient
        recomputed the segment (the frontier's gradients are of the old values).
        """
        for i, (x, v) in enumerate(zip(node.inputs, self.versions, strict=True)):
            if api.version_of(x) != v:
                kind = "a leaf" if x.parent is None else f"the output of {x.parent.name}"
                raise RuntimeError(
                    f"{node.name}: its input {i} ({kind}, shape {x.shape}, dtype {x.dtype}) "
                    f"was set through .d during the reverse pass, after {self.giver} "
                    "recomputed the segment on its old value for this node: the gradient "
                    "would mix both values; set values between reverse passes"
                )

    def locate(self, node: Function, nodes: list[Function]) -> list[Variable]:
        """The frontier's variables in ``node``'s graph of ``f`` (its ``nodes``, in creation
        order); raises when that graph is not the one the gradient recomputed.
        """
        if shape_of(nodes) != self.shape:
            raise RuntimeError(
                f"{node.name}: recomputed, f made another graph ({len(nodes)} nodes) than "
                f"when {self.giver} recomputed it ({len(self.shape)} nodes) on the same "
                "values: a checkpointed function must compute the same way every time"
            )
        found = []
        for (k, j), g in zip(self.places, self.grads, strict=True):
            v = api.outputs_of(nodes[k])[j]
            if v is None or v.shape != g.shape:  # f made another graph
                raise RuntimeError(
                    f"{node.name}: recomputed, f made another value (node {k}, "
                    f"{type(nodes[k]).__name__}) than when {self.giver} recomputed it: a "
                    "checkpointed function must compute the same way every time"
                )
            found.append(v)
        return found

    def bind(self, nodes: list[Function]) -> set[int]:
        """Sets the handed values on their variables in ``nodes`` (``node``'s graph of
        ``f``, already checked by :meth:`locate`); returns their ids.
        """
        bound: set[int] = set()
        for k, j, a in self.values or ():
            v = api.outputs_of(nodes[k])[j]
            if v is not None and v.shape == a.shape:
                api.set_value(v, a)
                bound.add(id(v))
        self.values = None
        return bound


def held(scope: api.PassScope) -> int:
    """The bytes that the hand-overs in ``scope`` hold (taken ones leave it)."""
    return sum(h.nbytes for h in scope.handoff.values() if type(h) is Handed)


def shape_of(nodes: Sequence[Function]) -> list[tuple[type, int, int]]:
    """Each node's type and numbers of inputs and outputs (what does not depend on which
    outputs are still alive).
    """
    return [(type(f), len(f.inputs), f.n_outputs) for f in nodes]


def places(
    fouts: list[Variable], fvars: list[Variable], start: int, linked: int
) -> tuple[list[tuple[type, int, int]], list[tuple[int, int]], list[Function]] | None:
    """The shape of ``f``'s graph (of ``fouts``, made after ``start`` up to ``linked``),
    the place (node, output) of each of ``fvars`` in it and its nodes (in creation order);
    None if one is not in it, or is neither an output of ``f`` nor read by a node of ``f``
    (then only the gradient graph holds it, and ``f``'s graph without it would not).
    """
    nodes = [f for f in api.nodes_since(fouts, start) if f.seq <= linked]
    index = {id(f): k for k, f in enumerate(nodes)}
    inside = {id(x) for f in nodes for x in f.inputs} | {id(o) for o in fouts}
    found = []
    for v in fvars:
        p = v.parent
        k = index.get(id(p))
        if p is None or k is None or id(v) not in inside:
            return None
        j = api.output_index(p, v)
        if j is None:
            return None
        found.append((k, j))
    return shape_of(nodes), found, nodes


def read_values(nodes: list[Function], limit: int) -> list[tuple[int, int, Any]] | None:
    """The values of ``f``'s recomputed graph (its ``nodes``, in creation order) that its
    rules read, each with its place (node, output): all of them, when every one is still
    computed and they take at most ``limit`` bytes; otherwise None.

    Handed to the forward checkpoint of the segment with the frontier's gradients, they
    spare it the recomputation: its pass then reads the very values the gradient's pass
    computed from the same inputs (the version check guards them, :meth:`Handed.check`).
    """
    index = {id(f): k for k, f in enumerate(nodes)}
    read: dict[int, Variable] = {}
    for f in nodes:
        for i, x in enumerate(f.inputs):
            if f.needs_input(i) and x.parent is not None and id(x.parent) in index:
                read[id(x)] = x
        if f.need_outputs:
            for o in api.outputs_of(f):
                if o is not None:
                    read[id(o)] = o
    out = []
    size = 0
    for v in read.values():
        a = api.value_of(v)
        if a is None:
            return None
        size += getattr(a, "nbytes", 0)
        if size > limit:
            return None
        p = v.parent
        assert p is not None
        out.append((index[id(p)], api.output_index(p, v), a))
    return out  # type: ignore[return-value]


def frontier(gnodes: Sequence[Function], start: int, linked: int) -> list[Variable]:
    """The variables made after ``start`` and up to ``linked`` (``f``'s recomputed graph)
    that ``gnodes`` (its gradient graph, in creation order) read, in first-seen order.
    """
    seen: dict[int, Variable] = {}
    for f in gnodes:
        for x in f.inputs:
            p = x.parent
            if p is not None and start < p.seq <= linked and id(x) not in seen:
                seen[id(x)] = x
    return list(seen.values())


def trim(roots: Sequence[Variable], start: int, linked: int) -> None:
    """Frees the values, in the graph of ``roots`` made after ``start`` and up to
    ``linked``, that no rule of that graph reads.
    """
    nodes = [f for f in api.nodes_since(roots, start) if f.seq <= linked]
    read = {id(x) for f in nodes for i, x in enumerate(f.inputs) if f.needs_input(i)}
    for f in nodes:
        if not f.need_outputs:
            for o in api.outputs_of(f):
                if o is not None and id(o) not in read:
                    api.set_value(o, None)


def nbytes(shape: Sequence[int], dtype: Any) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


def vjp_values(
    node: Any,
    scope: api.PassScope | None,
    outs: list[Variable],
    fouts: list[Variable],
    wrt: list[Variable],
    wanted: list[int],
    gys: list[Any],
    start: int,
    linked: int,
    gnodes: list[Function] | None = None,
) -> list[Any]:
    """The plain pass over a recorded gradient's rebuilt segment (``node``: the checkpoint
    of a :class:`Vjp`), in two parts (``gnodes``: the nodes of its gradient part, in
    creation order, when the caller has them).

    The segment is ``f``'s graph F (its nodes made after ``start``, outputs ``fouts``)
    and the gradient graph G linked on it (after ``linked``, outputs ``outs``). G's
    part of the pass leaves gradients at the leaves and at the values of F that G reads
    (the *frontier*, e.g. a ``tanh``'s output); F's part carries the frontier's
    gradients on to the leaves through F's rules.

    F's rules also run in the reverse pass of the forward checkpoint ``fwd`` of the same
    segment (``node.f.node``), on the gradient of the segment's outputs. F's rules are
    linear in the gradients they carry, so when this plain pass visits ``fwd`` (later:
    it was made first) F's part can be left to it, and ``fwd`` runs F's rules once on the
    sum, as without checkpointing (one affine backward per layer instead of two). It is
    left when the frontier's gradients take no more memory than the gradients it
    replaces (those F's part would make for ``fwd``'s inputs that G's part did not
    already give one), so the pass keeps no more than without the hand-over; otherwise
    F's part runs here. With the frontier go the values F's rules read, as this pass
    computed them (:func:`read_values`), when they fit in the memory the pass has freed
    less what its hand-overs hold (``scope.freed - held(scope)``): ``fwd`` then does not
    recompute ``f``.
    """
    assert isinstance(node.f, Vjp)
    fw = forward_wanted(node, wanted)
    if gnodes is None:
        gnodes = api.nodes_since(outs, linked)
    front = frontier(gnodes, start, linked) if fw else []
    if not front:
        return api.grad_values(outs, wrt, gys, segment_plan(outs, wrt, start))
    k = len(wrt)
    both = wrt + front
    # G's values are freed as its pass goes: nothing reads them after it
    plan = segment_plan(outs, both, linked, gnodes)
    got = api.grad_values(outs, both, gys, plan, clear_buffer=True)
    del gnodes, plan
    gs = got[:k]
    pairs = [(v, g) for v, g in zip(front, got[k:], strict=True) if g is not None]
    del outs[:], got, both, front  # nor G's graph
    if not pairs:
        return gs
    fvars, fgrads = [v for v, _ in pairs], [g for _, g in pairs]
    if hand_over(node, scope, fouts, fvars, fgrads, fw, wanted, gs, start, linked):
        return gs
    trim([*fvars], start, linked)  # before F's part: the values F's rules do not read
    del fouts
    add_f_part(gs, [wrt[j] for j in fw], fw, fvars, fgrads, start)
    return gs


def forward_wanted(node: Any, wanted: list[int]) -> list[int]:
    """The places in ``wanted`` of the inputs of ``node`` (the checkpoint of a :class:`Vjp`)
    that F's part sends to: the arguments and the externals of its forward checkpoint.
    """
    fwd = node.f.node
    n_v, n_c = len(node.positions), len(fwd.positions)
    known = node.inputs
    ids = {id(x) for x in fwd.inputs}
    return [k for k, i in enumerate(wanted) if i < n_c or (i >= n_v and id(known[i]) in ids)]


def hand_over(
    node: Any,
    scope: api.PassScope | None,
    fouts: list[Variable],
    fvars: list[Variable],
    fgrads: list[Any],
    fw: list[int],
    wanted: list[int],
    gs: list[Any],
    start: int,
    linked: int,
) -> bool:
    """Leaves F's part (the frontier ``fvars`` and its gradients ``fgrads``) to the forward
    checkpoint of the segment in ``scope``, when the pass visits it later and the frontier
    takes no more memory than the gradients it replaces (see :func:`vjp_values`); whether
    it did.
    """
    fwd = node.f.node
    if scope is None or fwd in scope.handoff or not scope.visits(fwd):
        return False
    size = sum(g.nbytes for g in fgrads)
    known = node.inputs
    budget = sum(
        nbytes(known[wanted[j]].shape, api.grad_dtype(known[wanted[j]]))
        for j in fw
        if gs[j] is None
    )
    if size > budget:
        return False
    place = places(fouts, fvars, start, linked)
    if place is None:
        return False
    # the values too, within the memory the pass has freed (the frontier replaces a
    # gradient, so nothing else grows here), when fwd computes by its kept graph (which
    # takes them; a run of f computes its own)
    values = None
    if fwd.kept is not None:
        values = read_values(place[2], scope.freed - held(scope) - size)
    scope.handoff[fwd] = Handed(node, fwd, *place[:2], fgrads, values)
    return True


def add_f_part(
    gs: list[Any],
    fwrt: list[Variable],
    fw: list[int],
    fvars: list[Variable],
    fgrads: list[Any],
    start: int,
) -> None:
    """F's part of the pass: the frontier's gradients carried on to ``fwrt`` (the wanted
    inputs at the places ``fw``) through F's rules, added to their gradients in ``gs``.
    """
    plan = segment_plan(fvars, fwrt, start)
    more = api.grad_values(fvars, fwrt, fgrads, plan, clear_buffer=True)  # nor F's
    del plan
    for j, g in zip(fw, more, strict=True):
        if g is None:
            continue
        h = gs[j]
        if h is None:
            gs[j] = g
        elif h.shape == g.shape and h.dtype == g.dtype:
            h += g  # h is this pass's own (grad_values shares it with nothing)
        else:
            gs[j] = h + g
