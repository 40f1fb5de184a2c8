"""``hd.checkpoint``: a segment whose values are recomputed by the reverse pass, not kept.

A user of the engine, not an exception to it. ``checkpoint(f, *args)`` runs ``f`` once
(recording its graph, to learn its outputs and the variables it uses), keeps the output
values and drops the graph; what is left is one :class:`Checkpoint` node whose inputs are
the Variable arguments and the variables ``f`` reached without being given them (its
*externals*: parameters made by ``get_parameter_or_create``, closed-over weights or
intermediate values of the enclosing graph). Its ``backward_impl`` recomputes ``f`` on the
input values and runs the segment's own rules:

* in a plain pass (``.backward()``, ``hd.grad(..., create_graph=False)``) it rebuilds the
  segment's graph, takes the gradient by a plain pass over it and drops it again, so at any
  time only one segment's values live beside the checkpoints' inputs and outputs. When
  ``f``'s graph is made of hodiff's non-random primitives, the first run's graph is kept
  without its values and only the values the pass reads are computed again by its nodes
  (:class:`_Kept`): ``f`` is not called again;
* while ``hd.grad`` records, the gradient it stores is itself a checkpoint: the node of
  ``(args, gys) -> vjp of f`` (:class:`_Vjp`), whose forward recomputes ``f`` and records
  its gradient graph, keeps the results and drops both graphs. Differentiated again, that
  node recomputes them, and so on: every order is checkpointed, with no rule written for it.
  In a plain pass that differentiates both (a gradient penalty), the recorded gradient
  leaves the part of its pass through ``f``'s rules to the forward checkpoint of the same
  segment, which runs ``f``'s rules once on the sum (:meth:`Checkpoint._vjp_values`,
  through the pass's ``graph.PassScope.handoff``), and, within the memory the pass has
  freed, the values of ``f`` it recomputed, so that the forward checkpoint does not
  compute them again.

Random functions inside ``f`` draw the same numbers when ``f`` is recomputed: the seeds the
first run's random nodes took from the global generator are recorded on a tape
(:mod:`hodiff.engine.random`) and replayed, without advancing the generator. A static graph draws
anew at every ``.forward()`` and its derivatives replay that forward's draw.

A value the node reads that was set through ``.d`` after it computed (an argument, a
parameter) makes the reverse pass raise, as for every node (``graph.check_values``); a
recomputation that makes other random calls, other output shapes or uses other variables
than the first run raises ``RuntimeError``.

Inside ``hd.vmap`` the node's batching rule is the checkpoint of the mapped segment, so per
example gradients through a checkpoint are checkpointed too (see :meth:`Checkpoint.batch_rule`).
Likewise its Taylor rule (``hd.jvp``, ``hd.jet``, ``hd.laplacian``) is the checkpoint of the
jet: the segment is recomputed and the jet pushed through it, and while the jet records
(``create_graph=True``) its coefficients are the outputs of a checkpoint of their own
(:class:`_Jet`), so a PINN's recorded Laplacian keeps each segment's outputs and
coefficients only (see :meth:`Checkpoint.jet_rule`).
"""

from __future__ import annotations

import contextvars
import copy
import math
import weakref
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

import numpy as np

from hodiff.engine import graph
from hodiff.engine import random as _random
from hodiff.engine import variable as _variable
from hodiff.engine.context import NO_GRAD, RAW, STATIC, _mode
from hodiff.engine.function import REGISTRY, Flags, Function, Slots, array_module_of
from hodiff.engine.variable import Variable
from hodiff.transforms import taylor as _taylor
from hodiff.transforms.vectorize import BatchedVariable, vmap

__all__ = ["Checkpoint", "checkpoint"]

Spec = tuple[tuple[int, ...], Any]


def checkpoint(f: Callable[..., Any], *args: Any) -> Any:
    """``y = f(*args)``, keeping only the arguments and the outputs; the rest is recomputed.

    ``y`` has the values (and shapes, dtypes) of ``f(*args)``, and
    ``d y / d x = d f(x) / d x`` at every order, for every argument and every variable
    ``f`` uses.

    The values computed inside ``f`` are not kept: a reverse pass (``.backward()``,
    ``hd.grad`` at any order) that needs them computes them again on the same inputs (by
    running ``f`` again, or by the nodes of its first graph, kept without values). Values
    and every derivative equal those of ``f(*args)`` (the same rules run on the same
    values); the gradient graph of a checkpointed segment is itself checkpointed, so a
    gradient penalty or a Hessian-vector product through it keeps no more than its
    arguments, outputs and incoming gradients per segment; so is a jet through it
    (``hd.jvp``, ``hd.jet``, a Laplacian with ``create_graph=True``: it keeps the segment's
    outputs and their coefficients). Memory: a chain of ``n``
    segments of ``k`` values each keeps about ``n + k`` values instead of ``n k``, for about
    one more forward of the chain per reverse pass (see docs/checkpointing.md).

    Args:
        f: a callable of hodiff functions, ``f(*args)`` returning a Variable or a tuple or
            list of Variables (float dtypes). It may use Variables it is not given
            (parameters, ``hd.get_parameter_or_create``, closures), random functions,
            ``hd.grad``, PF layers and nested checkpoints. It must compute the same way
            every time it is called on the same values (the same random calls, the same
            variables); it may be called once per reverse pass.
        *args: Variables (the segment's inputs) and any other values, passed to ``f`` as
            they are (arrays become constants of the segment).

    Returns:
        What ``f`` returns: a Variable, or a tuple/list of Variables, with the values of
        ``f(*args)``; a Variable's node is the checkpoint (``y.parent``). Under
        ``hd.no_grad()`` (nothing would be recorded) it is ``f(*args)`` itself.

    Raises:
        TypeError: ``f`` is not callable, or returns something else than Variables of a
            float dtype.
        ValueError: ``f`` returns an empty tuple/list.
        RuntimeError: in a reverse pass, an input was set through ``.d`` after the
            checkpoint computed (the version check), or the recomputation differs from
            the first run (other random calls, output shapes or variables used).

    >>> import numpy as np, hodiff as hd, hodiff.functions as F
    >>> x = hd.Variable.from_array(np.array([0.5, -1.0]), need_grad=True)
    >>> y = hd.checkpoint(lambda a: F.tanh(F.sin(a) * a), x)
    >>> (g,) = hd.grad(F.sum(y), x)
    >>> (g0,) = hd.grad(F.sum(F.tanh(F.sin(x) * x)), x)
    >>> bool(np.allclose(g.d, g0.d)), type(y.parent).__name__
    (True, 'Checkpoint')
    """
    if not callable(f):
        raise TypeError(f"checkpoint: f must be callable, got {type(f).__name__}")
    mode = _mode.get()
    if mode & (RAW | NO_GRAD):  # nothing is recorded: there is nothing to keep or recompute
        return f(*args)
    positions = tuple(i for i, a in enumerate(args) if isinstance(a, Variable))
    xs = [args[i] for i in positions]
    statics = tuple(None if isinstance(a, Variable) else a for a in args)
    node = Checkpoint(f=f, statics=statics, positions=positions)
    tape = _random.Tape()
    with _random.recording(tape):
        kind, specs, values, externals, kept = _trace(node, xs)
    node._tape = tape
    node._kept = kept
    node._setup(specs, values, len(externals))
    ys = node(*xs, *externals)
    if kind is None:
        return ys
    outs = ys if isinstance(ys, tuple) else (ys,)
    return list(outs) if kind is list else outs


