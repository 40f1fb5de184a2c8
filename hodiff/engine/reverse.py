"""The plain reverse pass on arrays (``.backward()``), and what the recording one shares.

One pass serves both ways of differentiating (see ``function.py``): the plain pass
(:func:`backward`, :func:`grad_values`) runs the rules on bare arrays and accumulates
into the leaves' ``.g`` (the fast path); the recording pass (:func:`grad_graph`) runs
the same rules on Variables, so that the gradients are a new differentiable graph.
Each visits the steps of a :class:`~hodiff.engine.plan.Plan`, last first, and decides
``accum`` per input as it goes: whether the input already received a gradient during
this pass (the rule then adds; otherwise it writes, and nothing is zero-filled first).
Everything is iterative: no recursion limit applies to graph depth.
"""

from __future__ import annotations

import contextvars
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from hodiff.engine import variable as _variable
from hodiff.engine.arguments import array_module_of
from hodiff.engine.checks import check_seed
from hodiff.engine.clock import CLOCK
from hodiff.engine.context import flag_raw
from hodiff.engine.function import Function, GradientShapeError, OutRef, Slot, as_array
from hodiff.engine.plan import FLAGS2, Plan, paused_collector, plain_plan
from hodiff.engine.variable import FREED, Variable, no_value

__all__ = ["PassScope", "backward", "backward_steps", "current_pass"]

_ref = weakref.ref
ACCUM = ((False,), (True,))  # accum of a one-input step, by "already has a gradient"
_NOTHING: frozenset[Variable] = frozenset()


def backward(
    root: Variable, grad: Any = None, clear_buffer: bool = False, retain_grad: bool = False
) -> None:
    """Plain reverse pass from ``root`` (see :meth:`Variable.backward`): runs it to the end.

    The collector is paused while it runs, as in :func:`grad_graph` (``iter_grads``, which
    hands control back to the caller between gradients, is not paused).
    """
    with paused_collector:
        for _ in backward_steps(root, grad, clear_buffer, retain_grad):
            pass


def backward_steps(
    root: Variable, grad: Any = None, clear_buffer: bool = False, retain_grad: bool = False
) -> Iterator[Variable]:
    """The plain reverse pass from ``root`` as a generator: it runs only while iterated.

    Rules run on bare arrays and nothing is recorded. Accumulates into ``.g``
    of every leaf with need_grad. An intermediate variable's gradient is freed
    once the node that made the variable has consumed it; with ``retain_grad``
    it is stored in the variable's ``.g`` instead (overwritten per pass). Yields
    each leaf as soon as its gradient is final (all its consumers have run),
    for ``iter_grads``; :func:`backward` is the pass run to the end.
    """
    if root.parent is None and not root.need_grad:
        raise RuntimeError(
            f"backward: this Variable (shape {root.shape}) has no graph and need_grad=False, so "
            "nothing can be differentiated (was it computed under hd.no_grad()?)"
        )
    if root._data is None and root.parent is not None:
        raise RuntimeError(f"backward: {no_value(root)}")
    seed = check_seed(root, grad, "backward")
    plan = plain_plan(root)
    grads: dict[Variable, Any] = {root: seed}
    # arrays that may be shared (seeds, every gy handed to a rule, every array stored in a
    # leaf), by id, each with a weak reference that tells a live one from a dead one whose id
    # a new array took over: a leaf never takes a shared array over (see _commit)
    handed: dict[int, Any] = {}
    _hand(handed, seed)
    if root.parent is None:
        _commit(root, seed, handed)
        yield root
        return
    root._grad = seed if retain_grad else FREED
    if clear_buffer:
        CLOCK.freed()
    yield from plain_pass(plan, grads, _NOTHING, handed, root, retain_grad, clear_buffer)


