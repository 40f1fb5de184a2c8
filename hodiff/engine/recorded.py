"""``hd.grad``'s reverse passes: the recording one, its values, and pullbacks.

:func:`grad_graph` runs the backward rules on Variables while recording, so that the
gradients are a new differentiable graph (``create_graph=True``); :func:`grad_values`
runs the plain pass (:mod:`hodiff.engine.reverse`) towards the inputs and returns
values (``create_graph=False``); a :class:`Pullback` keeps a graph's plan to apply its
vjp to many seeds (``hd.hvp``, ``hd.jacobian``, ``hodiff.scipy``); :func:`plan` plans such a
pass. A plain ``.backward()`` needs none of this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hodiff.engine.checks import check_seed, check_values, values_epoch
from hodiff.engine.clock import CLOCK
from hodiff.engine.context import array_module, flag_trusted, get_default_context, swap
from hodiff.engine.function import Function, GradientShapeError, OutRef, Slot, as_array
from hodiff.engine.plan import FLAGS2, Plan, paused_collector
from hodiff.engine.reverse import (
    ACCUM,
    out_grads,
    plain_pass,
    run_general,
    zeros_of,
)
from hodiff.engine.variable import Variable

__all__ = ["Pullback", "grad_graph", "grad_values", "plan", "unused_inputs"]


def plan(
    outputs: Sequence[Variable],
    inputs: Sequence[Variable],
    order: list[Function] | None = None,
) -> Plan:
    """The reverse pass from ``outputs`` towards ``inputs`` (see ``grad_graph``); the
    collector is paused while it is made (see ``plan._Collector``).

    ``order``: the nodes to plan over, in creation order, when the caller has them: the
    nodes the outputs depend on (``topological_order``), or only those of a part of
    the graph (the pass then stops at that part's inputs). By default all of them.
    """
    with paused_collector:
        return Plan(outputs, inputs, order)


def unused_inputs(
    outputs: Sequence[Variable], inputs: Sequence[Variable], plan: Plan | None = None
) -> list[int]:
    """Indices of ``inputs`` that no output depends on (through differentiable nodes)."""
    if plan is None:
        plan = Plan(outputs, inputs)
    outs = set(outputs)
    return [i for i, x in enumerate(inputs) if x not in plan.used and x not in outs]


def _recorded_out_slots(
    f: Function, grads: dict[Variable, Any], wanted: set[Variable] | frozenset[Variable]
) -> list[Slot]:
    """The output slots of a multi-output node in the recording pass (empty if no gradient
    reached it); an output that received no gradient gets zeros.
    """
    outs, gys = out_grads(f, grads, wanted)
    if all(g is None for g in gys):
        return []
    slots = []
    for i, (o, g) in enumerate(zip(outs, gys, strict=True)):
        y = f.output_variable(i) if f.need_outputs else o
        if g is None:
            g = Variable.from_array(zeros_of(f, i))
        slots.append(Slot(y, g, g.shape))
    return slots


def _retained(f: Function, o: Variable) -> None:
    """``o`` (an output of ``f``) gets back its value, freed but retained by ``f``."""
    if f._ydata is not None:
        o._data = f._ydata[0]


def _recording_pass(
    plan: Plan, grads: dict[Variable, Any], wanted: set[Variable] | frozenset[Variable]
) -> None:
    """``hd.grad``'s reverse pass: the rules run on Variables and record the gradient graph.

    For each step of the plan, last first: take the gradient of the node's outputs out
    of ``grads`` (leaving those of ``wanted`` variables there), call ``backward_impl``
    and put the input gradients it stored into ``grads``. A node that no gradient
    reached is skipped. One- and two-input nodes reuse the pass's slots (a slot is only
    valid during the call); other nodes take :func:`run_general`.
    """
    x_slot, b_slot, y_slot = Slot(None, None, ()), Slot(None, None, ()), Slot(None, None, ())
    x_slots, y_slots, ab_slots = [x_slot], [y_slot], [x_slot, b_slot]
    outer = swap("scope", None)  # its rules record: no plain pass's scope is theirs
    try:
        for f, prop in zip(reversed(plan.nodes), reversed(plan.props), strict=True):
            refs = f._outputs
            out_slots: Sequence[Slot] = y_slots
            if type(refs) is OutRef:
                o = refs()
                gy = None if o is None else grads.get(o) if o in wanted else grads.pop(o, None)
                if gy is None:
                    continue
                if o._data is None:  # type: ignore[union-attr]
                    _retained(f, o)  # type: ignore[arg-type]
                y_slot.data, y_slot.grad, y_slot.shape = o, gy, o._shape  # type: ignore[union-attr]
            else:
                out_slots = _recorded_out_slots(f, grads, wanted)
                if not out_slots:
                    continue
            inputs = f.inputs
            n = len(inputs)
            if n == 1:
                x = inputs[0]
                g = grads.get(x)
                x_slot.data, x_slot.grad, x_slot.shape = x, g, x._shape
                f.backward_impl(x_slots, out_slots, prop, ACCUM[g is not None])
                if x_slot.grad is not None:
                    grads[x] = x_slot.grad
            elif n == 2 and inputs[0] is not inputs[1]:
                a, b = inputs
                ga, gb = grads.get(a), grads.get(b)
                x_slot.data, x_slot.grad, x_slot.shape = a, ga, a._shape
                b_slot.data, b_slot.grad, b_slot.shape = b, gb, b._shape
                f.backward_impl(ab_slots, out_slots, prop, FLAGS2[ga is not None][gb is not None])
                if x_slot.grad is not None:
                    grads[a] = x_slot.grad
                if b_slot.grad is not None:
                    grads[b] = b_slot.grad
            else:
                run_general(f, prop, out_slots, grads, True)
            x_slot.data = x_slot.grad = b_slot.data = b_slot.grad = y_slot.data = y_slot.grad = None
    except GradientShapeError as e:
        raise GradientShapeError(f"{f.name}: backward_impl: {e}") from None
    finally:
        swap("scope", outer)


def grad_graph(
    outputs: Sequence[Variable],
    inputs: Sequence[Variable],
    seeds: Sequence[Variable],
    plan: Plan | None = None,
) -> list[Variable | None]:
    """Recording reverse pass: the gradient of each input as a differentiable Variable.

    Returns None for an input that no output depends on.
    """
    if plan is None:
        plan = Plan(outputs, inputs)
    wanted = set(inputs)
    grads: dict[Variable, Variable] = {}
    for o, s in zip(outputs, seeds, strict=True):
        grads[o] = grads[o] + s if o in grads else s
    token = flag_trusted.set(True)
    try:
        with paused_collector:
            _recording_pass(plan, grads, wanted)
    finally:
        flag_trusted.reset(token)
    return [grads.get(x) for x in inputs]


def grad_values(
    outputs: Sequence[Variable],
    inputs: Sequence[Variable],
    seeds: Sequence[Any],
    plan: Plan,
    clear_buffer: bool = False,
) -> list[Any]:
    """Plain (array) reverse pass: what :func:`grad_graph` computes, as arrays, recording
    nothing (None for an input no output depends on). A result shares memory with no seed,
    no other result and no array it is a view of. With ``clear_buffer`` the values of the
    plan's nodes are freed as the pass goes (as ``.backward(clear_buffer=True)``), for a
    graph that nothing reads after it.
    """
    grads: dict[Variable, Any] = {}
    for o, s in zip(outputs, seeds, strict=True):
        s = as_array(s)
        grads[o] = grads[o] + s if o in grads else s
    if clear_buffer:
        CLOCK.freed()  # a later pass over these nodes checks their values again
    with paused_collector:
        for _ in plain_pass(plan, grads, set(inputs), {}, clear_buffer=clear_buffer):
            pass  # a plan towards inputs has no leaves to commit: nothing is yielded
    out: list[Any] = []
    for x in inputs:
        g = grads.get(x)
        if g is not None:
            g = _own(g, x._grad_dtype(), [*seeds, *out])
        out.append(g)
    return out


def _own(g: Any, dtype: Any, others: list[Any]) -> Any:
    """``g`` in ``dtype`` (an input's gradient has its dtype, as in backward), sharing memory
    with none of ``others`` and with no array it is a view of (copied if it would).
    """
    if g.dtype != dtype:
        return g.astype(dtype)
    if g.base is not None or any(g is s for s in others):
        return g.copy()
    return g


class Pullback:
    """``seeds -> sum_k (d roots[k] / d wrt)^T seeds[k]`` by plain (array) reverse passes.

    The plan is made once, so one graph serves many seeds: the rows of a
    Jacobian or Hessian, the products of a Hessian operator. Nothing is
    recorded and no ``.g`` is touched. The returned arrays share memory with
    nothing else: a result that is a seed, or a view, is copied.
    """

    def __init__(self, roots: Sequence[Variable], wrt: Sequence[Variable]) -> None:
        self.roots = list(roots)
        self.wrt = list(wrt)
        self.plan = Plan(self.roots, self.wrt)
        self._checked: Any = None  # the values' epoch when the plan was last checked
        self._spent = False  # a pass freed the graph's values (clear_buffer)
        self._reshapes = CLOCK.reshapes  # the count of shape resets when made

    def __call__(self, seeds: Sequence[Any], clear_buffer: bool = False) -> list[Any]:
        """One reverse pass; a seed of None means ones.

        ``clear_buffer``: the last pass, which frees the values of the nodes it visits as it
        goes (as ``.backward(clear_buffer=True)``): for a graph that only this pullback reads
        (the transforms' own, made from fresh leaves); a later call raises RuntimeError.
        """
        if self._spent:
            raise RuntimeError(
                "pullback: called again after a pass with clear_buffer=True freed the graph's "
                "values; make a new graph (or pass clear_buffer=False to every pass but the last)"
            )
        if self._checked != values_epoch():
            try:
                check_values(self.plan, "pullback")
            except RuntimeError as e:
                if self._reshapes == CLOCK.reshapes:
                    raise
                raise RuntimeError(
                    "pullback: a variable of its graph was given a new shape (reset_shape) "
                    "after this pullback was made, and a pullback keeps the graph it was made "
                    f"on: make it again on the graph run for the new shapes ({e})"
                ) from None
            self._checked = values_epoch()
        seeds = [check_seed(r, s, "pullback") for r, s in zip(self.roots, seeds, strict=True)]
        self._spent = clear_buffer
        out = grad_values(self.roots, self.wrt, seeds, self.plan, clear_buffer)
        for i, (x, g) in enumerate(zip(self.wrt, out, strict=True)):
            if g is None:
                xp = array_module(x._data) if x._data is not None else get_default_context().xp
                out[i] = xp.zeros(x.shape, dtype=x._grad_dtype())
        return out