class Checkpoint(Function, register=False):
    """The node of one checkpointed segment (see the module docstring).

    Inputs: the Variable arguments of ``f``, then its externals. Outputs: ``f``'s outputs.
    ``_tape`` holds the seeds of the random nodes of the run whose values the outputs hold
    (the first run, or in a static graph the last ``.forward()``); recomputations replay it.
    """

    need_inputs = True
    need_outputs = False

    def __init__(
        self, *, f: Callable[..., Any], statics: tuple[Any, ...], positions: tuple[int, ...]
    ) -> None:
        self.f = f
        self.statics = statics
        self.positions = positions
        self._tape = _random.Tape()
        self._specs: list[Spec] = []
        self._pending: list[Any] | None = None
        #: f's first graph without its values, when it can compute them again (see _Kept)
        self._kept: _Kept | None = None
        #: the caller's context variables (parameter scope, array context), for recomputing
        self._context = contextvars.copy_context()

    def _setup(self, specs: list[Spec], values: list[Any] | None, n_externals: int) -> None:
        """Declares the outputs (and the first run's values, taken by the first forward)."""
        self.n_outputs = len(specs)
        self._specs = specs
        self._pending = values
        self.n_externals = n_externals

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"checkpoint({getattr(self.f, '__name__', type(self.f).__name__)})"

    # ------------------------------------------------------------ protocol
    def setup_impl(self, inputs: Sequence[Variable]) -> list[Spec]:
        return list(self._specs)

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        # the first run's values, or f run again on the inputs (a static graph's forward:
        # with new random draws, recorded for the derivatives of this forward)
        pending = self._pending
        if pending is not None:
            self._pending = None
            outputs[:] = pending
            return
        n = len(self.positions)
        self._kept = None  # f runs again: its graph is that run's
        tape = _random.Tape()
        token = _mode.set(0)  # define-by-run, recording (f may call hd.grad)
        try:
            with _random.recording(tape):
                leaves = [Variable.from_array(a, copy=False) for a in inputs[:n]]
                outs = self._outputs_of(self._call_f(leaves))
                self._check_specs(outs)
                values = [o._data for o in outs]
        finally:
            _mode.reset(token)
        self._tape = tape
        outputs[:] = values

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # gx_i = sum_k (d y_k / d x_i)^T gy_k, by the rules of f's graph, recomputed
        wanted = [i for i, p in enumerate(prop_down) if p]
        if _mode.get() & RAW:
            self._backward_values(inputs, outputs, wanted, accum)
            return
        n = len(self.positions)
        vjp = _Vjp(self, wanted)
        xs, gys = [s.data for s in inputs[:n]], [s.grad for s in outputs]
        mode = _mode.get()
        if mode & NO_GRAD:  # values only (hd.grad under no_grad): record the segment, unlink
            token = _mode.set(mode & ~NO_GRAD)
            try:
                gxs = tuple(g.unlinked() for g in vjp(*[x.unlinked() for x in xs], *gys))
            finally:
                _mode.reset(token)
        else:
            gxs = checkpoint(vjp, *xs, *gys)
        if not isinstance(gxs, tuple):
            gxs = (gxs,)
        node = gxs[0].parent
        if isinstance(node, Checkpoint):
            _check_same_externals(self, node.inputs[len(node.positions) :])
        for i, g in zip(wanted, gxs, strict=True):
            inputs[i].store(g, accum[i])

    def batch_rule(self, inputs: Sequence[Variable], axes: Sequence[int | None]) -> Any:
        """The checkpoint of the mapped segment: ``checkpoint(vmap(f, in_axes), *batched)``.

        The mapped segment replays this node's random draws. Externals (weights) are the
        same for every example; a batched one (a variable of the mapped function that
        ``f`` closes over) is refused: pass it as an argument.
        """
        n = len(self.positions)
        for k, ax in enumerate(axes[n:]):
            if ax is not None:
                x = inputs[n + k]
                raise NotImplementedError(
                    f"{self.name}: inside hd.vmap, f uses a mapped variable it was not given "
                    f"(shape {x.shape[1:]}, dtype {x.dtype}); pass it to hd.checkpoint as an "
                    "argument"
                )
        mapped = vmap(self._replaying_call, in_axes=tuple(axes[:n]))
        return checkpoint(mapped, *inputs[:n])

    def jet_rule(self, jp: _taylor.JetPass, ins: list[Any], outs: list[Any]) -> list[Any]:
        """The Taylor rule (:mod:`hodiff.transforms.taylor`): the jet of a checkpoint is the
        checkpoint of the jet (:func:`_jet_rule`).

        ``ins``: per input, its coefficients ``[x_1, ..., x_K]`` (each ``(R, *x.shape)``,
        None where zero) or None; returns per output ``[y_1, ..., y_K]`` with
        ``y_k = d^k/dt^k f(x(t))`` at ``t = 0`` (factorial-scaled, as every rule).
        """
        return _jet_rule(self, jp, ins, outs)

    # ------------------------------------------------------------ recomputation
    def _call_f(self, leaves: Sequence[Variable]) -> Any:
        """``f`` on the statics with the Variable arguments replaced by ``leaves``.

        It runs in the context variables of the ``checkpoint`` call (the parameter scope
        and array context ``f`` was called in, which a reverse pass run elsewhere does not
        have), with the current mode and random tapes.
        """
        call = list(self.statics)
        for p, v in zip(self.positions, leaves, strict=True):
            call[p] = v
        return self._context.copy().run(_run_in, self.f, call, _mode.get(), _random.current())

    def _replaying_call(self, *leaves: Variable) -> Any:
        with _random.replaying(self._tape, "checkpoint"):
            return self._call_f(leaves)

    def _replay(self, leaves: Sequence[Variable]) -> list[Variable]:
        """The outputs of ``f`` recomputed on ``leaves``, with the recorded random draws."""
        with _random.replaying(self._tape, self.name):
            outs = self._outputs_of(self._call_f(leaves))
        self._check_specs(outs)
        return outs

    def _outputs_of(self, out: Any) -> list[Variable]:
        return _as_outputs(self.name, out)[1]

    def _check_specs(self, outs: list[Variable]) -> None:
        got = [(o.shape, o.dtype) for o in outs]
        want = [(tuple(s), d) for s, d in self._specs]
        if got != want:
            raise RuntimeError(
                f"{self.name}: recomputed, f returned {_describe(got)} where its first run "
                f"returned {_describe(want)}: a checkpointed function must compute the same "
                "way every time"
            )

    def _backward_values(
        self, inputs: Slots, outputs: Slots, wanted: list[int], accum: Flags
    ) -> None:
        """The plain pass: rebuild the segment, a plain pass over it, drop it.

        The segment of a recorded gradient (:class:`_Vjp`) is rebuilt with its gradient
        graph linked but not computed, and only the values its rules read are then
        computed (:func:`_run_needed`): the gradient's own result is never needed. That
        node's pass may leave the part of it that runs through ``f``'s rules to the forward
        checkpoint of the same segment (:meth:`_vjp_values`), which then runs it together
        with its own (:class:`_Handed`).
        """
        scope = graph.current_pass()  # this pass's; the segment's own passes have their own
        handed = scope.handoff.pop(self, None) if scope is not None else None
        if handed is not None:
            scope.held -= handed.nbytes  # type: ignore[union-attr]
            handed.check(self)
        n = len(self.positions)
        known = self.inputs
        gys = [s.grad for s in outputs]
        if self._kept is not None:
            xs = [s.data for s in inputs[:n]]
            if isinstance(self.f, _Vjp):
                gs = self._kept.vjp_grads(self, scope, xs, wanted, gys)
            else:
                ys = [s.data for s in outputs]
                gs = self._kept.grads(xs, known, wanted, gys, handed, self, ys)
            for i, g in zip(wanted, gs, strict=True):
                if g is not None:
                    inputs[i].store(g, accum[i])
            return
        token = _mode.set(0)  # define-by-run and recording, to rebuild the segment's graph
        try:
            leaves = [
                Variable.from_array(s.data, need_grad=x.need_grad, copy=False)
                for s, x in zip(inputs[:n], known[:n], strict=True)
            ]
            start = next(_variable._seq)
            wrt: list[Variable]
            if isinstance(self.f, _Vjp):
                with _random.replaying(self._tape, self.name):
                    outs, linked, fouts = self.f.lazily(leaves)
                self._check_specs(outs)
                _run_needed(outs, linked)
                wrt = [leaves[i] if i < n else known[i] for i in wanted]
                extra = _reached(outs, leaves, start)
                gs = self._vjp_values(scope, outs, fouts, wrt, wanted, gys, start, linked)
                del fouts
            else:
                outs = self._replay(leaves)
                wrt = [leaves[i] if i < n else known[i] for i in wanted]
                roots, seeds = outs, gys
                if handed is not None:  # the frontier of the gradient's pass, with its gradients
                    nodes = graph.nodes_since(outs, start)
                    more = handed.locate(self, nodes)
                    roots, seeds = [*outs, *more], [*gys, *handed.grads]
                gs = graph.grad_values(roots, wrt, seeds, _segment_plan(roots, wrt, start))
                extra = _reached(outs, leaves, start)
                del roots
            del outs, leaves, wrt
        finally:
            _mode.reset(token)
        _check_same_externals(self, _alive(extra))
        for i, g in zip(wanted, gs, strict=True):
            if g is not None:
                inputs[i].store(g, accum[i])

    def _vjp_values(
        self,
        scope: graph.PassScope | None,
        outs: list[Variable],
        fouts: list[Variable],
        wrt: list[Variable],
        wanted: list[int],
        gys: list[Any],
        start: int,
        linked: int,
        gnodes: list[Function] | None = None,
    ) -> list[Any]:
        """The plain pass over a recorded gradient's rebuilt segment, in two parts
        (``gnodes``: the nodes of its gradient part, in creation order, when the caller has
        them).

        The segment is ``f``'s graph F (its nodes made after ``start``, outputs ``fouts``)
        and the gradient graph G linked on it (after ``linked``, outputs ``outs``). G's
        part of the pass leaves gradients at the leaves and at the values of F that G reads
        (the *frontier*, e.g. a ``tanh``'s output); F's part carries the frontier's
        gradients on to the leaves through F's rules.

        F's rules also run in the reverse pass of the forward checkpoint ``node`` of the
        same segment (``f.node``), on the gradient of the segment's outputs. F's rules are
        linear in the gradients they carry, so when this plain pass visits ``node`` (later:
        it was made first) F's part can be left to it, and ``node`` runs F's rules once on
        the sum, as without checkpointing (one affine backward per layer instead of two).
        It is left when the frontier's gradients take no more memory than the gradients it
        replaces (those F's part would make for ``node``'s inputs that G's part did not
        already give one), so the pass keeps no more than without the hand-over; otherwise
        F's part runs here. With the frontier go the values F's rules read, as this pass
        computed them (:func:`_read_values`), when they fit in the memory the pass has
        freed less what its hand-overs hold (``scope.freed - scope.held``): ``node`` then
        does not recompute ``f``.
        """
        assert isinstance(self.f, _Vjp)
        node = self.f.node
        n_v, n_c = len(self.positions), len(node.positions)
        known = self.inputs
        ids = {id(x) for x in node.inputs}
        # the wanted inputs F's part sends to: node's arguments and its externals
        fw = [k for k, i in enumerate(wanted) if i < n_c or (i >= n_v and id(known[i]) in ids)]
        if gnodes is None:
            gnodes = graph.nodes_since(outs, linked)
        frontier = _frontier(gnodes, start, linked) if fw else []
        if not frontier:
            return graph.grad_values(outs, wrt, gys, _segment_plan(outs, wrt, start))
        k = len(wrt)
        both = wrt + frontier
        # G's values are freed as its pass goes: nothing reads them after it
        plan = _segment_plan(outs, both, linked, gnodes)
        got = graph.grad_values(outs, both, gys, plan, clear_buffer=True)
        del gnodes, plan
        gs = got[:k]
        pairs = [(v, g) for v, g in zip(frontier, got[k:], strict=True) if g is not None]
        del outs[:], got, both, frontier  # nor G's graph
        if not pairs:
            return gs
        fvars, fgrads = [v for v, _ in pairs], [g for _, g in pairs]
        if scope is not None and node not in scope.handoff and scope.visits(node):
            size = sum(g.nbytes for g in fgrads)
            budget = sum(
                _bytes(known[wanted[j]].shape, known[wanted[j]]._grad_dtype())
                for j in fw
                if gs[j] is None
            )
            if size <= budget:
                place = _places(fouts, fvars, start, linked)
                if place is not None:
                    # the values too, within the memory the pass has freed (the frontier
                    # replaces a gradient, so nothing else grows here), when node computes
                    # by its kept graph (which takes them; a run of f computes its own)
                    values = None
                    if node._kept is not None:
                        values = _read_values(place[2], scope.freed - scope.held - size)
                    handed = _Handed(self, node, *place[:2], fgrads, values)
                    scope.handoff[node] = handed
                    scope.held += handed.nbytes
                    return gs
        _trim([*fvars], start, linked)  # before F's part: the values F's rules do not read
        del fouts
        fwrt = [wrt[j] for j in fw]
        plan = _segment_plan(fvars, fwrt, start)
        more = graph.grad_values(fvars, fwrt, fgrads, plan, clear_buffer=True)  # nor F's
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
        return gs