def plain_pass(
    plan: Plan,
    grads: dict[Variable, Any],
    wanted: set[Variable] | frozenset[Variable],
    handed: dict[int, Any],
    root: Variable | None = None,
    keep: bool | None = None,
    clear_buffer: bool = False,
) -> Iterator[Variable]:
    """The plain reverse pass: the rules run on bare arrays (raw mode), recording nothing.

    The steps are those of :func:`_recording_pass`, on arrays. Besides: an output's
    gradient goes into its ``.g`` with ``keep`` (retain_grad), its ``.g`` is marked
    freed with ``keep=False`` and left alone with None; every gradient handed to a rule
    is noted in ``handed`` (a leaf never takes such an array over, see :func:`_commit`);
    a gradient numpy made a scalar (a 0-d result) becomes a 0-d array; with
    ``clear_buffer`` values are freed once used; the plan's leaves are committed into
    ``.g`` and yielded as soon as final (for ``iter_grads``). Its rules see its
    :class:`PassScope` (:func:`current_pass`); a node with an entry in the scope's handoff
    runs even when no gradient reached it. The loop is one frame on purpose: a call per
    node costs about 8% of the pass (bench/overhead.py).
    """
    leaf_uses = dict(plan.leaf_uses)  # counted down during the pass; the plan may be reused
    x_slot, b_slot, y_slot = Slot(None, None, ()), Slot(None, None, ()), Slot(None, None, ())
    x_slots, y_slots, ab_slots = [x_slot], [y_slot], [x_slot, b_slot]
    nd, freed = np.ndarray, FREED  # locals: read once per node
    mark = keep is not None
    scope = PassScope(plan)
    handoff = scope.handoff  # filled by rules during the pass (empty: falsy, one test)
    token: Any = flag_raw.set(True)
    stoken: Any = PASS_SCOPE.set(scope)
    try:
        # zip reuses its tuple: nothing is allocated per step
        for f, prop, leaves in zip(
            reversed(plan.nodes), reversed(plan.props), reversed(plan.sends), strict=True
        ):
            refs = f._outputs
            out_slots: Sequence[Slot] = y_slots
            if type(refs) is OutRef:
                o = refs()
                gy = grads.get(o) if o in wanted else grads.pop(o, None)  # type: ignore[arg-type]
                if gy is None:  # zeros if work was left for f, else None: f is skipped
                    gy = _left_for(f, o, handoff, keep)
                elif mark:
                    o._grad = gy if keep else freed  # type: ignore[union-attr]
                if gy is not None:
                    handed[id(gy)] = _ref(gy) if type(gy) is nd else _weakly(gy)  # see _commit
                    ydata = f._ydata
                    y_slot.data = getattr(o, "_data", None) if ydata is None else ydata[0]
                    y_slot.grad, y_slot.shape = gy, gy.shape
                else:
                    out_slots = ()
            else:
                out_slots = _out_slots(f, grads, wanted, keep, handed, f in handoff)
            if not out_slots:  # no gradient reached f: its leaves are counted all the same
                yield from _skipped(f, leaves, leaf_uses, grads, handed, root, clear_buffer)
                continue
            inputs = f.inputs  # the rule's inputs, inline: a call per node costs ~8%
            n = len(inputs)
            if n == 1:  # the common case, without allocations
                x = inputs[0]
                g = grads.get(x)
                x_slot.data, x_slot.grad, x_slot.shape = x._data, g, x._shape
                f.backward_impl(x_slots, out_slots, prop, ACCUM[g is not None])
                g = x_slot.grad
                if g is not None:
                    grads[x] = g if type(g) is nd else as_array(g)
            elif n == 2 and inputs[0] is not inputs[1]:  # without allocations
                a, b = inputs
                ga, gb = grads.get(a), grads.get(b)
                x_slot.data, x_slot.grad, x_slot.shape = a._data, ga, a._shape
                b_slot.data, b_slot.grad, b_slot.shape = b._data, gb, b._shape
                f.backward_impl(ab_slots, out_slots, prop, FLAGS2[ga is not None][gb is not None])
                ga, gb = x_slot.grad, b_slot.grad
                if ga is not None:
                    grads[a] = ga if type(ga) is nd else as_array(ga)
                if gb is not None:
                    grads[b] = gb if type(gb) is nd else as_array(gb)
            else:
                run_general(f, prop, out_slots, grads, False)
            x_slot.data = x_slot.grad = b_slot.data = b_slot.grad = y_slot.data = y_slot.grad = None
            if clear_buffer:
                scope.freed += _free_values(f, root)
            if leaves and (done := _final_leaves(leaves, leaf_uses, grads, handed)):
                flag_raw.reset(token)  # user code runs between yields: not in raw mode,
                PASS_SCOPE.reset(stoken)  # nor in this pass
                token = stoken = None
                yield from done
                token = flag_raw.set(True)
                stoken = PASS_SCOPE.set(scope)
    except GradientShapeError as e:
        raise GradientShapeError(f"{f.name}: backward_impl: {e}") from None
    finally:
        _leave(token, stoken, handoff)


def _leave(token: Any, stoken: Any, handoff: dict[Function, Any]) -> None:
    """The end of a plain pass: its modes reset (those not reset while it yields), and
    what was left in its handoff dropped.
    """
    if token is not None:
        flag_raw.reset(token)
    if stoken is not None:
        PASS_SCOPE.reset(stoken)
    handoff.clear()


def _left_for(f: Function, o: Variable | None, handoff: dict[Function, Any], keep: Any) -> Any:
    """Zeros for the output ``o`` of a one-output node that no gradient reached, if work was
    left for it in the pass's handoff (it then runs; ``o``'s ``.g`` is marked as a reached
    output's); otherwise None (it is skipped).
    """
    if not handoff or f not in handoff:
        return None
    gy = zeros_of(f, 0)
    if keep is not None and o is not None:
        o._grad = gy if keep else FREED
    return gy


