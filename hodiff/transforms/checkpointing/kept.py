"""The kept graph: a checkpoint's first graph of ``f``, kept without its values, which its
own nodes compute again (``api.run``) instead of running ``f``.

Above :mod:`.handover` (a kept graph takes what a hand-over leaves for its node, and its
recorded gradient's pass may leave one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hodiff.engine import api
from hodiff.engine.function import REGISTRY, Function
from hodiff.engine.variable import Variable
from hodiff.functions import state as _state
from hodiff.transforms.checkpointing.handover import Handed, vjp_values

__all__ = ["Kept", "Run"]

#: the bytes of a constant (a leaf ``f`` made, without need_grad) that a kept graph may hold
SMALL = 1024


class Kept:
    """The graph of ``f``'s first run, kept without its values, to compute them again by its
    nodes' own forward rules instead of running ``f`` (Python) again.

    Kept only when that provably gives the values ``f`` would: every node is a primitive
    of hodiff (a registered ``Function``) other than a random one (a node that owns a
    generator draws anew at every forward), outside ``hd.vmap``, and every leaf the graph
    reads besides the arguments either has need_grad (a parameter, held elsewhere) or is
    small (at most :data:`SMALL` bytes: a constant ``f`` made, which the kept graph holds
    and which becomes an input of the checkpoint). The node's inputs are the values it was
    run on: one changed through ``.d`` since makes the reverse pass raise before this
    runs (the engine's value check), and a static graph's ``.forward()``, which runs ``f``
    again, drops it. Between passes it holds no value but those leaves (the arguments'
    leaves are bound to the inputs' values during one pass); the plan of each set of
    wanted inputs is made once, and only the values the pass reads are computed (not,
    e.g., a residual block's final sum).
    """

    __slots__ = ("fouts", "leaves", "linked", "nodes", "outs", "plans", "start")

    def __init__(
        self,
        leaves: list[Variable],
        outs: list[Variable],
        start: int,
        fouts: list[Variable],
        linked: int,
        nodes: list[Function] | None = None,
    ) -> None:
        self.leaves, self.outs, self.start = leaves, outs, start
        #: for a recorded gradient's segment: the outputs of ``f``'s part of it, and the
        #: clock time between that part and the gradient graph
        self.fouts, self.linked = fouts, linked
        self.nodes = api.nodes_since([*outs, *fouts], start) if nodes is None else nodes
        #: per set of wanted inputs (and of outputs bound): the plan, the run, and wrt
        self.plans: dict[Any, tuple[Any, Run, list[Variable]]] = {}

    @classmethod
    def of(
        cls,
        leaves: list[Variable],
        outs: list[Variable],
        start: int,
        xs: list[Variable],
        fouts: list[Variable],
        linked: int,
        nodes: list[Function] | None = None,
    ) -> Kept | None:
        """The kept graph of one run of ``f`` (``nodes``: its nodes in creation order, when
        the caller has them), or None when it may not be kept (see above).
        """
        if any(type(x) is not Variable for x in xs):
            return None
        kept = cls(leaves, outs, start, fouts, linked, nodes)
        own = {id(v) for v in leaves}
        for f in kept.nodes:
            if type(f) not in REGISTRY or getattr(f, "rng", None) is not None:
                return None
            for x in f.inputs:
                if x.parent is None and id(x) not in own and not x.need_grad:
                    a = api.value_of(x)
                    if a is None or getattr(a, "nbytes", 0) > SMALL:
                        return None
        kept.drop()
        return kept

    def drop(self) -> None:
        """Frees the values the last computation left (not the leaves ``f`` made)."""
        for v in self.leaves:
            api.set_value(v, None)
        api.drop_values(self.nodes)

    def grads(
        self,
        xs: list[Any],
        known: Sequence[Variable],
        wanted: list[int],
        gys: list[Any],
        handed: Handed | None,
        node: Function,
        ys: Sequence[Any] = (),
    ) -> list[Any]:
        """The gradients of ``node``'s wanted inputs (``known``: its inputs) for its
        outputs' gradients ``gys``: the values the pass reads, computed on the arguments'
        values ``xs``, then a plain pass over the graph; its values dropped after. The
        frontier of a gradient's pass handed to ``node`` joins the roots. ``ys``: the
        values of ``node``'s outputs, which the node keeps: ``f``'s outputs take them
        instead of being computed again (:meth:`bind_outputs`).
        """
        wrt = [self.leaves[i] if i < len(self.leaves) else known[i] for i in wanted]
        bound = self.bind_outputs(node, ys)
        if handed is not None:
            roots = [*self.outs, *handed.locate(node, self.nodes)]
            seeds = [*gys, *handed.grads]
            bound |= handed.bind(self.nodes)  # what the gradient's pass computed: not again
            plan, run = self.plan(wrt, roots, bound)
        else:
            roots, seeds = self.outs, gys
            key = (tuple(wanted), frozenset(bound))
            entry = self.plans.get(key)
            if entry is None:
                entry = self.plans[key] = (*self.plan(wrt, roots, bound), wrt)
            plan, run, wrt = entry
        self.compute(xs, run)
        try:
            return api.grad_values(roots, wrt, seeds, plan)
        finally:
            self.drop()

    def bind_outputs(self, node: Function, ys: Sequence[Any]) -> set[int]:
        """Sets ``f``'s outputs in the kept graph to ``ys``, the values of ``node``'s
        outputs (what the kept graph computed on the same inputs, which the version check
        guards), where each is still there and was not set through ``.d`` since ``node``
        computed; returns their ids. A rule that reads an output (``tanh``'s, ``exp``'s)
        then reads it, and what only computed it is not run again: a layer
        ``tanh(affine(h))`` checkpointed alone is not recomputed at all by a plain pass.
        """
        bound: set[int] = set()
        if not ys:
            return bound
        t = api.computed_at(node)
        for o, y, v in zip(self.outs, ys, api.outputs_of(node), strict=False):
            if (
                y is None
                or v is None
                or o.parent is None  # an argument: bound to its input already
                or api.version_of(v) > t
                or getattr(y, "shape", None) != o.shape
                or getattr(y, "dtype", None) != o.dtype
            ):
                continue
            api.set_value(o, y)
            bound.add(id(o))
        return bound

    def vjp_grads(
        self,
        node: Any,
        scope: api.PassScope | None,
        xs: list[Any],
        wanted: list[int],
        gys: list[Any],
    ) -> list[Any]:
        """:meth:`grads` of a recorded gradient's node, whose pass is split in two (and may
        be partly handed over): see :func:`vjp_values`.
        """
        known = node.inputs
        entry = self.plans.get(tuple(wanted))
        if entry is None:
            wrt = [self.leaves[i] if i < len(self.leaves) else known[i] for i in wanted]
            entry = self.plans[tuple(wanted)] = (*self.plan(wrt, self.outs), wrt)
        _, run, wrt = entry
        self.compute(xs, run)
        try:
            gnodes = [f for f in self.nodes if f.seq > self.linked]
            outs, fouts = list(self.outs), self.fouts
            return vjp_values(
                node, scope, outs, fouts, wrt, wanted, gys, self.start, self.linked, gnodes
            )
        finally:
            self.drop()

    def compute(self, xs: list[Any], run: Run) -> None:
        """Binds the arguments' leaves to ``xs`` and computes the values of ``run``'s nodes,
        freeing after each the values no rule reads and no later node computes from.
        """
        for v, a in zip(self.leaves, xs, strict=True):
            api.set_value(v, a)
        try:
            with _state.replaying():  # a recomputation: f's first run updated the state
                api.run(*run)
        except BaseException:
            self.drop()
            raise

    def plan(
        self, wrt: list[Variable], roots: list[Variable], bound: set[int] | None = None
    ) -> tuple[Any, Run]:
        """The pass from ``roots`` towards ``wrt``, and the nodes whose values it reads
        (or that compute those), in creation order, with the values to free once each ran
        (computed by an earlier one only to compute a later one's). A node whose needed
        outputs are all ``bound`` (their values set already) does not run.

        It plans over the kept nodes (no walk). For a gradient's graph these include the
        nodes of ``f`` that the gradient does not pass through (a residual block's final
        sum): their rules read nothing the gradient's rules do not (a rule that reads a
        value links gradient nodes that read it), so the values computed are the same.
        """
        plan = api.plan(roots, wrt, self.nodes)
        read, go = reads_of(plan.nodes)
        run = self.to_run(read, go, bound or set())
        return plan, (run, frees_of(run, read))

    def to_run(self, read: set[Variable], go: set[Function], bound: set[int]) -> list[Function]:
        """The kept nodes, in creation order, that compute a value the pass reads (``read``;
        every output of the nodes ``go``) or that a later one computes from, and whose
        needed outputs are not all ``bound``.
        """
        needed = set(read)
        run: list[Function] = []
        for f in reversed(self.nodes):
            wants = [o for o in api.outputs_of(f) if o is not None]
            if f not in go:
                wants = [o for o in wants if o in needed]
            if wants and not all(id(o) in bound for o in wants):
                run.append(f)
                needed.update(f.inputs)
        run.reverse()
        return run


def reads_of(nodes: Sequence[Function]) -> tuple[set[Variable], set[Function]]:
    """The values the rules of ``nodes`` read, and the nodes whose rules read their own
    outputs.
    """
    read: set[Variable] = set()
    go: set[Function] = set()
    for f in nodes:
        n = f.need_inputs
        if n is True:
            read.update(f.inputs)
        elif n is not False:
            read.update([x for i, x in enumerate(f.inputs) if i in n])
        if f.need_outputs:
            go.add(f)
    return read, go


#: the nodes to compute, in order, and per node the values to free once it ran
Run = tuple[list[Function], list[list[Variable]]]


def frees_of(run: list[Function], read: set[Variable]) -> list[list[Variable]]:
    """Per node of ``run``, the values it is the last of ``run`` to read that no rule reads
    (``read``) and whose node does not keep them (``need_outputs``).
    """
    last: dict[Variable, int] = {}
    for k, f in enumerate(run):
        for x in f.inputs:
            last[x] = k
    frees: list[list[Variable]] = [[] for _ in run]
    for f in run:
        if not f.need_outputs:
            for o in api.outputs_of(f):
                if o is not None and o not in read:
                    j = last.get(o)
                    if j is not None:
                        frees[j].append(o)
    return frees