class _Vjp:
    """``(args, gys) -> [sum_k (d y_k / d x_i)^T gy_k for the wanted inputs i]`` of a node.

    What a :class:`Checkpoint` node's recorded gradient computes, as a function that
    :func:`checkpoint` can recompute: ``f`` again on the arguments (replaying the node's
    random draws), then ``hd.grad`` of it with ``create_graph=True``. Its externals are the
    node's; the wanted inputs that are externals are differentiated as they are.
    """

    def __init__(self, node: Checkpoint, wanted: list[int]) -> None:
        self.node = node
        self.wanted = wanted
        self.__name__ = f"vjp_of_{node.name}"
        #: set by :func:`_trace` to a list, which the next call fills with ``f``'s
        #: outputs and the clock time between ``f``'s graph and its gradient graph
        self.traced: list[Any] | None = None

    def __call__(self, *args: Variable) -> tuple[Variable, ...]:
        start = next(_variable._seq)
        outs, wrt, gys = self._forward(args)
        if self.traced is not None:
            self.traced[:] = [outs, next(_variable._seq)]
        return tuple(_grad(outs, wrt, gys, start))

    def lazily(self, args: Sequence[Variable]) -> tuple[list[Variable], int, list[Variable]]:
        """The same graph, its gradient part linked but not computed (static mode), the
        clock time before that part, and ``f``'s recomputed outputs. A rule never reads a
        value to decide what to link (see hodiff/function.py), so linking it first is safe;
        ``f`` itself runs as it is (a user's ``f`` may read values).
        """
        start = next(_variable._seq)
        outs, wrt, gys = self._forward(args)
        linked = next(_variable._seq)
        token = _mode.set(_mode.get() | STATIC)
        try:
            return _grad(outs, wrt, gys, start), linked, outs
        finally:
            _mode.reset(token)

    def _forward(self, args: Sequence[Variable]) -> tuple[list[Variable], ...]:
        """The node's outputs recomputed, the variables to differentiate, the seeds."""
        node = self.node
        n = len(node.positions)
        leaves = list(args[:n])
        outs = node._replay(leaves)
        wrt = [leaves[i] if i < n else node.inputs[i] for i in self.wanted]
        return outs, wrt, list(args[n:])