def _skipped(
    f: Function,
    leaves: list[Variable] | None,
    leaf_uses: dict[Variable, int],
    grads: dict[Variable, Any],
    handed: dict[int, Any],
    root: Variable | None,
    clear_buffer: bool,
) -> Iterator[Variable]:
    """A node of the plain pass that no gradient reached: its values are freed (with
    ``clear_buffer``) and the leaves it would have sent to are counted down, so that a leaf
    whose other consumers ran is still committed (e.g. a weight reached only through a
    recorded gradient graph, whose forward node gets no gradient). What it yields, the
    user's code sees outside raw mode and outside the pass's scope.
    """
    if clear_buffer:
        scope = PASS_SCOPE.get()
        n = _free_values(f, root)
        if scope is not None:
            scope.freed += n
    if leaves:
        done = _final_leaves(leaves, leaf_uses, grads, handed)
        if done:
            token, stoken = flag_raw.set(False), PASS_SCOPE.set(None)
            try:
                yield from done
            finally:
                PASS_SCOPE.reset(stoken)
                flag_raw.reset(token)


def out_grads(
    f: Function, grads: dict[Variable, Any], wanted: set[Variable] | frozenset[Variable]
) -> tuple[list[Variable | None], list[Any]]:
    """The outputs of a multi-output node and the gradients that reached them (taken out of
    ``grads``, but for ``wanted`` variables).
    """
    outs = [r() for r in f._outputs]
    gys = [None if o is None else grads.get(o) if o in wanted else grads.pop(o, None) for o in outs]
    return outs, gys


def _out_slots(
    f: Function,
    grads: dict[Variable, Any],
    wanted: set[Variable] | frozenset[Variable],
    keep: bool | None,
    handed: dict[int, Any],
    force: bool,
) -> list[Slot]:
    """The output slots of a multi-output node in the plain pass (empty if no gradient
    reached it, unless ``force``: a node with work left for it in the pass's handoff).

    An output that received no gradient gets zeros (rules never see None).
    """
    outs, gys = out_grads(f, grads, wanted)
    if not force and all(g is None for g in gys):
        return []
    ydata = f._ydata
    slots = []
    for i, (o, g) in enumerate(zip(outs, gys, strict=True)):
        if g is None:
            g = zeros_of(f, i)
        elif keep is not None:
            o._grad = g if keep else FREED  # type: ignore[union-attr]
        _hand(handed, g)
        y = getattr(o, "_data", None) if ydata is None else ydata[i]
        slots.append(Slot(y, g, g.shape))
    return slots


def run_general(
    f: Function,
    prop: Sequence[bool],
    out_slots: Sequence[Slot],
    grads: dict[Variable, Any],
    graph_mode: bool,
) -> None:
    """Runs the rule of a node with more than two inputs or a repeated one (``x * x``)."""
    in_slots, accum, slots = _in_slots(list(f.inputs), list(prop), grads, graph_mode)
    f.backward_impl(in_slots, out_slots, prop, accum)
    for v, s in slots.items():
        g = s.grad
        if g is not None:
            grads[v] = g if graph_mode or type(g) is np.ndarray else as_array(g)


def _in_slots(
    inputs: list[Variable], prop: list[bool], grads: dict[Variable, Any], graph_mode: bool
) -> tuple[list[Slot], list[bool], dict[Variable, Slot]]:
    """One Slot per distinct input (shared when a variable appears twice) and the accum flags."""
    slots: dict[Variable, Slot] = {}
    in_slots = []
    accum = []
    for x, p in zip(inputs, prop, strict=True):
        s = slots.get(x)
        if s is None:
            g = grads.get(x)
            s = slots[x] = Slot(x if graph_mode else x._data, g, x._shape)
            accum.append(g is not None)
        else:  # the same variable again (x * x): add to what the earlier store wrote
            accum.append(p or s.grad is not None)
        in_slots.append(s)
    return in_slots, accum, slots


def zeros_of(f: Function, i: int) -> Any:
    """Zeros of the shape and dtype of ``f``'s output ``i`` (alive or not), for an output
    that received no gradient (rules never see None).
    """
    meta = getattr(f, "_out_meta", None)
    if meta is None:
        o = f._outputs[i]()
        if o is None:
            raise RuntimeError(f"{f.name}: output {i} is gone and its shape was not recorded")
        meta = [(o._shape, o._dtype)] * (i + 1)
    shape, dtype = meta[i]
    xp = array_module_of(*f.inputs)
    return xp.zeros(shape, dtype=dtype if dtype.kind in "fc" else np.float64)


