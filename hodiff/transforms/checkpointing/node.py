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
  (:class:`.kept.Kept`): ``f`` is not called again;
* while ``hd.grad`` records, the gradient it stores is itself a checkpoint: the node of
  ``(args, gys) -> vjp of f`` (:class:`.replay.Vjp`), whose forward recomputes ``f`` and records
  its gradient graph, keeps the results and drops both graphs. Differentiated again, that
  node recomputes them, and so on: every order is checkpointed, with no rule written for it.
  In a plain pass that differentiates both (a gradient penalty), the recorded gradient
  leaves the part of its pass through ``f``'s rules to the forward checkpoint of the same
  segment, which runs ``f``'s rules once on the sum (:func:`.handover.vjp_values`,
  through the pass's ``PassScope.handoff``), and, within the memory the pass has
  freed, the values of ``f`` it recomputed, so that the forward checkpoint does not
  compute them again.

Random functions inside ``f`` draw the same numbers when ``f`` is recomputed: the seeds the
first run's random nodes took from the global generator are recorded on a tape
(:mod:`hodiff.engine.random`) and replayed, without advancing the generator. A static graph draws
anew at every ``.forward()`` and its derivatives replay that forward's draw.

A value the node reads that was set through ``.d`` after it computed (an argument, a
parameter) makes the reverse pass raise, as for every node (the engine's value check); a
recomputation that makes other random calls, other output shapes or uses other variables
than the first run raises ``RuntimeError``.

Inside ``hd.vmap`` the node's batching rule is the checkpoint of the mapped segment, so per
example gradients through a checkpoint are checkpointed too (see :meth:`Checkpoint.batch_rule`).
Likewise its Taylor rule (``hd.jvp``, ``hd.jet``, ``hd.laplacian``) is the checkpoint of the
jet: the segment is recomputed and the jet pushed through it, and while the jet records
(``create_graph=True``) its coefficients are the outputs of a checkpoint of their own
(:class:`.jet.Jet`), so a PINN's recorded Laplacian keeps each segment's outputs and
coefficients only (see :meth:`Checkpoint.jet_rule`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from typing import Any

from hodiff.engine import api
from hodiff.engine import random as _random
from hodiff.engine.function import Flags, Function, Slots
from hodiff.engine.variable import Variable
from hodiff.transforms import taylor as _taylor
from hodiff.transforms.checkpointing.handover import Handed, vjp_values
from hodiff.transforms.checkpointing.jet import Jet, jet_values
from hodiff.transforms.checkpointing.kept import Kept
from hodiff.transforms.checkpointing.replay import (
    Replaying,
    Vjp,
    call_f,
    check_specs,
    replay,
)
from hodiff.transforms.checkpointing.segment import (
    Spec,
    alive,
    as_outputs,
    check_same_externals,
    reached,
    run_needed,
    segment_plan,
)
from hodiff.transforms.checkpointing.tracing import trace
from hodiff.transforms.vectorize import vmap

__all__ = ["Checkpoint", "checkpoint"]


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
        RuntimeError: in a reverse pass, an input was set through ``.d`` or written in
            place by a hodiff API (a solver's ``update()``, ``load_parameters``) after the
            checkpoint computed (the engine's version check), or the recomputation differs
            from the first run (other random calls, output shapes or variables used).

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
    if api.is_raw() or not api.is_recording():  # nothing to keep or recompute
        return f(*args)
    positions = tuple(i for i, a in enumerate(args) if isinstance(a, Variable))
    xs = [args[i] for i in positions]
    statics = tuple(None if isinstance(a, Variable) else a for a in args)
    node = Checkpoint(f=f, statics=statics, positions=positions)
    tape = _random.Tape()
    with _random.recording(tape):
        kind, specs, values, externals, kept = trace(node, xs)
    node.tape = tape
    node.kept = kept
    node._setup(specs, values, len(externals))
    ys = node(*xs, *externals)
    if kind is None:
        return ys
    outs = ys if isinstance(ys, tuple) else (ys,)
    return list(outs) if kind is list else outs


class Checkpoint(Function, register=False):
    """The node of one checkpointed segment (see the module docstring).

    Inputs: the Variable arguments of ``f``, then its externals. Outputs: ``f``'s outputs.
    ``tape`` holds the seeds of the random nodes of the run whose values the outputs hold
    (the first run, or in a static graph the last ``.forward()``); recomputations replay it.
    One rule per transform: ``backward_impl`` (reverse mode, plain and recorded),
    ``batch_rule`` (``hd.vmap``), ``jet_rule`` (Taylor mode); each is a checkpoint again.
    """

    need_inputs = True
    need_outputs = False
    #: complex values pass through: each primitive ``f`` calls checks its own fact
    complex_values = "own"

    def __init__(
        self, *, f: Callable[..., Any], statics: tuple[Any, ...], positions: tuple[int, ...]
    ) -> None:
        self.f = f
        self.statics = statics
        self.positions = positions
        self.tape = _random.Tape()
        self.specs: list[Spec] = []
        self.pending: list[Any] | None = None
        #: f's first graph without its values, when it can compute them again (see Kept)
        self.kept: Kept | None = None
        #: the caller's context variables (parameter scope, array context), for recomputing
        self.context = contextvars.copy_context()

    def _setup(self, specs: list[Spec], values: list[Any] | None, n_externals: int) -> None:
        """Declares the outputs (and the first run's values, taken by the first forward)."""
        self.n_outputs = len(specs)
        self.specs = specs
        self.pending = values
        self.n_externals = n_externals

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"checkpoint({getattr(self.f, '__name__', type(self.f).__name__)})"

    # ------------------------------------------------------------ protocol
    def setup_impl(self, inputs: Sequence[Variable]) -> list[Spec]:
        return list(self.specs)

    def forward_impl(self, inputs: Sequence[Any], outputs: list[Any]) -> None:
        # the first run's values, or f run again on the inputs (a static graph's forward:
        # with new random draws, recorded for the derivatives of this forward)
        pending = self.pending
        if pending is not None:
            self.pending = None
            outputs[:] = pending
            return
        n = len(self.positions)
        self.kept = None  # f runs again: its graph is that run's
        tape = _random.Tape()
        with api.define_by_run(), _random.recording(tape):  # f may call hd.grad
            leaves = [Variable.from_array(a, copy=False) for a in inputs[:n]]
            outs = as_outputs(self.name, call_f(self, leaves))[1]
            check_specs(self, outs)
            values = [api.value_of(o) for o in outs]
        self.tape = tape
        outputs[:] = values

    def backward_impl(self, inputs: Slots, outputs: Slots, prop_down: Flags, accum: Flags) -> None:
        # gx_i = sum_k (d y_k / d x_i)^T gy_k, by the rules of f's graph, recomputed
        wanted = [i for i, p in enumerate(prop_down) if p]
        if api.is_raw():
            self._backward_values(inputs, outputs, wanted, accum)
            return
        n = len(self.positions)
        vjp = Vjp(self, wanted)
        xs, gys = [s.data for s in inputs[:n]], [s.grad for s in outputs]
        if not api.is_recording():  # values only (hd.grad under no_grad): record, unlink
            with api.recording():
                gxs = tuple(g.unlinked() for g in vjp(*[x.unlinked() for x in xs], *gys))
        else:
            gxs = checkpoint(vjp, *xs, *gys)
        if not isinstance(gxs, tuple):
            gxs = (gxs,)
        node = gxs[0].parent
        if isinstance(node, Checkpoint):
            check_same_externals(self, node.inputs[len(node.positions) :])
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
        mapped = vmap(Replaying(self), in_axes=tuple(axes[:n]))
        return checkpoint(mapped, *inputs[:n])

    def jet_rule(self, jp: _taylor.JetPass, ins: list[Any], outs: list[Any]) -> list[Any]:
        """The Taylor rule (:mod:`hodiff.transforms.taylor`): the jet of a checkpoint is the
        checkpoint of the jet (see :mod:`.jet`).

        ``ins``: per input, its coefficients ``[x_1, ..., x_K]`` (each ``(R, *x.shape)``,
        None where zero) or None; returns per output ``[y_1, ..., y_K]`` with
        ``y_k = d^k/dt^k f(x(t))`` at ``t = 0`` (factorial-scaled, as every rule).
        """
        if not jp.record:
            return jet_values(self, jp, ins)
        jet = Jet(self, jp, ins)
        got = checkpoint(jet, *jet.args)
        jet.args = []
        ys = got if isinstance(got, tuple) else (got,)
        made = ys[0].parent
        if isinstance(made, Checkpoint):  # not under no_grad
            check_same_externals(self, made.inputs[len(made.positions) :])
        return jet.coefficients(jp, ys, outs)

    # ------------------------------------------------------------ the plain pass
    def _backward_values(
        self, inputs: Slots, outputs: Slots, wanted: list[int], accum: Flags
    ) -> None:
        """The plain pass: rebuild the segment, a plain pass over it, drop it.

        The segment of a recorded gradient (:class:`Vjp`) is rebuilt with its gradient
        graph linked but not computed, and only the values its rules read are then
        computed (:func:`run_needed`): the gradient's own result is never needed. That
        node's pass may leave the part of it that runs through ``f``'s rules to the forward
        checkpoint of the same segment (:func:`vjp_values`), which then runs it together
        with its own (:class:`Handed`).
        """
        scope = api.current_pass()  # this pass's; the segment's own passes have their own
        handed: Handed | None = scope.handoff.pop(self, None) if scope is not None else None
        if handed is not None:
            handed.check(self)
        n = len(self.positions)
        gys = [s.grad for s in outputs]
        if self.kept is not None:
            xs = [s.data for s in inputs[:n]]
            if isinstance(self.f, Vjp):
                gs = self.kept.vjp_grads(self, scope, xs, wanted, gys)
            else:
                ys = [s.data for s in outputs]
                gs = self.kept.grads(xs, self.inputs, wanted, gys, handed, self, ys)
        else:
            gs = self._rebuilt_values(inputs, scope, handed, wanted, gys)
        for i, g in zip(wanted, gs, strict=True):
            if g is not None:
                inputs[i].store(g, accum[i])

    def _rebuilt_values(
        self,
        inputs: Slots,
        scope: api.PassScope | None,
        handed: Handed | None,
        wanted: list[int],
        gys: list[Any],
    ) -> list[Any]:
        """The plain pass's gradients by ``f`` run again (no kept graph)."""
        n = len(self.positions)
        known = self.inputs
        with api.define_by_run():  # and recording, to rebuild the segment's graph
            leaves = [
                Variable.from_array(s.data, need_grad=x.need_grad, copy=False)
                for s, x in zip(inputs[:n], known[:n], strict=True)
            ]
            start = api.clock()
            wrt = [leaves[i] if i < n else known[i] for i in wanted]
            if isinstance(self.f, Vjp):
                with _random.replaying(self.tape, self.name):
                    outs, linked, fouts = self.f.lazily(leaves)
                check_specs(self, outs)
                run_needed(outs, linked)
                extra = reached(outs, leaves, start)
                gs = vjp_values(self, scope, outs, fouts, wrt, wanted, gys, start, linked)
                del fouts
            else:
                outs = replay(self, leaves)
                roots, seeds = outs, gys
                if handed is not None:  # the frontier of the gradient's pass, with its grads
                    more = handed.locate(self, api.nodes_since(outs, start))
                    roots, seeds = [*outs, *more], [*gys, *handed.grads]
                gs = api.grad_values(roots, wrt, seeds, segment_plan(roots, wrt, start))
                extra = reached(outs, leaves, start)
                del roots
            del outs, leaves, wrt
        check_same_externals(self, alive(extra))
        return gs