# ---------------------------------------------------------------------- Taylor mode
def _jet_rule(node: Checkpoint, jp: _taylor.JetPass, ins: list[Any], outs: list[Any]) -> list[Any]:
    """The coefficients of ``node``'s outputs, per output ``[y_1, ..., y_K]`` (None: zero),
    from its inputs' (``ins``, per input: the Variable arguments, then the externals).

    The jet of a checkpoint is the checkpoint of the jet: ``f`` is recomputed on the
    primal values (replaying the node's random draws) and the jet pushed through the
    recomputed graph, whose nodes take their own rules (a nested checkpoint this one).

    * In a plain pass (``jp.record`` False: ``create_graph=False``, ``hd.jvp``) on arrays:
      the segment's graph is rebuilt, the jet pushed through it in raw mode, and the graph
      dropped (only its coefficients are returned).
    * While the pass records (``create_graph=True``), the output coefficients are the
      outputs of a new checkpoint, of ``(primals, input coefficients) -> (outputs, output
      coefficients)`` (:class:`_Jet`): the segment's Taylor graph is recorded, its outputs
      kept and the graph dropped; a reverse pass through it (a PINN's step) recomputes one
      segment's Taylor graph at a time. Its outputs' values are read by the later rules in
      place of the node's (``jp.alias``), and so are those of the nodes after it (each
      linked again to the aliases by the pass), so the recorded graph of a network of
      checkpoints is a chain of these checkpoints only (the values' own checkpoints are
      not in it, and its reverse pass does not run them), keeping per segment its
      outputs and their coefficients.
    """
    if jp.record:
        return _jet_recorded(node, jp, ins, outs)
    n = len(node.positions)
    token = _mode.set(0)  # define-by-run and recording, to rebuild the segment's graph
    try:
        leaves = [
            Variable.from_array(x._data, need_grad=x.need_grad, copy=False) for x in node.inputs[:n]
        ]
        start = _taylor.clock()
        ys = node._replay(leaves)
        primals = [*leaves, *node.inputs[n:]]
        got = _taylor.push(tuple(ys), start, primals, ins, jp.kk, jp.collapsed)
        extra = _reached(ys, leaves, start)
        del ys, leaves, primals
    finally:
        _mode.reset(token)
    _check_same_externals(node, _alive(extra))
    return got