def _free_values(f: Function, root: Variable | None) -> int:
    """``clear_buffer``: frees the values of ``f``'s outputs (not the root's) once it ran;
    returns the bytes freed (of arrays that own their memory).
    """
    f._ydata = None
    n = 0
    for r in f._outputs:
        o = r()
        if o is not None and o is not root:
            a = o._data
            if a is not None and getattr(a, "base", 0) is None:
                n += a.nbytes
            o._data = None
    return n


def _final_leaves(
    leaves: list[Variable],
    leaf_uses: dict[Variable, int],
    grads: dict[Variable, Any],
    handed: dict[int, Any],
) -> list[Variable]:
    """Counts down the leaves a step sent gradients to; commits those now final into ``.g``."""
    done = []
    for x in leaves:
        left = leaf_uses[x] - 1
        leaf_uses[x] = left
        if left == 0:
            g = grads.pop(x, None)
            if g is not None:
                _commit(x, g, handed)
                done.append(x)
    return done


def _weakly(a: Any) -> Any:
    """A weak reference to ``a``, or ``a`` itself if it has none (a numpy scalar)."""
    try:
        return _ref(a)
    except TypeError:
        return a


def _hand(handed: dict[int, Any], a: Any) -> None:
    """Records ``a`` as given elsewhere (see :func:`_is_handed`)."""
    handed[id(a)] = _weakly(a)


def _is_handed(handed: dict[int, Any], a: Any) -> bool:
    """Whether ``a`` itself (not a dead array whose id it reuses) was recorded by :func:`_hand`."""
    r = handed.get(id(a))
    return r is not None and (r is a or (type(r) is weakref.ref and r() is a))


def _commit(leaf: Variable, g: Any, handed: dict[int, Any]) -> None:
    """Adds ``g`` into ``leaf.g``; the first write takes ``g`` itself when nobody else holds it."""
    if g.shape != leaf._shape:
        raise GradientShapeError(
            f"backward: the gradient of a leaf of shape {leaf._shape} came out with shape "
            f"{g.shape}: a backward rule stored a gradient of another shape than its input"
        )
    buf = leaf._grad
    if buf is None:
        dtype = leaf._grad_dtype()
        if g.dtype != dtype:
            g = g.astype(dtype)
        elif g.base is not None or _is_handed(handed, g):
            g = g.copy()  # a view or an array also given elsewhere: we will add into it later
        _hand(handed, g)
        leaf._grad = g
    else:
        buf += g


class PassScope:
    """What one plain reverse pass shares with the rules it runs (see :func:`current_pass`).

    ``handoff``: a place where a rule may leave work for a node that the pass visits
    later (see :meth:`visits`), keyed by that node (a node that reuses what an earlier
    one computed on the same values, e.g. a checkpoint's recomputation). A node that has
    an entry here when its turn comes runs even when no gradient reached its outputs
    (with zero gradients), so that nothing left for it is lost; whatever is left when the
    pass ends (also when it stops early) is dropped with the pass, so no entry outlives
    it.

    ``freed``: the bytes of the values this pass has freed so far (``clear_buffer``: the
    arrays whose references its nodes' outputs dropped; an array the caller still holds,
    e.g. through ``.d``, counts though it stays), and ``held``: the bytes that entries of
    ``handoff`` hold (a rule adds what it leaves there, the node that takes it subtracts
    it). A rule that could spare work by keeping more alive may spend ``freed - held``:
    what it keeps for that is then at most what the pass dropped before (it is up to the
    rule that nothing else it makes later counts on that memory).
    """

    __slots__ = ("_nodes", "_plan", "freed", "handoff", "held")

    def __init__(self, plan: Plan) -> None:
        self.handoff: dict[Function, Any] = {}
        self.freed = 0
        self.held = 0
        self._plan = plan
        self._nodes: set[Function] | None = None

    def visits(self, f: Function) -> bool:
        """Whether ``f`` is a step of this pass (it runs when a gradient reaches it, or
        when work was left for it in ``handoff``). Steps run in the reverse order of
        creation: a node made before the one whose rule runs now is visited later.
        """
        if self._nodes is None:
            self._nodes = set(self._plan.nodes)
        return f in self._nodes


PASS_SCOPE: contextvars.ContextVar[PassScope | None] = contextvars.ContextVar(
    "hodiff_pass", default=None
)


def current_pass() -> PassScope | None:
    """The plain reverse pass whose rule runs now: the innermost one.

    None outside of a plain pass and while ``hd.grad`` records (its rules build graphs;
    they share nothing through the pass). A rule that runs a pass of its own (over a graph
    it made) reads this first: the inner pass has its own scope.
    """
    return PASS_SCOPE.get()


_variable.register(backward=backward)  # Variable.backward
