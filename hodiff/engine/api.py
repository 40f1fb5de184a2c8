"""What the rooms above the engine (rules, transforms, training, tools) may use of it.

The engine's classes (:class:`Variable`, :class:`Function`) have public properties and
methods (``v.shape``, ``v.dtype``, ``v.parent``, ``v.need_grad``, ``f.inputs``, ``f.seq``,
``f.n_outputs``, ``f.relinked``, ``f.output_variable``, ``f.needs_input``); this module
lists the rest: what a transform needs of a node's insides, the passes, and the modes.
Each group is one section below. Nothing here is a new mechanism: each name reads or
calls what the engine has, so that the rooms above name no private field of it and the
engine may rearrange its insides behind these names (``tests/test_structure.py`` counts
the private uses left outside the engine, and the count may only shrink).

>>> import numpy as np, hodiff as hd
>>> from hodiff.engine import api
>>> x = hd.Variable.from_array(np.array([1.0, 2.0]), need_grad=True)
>>> y = x * x
>>> [f.name for f in api.topological_order([y])], api.value_of(y)
(['mul2'], array([1., 4.]))
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter
from typing import Any

import numpy as np

from hodiff.engine import function as _function
from hodiff.engine import run as _run
from hodiff.engine import variable as _variable
from hodiff.engine.batching import renew
from hodiff.engine.clock import CLOCK
from hodiff.engine.context import NO_GRAD, RAW, STATE, STATIC, SYMBOLIC, TRUSTED, swap
from hodiff.engine.function import Function
from hodiff.engine.order import nodes_since, topological_order
from hodiff.engine.recorded import Pullback, grad_graph, grad_values, plan, unused_inputs
from hodiff.engine.reverse import PassScope, current_pass
from hodiff.engine.run import forward
from hodiff.engine.variable import Variable

__all__ = [
    "PassScope",
    "Pullback",
    "clock",
    "computed_at",
    "current_pass",
    "define_by_run",
    "drop_values",
    "forward",
    "grad_dtype",
    "grad_graph",
    "grad_of",
    "grad_values",
    "in_modes",
    "inline_ufunc",
    "is_raw",
    "is_recording",
    "is_static",
    "is_symbolic",
    "is_trusted",
    "kept_outputs",
    "link",
    "mark_written",
    "modes",
    "new_variable",
    "no_recording",
    "nodes_since",
    "output_index",
    "output_specs",
    "outputs_of",
    "plan",
    "raw_mode",
    "recording",
    "relink",
    "run",
    "set_batch_hook",
    "set_value",
    "static_mode",
    "symbolic",
    "topological_order",
    "trusted",
    "unused_inputs",
    "value_of",
    "version_of",
]

# ---------------------------------------------------------------------------- variables
# A Variable's value is ``value_of(v)`` (None: not computed, or freed), not ``v.d``, which
# fills an unfilled leaf with zeros and raises for a function's output without a value.

#: ``value_of(v)``: the array ``v`` holds, or None (a C getter: no Python frame)
value_of: Callable[[Variable], Any] = attrgetter("_data")


def set_value(v: Variable, a: Any) -> None:
    """Sets (or with None, drops) the array ``v`` holds: an engine write, as a forward pass
    makes (not a user's ``.d =``: the value's version is not bumped).
    """
    v._data = a


def mark_written(v: Variable, how: str | None = None) -> None:
    """Stamps ``v``'s value as written now, as ``.d =`` does, for a hodiff API that writes
    into its array in place (a solver's step, ``load_parameters``): the nodes that computed
    with the old value are stale, and a reverse pass through them raises (naming ``how``,
    e.g. ``"the parameter 'W' updated in place by Sgd.update()"``; ``.d set`` for None)
    until ``.forward()`` computes them again. One tick of the clock, no copy, no pass over
    the values: a raw write (``v.d[...] = a``, ``np.copyto``) stays unseen, numpy has no
    hook for it.
    """
    t = v._version = CLOCK.wrote()
    if how is not None:
        CLOCK.writers[v] = (t, how)


def grad_of(v: Variable) -> Any:
    """The gradient array ``v`` holds, or None (``v.g`` makes zeros for none)."""
    g = v._grad
    return None if g is _variable.FREED else g


def grad_dtype(v: Variable) -> Any:
    """The dtype of ``v``'s gradient: ``v``'s own for a float, the context's otherwise."""
    return v._grad_dtype()


def version_of(v: Variable) -> int:
    """The clock time of the last user write of ``v``'s value (``.d =``, or a hodiff API's
    in-place write, :func:`mark_written`); 0 for none.
    """
    return getattr(v, "_version", 0)


def new_variable(
    shape: tuple[int, ...],
    dtype: Any,
    cls: type[Variable] = Variable,
    need_grad: bool = False,
) -> Any:
    """A leaf of class ``cls`` (a subclass of Variable, e.g. vmap's per-example view) with
    shape and dtype but no value, made without running ``cls.__init__``.
    """
    v = object.__new__(cls)
    v._data = v._grad = None
    v._shape = tuple(shape)
    v._dtype = np.dtype(dtype)
    v.need_grad = need_grad
    v.parent = None
    return v


# ---------------------------------------------------------------------------- nodes
def outputs_of(f: Function) -> list[Variable | None]:
    """``f``'s output Variables, in order; None for one no longer alive."""
    return [r() for r in f._outputs]


def output_index(f: Function, v: Variable) -> int | None:
    """The index of ``v`` among ``f``'s outputs, or None."""
    for j, r in enumerate(f._outputs):
        if r() is v:
            return j
    return None


def kept_outputs(f: Function) -> Sequence[Any] | None:
    """The output arrays ``f`` keeps for its backward (``need_outputs``), or None."""
    return f._ydata


def output_specs(f: Function) -> list[tuple[tuple[int, ...], Any]]:
    """``[(shape, dtype)]`` of ``f``'s outputs, alive or not."""
    meta = getattr(f, "_out_meta", None)
    out = []
    for i, r in enumerate(f._outputs):
        v = r()
        out.append((v._shape, v._dtype) if v is not None else meta[i])  # type: ignore[index]
    return out


def inline_ufunc(f: Function) -> tuple[Any, bool] | None:
    """``(ufunc, with_val)``: the numpy ufunc ``f`` declares equal to its forward on one
    numpy array (``ufunc(x)``, or ``ufunc(x, f.val)`` with ``with_val``), or None.
    """
    uf = getattr(f, "_fast_forward", None)  # a compiler's own nodes declare none
    return None if uf is None else (uf, bool(f._fast_val))


def computed_at(f: Function) -> int:
    """The clock time of ``f``'s output values: when it was linked or last recomputed."""
    return max(f.seq, f._computed)


def clock() -> int:
    """The next time of the one clock that numbers nodes and writes: a node linked after
    this call has ``seq`` above it (:func:`nodes_since`).
    """
    return next(_variable.ticks)


def drop_values(nodes: Iterable[Function]) -> None:
    """Frees the values of ``nodes``' outputs and what they keep for their backward."""
    for f in nodes:
        f._ydata = None
        for r in f._outputs:
            o = r()
            if o is not None:
                o._data = None


# ---------------------------------------------------------------------------- running forward
def run(nodes: Sequence[Function], frees: Sequence[Sequence[Variable]] | None = None) -> None:
    """Computes ``nodes`` (inputs before consumers) from their inputs' values and stores
    their outputs' values, as a static graph's forward does; ``frees``: per node, the
    variables whose values to drop once it ran (read by no later node and no rule). The
    engine's one forward interpreter (:func:`hodiff.engine.run.run`).
    """
    _run.run(nodes, frees)


# ---------------------------------------------------------------------------- relinking
class _Strong:
    """A strong reference with the interface of a weakref (outputs a rule reads back)."""

    __slots__ = ("v",)

    def __init__(self, v: Variable) -> None:
        self.v = v

    def __call__(self) -> Variable:
        return self.v


def link(f: Function, inputs: Sequence[Variable], outputs: Sequence[Variable]) -> Function:
    """Links ``f`` (a copy when it is linked already) as the node of ``outputs`` (Variables
    made by the caller, e.g. vmap's per-example views) on ``inputs``, as a call of ``f``
    does; outputs that ``f``'s backward reads back (``need_outputs``, several outputs) are
    held strongly. Returns the node.
    """
    need = False
    if f.differentiable:
        for x in inputs:  # a plain loop: a generator costs a frame
            if x.need_grad:
                need = True
                break
    node = f if "seq" not in f.__dict__ else renew(f)
    node.inputs = inputs
    node.seq = next(_variable.ticks)
    keep = f.need_outputs and len(outputs) > 1
    refs: list[Any] = []
    for v in outputs:
        v.need_grad = need
        v.parent = node
        refs.append(_Strong(v) if keep else weakref.ref(v))
    node._outputs = refs
    node._ydata = [None] * len(outputs) if f.need_outputs else None
    if len(outputs) > 1:
        node._out_meta = [(v._shape, v._dtype) for v in outputs]
    return node


def relink(f: Function, inputs: Sequence[Variable]) -> tuple[Variable, ...] | None:
    """``f.relinked(inputs)``: ``f`` linked again to ``inputs`` holding its own input arrays."""
    return f.relinked(inputs)


def set_batch_hook(hook: Callable[..., Any] | None) -> None:
    """Installs the function a call hands its node and inputs to when an input has no value
    (a batched one) or there is no input (``hd.vmap``'s dispatch); None: none.
    """
    _function.BATCH_HOOK = hook


# ---------------------------------------------------------------------------- modes
# The modes are bits of one word of the thread's state (context.State); each scope below
# sets some and restores them on exit (a class, not a generator: a checkpoint enters
# several per node).
def modes() -> int:
    """The current modes, as one word for :func:`in_modes` (e.g. in a copied context)."""
    return STATE.get().modes


def is_raw() -> bool:
    """Whether rules run on bare arrays now (a plain pass)."""
    return bool(STATE.get().modes & RAW)


def is_recording() -> bool:
    """Whether calls record a graph: False inside ``hd.no_grad()`` (raw mode aside)."""
    return not STATE.get().modes & NO_GRAD


def is_static() -> bool:
    """Whether calls link nodes without computing (define-then-run)."""
    return bool(STATE.get().modes & STATIC)


def is_symbolic() -> bool:
    """Whether a compiler records the calls (``hd.jit``): no value exists, so a transform
    that returns arrays records its passes and returns Variables (as inside ``hd.vmap``).
    """
    return bool(STATE.get().modes & SYMBOLIC)


def is_trusted() -> bool:
    """Whether calls skip their argument checks (``hd.grad``'s rules)."""
    return bool(STATE.get().modes & TRUSTED)


class _Modes:
    """Sets the modes to ``(mode & keep) | on`` for the ``with`` block."""

    __slots__ = ("keep", "on", "token")

    def __init__(self, keep: int, on: int) -> None:
        self.keep, self.on = keep, on

    def __enter__(self) -> None:
        self.token = swap("modes", (STATE.get().modes & self.keep) | self.on)

    def __exit__(self, *exc: object) -> None:
        swap("modes", self.token)


_ALL = RAW | STATIC | NO_GRAD | TRUSTED | SYMBOLIC


def raw_mode() -> _Modes:
    """Rules run on bare arrays, recording nothing (a plain pass)."""
    return _Modes(_ALL, RAW)


def recording() -> _Modes:
    """Calls record a graph (raw mode and ``no_grad`` off), e.g. a transform's own graph."""
    return _Modes(_ALL & ~(RAW | NO_GRAD), 0)


def no_recording() -> _Modes:
    """Calls record nothing, as inside ``hd.no_grad()``."""
    return _Modes(_ALL, NO_GRAD)


def trusted() -> _Modes:
    """Calls skip their argument checks (consistent by construction, as ``hd.grad``'s)."""
    return _Modes(_ALL, TRUSTED)


def static_mode() -> _Modes:
    """Calls link nodes without computing them (define-then-run)."""
    return _Modes(_ALL, STATIC)


def symbolic() -> _Modes:
    """Calls link nodes without computing, for a compiler (``hd.jit``): the static mode, and
    :func:`is_symbolic` is True inside, so the transforms record instead of computing.
    """
    return _Modes(_ALL, STATIC | SYMBOLIC)


def define_by_run() -> _Modes:
    """The default modes: calls compute and record, with their argument checks."""
    return _Modes(0, 0)


def in_modes(word: int) -> _Modes:
    """The modes ``word`` (read by :func:`modes`) for the ``with`` block."""
    return _Modes(0, word)