def _jet_recorded(
    node: Checkpoint, jp: _taylor.JetPass, ins: list[Any], outs: list[Any]
) -> list[Any]:
    """The recorded pass's rule: the output coefficients are a :class:`_Jet` checkpoint's
    outputs (see :func:`_jet_rule`).
    """
    n = len(node.positions)
    given = [[] if s is None else [k for k, c in enumerate(s, 1) if c is not None] for s in ins]
    coeffs = [c for s in ins if s is not None for c in s if c is not None]
    jet = _Jet(node, jp.kk, jp.collapsed, given)
    got = checkpoint(jet, *[jp.val(x) for x in node.inputs[:n]], *coeffs)
    ys = got if isinstance(got, tuple) else (got,)
    made = ys[0].parent
    if isinstance(made, Checkpoint):  # not under no_grad
        _check_same_externals(node, made.inputs[len(made.positions) :])
    for o, y in zip(outs, ys, strict=False):  # the jet's values, read in place of node's
        if o is not None:
            jp.alias[o] = y
            _share(y, o)
    flat = iter(ys[len(outs) :])
    assert jet.made is not None  # set by the first call
    out = []
    for orders in jet.made:
        s: list[Any] = [None] * jp.kk
        for k in orders:
            s[k - 1] = next(flat)
        out.append(s)
    return out


def _share(y: Variable, o: Variable) -> None:
    """Makes ``y`` hold ``o``'s array when they hold equal ones (a value computed again),
    so that the two are not in memory together while both are alive.
    """
    a, b = y._data, o._data
    if a is not None and b is not None and a is not b and type(a) is type(b):
        xp = array_module_of(a)
        if a.shape == b.shape and a.dtype == b.dtype and bool(xp.array_equal(a, b)):
            y._data = b


class _Jet:
    """``(args, coefficients) -> (outputs, output coefficients)`` of a :class:`Checkpoint`
    node.

    What the node's recorded jet computes, as a function that :func:`checkpoint` can
    recompute: ``f`` again on the arguments (replaying the node's random draws), then the
    jet of order ``order`` (``collapsed`` or not) pushed through its graph, recorded
    (``hodiff.transforms.taylor.push``). Its arguments are the node's Variable arguments, then the
    coefficients given (``given``: per input of the node, the orders whose coefficient is
    an argument, in that order; a coefficient may be an array, a constant of the
    segment). Its externals are the node's (an external's coefficients are arguments).
    It returns ``f``'s outputs (recomputed: the values of the node's), then the output
    coefficients that are not zero, in order (:attr:`made`: per output, their orders).
    """

    def __init__(self, node: Checkpoint, order: int, collapsed: bool, given: list[list[int]]):
        # node without its inputs: it recomputes f, and the jet's arguments replace its
        # Variable arguments (the values' chain, which the jets' outputs replace: not kept)
        self.node = copy.copy(node)
        self.node.inputs = []
        self.node._kept = None
        self.externals = list(node.inputs[len(node.positions) :])
        self.order, self.collapsed, self.given = order, collapsed, given
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
        start = _taylor.clock()
        outs = node._replay(leaves)
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
        return (*outs, *[_as_variable(c) for s in got for c in s if c is not None])


def _as_variable(c: Any) -> Variable:
    """A coefficient as a Variable (an array one is a constant: it depends on nothing)."""
    return c if isinstance(c, Variable) else Variable.from_array(c)


