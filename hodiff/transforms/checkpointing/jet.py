"""The Taylor rule of a checkpoint: the jet of a checkpoint is the checkpoint of the jet.

Above :mod:`.kept`. ``f`` is recomputed on the primal values (replaying the node's random
draws) and the jet pushed through the recomputed graph, whose nodes take their own rules
(a nested checkpoint this one).

* In a plain pass (``jp.record`` False: ``create_graph=False``, ``hd.jvp``) on arrays
  (:func:`jet_values`): the segment's graph is rebuilt, the jet pushed through it in raw
  mode, and the graph dropped (only its coefficients are returned).
* While the pass records (``create_graph=True``), the output coefficients are the outputs
  of a new checkpoint, of ``(primals, input coefficients) -> (outputs, output
  coefficients)`` (:class:`Jet`): the segment's Taylor graph is recorded, its outputs kept
  and the graph dropped; a reverse pass through it (a PINN's step) recomputes one
  segment's Taylor graph at a time. Its outputs' values are read by the later rules in
  place of the node's (``jp.alias``, :meth:`Jet.coefficients`), and so are those of the
  nodes after it (each linked again to the aliases by the pass), so the recorded graph of
  a network of checkpoints is a chain of these checkpoints only (the values' own
  checkpoints are not in it, and its reverse pass does not run them), keeping per segment
  its outputs and their coefficients.
"""

from __future__ import annotations

import copy
from typing import Any

from hodiff.engine import api
from hodiff.engine.arguments import array_module_of
from hodiff.engine.variable import Variable
from hodiff.transforms import taylor as _taylor
from hodiff.transforms.checkpointing.replay import replay
from hodiff.transforms.checkpointing.segment import (
    alive,
    as_variable,
    check_same_externals,
    reached,
)

__all__ = ["Jet", "jet_values"]


def jet_values(node: Any, jp: _taylor.JetPass, ins: list[Any]) -> list[Any]:
    """The coefficients of ``node``'s outputs, per output ``[y_1, ..., y_K]`` (None: zero),
    from its inputs' (``ins``, per input: the Variable arguments, then the externals), in
    a plain pass: the segment rebuilt, the jet pushed through it in raw mode, the graph
    dropped.
    """
    n = len(node.positions)
    with api.define_by_run():  # and recording, to rebuild the segment's graph
        leaves = [
            Variable.from_array(api.value_of(x), need_grad=x.need_grad, copy=False)
            for x in node.inputs[:n]
        ]
        start = api.clock()
        ys = replay(node, leaves)
        primals = [*leaves, *node.inputs[n:]]
        got = _taylor.push(tuple(ys), start, primals, ins, jp.kk, jp.collapsed)
        extra = reached(ys, leaves, start)
        del ys, leaves, primals
    check_same_externals(node, alive(extra))
    return got


class Jet:
    """``(args, coefficients) -> (outputs, output coefficients)`` of a checkpoint node.

    What the node's recorded jet computes, as a function that ``checkpoint`` can
    recompute: ``f`` again on the arguments (replaying the node's random draws), then the
    jet of order ``order`` (``collapsed`` or not) pushed through its graph, recorded
    (``hodiff.transforms.taylor.push``). Its arguments are the node's Variable arguments,
    then the coefficients given (``given``: per input of the node, the orders whose
    coefficient is an argument, in that order; a coefficient may be an array, a constant
    of the segment). Its externals are the node's (an external's coefficients are
    arguments). It returns ``f``'s outputs (recomputed: the values of the node's), then
    the output coefficients that are not zero, in order (:attr:`made`: per output, their
    orders).
    """

    def __init__(self, node: Any, jp: _taylor.JetPass, ins: list[Any]) -> None:
        n = len(node.positions)
        # node without its inputs: it recomputes f, and the jet's arguments replace its
        # Variable arguments (the values' chain, which the jets' outputs replace: not kept)
        self.node = copy.copy(node)
        self.node.inputs = []
        self.node.kept = None
        self.externals = list(node.inputs[n:])
        self.order, self.collapsed = jp.kk, jp.collapsed
        self.given = [
            [] if s is None else [k for k, c in enumerate(s, 1) if c is not None] for s in ins
        ]
        #: the arguments of the first call: the primals as the pass reads them, then the
        #: coefficients given
        self.args = [
            *[jp.val(x) for x in node.inputs[:n]],
            *[c for s in ins if s is not None for c in s if c is not None],
        ]
        #: per output of the node, the orders of the coefficients returned (first call)
        self.made: list[list[int]] | None = None
        self.__name__ = f"jet_of_{node.name}"

    def __call__(self, *args: Any) -> tuple[Variable, ...]:
        node = self.node
        n = len(node.positions)
        leaves = list(args[:n])
        rest = iter(args[n:])
        series: list[Any] = []
        for orders in self.given:
            s: list[Any] | None = None
            if orders:
                s = [None] * self.order
                for k in orders:
                    s[k - 1] = next(rest)
            series.append(s)
        start = api.clock()
        outs = replay(node, leaves)
        primals = [*leaves, *self.externals]
        got = _taylor.push(tuple(outs), start, primals, series, self.order, self.collapsed, True)
        made = [[k for k, c in enumerate(s, 1) if c is not None] for s in got]
        if self.made is None:
            self.made = made
        elif made != self.made:
            raise RuntimeError(
                f"{self.__name__}: recomputed, the jet has non-zero coefficients of orders "
                f"{made} where its first run had {self.made}: a checkpointed function must "
                "compute the same way every time"
            )
        return (*outs, *[as_variable(c) for s in got for c in s if c is not None])

    def coefficients(
        self, jp: _taylor.JetPass, ys: tuple[Variable, ...], outs: list[Any]
    ) -> list[Any]:
        """Per output of the node (``outs``), its coefficients ``[y_1, ..., y_K]`` (None:
        zero) from the outputs ``ys`` of this jet's checkpoint, whose values the later
        rules read in place of the node's (``jp.alias``).
        """
        for o, y in zip(outs, ys, strict=False):
            if o is not None:
                jp.alias[o] = y
                share(y, o)
        flat = iter(ys[len(outs) :])
        assert self.made is not None  # set by the first call
        out = []
        for orders in self.made:
            s: list[Any] = [None] * self.order
            for k in orders:
                s[k - 1] = next(flat)
            out.append(s)
        return out


def share(y: Variable, o: Variable) -> None:
    """Makes ``y`` hold ``o``'s array when they hold equal ones (a value computed again),
    so that the two are not in memory together while both are alive.
    """
    a, b = api.value_of(y), api.value_of(o)
    if a is not None and b is not None and a is not b and type(a) is type(b):
        xp = array_module_of(a)
        if a.shape == b.shape and a.dtype == b.dtype and bool(xp.array_equal(a, b)):
            api.set_value(y, b)