def _segment_plan(
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
        nodes = graph.nodes_since(outs, start)
    return graph.plan(list(outs), list(wrt), nodes)


def _grad(
    outs: list[Variable], wrt: list[Variable], gys: list[Variable], start: int
) -> list[Variable]:
    """``hd.grad(outs, wrt, gys, allow_unused=True)`` through the segment's nodes only."""
    gs = graph.grad_graph(outs, wrt, gys, _segment_plan(outs, wrt, start))
    out = []
    for x, g in zip(wrt, gs, strict=True):
        if g is None:  # not used by the outputs: zeros
            g = Variable.from_array(array_module_of(x).zeros(x.shape, dtype=x._grad_dtype()))
        out.append(g)
    return out


def _run_needed(outs: Sequence[Variable], start: int) -> None:
    """Computes the values, in the graph of ``outs``, of the nodes linked (in static mode,
    without computing) since ``start`` that a reverse pass or another of them reads.

    A value is needed when a rule reads it (``need_inputs`` of its consumers,
    ``need_outputs`` of its producer) or a needed node computes from it; the others (the
    gradient's result itself, a sum only added to it) are never computed.
    """
    nodes = graph.nodes_since(outs, start)
    needed: set[int] = set()
    run = []
    for f in reversed(nodes):
        go = f.need_outputs
        if not go:
            for r in f._outputs:
                o = r()
                if o is not None and id(o) in needed:
                    go = True
                    break
        if go:
            run.append(f)
        for i, x in enumerate(f.inputs):
            if go or (f.differentiable and f.needs_input(i)):
                needed.add(id(x))
    for f in reversed(run):
        xs = [x._data for x in f.inputs]
        ys: list[Any] = [None] * f.n_outputs
        f.forward_impl(xs, ys)
        graph._set_outputs(f, xs, ys)


#: the bytes of a constant (a leaf ``f`` made, without need_grad) that a kept graph may hold
_SMALL = 1024


class _Kept:
    """The graph of ``f``'s first run, kept without its values, to compute them again by its
    nodes' own forward rules instead of running ``f`` (Python) again.

    Kept only when that provably gives the values ``f`` would: every node is a primitive
    of hodiff (a registered ``Function``) other than a random one (a node that owns a
    generator draws anew at every forward), outside ``hd.vmap``, and every leaf the graph
    reads besides the arguments either has need_grad (a parameter, held elsewhere) or is
    small (at most ``_SMALL`` bytes: a constant ``f`` made, which the kept graph holds and
    which becomes an input of the checkpoint). The node's inputs are the values it was
    run on: one changed through ``.d`` since makes the reverse pass raise before this
    runs (``graph.check_values``), and a static graph's ``.forward()``, which runs ``f``
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
        self.nodes = graph.nodes_since([*outs, *fouts], start) if nodes is None else nodes
        #: per set of wanted inputs (and of outputs bound), the plan, the run and wrt
        self.plans: dict[Any, tuple[Any, _Run, list[Variable]]] = {}

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
    ) -> _Kept | None:
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
                if (
                    x.parent is None
                    and id(x) not in own
                    and not x.need_grad
                    and (x._data is None or getattr(x._data, "nbytes", 0) > _SMALL)
                ):
                    return None
        kept.drop()
        return kept

    def drop(self) -> None:
        """Frees the values the last computation left (not the leaves ``f`` made)."""
        for v in self.leaves:
            v._data = None
        for f in self.nodes:
            f._ydata = None
            for r in f._outputs:
                o = r()
                if o is not None:
                    o._data = None

    def grads(
        self,
        xs: list[Any],
        known: Sequence[Variable],
        wanted: list[int],
        gys: list[Any],
        handed: _Handed | None,
        node: Checkpoint,
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
            plan, run = self._plan(wrt, roots, bound)
        else:
            roots, seeds = self.outs, gys
            key = (tuple(wanted), frozenset(bound))
            entry = self.plans.get(key)
            if entry is None:
                entry = self.plans[key] = (*self._plan(wrt, roots, bound), wrt)
            plan, run, wrt = entry
        self.compute(xs, run)
        try:
            return graph.grad_values(roots, wrt, seeds, plan)
        finally:
            self.drop()

    def bind_outputs(self, node: Checkpoint, ys: Sequence[Any]) -> set[int]:
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
        t = max(node.seq, node._computed)
        for o, y, r in zip(self.outs, ys, node._outputs, strict=False):
            v = r()
            if (
                y is None
                or v is None
                or o.parent is None  # an argument: bound to its input already
                or getattr(v, "_version", 0) > t
                or getattr(y, "shape", None) != o._shape
                or getattr(y, "dtype", None) != o._dtype
            ):
                continue
            o._data = y
            bound.add(id(o))
        return bound

    def vjp_grads(
        self,
        node: Checkpoint,
        scope: graph.PassScope | None,
        xs: list[Any],
        wanted: list[int],
        gys: list[Any],
    ) -> list[Any]:
        """:meth:`grads` of a recorded gradient's node, whose pass is split in two (and may
        be partly handed over): see :meth:`Checkpoint._vjp_values`.
        """
        known = node.inputs
        entry = self.plans.get(tuple(wanted))
        if entry is None:
            wrt = [self.leaves[i] if i < len(self.leaves) else known[i] for i in wanted]
            entry = self.plans[tuple(wanted)] = (*self._plan(wrt, self.outs), wrt)
        _, run, wrt = entry
        self.compute(xs, run)
        try:
            gnodes = [f for f in self.nodes if f.seq > self.linked]
            return node._vjp_values(
                scope,
                list(self.outs),
                self.fouts,
                wrt,
                wanted,
                gys,
                self.start,
                self.linked,
                gnodes,
            )
        finally:
            self.drop()

    def compute(self, xs: list[Any], run: _Run) -> None:
        """Binds the arguments' leaves to ``xs`` and computes the values of ``run``'s nodes,
        freeing after each the values no rule reads and no later node computes from.
        """
        for v, a in zip(self.leaves, xs, strict=True):
            v._data = a
        try:
            for f, done in run:
                ins = [x._data for x in f.inputs]
                ys: list[Any] = [None] * f.n_outputs
                f.forward_impl(ins, ys)
                graph._set_outputs(f, ins, ys)
                for v in done:
                    v._data = None
        except BaseException:
            self.drop()
            raise

    def _plan(
        self, wrt: list[Variable], roots: list[Variable], bound: set[int] | None = None
    ) -> tuple[Any, _Run]:
        """The pass from ``roots`` towards ``wrt``, and the nodes whose values it reads
        (or that compute those), in creation order, each with the values to free once it
        ran (computed by an earlier one only to compute a later one's). A node whose
        needed outputs are all ``bound`` (their values set already) does not run.

        It plans over the kept nodes (no walk). For a gradient's graph these include the
        nodes of ``f`` that the gradient does not pass through (a residual block's final
        sum): their rules read nothing the gradient's rules do not (a rule that reads a
        value links gradient nodes that read it), so the values computed are the same.
        """
        plan = graph.plan(roots, wrt, self.nodes)
        read: set[Variable] = set()  # the values the pass's rules read
        go: set[Function] = set()  # the nodes whose rules read their own outputs
        for f in plan.nodes:
            n = f.need_inputs
            if n is True:
                read.update(f.inputs)
            elif n is not False:
                read.update([x for i, x in enumerate(f.inputs) if i in n])
            if f.need_outputs:
                go.add(f)
        needed = set(read)
        bound = bound or set()
        run: list[Function] = []
        for f in reversed(self.nodes):
            wants = [o for r in f._outputs if (o := r()) is not None]
            if f not in go:
                wants = [o for o in wants if o in needed]
            if wants and not all(id(o) in bound for o in wants):
                run.append(f)
                needed.update(f.inputs)
        run.reverse()
        return plan, _with_frees(run, read)


#: the nodes to compute, in order, each with the values to free once it ran
_Run = list[tuple[Function, list[Variable]]]


def _with_frees(run: list[Function], read: set[Variable]) -> _Run:
    """``run``'s nodes, each with the values it is the last of ``run`` to read that no rule
    reads (``read``) and whose node does not keep them (``need_outputs``).
    """
    last: dict[Variable, int] = {}
    for k, f in enumerate(run):
        for x in f.inputs:
            last[x] = k
    frees: list[list[Variable]] = [[] for _ in run]
    for f in run:
        if not f.need_outputs:
            for r in f._outputs:
                o = r()
                if o is not None and o not in read:
                    j = last.get(o)
                    if j is not None:
                        frees[j].append(o)
    return list(zip(run, frees, strict=True))


class _Handed:
    """F's part of a recorded gradient's plain pass, left to the forward checkpoint of the
    same segment (see :meth:`Checkpoint._vjp_values`), in the pass's scope
    (``graph.PassScope.handoff``, which drops it with the pass): the gradients of the
    frontier, each located by its node's place in the recomputed graph of ``f`` (in
    creation order) and its output index, that graph's shape (each node's type and output
    shapes, to check that the forward checkpoint's recomputation made the same graph), and
    the node's inputs' versions when the gradient recomputed it.
    """

    __slots__ = ("giver", "grads", "nbytes", "places", "shape", "values", "versions")

    def __init__(
        self,
        giver: Checkpoint,
        node: Checkpoint,
        shape: list[tuple[type, int, int]],
        places: list[tuple[int, int]],
        grads: list[Any],
        values: list[tuple[int, int, Any]] | None = None,
    ) -> None:
        self.giver = giver.name
        self.shape, self.places, self.grads = shape, places, grads
        #: the values of ``f``'s graph its rules read, as the gradient's pass computed them
        #: (see :func:`_read_values`), or None
        self.values = values
        #: the bytes it holds (counted in the pass's ``held``)
        self.nbytes = sum(g.nbytes for g in grads) + sum(a.nbytes for *_, a in values or ())
        self.versions = [getattr(x, "_version", 0) for x in node.inputs]

    def check(self, node: Checkpoint) -> None:
        """Raises when an input of ``node`` was set through ``.d`` since the gradient
        recomputed the segment (the frontier's gradients are of the old values).
        """
        for i, (x, v) in enumerate(zip(node.inputs, self.versions, strict=True)):
            if getattr(x, "_version", 0) != v:
                kind = "a leaf" if x.parent is None else f"the output of {x.parent.name}"
                raise RuntimeError(
                    f"{node.name}: its input {i} ({kind}, shape {x.shape}, dtype {x.dtype}) "
                    f"was set through .d during the reverse pass, after {self.giver} "
                    "recomputed the segment on its old value for this node: the gradient "
                    "would mix both values; set values between reverse passes"
                )

    def locate(self, node: Checkpoint, nodes: list[Function]) -> list[Variable]:
        """The frontier's variables in ``node``'s graph of ``f`` (its ``nodes``, in creation
        order); raises when that graph is not the one the gradient recomputed.
        """
        if _shape_of(nodes) != self.shape:
            raise RuntimeError(
                f"{node.name}: recomputed, f made another graph ({len(nodes)} nodes) than "
                f"when {self.giver} recomputed it ({len(self.shape)} nodes) on the same "
                "values: a checkpointed function must compute the same way every time"
            )
        found = []
        for (k, j), g in zip(self.places, self.grads, strict=True):
            v = nodes[k]._outputs[j]()
            if v is None or v._shape != g.shape:  # f made another graph
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
            v = nodes[k]._outputs[j]()
            if v is not None and v._shape == a.shape:
                v._data = a
                bound.add(id(v))
        self.values = None
        return bound


def _shape_of(nodes: Sequence[Function]) -> list[tuple[type, int, int]]:
    """Each node's type and numbers of inputs and outputs (what does not depend on which
    outputs are still alive).
    """
    return [(type(f), len(f.inputs), f.n_outputs) for f in nodes]


def _places(
    fouts: list[Variable], fvars: list[Variable], start: int, linked: int
) -> tuple[list[tuple[type, int, int]], list[tuple[int, int]], list[Function]] | None:
    """The shape of ``f``'s graph (of ``fouts``, made after ``start`` up to ``linked``),
    the place (node, output) of each of ``fvars`` in it and its nodes (in creation order);
    None if one is not in it, or is neither an output of ``f`` nor read by a node of ``f``
    (then only the gradient graph holds it, and ``f``'s graph without it would not).
    """
    nodes = [f for f in graph.nodes_since(fouts, start) if f.seq <= linked]
    index = {id(f): k for k, f in enumerate(nodes)}
    held = {id(x) for f in nodes for x in f.inputs} | {id(o) for o in fouts}
    places = []
    for v in fvars:
        p = v.parent
        k = index.get(id(p))
        if p is None or k is None or id(v) not in held:
            return None
        j = next((j for j, r in enumerate(p._outputs) if r() is v), None)
        if j is None:
            return None
        places.append((k, j))
    return _shape_of(nodes), places, nodes


def _read_values(nodes: list[Function], limit: int) -> list[tuple[int, int, Any]] | None:
    """The values of ``f``'s recomputed graph (its ``nodes``, in creation order) that its
    rules read, each with its place (node, output): all of them, when every one is still
    computed and they take at most ``limit`` bytes; otherwise None.

    Handed to the forward checkpoint of the segment with the frontier's gradients, they
    spare it the recomputation: its pass then reads the very values the gradient's pass
    computed from the same inputs (the version check guards them, :meth:`_Handed.check`).
    """
    index = {id(f): k for k, f in enumerate(nodes)}
    read: dict[int, Variable] = {}
    for f in nodes:
        for i, x in enumerate(f.inputs):
            if f.needs_input(i) and x.parent is not None and id(x.parent) in index:
                read[id(x)] = x
        if f.need_outputs:
            for r in f._outputs:
                o = r()
                if o is not None:
                    read[id(o)] = o
    out = []
    size = 0
    for v in read.values():
        a = v._data
        if a is None:
            return None
        size += getattr(a, "nbytes", 0)
        if size > limit:
            return None
        p = v.parent
        assert p is not None
        j = next(j for j, r in enumerate(p._outputs) if r() is v)
        out.append((index[id(p)], j, a))
    return out


def _frontier(gnodes: Sequence[Function], start: int, linked: int) -> list[Variable]:
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


def _trim(roots: Sequence[Variable], start: int, linked: int) -> None:
    """Frees the values, in the graph of ``roots`` made after ``start`` and up to
    ``linked``, that no rule of that graph reads.
    """
    nodes = [f for f in graph.nodes_since(roots, start) if f.seq <= linked]
    read = {id(x) for f in nodes for i, x in enumerate(f.inputs) if f.needs_input(i)}
    for f in nodes:
        if not f.need_outputs:
            for r in f._outputs:
                o = r()
                if o is not None and id(o) not in read:
                    o._data = None


def _bytes(shape: Sequence[int], dtype: Any) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


def _run_in(f: Callable[..., Any], call: list[Any], mode: int, tapes: Any) -> Any:
    _mode.set(mode)
    _random.restore(tapes)
    return f(*call)


# ---------------------------------------------------------------------- tracing
def _trace(
    node: Checkpoint, xs: list[Variable]
) -> tuple[type | None, list[Spec], list[Any] | None, list[Variable], _Kept | None]:
    """Runs ``f`` once on fresh leaves sharing the arguments' values.

    Returns the container type of its result (None for one Variable), the outputs' specs,
    their values (None in a static graph, where only shapes are known) and the externals:
    the variables ``f``'s graph reached that are not the fresh leaves and were made before
    ``f`` ran, or that outlive its graph (a leaf ``f`` made and dropped, a constant, is
    made again by the next run). The graph is dropped when this returns, or kept without
    its values when it can compute them again (:class:`_Kept`).
    """
    leaves = [x.unlinked() for x in xs]
    start = next(_variable._seq)
    vjp = node.f if isinstance(node.f, _Vjp) else None
    if vjp is not None:
        vjp.traced = []
    try:
        kind, outs = _as_outputs(node.name, node._call_f(leaves))
        traced = vjp.traced if vjp is not None else None
    finally:
        if vjp is not None:
            vjp.traced = None
    specs: list[Spec] = []
    for k, o in enumerate(outs):
        if o.dtype.kind != "f":
            raise TypeError(
                f"{node.name}: output {k} of f has dtype {o.dtype} (shape {o.shape}); a "
                "checkpointed function returns float Variables (compute integer results "
                "outside it)"
            )
        specs.append((o.shape, o.dtype))
    values = None if any(o._data is None for o in outs) else [o._data for o in outs]
    made: list[Function] = []  # f's graph: the nodes the walk goes through
    reached = _reached(outs, leaves, start, made)
    kept = None
    if values is not None and (vjp is None or traced):
        made.sort(key=attrgetter("seq"))
        fouts, linked = traced or ([], -1)
        kept = _Kept.of(leaves, outs, start, xs, fouts, linked, None if vjp else made)
        del fouts
    del outs, leaves, o, made, traced  # they would keep f's graph alive (o: the last output)
    externals = _alive(reached)
    for v in externals:
        if type(v) is BatchedVariable and not any(v is x for x in xs):
            raise NotImplementedError(
                f"{node.name}: inside hd.vmap, f uses a mapped variable it was not given "
                f"(shape {v.shape}, dtype {v.dtype}); pass it to hd.checkpoint as an argument"
            )
    return kind, specs, values, externals, kept


def _as_outputs(name: str, out: Any) -> tuple[type | None, list[Variable]]:
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
        return type(out), list(out)
    raise TypeError(
        f"{name}: f must return a Variable or a tuple/list of Variables, got {type(out).__name__}"
    )


def _reached(
    outs: Sequence[Variable],
    leaves: Sequence[Variable],
    start: int,
    made: list[Function] | None = None,
) -> list[Any]:
    """What the graph of ``outs`` reaches that it did not make from ``leaves``.

    The walk stops at the ``leaves`` (skipped), at other leaves and at variables made by
    nodes older than ``start`` (the enclosing graph). Returns the variables made by old
    nodes (alive: the enclosing graph holds them) and weak references to the leaves (a
    leaf only the segment's graph held dies with it; see :func:`_alive`), in first-seen
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


def _alive(reached: list[Any]) -> list[Variable]:
    out = []
    for r in reached:
        v = r() if isinstance(r, weakref.ref) else r
        if v is not None:
            out.append(v)
    return out


def _check_same_externals(node: Checkpoint, used: Sequence[Variable]) -> None:
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


def _describe(specs: Sequence[tuple[Any, Any]]) -> str:
    return ", ".join(f"{tuple(s)} {d}" for s, d in specs) or "nothing"
